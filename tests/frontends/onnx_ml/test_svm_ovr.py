"""skl2onnx's one-vs-rest SVC graph (``decision_function_shape="ovr"``): the
SVMClassifier's pairwise scores turned into per-class scores by plain operators (Less,
Neg, Cast, ArrayFeatureExtractor, Sum, Add, Concat, Abs, Mul, Div), each an IEEE
float32 operation; against ONNX Runtime on fresh rows with NaN and infinities."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import assert_calls_match, session
from .test_svm import _data, _graph, _kernel_args, _rows
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("skl2onnx")
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

COVERS_OPS = ("onnx_elementwise",)
OVR_OPERATORS = {"SVMClassifier", "Cast", "Less", "Neg", "ArrayFeatureExtractor", "Sum", "Add",
                 "Concat", "Abs", "Mul", "Div", "Identity"}


def _ovr_svc(rng, kernel, extra, n_classes, zipmap=False):
    from sklearn.svm import SVC

    X, y = _data(rng, n_rows=240)
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    model = SVC(decision_function_shape="ovr", **_kernel_args(rng, kernel, extra)).fit(X, labels)
    return _graph(model, X, zipmap=zipmap)


def test_the_graph_holds_the_listed_operators(rng):
    graph = _ovr_svc(rng, "rbf", {}, 3)
    assert {n.op_type for n in graph.graph.node} == OVR_OPERATORS


@FAST_BACKENDS
@pytest.mark.parametrize("kernel,extra", [("linear", {}), ("rbf", {}), ("poly", {"degree": 3})],
                         ids=["linear", "rbf", "poly3"])
@pytest.mark.parametrize("n_classes", [3, 5])
def test_ovr_svc(backend, rng, kernel, extra, n_classes):
    check(_ovr_svc(rng, kernel, extra, n_classes), _rows(rng, 300, 5), backend)


@FAST_BACKENDS
def test_ovr_svc_with_zipmap(backend, rng):
    check(_ovr_svc(rng, "rbf", {}, 4, zipmap=True), _rows(rng, 200, 5), backend)


def test_ovr_svc_one_row_and_two_rows(rng):
    model = _ovr_svc(rng, "linear", {}, 4)
    containers = [woodstar.convert(model, "torch"),
                  woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})]
    assert_calls_match(model, _rows(rng, 12, 5), containers)


# ------------------------------------------------------- each operator on its own
def _plain_graph(nodes, width, out_width, initializers=()):
    from onnx import TensorProto, helper, numpy_helper

    graph = helper.make_graph(
        nodes, "plain", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, out_width])],
        [numpy_helper.from_array(np.asarray(v), k) for k, v in initializers])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _operator_graphs():
    from onnx import TensorProto, helper

    node = helper.make_node
    col = [("i0", np.array([0], np.int64)), ("i2", np.array([2], np.int64))]
    pick = [helper.make_node("ArrayFeatureExtractor", ["X", "i0"], ["a"], domain="ai.onnx.ml"),
            helper.make_node("ArrayFeatureExtractor", ["X", "i2"], ["c"], domain="ai.onnx.ml")]
    return {
        "less": (_plain_graph([node("Less", ["X", "k"], ["b"]),
                               node("Cast", ["b"], ["Y"], to=TensorProto.FLOAT)], 4, 4,
                              [("k", np.float32(0.25))]), 4),
        "greater": (_plain_graph([node("Greater", ["X", "k"], ["b"]),
                                  node("Cast", ["b"], ["Y"], to=TensorProto.FLOAT)], 4, 4,
                                 [("k", np.array([0.0, -1.0, 1.0, 0.5], np.float32))]), 4),
        "neg_abs": (_plain_graph([node("Neg", ["X"], ["n"]), node("Abs", ["n"], ["a"]),
                                  node("Sub", ["a", "X"], ["Y"])], 4, 4), 4),
        "sum3": (_plain_graph(pick + [node("Sum", ["X", "a", "c"], ["Y"])], 4, 4, col), 4),
        "div_mul": (_plain_graph(pick + [node("Div", ["X", "a"], ["d"]),
                                         node("Mul", ["c", "d"], ["Y"])], 4, 4, col), 4),
        "add_sub": (_plain_graph(pick + [node("Add", ["a", "X"], ["s"]),
                                         node("Sub", ["s", "c"], ["Y"])], 4, 4, col), 4),
    }


@pytest.mark.parametrize("name", ["less", "greater", "neg_abs", "sum3", "div_mul", "add_sub"])
def test_each_operator(rng, name):
    model, width = _operator_graphs()[name]
    X = _rows(rng, 400, width)
    X[:20] = rng.choice(np.array([0.0, -0.0, 1e-40, 3e38, -3e38, np.inf, np.nan], np.float32),
                        size=(20, width))
    containers = [woodstar.convert(model, "torch"),
                  woodstar.convert(model, "torch", extra_config={"cpu_route": "program"}),
                  woodstar.convert(model, "torch.jit")]
    expected = session(model).run(None, {"X": X})[0]
    for container in containers:
        np.testing.assert_array_equal(container.predict(X), expected)


@pytest.mark.parametrize("op_type", ["Less", "Greater"])
def test_comparison_with_a_computed_operand(rng, op_type):
    """x < y of two computed blocks is (x - y) < 0 (``power.py``): NaN, infinities,
    signed zeros, subnormals and overflowing differences compare as ONNX Runtime's."""
    from onnx import TensorProto, helper

    node = helper.make_node
    model = _plain_graph([node("Neg", ["X"], ["n"]), node("Abs", ["X"], ["a"]),
                          node(op_type, ["n", "a"], ["b"]),
                          node("Cast", ["b"], ["Y"], to=TensorProto.FLOAT)], 3, 3)
    X = _rows(rng, 400, 3)
    X[:40] = rng.choice(np.array([0.0, -0.0, 1e-45, -1e-45, 3e38, -3e38, np.inf, -np.inf, np.nan],
                                 np.float32), size=(40, 3))
    expected = session(model).run(None, {"X": X})[0]
    for backend, extra in (("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)):
        container = woodstar.convert(model, backend, extra_config=extra)
        np.testing.assert_array_equal(container.predict(X), expected)


def test_blocks_that_do_not_broadcast_are_refused():
    from onnx import helper

    node = helper.make_node
    pick = helper.make_node("ArrayFeatureExtractor", ["X", "i"], ["a"], domain="ai.onnx.ml")
    model = _plain_graph([pick, node("Add", ["X", "a"], ["Y"])], 4, 4,
                         [("i", np.array([0, 1], np.int64))])
    with pytest.raises(MissingConverter, match="widths"):
        woodstar.convert(model, "torch")
