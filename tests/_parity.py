"""Parity helpers: compare a converted model with its source library's own outputs."""

import numpy as np
import pytest

# Sums are float64 on the float32 route too (only the comparisons are float32), so
# both routes are held to the float64 bound.
TOLERANCE = {"float32": 1e-12, "float64": 1e-12}


def edge_rows(ensemble, n_rows, rng, base=None, nan=True, inf=True):
    """Rows whose values sit exactly on split thresholds or one float32 step away,
    mixed with NaN and +-inf: the values where a rounding slip changes a branch."""
    internal = np.flatnonzero((ensemble.left >= 0) & ~ensemble.is_categorical)
    X = (rng.normal(size=(n_rows, ensemble.n_features)) if base is None
         else base[rng.integers(0, len(base), n_rows)].astype(np.float64).copy())
    if len(internal):
        for row in range(n_rows):
            for node in rng.choice(internal, size=min(len(internal), ensemble.n_features)):
                t = ensemble.threshold[node]
                t32 = np.float32(t)
                candidates = [t, float(t32), float(np.nextafter(t32, np.float32(np.inf))),
                              float(np.nextafter(t32, np.float32(-np.inf)))]
                X[row, ensemble.feature[node]] = candidates[rng.integers(0, len(candidates))]
    special = rng.random(X.shape)
    if nan:
        X[special < 0.05] = np.nan
    if inf:
        X[(special >= 0.05) & (special < 0.07)] = np.inf
        X[(special >= 0.07) & (special < 0.09)] = -np.inf
    else:  # a threshold may itself be +inf (scikit-learn's "only NaN goes right")
        X[np.isinf(X)] = 0.0
    return X


def make_test_inputs(ensemble, rng, n_random=200, n_edge=100, base=None, nan=True, inf=True):
    """Fresh random rows plus rows on split thresholds, with NaN and +-inf unless
    turned off (a source that rejects them would only test the error path)."""
    X = rng.normal(scale=2.0, size=(n_random, ensemble.n_features))
    if nan:
        X[rng.random(X.shape) < 0.05] = np.nan
    return np.vstack([X, edge_rows(ensemble, n_edge, rng, base, nan=nan, inf=inf)])


def compare_outputs(got, expected, precision, what, tolerance=None):
    """Labels exactly, floats within ``tolerance`` (the route's bound by default)."""
    if isinstance(expected, list):
        assert isinstance(got, list) and len(got) == len(expected), what
        for g, e in zip(got, expected):
            compare_outputs(g, e, precision, what, tolerance)
        return
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    if expected.dtype.kind == "f":
        tol = TOLERANCE[precision] if tolerance is None else tolerance
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=what)
    else:
        mismatches = np.flatnonzero(got.reshape(len(got), -1) != expected.reshape(len(expected), -1))
        assert got.dtype.kind == expected.dtype.kind or got.dtype.kind in "OU", \
            f"{what}: dtype {got.dtype} vs {expected.dtype}"
        assert len(mismatches) == 0, f"{what}: {len(mismatches)} labels differ, first at {mismatches[:5]}"


def assert_parity(converted, model, X, precision="float32", methods=None, tolerance=None):
    """Every method of the source estimator gives the same answer through woodstar.
    Where the source rejects the input with ValueError, woodstar must reject it too."""
    methods = methods or [m for m in ("predict", "predict_proba", "decision_function",
                                      "score_samples") if hasattr(model, m)]
    checked = 0
    for method in methods:
        try:
            expected = getattr(model, method)(X)
        except ValueError:
            with pytest.raises(ValueError):
                getattr(converted, method)(X)
            continue
        got = getattr(converted, method)(X)
        compare_outputs(got, expected, precision, f"{type(model).__name__}.{method}", tolerance)
        checked += 1
    return checked
