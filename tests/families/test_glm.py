"""PoissonRegressor, GammaRegressor and TweedieRegressor: ``predict`` is the link's
inverse of ``X @ coef_ + intercept_``, as scikit-learn computes it (bit for bit on the
default CPU route, within 1e-12 on the Torch programs)."""

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn import linear_model as lm  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402

from ..conftest import BASE_SEED  # noqa: E402
from .._parity import assert_parity  # noqa: E402

COVERS_OPS = ("glm_inverse_link",)
COVERS_MODELS = ("GammaRegressor", "PoissonRegressor", "TweedieRegressor")

N_FEATURES = 5
MODELS = {
    "poisson": lambda: lm.PoissonRegressor(alpha=0.01),
    "poisson_no_intercept": lambda: lm.PoissonRegressor(fit_intercept=False),
    "gamma": lambda: lm.GammaRegressor(alpha=0.01),
    "gamma_newton": lambda: lm.GammaRegressor(solver="newton-cholesky"),
    "tweedie_1_5": lambda: lm.TweedieRegressor(power=1.5, alpha=0.01),
    "tweedie_normal": lambda: lm.TweedieRegressor(power=0),  # link auto: identity
    "tweedie_identity": lambda: lm.TweedieRegressor(power=1, link="identity", alpha=0.01),
    "tweedie_log_normal": lambda: lm.TweedieRegressor(power=0, link="log"),
    "tweedie_3": lambda: lm.TweedieRegressor(power=3, alpha=0.01),
}


def _data(rng, n=200):
    X = rng.normal(size=(n, N_FEATURES))
    y = rng.gamma(2.0, np.exp(0.3 * X[:, 0] - 0.2 * X[:, 1])) + 0.5
    return X, y


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(BASE_SEED)
    X, y = _data(rng)
    return {name: make().fit(X, y) for name, make in MODELS.items()}


def _rows(rng, far=False):
    return rng.normal(scale=20.0 if far else 2.0, size=(80, N_FEATURES))


@pytest.mark.parametrize("name", MODELS)
def test_default_route_is_bit_for_bit(fitted, name, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch")
    for X in (_rows(rng), _rows(rng, far=True), _rows(rng).astype(np.float32),
              rng.integers(-3, 4, size=(20, N_FEATURES))):
        np.testing.assert_array_equal(converted.predict(X), model.predict(X))


def _check_program(converted, model, rng):
    for X in (_rows(rng), _rows(rng, far=True)):
        np.testing.assert_allclose(converted.predict(X), model.predict(X), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_torch_program_within_1e_12(fitted, name, rng):
    _check_program(woodstar.convert(fitted[name], "torch", extra_config={"cpu_route": "program"}),
                   fitted[name], rng)


# the log and the identity link on every backend (the compiling ones take seconds a model)
@pytest.mark.parametrize("name", ["poisson", "tweedie_normal"])
def test_every_backend_within_1e_12(fitted, name, backend, rng):
    _check_program(woodstar.convert(fitted[name], backend), fitted[name], rng)


def test_nan_and_infinity_are_refused_as_scikit_learn_refuses_them(fitted, rng):
    model = fitted["poisson"]
    converted = woodstar.convert(model, "torch")
    for bad in (np.nan, np.inf, -np.inf):
        X = _rows(rng)
        X[7, 3] = bad
        assert assert_parity(converted, model, X, "float64", methods=["predict"]) == 0


def test_in_a_pipeline_after_a_scaler(rng):
    X, y = _data(rng)
    model = make_pipeline(StandardScaler(), lm.GammaRegressor()).fit(X, y)
    rows = _rows(rng)
    np.testing.assert_array_equal(woodstar.convert(model, "torch").predict(rows), model.predict(rows))
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    np.testing.assert_allclose(program.predict(rows), model.predict(rows), rtol=1e-12, atol=1e-12)


def test_save_and_load(fitted, tmp_path, rng):
    model = fitted["tweedie_1_5"]
    loaded = woodstar.load(woodstar.convert(model, "torch").save(tmp_path / "tweedie.zip"))
    X = _rows(rng)
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_an_unknown_link_is_refused(fitted):
    model = sklearn.base.clone(fitted["poisson"])
    model.__dict__.update(fitted["poisson"].__dict__)

    class HalfLogitLink:  # a link predict would invert that woodstar does not know
        pass

    loss = type("Loss", (), {"link": HalfLogitLink()})()
    model._base_loss = loss
    with pytest.raises(MissingConverter, match=r"Cannot convert PoissonRegressor: link is not "
                                               r"supported \(got 'HalfLogitLink'\); supported: "
                                               r"IdentityLink, LogLink"):
        woodstar.convert(model, "torch")
