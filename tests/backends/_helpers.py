"""Helpers for the backend tests: comparison with Torch eager, test inputs."""

import numpy as np

from .._parity import compare_outputs

TOLERANCE = {"float32": 1e-6, "float64": 1e-12}
SLOW_BACKENDS = ("torch.compile", "tvm")  # seconds per compile: run a reduced matrix
METHODS = ("predict", "predict_proba", "decision_function", "score_samples")


def assert_same_as(converted, reference, X, precision="float32"):
    checked = 0
    for method in METHODS:
        if not hasattr(reference, method):
            continue
        compare_outputs(getattr(converted, method)(X), getattr(reference, method)(X), precision,
                        method, tolerance=TOLERANCE[precision])
        checked += 1
    assert checked, "no method compared"
    return checked


def inputs_for(model, X, rng, n=60):
    """Fresh rows around the training data, with NaN where the model takes it, plus
    a few training rows (categorical codes stay valid)."""
    rows = X[rng.integers(0, len(X), n)].copy()
    noise = rng.normal(scale=0.3, size=rows.shape)
    categorical = getattr(model, "is_categorical_", None)
    if categorical is not None:
        noise[:, np.asarray(categorical, dtype=bool)] = 0
    rows = rows + noise
    if type(model).__name__.startswith("HistGradient"):
        rows[rng.random(rows.shape) < 0.05] = np.nan
        rows[:3, 0] = [7.0, -1.0, 2.5]  # unseen, negative and non-integer categories
    return rows
