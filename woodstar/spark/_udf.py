"""The driver side: ``predict_udf`` and ``score``.

The model is written once in woodstar's saved format, checked on the driver (the
integrity check, the method, the output's shape and the columns' types all fail here,
before any task runs), broadcast once as bytes, and loaded once per executor Python
process (``_executor.cached_model``).
"""

import hashlib
import os
import typing

import numpy as np

from . import _executor

__all__ = ["predict_udf", "score", "OUTPUTS", "METHODS"]

OUTPUTS = ("array", "columns", "label")
METHODS = ("predict", "predict_proba", "decision_function", "score_samples", "transform")
NUMERIC_TYPES = ("ByteType", "ShortType", "IntegerType", "LongType", "FloatType", "DoubleType",
                 "BooleanType")


def _pyspark():
    try:
        import pyspark  # noqa: F401
    except ImportError:
        raise ImportError('woodstar.spark needs pyspark: pip install "woodstar[spark]"') from None


def _session(spark):
    from pyspark.sql import SparkSession

    spark = spark or SparkSession.getActiveSession()
    if spark is None:
        raise ValueError("woodstar.spark needs an active SparkSession: start one "
                         "(SparkSession.builder.getOrCreate()) or pass spark=")
    return spark


def _model_bytes(converted_or_path):
    """(saved bytes, a CPU container read back from them): a file that fails its
    integrity check raises CorruptedFileError here, on the driver."""
    from .._pickling import from_saved_bytes, saved_bytes
    from ..container import ConvertedModel

    if isinstance(converted_or_path, ConvertedModel):
        data = saved_bytes(converted_or_path)
        return data, from_saved_bytes(data, device="cpu")
    if isinstance(converted_or_path, (str, os.PathLike)):
        with open(converted_or_path, "rb") as f:
            data = f.read()
        return data, _load_named(data, converted_or_path)
    raise TypeError(f"predict_udf takes a converted model or the path of a saved one; got "
                    f"{type(converted_or_path).__name__}")


def _load_named(data, path):
    """Load ``data`` (read from ``path``); its errors name the path."""
    import io

    from .. import load  # woodstar.load
    from ..exceptions import CorruptedFileError

    try:
        return load(io.BytesIO(data), device="cpu")
    except CorruptedFileError as error:
        raise CorruptedFileError(str(error).replace("the file", repr(os.fspath(path)), 1)) from None


def _field_names(container, method, width):
    if width == 1:
        return [method]
    classes = getattr(container, "classes_", None)
    if method == "predict_proba" and isinstance(classes, np.ndarray) and len(classes) == width:
        return [f"proba_{c}" for c in classes]
    return [f"{method}_{i}" for i in range(width)]


def _spark_type(dtype):
    from pyspark.sql import types as T

    if dtype.kind == "f":
        return T.DoubleType()
    if dtype.kind in "iu":
        return T.LongType()
    if dtype.kind == "b":
        return T.BooleanType()
    return T.StringType()


class _Output(typing.NamedTuple):
    method: str  # the container's method each batch calls
    kind: str  # "array", "columns" or "label"
    field_names: list
    return_type: object  # a pyspark DataType


def _output(container, method, output):
    """What the UDF returns, found by calling ``method`` on one row of zeros."""
    from pyspark.sql import types as T

    if output not in OUTPUTS:
        raise ValueError(f"output must be one of {', '.join(OUTPUTS)}; got {output!r}")
    available = [m for m in METHODS if hasattr(container, m)]
    if method not in available:
        raise ValueError(f"{type(container).__name__} has no method {method!r}; "
                         f"available: {', '.join(available)}")
    if output == "label" and method == "predict_proba":
        method = "predict"  # the label predict_proba leads to, as the model decides it
    probe = getattr(container, method)(np.zeros((1, container.n_features_in_)))
    if isinstance(probe, list):
        probe = np.hstack(probe)
    probe = np.asarray(probe)
    width = int(np.prod(probe.shape[1:], dtype=np.int64))
    element = _spark_type(probe.dtype)
    if output == "label":
        if probe.ndim != 1:
            raise ValueError(f"output='label' needs one value per row; {method} gives {width} "
                             f"(use output='array' or 'columns')")
        return _Output(method, "label", [method], element)
    names = _field_names(container, method, width)
    if output == "columns":
        return _Output(method, "columns", names,
                       T.StructType([T.StructField(n, element) for n in names]))
    return _Output(method, "array", names, T.ArrayType(element))


def _task_threads(spark, n_threads):
    if n_threads is not None:
        if not isinstance(n_threads, int) or n_threads < 1:
            raise ValueError(f"n_threads must be a positive integer; got {n_threads!r}")
        return n_threads
    try:
        value = spark.sparkContext.getConf().get("spark.task.cpus", "1")
    except Exception:  # noqa: BLE001  (Spark Connect has no SparkContext)
        value = spark.conf.get("spark.task.cpus", "1")
    return int(value)


class _Broadcast:
    """Gives the model's bytes on an executor: one broadcast, fetched once per process."""

    def __init__(self, spark, data):
        self.variable = spark.sparkContext.broadcast(data)

    def __call__(self):
        return self.variable.value


class _Inline:
    """Spark Connect has no broadcast variables: the bytes travel inside the UDF."""

    def __init__(self, data):
        self.data = data

    def __call__(self):
        return self.data


def _ship(spark, data):
    try:
        spark.sparkContext  # noqa: B018
    except Exception:  # noqa: BLE001
        return _Inline(data)
    return _Broadcast(spark, data)


def _make_udf(spark, data, container, method, output, n_threads, device):
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    spec = _output(container, method, output)
    threads = _task_threads(spark, n_threads)
    digest = hashlib.sha256(data).hexdigest()
    fetch = _ship(spark, data)
    device = str(device)
    call, kind, field_names = spec.method, spec.kind, spec.field_names

    def woodstar_score(*columns):
        model = _executor.cached_model(digest, fetch, device, threads)
        return _executor.score_batch(model, columns, call, kind, field_names, digest)

    woodstar_score.__annotations__ = {
        "columns": typing.Union[pd.Series, pd.DataFrame],
        "return": pd.DataFrame if kind == "columns" else pd.Series}
    udf = pandas_udf(woodstar_score, returnType=spec.return_type)
    udf.woodstar_digest = digest
    return udf


def predict_udf(converted_or_path, method="predict_proba", output="array", n_threads=None,
                device="cpu", spark=None):
    """A Spark pandas UDF that scores its columns with a woodstar model.

    ``converted_or_path``: a converted model or the path of one saved with ``save``.
    Call the UDF with the feature columns in the model's order (``udf(*cols)``), or with
    one struct of them (``udf(F.struct(*cols))``), matched by name when the model has
    ``feature_names_in_``. ``output``: "array" (an array per row), "columns" (a struct,
    one field per output: ``proba_<class>``, ``<method>_<i>``) or "label" (one value per
    row; with ``method="predict_proba"`` it is ``predict``'s label). ``n_threads``:
    threads per task (default ``spark.task.cpus``). ``device``: where executors run it
    ("cuda" on executors with CUDA).
    """
    _pyspark()
    spark = _session(spark)
    data, container = _model_bytes(converted_or_path)
    return _make_udf(spark, data, container, method, output, n_threads, device)


def _feature_columns(df, container, features):
    """The DataFrame's columns to score, in the model's order; a missing column or one
    of a non-numeric type is refused here, on the driver."""
    names = getattr(container, "feature_names_in_", None)
    if features is None:
        if names is not None:
            features = [str(n) for n in names]
        elif len(df.columns) == container.n_features_in_:
            features = list(df.columns)
        else:
            raise ValueError(
                f"the model has no feature names and takes {container.n_features_in_} "
                f"columns; the DataFrame has {len(df.columns)}: pass features=[...] in order")
    features = list(features)
    if len(features) != container.n_features_in_:
        raise ValueError(f"the model takes {container.n_features_in_} features; got "
                         f"{len(features)} columns: {features}")
    types = {field.name: field.dataType for field in df.schema.fields}
    missing = [f for f in features if f not in types]
    if missing:
        raise ValueError(f"the DataFrame lacks column(s) {missing} that the model needs; "
                         f"it has {list(types)}")
    bad = [f"{f!r} ({types[f].simpleString()})" for f in features
           if type(types[f]).__name__ not in NUMERIC_TYPES]
    if bad:
        raise ValueError(f"woodstar scores numeric and boolean columns; column(s) "
                         f"{', '.join(bad)} are not (cast them to double first)")
    return features


def score(df, model, method="predict_proba", output_col="prediction", output="array",
          features=None, n_threads=None, device="cpu"):
    """``df`` with a column ``output_col`` of ``model``'s ``method`` for each row.
    ``model``: a converted model or a saved model's path. ``features``: the columns to
    score, in the model's order (default: the model's ``feature_names_in_``, else every
    column of ``df``). Other arguments as in :func:`predict_udf`."""
    from pyspark.sql import functions as F

    _pyspark()
    data, container = _model_bytes(model)
    columns = _feature_columns(df, container, features)
    udf = _make_udf(df.sparkSession, data, container, method, output, n_threads, device)
    quoted = ["`" + c.replace("`", "``") + "`" for c in columns]
    return df.withColumn(output_col, udf(*[F.col(c) for c in quoted]))
