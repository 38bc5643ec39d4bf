"""Logistic links keep their tiny probabilities on every backend.

scikit-learn's expit keeps a probability down to about exp(-709); a backend that
flushes it to zero passes an absolute tolerance unseen, and a one-vs-rest
normalisation of all-tiny sigmoids then turns the row into uniform probabilities.
These rows push the decision values far below -37 (where ONNX's Sigmoid gives 0)
and compare relatively, with no absolute slack.
"""

import numpy as np
import pytest

import woodstar


def _fitted(name):
    from sklearn.linear_model import LogisticRegression, SGDClassifier
    from sklearn.neural_network import MLPClassifier

    rng = np.random.default_rng(3)
    X = rng.normal(size=(150, 4))
    if name == "logistic_binary":
        return LogisticRegression().fit(X, (X[:, 0] + X[:, 1] > 0).astype(int)), X
    if name == "sgd_log_ovr":
        y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
        return SGDClassifier(loss="log_loss", random_state=0).fit(X, y), X
    mlp = MLPClassifier(hidden_layer_sizes=(3,), activation="identity", max_iter=2000, random_state=0)
    return mlp.fit(X, (X[:, 0] > 0).astype(int)), X


def _far_rows(X):
    """Training rows scaled by 1 to 500 both ways: the decision values of these
    near-linear models reach far past -37 and on to where expit is exactly 0."""
    rng = np.random.default_rng(11)
    base = X[rng.integers(0, len(X), 60)]
    factors = np.geomspace(1, 500, len(base))[:, None]
    return np.vstack([base * factors, -base * factors])


@pytest.mark.parametrize("name", ["logistic_binary", "sgd_log_ovr", "mlp_logistic"])
def test_tiny_logistic_probabilities_survive(name, backend):
    model, X = _fitted(name)
    rows = _far_rows(X)
    expected = model.predict_proba(rows)
    tiny = (expected > 0) & (expected < 1e-17)
    assert tiny.any(), "the rows must reach probabilities below ONNX Sigmoid's floor"
    got = woodstar.convert(model, backend).predict_proba(rows)
    np.testing.assert_allclose(got, expected, rtol=1e-11, atol=0)
