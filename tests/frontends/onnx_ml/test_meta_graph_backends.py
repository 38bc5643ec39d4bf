"""The stacking, one-vs-rest, one-vs-one, multi-output and ReduceMax graphs on the exporting
backends (seconds to minutes per graph): each run takes one graph per backend, in
turn with the test seed (``WOODSTAR_FULL_MATRIX=1`` runs all). Each either gives
ONNX Runtime's answers to the bit or is refused at convert time with the reason."""

import os

import numpy as np
import pytest

import woodstar
from tests.conftest import BASE_SEED
from woodstar.backends import all_backends
from woodstar.exceptions import MissingConverter

from ._sklearn_graphs import OPSETS, check_routes, nan_rows, sklearn_graph
from .test_reduce_max_graphs import _reduce_max_graph
from .test_stacking_graph import _stacking

pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")

GRAPHS = ("one_vs_rest", "one_vs_one", "multi_output_regressor", "multi_output_classifier",
          "reduce_max", "stacking")
# Cases too heavy for a CI run on 2 cores, run by WOODSTAR_FULL_MATRIX=1.
FULL_MATRIX_ONLY = {
    ("onnx", "stacking"): "torch's ONNX exporter's optimizer (onnxscript's rewriter) takes "
                          "several minutes and 11 GB of memory on this graph",
}


def _graph(rng, kind):
    from sklearn.linear_model import LogisticRegression, Ridge
    from sklearn.multiclass import OneVsOneClassifier, OneVsRestClassifier
    from sklearn.multioutput import MultiOutputClassifier, MultiOutputRegressor
    from sklearn.tree import DecisionTreeClassifier

    if kind == "reduce_max":
        return _reduce_max_graph(5), 5
    if kind == "stacking":
        return _stacking(rng, "logistic+nb", "predict_proba", True), 4
    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = rng.integers(0, 3, size=300)
    if kind == "one_vs_rest":
        return sklearn_graph(OneVsRestClassifier(LogisticRegression()).fit(X, y), X), 4
    if kind == "one_vs_one":
        model = OneVsOneClassifier(LogisticRegression()).fit(X, y)
        return skl2onnx.to_onnx(model, X[:1], options={id(model): {"zipmap": False}},
                                target_opset=OPSETS), 4
    if kind == "multi_output_regressor":
        return sklearn_graph(MultiOutputRegressor(Ridge()).fit(X, rng.normal(size=(300, 3))), X), 4
    model = MultiOutputClassifier(DecisionTreeClassifier(max_depth=3))
    return sklearn_graph(model.fit(X, np.c_[y, rng.integers(0, 2, 300)]), X), 4


def _params():
    params = []
    for backend in ("onnx", "tvm"):
        available, reason = all_backends()[backend].is_available()
        for i, kind in enumerate(GRAPHS):
            marks = []
            if not available:
                marks.append(pytest.mark.skip(reason=f"backend {backend}: {reason}"))
            elif os.environ.get("WOODSTAR_FULL_MATRIX") != "1" and BASE_SEED % len(GRAPHS) != i:
                marks.append(pytest.mark.skip(reason="sampled out this run (test seed)"))
            elif (os.environ.get("WOODSTAR_FULL_MATRIX") != "1"
                  and (backend, kind) in FULL_MATRIX_ONLY):
                marks.append(pytest.mark.skip(reason=FULL_MATRIX_ONLY[backend, kind]))
            params.append(pytest.param(backend, kind, marks=marks, id=f"{backend}-{kind}"))
    return params


@pytest.mark.parametrize("backend_name, kind", _params())
def test_graph_on_exporting_backend(rng, backend_name, kind):
    graph, width = _graph(rng, kind)
    try:
        woodstar.convert(graph, backend_name)
    except MissingConverter as error:  # refused at convert time, naming the backend
        assert backend_name in str(error)
        return
    check_routes(graph, nan_rows(rng, 200, width), routes=[(backend_name, None)], single_rows=1)
