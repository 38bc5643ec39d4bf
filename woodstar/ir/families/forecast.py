"""Prophet's forecast as three ops: ``prophet_features``, ``prophet_trend`` and
``prophet_components``.

The input matrix of a forecaster (woodstar/_forecast.py) starts with the ``ds`` column
as two float64 columns that are exact: whole days since the epoch and the ticks of the
model's time unit within the day. Every quantity Prophet derives from a timestamp with
int64 arithmetic is rebuilt from them with float operations whose results are exact, or
rounded once where Prophet's own int64-to-float conversion rounds once:

* ``days * ticks_per_day`` is an exact float (its odd factor stays below 2**53), so
  ``(days - start_days) * ticks_per_day + (rem - start_rem)`` is one correctly rounded
  addition of exact terms: the float of the int64 tick difference that pandas divides
  by ``t_scale``;
* seconds since the epoch follow pandas' ``total_seconds`` (whole seconds plus the
  residual over ticks per second, nudged off a whole second where the ticks exceed
  2**53), before Prophet's ``/ 86400`` and its Fourier terms.

The references repeat Prophet's ``setup_dataframe``, ``fourier_series``,
``make_holiday_features``, ``piecewise_linear``/``piecewise_logistic``/``flat_trend``
and ``predict_seasonal_components`` expression for expression (its feature matrix even
has pandas' column-major layout, so the same BLAS call sums the components), so the
NumPy route gives Prophet's bits. The piecewise trend's rate and offset depend only on
how many changepoints lie at or before t; the frontend tabulates them for every count
with Prophet's own expressions, and the ops look them up.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["ProphetFeatures", "ProphetTrend", "ProphetComponents", "GROWTHS",
           "seconds_since_epoch", "ticks_from_start"]

GROWTHS = ("linear", "logistic", "flat")
_TWO_53 = float(2 ** 53)


def seconds_since_epoch(days, rem, ticks_per_second):
    """pandas' ``TimedeltaArray.total_seconds`` of (timestamp - 1970-01-01) from the
    exact day/tick split."""
    pps = float(ticks_per_second)
    q = np.floor(rem / pps)
    r = rem - q * pps
    low, high = r < 0, r >= pps  # the float quotient may land one off: fix the divmod
    q, r = np.where(low, q - 1, np.where(high, q + 1, q)), \
        np.where(low, r + pps, np.where(high, r - pps, r))
    floor_s = days * 86400.0 + q
    result = floor_s + r / pps
    whole = days * (86400.0 * pps)
    big = ((whole - _TWO_53) + rem > 0) | ((whole + _TWO_53) + rem < 0)  # |ticks| > 2**53
    fixable = big & (r != 0) & (np.abs(floor_s) < 2 ** 52)
    on_floor = fixable & (result == floor_s)
    on_ceil = fixable & (result == floor_s + 1.0)
    result = np.where(on_floor, np.nextafter(result, result + 1.0), result)
    return np.where(on_ceil, np.nextafter(result, result - 1.0), result)


def ticks_from_start(days, rem, start_days, start_rem, ticks_per_day):
    """The float of the int64 ticks from Prophet's ``start``, as NumPy converts it."""
    return (days - start_days) * ticks_per_day + (rem - start_rem)


@register_op
@dataclass(frozen=True, eq=False)
class ProphetFeatures(Op):
    """``make_all_seasonality_features``: Fourier terms of each seasonality (zero where
    its condition column is False), holiday indicators, standardized regressors, in
    Prophet's column order; one zero column when there are none (Prophet's ``zeros``)."""

    kind = "prophet_features"
    n_inputs: int
    ticks_per_second: int
    periods: np.ndarray  # (S,) days
    orders: np.ndarray  # (S,) Fourier orders
    conditions: np.ndarray  # (S,) input column of the condition, or -1
    holiday_days: np.ndarray  # (H,) days since the epoch of each holiday occurrence
    holiday_columns: np.ndarray  # (H,) the holiday feature column each one sets
    n_holiday_columns: int
    regressors: np.ndarray  # (R,) input columns
    mu: np.ndarray  # (R,)
    std: np.ndarray  # (R,)

    @property
    def n_outputs(self):
        width = int(2 * np.sum(self.orders)) + self.n_holiday_columns + len(self.regressors)
        return max(width, 1)

    def validate(self):
        S, R = len(self.periods), len(self.regressors)
        self.expect(self.orders.shape == (S,) and self.conditions.shape == (S,),
                    "one order and condition per seasonality")
        self.expect(np.all(self.orders >= 1), "Fourier orders must be >= 1")
        self.expect(self.holiday_days.shape == self.holiday_columns.shape, "holiday shapes")
        self.expect(np.all((self.holiday_columns >= 0)
                           & (self.holiday_columns < max(self.n_holiday_columns, 1))),
                    "holiday column out of range")
        self.expect(self.mu.shape == (R,) and self.std.shape == (R,), "regressor scales")
        used = np.concatenate([self.regressors, self.conditions[self.conditions >= 0]])
        self.expect(np.all((used >= 2) & (used < self.n_inputs)), "input column out of range")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_inputs)
        return [ValueType.floats(self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def reference(self, inputs):
        M = np.asarray(inputs[0], dtype=np.float64)
        n = M.shape[0]
        out = np.empty((self.n_outputs, n)).T  # pandas' column-major block, as Prophet's X
        if not len(self.periods) and not self.n_holiday_columns and not len(self.regressors):
            out[:, 0] = 0.0
            return [out]
        col = 0
        if len(self.periods):
            t = seconds_since_epoch(M[:, 0], M[:, 1], self.ticks_per_second) / (24 * 60 * 60)
            x_T = np.pi * 2 * t
            for period, order, condition in zip(self.periods, self.orders, self.conditions):
                start = col
                for i in range(int(order)):
                    c = (i + 1) / float(period) * x_T
                    out[:, col] = np.sin(c)
                    out[:, col + 1] = np.cos(c)
                    col += 2
                if condition >= 0:
                    out[M[:, condition] == 0, start:col] = 0
        if self.n_holiday_columns:
            hits = M[:, 0][:, None] == self.holiday_days[None, :]
            for j in range(self.n_holiday_columns):
                out[:, col] = hits[:, self.holiday_columns == j].any(axis=1).astype(np.float64)
                col += 1
        for index, mu, std in zip(self.regressors, self.mu, self.std):
            out[:, col] = (M[:, index] - mu) / std
            col += 1
        return [out]

    def to_saved(self):
        meta = {"n_inputs": self.n_inputs, "ticks_per_second": self.ticks_per_second,
                "n_holiday_columns": self.n_holiday_columns}
        return meta, {name: np.asarray(getattr(self, name)) for name in self._ARRAYS}

    _ARRAYS = ("periods", "orders", "conditions", "holiday_days", "holiday_columns",
               "regressors", "mu", "std")

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_inputs=int(meta["n_inputs"]), ticks_per_second=int(meta["ticks_per_second"]),
                   n_holiday_columns=int(meta["n_holiday_columns"]),
                   **{name: np.asarray(arrays[name]) for name in cls._ARRAYS})


@register_op
@dataclass(frozen=True, eq=False)
class ProphetTrend(Op):
    """``predict_trend``: the piecewise linear or logistic trend, or the flat one, at
    t = ticks from ``start`` / ``t_scale``, times ``y_scale`` plus the floor. ``rates``
    and ``offsets`` hold k_t and m_t for 0..C changepoints at or before t."""

    kind = "prophet_trend"
    growth: str
    n_inputs: int
    ticks_per_day: float
    start_days: float
    start_rem: float
    t_scale: float  # ticks
    changepoints_t: np.ndarray  # (C,) sorted
    rates: np.ndarray  # (C + 1,)
    offsets: np.ndarray  # (C + 1,)
    y_scale: float
    cap_column: int  # -1 unless logistic
    floor_column: int  # -1: the constant ``floor_value``
    floor_value: float

    def validate(self):
        C = len(self.changepoints_t)
        self.expect(self.growth in GROWTHS, f"growth {self.growth!r}")
        self.expect(self.rates.shape == (C + 1,) and self.offsets.shape == (C + 1,),
                    "one rate and offset per number of changepoints passed")
        self.expect((self.cap_column >= 2) == (self.growth == "logistic"),
                    "logistic growth, and only it, reads a cap column")
        self.expect(self.floor_column < self.n_inputs and self.cap_column < self.n_inputs,
                    "input column out of range")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_inputs)
        return [ValueType.floats(1)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def scaled_time(self, M):
        return ticks_from_start(M[:, 0], M[:, 1], self.start_days, self.start_rem,
                                self.ticks_per_day) / self.t_scale

    def reference(self, inputs):
        M = np.asarray(inputs[0], dtype=np.float64)
        t = self.scaled_time(M)
        passed = (self.changepoints_t[None, :] <= t[..., None]).sum(axis=1)
        k_t, m_t = self.rates[passed], self.offsets[passed]
        floor = M[:, self.floor_column] if self.floor_column >= 0 \
            else np.full(len(t), self.floor_value)
        if self.growth == "linear":
            trend = k_t * t + m_t
        elif self.growth == "logistic":
            cap = (M[:, self.cap_column] - floor) / self.y_scale
            trend = cap / (1 + np.exp(-k_t * (t - m_t)))
        else:
            trend = self.offsets[0] * np.ones_like(t)
        return [(trend * self.y_scale + floor)[:, None]]

    _ARRAYS = ("changepoints_t", "rates", "offsets")
    _FLOATS = ("ticks_per_day", "start_days", "start_rem", "t_scale", "y_scale", "floor_value")

    def to_saved(self):
        meta = {"growth": self.growth, "n_inputs": self.n_inputs,
                "cap_column": self.cap_column, "floor_column": self.floor_column,
                **{name: float(getattr(self, name)) for name in self._FLOATS}}
        return meta, {name: np.asarray(getattr(self, name)) for name in self._ARRAYS}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(growth=str(meta["growth"]), n_inputs=int(meta["n_inputs"]),
                   cap_column=int(meta["cap_column"]), floor_column=int(meta["floor_column"]),
                   **{name: float(meta[name]) for name in cls._FLOATS},
                   **{name: np.asarray(arrays[name]) for name in cls._ARRAYS})


@register_op
@dataclass(frozen=True, eq=False)
class ProphetComponents(Op):
    """``predict_seasonal_components`` and ``yhat``: reads (features, trend); writes
    trend, each component (``columns`` marks the features it sums), then yhat."""

    kind = "prophet_components"
    beta: np.ndarray  # (K,)
    columns: np.ndarray  # (K, C) 0/1: Prophet's ``train_component_cols``
    additive: np.ndarray  # (C,) bool: the component is scaled by y_scale
    y_scale: float
    additive_terms: int  # index of the component additive_terms
    multiplicative_terms: int

    @property
    def n_outputs(self):
        return self.columns.shape[1] + 2

    def validate(self):
        K, C = self.columns.shape
        self.expect(self.beta.shape == (K,), "one coefficient per feature")
        self.expect(self.additive.shape == (C,), "one mode per component")
        self.expect(0 <= self.additive_terms < C and 0 <= self.multiplicative_terms < C,
                    "additive_terms and multiplicative_terms are components")
        return self

    def output_types(self, input_types):
        features, trend = input_types
        self.expect_width(features, self.columns.shape[0], "the features")
        self.expect_width(trend, 1, "the trend")
        return [ValueType.floats(self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def reference(self, inputs):
        X, trend = inputs
        beta = self.beta[None, :]
        out = np.empty((X.shape[0], self.n_outputs))
        out[:, 0] = trend[:, 0]
        for c in range(self.columns.shape[1]):
            beta_c = beta * self.columns[:, c]
            comp = np.matmul(X, beta_c.transpose())
            if self.additive[c]:
                comp *= self.y_scale
            out[:, 1 + c] = np.nanmean(comp, axis=1)  # of one sample: the sample itself
        out[:, -1] = out[:, 0] * (1 + out[:, 1 + self.multiplicative_terms]) \
            + out[:, 1 + self.additive_terms]
        return [out]

    def to_saved(self):
        meta = {"y_scale": float(self.y_scale), "additive_terms": self.additive_terms,
                "multiplicative_terms": self.multiplicative_terms}
        return meta, {"beta": self.beta, "columns": self.columns, "additive": self.additive}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(beta=np.asarray(arrays["beta"]), columns=np.asarray(arrays["columns"]),
                   additive=np.asarray(arrays["additive"], dtype=bool),
                   y_scale=float(meta["y_scale"]), additive_terms=int(meta["additive_terms"]),
                   multiplicative_terms=int(meta["multiplicative_terms"]))
