"""Preprocessing transformers against scikit-learn's own transform: Normalizer,
Binarizer, KBinsDiscretizer, PolynomialFeatures, PowerTransformer, QuantileTransformer,
FunctionTransformer, TargetEncoder; alone, in pipelines, saved and loaded; refusals."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import (Binarizer, FunctionTransformer, KBinsDiscretizer,  # noqa: E402
                                   Normalizer,
                                   PolynomialFeatures, PowerTransformer, QuantileTransformer,
                                   StandardScaler, TargetEncoder)

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402

COVERS_OPS = ("normalize", "binarize", "kbins", "polynomial", "power_transform",
              "quantile_transform", "ufunc")
COVERS_MODELS = ("Binarizer", "FunctionTransformer", "GenericUnivariateSelect", "KBinsDiscretizer", "Normalizer", "PolynomialFeatures", "PowerTransformer", "QuantileTransformer", "SelectFdr", "SelectFpr", "SelectFromModel", "SelectFwe", "SelectKBest", "SelectPercentile", "SequentialFeatureSelector", "TargetEncoder", "VarianceThreshold")

N_FEATURES = 4
MODELS = {
    "normalizer_l1": lambda: Normalizer("l1"),
    "normalizer_l2": lambda: Normalizer("l2"),
    "normalizer_max": lambda: Normalizer("max"),
    "binarizer": lambda: Binarizer(threshold=0.3),
    "kbins_ordinal_quantile": lambda: KBinsDiscretizer(5, encode="ordinal",
                                                       quantile_method="averaged_inverted_cdf"),
    "kbins_onehot_uniform": lambda: KBinsDiscretizer(4, encode="onehot", strategy="uniform"),
    "kbins_dense_kmeans": lambda: KBinsDiscretizer(3, encode="onehot-dense", strategy="kmeans"),
    "poly3": lambda: PolynomialFeatures(3),
    "poly_interaction": lambda: PolynomialFeatures(3, interaction_only=True, include_bias=False),
    "poly_min_degree": lambda: PolynomialFeatures((2, 3)),
    "yeo_johnson": lambda: PowerTransformer(),
    "yeo_johnson_raw": lambda: PowerTransformer(standardize=False),
    "box_cox": lambda: PowerTransformer("box-cox"),
    "quantile_uniform": lambda: QuantileTransformer(n_quantiles=40),
    "quantile_normal": lambda: QuantileTransformer(n_quantiles=40, output_distribution="normal"),
    "log1p": lambda: FunctionTransformer(np.log1p),
    "exp": lambda: FunctionTransformer(np.exp, validate=True),
}
POSITIVE = ("box_cox", "log1p")  # fitted and tested on positive data
ACCEPTS_NAN = ("yeo_johnson", "yeo_johnson_raw", "box_cox", "quantile_uniform",
               "quantile_normal", "log1p")


def data(rng, n, name, far=False):
    X = rng.normal(scale=6.0 if far else 1.0, size=(n, N_FEATURES))
    if name in POSITIVE:
        X = np.abs(X) + 0.05
    return X


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(20260301)
    models = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, make in MODELS.items():
            X = data(rng, 200, name)
            X[:5] = X[5:10]  # ties in the quantiles
            models[name] = make().fit(X)
    return models


def _expected(model, X):
    out = model.transform(X)
    return out.toarray() if hasattr(out, "toarray") else np.asarray(out)


def _test_rows(rng, name):
    X = np.vstack([data(rng, 60, name), data(rng, 30, name, far=True)])
    if name in ACCEPTS_NAN:
        X[rng.random(X.shape) < 0.05] = np.nan
    return X


@pytest.mark.parametrize("name", list(MODELS))
def test_matches_sklearn_on_every_backend(fitted, name, backend, rng):
    model = fitted[name]
    if backend in ("onnx", "tvm") and name == "quantile_normal":
        with pytest.raises(MissingConverter, match=f"normal.*{backend}.*ndtri"):
            woodstar.convert(model, backend)
        return
    converted = woodstar.convert(model, backend)
    X = _test_rows(rng, name)
    expected = _expected(model, X)
    got = converted.transform(X)
    assert got.shape == expected.shape
    if converted.route != "program":  # scikit-learn's NumPy expressions: its bits
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(MODELS))
def test_program_route_and_refusals(fitted, name, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    X = _test_rows(rng, name)
    np.testing.assert_allclose(converted.transform(X), _expected(model, X), rtol=1e-12, atol=1e-12)
    default = woodstar.convert(model, "torch")
    for bad in (np.nan, np.inf):
        X[3, 1] = bad
        try:
            expected = _expected(model, X)
        except ValueError:
            with pytest.raises(ValueError):
                default.transform(X)
            continue
        np.testing.assert_array_equal(default.transform(X), expected)


@pytest.mark.parametrize("name", ["normalizer_l2", "kbins_ordinal_quantile", "poly3", "yeo_johnson",
                                  "box_cox", "quantile_normal", "log1p"])
def test_float32_input_stays_float32(name, rng):
    X = data(rng, 200, name).astype(np.float32)
    model = MODELS[name]().fit(X)
    T = data(rng, 80, name, far=True).astype(np.float32)
    expected = _expected(model, T)
    converted = woodstar.convert(model, "torch")
    got = converted.transform(T)
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    # float32 results: the Torch program's float64 steps may round one float32 ulp apart
    np.testing.assert_allclose(program.transform(T), expected, rtol=1e-6, atol=1e-6)


def test_yeo_johnson_is_scipys():
    from scipy import stats

    from woodstar.ir.families.preprocessing import yeo_johnson

    x = np.random.default_rng(0).normal(scale=3, size=500)
    for dtype in (np.float32, np.float64):
        for lmbda in (np.float64(0.0), np.float64(0.7), np.float64(2.0), np.float64(-1.3)):
            expected = stats.yeojohnson(x.astype(dtype), lmbda)
            got = yeo_johnson(x.astype(dtype), lmbda)
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", ["normalizer_l2", "kbins_onehot_uniform", "poly_interaction",
                                  "yeo_johnson", "quantile_uniform", "log1p"])
def test_in_a_pipeline_after_a_scaler(name, rng):
    X = data(rng, 200, name)
    y = (X[:, 0] + X[:, 1] > np.median(X[:, 0] + X[:, 1])).astype(int)
    steps = [MODELS[name]()] if name == "log1p" else [StandardScaler(), MODELS[name]()]
    model = make_pipeline(*steps, LogisticRegression()).fit(X, y)
    T = data(rng, 100, name, far=True)
    converted = woodstar.convert(model, "torch")
    np.testing.assert_array_equal(converted.predict_proba(T), model.predict_proba(T))
    np.testing.assert_array_equal(converted.predict(T), model.predict(T))
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    np.testing.assert_allclose(program.predict_proba(T), model.predict_proba(T),
                               rtol=1e-12, atol=1e-12)
    transformer = make_pipeline(*steps).fit(X)
    np.testing.assert_array_equal(woodstar.convert(transformer, "torch").transform(T),
                                  _expected(transformer, T))


def test_nan_refused_after_a_scaler_as_sklearn_refuses(rng):
    X = rng.normal(size=(100, 3))
    model = make_pipeline(StandardScaler(), Normalizer()).fit(X)
    T = rng.normal(size=(10, 3))
    T[2, 1] = np.nan
    with pytest.raises(ValueError):
        model.transform(T)
    with pytest.raises(ValueError):
        woodstar.convert(model, "torch").transform(T)


def test_target_encoder_with_strings_and_numbers(rng):
    pd = pytest.importorskip("pandas")

    def frame(n, unseen=False):
        cities = ["paris", "rome", "oslo"] + (["lima"] if unseen else [])
        df = pd.DataFrame({"city": pd.Series(rng.choice(cities, n), dtype=object),
                           "size": rng.integers(0, 4, n).astype(float),
                           "x": rng.normal(size=n)})
        df.loc[rng.random(n) < 0.1, "city"] = None
        df.loc[rng.random(n) < 0.1, "size"] = np.nan
        return df

    X = frame(300)
    for target, kind in ((rng.normal(size=300), "continuous"),
                         (rng.integers(0, 2, 300), "binary"),
                         (rng.choice(["a", "b", "c"], 300), "multiclass")):
        encoder = TargetEncoder(target_type=kind).fit(X[["city", "size"]], target)
        T = frame(120, unseen=True)[["city", "size"]]
        expected = encoder.transform(T)
        np.testing.assert_array_equal(woodstar.convert(encoder, "torch").transform(T), expected)
        program = woodstar.convert(encoder, "torch", extra_config={"cpu_route": "program"})
        np.testing.assert_allclose(program.transform(T), expected, rtol=1e-12, atol=1e-12)
        model = make_pipeline(encoder, LogisticRegression()) if kind != "continuous" else None
        if model is not None:
            from sklearn.compose import ColumnTransformer

            pre = ColumnTransformer([("te", TargetEncoder(target_type=kind),
                                      ["city", "size"]), ("num", StandardScaler(), ["x"])])
            model = make_pipeline(pre, LogisticRegression()).fit(X, target)
            T = frame(120, unseen=True)
            np.testing.assert_array_equal(woodstar.convert(model, "torch").predict_proba(T),
                                          model.predict_proba(T))


def test_save_and_load(fitted, rng, tmp_path):
    model = fitted["quantile_normal"]
    converted = woodstar.convert(model, "torch")
    path = converted.save(tmp_path / "quantile.zip")
    loaded = woodstar.load(path)
    X = _test_rows(rng, "quantile_normal")
    np.testing.assert_array_equal(loaded.transform(X), _expected(model, X))


def test_refusals(rng):
    X = rng.normal(size=(50, 3))
    with pytest.raises(MissingConverter, match="func is not supported.*'<lambda>'"):
        woodstar.convert(FunctionTransformer(lambda v: v * 2).fit(X), "torch")
    with pytest.raises(MissingConverter, match="func is not supported.*'add'"):
        woodstar.convert(FunctionTransformer(np.add, kw_args=None).fit(X), "torch")
    with pytest.raises(MissingConverter, match="kw_args is not supported"):
        woodstar.convert(FunctionTransformer(np.round, kw_args={"decimals": 1}).fit(X), "torch")
    with pytest.raises(MissingConverter, match="func is not supported"):
        woodstar.convert(make_pipeline(FunctionTransformer(np.nan_to_num), LogisticRegression())
                         .fit(X, X[:, 0] > 0), "torch")


def test_identity_function_transformer_is_still_the_identity(rng):
    X = rng.normal(size=(50, 3))
    model = FunctionTransformer().fit(X)
    np.testing.assert_array_equal(woodstar.convert(model, "torch").transform(X), X)


@pytest.mark.parametrize("in_pipeline", [False, True])
def test_box_cox_refuses_values_that_are_not_positive(in_pipeline, rng):
    from sklearn.linear_model import Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import PowerTransformer

    X = rng.lognormal(size=(80, 3))
    model = PowerTransformer(method="box-cox")
    model = make_pipeline(model, Ridge()).fit(X, X[:, 0]) if in_pipeline else model.fit(X)
    converted = woodstar.convert(model, "torch")
    run = (lambda m: m.predict) if in_pipeline else (lambda m: m.transform)
    T = rng.lognormal(size=(20, 3))
    np.testing.assert_array_equal(run(converted)(T), run(model)(T))
    T[4, 2] = 0.0
    with pytest.raises(ValueError, match="strictly positive"):
        run(model)(T)
    with pytest.raises(ValueError, match="strictly positive data \\(column '2'\\)"):
        run(converted)(T)
