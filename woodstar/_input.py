"""Input checking at the container's edge: once per call, never inside the model.

Everything the user may pass (NumPy arrays of any real dtype and memory order, object
arrays and DataFrame columns holding numbers, pandas DataFrames, lists, torch tensors,
``scipy.sparse`` matrices, made dense here: absent entries are zeros, as scikit-learn
reads them) becomes one C-contiguous float array of the route's dtype, or a ValueError
that says what was expected and what came. Columns
that the schema says are strings or re-coded categories are encoded first
(``_encode.py``).
"""

import math

import numpy as np

from ._encode import encode_columns
from ._onnx_feeds import feeds_matrix, needs_feeds
from .ir import Head

__all__ = ["to_feature_matrix", "feature_matrix_function", "labels_1d", "labels_are_binary",
           "all_finite"]

# Up to this many values, finiteness is checked on Python floats instead of with a NumPy
# reduction: as fast or faster on its own, and a NumPy reduction just before a small
# call's Torch or ONNX Runtime work made that work several microseconds slower
# (docs/benchmarks.md, "Small calls: the finiteness check").
PYTHON_CHECK_MAX_VALUES = 128


def all_finite(values: np.ndarray) -> bool:
    """Whether every value of a float array is finite (no NaN, no infinity)."""
    if values.size <= PYTHON_CHECK_MAX_VALUES:
        return all(map(math.isfinite, values.ravel().tolist()))
    return bool(np.logical_and.reduce(np.isfinite(values), axis=None))


def _is_dataframe(X):
    # On the class: ``X.dtypes`` would build a Series (tens of microseconds) to say yes.
    return type(X).__name__ == "DataFrame" and hasattr(type(X), "columns") \
        and hasattr(type(X), "dtypes")


def in_fitted_order(X, head: Head):
    """The DataFrame's columns in the order the source was fitted on, matched by
    name; a missing or unexpected column is an error naming it."""
    if head.feature_names is None:
        return X
    columns = [str(c) for c in X.columns.tolist()]  # tolist: iterating an Index is slower
    if columns == list(head.feature_names):
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


def _plain_numbers(X):
    """The DataFrame's values when pandas gives them as one real NumPy array (every
    column a NumPy number or a category of numbers), else None. The values are those
    ``X.to_numpy(float64)`` gives (integers become float64; narrower floats widen
    exactly later), without reading the columns' dtypes one by one."""
    values = X.to_numpy()
    if values.dtype.kind == "f":
        return values
    if values.dtype.kind in "biu":
        return values.astype(np.float64)
    return None


def _from_dataframe(X, head: Head) -> np.ndarray:
    X = in_fitted_order(X, head)
    values = _plain_numbers(X)
    if values is not None:
        return values
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


def labels_1d(y, head: Head) -> np.ndarray:
    """A 1-D label transformer's input (an array, list, Series or torch tensor of
    labels; an (n, 1) column is taken as scikit-learn's ``column_or_1d`` takes it) as a
    1-D NumPy array, cast to ``head.input_1d_dtype`` as the source casts it, and checked
    as a classification target where ``head.labels_target_check`` says so."""
    if isinstance(y, np.ndarray) and y.ndim == 1 and not head.input_1d_dtype \
            and not head.labels_target_check:
        return y
    if _is_dataframe(y) or type(y).__name__ == "Series":
        y = y.to_numpy()
    elif _is_sparse(y):
        y = y.toarray()
    elif type(y).__module__.startswith("torch"):
        y = y.detach().cpu().numpy()
    y = np.asarray(y) if isinstance(y, np.ndarray) or not isinstance(y, (list, tuple)) \
        else np.asarray(y, dtype=None if all(isinstance(v, (int, float, np.number))
                                             for v in y) else object)
    if y.ndim == 2 and y.shape[1] == 1:
        y = y[:, 0]
    if y.ndim != 1:
        raise ValueError(f"{head.estimator} expects a 1-D array of labels: y should be a 1d "
                         f"array, got an array of shape {y.shape} instead.")
    if head.input_1d_dtype:
        target = np.dtype(head.input_1d_dtype)
        if target.kind in "biu" and y.dtype.kind in "fc" and np.isnan(y).any():
            raise ValueError("Input y contains NaN.")
        if target.kind in "biu" and y.dtype.kind == "O":
            y = _numbers_or_error(y, head)
        with np.errstate(invalid="ignore", over="ignore"):
            y = np.asarray(y, dtype=target)
    if head.labels_target_check:
        _check_target(y, head)
    return y


def _numbers_or_error(y, head):
    try:
        values = y.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{head.estimator}: the labels were numbers when the model was "
                         f"fitted; got non-numeric values.") from None
    if np.isnan(values).any():
        raise ValueError("Input y contains NaN.")
    return values


def _check_target(y, head):
    """scikit-learn's ``type_of_target`` refusals for label binarization."""
    if y.dtype.kind == "f":
        if np.isnan(y).any():
            raise ValueError("Input contains NaN.")
        if np.isinf(y).any():
            raise ValueError(f"Input contains infinity or a value too large for {y.dtype!r}.")
        if (y != y.astype(np.int64)).any():
            raise ValueError("continuous target data is not supported with label binarization")
    elif y.dtype.kind == "O":
        if not all(isinstance(v, str) for v in y.tolist()):
            raise ValueError("The type of target data is not known")
    elif y.dtype.kind not in "biuUS":
        raise ValueError("The type of target data is not known")


def labels_are_binary(y) -> bool:
    """Whether 1-D labels (from ``labels_1d``) hold at most two distinct values, a
    "binary" target to scikit-learn's ``type_of_target``."""
    return len(np.unique(y)) <= 2


def to_feature_matrix(X, head: Head, schema, dtype, source_precision="float64") -> np.ndarray:
    """Validate ``X`` for ``head`` and ``schema`` and return it as C-contiguous ``dtype``
    (no copy when it already is one). ``source_precision`` is the precision the source
    library rounds inputs to: a float64 beyond float32's range is an infinity to it."""
    if head.input_blocks and (isinstance(X, dict) or needs_feeds(head)):
        X = feeds_matrix(X, head)  # an ONNX graph's named inputs, side by side
    if head.input_1d:  # one column of labels
        X = labels_1d(X, head)[:, None]
    elif _is_sparse(X):
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
    if X.dtype != dtype or not (X.flags.c_contiguous or X.flags.f_contiguous):
        with np.errstate(over="ignore"):
            X = in_memory_order(X, dtype)
    if X.size and not (head.allows_nan and head.allows_inf):
        _check_finite(X, head, source_precision)
    if X.size and head.inf_rejected_features:
        columns = list(head.inf_rejected_features)
        if np.isinf(X[:, columns]).any():
            raise ValueError(
                f"Input contains infinity in categorical feature(s) {columns}; "
                f"{head.estimator} does not accept infinite categories.")
    return X


def in_memory_order(X, dtype):
    """``X`` as ``dtype``, Fortran-ordered if it was (a float DataFrame's values are),
    else C-ordered. scikit-learn keeps the input's order, and its BLAS products round
    differently for the two, so the NumPy route must see the order it sees; the other
    routes make their rows C-ordered themselves."""
    if X.flags.f_contiguous and not X.flags.c_contiguous:
        return np.asfortranarray(X, dtype=dtype)
    return np.ascontiguousarray(X, dtype=dtype)


def feature_matrix_function(head: Head, schema, source_precision="float64"):
    """``(X, dtype) -> to_feature_matrix(X, head, schema, dtype, source_precision)``,
    with what it reads of ``head`` and ``schema`` looked up once. A NumPy array of
    numbers with the fitted width, where no column needs encoding, goes straight to the
    dtype conversion and the finiteness check: the same steps ``to_feature_matrix``
    takes for it, without the look-ups that make up most of a one-row call."""
    n_features = head.n_features
    plain = not head.input_1d and not head.inf_rejected_features \
        and (schema is None or not schema.needs_encoding) and not needs_feeds(head)
    check_finite = not (head.allows_nan and head.allows_inf)
    source_itemsize = np.dtype(source_precision).itemsize
    dtypes = {"float32": np.dtype(np.float32), "float64": np.dtype(np.float64)}

    def run(X, dtype):
        if not (plain and type(X) is np.ndarray and X.ndim == 2 and X.shape[1] == n_features
                and X.dtype.kind in "biuf"):
            return to_feature_matrix(X, head, schema, dtype, source_precision)
        target = dtypes.get(dtype) or np.dtype(dtype)
        if X.dtype != target or not (X.flags.c_contiguous or X.flags.f_contiguous):
            with np.errstate(over="ignore"):
                X = in_memory_order(X, target)
        if check_finite and X.size and not (
                target.itemsize <= source_itemsize and all_finite(X)):
            _check_finite(X, head, source_precision)
        return X

    # What a native small-batch entry must check in its place (container.py).
    run.plain, run.refuse_nan, run.refuse_inf = plain, not head.allows_nan, not head.allows_inf
    return run


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
