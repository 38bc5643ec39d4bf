"""Pipelines over DataFrames with string columns: ColumnTransformer, FeatureUnion,
encoders, imputers on strings, missing indicators, against scikit-learn's own answers
on fresh frames with NaN, None, unseen categories and reordered columns."""

import subprocess
import sys
import warnings

import numpy as np
import pytest

pd = pytest.importorskip("pandas")
pytest.importorskip("sklearn")

from sklearn.compose import ColumnTransformer, make_column_selector  # noqa: E402
from sklearn.ensemble import HistGradientBoostingClassifier, RandomForestClassifier  # noqa: E402
from sklearn.impute import MissingIndicator, SimpleImputer  # noqa: E402
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.pipeline import FeatureUnion, make_pipeline, make_union  # noqa: E402
from sklearn.preprocessing import (MinMaxScaler, OneHotEncoder, OrdinalEncoder,  # noqa: E402
                                   StandardScaler)

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402

from .._parity import compare_outputs  # noqa: E402

CITIES = ["paris", "rome", "oslo", "lima", "kyiv", "accra"]
PLANS = ["basic", "plus", "pro"]
NUM, CAT = ["age", "income"], ["city", "plan"]


def frame(rng, n, unseen=False):
    """Two numeric and two string columns, with NaN, None and (optionally) categories
    never seen in fit; columns in a shuffled order."""
    df = pd.DataFrame({
        "age": rng.normal(40, 12, n), "income": rng.lognormal(10, 0.5, n),
        "city": pd.Series(rng.choice(CITIES[:-1] + (CITIES[-1:] if unseen else []), n), dtype=object),
        "plan": pd.Series(rng.choice(PLANS, n), dtype=object)})
    df.loc[rng.random(n) < 0.1, "age"] = np.nan
    df.loc[rng.random(n) < 0.05, "city"] = None
    df.loc[rng.random(n) < 0.05, "plan"] = np.nan
    if unseen:
        df.loc[rng.random(n) < 0.05, "plan"] = "enterprise"
    return df[list(rng.permutation(df.columns))]


def target(df):
    return ((df["income"] > 25000).astype(int) ^ (df["plan"] == "pro")).to_numpy()


def preprocessor(**onehot):
    onehot.setdefault("handle_unknown", "ignore")
    return ColumnTransformer([("num", make_pipeline(SimpleImputer(), StandardScaler()), NUM),
                              ("cat", OneHotEncoder(**onehot), CAT)])


FINALS = {
    "logreg": LogisticRegression,
    "forest": lambda: RandomForestClassifier(n_estimators=15, max_depth=6, random_state=0),
    "hgb": lambda: HistGradientBoostingClassifier(max_iter=15, random_state=0),
}


@pytest.fixture(scope="module")
def fitted():
    """The pipelines, fitted once per module on one frame (their answers are compared
    on fresh frames in each test)."""
    rng = np.random.default_rng(20261201)
    X = frame(rng, 600)
    y = target(X)
    models = {name: make_pipeline(preprocessor(), make()).fit(X, y) for name, make in FINALS.items()}
    ordinal = ColumnTransformer([("cat", OrdinalEncoder(handle_unknown="use_encoded_value",
                                                        unknown_value=np.nan), CAT)],
                                remainder="passthrough")
    models["ordinal_hgb"] = make_pipeline(ordinal, HistGradientBoostingClassifier(
        max_iter=15, categorical_features=[0, 1], random_state=0)).fit(X, y)
    return models


def _methods(model):
    return [m for m in ("predict", "predict_proba", "decision_function") if hasattr(model, m)]


def _check(converted, model, X, exact):
    for method in _methods(model):
        expected = getattr(model, method)(X)
        got = getattr(converted, method)(X)
        if exact:
            assert got.dtype == expected.dtype, method
            np.testing.assert_array_equal(got, expected, err_msg=method)
        else:
            compare_outputs(got, expected, "float64", method)


@pytest.mark.parametrize("name", list(FINALS) + ["ordinal_hgb"])
def test_pipeline_matches_sklearn_on_every_backend(fitted, name, backend, rng):
    model = fitted[name]
    converted = woodstar.convert(model, backend)
    X = frame(rng, 300, unseen=True)
    # The CPU route follows scikit-learn's arithmetic: the same bits.
    _check(converted, model, X, exact=converted.route != "program")


@pytest.mark.parametrize("route", ["program", "auto"])
@pytest.mark.parametrize("name", list(FINALS))
def test_every_cpu_route_matches(fitted, name, route, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": route})
    assert (converted.route == "program") == (route == "program")
    _check(converted, model, frame(rng, 200, unseen=True), exact=route != "program")


def test_one_row_and_batches(fitted, rng):
    model = fitted["logreg"]
    X = frame(rng, 50, unseen=True)
    converted = woodstar.convert(model, "torch", extra_config={"batch_size": 7})
    # NumPy's matrix product rounds by the shape it is given; batches of 7 rows give
    # scikit-learn's answer for batches of 7 rows.
    expected = np.vstack([model.predict_proba(X.iloc[i:i + 7]) for i in range(0, len(X), 7)])
    np.testing.assert_array_equal(converted.predict_proba(X), expected)
    for i in range(3):
        row = X.iloc[i:i + 1]
        np.testing.assert_array_equal(converted.predict_proba(row), model.predict_proba(row))


def test_numpy_object_array_input_is_read_by_position(rng):
    X = frame(rng, 300)[NUM + CAT]
    pre = ColumnTransformer([("num", StandardScaler(), [0, 1]),
                             ("cat", OneHotEncoder(handle_unknown="ignore", sparse_output=False),
                              [2, 3])])
    model = make_pipeline(pre, Ridge())
    A = X.to_numpy(dtype=object)
    A[:, :2] = np.nan_to_num(A[:, :2].astype(float))
    model.fit(A, X["income"].to_numpy())
    converted = woodstar.convert(model, "torch")
    T = frame(rng, 100, unseen=True)[NUM + CAT].to_numpy(dtype=object)
    T[:, :2] = np.nan_to_num(T[:, :2].astype(float))
    np.testing.assert_array_equal(converted.predict(T), model.predict(T))


ONEHOT_OPTIONS = [
    dict(drop="first"), dict(drop="if_binary"), dict(min_frequency=0.15),
    dict(max_categories=3), dict(handle_unknown="infrequent_if_exist", min_frequency=0.15),
    dict(sparse_output=False, dtype=np.float32),
]


@pytest.mark.parametrize("options", ONEHOT_OPTIONS, ids=lambda o: "-".join(f"{k}={v}" for k, v in o.items()))
def test_one_hot_options(options, rng):
    X = frame(rng, 500)
    options = dict(options)
    options.setdefault("handle_unknown", "ignore" if "drop" not in options else "ignore")
    model = make_pipeline(preprocessor(**options), LogisticRegression()).fit(X, target(X))
    converted = woodstar.convert(model, "torch")
    T = frame(rng, 200, unseen=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown categories with drop warn in scikit-learn
        _check(converted, model, T, exact=True)
        encoder = model[0]
        np.testing.assert_array_equal(woodstar.convert(encoder, "torch.jit").transform(T),
                                      np.asarray(encoder.transform(T)))


def test_string_imputers_indicators_feature_union_and_remainder(rng):
    X = frame(rng, 500)
    cat = make_pipeline(SimpleImputer(strategy="most_frequent", add_indicator=True),
                        OneHotEncoder(handle_unknown="ignore"))
    constant = make_pipeline(SimpleImputer(strategy="constant", fill_value="unknown"),
                             OrdinalEncoder(handle_unknown="use_encoded_value", unknown_value=-1))
    union = make_union(make_pipeline(SimpleImputer(add_indicator=True), MinMaxScaler()),
                       MissingIndicator(features="all"))
    union.transformer_weights = {"pipeline": 2.5}
    pre = ColumnTransformer([("cat", cat, ["city"]), ("plan", constant, ["plan"]),
                             ("num", union, make_column_selector(dtype_include=np.number))])
    model = make_pipeline(pre, LogisticRegression(max_iter=500)).fit(X, target(X))
    converted = woodstar.convert(model, "torch")
    T = frame(rng, 200, unseen=True)
    _check(converted, model, T, exact=True)
    _check(woodstar.convert(model, "torch.jit"), model, T, exact=False)
    masked = ColumnTransformer([("s", StandardScaler(), [True, True, False, False])],
                               remainder=OneHotEncoder(handle_unknown="ignore"))
    X2, T2 = X[NUM + CAT].fillna({"age": 0}), T[NUM + CAT].fillna({"age": 0})
    masked.fit(X2)
    np.testing.assert_array_equal(woodstar.convert(masked, "torch").transform(T2),
                                  masked.transform(T2).toarray() if hasattr(masked.transform(T2), "toarray")
                                  else masked.transform(T2))


def test_errors_name_the_column(fitted, rng):
    converted = woodstar.convert(fitted["logreg"], "torch")
    X = frame(rng, 20)
    with pytest.raises(ValueError, match=r"lacks \['plan'\]"):
        converted.predict(X.drop(columns="plan"))
    with pytest.raises(ValueError, match=r"unexpected \['extra'\]"):
        converted.predict(X.assign(extra=1.0))
    with pytest.raises(ValueError, match="column 'age' was numeric"):
        converted.predict(X.assign(age="forty"))
    with pytest.raises(ValueError, match="column 'city' held strings"):
        converted.predict(X.assign(city=3.5))
    strict = make_pipeline(ColumnTransformer([("cat", OneHotEncoder(), CAT)]), LogisticRegression())
    train = frame(rng, 300).fillna({"plan": "basic"})
    train["city"] = train["city"].fillna("paris")
    strict.fit(train, target(train))
    converted = woodstar.convert(strict, "torch")
    T = frame(rng, 30).fillna({"plan": "basic"})
    T["city"] = T["city"].fillna("paris")
    np.testing.assert_array_equal(converted.predict_proba(T), strict.predict_proba(T))
    T.loc[T.index[3], "city"] = "atlantis"
    with pytest.raises(ValueError, match="unknown categories"):
        strict.predict(T)
    with pytest.raises(ValueError, match=r"unknown categories \['atlantis'\] in column 'city'"):
        converted.predict(T)


def test_refusals_are_named(rng):
    X = frame(rng, 100)
    model = make_pipeline(ColumnTransformer([("cat", OneHotEncoder(), CAT)]),
                          StandardScaler(with_mean=False), LogisticRegression())
    model.fit(X.fillna({"plan": "basic"}).assign(city=X["city"].fillna("x")), target(X))
    with pytest.raises(MissingConverter, match="after a sparse output"):
        woodstar.convert(model, "torch")


def test_saved_models_with_strings_load_in_a_fresh_process(fitted, rng, tmp_path):
    model = fitted["forest"]
    path = tmp_path / "model.zip"
    woodstar.convert(model, "torch").save(path)
    X = frame(rng, 100, unseen=True)
    X.to_pickle(tmp_path / "x.pkl")
    np.save(tmp_path / "expected.npy", model.predict_proba(X))
    code = ("import numpy as np, pandas as pd, woodstar, sys; d = sys.argv[1]; "
            "m = woodstar.load(d + '/model.zip'); "
            "got = m.predict_proba(pd.read_pickle(d + '/x.pkl')); "
            "assert (got == np.load(d + '/expected.npy')).all(); print('same')")
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True)
    assert out.stdout.strip() == "same", out.stderr


@pytest.mark.parametrize("suffix", [".csv", ".parquet"])
def test_cli_predicts_a_file_with_string_columns(fitted, rng, tmp_path, suffix):
    model = fitted["logreg"]
    import joblib

    joblib.dump(model, tmp_path / "model.joblib")
    X = frame(rng, 50, unseen=True)
    if suffix == ".parquet":
        pytest.importorskip("pyarrow")
        X.to_parquet(tmp_path / "x.parquet", index=False)
        read = pd.read_parquet
    else:
        X.to_csv(tmp_path / "x.csv", index=False)
        read = pd.read_csv
    run = [sys.executable, "-m", "woodstar.cli"]
    subprocess.run(run + ["convert", str(tmp_path / "model.joblib"), "--backend", "torch", "-o", str(tmp_path / "m.zip")],
                   check=True, capture_output=True)
    out = subprocess.run(run + ["predict", str(tmp_path / "m.zip"), "--input",
                                str(tmp_path / f"x{suffix}"), "--output", str(tmp_path / "p.csv"),
                                "--method", "predict_proba"], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    got = pd.read_csv(tmp_path / "p.csv").to_numpy()
    expected = model.predict_proba(read(tmp_path / f"x{suffix}"))
    np.testing.assert_allclose(got, expected, rtol=1e-12)
