"""The input edge for models with string or re-coded category columns: each column
becomes numbers as the schema says (``woodstar/ir/schema.py``), once per call, before
any route runs; the source's own refusals (an unknown category under
``handle_unknown="error"``) are raised here, naming the column."""

import numpy as np

from .ir import CATEGORY, STRING
from .ir.schema import NONE_CODE, UNKNOWN_CODE

__all__ = ["encode_columns", "string_codes"]


def _is_dataframe(X):
    # On the class: ``X.dtypes`` would build a Series (tens of microseconds) to say yes.
    return type(X).__name__ == "DataFrame" and hasattr(type(X), "columns") \
        and hasattr(type(X), "dtypes")


def _is_missing(values: np.ndarray) -> np.ndarray:
    """NaN-like entries of an object array (NaN, pandas NA/NaT), not None."""
    try:
        import pandas as pd

        missing = np.asarray(pd.isna(values), dtype=bool)
    except ImportError:
        missing = np.array([v != v for v in values], dtype=bool)
    return missing & ~_is_none(values)


def _is_none(values: np.ndarray) -> np.ndarray:
    return np.array([v is None for v in values], dtype=bool) if values.dtype.kind == "O" \
        else np.zeros(len(values), dtype=bool)


def string_codes(values, vocabulary) -> np.ndarray:
    """Each value's index in ``vocabulary`` as a float; None is NONE_CODE, NaN stays
    NaN, anything else is UNKNOWN_CODE."""
    values = np.asarray(values, dtype=object)
    try:
        import pandas as pd

        codes = pd.Index(list(vocabulary), dtype=object).get_indexer(values).astype(np.float64)
    except ImportError:
        lookup = {v: float(i) for i, v in enumerate(vocabulary)}
        codes = np.array([lookup.get(v, UNKNOWN_CODE) if isinstance(v, str) else UNKNOWN_CODE
                          for v in values], dtype=np.float64)
    codes[_is_none(values)] = NONE_CODE
    codes[_is_missing(values)] = np.nan
    return codes


def _numbers(values, column, estimator):
    values = np.asarray(values)
    if values.dtype.kind in "biuf":
        return values.astype(np.float64)
    try:
        return values.astype(np.float64)
    except (TypeError, ValueError):
        raise ValueError(
            f"{estimator}: column {column.name!r} was numeric when the model was fitted; "
            f"it now holds non-numeric values (dtype {values.dtype}).") from None


def _string_column(values, column, estimator):
    values = np.asarray(values)
    if values.dtype.kind in "biuf" and not np.isnan(values.astype(np.float64)).all():
        raise ValueError(
            f"{estimator}: column {column.name!r} held strings when the model was fitted; "
            f"it now holds numbers (dtype {values.dtype}).")
    return string_codes(values.astype(object), column.vocabulary)


def _category_column(series, column, estimator):
    """A pandas category column re-coded to the fitted categories (values outside them
    and missing ones become NaN), as LightGBM and XGBoost re-code DataFrames."""
    import pandas as pd

    if not isinstance(series.dtype, pd.CategoricalDtype):
        raise ValueError(
            f"{estimator}: column {column.name!r} was a pandas category column when the "
            f"model was fitted; pass it as one (got dtype {series.dtype}).")
    values = series.astype(object)
    codes = pd.Categorical(values, categories=list(column.category_values)).codes
    if column.unseen_category == "error":
        unseen = (codes < 0) & ~pd.isna(values).to_numpy()
        if unseen.any():
            shown = sorted({str(v) for v in values[unseen]})[:10]
            raise ValueError(f"{estimator}: column {column.name!r} holds categories not in "
                             f"the training set: {shown}.")
    return np.where(codes < 0, np.nan, codes).astype(np.float64)


def _check_allowed(numbers, column, estimator, values, labels=False):
    if column.positive_only:
        with np.errstate(invalid="ignore"):
            if (numbers <= 0).any():
                raise ValueError(f"{column.check_owner or estimator}: the Box-Cox "
                                 f"transformation can only be applied to strictly positive "
                                 f"data (column {column.name!r}).")
    if column.allowed is None and column.allowed_missing:
        return
    missing = np.isnan(numbers)
    unknown = np.zeros(len(numbers), dtype=bool) if column.allowed is None \
        else ~np.isin(numbers, column.allowed) & ~missing
    if not column.allowed_missing:
        unknown |= missing
    if unknown.any() and column.allowed is None:
        raise ValueError(f"{column.check_owner or estimator}: column {column.name!r} has "
                         f"missing values in transform but had none in fit.")
    if unknown.any() and labels:
        raise ValueError(f"y contains previously unseen labels: {_unseen_labels(values, unknown)}")
    if unknown.any():
        found = np.asarray(values, dtype=object)[unknown] if column.kind == STRING \
            else numbers[unknown]
        shown = sorted({v if isinstance(v, str) else None if v is None else float(v)
                        for v in found.tolist()}, key=str)
        raise ValueError(f"{column.check_owner or estimator}: found unknown categories "
                         f"{shown[:10]} in column {column.name!r} during transform.")


def _unseen_labels(values, unknown):
    """The unseen labels as scikit-learn's LabelEncoder names them: the first one for
    strings (it looks them up one by one), else every distinct one, sorted."""
    values = np.asarray(values)
    if values.dtype.kind in "biuf":
        return list(np.unique(values[unknown]))
    return repr(values[unknown][0])


def encode_columns(X, head, schema, original=None) -> np.ndarray:
    """``X`` (a DataFrame, an object or numeric array, a list) as a float64 matrix of
    the schema's columns; strings and categories encoded."""
    from ._input import in_fitted_order

    estimator = head.estimator
    frame = _is_dataframe(X)
    if frame:
        X = in_fitted_order(X, head)
        columns = [X.iloc[:, i] for i in range(X.shape[1])]
    else:
        array = np.asarray(X, dtype=object) if not isinstance(X, np.ndarray) else X
        if array.ndim != 2:
            return X  # the shape check downstream says what is wrong
        columns = [array[:, i] for i in range(array.shape[1])]
    if len(columns) != len(schema.columns):
        return X if not _is_dataframe(X) else X.to_numpy()  # reported downstream
    out = np.empty((len(columns[0]) if columns else 0, len(columns)), dtype=np.float64)
    for i, (values, column) in enumerate(zip(columns, schema.columns)):
        if column.kind == STRING:
            values = _plain(values)
            numbers = _string_column(values, column, estimator)
        elif column.kind == CATEGORY and column.category_values is not None and frame:
            numbers = _category_column(values, column, estimator)
        else:
            numbers = _numbers(_plain(values), column, estimator)
        _check_allowed(numbers, column, estimator, values, labels=head.input_1d)
        out[:, i] = numbers
    return out


def _plain(values):
    """A pandas column as a NumPy array (missing values as NaN where numeric)."""
    if hasattr(values, "to_numpy"):
        if getattr(values.dtype, "kind", "O") in "biuf":
            return values.to_numpy(dtype=np.float64, na_value=np.nan)
        return values.to_numpy(dtype=object)
    return values
