"""skl2onnx's GaussianMixture (every covariance type) and BayesianGaussianMixture graphs
against ONNX Runtime running the same graph: the labels (ArgMax of each component's
weighted log-likelihood, as ONNX Runtime's (n, 1) int64 column) and the probabilities
(Exp(jll - ReduceLogSumExp(jll))), to the bit, on the CPU route, the Torch program
and torch.jit, on fresh rows holding NaN, infinities and huge values, 1 row, a few
and over a thousand."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

OPSETS = {"": 17, "ai.onnx.ml": 3}
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]
EDGES = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-40, 0.0, -0.0], np.float32)


def _rows(rng, n_rows, n_features, share):
    X = (4 * rng.normal(size=(n_rows, n_features))).astype(np.float32)
    mask = rng.random(X.shape) < share
    X[mask] = rng.choice(EDGES, size=int(mask.sum()))
    return X


def _fitted(kind, rng, n_features, n_components):
    from sklearn.mixture import BayesianGaussianMixture, GaussianMixture

    X = rng.normal(size=(400, n_features)).astype(np.float32)
    X += 3 * rng.integers(0, n_components, size=400)[:, None].astype(np.float32)
    seed = int(rng.integers(0, 2 ** 31))
    if kind == "bayesian":
        model = BayesianGaussianMixture(n_components=n_components, random_state=seed)
    else:
        model = GaussianMixture(n_components, covariance_type=kind, random_state=seed)
    return model.fit(X), X


def _graph(model, n_features):
    return skl2onnx.to_onnx(model, np.zeros((1, n_features), np.float32), target_opset=OPSETS)


def _check(graph, X, routes=ROUTES):
    for backend, extra in routes:
        container = woodstar.convert(graph, backend, extra_config=extra)
        for rows in (X, X[:1], X[1:8]):
            labels, proba = session(graph).run(None, {"X": rows})
            what = f"{backend} {extra} on {len(rows)} rows"
            got = container.predict(rows)
            assert got.shape == labels.shape and got.dtype == labels.dtype, what
            np.testing.assert_array_equal(got, labels, err_msg=what)
            got = container.predict_proba(rows)
            assert got.shape == proba.shape, what
            np.testing.assert_array_equal(got, proba, err_msg=what)


@pytest.mark.parametrize("n_features,n_components", [(2, 2), (5, 3), (9, 5)])
@pytest.mark.parametrize("kind", ["full", "tied", "diag", "spherical", "bayesian"])
def test_mixture_graphs(rng, kind, n_features, n_components):
    model, X = _fitted(kind, rng, n_features, n_components)
    graph = _graph(model, n_features)
    rows = _rows(rng, 1200, n_features, share=0.2 / n_features)
    rows[:50] = X[:50]  # rows the model knows: probabilities far from 0 and 1
    rows[50:60] = model.means_[rng.integers(0, n_components, size=10)]
    labels = session(graph).run(None, {"X": rows})[0]
    assert len(np.unique(labels)) > 1
    _check(graph, rows)


@pytest.mark.parametrize("kind", ["full", "spherical"])
def test_score_samples_option(rng, kind):
    """skl2onnx's ``score_samples`` option: ReduceLogSumExp(jll) as a third output,
    given by ``score_samples`` (one-dimensional, as scikit-learn's)."""
    model, X = _fitted(kind, rng, 3, 3)
    graph = skl2onnx.to_onnx(model, X[:1], options={id(model): {"score_samples": True}},
                             target_opset=OPSETS)
    rows = _rows(rng, 1100, 3, share=0.05)
    for backend, extra in ROUTES:
        container = woodstar.convert(graph, backend, extra_config=extra)
        for part in (rows, rows[:1]):
            labels, proba, scores = session(graph).run(None, {"X": part})
            np.testing.assert_array_equal(container.predict(part), labels)
            np.testing.assert_array_equal(container.predict_proba(part), proba)
            np.testing.assert_array_equal(container.score_samples(part), scores[:, 0])


def test_gemm_with_beta_zero_over_wide_rows(rng):
    """The diag graph's Gemm with beta 0 over more than 256 features: MLAS's second K
    slice adds to the first by a fused multiply-add."""
    model, _ = _fitted("diag", rng, 300, 2)
    _check(_graph(model, 300), _rows(rng, 1100, 300, share=0.0005), ROUTES[:2])


def test_predicted_labels_match_scikit_learn_on_ordinary_rows(rng):
    """A sanity check against the source of the graph: on rows far from the
    boundaries the labels are scikit-learn's too."""
    model, X = _fitted("full", rng, 3, 3)
    container = woodstar.convert(_graph(model, 3), "torch")
    proba = model.predict_proba(X)
    clear = proba.max(axis=1) > 0.999
    np.testing.assert_array_equal(container.predict(X[clear])[:, 0], model.predict(X[clear]))


def _available(name):
    from woodstar.backends import all_backends

    if not all_backends()[name].is_available()[0]:
        pytest.skip(f"{name} is not installed")


@pytest.mark.parametrize("backend", ["onnx"])  # sampled on CI as the other frontend cases
def test_onnx_backend_equals_onnx_runtime(rng, backend):
    _available("onnx")
    for kind in ("full", "diag"):
        model, X = _fitted(kind, rng, 4, 3)
        rows = _rows(rng, 1100, 4, share=0.05)
        rows[:50] = X[:50]
        _check(_graph(model, 4), rows, [("onnx", None)])


@pytest.mark.parametrize("kind,reason", [("full", "ReduceLogSumExp"), ("diag", "Gemm with beta 0")])
def test_tvm_backend_is_refused_at_convert_time(rng, kind, reason):
    _available("tvm")
    model, _ = _fitted(kind, rng, 4, 3)
    with pytest.raises(MissingConverter, match=f"{reason}.*tvm"):
        woodstar.convert(_graph(model, 4), "tvm")


def test_saved_and_loaded(rng, tmp_path):
    model, X = _fitted("spherical", rng, 3, 2)
    container = woodstar.convert(_graph(model, 3), "torch")
    path = tmp_path / "mixture.zip"
    container.save(str(path))
    loaded = woodstar.load(str(path))
    rows = _rows(rng, 40, 3, share=0.1)
    np.testing.assert_array_equal(loaded.predict(rows), container.predict(rows))
    np.testing.assert_array_equal(loaded.predict_proba(rows), container.predict_proba(rows))
