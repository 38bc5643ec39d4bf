"""Torch lowering of Prophet's ops (woodstar/ir/families/forecast.py).

All in float64 whatever the program's input dtype (the dates need it). The day/tick
arithmetic and the trend tables are exact as in the IR; ``sin``, ``cos`` and ``exp``
are Torch's, and the components are one matrix product, so those can differ from
NumPy's in the last bits (the NumPy route repeats Prophet's own calls). pandas' nudge
off a whole second (``nextafter``) is written with a table of powers of two, so that
every backend can export it. Constants that float32 cannot hold are buffers
(``register_constant``): exporters would write them as float32 literals.
"""

import math

import numpy as np
import torch
from torch import nn

from ..ops import register_lowering
from ._constants import register_constant

_F64 = torch.float64


def _buffer(module, name, array, dtype=_F64):
    module.register_buffer(name, torch.as_tensor(np.ascontiguousarray(array)).to(dtype))


class _Seconds(nn.Module):
    """pandas' ``total_seconds`` of (ds - epoch) from (days, ticks within the day)."""

    def __init__(self, ticks_per_second):
        super().__init__()
        register_constant(self, "pps", ticks_per_second)
        register_constant(self, "per_day", 86400.0 * float(ticks_per_second))
        # ticks can pass 2**53 only in units of a microsecond or finer
        self.nudge = ticks_per_second >= 10 ** 6
        _buffer(self, "pow2", [2.0 ** e for e in range(53)])
        _buffer(self, "above", [2.0 ** (e - 52) for e in range(53)])
        _buffer(self, "below_power", [2.0 ** (e - 53) for e in range(53)])

    def _next(self, v, up):
        """nextafter(v, v + 1) if ``up``, else nextafter(v, v - 1), for integer
        values 1 <= |v| <= 2**52."""
        a = v.abs()
        e = (a.unsqueeze(1) >= self.pow2).sum(dim=1) - 1
        e = torch.maximum(e, torch.zeros_like(e))  # (clamp exports an infinite bound)
        on_power = a == self.pow2[e]
        below = torch.where(on_power, self.below_power[e], self.above[e])
        larger = v > 0 if up else v < 0  # the magnitude grows
        a2 = torch.where(larger, a + self.above[e], a - below)
        return torch.where(v > 0, a2, -a2)

    def forward(self, days, rem):
        pps = self.pps
        q = torch.floor(rem / pps)
        r = rem - q * pps
        low, high = r < 0, r >= pps
        q = torch.where(low, q - 1, torch.where(high, q + 1, q))
        r = torch.where(low, r + pps, torch.where(high, r - pps, r))
        floor_s = days * 86400.0 + q
        result = floor_s + r / pps
        if self.nudge:
            whole = days * self.per_day
            big = ((whole - 2.0 ** 53) + rem > 0) | ((whole + 2.0 ** 53) + rem < 0)
            fixable = big & (r != 0) & (floor_s.abs() < 2.0 ** 52)
            on_floor = fixable & (result == floor_s)
            on_ceil = fixable & (result == floor_s + 1.0)
            result = torch.where(on_floor, self._next(result, True), result)
            result = torch.where(on_ceil, self._next(result, False), result)
        return result


class ProphetFeaturesNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.seconds = _Seconds(op.ticks_per_second)
        register_constant(self, "two_pi", math.pi * 2)
        blocks, factors = [], []
        for period, order, condition in zip(op.periods, op.orders, op.conditions):
            blocks.append((int(order), int(condition)))
            factors += [(i + 1) / float(period) for i in range(int(order))]
        self.blocks = blocks
        _buffer(self, "factors", factors)
        self.n_holiday_columns = int(op.n_holiday_columns)
        assign = np.zeros((len(op.holiday_days), max(self.n_holiday_columns, 1)))
        assign[np.arange(len(op.holiday_days)), op.holiday_columns] = 1.0
        _buffer(self, "holiday_days", op.holiday_days)
        _buffer(self, "assign", assign)
        self.regressors = [int(i) for i in op.regressors]
        _buffer(self, "mu", op.mu)
        _buffer(self, "std", op.std)
        width = op.n_outputs
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (
            6 * width + len(op.holiday_days) + 60)

    def forward(self, M):
        M = M.to(_F64)
        n = M.shape[0]
        parts = []
        if self.blocks:
            t = self.seconds(M[:, 0], M[:, 1]) / 86400.0
            x_T = self.two_pi * t
            c = self.factors.unsqueeze(0) * x_T.unsqueeze(1)
            waves = torch.stack([torch.sin(c), torch.cos(c)], dim=2).reshape(n, -1)
            start = 0
            for order, condition in self.blocks:
                block = waves[:, start:start + 2 * order]
                if condition >= 0:
                    off = (M[:, condition] == 0).unsqueeze(1)
                    block = torch.where(off, torch.zeros_like(block), block)
                parts.append(block)
                start += 2 * order
        if self.n_holiday_columns:
            hits = (M[:, 0:1] == self.holiday_days.unsqueeze(0)).to(_F64)
            parts.append((hits @ self.assign > 0).to(_F64))
        if self.regressors:
            parts.append((M[:, self.regressors] - self.mu) / self.std)
        if not parts:  # Prophet's "zeros" column
            return (torch.zeros((n, 1), dtype=_F64, device=M.device),)
        return (torch.cat(parts, dim=1),)


class ProphetTrendNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.growth = op.growth
        for name in ("ticks_per_day", "start_days", "start_rem", "t_scale", "y_scale",
                     "floor_value"):
            register_constant(self, name, getattr(op, name))
        register_constant(self, "flat", op.offsets[0])
        self.cap_column = int(op.cap_column)
        self.floor_column = int(op.floor_column)
        _buffer(self, "changepoints", op.changepoints_t)
        _buffer(self, "rates", op.rates)
        _buffer(self, "offsets", op.offsets)
        C = len(op.changepoints_t)
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (C + 12)

    def forward(self, M):
        M = M.to(_F64)
        t = ((M[:, 0] - self.start_days) * self.ticks_per_day + (M[:, 1] - self.start_rem)) \
            / self.t_scale
        if self.floor_column >= 0:
            floor = M[:, self.floor_column]
        else:
            floor = self.floor_value.expand_as(t)
        if self.growth == "flat":
            trend = self.flat.expand_as(t)
        else:
            passed = (self.changepoints.unsqueeze(0) <= t.unsqueeze(1)).sum(dim=1)
            k_t, m_t = self.rates[passed], self.offsets[passed]
            if self.growth == "linear":
                trend = k_t * t + m_t
            else:
                cap = (M[:, self.cap_column] - floor) / self.y_scale
                trend = cap / (1 + torch.exp(-k_t * (t - m_t)))
        return ((trend * self.y_scale + floor).unsqueeze(1),)


class ProphetComponentsNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        _buffer(self, "weights", op.beta[:, None] * op.columns)
        _buffer(self, "scale", np.where(op.additive, float(op.y_scale), 1.0))
        self.add = 1 + int(op.additive_terms)
        self.mult = 1 + int(op.multiplicative_terms)
        width = op.n_outputs
        self.estimate_bytes = lambda n_rows: 8 * n_rows * 2 * width

    def forward(self, X, trend):
        comps = (X.to(_F64) @ self.weights) * self.scale
        out = torch.cat([trend, comps], dim=1)
        yhat = trend[:, 0] * (1 + out[:, self.mult]) + out[:, self.add]
        return (torch.cat([out, yhat.unsqueeze(1)], dim=1),)


@register_lowering("prophet_features")
def _features(op, input_dtypes, context):
    return ProphetFeaturesNode(op)


@register_lowering("prophet_trend")
def _trend(op, input_dtypes, context):
    return ProphetTrendNode(op)


@register_lowering("prophet_components")
def _components(op, input_dtypes, context):
    return ProphetComponentsNode(op)
