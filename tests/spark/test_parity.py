"""The Spark UDF gives what the same converted model gives in-process on the same
rows, bit for bit: every method, every output form, a forest, a linear pipeline and a
LightGBM model, with NaN and nulls, over several partitions, with and without a limit
on the rows per Arrow batch."""

import numpy as np
import pandas as pd
import pytest

import woodstar

FEATURES = ["f0", "f1", "f2", "count"]
N_ROWS = 240


def _data(rng):
    X = pd.DataFrame(rng.normal(size=(N_ROWS, 3)), columns=FEATURES[:3])
    X["count"] = rng.integers(0, 20, N_ROWS).astype(np.int64)
    X.loc[rng.random(N_ROWS) < 0.1, "f1"] = np.nan  # NaN: a value Spark keeps as NaN
    y = (np.nan_to_num(X["f0"]) + 0.1 * X["count"] + 0.3 * rng.normal(size=N_ROWS) > 1).astype(int)
    y[X["f2"] > 1.2] = 2
    return X, y


def _forest(X, y):
    from sklearn.ensemble import RandomForestClassifier

    return RandomForestClassifier(n_estimators=12, max_depth=6, random_state=0).fit(X, y)


def _pipeline(X, y):
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    return make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression()).fit(X, y)


def _lightgbm(X, y):
    lightgbm = pytest.importorskip("lightgbm")
    return lightgbm.LGBMClassifier(n_estimators=15, num_leaves=8, min_child_samples=5,
                                   verbose=-1).fit(X, y)


MODELS = {"forest": (_forest, ["predict", "predict_proba"]),
          "pipeline": (_pipeline, ["predict", "predict_proba", "decision_function"]),
          "lightgbm": (_lightgbm, ["predict", "predict_proba"])}
CASES = [(name, method) for name, (_, methods) in MODELS.items() for method in methods]


@pytest.fixture(scope="module")
def frame(spark):
    """Rows in Spark with nulls in a float and an integer column, over 3 partitions."""
    from pyspark.sql import functions as F

    X, y = _data(np.random.default_rng(7))
    df = spark.createDataFrame(X.assign(id=np.arange(N_ROWS)))
    df = (df.withColumn("f2", F.when(F.col("id") % 9 == 4, F.lit(None)).otherwise(F.col("f2")))
            .withColumn("count", F.when(F.col("id") % 13 == 5, F.lit(None))
                        .otherwise(F.col("count")))
            .repartition(3, "id"))
    return X, y, df


@pytest.fixture(scope="module")
def converted(frame):
    X, y, _ = frame
    return {name: woodstar.convert(make(X, y), "torch") for name, (make, _) in MODELS.items()}


@pytest.fixture(params=[None, 7], ids=["default-batches", "7-row-batches"])
def batch_limit(spark, request):
    key = "spark.sql.execution.arrow.maxRecordsPerBatch"
    previous = spark.conf.get(key)
    if request.param is not None:
        spark.conf.set(key, str(request.param))
    yield request.param
    spark.conf.set(key, previous)


def _in_process(model, method, pdf):
    values = getattr(model, method)(pdf[FEATURES])
    return np.asarray(values)


@pytest.mark.parametrize("name,method", CASES, ids=[f"{n}-{m}" for n, m in CASES])
def test_udf_matches_in_process(spark, frame, converted, batch_limit, name, method):
    from pyspark.sql import functions as F

    import woodstar.spark as ws

    _, _, df = frame
    model = converted[name]
    assert df.rdd.getNumPartitions() == 3
    columns = [F.col(c) for c in FEATURES]
    as_array = ws.predict_udf(model, method=method, output="array")
    as_struct = ws.predict_udf(model, method=method, output="columns")
    by_name = ws.predict_udf(model, method=method, output="array")
    selected = [F.col("id"), *[F.col(c) for c in FEATURES],
                as_array(*columns).alias("array"), as_struct(*columns).alias("columns"),
                by_name(F.struct(*[F.col(c) for c in reversed(FEATURES)])).alias("by_name")]
    label = None
    if method in ("predict", "predict_proba"):
        label = ws.predict_udf(model, method=method, output="label")
        selected.append(label(*columns).alias("label"))
    pdf = df.select(*selected).toPandas().sort_values("id").reset_index(drop=True)
    assert pdf[["f1", "f2", "count"]].isna().any().all()  # NaN, and nulls read back as NaN

    expected = _in_process(model, method, pdf).reshape(N_ROWS, -1)
    got_array = np.stack(pdf["array"].to_numpy())
    np.testing.assert_array_equal(got_array, expected.astype(got_array.dtype))
    fields = list(as_struct.returnType.fieldNames())
    got_columns = np.column_stack([pdf["columns"].map(lambda r: r[f]).to_numpy() for f in fields])
    np.testing.assert_array_equal(got_columns.astype(expected.dtype), expected)
    np.testing.assert_array_equal(np.stack(pdf["by_name"].to_numpy()), got_array)
    if method == "predict_proba":
        assert fields == [f"proba_{c}" for c in model.classes_]
    if label is not None:
        np.testing.assert_array_equal(pdf["label"].to_numpy(), model.predict(pdf[FEATURES]))


def test_score_matches_in_process_and_source(spark, frame, converted):
    """``score``: the one-line form, columns found by name, from a saved file."""
    import woodstar.spark as ws

    X, y, df = frame
    model = converted["forest"]
    shuffled = df.select("id", "count", "f2", "f1", "f0")  # another column order
    out = ws.score(shuffled, model, method="predict_proba", output_col="p").toPandas()
    out = out.sort_values("id").reset_index(drop=True)
    assert list(out.columns) == ["id", "count", "f2", "f1", "f0", "p"]
    np.testing.assert_array_equal(np.stack(out["p"].to_numpy()),
                                  model.predict_proba(out[FEATURES]))
    source = _forest(X, y)  # the same fit: scikit-learn's own labels agree
    np.testing.assert_array_equal(
        ws.score(shuffled, model, method="predict", output="label").toPandas()
        .sort_values("id")["prediction"].to_numpy(),
        source.predict(out[FEATURES].astype(np.float64)))


def test_score_from_saved_path_and_regressor_without_names(spark, tmp_path, rng):
    """A model without feature names scores the columns in order; a saved file works
    as the model argument."""
    from sklearn.ensemble import RandomForestRegressor

    import woodstar.spark as ws

    X = rng.normal(size=(150, 3))
    model = RandomForestRegressor(n_estimators=5, max_depth=5, random_state=0).fit(X, X[:, 0])
    path = str(tmp_path / "model.zip")
    woodstar.convert(model, "torch").save(path)
    df = spark.createDataFrame(pd.DataFrame(X, columns=["a", "b", "c"])).repartition(2)
    out = ws.score(df, path, method="predict", output="label").toPandas()
    np.testing.assert_array_equal(out["prediction"].to_numpy(),
                                  woodstar.load(path).predict(out[["a", "b", "c"]].to_numpy()))
    np.testing.assert_array_equal(out["prediction"].to_numpy(),
                                  model.predict(out[["a", "b", "c"]].to_numpy()))


def test_string_labels_and_hand_written_udf(spark, rng):
    """String class labels come back as strings; a hand-written pandas UDF that closes
    over a container works: the container pickles through the saved format."""
    from pyspark.sql.functions import pandas_udf
    from sklearn.tree import DecisionTreeClassifier

    import woodstar.spark as ws

    X = pd.DataFrame(rng.normal(size=(120, 2)), columns=["u", "v"])
    labels = np.where(X["u"] > 0, "high", "low")
    model = woodstar.convert(DecisionTreeClassifier(max_depth=3).fit(X, labels), "torch")
    model.predict(X)  # the compiled route is built: the container still pickles
    df = spark.createDataFrame(X).repartition(2)

    @pandas_udf("double")
    def high(u: pd.Series, v: pd.Series) -> pd.Series:
        return pd.Series(model.predict_proba(pd.DataFrame({"u": u, "v": v}))[:, 0])

    out = (ws.score(df, model, output="label").withColumn("high", high("u", "v"))
           .toPandas())
    assert out["prediction"].map(type).eq(str).all()
    np.testing.assert_array_equal(out["prediction"].to_numpy(), model.predict(out[["u", "v"]]))
    np.testing.assert_array_equal(out["high"].to_numpy(), model.predict_proba(out[["u", "v"]])[:, 0])
