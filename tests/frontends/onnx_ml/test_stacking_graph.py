"""skl2onnx's StackingClassifier graph against ONNX Runtime, to the bit: the
estimators' probabilities or decision values (with the input too under
``passthrough``) concatenated into a final LogisticRegression, whose normalised
probabilities give the labels through ArgMax. Fresh rows with NaN, one row and many,
on the CPU route, the eager program and torch.jit (the exporting backends:
``test_meta_graph_backends.py``)."""

import numpy as np
import pytest

from ._sklearn_graphs import check_routes, nan_rows, sklearn_graph

pytest.importorskip("onnxruntime")
pytest.importorskip("skl2onnx")


def _estimators(kind):
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.naive_bayes import GaussianNB
    from sklearn.svm import LinearSVC
    from sklearn.tree import DecisionTreeClassifier

    if kind == "logistic+nb":
        return [("lr", LogisticRegression()), ("nb", GaussianNB())]
    if kind == "trees":
        return [("tree", DecisionTreeClassifier(max_depth=4, random_state=0)),
                ("forest", RandomForestClassifier(5, max_depth=4, random_state=0))]
    return [("lr", LogisticRegression()), ("svc", LinearSVC())]


def _stacking(rng, kind, stack_method, passthrough, n_classes=3):
    from sklearn.ensemble import StackingClassifier

    X = rng.normal(size=(300, 4)).astype(np.float32)
    y = rng.integers(0, n_classes, size=300)
    model = StackingClassifier(_estimators(kind), stack_method=stack_method,
                               passthrough=passthrough).fit(X, y)
    return sklearn_graph(model, X)


@pytest.mark.parametrize("passthrough", [False, True])
@pytest.mark.parametrize("kind, stack_method", [("logistic+nb", "predict_proba"),
                                                ("trees", "predict_proba"),
                                                ("logistic+svc", "decision_function")])
def test_stacking_classifier(rng, kind, stack_method, passthrough):
    graph = _stacking(rng, kind, stack_method, passthrough)
    check_routes(graph, nan_rows(rng, 1200, 4))


def test_binary_stacking_classifier(rng):
    graph = _stacking(rng, "logistic+nb", "predict_proba", False, n_classes=2)
    check_routes(graph, nan_rows(rng, 1000, 4))
