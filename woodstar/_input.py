"""Input checking at the container's edge: once per call, never inside the model.

Everything the user may pass (NumPy arrays of any real dtype and memory order, object
arrays and DataFrame columns holding numbers, pandas DataFrames, lists, torch tensors,
``scipy.sparse`` matrices, made dense here: absent entries are zeros, as scikit-learn
reads them) becomes one C-contiguous float array of the route's dtype, or a ValueError
that says what was expected and what came. Columns
that the schema says are strings or re-coded categories are encoded first
(``_encode.py``).
"""

import numpy as np

from ._encode import encode_columns
from .ir import Head

__all__ = ["to_feature_matrix"]


def _is_dataframe(X):
    return type(X).__name__ == "DataFrame" and hasattr(X, "columns") and hasattr(X, "dtypes")


def in_fitted_order(X, head: Head):
    """The DataFrame's columns in the order the source was fitted on, matched by
    name; a missing or unexpected column is an error naming it."""
    columns = [str(c) for c in X.columns]
    if head.feature_names is None:
        return X
    missing = [n for n in head.feature_names if n not in columns]
    extra = [c for c in columns if c not in head.feature_names]
    if missing or extra:
        raise ValueError(
            f"{head.estimator} was fitted with columns {list(head.feature_names)}; the "
            f"DataFrame lacks {missing} and has unexpected {extra}.")
    if columns != list(head.feature_names):
        X = X[[c for c in X.columns if str(c) in head.feature_names]]
        X = X[sorted(X.columns, key=lambda c: head.feature_names.index(str(c)))]
    return X


def _is_sparse(X):
    return type(X).__module__.startswith("scipy.sparse") and hasattr(X, "toarray")


def _object_column(column):
    """An object column's values as float64 (numbers, missing values as NaN), or None
    when some value is not a number."""
    try:
        return column.to_numpy(dtype=np.float64, na_value=np.nan)
    except (TypeError, ValueError):
        return None


def _from_dataframe(X, head: Head) -> np.ndarray:
    X = in_fitted_order(X, head)
    bad, numbers = [], {}
    for i, (name, dtype) in enumerate(zip(X.columns, X.dtypes)):
        kind = getattr(dtype, "kind", "O")
        if str(dtype) == "category":
            if getattr(dtype.categories.dtype, "kind", "O") not in "biuf":
                bad.append(f"{name!r} (category of {dtype.categories.dtype})")
        elif kind == "O":  # numbers held as Python objects, as scikit-learn takes them
            values = _object_column(X.iloc[:, i])
            if values is None:
                bad.append(f"{name!r} ({dtype})")
            numbers[i] = values
        elif kind not in "biuf":
            bad.append(f"{name!r} ({dtype})")
    if bad:
        raise ValueError(
            f"{head.estimator} takes numeric features; non-numeric column(s): {', '.join(bad)}.")
    if not numbers:
        return X.to_numpy(dtype=np.float64, na_value=np.nan)
    out = np.empty(X.shape, dtype=np.float64)
    for i in range(X.shape[1]):
        out[:, i] = numbers[i] if i in numbers else \
            X.iloc[:, i].to_numpy(dtype=np.float64, na_value=np.nan)
    return out


def _as_array(X, head: Head) -> np.ndarray:
    if _is_dataframe(X):
        return _from_dataframe(X, head)
    if _is_sparse(X):
        X = X.toarray()
    if type(X).__module__.startswith("torch"):
        X = X.detach().cpu().numpy()
    if not isinstance(X, np.ndarray):
        try:
            X = np.asarray(X)
        except (TypeError, ValueError) as error:
            raise ValueError(f"{head.estimator} expects a 2-D array of numbers: {error}") from None
    if X.dtype.kind == "O":
        try:
            X = X.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(
                f"{head.estimator} takes numeric features; the input has non-numeric "
                f"values (dtype object).") from None
    elif X.dtype.kind not in "biuf":
        raise ValueError(f"{head.estimator} takes numeric features; got dtype {X.dtype}.")
    return X


def to_feature_matrix(X, head: Head, schema, dtype, source_precision="float64") -> np.ndarray:
    """Validate ``X`` for ``head`` and ``schema`` and return it as C-contiguous ``dtype``
    (no copy when it already is one). ``source_precision`` is the precision the source
    library rounds inputs to: a float64 beyond float32's range is an infinity to it."""
    if _is_sparse(X):
        X = X.toarray()
    if schema is not None and schema.needs_encoding:
        X = encode_columns(X, head, schema)
    X = _as_array(X, head)
    if X.ndim != 2:
        hint = " (reshape a single sample with X.reshape(1, -1))" if X.ndim == 1 else ""
        raise ValueError(
            f"{head.estimator} expects a 2-D array (n_samples, {head.n_features}); "
            f"got a {X.ndim}-D array of shape {X.shape}{hint}.")
    if X.shape[1] != head.n_features:
        raise ValueError(
            f"{head.estimator} expects {head.n_features} features; got {X.shape[1]} "
            f"(input shape {X.shape}).")
    if X.dtype != dtype or not X.flags.c_contiguous:  # else nothing to convert or enter
        with np.errstate(over="ignore"):
            X = np.ascontiguousarray(X, dtype=dtype)
    if X.size and not (head.allows_nan and head.allows_inf):
        _check_finite(X, head, source_precision)
    if X.size and head.inf_rejected_features:
        columns = list(head.inf_rejected_features)
        if np.isinf(X[:, columns]).any():
            raise ValueError(
                f"Input contains infinity in categorical feature(s) {columns}; "
                f"{head.estimator} does not accept infinite categories.")
    return X


_MAX = {"float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}


def _check_finite(X, head, source_precision):
    if X.dtype.itemsize <= np.dtype(source_precision).itemsize and np.isfinite(X).all():
        return  # finite values of a type no wider than the source's are in its range
    # A float64 limit, not a Python float: NumPy would round that to X's float32 (inf).
    limit = np.float64(_MAX[str(np.dtype(source_precision))])
    with np.errstate(invalid="ignore"):
        in_range = np.abs(X) <= limit
    if in_range.all():
        return
    is_nan = np.isnan(X)
    if not head.allows_nan and is_nan.any():
        raise ValueError(f"Input contains NaN; {head.estimator} does not accept missing values.")
    if not head.allows_inf and (~in_range & ~is_nan).any():
        raise ValueError(
            f"Input contains infinity or a value too large for {source_precision}; "
            f"{head.estimator} does not accept them.")
