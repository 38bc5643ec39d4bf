"""Graphs of plain ONNX operators (a multi-layer perceptron's MatMul, Add, Relu,
Sigmoid, Reshape; Gemm) read as a regressor, against ONNX Runtime: MatMul and Gemm
are MLAS's SGEMM (one fused multiply-add per input column), Sigmoid MLAS's logistic,
so every number is ONNX Runtime's, NaN rows included."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import assert_calls_match, session
from .test_linear_pipelines import _rows
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

COVERS_OPS = ("onnx_sigmoid",)


@FAST_BACKENDS
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("activation", ["relu", "logistic", "identity"])
def test_skl2onnx_mlp_regressor(backend, rng, activation):
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.neural_network import MLPRegressor

    X = rng.normal(size=(200, 6)).astype(np.float32)
    model = MLPRegressor(hidden_layer_sizes=(12, 5), activation=activation, max_iter=60,
                         random_state=int(rng.integers(1 << 30))).fit(X, X[:, 0] * X[:, 1])
    graph = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    check(graph, _rows(rng, 300, 6, nan=0.05), backend)


def _gemm_graph(rng, trans_b, one_dimensional=False):
    from onnx import TensorProto, helper, numpy_helper

    W = rng.normal(size=(3, 5) if trans_b else (5, 3)).astype(np.float32)
    C = rng.normal(size=(1, 3)).astype(np.float32)
    nodes = [helper.make_node("Gemm", ["X", "W", "C"], ["h"], transB=int(trans_b)),
             helper.make_node("Sigmoid", ["h"], ["s"]),
             helper.make_node("MatMul", ["s", "V"], ["y"])]
    inits = [numpy_helper.from_array(W, "W"), numpy_helper.from_array(C, "C"),
             numpy_helper.from_array(rng.normal(size=(3, 1)).astype(np.float32), "V")]
    out = "y"
    if one_dimensional:
        nodes.append(helper.make_node("Reshape", ["y", "shape"], ["flat"]))
        inits.append(numpy_helper.from_array(np.array([-1], np.int64), "shape"))
        out = "flat"
    graph = helper.make_graph(nodes, "gemm", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 5])],
                              [helper.make_tensor_value_info(out, TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@FAST_BACKENDS
@pytest.mark.parametrize("trans_b", [False, True])
def test_gemm_sigmoid_matmul(backend, rng, trans_b):
    check(_gemm_graph(rng, trans_b), _rows(rng, 300, 5, nan=0.05), backend)


def _product_graph(rng, op_type, n_features, n_out, trans_b=False):
    from onnx import TensorProto, helper, numpy_helper

    W = rng.normal(size=(n_out, n_features) if trans_b else (n_features, n_out)).astype(np.float32)
    inits = [numpy_helper.from_array(W, "W")]
    inputs = ["X", "W"]
    if op_type == "Gemm":
        inits.append(numpy_helper.from_array(rng.normal(size=n_out).astype(np.float32), "C"))
        inputs.append("C")
    node = helper.make_node(op_type, inputs, ["y"], **({"transB": int(trans_b)} if trans_b else {}))
    graph = helper.make_graph([node], "product",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op_type,trans_b", [("MatMul", False), ("Gemm", False), ("Gemm", True)])
@pytest.mark.parametrize("n_features,n_out", [(20, 3), (300, 2), (1500, 1)])
def test_constant_products_one_row_and_wide(rng, op_type, trans_b, n_features, n_out):
    """A constant matrix is packed when the session starts: MLAS's packed SGEMM steps
    through K in slices of 256 and has no one-row kernel, so one row, two rows and a
    batch all add the same slices."""
    model = _product_graph(rng, op_type, n_features, n_out, trans_b)
    containers = [woodstar.convert(model, "torch"),
                  woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})]
    # NaN only in the narrow case: a NaN in most wide rows would hide their sums
    assert_calls_match(model, _rows(rng, 16, n_features, nan=0.02 if n_features < 100 else 0.0),
                       containers)


def test_reshape_to_one_dimension_gives_a_vector(rng):
    model = _gemm_graph(rng, True, one_dimensional=True)
    X = _rows(rng, 50, 5)
    expected = session(model).run(None, {"X": X})[0]
    got = woodstar.convert(model, "torch").predict(X)
    assert got.shape == expected.shape == (50,)
    np.testing.assert_array_equal(got, expected)


def test_gemm_with_alpha_is_refused(rng):
    model = _gemm_graph(rng, False)
    from onnx import helper

    model.graph.node[0].attribute.append(helper.make_attribute("alpha", 2.0))
    with pytest.raises(MissingConverter, match="alpha"):
        woodstar.convert(model, "torch")


def _mlp_classifier_graph(rng, classes, zipmap):
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.neural_network import MLPClassifier

    X = rng.normal(size=(200, 6)).astype(np.float32)
    y = np.asarray(classes)[(X[:, 0] * X[:, 1] + X[:, 2] > 0).astype(int) +
                            (len(classes) > 2) * (X[:, 3] > 1).astype(int)]
    model = MLPClassifier(hidden_layer_sizes=(10,), max_iter=60,
                          random_state=int(rng.integers(1 << 30))).fit(X, y)
    return skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                            options={"zipmap": zipmap})


@FAST_BACKENDS
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("zipmap", [False, True])
def test_skl2onnx_binary_mlp_classifier(backend, rng, zipmap):
    """1 - p (Sub of a constant), Concat, ArgMax and the class lookup: labels and
    probabilities are ONNX Runtime's to the bit, NaN rows included."""
    model = _mlp_classifier_graph(rng, [3, 7], zipmap)
    check(model, _rows(rng, 300, 6, nan=0.05), backend)
