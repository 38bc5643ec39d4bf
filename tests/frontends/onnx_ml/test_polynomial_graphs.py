"""skl2onnx's PolynomialFeatures graph (ArrayFeatureExtractor and ReduceProd per
monomial; the bias column from Shape and ConstantOfShape; Concat) against ONNX
Runtime running the same graph, to the bit, on the CPU route, the eager program and
the traced one: the kernel multiplies a monomial's columns first to last, which
differs from other orders in the last bit (checked below), with NaN, infinite and
zero values (0 * inf is NaN)."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_reduce_prod", "onnx_fill")
OPSET = {"": 17, "ai.onnx.ml": 3}


def _rows(rng, n, n_features):
    X = (rng.normal(size=(n, n_features)) * rng.choice([1e-3, 1.0, 1e12], size=(n, 1)))
    X = X.astype(np.float32)
    X[rng.random(X.shape) < 0.03] = np.nan
    X[1, 0], X[1, 1] = np.inf, 0.0
    X[2] = -np.inf
    return X


def _graph(rng, **params):
    from sklearn.preprocessing import PolynomialFeatures

    X = rng.normal(size=(20, 4)).astype(np.float32)
    return skl2onnx.to_onnx(PolynomialFeatures(**params).fit(X), X[:1], target_opset=OPSET)


@FAST_BACKENDS
@pytest.mark.parametrize("params", [dict(degree=2), dict(degree=4),
                                    dict(degree=3, interaction_only=True, include_bias=False)])
def test_polynomial_features(backend, rng, params):
    check(_graph(rng, **params), _rows(rng, 200, 4), backend)


def test_product_order_is_the_kernels(rng):
    graph = _graph(rng, degree=3, include_bias=False)
    rows = rng.normal(size=(300, 4)).astype(np.float32)
    expected = session(graph).run(None, {"X": rows})[0]
    a, b, c = rows[:, 0], rows[:, 1], rows[:, 2]
    column = 4 + 10 + 5  # x0 * x1 * x2: after the 4 linear and 10 quadratic columns
    assert np.array_equal(expected[:, column], (a * b) * c)
    assert (expected[:, column] != a * (b * c)).any()
    np.testing.assert_array_equal(woodstar.convert(graph, "torch").predict(rows), expected)


def test_other_reductions_are_refused(rng):
    from onnx import TensorProto, helper

    nodes = [helper.make_node("ReduceProd", ["X"], ["p"], axes=[1], keepdims=0)]
    graph = helper.make_graph(nodes, "prod", [helper.make_tensor_value_info(
        "X", TensorProto.FLOAT, [None, 3])], [helper.make_tensor_value_info(
            "p", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MissingConverter, match="axes and keepdims"):
        woodstar.convert(model, "torch")
