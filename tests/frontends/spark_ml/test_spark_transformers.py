"""Spark ML transformers against Spark's own ``transform``, to the bit: a pipeline of
transformers converts to a ``transform`` that gives the last stage's output, which is
compared with Spark's column on fresh rows with NaN, +-inf, -0.0, values on the
splits, unseen and missing labels; and the handleInvalid refusals and edge checks."""

import numpy as np
import pandas as pd
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._spark import frame, to_spark

COVERS_MODELS = ("StandardScalerModel", "MinMaxScalerModel", "MaxAbsScalerModel", "ImputerModel", "StringIndexerModel", "OneHotEncoderModel", "Bucketizer")
COVERS_OPS = ("spark_bucketize",)

NUMERIC = ["x0", "x1", "x2", "x3"]
LABELS = ["a", "b", "b", "c", "c", "c", "d"]  # unequal counts: frequency order matters
ROUTES = ["torch", "torch/program"]


def _convert(model, route="torch"):
    backend, _, cpu_route = route.partition("/")
    return woodstar.convert(model, backend,
                            extra_config={"cpu_route": cpu_route} if cpu_route else None)


def _spark_column(spark, model, X, column):
    rows = model.transform(to_spark(spark, X)).select(column).collect()
    values = [r[0] for r in rows]
    if hasattr(values[0], "toArray"):
        return np.asarray([v.toArray() for v in values])
    return np.asarray(values, dtype=np.float64).reshape(-1, 1)


def _same(got, expected):
    """Bit for bit, NaN in the same places, -0.0 and 0.0 told apart."""
    got, expected = np.asarray(got, np.float64), np.asarray(expected, np.float64)
    assert got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


@pytest.fixture(scope="module")
def train(spark):
    rng = np.random.default_rng(3)
    X = frame(rng, 200, strings=[("s", LABELS), ("t", ["p", "q", "r"])],
              scale=[1, 100, 0.01, 1])
    X["x3"] = 2.5  # a constant column: MinMaxScaler's special case, zero std and maxAbs
    X["x3"] = X["x3"].astype(float)
    return X, to_spark(spark, X)


def _fresh(seed, n=120, nan=0.1):
    rng = np.random.default_rng(seed)
    X = frame(rng, n, strings=[("s", LABELS + ["zz"]), ("t", ["p", "q", "r", None])],
              nan=nan, scale=[1, 100, 0.01, 1])
    values = X[NUMERIC].to_numpy(copy=True)
    special = rng.random(values.shape)
    values[special < 0.03] = np.inf
    values[(special >= 0.03) & (special < 0.06)] = -np.inf
    values[(special >= 0.06) & (special < 0.09)] = -0.0
    values[(special >= 0.09) & (special < 0.12)] = 0.0
    X[NUMERIC] = values
    return X


@pytest.fixture(scope="module")
def scalers(spark, train):
    from pyspark.ml.feature import MaxAbsScaler, MinMaxScaler, StandardScaler, VectorAssembler

    _, data = train
    assembler = VectorAssembler(inputCols=NUMERIC, outputCol="v", handleInvalid="keep")
    assembled = assembler.transform(data)
    fitted = {
        "standard": StandardScaler(inputCol="v", outputCol="out", withMean=True).fit(assembled),
        "minmax": MinMaxScaler(inputCol="v", outputCol="out", min=-1.0, max=3.0).fit(assembled),
        "maxabs": MaxAbsScaler(inputCol="v", outputCol="out").fit(assembled),
    }
    return assembler, fitted


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("variant", ["standard", "standard_mean_only", "standard_std_only",
                                     "minmax", "maxabs"])
def test_scalers(spark, scalers, variant, route):
    from pyspark.ml import PipelineModel

    assembler, fitted = scalers
    scaler = fitted[variant.split("_")[0]]
    if variant == "standard_mean_only":
        scaler = scaler.copy({scaler.withStd: False})
    elif variant == "standard_std_only":
        scaler = scaler.copy({scaler.withMean: False})
    pipeline = PipelineModel(stages=[assembler, scaler])
    converted = _convert(pipeline, route)
    X = _fresh(31)[NUMERIC]
    _same(converted.transform(X), _spark_column(spark, pipeline, X, "out"))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("strategy,missing", [("mean", np.nan), ("median", np.nan),
                                              ("mode", 0.0)])
def test_imputer(spark, train, strategy, missing, route):
    from pyspark.ml.feature import Imputer

    X, _ = train
    X = X.copy()
    X.loc[::7, "x0"] = missing
    X.loc[::5, "x1"] = np.round(X.loc[::5, "x1"])  # repeated values: a mode to find
    model = Imputer(inputCols=["x0", "x1"], outputCols=["i0", "i1"], strategy=strategy,
                    missingValue=missing).fit(to_spark(spark, X))
    converted = _convert(model, route)
    fresh = _fresh(32)[["x0", "x1"]]
    fresh.loc[::4, "x1"] = missing
    expected = np.column_stack([_spark_column(spark, model, fresh, c) for c in ("i0", "i1")])
    _same(converted.transform(fresh), expected)


@pytest.fixture(scope="module")
def indexers(spark, train):
    from pyspark.ml.feature import StringIndexer

    _, data = train
    return {order: StringIndexer(inputCols=["s", "t"], outputCols=["si", "ti"],
                                 stringOrderType=order).fit(data)
            for order in ("frequencyDesc", "alphabetAsc")}


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("order", ["frequencyDesc", "alphabetAsc"])
def test_string_indexer_keep(spark, indexers, order, route):
    model = indexers[order].copy().setHandleInvalid("keep")
    converted = _convert(model, route)
    X = _fresh(33)[["s", "t"]]
    expected = np.column_stack([_spark_column(spark, model, X, c) for c in ("si", "ti")])
    _same(converted.transform(X), expected)


def test_string_indexer_error_refuses_unseen_and_missing(spark, indexers):
    model = indexers["frequencyDesc"].copy().setHandleInvalid("error")
    converted = _convert(model)
    X = _fresh(34)[["s", "t"]]
    seen = X[X.s.isin(LABELS) & X.t.isin(["p", "q", "r"])]
    expected = np.column_stack([_spark_column(spark, model, seen, c) for c in ("si", "ti")])
    _same(converted.transform(seen), expected)
    for column, bad in (("s", "zz"), ("t", None)):
        rows = seen.head(3).copy()
        rows.loc[rows.index[1], column] = bad
        with pytest.raises(ValueError, match=column):
            converted.transform(rows)
    with pytest.raises(MissingConverter, match="drops rows"):
        _convert(indexers["frequencyDesc"].copy().setHandleInvalid("skip"))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("drop_last", [True, False])
@pytest.mark.parametrize("handle", ["keep", "error"])
def test_one_hot_after_indexer(spark, train, indexers, drop_last, handle, route):
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import OneHotEncoder, VectorAssembler

    _, data = train
    indexer = indexers["frequencyDesc"].copy().setHandleInvalid("keep")
    encoder = OneHotEncoder(inputCols=["si", "ti"], outputCols=["so", "to"],
                            dropLast=drop_last, handleInvalid=handle)
    # fitted on the known labels only, so the "keep" index of an unseen label is invalid
    model = encoder.fit(indexer.transform(data))
    assembler = VectorAssembler(inputCols=["so", "x0", "to"], outputCol="out",
                                handleInvalid="keep")
    pipeline = PipelineModel(stages=[indexer, model, assembler])
    X = _fresh(35)[["s", "t", "x0"]]
    if handle == "error":
        X = X[X.s.isin(LABELS) & X.t.isin(["p", "q", "r"])]
    converted = _convert(pipeline, route)
    _same(converted.transform(X), _spark_column(spark, pipeline, X, "out"))


def test_one_hot_on_an_input_column(spark):
    from pyspark.ml.feature import OneHotEncoder

    data = to_spark(spark, pd.DataFrame({"k": [0.0, 1.0, 2.0, 1.0]}))
    model = OneHotEncoder(inputCols=["k"], outputCols=["o"]).fit(data)
    converted = _convert(model)
    X = pd.DataFrame({"k": [2.0, 0.0, 1.0]})
    _same(converted.transform(X), _spark_column(spark, model, X, "o"))
    with pytest.raises(ValueError, match="k"):
        converted.transform(pd.DataFrame({"k": [5.0]}))
    with pytest.raises(MissingConverter, match="truncates"):
        _convert(model.copy().setHandleInvalid("keep"))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("handle", ["keep", "error"])
def test_bucketizer(spark, handle, route):
    from pyspark.ml.feature import Bucketizer

    splits = [[-np.inf, -1.0, 0.0, 0.5, np.inf], [-np.inf, -0.0, 2.0, np.inf]]
    multi = Bucketizer(splitsArray=splits, inputCols=["x0", "x1"], outputCols=["b0", "b1"],
                       handleInvalid=handle)
    single = Bucketizer(splits=splits[0], inputCol="x0", outputCol="b0", handleInvalid=handle)
    X = _fresh(36, nan=0.1 if handle == "keep" else 0.0)[["x0", "x1"]]
    values = X.to_numpy(copy=True)
    values[::5, 0] = np.asarray([-1.0, 0.0, -0.0, 0.5, np.nextafter(0.5, 1)] * 100)[:len(values[::5])]
    values[::3, 1] = np.asarray([-0.0, 0.0, 2.0, np.inf] * 100)[:len(values[::3])]
    if handle == "error":
        values[np.isnan(values)] = 1.0
    X = pd.DataFrame(values, columns=["x0", "x1"])
    for model, outputs in ((multi, ("b0", "b1")), (single, ("b0",))):
        converted = _convert(model, route)
        expected = np.column_stack([_spark_column(spark, model, X, c) for c in outputs])
        _same(converted.transform(X[list(converted.ir.schema.names)]), expected)
    if handle == "error":
        with pytest.raises(ValueError, match="x0"):
            _convert(single).transform(pd.DataFrame({"x0": [np.nan]}))


def test_bucketizer_refusals(spark):
    from pyspark.ml.feature import Bucketizer

    finite = Bucketizer(splits=[0.0, 1.0, 2.0], inputCol="x0", outputCol="b")
    with pytest.raises(MissingConverter, match="outer splits"):
        _convert(finite)
    skip = Bucketizer(splits=[-np.inf, 1.0, np.inf], inputCol="x0", outputCol="b",
                      handleInvalid="skip")
    with pytest.raises(MissingConverter, match="drops rows"):
        _convert(skip)


def test_full_pipeline_on_compiled_backends(spark, train, indexers):
    """Imputer, StringIndexer, OneHotEncoder, Bucketizer, VectorAssembler and a scaler
    in one pipeline, on the compiled backends."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import Bucketizer, OneHotEncoder, StandardScaler, VectorAssembler

    _, data = train
    indexer = indexers["alphabetAsc"].copy().setHandleInvalid("keep")
    encoder = OneHotEncoder(inputCols=["si"], outputCols=["so"], handleInvalid="keep").fit(
        indexer.transform(data))
    bucketizer = Bucketizer(splits=[-np.inf, 0.0, 1.0, np.inf], inputCol="x2", outputCol="b",
                            handleInvalid="keep")
    assembler = VectorAssembler(inputCols=["x0", "x1", "so", "b", "ti"], outputCol="v",
                                handleInvalid="keep")
    scaler = StandardScaler(inputCol="v", outputCol="out").fit(
        assembler.transform(bucketizer.transform(encoder.transform(indexer.transform(data)))))
    pipeline = PipelineModel(stages=[indexer, encoder, bucketizer, assembler, scaler])
    fresh = _fresh(37)
    for backend in ("torch.jit", "onnx", "tvm"):
        ok, reason = woodstar.backends.all_backends()[backend].is_available()
        if not ok:
            continue
        converted = woodstar.convert(pipeline, backend)
        rows = fresh[list(converted.ir.schema.names)]
        _same(converted.transform(rows), _spark_column(spark, pipeline, rows, "out"))


def test_a_scaler_needs_the_assembled_vector(scalers):
    with pytest.raises(MissingConverter, match="VectorAssembler"):
        _convert(scalers[1]["standard"])


@pytest.mark.parametrize("route", ROUTES)
def test_float32_input_is_widened_as_spark_widens_it(spark, scalers, route):
    """Spark computes every stage in double: float32 rows give the answers of their
    float64 values, not float32 arithmetic."""
    from pyspark.ml import PipelineModel

    assembler, fitted = scalers
    pipeline = PipelineModel(stages=[assembler, fitted["standard"]])
    X = _fresh(38)[NUMERIC].astype(np.float32)
    expected = _spark_column(spark, pipeline, X.astype(np.float64), "out")
    converted = _convert(pipeline, route)
    _same(converted.transform(X), expected)
    _same(converted.transform(X.to_numpy()), expected)


def test_spark_ops_save_and_load_without_spark():
    """The ops' saved form gives the same op (no Spark needed)."""
    from woodstar.ir.families.spark_ops import SparkBucketize, SparkClassify, SparkFloat64

    X = np.asarray([[-0.0, 0.0], [0.0, np.nan], [np.inf, -np.inf], [0.5, 2.0]])
    ops = [SparkBucketize(n_features=2, splits=(np.asarray([-np.inf, 0.0, 1.0, np.inf]),
                                                np.asarray([-np.inf, 2.0, np.inf])),
                          keep_nan=(True, False)),
           SparkFloat64(n_features=2),
           SparkClassify(n_classes=2, probability="softmax", prediction="thresholds",
                         thresholds=(0.4, 0.6))]
    for op in ops:
        meta, arrays = op.validate().to_saved()
        again = type(op).from_saved(meta, arrays).validate()
        np.testing.assert_array_equal(again.reference([X])[0], op.reference([X])[0])
    np.testing.assert_array_equal(ops[0].reference([X])[0],
                                  [[0, 0], [1, np.nan], [2, 0], [1, 1]])
