"""scikit-learn scalers and SimpleImputer -> ColumnOps IR (pipelines of them are
composed in sklearn_compose.py).

Their ``transform`` works in place on a copy of the input in its float dtype; the
operations below are the ones scikit-learn's dense code path performs, in order, with
the same operands (``ColumnOps`` explains the rounding). The scalers' public fitted
attributes are read (``mean_``, ``scale_``, ``min_``, ``center_``); SimpleImputer's
``statistics_``, rounded as its transform rounds them to the dtype it was fitted on
(``_fill_dtype``, private: the one private read here).
"""

import numpy as np

from ..exceptions import MissingConverter, unsupported_message
from ..ir import ColumnOps
from ._sklearn import check_fitted

__all__ = ["SCALERS", "COLUMN_WISE", "column_wise_ops", "imputer_fill", "imputer_ops"]

SCALERS = ("StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler")
COLUMN_WISE = SCALERS + ("SimpleImputer",)  # the transformers a pipeline may hold


def _vector(model, values, n_features):
    array = np.asarray(values)
    if array.dtype not in (np.float32, np.float64):
        array = array.astype(np.float64)
    return np.broadcast_to(array, (n_features,)).copy()


def column_wise_ops(model) -> ColumnOps:
    """The ColumnOps of one fitted scaler."""
    name = type(model).__name__
    check_fitted(model, "n_features_in_")
    n = int(model.n_features_in_)
    ops = []  # (op, operand, cast to the working dtype first)
    if name == "StandardScaler":
        if model.with_mean:
            ops.append(("sub", model.mean_, True))
        if model.with_std and model.scale_ is not None:
            ops.append(("div", model.scale_, True))
    elif name == "MinMaxScaler":
        ops += [("mul", model.scale_, False), ("add", model.min_, False)]
        if model.clip:
            low, high = model.feature_range
            ops += [("maximum", np.full(n, float(low)), True),
                    ("minimum", np.full(n, float(high)), True)]
    elif name == "MaxAbsScaler":
        ops.append(("div", model.scale_, False))
    elif name == "RobustScaler":
        if model.with_centering:
            ops.append(("sub", model.center_, False))
        if model.with_scaling:
            ops.append(("div", model.scale_, False))
    elif name == "SimpleImputer":
        return imputer_ops(model, imputer_fill(model, numeric_missing=True)[0])
    else:
        raise MissingConverter(unsupported_message(name, "this transformer", name, COLUMN_WISE))
    return ColumnOps(name=name, n_features=n, ops=tuple(op for op, _, _ in ops),
                     operands=tuple(_vector(model, v, n) for _, v, _ in ops),
                     cast_operand=tuple(c for _, _, c in ops)).validate()


def _missing_is_nan(missing):
    return isinstance(missing, (float, np.floating)) and bool(np.isnan(missing))


def _missing_is_number(missing):
    return isinstance(missing, (int, float, np.integer, np.floating)) \
        and not isinstance(missing, (bool, np.bool_)) and bool(np.isfinite(missing))


def imputer_fill(model, numeric_missing=False):
    """What SimpleImputer writes over its missing values (``statistics_`` in its fit
    dtype, 0 where unused) and which columns it keeps (it drops those never observed,
    unless ``keep_empty_features``). ``numeric_missing``: the caller builds its op with
    ``imputer_ops``, which also takes a number as ``missing_values``; otherwise only
    NaN is accepted."""
    def refuse(what, value, supported):
        raise MissingConverter(unsupported_message("SimpleImputer", what, value, supported))

    missing = model.missing_values
    if not (_missing_is_nan(missing) or (numeric_missing and _missing_is_number(missing))):
        refuse("missing_values", missing, "np.nan or a finite number" if numeric_missing
               else "np.nan")
    statistics = np.asarray(model.statistics_)
    try:  # most_frequent keeps its statistics in an object array, of numbers here
        statistics = statistics.astype(np.float64)
    except (TypeError, ValueError):
        refuse("non-numeric statistics", statistics.tolist()[:5], "numeric features")
    keep = ~np.isnan(statistics) | bool(model.keep_empty_features)
    statistics = np.where(np.isnan(statistics), 0.0, statistics)
    fill_dtype = np.dtype(getattr(model, "_fill_dtype", np.float64))
    if fill_dtype.kind == "f" and fill_dtype.itemsize == 4:
        statistics = statistics.astype(np.float32)
    return statistics, keep


def imputer_ops(model, fill) -> ColumnOps:
    """SimpleImputer's ColumnOps: ``fill`` (one value per input column) written where
    scikit-learn's mask ``_get_mask(X, missing_values)`` is true: NaN (``fill_nan``), or
    ``X == missing_values`` (``fill_value``). NumPy compares with a Python number in X's
    dtype and with a NumPy scalar in their common dtype; the op's cast flag says which."""
    missing = model.missing_values
    fill = np.asarray(fill)
    n = fill.shape[0]
    if _missing_is_nan(missing):
        return ColumnOps(name="SimpleImputer", n_features=n, ops=("fill_nan",),
                         operands=(fill,), cast_operand=(True,)).validate()
    if not _missing_is_number(missing):
        raise MissingConverter(unsupported_message(
            "SimpleImputer", "missing_values", missing, "np.nan or a finite number"))
    # Both rows in float64: the number exactly as given, the fill as rounded above.
    operand = np.stack([np.full(n, float(missing)), fill.astype(np.float64)])
    return ColumnOps(name="SimpleImputer", n_features=n, ops=("fill_value",),
                     operands=(operand,),
                     cast_operand=(not isinstance(missing, np.generic),)).validate()
