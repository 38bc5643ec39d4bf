"""ONNX ``Where`` after a comparison, against ONNX Runtime: a selection, so exact on
every route, NaN and infinities included; a branch given as a constant is refused."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import assert_calls_match
from .test_linear_pipelines import _rows
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def _where_graph(rng, width=4, compare="Less", one_column_branch=False, constant_branch=False):
    """X -> Less/Greater(X, c) picks between Abs(X) and Neg(X) (or a one-column block,
    broadcast, or a constant), then Sum with X so that the output depends on both."""
    from onnx import TensorProto, helper, numpy_helper

    inits = [numpy_helper.from_array(rng.normal(size=width).astype(np.float32), "c")]
    nodes = [helper.make_node(compare, ["X", "c"], ["cond"]),
             helper.make_node("Abs", ["X"], ["a"])]
    if constant_branch:
        inits.append(numpy_helper.from_array(np.full(width, 2.5, np.float32), "b"))
    elif one_column_branch:
        inits.append(numpy_helper.from_array(np.array([1], np.int64), "col"))
        nodes += [helper.make_node("ArrayFeatureExtractor", ["X", "col"], ["x1"],
                                   domain="ai.onnx.ml"),
                  helper.make_node("Neg", ["x1"], ["b"])]
    else:
        nodes.append(helper.make_node("Neg", ["X"], ["b"]))
    nodes += [helper.make_node("Where", ["cond", "a", "b"], ["w"]),
              helper.make_node("Sum", ["w", "X"], ["y"])]
    graph = helper.make_graph(
        nodes, "where", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, width])], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", 3)])


def _rows_with_extremes(rng, n, width):
    X = _rows(rng, n, width, nan=0.05)
    X[:3] = np.array([np.inf, -np.inf, -0.0, 3e38][:width], np.float32)
    return X


@FAST_BACKENDS
@pytest.mark.parametrize("compare", ["Less", "Greater"])
@pytest.mark.parametrize("one_column_branch", [False, True])
def test_where_selects_as_onnx_runtime(backend, rng, compare, one_column_branch):
    graph = _where_graph(rng, compare=compare, one_column_branch=one_column_branch)
    check(graph, _rows_with_extremes(rng, 200, 4), backend)


def test_where_one_row_and_two_rows(rng):
    graph = _where_graph(rng)
    containers = [woodstar.convert(graph, "torch"),
                  woodstar.convert(graph, "torch", extra_config={"cpu_route": "program"})]
    assert_calls_match(graph, _rows_with_extremes(rng, 8, 4), containers)


def test_where_with_a_constant_branch_is_refused(rng):
    with pytest.raises(MissingConverter, match="Where.*constant branch"):
        woodstar.convert(_where_graph(rng, constant_branch=True), "torch")
