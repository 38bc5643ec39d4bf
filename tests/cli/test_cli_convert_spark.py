"""``woodstar convert DIR``: a directory saved by a Spark ML PipelineModel is detected by
its ``metadata/``, loaded in a local session, converted and saved; the saved model gives
Spark's own answers."""

import numpy as np
import pandas as pd
import pytest

import woodstar
from woodstar.cli import main
from tests.spark.conftest import spark_missing


@pytest.fixture(scope="module")
def spark():
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    import os
    import sys

    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    session = (SparkSession.builder.master("local[1]").appName("woodstar-cli-spark")
               .config("spark.ui.enabled", "false").getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def test_convert_a_saved_pipeline_model(spark, tmp_path, capsys):
    from pyspark.ml import Pipeline
    from pyspark.ml.classification import DecisionTreeClassifier
    from pyspark.ml.feature import StringIndexer, VectorAssembler

    rng = np.random.default_rng(5)
    rows = [(float(a), float(b), str(c), float(a + (c == "q") > 0.2))
            for a, b, c in zip(rng.normal(size=120), rng.normal(size=120),
                               rng.choice(["p", "q", "r"], 120))]
    data = spark.createDataFrame(rows, ["a", "b", "c", "y"])
    pipeline = Pipeline(stages=[
        StringIndexer(inputCol="c", outputCol="ci", handleInvalid="keep"),
        VectorAssembler(inputCols=["a", "b", "ci"], outputCol="features"),
        DecisionTreeClassifier(labelCol="y", maxDepth=4)]).fit(data)
    saved = str(tmp_path / "pipeline")
    pipeline.save(saved)
    out = str(tmp_path / "model.zip")
    assert main(["convert", saved, "--backend", "torch", "--output", out]) == 0
    assert "saved" in capsys.readouterr().out

    loaded = woodstar.load(out)
    X = pd.DataFrame({"a": rng.normal(size=40), "b": rng.normal(size=40),
                      "c": pd.Series(list(rng.choice(["p", "q", "r", "s"], 40)), dtype=object)})
    expected = pipeline.transform(spark.createDataFrame(
        [(float(a), float(b), str(c)) for a, b, c in X.itertuples(index=False)],
        ["a", "b", "c"])).select("prediction", "probability").collect()
    np.testing.assert_array_equal(loaded.predict(X), [r[0] for r in expected])
    np.testing.assert_array_equal(loaded.predict_proba(X), [r[1].toArray() for r in expected])


def test_a_directory_without_spark_metadata_is_not_read_as_spark(tmp_path, capsys):
    (tmp_path / "folder").mkdir()
    assert main(["convert", str(tmp_path / "folder"), "--backend", "torch",
                 "--output", str(tmp_path / "m.zip")]) == 1
    assert "cannot tell the format" in capsys.readouterr().err
