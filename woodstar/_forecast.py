"""The input and output edge of forecasters (``Head.task == "forecast"``, Prophet).

``predict(df)`` takes the frame Prophet's ``predict`` takes and prepares it as Prophet's
``setup_dataframe`` does: ``ds`` parsed with ``pd.to_datetime`` (int64 dates read as
strings), no time zone and no missing date; regressors as numbers without NaN;
seasonality conditions as booleans; cap above the floor; rows sorted by ``ds`` (a
stable sort) and numbered from 0, so rows come back in Prophet's order. Each check
raises Prophet's own message, naming the column.

``ds`` enters the float64 matrix as two exact columns (``Head.frame_columns``): whole
days since the epoch and the ticks of the model's time unit within the day, so no
precision is lost before the graph rebuilds Prophet's int64 time arithmetic. A date
with more precision than the model's unit is refused rather than rounded.

Uncertainty intervals are not given: Prophet computes ``yhat_lower``/``yhat_upper``
from random draws (the trend's future changepoints and the observation noise), so no
program can repeat them; asking for them raises ``NotImplementedError`` saying so.
"""

import numpy as np

__all__ = ["predict_frame", "refuse_intervals"]

_TICKS_PER_SECOND = {"s": 1, "ms": 10 ** 3, "us": 10 ** 6, "ns": 10 ** 9}


def refuse_intervals(head):
    raise NotImplementedError(
        f"{head.estimator}: uncertainty intervals (yhat_lower, yhat_upper) and predictive "
        f"samples are not available: Prophet computes them from random draws of future "
        f"trend changes and noise, which a converted model cannot reproduce. predict() "
        f"gives the point forecast (trend, components, yhat) exactly.")


def _frame(df, head):
    import pandas as pd

    if df is None:
        raise ValueError(f"{head.estimator}: pass the frame to forecast (a converted model "
                         f"keeps no history to predict on).")
    if not isinstance(df, pd.DataFrame):
        raise ValueError(f"{head.estimator}: predict takes a pandas DataFrame with a 'ds' "
                         f"column; got {type(df).__name__}.")
    if df.shape[0] == 0:
        raise ValueError("Dataframe has no rows.")
    if "ds" not in df:
        raise ValueError(f"{head.estimator}: the DataFrame has no 'ds' column (the dates to "
                         f"forecast).")
    return df.copy()


def _prepared(df, head):
    """Prophet's ``setup_dataframe`` checks, conversions and row order."""
    import pandas as pd

    df = _frame(df, head)
    if df["ds"].dtype == np.int64:
        df["ds"] = df["ds"].astype(str)
    df["ds"] = pd.to_datetime(df["ds"])
    if df["ds"].dt.tz is not None:
        raise ValueError("Column ds has timezone specified, which is not supported. "
                         "Remove timezone.")
    if df["ds"].isnull().any():
        raise ValueError("Found NaN in column ds.")
    for name, role in head.frame_columns:
        if role == "number":
            if name not in df:
                raise ValueError(f"Regressor {name!r} missing from dataframe")
            df[name] = pd.to_numeric(df[name])
            if df[name].isnull().any():
                raise ValueError(f"Found NaN in column {name!r}")
        elif role == "condition":
            if name not in df:
                raise ValueError(f"Condition {name!r} missing from dataframe")
            if not df[name].isin([True, False]).all():
                raise ValueError(f"Found non-boolean in column {name!r}")
            df[name] = df[name].astype("bool")
    if df.index.name == "ds":
        df.index.name = None
    df = df.sort_values("ds", kind="mergesort").reset_index(drop=True)
    roles = dict((role.split(":")[0], name) for name, role in head.frame_columns)
    if "floor" in roles and "floor" not in df:
        raise ValueError('Expected column "floor".')
    if "cap" in roles:
        if "cap" not in df:
            raise ValueError('Capacities must be supplied for logistic growth in column "cap"')
        floor = df["floor"] if "floor" in roles else float(_cap_role(head).split(":")[1])
        if (df["cap"] <= floor).any():
            raise ValueError("cap must be greater than floor (which defaults to 0).")
    return df


def _cap_role(head):
    return next(role for _, role in head.frame_columns if role.startswith("cap"))


def _ticks(ds, unit, head):
    """``ds`` as (days since the epoch, ticks of ``unit`` within the day), exact."""
    values = ds.to_numpy()
    converted = values.astype(f"datetime64[{unit}]")
    if not np.array_equal(converted.astype(values.dtype), values):
        raise ValueError(f"{head.estimator}: column 'ds' holds times finer than the model's "
                         f"time unit ({unit}, the unit of the dates it was fitted on).")
    days, rem = np.divmod(converted.astype(np.int64), 86400 * _TICKS_PER_SECOND[unit])
    return days.astype(np.float64), rem.astype(np.float64)


def _matrix(df, head):
    columns = []
    for name, role in head.frame_columns:
        if role.startswith("datetime:"):
            columns.extend(_ticks(df[name], role.split(":")[1], head))
        elif role == "condition":
            columns.append(df[name].to_numpy(dtype=np.float64))
        else:
            try:
                columns.append(df[name].to_numpy(dtype=np.float64))
            except (TypeError, ValueError):
                raise ValueError(f"{head.estimator}: column {name!r} must hold numbers; got "
                                 f"dtype {df[name].dtype}.") from None
    return np.ascontiguousarray(np.column_stack(columns), dtype=np.float64)


def predict_frame(container, df, intervals=False):
    """Prophet's ``predict`` frame without the interval columns: ds, trend, cap and
    floor where Prophet shows them, each component, yhat."""
    import pandas as pd

    head = container.ir.head
    if intervals:
        refuse_intervals(head)
    df = _prepared(df, head)
    _, values = container._run(_matrix(df, head))
    out = {"ds": df["ds"], "trend": values[:, 0]}
    if "cap" in df:
        out["cap"] = df["cap"]
    if any(role == "floor" for _, role in head.frame_columns):
        out["floor"] = df["floor"]
    for i, name in enumerate(head.output_names[1:], start=1):
        out[name] = values[:, i]
    return pd.DataFrame(out)
