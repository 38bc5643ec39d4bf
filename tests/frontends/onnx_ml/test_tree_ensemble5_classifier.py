"""The opset-5 ``TreeEnsemble`` as a classifier's body: no converter writes one (skl2onnx
1.20 and onnx's version converter keep ``TreeEnsembleClassifier`` at ai.onnx.ml opset
5), so the graphs here are the plain-operator form such a classifier takes: the
ensemble's scores, plus base scores, through Softmax (several classes) or Sigmoid and
``1 - p`` (two), then ArgMax and a label lookup. Against ONNX Runtime, bit for bit."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import assert_calls_match
from .test_tree_ensemble5 import random_v5_graph, rows
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


def _classifier(rng, classes, *, aggregate="SUM", base=True, dtype=np.float32):
    """``random_v5_graph`` (output ``Y``) followed by a classifier's head."""
    from onnx import TensorProto, helper, numpy_helper

    n_targets = len(classes) if len(classes) > 2 else 1
    model = random_v5_graph(rng, n_targets=n_targets, n_trees=3 * n_targets + 2, depth=4,
                            aggregate=aggregate, dtype=dtype)
    graph = model.graph
    node = helper.make_node
    inits = [numpy_helper.from_array(np.array([-1], np.int64), "flat")]
    scores = "Y"
    if base:
        inits.append(numpy_helper.from_array(
            rng.normal(size=(1, n_targets)).astype(dtype), "base"))
        graph.node.append(node("Add", ["Y", "base"], ["scores"]))
        scores = "scores"
    if n_targets > 1:
        graph.node.append(node("Softmax", [scores], ["probabilities"], axis=1))
    else:
        inits.append(numpy_helper.from_array(np.ones((1, 1), dtype), "one"))
        graph.node.extend([node("Sigmoid", [scores], ["p1"]),
                           node("Sub", ["one", "p1"], ["p0"]),
                           node("Concat", ["p0", "p1"], ["probabilities"], axis=1)])
    strings = isinstance(classes[0], str)
    inits.append(numpy_helper.from_array(np.array(classes, dtype=object if strings else np.int64),
                                         "classes"))
    graph.node.extend([node("ArgMax", ["probabilities"], ["index"], axis=1),
                       node("ArrayFeatureExtractor", ["classes", "index"], ["picked"],
                            domain="ai.onnx.ml"),
                       node("Reshape", ["picked", "flat"], ["label"])])
    graph.initializer.extend(inits)
    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    del graph.output[:]
    graph.output.extend([
        helper.make_tensor_value_info("label", TensorProto.STRING if strings else TensorProto.INT64,
                                      [None]),
        helper.make_tensor_value_info("probabilities", elem, [None, max(n_targets, 2)])])
    return model


@FAST_BACKENDS
@pytest.mark.parametrize("classes", [[0, 1, 2], ["ant", "bee", "cat", "dog"]],
                         ids=["ints", "strings"])
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE", "MAX"])
def test_multiclass_body(backend, rng, classes, aggregate):
    check(_classifier(rng, classes, aggregate=aggregate), rows(rng, 300, 4), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("base", [False, True])
def test_binary_body(backend, rng, base):
    check(_classifier(rng, [3, 7], base=base), rows(rng, 300, 4), backend)


def test_one_row_and_two_rows(rng):
    model = _classifier(rng, [0, 1, 2, 3])
    containers = [woodstar.convert(model, "torch"),
                  woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})]
    assert_calls_match(model, rows(rng, 12, 4), containers)


def test_double_body_softmax_is_refused(rng):
    """A double ensemble's Softmax runs another kernel in ONNX Runtime (not MLAS's)."""
    with pytest.raises(MissingConverter, match="Softmax.*float"):
        woodstar.convert(_classifier(rng, [0, 1, 2], base=False, dtype=np.float64), "torch")
