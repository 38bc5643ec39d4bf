"""The input edge of converted ONNX graphs with several inputs or int64/string inputs.

An ONNX graph reads named tensors; woodstar's routes read one matrix. The graph's
inputs (``Head.input_blocks``: name, element type, width) lie side by side in that
matrix, in the graph's order. The container takes:

* a dict ``{input name: array}``, as ONNX Runtime takes it (an input of width 1 may
  be given as a 1-D array or an (n, 1) column);
* a pandas DataFrame whose columns are the inputs: an input of width 1 is the column
  of its name, an input ``x`` of width k > 1 the columns ``x_0`` ... ``x_{k-1}``
  (``column_names``); with a single graph input the DataFrame's columns are read in
  order, as for any single-input model;
* an array (or list) holding every input's columns side by side.

Each input is checked and converted as ONNX Runtime's Python binding reads it:
string inputs take ``str`` values (in an object array, any other value reads as
``str(value)``, so None is the string "None"; a numeric or bytes array is refused,
as ONNX Runtime refuses it); int64 inputs take integers (carried exactly as float64,
so magnitudes above 2**53 are refused); float and double inputs take numbers.
Missing or unexpected names, widths and row counts are errors naming the input.
"""

import numpy as np

__all__ = ["column_names", "needs_feeds", "feeds_matrix"]

_EXACT_INT = 2.0 ** 53


def column_names(blocks):
    """The DataFrame column names of the inputs (name, element, width), in order."""
    names = []
    for name, _, width in blocks:
        names.extend([name] if width == 1 else [f"{name}_{i}" for i in range(width)])
    return names


def needs_feeds(head) -> bool:
    """Whether every call goes through ``feeds_matrix`` (several inputs, or an int64
    or string input); a single float input takes the plain array path, and a dict
    only when one is passed."""
    blocks = head.input_blocks
    return len(blocks) > 1 or (len(blocks) == 1 and blocks[0][1] not in ("float", "double"))


def _is_dataframe(X):
    return type(X).__name__ == "DataFrame" and hasattr(type(X), "columns")


def _split(X, head):
    """Each input's values, in the graph's order."""
    blocks = head.input_blocks
    if isinstance(X, dict):
        missing = [name for name, _, _ in blocks if name not in X]
        extra = [str(k) for k in X if k not in {name for name, _, _ in blocks}]
        if missing or extra:
            raise ValueError(f"{head.estimator} reads the inputs {[b[0] for b in blocks]}; "
                             f"missing {missing}, unexpected {extra}.")
        return [X[name] for name, _, _ in blocks]
    if _is_dataframe(X) and len(blocks) > 1:
        columns = [str(c) for c in X.columns.tolist()]
        wanted = column_names(blocks)
        missing = [c for c in wanted if c not in columns]
        extra = [c for c in columns if c not in wanted]
        if missing or extra:
            raise ValueError(
                f"{head.estimator} reads the DataFrame columns {wanted} (one per input of "
                f"width 1, name_0.. for wider inputs); missing {missing}, unexpected {extra}.")
        parts, start = [], 0
        for name, element, width in blocks:
            frame = X[[c for c in X.columns if str(c) in wanted[start:start + width]]]
            frame = frame[sorted(frame.columns, key=lambda c: wanted.index(str(c)))]
            parts.append(frame.to_numpy(dtype=object if element == "string" else None))
            start += width
        return parts
    if _is_dataframe(X):
        X = X.to_numpy(dtype=object if blocks[0][1] == "string" else None)
    elif type(X).__module__.startswith("torch"):
        X = X.detach().cpu().numpy()
    X = np.asarray(X) if isinstance(X, np.ndarray) else np.asarray(X, dtype=object)
    total = sum(width for _, _, width in blocks)
    if X.ndim != 2 or X.shape[1] != total:
        raise ValueError(f"{head.estimator} expects a dict of its inputs "
                         f"{[b[0] for b in blocks]}, a DataFrame of their columns, or a 2-D "
                         f"array of {total} columns; got an array of shape {X.shape}.")
    bounds = np.cumsum([0] + [width for _, _, width in blocks])
    return [X[:, a:b] for a, b in zip(bounds[:-1], bounds[1:])]


def _strings(values, name, estimator):
    if values.dtype.kind == "U":
        return values.astype(object)
    if values.dtype.kind != "O":
        raise ValueError(f"{estimator}: input {name!r} is a string tensor; got an array of "
                         f"dtype {values.dtype} (ONNX Runtime refuses it too).")
    flat = values.ravel()
    if all(type(v) is str for v in flat.tolist()):
        return values
    # ONNX Runtime's binding reads any other object as its str()
    return np.array([v if isinstance(v, str) else str(v) for v in flat.tolist()],
                    dtype=object).reshape(values.shape)


def _integers(values, name, estimator):
    if values.dtype.kind == "O":
        try:
            values = values.astype(np.float64)
        except (TypeError, ValueError):
            raise ValueError(f"{estimator}: input {name!r} is an int64 tensor; it holds "
                             f"values that are not numbers.") from None
    if values.dtype.kind not in "biuf":
        raise ValueError(f"{estimator}: input {name!r} is an int64 tensor; got an array of "
                         f"dtype {values.dtype}.")
    if values.dtype.kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~np.isfinite(values) | (values != np.trunc(values))
        if bad.any():
            raise ValueError(f"{estimator}: input {name!r} is an int64 tensor; it holds "
                             f"values that are not integers (NaN, infinity or fractions).")
    numbers = values.astype(np.float64)
    if values.size and (np.abs(numbers) > _EXACT_INT).any():
        raise ValueError(f"{estimator}: input {name!r} holds integers beyond 2**53, which "
                         f"woodstar cannot carry exactly.")
    return numbers


def _numbers(values, name, estimator):
    if values.dtype.kind in "biuf":
        return values
    try:
        return values.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"{estimator}: input {name!r} is a float tensor; it holds values "
                         f"that are not numbers (dtype {values.dtype}).") from None


_CONVERT = {"string": _strings, "int64": _integers, "float": _numbers, "double": _numbers}


def feeds_matrix(X, head) -> np.ndarray:
    """``X`` as one 2-D array of every input's columns, in the graph's order: an object
    array where some input holds strings, else numbers."""
    parts, rows = [], None
    for values, (name, element, width) in zip(_split(X, head), head.input_blocks):
        if type(values).__module__.startswith("torch"):
            values = values.detach().cpu().numpy()
        if type(values).__name__ in ("Series", "DataFrame"):
            values = values.to_numpy(dtype=object if element == "string" else None)
        values = np.asarray(values) if isinstance(values, np.ndarray) or element != "string" \
            else np.asarray(values, dtype=object)
        if values.ndim == 1 and width == 1:
            values = values[:, None]
        if values.ndim != 2 or values.shape[1] != width:
            raise ValueError(f"{head.estimator}: input {name!r} takes (n, {width}) values; "
                             f"got shape {values.shape}.")
        if rows is not None and len(values) != rows:
            raise ValueError(f"{head.estimator}: input {name!r} has {len(values)} rows; the "
                             f"inputs before it have {rows}.")
        rows = len(values)
        parts.append(_CONVERT[element](values, name, head.estimator))
    if len(parts) == 1:
        return parts[0]
    if any(p.dtype.kind == "O" for p in parts):
        out = np.empty((rows, sum(p.shape[1] for p in parts)), dtype=object)
        start = 0
        for p in parts:
            out[:, start:start + p.shape[1]] = p
            start += p.shape[1]
        return out
    return np.hstack([p.astype(np.float64, copy=False) for p in parts])
