"""skl2onnx's QuantileTransformer graph (uniform output; n_quantiles 5, 20, 100 and the default 1000)
against ONNX Runtime running the same graph, to the bit: on the CPU route, the Torch
program and torch.jit, on random rows, rows at the quantiles (the end ones too), NaN,
infinities, huge values and zeros of both signs, 1 row, a few rows and over a
thousand. Graphs that differ from skl2onnx's are refused by name."""

import functools
import os

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_quantile",)
OPSETS = {"": 17, "ai.onnx.ml": 3}
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]
EDGES = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-40, 0.0, -0.0], np.float32)
SCALES = np.array([1.0, 30.0, 0.01], np.float32)


@functools.lru_cache(maxsize=None)
def _graph(n_quantiles, ties=False):
    """A fitted model and its graph (skl2onnx takes minutes to write the search for
    1000 quantiles, so each is written once); ``n_quantiles`` None: the defaults
    (1000 quantiles, subsample 10_000)."""
    from sklearn.preprocessing import QuantileTransformer

    rng = np.random.default_rng(11)
    X = (rng.normal(size=(1500, 3)) * SCALES).astype(np.float32)
    if ties:  # repeated values: equal quantiles, a zero-width step
        X = np.round(X * 2) / 2
    kwargs = {} if n_quantiles is None else {"n_quantiles": n_quantiles}
    model = QuantileTransformer(random_state=0, **kwargs).fit(X)
    return model, skl2onnx.to_onnx(model, X[:1], target_opset=OPSETS)


def _rows(model, rng, n_rows):
    X = (1.3 * rng.normal(size=(n_rows, 3)) * SCALES).astype(np.float32)
    quantiles = model.quantiles_.astype(np.float32)
    at = rng.random(X.shape) < 0.15  # exactly at a quantile, the first and last included
    X[at] = quantiles[rng.integers(0, len(quantiles), size=X.shape), np.arange(3)][at]
    edge = rng.random(X.shape) < 0.05
    X[edge] = rng.choice(EDGES, size=int(edge.sum()))
    X[0] = quantiles[0]
    X[1] = quantiles[-1]
    return X


def _check(graph, X):
    for backend, extra in ROUTES:
        container = woodstar.convert(graph, backend, extra_config=extra)
        for rows in (X, X[:1], X[1:8]):
            expected = session(graph).run(None, {"X": rows})[0]
            got = container.predict(rows)
            what = f"{backend} {extra} on {len(rows)} rows"
            assert got.shape == expected.shape and got.dtype == expected.dtype, what
            np.testing.assert_array_equal(got, expected, err_msg=what)
            zeros = expected == 0  # assert_array_equal takes -0 for +0
            np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]),
                                          err_msg=what)


# skl2onnx takes minutes (on two shared cores, about 280 s) to write the 10-round search
# of the default 1000 quantiles: that case runs with WOODSTAR_FULL_MATRIX=1
_FULL = pytest.mark.skipif(os.environ.get("WOODSTAR_FULL_MATRIX") != "1",
                           reason="skl2onnx writes this graph in minutes (WOODSTAR_FULL_MATRIX=1)")


@pytest.mark.parametrize("n_quantiles, ties", [(5, False), (20, False), (20, True), (100, False),
                                               pytest.param(None, False, marks=_FULL)])
def test_quantile_transformer_graph_matches_onnx_runtime(n_quantiles, ties):
    rng = np.random.default_rng(5 if n_quantiles is None else n_quantiles + ties)
    model, graph = _graph(n_quantiles, ties)
    assert model.quantiles_.shape[0] == (n_quantiles or 1000)
    X = _rows(model, rng, 1200)
    _check(graph, X)
    # the graph clips at the ends: 0.0 at and below the first quantile, 1.0 at and above
    # the last; NaN stays NaN
    out = woodstar.convert(graph, "torch").predict(X)
    finite = np.isfinite(X)
    assert np.isnan(out[np.isnan(X)]).all()
    assert (out[finite] >= 0).all() and (out[finite] <= 1).all()


def test_normal_output_has_no_graph_to_read():
    from sklearn.preprocessing import QuantileTransformer

    X = np.random.default_rng(0).normal(size=(50, 2)).astype(np.float32)
    model = QuantileTransformer(n_quantiles=10, output_distribution="normal").fit(X)
    with pytest.raises(RuntimeError, match="normal"):  # skl2onnx's own refusal
        skl2onnx.to_onnx(model, X[:1], target_opset=OPSETS)


def _edited(graph, edit):
    graph = onnx.ModelProto.FromString(graph.SerializeToString())
    edit(graph)
    return graph


def test_a_changed_graph_is_refused():
    _, graph = _graph(5)

    def halve_differently(g):  # the final 0.5 becomes 0.25
        for init in g.graph.initializer:
            array = onnx.numpy_helper.to_array(init)
            if array.dtype == np.float32 and array.shape == () and array == 0.5:
                init.CopyFrom(onnx.numpy_helper.from_array(np.float32(0.25), init.name))

    def compare_otherwise(g):  # one GreaterOrEqual of the search becomes Greater
        next(n for n in g.graph.node if n.op_type == "GreaterOrEqual").op_type = "Greater"

    for edit in (halve_differently, compare_otherwise):
        with pytest.raises(MissingConverter, match="QuantileTransformer graph"):
            woodstar.convert(_edited(graph, edit), "torch")


def test_isnan_alone_is_refused():
    from onnx import TensorProto, helper

    nodes = [helper.make_node("IsNaN", ["X"], ["m"]),
             helper.make_node("Where", ["m", "zero", "X"], ["Y"])]
    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 2])],
        [onnx.numpy_helper.from_array(np.float32(0.0), "zero")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MissingConverter, match="IsNaN"):
        woodstar.convert(model, "torch")


@pytest.mark.parametrize("backend_name", ["onnx", "tvm"])
def test_quantile_graph_on_exporting_backends(backend_name):
    from woodstar.backends import all_backends

    available, reason = all_backends()[backend_name].is_available()
    if not available:
        pytest.skip(f"backend {backend_name}: {reason}")
    model, graph = _graph(20)
    X = _rows(model, np.random.default_rng(2), 300)
    container = woodstar.convert(graph, backend_name)
    for rows in (X, X[:1]):
        expected = session(graph).run(None, {"X": rows})[0]
        np.testing.assert_array_equal(container.predict(rows), expected)
