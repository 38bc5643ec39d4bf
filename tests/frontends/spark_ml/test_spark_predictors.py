"""Spark ML predictors (in a PipelineModel after VectorAssembler, and bare) against
Spark's own ``transform`` on fresh rows with NaN, +-inf, unseen strings and values on
the trees' thresholds.

Trees and forests match to the bit. Linear models and GBT margins are held to the
dot-product bound ``2 (n + 1) eps sum |terms|`` (the JVM's vectorised BLAS sums in an
order of its CPU's vector width), their probabilities to what that bound and the
JVM's ``Math.exp`` (an ulp from the C library's) allow; predictions match except
where the margin lies within that bound of the threshold. ``spark_classify`` itself is
checked on Spark's own raw scores: probabilities within 2 ulps, predictions exact.
"""

import numpy as np
import pytest

import woodstar
from woodstar.ir.reference import predict_raw

from ._spark import EPS, frame, spark_outputs, to_spark

COVERS_MODELS = ("PipelineModel", "VectorAssembler", "LogisticRegressionModel", "LinearRegressionModel", "DecisionTreeClassificationModel", "DecisionTreeRegressionModel", "RandomForestClassificationModel", "RandomForestRegressionModel", "GBTClassificationModel", "GBTRegressionModel")
COVERS_OPS = ("spark_classify", "spark_float64")

NUMERIC = ["x0", "x1", "x2", "x3"]
LABELS = ["a", "b", "c", "d"]


@pytest.fixture(scope="module")
def fitted(spark):
    """Every predictor, fitted once on one small frame."""
    from pyspark.ml import PipelineModel
    from pyspark.ml.classification import (DecisionTreeClassifier, GBTClassifier,
                                           LogisticRegression, RandomForestClassifier)
    from pyspark.ml.feature import StringIndexer, VectorAssembler
    from pyspark.ml.regression import (DecisionTreeRegressor, GBTRegressor, LinearRegression,
                                       RandomForestRegressor)

    rng = np.random.default_rng(7)
    train = frame(rng, 300, strings=[("c", LABELS)], scale=[1, 10, 0.1, 3])
    code = train["c"].map({"a": 0, "b": 1, "c": 2, "d": 3}).to_numpy()
    noise = rng.normal(size=len(train))
    train["y"] = ((train.x0 + train.x1 / 10 + (code == 2) + noise) > 0.5).astype(float)
    train["y3"] = np.digitize(train.x0 + 0.5 * noise - (code == 1), [-0.5, 0.5]).astype(float)
    train["yr"] = 2 * train.x0 - train.x3 + code + 0.1 * noise
    data = to_spark(spark, train)

    plain = VectorAssembler(inputCols=NUMERIC, outputCol="features", handleInvalid="keep")
    indexer = StringIndexer(inputCol="c", outputCol="ci", handleInvalid="keep").fit(data)
    with_code = VectorAssembler(inputCols=NUMERIC + ["ci"], outputCol="features",
                                handleInvalid="keep")
    linear_data = plain.transform(data)
    tree_data = with_code.transform(indexer.transform(data))  # "ci" is categorical

    models = {
        "lr_binary": (plain, LogisticRegression(labelCol="y", regParam=0.01), linear_data),
        "lr_multi": (plain, LogisticRegression(labelCol="y3"), linear_data),
        "linear": (plain, LinearRegression(labelCol="yr"), linear_data),
        "dt_cls": (with_code, DecisionTreeClassifier(labelCol="y3", maxDepth=5), tree_data),
        "dt_reg": (with_code, DecisionTreeRegressor(labelCol="yr", maxDepth=5), tree_data),
        "rf_cls": (with_code, RandomForestClassifier(labelCol="y3", numTrees=6, maxDepth=4,
                                                     seed=1), tree_data),
        "rf_reg": (with_code, RandomForestRegressor(labelCol="yr", numTrees=6, maxDepth=4,
                                                    seed=1), tree_data),
        "gbt_cls": (with_code, GBTClassifier(labelCol="y", maxIter=8, maxDepth=3, seed=1),
                    tree_data),
        "gbt_reg": (with_code, GBTRegressor(labelCol="yr", maxIter=8, maxDepth=3, seed=1),
                    tree_data),
    }
    pipelines = {}
    for name, (assembler, estimator, fit_data) in models.items():
        predictor = estimator.fit(fit_data)
        stages = [assembler, predictor] if assembler is plain else [indexer, assembler, predictor]
        pipelines[name] = PipelineModel(stages=stages)
    return pipelines


def _rows(rng, converted, n=150):
    """Fresh rows: NaN, +-inf, unseen and missing labels, and the trees' thresholds."""
    X = frame(rng, n, strings=[("c", LABELS + ["zz", None])], nan=0.05, scale=[1, 10, 0.1, 3])
    special = rng.random((n, len(NUMERIC)))
    values = X[NUMERIC].to_numpy(copy=True)
    values[special < 0.02] = np.inf
    values[(special >= 0.02) & (special < 0.04)] = -np.inf
    trees = converted.ir.graph.nodes_of("trees")
    if trees:
        ens = trees[0].op
        internal = np.flatnonzero((ens.left >= 0) & ~ens.is_categorical & (ens.feature < 4))
        for row in range(0, n, 2):
            node = rng.choice(internal)
            t = ens.threshold[node]
            values[row, ens.feature[node]] = [t, np.nextafter(t, np.inf),
                                              np.nextafter(t, -np.inf)][row % 3]
    X[NUMERIC] = values
    return X[list(converted.ir.schema.names)]  # the columns the pipeline reads


def _features(X, pipeline):
    """The assembled features as Spark builds them (for the bounds)."""
    names = list(pipeline.stages[-2].getInputCols())
    return X[[n for n in names if n in NUMERIC]].to_numpy()


def _dot_bound(features, coef, intercept):
    n = coef.shape[1] + 1
    with np.errstate(invalid="ignore"):
        terms = np.abs(features) @ np.abs(coef).T + np.abs(intercept)
    return 2 * n * EPS * terms


def _gbt_bound(converted):
    ens = converted.ir.graph.nodes_of("trees")[0].op
    return ens, ens.replace(leaf_value=np.abs(ens.leaf_value))


def _check_classifier(got, expected, margin_bound=None, exact=False):
    raw, proba, prediction = got
    if exact:
        np.testing.assert_array_equal(raw, expected["rawPrediction"])
        np.testing.assert_array_equal(proba, expected["probability"])
        np.testing.assert_array_equal(prediction, expected["prediction"])
        return
    spark_raw = expected["rawPrediction"]
    finite = np.isfinite(spark_raw).all(axis=1)
    diff = np.abs(raw - spark_raw)
    assert np.all(diff[finite] <= margin_bound[finite][:, None]), diff[finite].max()
    np.testing.assert_array_equal(np.isnan(raw), np.isnan(spark_raw))
    # sigmoid/softmax: dp <= |d margin| (their slopes are at most 1) + the exp's ulps
    p_bound = 2 * margin_bound[:, None] + 8 * EPS
    p_diff = np.abs(proba - expected["probability"])
    assert np.all(p_diff[finite] <= p_bound[finite]), p_diff[finite].max()
    close = (margin_bound > 0) & (np.abs(spark_raw[:, -1] - spark_raw[:, 0]) <= 4 * margin_bound)
    same = prediction == expected["prediction"]
    assert np.all(same | close), np.flatnonzero(~(same | close))


def _converted(pipeline, route):
    backend, _, cpu_route = route.partition("/")
    return woodstar.convert(pipeline, backend,
                            extra_config={"cpu_route": cpu_route} if cpu_route else None)


def _answers(converted, X):
    return (converted.decision_function(X), converted.predict_proba(X), converted.predict(X))


ROUTES = ["torch", "torch/program"]


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["dt_cls", "rf_cls"])
def test_tree_classifiers_match_spark_exactly(spark, fitted, name, route):
    converted = _converted(fitted[name], route)
    X = _rows(np.random.default_rng(11), converted)
    expected = spark_outputs(fitted[name], spark, X)
    _check_classifier(_answers(converted, X), expected, exact=True)


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["dt_reg", "rf_reg"])
def test_tree_regressors_match_spark_exactly(spark, fitted, name, route):
    converted = _converted(fitted[name], route)
    X = _rows(np.random.default_rng(12), converted)
    expected = spark_outputs(fitted[name], spark, X, ("prediction",))
    np.testing.assert_array_equal(converted.predict(X), expected["prediction"])


def test_tree_categorical_splits_are_read(fitted):
    converted = woodstar.convert(fitted["dt_cls"], "torch")
    ens = converted.ir.graph.nodes_of("trees")[0].op
    assert ens.has_categorical and ens.categorical_rule == "exact"


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["lr_binary", "lr_multi"])
def test_logistic_regression_within_the_dot_bound(spark, fitted, name, route):
    pipeline = fitted[name]
    converted = _converted(pipeline, route)
    X = _rows(np.random.default_rng(13), converted)
    expected = spark_outputs(pipeline, spark, X)
    lr = pipeline.stages[-1]
    coef = lr.coefficientMatrix.toArray()
    bound = _dot_bound(_features(X, pipeline), coef, lr.interceptVector.toArray()).max(axis=1)
    _check_classifier(_answers(converted, X), expected, bound)


@pytest.mark.parametrize("threshold", [0.3, 0.0, 1.0])
def test_logistic_threshold(spark, fitted, threshold):
    pipeline = fitted["lr_binary"].copy()
    pipeline.stages[-1].setThreshold(threshold)
    converted = woodstar.convert(pipeline, "torch")
    X = _rows(np.random.default_rng(14), converted)
    expected = spark_outputs(pipeline, spark, X)
    lr = pipeline.stages[-1]
    bound = _dot_bound(_features(X, pipeline), lr.coefficientMatrix.toArray(),
                       lr.interceptVector.toArray())[:, 0]
    _check_classifier(_answers(converted, X), expected, bound)


@pytest.mark.parametrize("name", ["lr_multi", "rf_cls"])
def test_thresholds(spark, fitted, name):
    pipeline = fitted[name].copy()
    pipeline.stages[-1].setThresholds([0.5, 0.2, 0.3])
    converted = woodstar.convert(pipeline, "torch")
    X = _rows(np.random.default_rng(15), converted)
    expected = spark_outputs(pipeline, spark, X)
    if name == "rf_cls":
        _check_classifier(_answers(converted, X), expected, exact=True)
    else:
        lr = pipeline.stages[-1]
        bound = _dot_bound(_features(X, pipeline), lr.coefficientMatrix.toArray(),
                           lr.interceptVector.toArray()).max(axis=1)
        _check_classifier(_answers(converted, X), expected, bound)


@pytest.mark.parametrize("name", ["lr_binary", "lr_multi", "gbt_cls"])
def test_spark_classify_on_sparks_raw_scores(spark, fitted, name):
    """Spark's own rawPrediction through the op: its probability within 2 ulps (the
    JVM's exp), its prediction exactly."""
    pipeline = fitted[name]
    converted = woodstar.convert(pipeline, "torch")
    X = _rows(np.random.default_rng(16), converted)
    expected = spark_outputs(pipeline, spark, X)
    (node,) = converted.ir.graph.nodes_of("spark_classify")
    (out,) = node.op.reference([expected["rawPrediction"]])
    k = node.op.n_classes
    # p0 = 1 / (1 + exp(.)) and p1 = 1 - p0: an ulp of exp moves both by ~eps
    diff = np.abs(out[:, :k] - expected["probability"])
    np.testing.assert_array_equal(np.isnan(out[:, :k]), np.isnan(expected["probability"]))
    assert np.nanmax(diff) <= 2 * EPS
    np.testing.assert_array_equal(out[:, k], expected["prediction"])


@pytest.mark.parametrize("route", ROUTES)
def test_linear_regression_within_the_dot_bound(spark, fitted, route):
    pipeline = fitted["linear"]
    converted = _converted(pipeline, route)
    X = _rows(np.random.default_rng(17), converted)
    expected = spark_outputs(pipeline, spark, X, ("prediction",))["prediction"]
    lr = pipeline.stages[-1]
    bound = _dot_bound(_features(X, pipeline), lr.coefficients.toArray()[None, :],
                       np.asarray([lr.intercept]))[:, 0]
    got = converted.predict(X)
    finite = np.isfinite(expected)
    assert np.all(np.abs(got - expected)[finite] <= bound[finite])
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))


@pytest.mark.parametrize("route", ROUTES)
@pytest.mark.parametrize("name", ["gbt_cls", "gbt_reg"])
def test_gbt_within_the_dot_bound(spark, fitted, name, route):
    pipeline = fitted[name]
    converted = _converted(pipeline, route)
    X = _rows(np.random.default_rng(18), converted)
    expected = spark_outputs(pipeline, spark, X)
    ens, magnitudes = _gbt_bound(converted)
    encoded = _encoded_features(converted, X)
    n = ens.n_trees + 1
    bound = 2 * n * EPS * predict_raw(magnitudes, encoded).max(axis=1)
    if name == "gbt_reg":
        got = converted.predict(X)
        assert np.all(np.abs(got - expected["prediction"]) <= bound)
    else:
        _check_classifier(_answers(converted, X), expected, bound)


def _encoded_features(converted, X):
    """The features vector the trees read, by the IR's own reference."""
    from woodstar._input import to_feature_matrix

    graph = converted.ir.graph
    values = {"input": to_feature_matrix(X, converted.ir.head, converted.ir.schema, "float64",
                                         converted.ir.input_precision)}
    for node in graph.nodes:
        if node.kind == "trees":
            return values[node.inputs[0]]
        for name, value in zip(node.outputs, node.op.reference([values[v] for v in node.inputs])):
            values[name] = value
    raise AssertionError("no trees")


def test_bare_predictor_reads_the_features_vector(spark, fitted):
    model = fitted["rf_cls"].stages[-1]
    converted = woodstar.convert(model, "torch")
    assert converted.ir.schema.names[:2] == ("features[0]", "features[1]")
    X = _rows(np.random.default_rng(19), woodstar.convert(fitted["rf_cls"], "torch"))
    expected = spark_outputs(fitted["rf_cls"], spark, X)
    assembled = spark_outputs(fitted["rf_cls"].stages[0], spark, X, ("ci",))["ci"]
    values = np.column_stack([X[NUMERIC].to_numpy(), assembled])
    np.testing.assert_array_equal(converted.predict_proba(values), expected["probability"])
    np.testing.assert_array_equal(converted.predict(values), expected["prediction"])


def test_sample_on_compiled_backends(spark, fitted):
    """A forest and a multinomial logistic regression on each compiled backend (a
    sample: the CPU route and the Torch program are tested above for every model).
    Spark's answers are computed once per model: the rows depend only on the IR."""
    backends = [b for b in ("torch.jit", "onnx", "tvm")
                if woodstar.backends.all_backends()[b].is_available()[0]]
    if not backends:
        pytest.skip("no compiled backend is installed")
    for name in ("rf_cls", "lr_multi"):
        pipeline = fitted[name]
        X = expected = bound = None
        for backend in backends:
            converted = woodstar.convert(pipeline, backend)
            if X is None:
                X = _rows(np.random.default_rng(20), converted)
                expected = spark_outputs(pipeline, spark, X)
                if name == "lr_multi":
                    lr = pipeline.stages[-1]
                    bound = _dot_bound(_features(X, pipeline), lr.coefficientMatrix.toArray(),
                                       lr.interceptVector.toArray()).max(axis=1)
            if name == "rf_cls":
                _check_classifier(_answers(converted, X), expected, exact=True)
            else:
                _check_classifier(_answers(converted, X), expected, bound)


def test_nan_in_an_error_assembler_is_refused(spark, fitted):
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import VectorAssembler

    pipeline = fitted["lr_binary"]
    strict = VectorAssembler(inputCols=NUMERIC, outputCol="features", handleInvalid="error")
    converted = woodstar.convert(PipelineModel(stages=[strict, pipeline.stages[-1]]), "torch")
    X = frame(np.random.default_rng(21), 5)
    X.loc[2, "x1"] = np.nan
    with pytest.raises(ValueError, match="x1"):
        converted.predict(X)


def test_refusals(spark, fitted):
    from pyspark.ml import PipelineModel
    from pyspark.ml.feature import VectorAssembler

    skip = VectorAssembler(inputCols=NUMERIC, outputCol="features", handleInvalid="skip")
    with pytest.raises(woodstar.exceptions.MissingConverter, match="drops rows"):
        woodstar.convert(PipelineModel(stages=[skip, fitted["lr_binary"].stages[-1]]), "torch")
    lr = fitted["lr_binary"].stages[-1]
    with pytest.raises(woodstar.exceptions.MissingConverter, match="before the last stage"):
        woodstar.convert(PipelineModel(stages=[lr, lr]), "torch")


def test_pyspark_is_not_imported_by_woodstar():
    import subprocess
    import sys

    code = "import sys, woodstar; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_saved_and_loaded(tmp_path, spark, fitted):
    converted = woodstar.convert(fitted["rf_cls"], "torch")
    converted.save(tmp_path / "model.zip")
    loaded = woodstar.load(tmp_path / "model.zip")
    X = _rows(np.random.default_rng(22), converted)
    np.testing.assert_array_equal(loaded.predict_proba(X), converted.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), converted.predict(X))
