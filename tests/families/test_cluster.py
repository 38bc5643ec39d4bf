"""KMeans, MiniBatchKMeans, BisectingKMeans, MeanShift and the Gaussian mixtures
against scikit-learn.

The CPU route repeats scikit-learn's NumPy and BLAS arithmetic (``_labels_inertia``'s
``|c|^2 + -2 x.c`` in the centres' dtype, ``euclidean_distances``, the mixtures'
``_estimate_log_gaussian_prob`` and ``_logsumexp``), so every output is compared bit
for bit; the Torch program sums its products in its own order: within 1e-12 (labels
identical). A KMeans fitted on float32 keeps float32 (scikit-learn raises for a query
of the other float dtype; woodstar computes in the centres' dtype).
"""

import warnings

import numpy as np
import pytest
from sklearn.cluster import BisectingKMeans, KMeans, MeanShift, MiniBatchKMeans
from sklearn.mixture import BayesianGaussianMixture, GaussianMixture
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import woodstar
from tests._parity import compare_outputs

COVERS_OPS = ("nearest_centers", "bisecting_kmeans", "gaussian_mixture")
COVERS_MODELS = ("BayesianGaussianMixture", "BisectingKMeans", "GaussianMixture", "KMeans", "MeanShift", "MiniBatchKMeans")

MAKERS = {
    "kmeans": lambda: KMeans(4, n_init=1, random_state=0),
    "kmeans32": lambda: KMeans(3, n_init=1, random_state=1),
    "minibatch": lambda: MiniBatchKMeans(3, n_init=1, random_state=0),
    "bisecting": lambda: BisectingKMeans(5, random_state=0),
    "meanshift": lambda: MeanShift(bandwidth=2.0),
    **{f"gmm_{t}": (lambda t=t: GaussianMixture(3, covariance_type=t, random_state=0))
       for t in ("full", "tied", "diag", "spherical")},
    **{f"bgmm_{t}": (lambda t=t: BayesianGaussianMixture(n_components=3, covariance_type=t,
                                                         random_state=0))
       for t in ("full", "tied", "diag", "spherical")},
    "bgmm_dirichlet": lambda: BayesianGaussianMixture(
        n_components=3, weight_concentration_prior_type="dirichlet_distribution", random_state=0),
}
METHODS = ("predict", "transform", "predict_proba", "score_samples")


@pytest.fixture(scope="module")
def data():
    return np.random.default_rng(3).normal(size=(200, 4))


@pytest.fixture(scope="module")
def models(data):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: make().fit(data.astype(np.float32) if name.endswith("32") else data)
                for name, make in MAKERS.items()}


def _queries(rng, name, n=150):
    Q = rng.normal(scale=2.0, size=(n, 4))
    Q[:3] *= 1e3
    return Q.astype(np.float32) if name.endswith("32") else Q


def _methods(model):
    return [m for m in METHODS if hasattr(model, m)]


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_default_route_bit_for_bit(name, models, rng):
    model = models[name]
    c = woodstar.convert(model, "torch")
    Q = _queries(rng, name)
    for method in _methods(model):
        np.testing.assert_array_equal(getattr(c, method)(Q), getattr(model, method)(Q), err_msg=method)
    Q[1, 2] = np.nan
    for method in _methods(model):
        with pytest.raises(ValueError):
            getattr(model, method)(Q)
        with pytest.raises(ValueError):
            getattr(c, method)(Q)


# every op and covariance type once (the compiling backends take seconds each)
BACKEND_CASES = ("kmeans", "kmeans32", "bisecting", "meanshift", "gmm_full", "bgmm_tied",
                 "gmm_diag", "bgmm_spherical")


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_backends(name, models, rng, backend):
    model = models[name]
    config = {"cpu_route": "program"} if backend == "torch" else None
    c = woodstar.convert(model, backend, extra_config=config)
    Q = _queries(rng, name)
    tol = 1e-5 if name.endswith("32") else 1e-12  # float32 arithmetic, as scikit-learn's
    for method in _methods(model):
        got, expected = getattr(c, method)(Q), getattr(model, method)(Q)
        if method == "predict_proba" and not name.endswith("32"):
            _assert_probabilities_close(got, expected, model.score_samples(Q), name)
        else:
            compare_outputs(got, expected, "float64", f"{name}.{method}", tolerance=tol)


def _assert_probabilities_close(got, expected, scores, name):
    """A program's products are Torch's or the exporter's, not NumPy's BLAS, so its
    log-likelihoods may differ from scikit-learn's in the last bit. On the rows scaled
    by 1e3 those are about 1e7, and a probability takes that error relative to itself:
    up to a few units of eps * |log-likelihood| (1e-9 there), beyond 1e-12."""
    ulps = 4 * np.finfo(np.float64).eps * np.maximum(np.abs(scores), 1.0)[:, None]
    bound = 1e-12 + np.maximum(ulps, 1e-12) * np.abs(expected)
    off = np.abs(got - expected) > bound
    assert not off.any(), (f"{name}.predict_proba: {off.sum()} values off, first at "
                           f"{np.argwhere(off)[:3].tolist()}")


def test_pipeline(data, rng):
    model = make_pipeline(StandardScaler(), KMeans(3, n_init=1, random_state=0)).fit(data)
    c = woodstar.convert(model, "torch")
    Q = _queries(rng, "p")
    np.testing.assert_array_equal(c.predict(Q), model.predict(Q))


def test_save_load(models, rng, tmp_path):
    model = models["gmm_full"]
    path = woodstar.convert(model, "torch").save(tmp_path / "gmm.zip")
    Q = _queries(rng, "gmm")
    loaded = woodstar.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(Q), model.predict_proba(Q))
    np.testing.assert_array_equal(loaded.score_samples(Q), model.score_samples(Q))
