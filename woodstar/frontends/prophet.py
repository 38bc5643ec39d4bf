"""Prophet (``prophet.Prophet``, fitted) to IR: the forecast's point values.

The graph reads the forecaster's input matrix (woodstar/_forecast.py: ``ds`` as exact
days and ticks, then cap, floor, the extra regressors and the seasonality conditions)
and writes trend, every component of Prophet's ``train_component_cols`` and yhat:

    input ─> prophet_features ─┐
         └─> prophet_trend ────┴─> prophet_components

Everything is read off the fitted model: the scales (``start``, ``t_scale``,
``y_scale``, the floor), the changepoints and the MAP parameters, the seasonalities,
the holidays table (each holiday and window offset is one indicator column, set on the
days listed), the regressors' standardization. The trend's rate and offset for each
number of changepoints passed are computed here with Prophet's own expressions.

Refused, with the reason: uncertainty intervals (Prophet draws them at random; the
container refuses to give them), MCMC fits (their point forecast averages every
sample's components), country holidays (Prophet derives them from the years present in
each call), regressors forecast by their own Prophet model, and unfitted models.
"""

from __future__ import annotations

import datetime

import numpy as np

from ..exceptions import MissingConverter, NotFittedError, unsupported_message
from ..ir import Head, InputSchema, ModelIR
from ..ir.families.forecast import ProphetComponents, ProphetFeatures, ProphetTrend
from ..ir.graph import INPUT, ValueType
from ..ir.graph_builder import GraphBuilder
from .registry import register_frontend

__all__ = ["convert_prophet", "TICKS_PER_SECOND"]

TICKS_PER_SECOND = {"s": 1, "ms": 10 ** 3, "us": 10 ** 6, "ns": 10 ** 9}
_EPOCH = datetime.date(1970, 1, 1)


def _refuse(what, value, choices):
    raise MissingConverter(unsupported_message("Prophet", what, value, choices))


def _check_supported(m):
    if getattr(m, "history", None) is None or getattr(m, "params", None) is None:
        raise NotFittedError("Cannot convert Prophet: the model has not been fitted "
                             "(call fit first).")
    if m.mcmc_samples or np.asarray(m.params["beta"]).shape[0] != 1:
        _refuse("an MCMC fit (mcmc_samples > 0)", m.mcmc_samples,
                "MAP fits (mcmc_samples=0); Prophet's point forecast of an MCMC fit "
                "averages the components of every posterior sample")
    if m.country_holidays is not None:
        _refuse("built-in country holidays", m.country_holidays,
                "a holidays DataFrame (Prophet computes country holidays for the years "
                "present in each call, so they are not fixed at convert time)")
    for name, props in m.extra_regressors.items():
        if props.get("predictor_spec") is not None:
            _refuse(f"regressor {name!r} forecast by its own model (regressor_predictor)",
                    True, "regressors whose future values are passed in the frame")
    if m.growth not in ("linear", "logistic", "flat"):
        _refuse("growth", m.growth, ("linear", "logistic", "flat"))


def _unit(m):
    unit = getattr(m.start, "unit", "ns")
    if unit not in TICKS_PER_SECOND:
        _refuse("the time unit of ds", unit, sorted(TICKS_PER_SECOND))
    return unit


def _day_split(ticks, ticks_per_day):
    """(whole days since the epoch, ticks within the day) of an int64 tick count."""
    days, rem = divmod(int(ticks), ticks_per_day)
    return float(days), float(rem)


def _trend_tables(m):
    """k_t and m_t for 0..C changepoints at or before t, by Prophet's expressions."""
    k = np.nanmean(m.params["k"])
    offset = np.nanmean(m.params["m"])
    deltas = np.nanmean(m.params["delta"], axis=0)
    cps = np.asarray(m.changepoints_t, dtype=np.float64)
    C = len(cps)
    if len(deltas) != C:
        raise MissingConverter(f"Cannot convert Prophet: {len(deltas)} trend changes for "
                               f"{C} changepoints.")
    passed = np.tri(C + 1, C, -1, dtype=bool)  # row j: the first j changepoints passed
    if m.growth == "linear":  # piecewise_linear
        deltas_t = passed * deltas
        rates = deltas_t.sum(axis=1) + k
        offsets = (deltas_t * -cps).sum(axis=1) + offset
    elif m.growth == "logistic":  # piecewise_logistic
        k_s = np.asarray(k).item()
        m_s = np.asarray(offset).item()
        k_cum = np.concatenate((np.atleast_1d(k_s), np.cumsum(deltas) + k_s))
        gammas = np.zeros(C)
        for i, t_s in enumerate(cps):
            gammas[i] = (t_s - m_s - np.sum(gammas)) * (1 - k_cum[i] / k_cum[i + 1])
        rates = k_s * np.ones(C + 1)
        offsets = m_s * np.ones(C + 1)
        for s in range(C):
            rates[passed[:, s]] += deltas[s]
            offsets[passed[:, s]] += gammas[s]
    else:  # flat_trend: m everywhere
        rates = np.zeros(C + 1)
        offsets = np.full(C + 1, offset, dtype=np.float64)
    return cps, np.asarray(rates, np.float64), np.asarray(offsets, np.float64)


def _holiday_days(m):
    """Prophet's ``make_holiday_features`` keys, sorted, and the days each one marks."""
    if m.holidays is None or not len(m.holidays):
        return [], [], []
    marks = {}
    for row in m.holidays.itertuples():
        day = row.ds.date()
        try:
            lw = int(getattr(row, "lower_window", 0))
            uw = int(getattr(row, "upper_window", 0))
        except ValueError:  # NaN windows: Prophet's own fallback
            lw = uw = 0
        for offset in range(lw, uw + 1):
            key = "{}_delim_{}{}".format(row.holiday, "+" if offset >= 0 else "-", abs(offset))
            marks.setdefault(key, set()).add(
                (day + datetime.timedelta(days=offset) - _EPOCH).days)
    keys = sorted(marks)
    days, columns = [], []
    for j, key in enumerate(keys):
        for d in sorted(marks[key]):
            days.append(float(d))
            columns.append(j)
    return keys, days, columns


@register_frontend("prophet", "Prophet")
def convert_prophet(m, options=None) -> ModelIR:
    _check_supported(m)
    import prophet

    unit = _unit(m)
    pps = TICKS_PER_SECOND[unit]
    ticks_per_day = 86400 * pps
    # Prophet's floor without a floor column: 0, or y's minimum under minmax scaling
    floor_value = 0.0 if m.logistic_floor or m.scaling == "absmax" else float(m.y_min)
    frame = [("ds", f"datetime:{unit}")]
    if m.growth == "logistic":  # the edge checks cap > floor (this value, or the column)
        frame.append(("cap", f"cap:{floor_value!r}"))
    if m.logistic_floor:
        frame.append(("floor", "floor"))
    frame += [(name, "number") for name in m.extra_regressors]
    conditions = []
    for props in m.seasonalities.values():
        name = props["condition_name"]
        if name is not None and name not in conditions:
            conditions.append(name)
    frame += [(name, "condition") for name in conditions]
    column = {name: 1 + i for i, (name, _) in enumerate(frame)}  # ds fills columns 0 and 1
    n_inputs = len(frame) + 1

    keys, holiday_days, holiday_columns = _holiday_days(m)
    regressors = list(m.extra_regressors.items())
    features = ProphetFeatures(
        n_inputs=n_inputs, ticks_per_second=pps,
        periods=np.array([p["period"] for p in m.seasonalities.values()], np.float64),
        orders=np.array([p["fourier_order"] for p in m.seasonalities.values()], np.int64),
        conditions=np.array([column[p["condition_name"]] if p["condition_name"] else -1
                             for p in m.seasonalities.values()], np.int64),
        holiday_days=np.array(holiday_days, np.float64),
        holiday_columns=np.array(holiday_columns, np.int64), n_holiday_columns=len(keys),
        regressors=np.array([column[n] for n, _ in regressors], np.int64),
        mu=np.array([float(p["mu"]) for _, p in regressors], np.float64),
        std=np.array([float(p["std"]) for _, p in regressors], np.float64)).validate()
    names = [f"{name}_delim_{i + 1}" for name, p in m.seasonalities.items()
             for i in range(2 * p["fourier_order"])] + keys + [n for n, _ in regressors]
    train_cols = m.train_component_cols
    expected = [str(c).split("_delim_")[0] for c in names] or ["zeros"]
    beta = np.asarray(m.params["beta"], np.float64)[0]
    if len(beta) != features.n_outputs or train_cols.shape[0] != features.n_outputs:
        raise MissingConverter(
            f"Cannot convert Prophet: {features.n_outputs} features ({expected}) were built "
            f"from the model, but it has {len(beta)} coefficients.")

    start = np.datetime64(m.start.asm8, unit).astype(np.int64)
    t_scale = np.timedelta64(m.t_scale.to_timedelta64(), unit).astype(np.int64)
    start_days, start_rem = _day_split(start, ticks_per_day)
    cps, rates, offsets = _trend_tables(m)
    trend = ProphetTrend(
        growth=m.growth, n_inputs=n_inputs, ticks_per_day=float(ticks_per_day),
        start_days=start_days, start_rem=start_rem, t_scale=float(t_scale),
        changepoints_t=cps, rates=rates, offsets=offsets, y_scale=float(m.y_scale),
        cap_column=column["cap"] if m.growth == "logistic" else -1,
        floor_column=column["floor"] if m.logistic_floor else -1,
        floor_value=floor_value).validate()

    components = [str(c) for c in train_cols.columns]
    additive = np.array([c in m.component_modes["additive"] for c in components])
    combine = ProphetComponents(
        beta=beta, columns=np.asarray(train_cols.values, np.float64), additive=additive,
        y_scale=float(m.y_scale), additive_terms=components.index("additive_terms"),
        multiplicative_terms=components.index("multiplicative_terms")).validate()

    feature_names = ["ds:days", f"ds:{unit}_in_day"] + [name for name, _ in frame[1:]]
    builder = GraphBuilder(ValueType.floats(n_inputs))
    (x,) = builder.add(features, [INPUT], name="features")
    (tr,) = builder.add(trend, [INPUT], name="trend")
    (out,) = builder.add(combine, [x, tr], name="forecast")
    head = Head(estimator="Prophet", task="forecast", n_features=n_inputs,
                methods=("predict",), feature_names=tuple(feature_names),
                library_versions=(("prophet", prophet.__version__),),
                output_names=("trend", *components, "yhat"), frame_columns=tuple(frame))
    return ModelIR(head=head, graph=builder.build(out, out),
                   schema=InputSchema.numeric(feature_names)).validate()
