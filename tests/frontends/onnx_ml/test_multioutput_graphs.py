"""skl2onnx's MultiOutputRegressor and MultiOutputClassifier graphs against ONNX
Runtime, to the bit: the regressors' values reshaped and concatenated into the
(n, n_outputs) matrix; the classifiers' label columns concatenated into the label
matrix and their probabilities in a sequence, which the container gives as
scikit-learn does (``predict``: the label matrix, ``predict_proba``: a list of
matrices). Fresh rows with NaN, one row and many, on the CPU route, the eager program
and torch.jit."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._sklearn_graphs import check_routes, nan_rows, sklearn_graph

pytest.importorskip("onnxruntime")
pytest.importorskip("skl2onnx")


@pytest.mark.parametrize("n_outputs", [1, 3])
def test_multi_output_regressor(rng, n_outputs):
    from sklearn.linear_model import Ridge
    from sklearn.multioutput import MultiOutputRegressor

    X = rng.normal(size=(300, 4)).astype(np.float32)
    model = MultiOutputRegressor(Ridge()).fit(X, rng.normal(size=(300, n_outputs)))
    check_routes(sklearn_graph(model, X), nan_rows(rng, 1200, 4))


def _classifier(rng, base, X):
    from sklearn.linear_model import LogisticRegression
    from sklearn.multioutput import MultiOutputClassifier
    from sklearn.naive_bayes import GaussianNB
    from sklearn.tree import DecisionTreeClassifier

    estimator = {"logistic": LogisticRegression(), "tree": DecisionTreeClassifier(max_depth=3),
                 "naive_bayes": GaussianNB()}[base]
    Y = np.c_[rng.integers(0, 2, 300), rng.integers(0, 3, 300), rng.integers(3, 7, 300)]
    return MultiOutputClassifier(estimator).fit(X, Y)


@pytest.mark.parametrize("base", ["logistic", "tree", "naive_bayes"])
def test_multi_output_classifier(rng, base):
    X = rng.normal(size=(300, 4)).astype(np.float32)
    model = _classifier(rng, base, X)
    graph = sklearn_graph(model, X)
    check_routes(graph, nan_rows(rng, 1200, 4))
    # scikit-learn's shapes: a label matrix and one probability matrix per output
    rows = rng.normal(size=(50, 4)).astype(np.float32)
    container = woodstar.convert(graph, "torch")
    np.testing.assert_array_equal(container.predict(rows), model.predict(rows))
    assert [p.shape for p in container.predict_proba(rows)] == \
        [p.shape for p in model.predict_proba(rows)]


def test_labels_without_their_probabilities_are_refused(rng):
    """A label matrix beside another model's probabilities: refused by name."""
    X = rng.normal(size=(300, 4)).astype(np.float32)
    graph = sklearn_graph(_classifier(rng, "logistic", X), X)
    sequence = next(n for n in graph.graph.node if n.op_type == "SequenceConstruct")
    reversed_inputs = list(sequence.input)[::-1]
    del sequence.input[:]
    sequence.input.extend(reversed_inputs)
    with pytest.raises(MissingConverter, match="SequenceConstruct of the same classifiers"):
        woodstar.convert(graph, "torch")
