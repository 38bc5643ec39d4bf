"""skl2onnx's graphs of PoissonRegressor, GammaRegressor and TweedieRegressor (MatMul by
a constant vector, Add, Exp for a log link, Reshape) against ONNX Runtime running the
same graph, to the bit: on the CPU route, the Torch program and torch.jit, on rows
holding NaN, infinities, huge, tiny and subnormal values and zeros of both signs,
1 row, a few rows and over a thousand."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_vector_product",)
OPSETS = {"": 17, "ai.onnx.ml": 3}
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]
EDGES = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-40, -1e-40, 0.0, -0.0, 1e-30],
                 np.float32)


def edge_rows(rng, n_rows, n_features, scale=2.0, share=0.05):
    X = (scale * rng.normal(size=(n_rows, n_features))).astype(np.float32)
    mask = rng.random(X.shape) < share
    X[mask] = rng.choice(EDGES, size=int(mask.sum()))
    return X


def _same(got, expected, what):
    assert got.shape == expected.shape, what
    np.testing.assert_array_equal(got, expected, err_msg=what)
    # assert_array_equal takes -0 for +0: the signs of zeros must agree too
    zeros = expected == 0
    np.testing.assert_array_equal(np.signbit(got[zeros]), np.signbit(expected[zeros]), err_msg=what)


def _check(graph, X, routes=ROUTES):
    expected_all = session(graph).run(None, {graph.graph.input[0].name: X})[0]
    for backend, extra in routes:
        container = woodstar.convert(graph, backend, extra_config=extra)
        for rows in (X, X[:1], X[1:8]):
            expected = session(graph).run(None, {graph.graph.input[0].name: rows})[0]
            _same(container.predict(rows), expected, f"{backend} {extra} on {len(rows)} rows")
    return expected_all


def _fitted(name, rng, n_features):
    from sklearn.linear_model import GammaRegressor, PoissonRegressor, TweedieRegressor

    X = rng.normal(size=(200, n_features)).astype(np.float32)
    y = np.exp(0.3 * X.sum(axis=1) + 0.2 * rng.normal(size=200)) + 0.05
    model = {"poisson": PoissonRegressor(alpha=0.01), "gamma": GammaRegressor(alpha=0.01),
             "tweedie-1.5": TweedieRegressor(power=1.5, alpha=0.01),
             "tweedie-0": TweedieRegressor(power=0, alpha=0.01)}[name]
    return model.fit(X, y)


def _graph(model, n_features):
    return skl2onnx.to_onnx(model, np.zeros((1, n_features), np.float32), target_opset=OPSETS)


@pytest.mark.parametrize("n_features", [1, 3, 6, 13, 37])
@pytest.mark.parametrize("name", ["poisson", "gamma", "tweedie-1.5", "tweedie-0"])
def test_glm_graphs(rng, name, n_features):
    graph = _graph(_fitted(name, rng, n_features), n_features)
    ops = [n.op_type for n in graph.graph.node]
    assert ops[0] == "MatMul" and ("Exp" in ops) == (name != "tweedie-0"), ops
    X = edge_rows(rng, 1200, n_features, share=min(0.05, 0.5 / n_features))
    X[:40] = rng.uniform(-60, 60, size=(40, n_features)).astype(np.float32)  # exp overflows
    expected = _check(graph, X)
    assert np.isfinite(expected).sum() > 600  # most rows are ordinary numbers


def _vector_graph(weights):
    from onnx import TensorProto, helper, numpy_helper

    d = len(weights)
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "w"], ["y"])], "matvec",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, d])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None])],
        [numpy_helper.from_array(np.asarray(weights, np.float32), "w")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("n_features", list(range(1, 19)) + [31, 32, 33, 64, 130, 257])
def test_matmul_by_a_vector_every_width(rng, n_features):
    """The summation order (runs of four, a pair, a single term) for each remainder
    modulo 4 and across MLAS's K slices; zeros of both signs (the kernel's ``+ 0``)."""
    weights = rng.normal(size=n_features).astype(np.float32)
    weights[rng.random(n_features) < 0.2] = -0.0
    X = edge_rows(rng, 1500, n_features, scale=10.0, share=0.1)
    X[:100] = rng.choice(np.float32([0.0, -0.0, 1e-45, -1e-45]), size=(100, n_features))
    _check(_vector_graph(weights), X, ROUTES[:2])


def test_matmul_by_a_vector_on_torch_jit(rng):
    weights = rng.normal(size=11).astype(np.float32)
    _check(_vector_graph(weights), edge_rows(rng, 1100, 11), ROUTES[2:])


def test_a_double_vector_is_refused():
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        [helper.make_node("Cast", ["X"], ["Xd"], to=TensorProto.DOUBLE),
         helper.make_node("MatMul", ["Xd", "w"], ["y"])], "matvec",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("y", TensorProto.DOUBLE, [None])],
        [numpy_helper.from_array(np.ones(3), "w")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MissingConverter, match="MatMul"):
        woodstar.convert(model, "torch")


def test_a_vector_of_the_wrong_length_is_refused():
    model = _vector_graph(np.ones(4, np.float32))
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 5
    with pytest.raises(MissingConverter, match="length 4"):
        woodstar.convert(model, "torch")


def _available(name):
    from woodstar.backends import all_backends

    if not all_backends()[name].is_available()[0]:
        pytest.skip(f"{name} is not installed")


@pytest.mark.parametrize("name", ["poisson", "tweedie-0"])
def test_onnx_backend_equals_onnx_runtime(rng, name):
    _available("onnx")
    graph = _graph(_fitted(name, rng, 7), 7)
    X = edge_rows(rng, 1100, 7)
    _check(graph, X, [("onnx", None)])


def test_tvm_backend(rng):
    """The identity link (MatMul and Add) is equal on TVM; a log link is refused at
    convert time by its Exp."""
    _available("tvm")
    identity = _graph(_fitted("tweedie-0", rng, 7), 7)
    _check(identity, edge_rows(rng, 1100, 7), [("tvm", None)])
    with pytest.raises(MissingConverter, match="Exp.*tvm"):
        woodstar.convert(_graph(_fitted("poisson", rng, 7), 7), "tvm")


def test_saved_and_loaded(rng, tmp_path):
    graph = _graph(_fitted("gamma", rng, 5), 5)
    container = woodstar.convert(graph, "torch")
    path = tmp_path / "gamma.zip"
    container.save(str(path))
    rows = edge_rows(rng, 50, 5)
    np.testing.assert_array_equal(woodstar.load(str(path)).predict(rows), container.predict(rows))
