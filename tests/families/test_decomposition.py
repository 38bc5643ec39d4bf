"""Decomposition and projection estimators: PCA (whiten), IncrementalPCA, KernelPCA
(every kernel), TruncatedSVD, FastICA, the random projections and PLSRegression,
bare and as pipeline steps (NMF and MiniBatchNMF: tests/families/test_nmf_exact.py).

The default CPU route repeats scikit-learn's NumPy expressions, so ``transform`` is
its answer to the bit; the Torch programs sum the products in their own order."""

import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn import decomposition as dec  # noqa: E402
from sklearn import random_projection as rp  # noqa: E402
from sklearn.cross_decomposition import PLSRegression  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402

from ..conftest import BASE_SEED  # noqa: E402
from .._parity import assert_parity  # noqa: E402

COVERS_OPS = ("projection", "kernel_pca")
COVERS_MODELS = ("FastICA", "GaussianRandomProjection", "IncrementalPCA", "KernelPCA", "PCA", "PLSRegression", "SparseRandomProjection", "TruncatedSVD")

N_FEATURES = 6
MODELS = {
    "pca": lambda: dec.PCA(3),
    "pca_whiten": lambda: dec.PCA(3, whiten=True),
    "pca_full_whiten": lambda: dec.PCA(whiten=True, svd_solver="full"),
    "incremental_pca": lambda: dec.IncrementalPCA(3, whiten=True),
    "truncated_svd": lambda: dec.TruncatedSVD(3, random_state=0),
    "fast_ica": lambda: dec.FastICA(3, random_state=0, max_iter=400),
    "fast_ica_no_whiten": lambda: dec.FastICA(3, whiten=False, random_state=0, max_iter=400),
    "kpca_linear": lambda: dec.KernelPCA(3, kernel="linear"),
    "kpca_poly": lambda: dec.KernelPCA(3, kernel="poly", gamma=0.1, coef0=0.5),
    "kpca_rbf": lambda: dec.KernelPCA(3, kernel="rbf", gamma=0.2),
    "kpca_sigmoid": lambda: dec.KernelPCA(3, kernel="sigmoid", gamma=0.05),
    "kpca_cosine": lambda: dec.KernelPCA(3, kernel="cosine"),
    "gaussian_rp": lambda: rp.GaussianRandomProjection(4, random_state=0),
    "sparse_rp": lambda: rp.SparseRandomProjection(4, density=0.5, random_state=0),
    "pls": lambda: PLSRegression(2),
}


def _train(rng, n=200):
    return rng.normal(size=(n, N_FEATURES)) * np.arange(1, N_FEATURES + 1) + 0.5


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(BASE_SEED)
    X = _train(rng)
    y = np.c_[X[:, 0] - 2 * X[:, 1] + rng.normal(size=len(X)), X[:, 2] + X[:, 3]]
    models = {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # FastICA convergence: irrelevant to parity
        for name, make in MODELS.items():
            models[name] = make().fit(X, y[:, 0]) if name == "pls" else make().fit(X)
        models["pls_two_targets"] = PLSRegression(2).fit(X, y)
        models["kpca_precomputed"] = dec.KernelPCA(3, kernel="precomputed").fit(X[:40] @ X[:40].T)
        models["kpca_precomputed"].train_rows_ = X[:40]
    return models


def _rows(model, rng, far=False):
    X = rng.normal(scale=100.0 if far else 2.0, size=(60, N_FEATURES))
    if hasattr(model, "train_rows_"):  # a precomputed kernel: rows against the training rows
        X = X @ model.train_rows_.T
    return X


def _methods(model):
    return [m for m in ("predict", "transform") if hasattr(model, m)]


def _close(got, expected, what):
    """Within 1e-12 of the output's largest magnitude: the Torch program sums the same
    products in another order, which moves a result by a few units of the largest
    term's last bit, not of the (possibly cancelled) result's."""
    scale = max(1.0, float(np.max(np.abs(expected))))
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12 * scale, err_msg=what)


@pytest.mark.parametrize("name", [*MODELS, "pls_two_targets", "kpca_precomputed"])
def test_default_route_is_bit_for_bit(fitted, name, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch")
    for far in (False, True):
        X = _rows(model, rng, far)
        for method in _methods(model):
            np.testing.assert_array_equal(getattr(converted, method)(X), getattr(model, method)(X),
                                          err_msg=f"{name}.{method}")
    # float32 rows: scikit-learn keeps them float32 where it does (PCA, FastICA, ...)
    X32 = _rows(model, rng).astype(np.float32)
    for method in _methods(model):
        np.testing.assert_array_equal(getattr(converted, method)(X32), getattr(model, method)(X32))


def _check_program(converted, model, rng, name):
    for far in (False, True):
        X = _rows(model, rng, far)
        for method in _methods(model):
            _close(getattr(converted, method)(X), getattr(model, method)(X), f"{name}.{method}")


@pytest.mark.parametrize("name", [*MODELS, "pls_two_targets", "kpca_precomputed"])
def test_torch_program_within_1e_12(fitted, name, rng):
    model = fitted[name]
    _check_program(woodstar.convert(model, "torch", extra_config={"cpu_route": "program"}),
                   model, rng, name)


# one model per op variant on every backend (the compiling ones take seconds a model)
@pytest.mark.parametrize("name", ["pca_whiten", "fast_ica", "kpca_rbf", "kpca_cosine",
                                  "sparse_rp", "pls_two_targets"])
def test_every_backend_within_1e_12(fitted, name, backend, rng):
    _check_program(woodstar.convert(fitted[name], backend), fitted[name], rng, name)


@pytest.mark.parametrize("name", ["pca_whiten", "kpca_rbf", "pls", "sparse_rp"])
def test_nan_and_infinity_are_refused_as_scikit_learn_refuses_them(fitted, name, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch")
    for bad in (np.nan, np.inf):
        X = _rows(model, rng)
        X[3, 1] = bad
        assert assert_parity(converted, model, X, "float64", methods=_methods(model)) == 0


def test_float32_fitted_models(rng):
    X = _train(rng).astype(np.float32)
    for model in (dec.PCA(3, whiten=True).fit(X), dec.KernelPCA(3, kernel="poly").fit(X),
                  rp.SparseRandomProjection(3, density=0.5, random_state=0).fit(X)):
        converted = woodstar.convert(model, "torch")
        for rows in (_rows(model, rng), _rows(model, rng).astype(np.float32)):
            np.testing.assert_array_equal(converted.transform(rows), model.transform(rows))


@pytest.mark.parametrize("name", ["pca_whiten", "kpca_poly", "fast_ica", "pls"])
def test_in_a_pipeline_after_a_scaler(fitted, name, rng):
    X = _train(rng)
    step = sklearn.base.clone(fitted[name])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        if name == "pls":
            pipe = make_pipeline(StandardScaler(), step).fit(X, X[:, 0] - X[:, 1])
        else:
            pipe = make_pipeline(StandardScaler(), step).fit(X)
        models = [pipe]
        if name != "pls":  # PLSRegression's fit_transform gives (x_scores, y_scores) in a Pipeline
            models.append(make_pipeline(StandardScaler(), sklearn.base.clone(fitted[name]),
                                        LogisticRegression()).fit(X, (X[:, 0] > 0.5).astype(int)))
    for model in models:
        converted = woodstar.convert(model, "torch")
        rows = _rows(step, rng)
        for method in [m for m in ("predict", "predict_proba", "transform") if hasattr(model, m)]:
            np.testing.assert_array_equal(getattr(converted, method)(rows),
                                          getattr(model, method)(rows))
        program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
        for method in [m for m in ("predict_proba", "transform") if hasattr(model, m)]:
            _close(getattr(program, method)(rows), getattr(model, method)(rows), method)


def test_save_and_load(fitted, tmp_path, rng):
    for name in ("kpca_rbf", "sparse_rp", "pls_two_targets"):
        model = fitted[name]
        path = woodstar.convert(model, "torch").save(tmp_path / f"{name}.zip")
        loaded = woodstar.load(path)
        X = _rows(model, rng)
        for method in _methods(model):
            np.testing.assert_array_equal(getattr(loaded, method)(X), getattr(model, method)(X))


def test_unsupported_kernel_pca_options_are_refused(rng):
    X = _train(rng)
    model = dec.KernelPCA(2, kernel=lambda a, b: float(a @ b)).fit(X[:30])
    with pytest.raises(MissingConverter, match=r"Cannot convert KernelPCA: kernel is not supported "
                                               r"\(got '<lambda>'\)"):
        woodstar.convert(model, "torch")
    model = dec.KernelPCA(2, kernel="rbf").fit(X.astype(np.float32))
    with pytest.raises(MissingConverter, match=r"the rbf kernel on training data of dtype is not "
                                               r"supported \(got 'float32'\)"):
        woodstar.convert(model, "torch")
