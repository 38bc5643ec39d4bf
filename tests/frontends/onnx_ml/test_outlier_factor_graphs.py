"""skl2onnx's LocalOutlierFactor(novelty=True) graph (a Scan of pairwise distances,
TopK, Gather of the training rows' k-distances and densities, ReduceMean) against ONNX
Runtime running the same graph: labels, decision_function and score_samples to the
bit on the CPU route, the eager program, torch.jit and the onnx backend, with
integer-valued rows (equal distances: TopK's order among ties picks the neighbours
whose densities count), NaN and infinite rows, 1 row, a few rows and 1 003 rows."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from .test_neighbors_graphs import _data, _rows

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_outlier_factor",)
OPSET = {"": 17, "ai.onnx.ml": 3}
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]


def _graph(rng, k=20, metric="minkowski", score_samples=True, n_train=90):
    from sklearn.neighbors import LocalOutlierFactor

    X = _data(rng, n_train)
    model = LocalOutlierFactor(k, metric=metric, novelty=True).fit(X)
    options = {id(model): {"score_samples": True}} if score_samples else None
    return skl2onnx.to_onnx(model, X[:1], target_opset=OPSET, options=options), X


def _test_rows(rng, X, k, power=2):
    rows = _rows(rng, 1003)
    rows[500:] = np.round(rows[500:])  # integer-valued: ties among the distances
    difference = np.abs(rows[500:, None, :] - X[None]) ** power
    kth = np.sort(difference.sum(axis=2), axis=1)[:, k - 1:k + 1]
    assert (kth[:, 0] == kth[:, 1]).sum() > 20  # the k-th neighbour is chosen among ties
    return rows


def _check(container, graph, rows, score_samples=True):
    for call in (rows, rows[:1], rows[1:8], rows[700:701]):
        expected = session(graph).run(None, {"X": call})
        what = f"{len(call)} rows"
        np.testing.assert_array_equal(container.predict(call), expected[0], err_msg=what)
        np.testing.assert_array_equal(container.decision_function(call), expected[1][:, 0],
                                      err_msg=what)
        if score_samples:
            np.testing.assert_array_equal(container.score_samples(call), expected[2][:, 0],
                                          err_msg=what)


@pytest.mark.parametrize("k, metric", [(20, "minkowski"), (7, "minkowski"), (5, "manhattan")])
def test_every_route(rng, k, metric):
    graph, X = _graph(rng, k, metric)
    rows = _test_rows(rng, X, k, 1 if metric == "manhattan" else 2)
    labels = session(graph).run(None, {"X": rows})[0]
    assert (labels == -1).any() and (labels == 1).any()  # both decisions occur
    for backend, extra in ROUTES:
        _check(woodstar.convert(graph, backend, extra_config=extra), graph, rows)


def test_without_score_samples(rng):
    graph, X = _graph(rng, 10, score_samples=False)
    container = woodstar.convert(graph, "torch")
    assert not hasattr(container, "score_samples")
    _check(container, graph, _test_rows(rng, X, 10), score_samples=False)


def test_onnx_backend(rng):
    """The exported program holds the graph's own TopK: the same neighbours."""
    graph, X = _graph(rng, 7)
    _check(woodstar.convert(graph, "onnx"), graph, _test_rows(rng, X, 7))


def test_tvm_is_refused(rng):
    from woodstar.backends import all_backends

    if not all_backends()["tvm"].is_available()[0]:
        pytest.skip("tvm is not installed")
    graph, _ = _graph(rng, 5, n_train=20)
    with pytest.raises(MissingConverter, match="LocalOutlierFactor.*tvm.*NaN"):
        woodstar.convert(graph, "tvm")


@pytest.mark.parametrize("route", [None, {"cpu_route": "program"}])
def test_small_batches_keep_the_calls_order(rng, route):
    """ReduceMean over k = 7 neighbours adds in an order that depends on a row's place
    in the call, so such a call is never split into batches."""
    graph, X = _graph(rng, 7)
    rows = rng.normal(size=(101, 5)).astype(np.float32)
    expected = session(graph).run(None, {"X": rows})
    container = woodstar.convert(graph, "torch", extra_config=dict(route or {}, batch_size=7))
    np.testing.assert_array_equal(container.score_samples(rows), expected[2][:, 0])


def test_saved_and_loaded(rng, tmp_path):
    graph, X = _graph(rng, 7)
    rows = _test_rows(rng, X, 7)
    container = woodstar.convert(graph, "torch")
    container.save(str(tmp_path / "lof.zip"))
    _check(woodstar.load(str(tmp_path / "lof.zip")), graph, rows)


def test_other_thresholds_are_refused(rng):
    from onnx import numpy_helper

    graph, _ = _graph(rng, 5, n_train=20)
    for init in graph.graph.initializer:
        if numpy_helper.to_array(init).dtype == np.float32 and init.name.startswith("predict_Less"):
            init.CopyFrom(numpy_helper.from_array(np.array([0.5], np.float32), init.name))
    with pytest.raises(MissingConverter, match="threshold of the decision"):
        woodstar.convert(graph, "torch")
