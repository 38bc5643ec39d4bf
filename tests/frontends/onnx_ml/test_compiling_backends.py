"""The ONNX-ML ops on the backends that compile (seconds per model): each run takes
one of them, in turn with the test seed, on one tree graph, one linear pipeline and two
SVM graphs (``WOODSTAR_FULL_MATRIX=1`` runs all three). The other ONNX-ML tests run the eager and
traced programs and the CPU route."""

import os

import numpy as np
import pytest

import woodstar
from tests.conftest import BASE_SEED
from woodstar.backends import all_backends
from woodstar.exceptions import MissingConverter

from ._graphs import MATCHES_THIS_CPU, grid_rows, random_tree_graph
from .test_linear_pipelines import _rows, linear_graph
from .test_tree_ensembles import check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

COMPILING = ("onnx", "tvm", "torch.compile")


def _params():
    params = []
    for i, name in enumerate(COMPILING):
        available, reason = all_backends()[name].is_available()
        marks = []
        if not available:
            marks.append(pytest.mark.skip(reason=f"backend {name}: {reason}"))
        elif os.environ.get("WOODSTAR_FULL_MATRIX") != "1" and BASE_SEED % len(COMPILING) != i:
            marks.append(pytest.mark.skip(reason="sampled out this run (test seed)"))
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.mark.parametrize("backend_name", _params())
def test_onnx_graphs_on_compiling_backends(rng, backend_name):
    trees = random_tree_graph(rng, classifier=True, n_targets=3, post_transform="SOFTMAX",
                              base_values=[0.1, -0.2, 0.3], n_trees=4)
    check(trees, grid_rows(rng, 200, 4), backend_name)
    before = [("Scaler", dict(offset=[0.1], scale=[2.0])), ("Normalizer", dict(norm="L2"))]
    linear = linear_graph(rng, before=before, post="LOGISTIC")
    check(linear, _rows(rng, 200, 5), backend_name)


@pytest.mark.filterwarnings("ignore::FutureWarning")
@pytest.mark.parametrize("backend_name", _params())
def test_svm_graphs_on_compiling_backends(rng, backend_name):
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.svm import SVC, SVR

    # few training rows: each support vector is an unrolled step of the exported program
    X = rng.normal(size=(16, 5)).astype(np.float32)
    y = X[:, 0] * X[:, 1] + X[:, 2]
    opset = {"": 17, "ai.onnx.ml": 3}
    for model in (SVR(kernel="rbf", gamma=0.3).fit(X, y),
                  SVC(kernel="sigmoid", gamma=0.1, coef0=0.2).fit(X, y > 0)):
        graph = skl2onnx.to_onnx(model, X[:1], target_opset=opset,
                                 options={"zipmap": False} if hasattr(model, "classes_") else None)
        check(graph, _rows(rng, 200, 5, nan=0.02), backend_name)


@MATCHES_THIS_CPU
@pytest.mark.parametrize("backend_name", _params())
def test_mlas_exp_graph_on_compiling_backends(rng, backend_name):
    """Softmax runs MLAS's exp; TVM cannot build its mirrored fused multiply-adds and
    refuses it by name (torch.compile takes minutes here: test_softmax.py traces it
    with TorchDynamo alone)."""
    from .test_softmax import _logits, _softmax_graph

    if backend_name == "torch.compile" and os.environ.get("WOODSTAR_FULL_MATRIX") != "1":
        pytest.skip("Inductor takes about two minutes on this graph")
    if backend_name == "tvm":
        with pytest.raises(MissingConverter, match="Softmax.*tvm.*LLVM"):
            woodstar.convert(_softmax_graph(4), "tvm")
        linear = linear_graph(rng, n_targets=3, post="SOFTMAX")
        with pytest.raises(MissingConverter, match="SOFTMAX.*tvm.*LLVM"):
            woodstar.convert(linear, "tvm")
        return
    check(_softmax_graph(4), _logits(rng, 200, 4), backend_name)
