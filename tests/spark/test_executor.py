"""The executor side: one load per Python process and model, reused across batches
and tasks (checked inside a real local Spark session through the load counter), the
digest check, and scores that do not depend on how Spark cuts batches."""

import hashlib

import numpy as np
import pandas as pd
import pytest

import woodstar
from woodstar._pickling import saved_bytes
from woodstar.exceptions import CorruptedFileError
from woodstar.spark import _executor


@pytest.fixture
def pipeline_model(rng):
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = pd.DataFrame(rng.normal(size=(200, 3)), columns=["a", "b", "c"])
    y = (X["a"] + X["b"] > 0).astype(int) + (X["c"] > 1)
    return woodstar.convert(make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y),
                            "torch"), X


def test_cache_loads_once_and_checks_the_digest(pipeline_model):
    model, X = pipeline_model
    _executor.clear()
    data = saved_bytes(model)
    digest = hashlib.sha256(data).hexdigest()
    fetched = []

    def fetch():
        fetched.append(1)
        return data

    first = _executor.cached_model(digest, fetch)
    for _ in range(5):
        assert _executor.cached_model(digest, fetch) is first
    assert len(fetched) == 1 and _executor.stats()["models"][digest]["loads"] == 1
    threaded = _executor.cached_model(digest, fetch, n_threads=1)  # another setting: its own
    assert threaded is not first and threaded.options.n_threads == 1
    with pytest.raises(CorruptedFileError, match="do not match the driver's"):
        _executor.cached_model("0" * 64, fetch)
    _executor.clear()


def test_single_row_batches_score_as_batches_do(pipeline_model):
    """NumPy's one-row matrix product can differ in the last bit: a lone row in a
    batch still gets the score it gets inside a larger batch."""
    model, X = pipeline_model
    whole = _executor.score_batch(model, [X[c] for c in X.columns], "predict_proba", "columns",
                                  ["p0", "p1", "p2"])
    rows = pd.concat([_executor.score_batch(model, [X[c].iloc[i:i + 1] for c in X.columns],
                                            "predict_proba", "columns", ["p0", "p1", "p2"])
                      for i in range(len(X))], ignore_index=True)
    np.testing.assert_array_equal(rows.to_numpy(), whole.to_numpy())
    np.testing.assert_array_equal(whole.to_numpy(), model.predict_proba(X))


def test_one_load_per_worker_process_across_batches(spark, pipeline_model):
    """Many partitions and 5-row Arrow batches: every batch, in whichever Python
    worker ran it, finds its process loaded the model exactly once."""
    from pyspark.sql import functions as F
    from pyspark.sql.functions import pandas_udf

    import woodstar.spark as ws

    model, X = pipeline_model
    udf = ws.predict_udf(model, method="predict_proba", output="array")
    digest, score = udf.woodstar_digest, udf.func

    @pandas_udf("array<double>")
    def score_and_count(a: pd.Series, b: pd.Series, c: pd.Series) -> pd.Series:
        scores = score(a, b, c)
        counts = _executor.stats()
        mine = counts["models"][digest]
        return pd.Series([[*s, counts["pid"], mine["loads"], mine["batches"]] for s in scores])

    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = spark.conf.get(key)
    spark.conf.set(key, "5")
    try:
        df = spark.createDataFrame(X.assign(id=np.arange(len(X)))).repartition(8)
        out = df.select("id", "a", "b", "c", score_and_count("a", "b", "c").alias("r")).toPandas()
    finally:
        spark.conf.set(key, previous)
    values = np.stack(out["r"].to_numpy())
    pids, loads, batches = values[:, 3], values[:, 4], values[:, 5]
    assert len(out) == 200 and (loads == 1).all()
    assert len(set(pids)) <= 2  # local[2]: at most two Python workers, reused
    per_process = [batches[pids == pid].max() for pid in set(pids)]
    assert min(per_process) >= 5 and sum(per_process) >= 40  # 40+ batches, one load each process
    np.testing.assert_array_equal(values[:, :3], model.predict_proba(out[["a", "b", "c"]]))
