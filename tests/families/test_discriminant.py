"""LinearDiscriminantAnalysis (every solver; predict, predict_proba,
predict_log_proba, decision_function, transform) and QuadraticDiscriminantAnalysis.

Labels are identical everywhere; scores are scikit-learn's to the bit on the default
CPU route, within 1e-12 on the Torch programs."""

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis as LDA  # noqa: E402
from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis as QDA  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import Pipeline, make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402

from ..conftest import BASE_SEED  # noqa: E402
from .._parity import assert_parity  # noqa: E402

COVERS_OPS = ("qda_scores", "qda_posterior", "log_floor")
COVERS_MODELS = ("LinearDiscriminantAnalysis", "QuadraticDiscriminantAnalysis")

N_FEATURES = 5
METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function", "transform")
MODELS = {
    "lda_svd_binary": (lambda: LDA(), 2),
    "lda_svd_multi": (lambda: LDA(), 4),
    "lda_svd_one_component": (lambda: LDA(n_components=1), 4),
    "lda_eigen_shrinkage": (lambda: LDA(solver="eigen", shrinkage=0.2), 3),
    "lda_lsqr_auto": (lambda: LDA(solver="lsqr", shrinkage="auto"), 3),
    "lda_priors": (lambda: LDA(priors=[0.7, 0.2, 0.1]), 3),
    "qda_binary": (lambda: QDA(), 2),
    "qda_multi": (lambda: QDA(reg_param=0.1), 4),
}


def _data(rng, n_classes, n=200):
    y = rng.integers(0, n_classes, n)
    X = rng.normal(size=(n, N_FEATURES)) + y[:, None] * np.linspace(0.2, 1.0, N_FEATURES)
    return X, np.asarray(["a", "b", "c", "d"])[y]


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(BASE_SEED)
    return {name: make().fit(*_data(rng, k)) for name, (make, k) in MODELS.items()}


def _rows(rng, far=False):
    return rng.normal(scale=30.0 if far else 2.0, size=(80, N_FEATURES))


def _methods(model):
    # LDA's 'lsqr' solver has no working transform (scikit-learn raises NotImplementedError)
    return [m for m in METHODS if hasattr(model, m)
            and not (m == "transform" and getattr(model, "solver", "") == "lsqr")]


def _close(got, expected, what):
    """Within 1e-12 of the output's largest magnitude: the Torch program sums the same
    products in another order (last bits of the largest terms, not of a cancelled
    result)."""
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    scale = max(1.0, float(np.max(np.abs(expected[np.isfinite(expected)]), initial=0)))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * scale, err_msg=what)


@pytest.mark.parametrize("name", MODELS)
def test_default_route_is_bit_for_bit(fitted, name, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch")
    for X in (_rows(rng), _rows(rng, far=True), _rows(rng).astype(np.float32)):
        for method in _methods(model):
            np.testing.assert_array_equal(getattr(converted, method)(X), getattr(model, method)(X),
                                          err_msg=f"{name}.{method}")
    assert not hasattr(converted, "transform") or "transform" in _methods(model)


@pytest.mark.parametrize("name", MODELS)
def test_torch_program_within_1e_12(fitted, name, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    for X in (_rows(rng), _rows(rng, far=True)):
        for method in _methods(model):
            _close(getattr(converted, method)(X), getattr(model, method)(X), f"{name}.{method}")


# one model per op on every backend (the compiling ones take seconds a model)
@pytest.mark.parametrize("name", ["lda_svd_multi", "qda_binary"])
def test_every_backend(fitted, name, backend, rng):
    model = fitted[name]
    converted = woodstar.convert(model, backend)
    X = _rows(rng)
    for method in _methods(model):
        _close(getattr(converted, method)(X), getattr(model, method)(X), f"{name}.{method}")


@pytest.mark.parametrize("name", ["lda_svd_binary", "qda_multi"])
def test_nan_and_infinity_are_refused_as_scikit_learn_refuses_them(fitted, name, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch")
    for bad in (np.nan, np.inf):
        X = _rows(rng)
        X[5, 2] = bad
        assert assert_parity(converted, model, X, "float64", methods=_methods(model)) == 0


def test_float32_fitted_models(rng):
    X, y = _data(rng, 3)
    X = X.astype(np.float32)
    for model in (LDA().fit(X, y), QDA().fit(X, y)):
        converted = woodstar.convert(model, "torch")
        for rows in (_rows(rng), _rows(rng).astype(np.float32)):
            for method in _methods(model):
                np.testing.assert_array_equal(getattr(converted, method)(rows),
                                              getattr(model, method)(rows))


def test_in_a_pipeline_after_a_scaler(rng):
    X, y = _data(rng, 3)
    for model in (make_pipeline(StandardScaler(), LDA()).fit(X, y),
                  make_pipeline(StandardScaler(), QDA()).fit(X, y),
                  make_pipeline(StandardScaler(), LDA(n_components=2), LogisticRegression()).fit(X, y)):
        converted = woodstar.convert(model, "torch")
        rows = _rows(rng)
        # (LogisticRegression's container has no predict_log_proba: only the others)
        for method in ("predict", "predict_proba", "predict_log_proba", "decision_function"):
            if hasattr(converted, method):
                np.testing.assert_array_equal(getattr(converted, method)(rows),
                                              getattr(model, method)(rows))
    transformer = make_pipeline(StandardScaler(), LDA(n_components=2)).fit(X, y)
    np.testing.assert_array_equal(woodstar.convert(transformer, "torch").predict(rows),
                                  transformer.predict(rows))


def test_save_and_load(fitted, tmp_path, rng):
    for name in ("lda_svd_multi", "qda_multi"):
        model = fitted[name]
        loaded = woodstar.load(woodstar.convert(model, "torch").save(tmp_path / f"{name}.zip"))
        X = _rows(rng)
        for method in _methods(model):
            np.testing.assert_array_equal(getattr(loaded, method)(X), getattr(model, method)(X))


def test_lsqr_as_a_transformer_step_is_refused(rng):
    X, y = _data(rng, 3)
    # scikit-learn cannot fit this pipeline (its transform raises); built from fitted steps
    lda = LDA(solver="lsqr").fit(X, y)
    model = Pipeline([("lda", lda), ("logistic", LogisticRegression().fit(X[:, :2], y))])
    with pytest.raises(MissingConverter, match=r"Cannot convert LinearDiscriminantAnalysis: "
                                               r"transform with solver is not supported "
                                               r"\(got 'lsqr'\)"):
        woodstar.convert(model, "torch")
