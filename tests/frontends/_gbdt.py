"""Helpers shared by the gradient-boosting frontend tests."""

import numpy as np

from woodstar.ir import reference

# Both routes sum in float64 in the libraries' order; XGBoost (float32 sums) passes its own.
TOLERANCE = {"float32": 1e-12, "float64": 1e-12}


def close(got, expected, tol, what):
    """Values within ``tol`` relative to the output's scale (raw margins can be large)."""
    got, expected = np.asarray(got, dtype=np.float64), np.asarray(expected, dtype=np.float64)
    assert got.shape == expected.shape, f"{what}: shape {got.shape} != {expected.shape}"
    finite = np.isfinite(expected)
    np.testing.assert_array_equal(np.isfinite(got), finite, err_msg=f"{what}: non-finite values")
    np.testing.assert_array_equal(got[~finite], expected[~finite], err_msg=what)
    scale = max(1.0, float(np.max(np.abs(expected[finite]), initial=0.0)))
    np.testing.assert_allclose(got[finite], expected[finite], rtol=tol, atol=tol * scale,
                               err_msg=what)


def check(converted, X, expected, precision, tol=None, what=""):
    """``expected`` maps a method name to the library's answer on ``X``; labels must be
    identical, values within the route's tolerance."""
    tol = TOLERANCE[precision] if tol is None else tol
    assert expected
    for method, values in expected.items():
        got = getattr(converted, method)(X)
        values = np.asarray(values)
        if values.dtype.kind == "f":
            close(got, values, tol, f"{what}.{method}")
        else:
            got = np.asarray(got)
            assert got.shape == values.shape, f"{what}.{method}: {got.shape} != {values.shape}"
            np.testing.assert_array_equal(got, values, err_msg=f"{what}.{method}")


def check_reference(model_ir, X, raw_expected, transformed_expected=None, tol=1e-12, what=""):
    """IR reference predictor == the library (a frontend bug if not)."""
    raw, transformed = reference.predict(model_ir.ensemble, X)
    close(raw, np.asarray(raw_expected, dtype=np.float64).reshape(raw.shape), tol,
          f"{what} raw (reference)")
    if transformed_expected is not None:
        close(transformed, np.asarray(transformed_expected, dtype=np.float64).reshape(
            transformed.shape), tol, f"{what} transformed (reference)")


N_FEATURES = 5
CAT = 0  # column 0 holds integer-coded categories 0..7 where a case asks for them


def train_data(rng, n=300, categorical=False, nan=True, zeros=False):
    """(X, signal) for training: ties on thresholds (column 3 rounded), optional
    integer categories in column ``CAT``, NaN, and exact zeros in column 3 (for
    LightGBM's zero_as_missing)."""
    X = rng.normal(size=(n, N_FEATURES))
    X[:, 3] = np.round(X[:, 3], 1)
    if zeros:
        X[rng.random(n) < 0.2, 3] = 0.0
    if categorical:
        X[:, CAT] = rng.integers(0, 8, n)
    if nan:
        X[rng.random(X.shape) < 0.08] = np.nan
    signal = np.nan_to_num(X[:, 1]) + 0.5 * np.nan_to_num(X[:, 2]) * (np.nan_to_num(X[:, 3]) > 0)
    if categorical:
        signal += np.isin(np.nan_to_num(X[:, CAT], nan=-1), [1, 4, 6]) - 0.5
    return X, signal


def config(strategy, precision):
    return {"tree_implementation": strategy, "tree_op_precision_dtype": precision}
