"""SplineTransformer against scikit-learn's own transform: every supported
extrapolation, degree and include_bias, NaN and infinity as handle_missing says, float32
input, in a pipeline, saved and loaded; refusals."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import SplineTransformer, StandardScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402

COVERS_OPS = ("spline",)
COVERS_MODELS = ("SplineTransformer",)

N_FEATURES = 3
MODELS = {
    "continue_d3": dict(extrapolation="continue"),
    "continue_d0_nobias": dict(extrapolation="continue", degree=0, include_bias=False),
    "periodic_d3": dict(extrapolation="periodic", n_knots=6),
    "periodic_d2_nobias_zeros": dict(extrapolation="periodic", degree=2, include_bias=False,
                                     handle_missing="zeros"),
    "constant_d3_zeros": dict(extrapolation="constant", handle_missing="zeros"),
    "constant_d1_nobias": dict(extrapolation="constant", degree=1, include_bias=False),
    "linear_d3": dict(extrapolation="linear", knots="quantile"),
    "linear_d1_zeros": dict(extrapolation="linear", degree=1, handle_missing="zeros"),
    "linear_d0_nobias": dict(extrapolation="linear", degree=0, include_bias=False),
    "continue_zeros": dict(extrapolation="continue", degree=2, handle_missing="zeros"),
}


def data(rng, n, far=False):
    return rng.normal(scale=5.0 if far else 1.0, size=(n, N_FEATURES))


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(20261201)
    return {name: SplineTransformer(**{"n_knots": 5, **kw}).fit(data(rng, 200))
            for name, kw in MODELS.items()}


def _rows(rng, model):
    X = np.vstack([data(rng, 40), data(rng, 30, far=True)])
    X[:3] = model.bsplines_[0].t[model.degree:model.degree + 3, None]  # on the knots
    if model.handle_missing == "zeros":
        X[rng.random(X.shape) < 0.05] = np.nan
    return X


# every backend on a cover of the options (the rest run on the CPU and Torch routes below)
@pytest.mark.parametrize("name", ["continue_d0_nobias", "periodic_d2_nobias_zeros",
                                  "constant_d3_zeros", "linear_d1_zeros"])
def test_matches_sklearn_on_every_backend(fitted, name, backend, rng):
    model = fitted[name]
    converted = woodstar.convert(model, backend)
    X = _rows(rng, model)
    expected = model.transform(X)
    got = converted.transform(X)
    assert got.shape == expected.shape
    if converted.route != "program":
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", list(MODELS))
def test_program_route_nan_and_infinity(fitted, name, rng):
    model = fitted[name]
    X = _rows(rng, model)
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    np.testing.assert_allclose(program.transform(X), model.transform(X), rtol=1e-12, atol=1e-12)
    default = woodstar.convert(model, "torch")
    for bad in (np.nan, np.inf, -np.inf):
        X[3, 1] = bad
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                expected = model.transform(X)
        except ValueError:
            with pytest.raises(ValueError):
                default.transform(X)
            with pytest.raises(ValueError):
                program.transform(X)
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            np.testing.assert_array_equal(default.transform(X), expected)
            np.testing.assert_allclose(program.transform(X), expected, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", ["continue_d3", "periodic_d3", "linear_d3", "constant_d3_zeros"])
def test_float32_input_stays_float32(name, rng):
    model = SplineTransformer(**{"n_knots": 5, **MODELS[name]}).fit(
        data(rng, 200).astype(np.float32))
    T = data(rng, 60, far=True).astype(np.float32)
    expected = model.transform(T)
    got = woodstar.convert(model, "torch").transform(T)
    assert got.dtype == expected.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    np.testing.assert_allclose(program.transform(T), expected, rtol=1e-6, atol=1e-6)


def test_in_a_pipeline_after_a_scaler(rng):
    X = data(rng, 200)
    y = (np.sin(X[:, 0]) + X[:, 1] > 0).astype(int)
    model = make_pipeline(StandardScaler(), SplineTransformer(extrapolation="linear"),
                          LogisticRegression()).fit(X, y)
    T = data(rng, 80, far=True)
    converted = woodstar.convert(model, "torch")
    np.testing.assert_array_equal(converted.predict_proba(T), model.predict_proba(T))
    np.testing.assert_array_equal(converted.predict(T), model.predict(T))
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    np.testing.assert_allclose(program.predict_proba(T), model.predict_proba(T),
                               rtol=1e-12, atol=1e-12)
    T[0, 0] = np.nan
    with pytest.raises(ValueError):
        model.predict(T)
    with pytest.raises(ValueError):
        converted.predict(T)


def test_save_and_load(fitted, rng, tmp_path):
    model = fitted["linear_d1_zeros"]
    converted = woodstar.convert(model, "torch")
    converted.save(str(tmp_path / "spline"))
    loaded = woodstar.load(str(tmp_path / "spline"))
    X = _rows(rng, model)
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


@pytest.mark.parametrize("kw, match", [
    (dict(extrapolation="error"), "extrapolation"),
    (dict(sparse_output=True), "sparse_output"),
    (dict(degree=0, extrapolation="constant"), "degree 0 with constant"),
    (dict(degree=0, n_knots=2, extrapolation="linear"), "linear extrapolation"),
])
def test_refusals(kw, match, rng):
    model = SplineTransformer(**kw).fit(data(rng, 50))
    with pytest.raises(MissingConverter, match=match):
        woodstar.convert(model, "torch")
    with pytest.raises(MissingConverter, match=match):
        woodstar.convert(make_pipeline(StandardScaler(), SplineTransformer(**kw)).fit(
            data(rng, 50)), "torch")
