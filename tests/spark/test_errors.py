"""Errors: bad columns, a damaged model file, an unknown method or output are reported
on the driver before any Spark job starts; an error inside a task is Spark's own task
failure carrying woodstar's message."""

import re

import numpy as np
import pandas as pd
import pytest

import woodstar
from woodstar.exceptions import CorruptedFileError


@pytest.fixture(scope="module")
def model():
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(3)
    X = pd.DataFrame(rng.normal(size=(100, 2)), columns=["x", "y"])
    return woodstar.convert(DecisionTreeClassifier(max_depth=3).fit(X, X["x"] > 0), "torch")


@pytest.fixture
def no_jobs(spark):
    """Fails the test if a Spark job ran inside it."""
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    yield
    assert set(tracker.getJobIdsForGroup()) == before, "a Spark job ran"


def _frame(spark, **columns):
    from pyspark.sql import types as T

    fields = [T.StructField(name, kind) for name, (kind, _) in columns.items()]
    rows = list(zip(*[values for _, values in columns.values()]))
    return spark.createDataFrame(rows, T.StructType(fields))


def test_missing_column(spark, model, no_jobs):
    import woodstar.spark as ws
    from pyspark.sql import types as T

    df = _frame(spark, x=(T.DoubleType(), [1.0, 2.0]), z=(T.DoubleType(), [0.0, 1.0]))
    with pytest.raises(ValueError, match=r"lacks column\(s\) \['y'\] that the model needs"):
        ws.score(df, model)


@pytest.mark.parametrize("kind,shown", [("string", "string"), ("decimal", "decimal(10,2)"),
                                        ("date", "date")])
def test_column_of_wrong_type(spark, model, no_jobs, kind, shown):
    import datetime
    import decimal

    import woodstar.spark as ws
    from pyspark.sql import types as T

    bad = {"string": (T.StringType(), ["a", "b"]),
           "decimal": (T.DecimalType(10, 2), [decimal.Decimal("1.5")] * 2),
           "date": (T.DateType(), [datetime.date(2024, 1, 1)] * 2)}[kind]
    df = _frame(spark, x=(T.DoubleType(), [1.0, 2.0]), y=bad)
    with pytest.raises(ValueError, match=rf"column\(s\) 'y' \({re.escape(shown)}\) are not .cast them"):
        ws.score(df, model)


def test_damaged_model_file(spark, model, tmp_path, no_jobs):
    import woodstar.spark as ws

    path = tmp_path / "model.zip"
    model.save(str(path))
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptedFileError, match=rf"'{path}' is not a valid woodstar model file"):
        ws.predict_udf(str(path))
    df = spark.createDataFrame(pd.DataFrame({"x": [1.0], "y": [2.0]}))
    with pytest.raises(CorruptedFileError, match="not a valid woodstar model file"):
        ws.score(df, str(path))


def test_unknown_method_output_and_threads(spark, model, no_jobs):
    import woodstar.spark as ws

    with pytest.raises(ValueError, match=r"has no method 'transform'; available: predict, "
                                         r"predict_proba"):
        ws.predict_udf(model, method="transform")
    with pytest.raises(ValueError, match=r"output must be one of array, columns, label; got 'rows'"):
        ws.predict_udf(model, output="rows")
    with pytest.raises(ValueError, match="n_threads must be a positive integer; got 0"):
        ws.predict_udf(model, n_threads=0)
    with pytest.raises(TypeError, match="takes a converted model or the path"):
        ws.predict_udf(object())


def test_label_needs_one_value_per_row(spark, no_jobs):
    from sklearn.ensemble import RandomForestRegressor

    import woodstar.spark as ws

    X = np.random.default_rng(0).normal(size=(50, 2))
    two_targets = woodstar.convert(RandomForestRegressor(n_estimators=2).fit(X, X), "torch")
    with pytest.raises(ValueError, match="output='label' needs one value per row; predict gives 2"):
        ws.predict_udf(two_targets, method="predict", output="label")


def test_error_inside_a_task_is_a_spark_failure_with_woodstars_message(spark, model):
    """scikit-learn's trees refuse infinity; woodstar raises the same ValueError in the
    task, and Spark's failure carries it."""
    import woodstar.spark as ws

    df = spark.createDataFrame(pd.DataFrame({"x": [1.0, np.inf], "y": [0.0, 1.0]}))
    with pytest.raises(Exception, match="(?s)ValueError.*infinity") as caught:
        ws.score(df, model).collect()
    assert type(caught.value).__module__.startswith(("pyspark", "py4j"))
