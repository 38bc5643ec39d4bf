"""Torch lowering of the ``spline`` op (woodstar/ir/families/spline.py).

The basis is evaluated as SciPy evaluates a ``BSpline``: each value's knot interval
``ell`` (the last ``t[l] <= x`` with ``k <= l < n``, so values beyond the knots continue
the boundary pieces), then the Cox–de Boor triangle over the ``k + 1`` non-zero basis
functions (SciPy's ``_deBoor_D``, same operations in the same order), then
``sum_a c[ell - k + a] * h[a]``. Fixed shapes throughout: the interval is a count of
comparisons, knots and coefficients are gathered by index. All in float64, cast to the
input's float dtype at the end, as scikit-learn fills its output array.
"""

import numpy as np
import torch
from torch import nn

from ..ops import register_lowering


def _mod(a, b):
    """NumPy's float ``%``: fmod, moved into the divisor's sign."""
    m = torch.fmod(a, b)
    # logical_xor, not a != of two truth values: TVM's LLVM rejects a float compare of booleans
    return torch.where((m != 0) & torch.logical_xor(b < 0, m < 0), m + b, m)


class SplineNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = getattr(torch, np.dtype(dtype).name)
        F, n_t = op.knots.shape
        self.k = int(op.degree)
        self.n_t = n_t
        self.n_c = int(op.coef.shape[1])
        self.S = op.n_splines
        self.F = F
        self.extrapolation = op.extrapolation
        self.zeros = op.handle_missing == "zeros"
        k, n = self.k, n_t - self.k - 1
        self.register_buffer("knots", torch.from_numpy(np.ascontiguousarray(op.knots, np.float64)))
        self.register_buffer("knots_flat", self.knots.reshape(-1).clone())
        self.register_buffer("inner", self.knots[:, k + 1:n].clone())  # (F, n - k - 1)
        self.register_buffer("coef_flat", torch.from_numpy(
            np.ascontiguousarray(op.coef, np.float64)).reshape(F * self.n_c, self.S))
        self.register_buffer("t_offset", torch.arange(F) * n_t)
        self.register_buffer("c_offset", torch.arange(F) * self.n_c)
        period = op.knots[:, n] - op.knots[:, k]
        self.register_buffer("t_k", torch.from_numpy(op.knots[:, k].copy()))
        self.register_buffer("period", torch.from_numpy(period.copy()))
        self.register_buffer("has_period", torch.from_numpy(period > 0))
        for name in ("xmin", "xmax", "f_min", "f_max", "fp_min", "fp_max"):
            self.register_buffer(name, torch.from_numpy(np.asarray(getattr(op, name), np.float64)))
        cols = np.arange(self.S)
        low = cols[None, :] < op.n_linear[:, None]
        high = cols[None, :] >= self.S - op.n_linear[:, None]
        if op.extrapolation == "constant":
            low = np.broadcast_to(cols < op.degree, (F, self.S))
            high = np.broadcast_to(cols >= self.S - op.degree, (F, self.S))
        self.register_buffer("low", torch.from_numpy(np.ascontiguousarray(low)))
        self.register_buffer("high", torch.from_numpy(np.ascontiguousarray(high)))
        self.register_buffer("kept", torch.tensor(op.kept_columns(), dtype=torch.long))
        width = F * self.S
        self.estimate_bytes = lambda n_rows: 8 * n_rows * F * (6 * self.k + 8 + 4 * self.S) \
            + 8 * n_rows * width

    def basis(self, x):
        """(rows, F) float64 -> (rows, F, S): the splines at x, extrapolated."""
        k = self.k
        ell = (self.inner.unsqueeze(0) <= x.unsqueeze(2)).sum(dim=2) + k  # (rows, F)
        base = ell + self.t_offset
        t = {d: self.knots_flat[base + d] for d in range(-k + 1, k + 1)}
        h = [torch.ones_like(x)]
        for j in range(1, k + 1):
            hh = h
            left, right, equal = [None] * (j + 1), [None] * (j + 1), [None] * (j + 1)
            for m in range(1, j + 1):
                xb, xa = t[m], t[m - j]
                eq = xb == xa
                w = hh[m - 1] / torch.where(eq, torch.ones_like(xb), xb - xa)
                left[m] = torch.where(eq, torch.zeros_like(x), w * (x - xa))
                right[m - 1] = w * (xb - x)
                equal[m] = eq
            new = [torch.where(equal[1], torch.zeros_like(x), 0.0 + right[0])]
            for m in range(1, j):
                new.append(torch.where(equal[m + 1], left[m], left[m] + right[m]))
            new.append(left[j])
            h = new
        first = ell - k + self.c_offset
        out = torch.zeros(x.shape + (self.S,), dtype=x.dtype, device=x.device)
        for a in range(k + 1):
            out = out + self.coef_flat[first + a] * h[a].unsqueeze(2)
        return out

    def forward(self, X):
        X = X.to(torch.float64)
        nan = torch.isnan(X).unsqueeze(2)
        zero = torch.zeros((), dtype=torch.float64, device=X.device)
        if self.extrapolation in ("continue", "periodic"):
            x = X
            if self.extrapolation == "periodic":
                x = torch.where(self.has_period, self.t_k + _mod(X - self.t_k, self.period),
                                torch.zeros_like(X))
            out = self.basis(x)
            if self.zeros:
                out = torch.where(nan, zero, out)
        else:
            inside = ((self.xmin <= X) & (X <= self.xmax)).unsqueeze(2)
            out = torch.where(inside, self.basis(X), zero)
            below = (X < self.xmin).unsqueeze(2)
            above = (X > self.xmax).unsqueeze(2)
            if self.extrapolation == "constant":
                out = torch.where(below & self.low, self.f_min, out)
                out = torch.where(above & self.high, self.f_max, out)
            else:
                d_min = (X - self.xmin).unsqueeze(2)
                d_max = (X - self.xmax).unsqueeze(2)
                out = torch.where(below & self.low, self.f_min + d_min * self.fp_min, out)
                out = torch.where(above & self.high, self.f_max + d_max * self.fp_max, out)
        out = out.reshape(X.shape[0], self.F * self.S)
        if self.kept.numel() != self.F * self.S:
            out = out[:, self.kept]
        return (out.to(self.dtype),)


@register_lowering("spline")
def _lower(op, input_dtypes, context):
    return SplineNode(op, op.output_dtypes(input_dtypes)[0])
