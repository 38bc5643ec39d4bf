"""skl2onnx's RadiusNeighborsClassifier/Regressor graphs (the distance Scan, Less than
the radius, Where of the column index or -1, the targets' ArrayFeatureExtractor, a vote
or a mean) against ONNX Runtime running the same graph. ONNX Runtime rejects a call
holding a row with a training row at or beyond the radius (or a NaN distance): its
ArrayFeatureExtractor is given the index -1 there. So a call answers only when every
training row lies within the radius of every row; woodstar then gives ONNX Runtime's
labels, probabilities and values to the bit, and raises where ONNX Runtime does."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from .test_neighbors_graphs import _data

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

OPSET = {"": 17, "ai.onnx.ml": 3}
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]
REJECTED = "rejects this radius-neighbours graph"


def _graph(rng, kind, weights, radius=30.0):
    from sklearn.neighbors import RadiusNeighborsClassifier, RadiusNeighborsRegressor

    X = _data(rng, 90)
    if kind == "classifier":
        model = RadiusNeighborsClassifier(radius, weights=weights)
        model.fit(X, rng.integers(0, 3, size=len(X)))
        options = {id(model): {"zipmap": False}}
    else:
        model = RadiusNeighborsRegressor(radius, weights=weights)
        model.fit(X, (X[:, 0] * 10 + rng.normal(size=len(X)) * 100).astype(np.float32))
        options = None
    return skl2onnx.to_onnx(model, X[:1], target_opset=OPSET, options=options)


def _rows(rng, n):
    """Rows within the radius of every training row; a third integer-valued."""
    rows = (3.0 * rng.normal(size=(n, 5)) + 1.5).astype(np.float32)
    rows[: n // 3] = np.round(rows[: n // 3])
    return rows


def _check(container, graph, rows):
    for call in (rows, rows[:1], rows[1:8]):
        expected = session(graph).run(None, {"X": call})
        got = container.predict(call)
        np.testing.assert_array_equal(got, expected[0].reshape(got.shape), err_msg=len(call))
        if len(expected) == 2:
            np.testing.assert_array_equal(container.predict_proba(call), expected[1],
                                          err_msg=len(call))


def _rejected_calls(rows):
    far, nan = rows[:9].copy(), rows[:9].copy()
    far[4, 2] = 40.0  # beyond the radius of every training row
    nan[6, 1] = np.nan
    return far, nan, far[4:5]


def _assert_rejected(container, graph, rows):
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

    for call in _rejected_calls(rows):
        with pytest.raises(InvalidArgument, match="ArrayFeatureExtractor.*out of range"):
            session(graph).run(None, {"X": call})
        with pytest.raises(ValueError, match=REJECTED):
            container.predict(call)


@pytest.mark.parametrize("kind", ["classifier", "regressor"])
@pytest.mark.parametrize("weights", ["uniform", "distance"])
def test_every_route(rng, kind, weights):
    graph = _graph(rng, kind, weights)
    rows = _rows(rng, 1003)
    for backend, extra in ROUTES:
        container = woodstar.convert(graph, backend, extra_config=extra)
        _check(container, graph, rows)
        _assert_rejected(container, graph, rows)


@pytest.mark.parametrize("backend", ["onnx"])  # sampled on CI as the other frontend cases
@pytest.mark.parametrize("kind, weights", [("classifier", "distance"), ("regressor", "uniform")])
def test_onnx_backend(rng, kind, weights, backend):
    graph = _graph(rng, kind, weights)
    rows = _rows(rng, 1003)
    container = woodstar.convert(graph, "onnx")
    _check(container, graph, rows)
    _assert_rejected(container, graph, rows)


def test_tvm_is_refused(rng):
    from woodstar.backends import all_backends

    if not all_backends()["tvm"].is_available()[0]:
        pytest.skip("tvm is not installed")
    with pytest.raises(MissingConverter, match="neighbours.*tvm.*NaN"):
        woodstar.convert(_graph(rng, "regressor", "uniform"), "tvm")


@pytest.mark.parametrize("route", [None, {"cpu_route": "program"}])
def test_small_batches_keep_the_calls_order(rng, route):
    """The mean adds every training row's target (90 of them) in an order that depends
    on a row's place in the call, so the call is never split into batches."""
    graph = _graph(rng, "regressor", "distance")
    rows = _rows(rng, 101)
    expected = session(graph).run(None, {"X": rows})[0]
    container = woodstar.convert(graph, "torch", extra_config=dict(route or {}, batch_size=7))
    np.testing.assert_array_equal(container.predict(rows), expected)


def test_other_fill_values_are_refused(rng):
    from onnx import helper

    graph = _graph(rng, "regressor", "uniform")
    for node in graph.graph.node:
        if node.op_type == "ConstantOfShape" and node.attribute:
            node.attribute[0].CopyFrom(helper.make_attribute(
                "value", helper.make_tensor("value", 1, [1], [-2.0])))
    with pytest.raises(MissingConverter, match="ConstantOfShape.*fill value"):
        woodstar.convert(graph, "torch")


def test_saved_and_loaded(rng, tmp_path):
    graph = _graph(rng, "classifier", "distance")
    rows = _rows(rng, 50)
    woodstar.convert(graph, "torch").save(str(tmp_path / "radius.zip"))
    loaded = woodstar.load(str(tmp_path / "radius.zip"))
    _check(loaded, graph, rows)
    _assert_rejected(loaded, graph, rows)
