"""Torch lowerings of the preprocessing ops (woodstar/ir/families/preprocessing.py).

Element-wise products, comparisons and selections are the reference's own operations,
so they give its bits; the logarithms, exponentials, square roots and the normal
quantile function are Torch's, within 1e-12 of NumPy's and SciPy's in float64."""

import numpy as np
import torch
from torch import nn

from ...exceptions import unsupported_message
from ...ir.families.preprocessing import BOUNDS_THRESHOLD, normal_clip_bounds
from ..ops import register_lowering
from ._constants import register_constant


def _torch_dtype(dtype):
    return getattr(torch, np.dtype(dtype).name)


def _estimate(width_in, width_out):
    return lambda n_rows: 16 * n_rows * (width_in + width_out)


class NormalizeNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.norm = op.norm
        self.eps10 = float(10 * np.finfo(dtype).eps)
        self.estimate_bytes = _estimate(op.n_features, op.n_features)

    def forward(self, x):
        if self.norm == "l1":
            norms = torch.abs(x).sum(dim=1)
        elif self.norm == "l2":
            norms = torch.sqrt((x * x).sum(dim=1))
        else:
            norms = torch.abs(x).max(dim=1).values  # TVM's importer has max.dim, not amax
            # NumPy's max is NaN on a row holding one; ONNX Runtime's ReduceMax is not
            norms = torch.where(torch.isnan(x).any(dim=1), x.sum(dim=1), norms)
        norms = torch.where(norms < self.eps10, torch.ones_like(norms), norms)
        return (x / norms.unsqueeze(1),)


@register_lowering("normalize")
def _normalize(op, input_dtypes, context):
    return NormalizeNode(op, op.output_dtypes(input_dtypes)[0])


class BinarizeNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = _torch_dtype(dtype)
        threshold = op.compare_threshold(dtype)
        self.compare = _torch_dtype(np.asarray(threshold).dtype)
        self.register_buffer("threshold", torch.tensor(float(threshold), dtype=self.compare))
        self.estimate_bytes = _estimate(op.n_features, op.n_features)

    def forward(self, x):
        return ((x.to(self.compare) > self.threshold).to(self.dtype),)


@register_lowering("binarize")
def _binarize(op, input_dtypes, context):
    return BinarizeNode(op, op.output_dtypes(input_dtypes)[0])


class KBinsNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = _torch_dtype(dtype)
        width = max([len(e) for e in op.edges] + [1])
        table = np.full((op.n_features, width), np.inf)
        for j, e in enumerate(op.edges):
            table[j, :len(e)] = e
        self.register_buffer("edges", torch.from_numpy(table).unsqueeze(0))
        self.onehot = op.onehot
        offsets = np.concatenate([[0], np.cumsum(op.n_bins)[:-1]]).astype(np.int64)
        self.register_buffer("offsets", torch.from_numpy(offsets))
        self.register_buffer("columns", torch.arange(op.n_outputs, dtype=torch.int64))
        self.estimate_bytes = _estimate(op.n_features * (width + op.n_outputs), op.n_outputs)

    def forward(self, x):
        # searchsorted(edges, x, side="right"): the number of edges <= x (the padding
        # +inf is above every finite value; the source refuses the others)
        v = x.to(self.dtype).to(torch.float64).unsqueeze(2)
        bins = (v >= self.edges).sum(dim=2)
        if not self.onehot:
            return (bins.to(self.dtype),)
        position = bins + self.offsets
        hot = (position.unsqueeze(2) == self.columns).any(dim=1)
        return (hot.to(self.dtype),)


@register_lowering("kbins")
def _kbins(op, input_dtypes, context):
    return KBinsNode(op, op.output_dtypes(input_dtypes)[0])


class PolynomialNode(nn.Module):
    """Columns level by level: level 0 (the bias and the inputs), then each level's
    products of earlier columns with input columns, as the reference multiplies them."""

    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = _torch_dtype(dtype)
        levels = op.levels()
        first = np.flatnonzero(levels == 0)
        self.has_bias = bool(len(first) and op.factors[first[0]] < 0)
        inputs = op.factors[first[1:] if self.has_bias else first]
        self.register_buffer("inputs", torch.from_numpy(inputs.copy()))
        self.n_levels = int(levels.max()) if len(levels) else 0
        for level in range(1, self.n_levels + 1):
            columns = np.flatnonzero(levels == level)
            self.register_buffer(f"parents_{level}", torch.from_numpy(op.parents[columns].copy()))
            self.register_buffer(f"factors_{level}", torch.from_numpy(op.factors[columns].copy()))
        self.register_buffer("keep", torch.from_numpy(op.keep.copy()))
        self.estimate_bytes = _estimate(op.n_features, 2 * len(op.parents))

    def forward(self, x):
        x = x.to(self.dtype)
        parts = [torch.index_select(x, 1, self.inputs)]
        if self.has_bias:
            parts.insert(0, torch.ones_like(x[:, :1]))
        full = torch.cat(parts, dim=1)
        for level in range(1, self.n_levels + 1):
            parents = getattr(self, f"parents_{level}")
            factors = getattr(self, f"factors_{level}")
            products = torch.index_select(full, 1, parents) * torch.index_select(x, 1, factors)
            full = torch.cat([full, products], dim=1)
        return (torch.index_select(full, 1, self.keep),)


@register_lowering("polynomial")
def _polynomial(op, input_dtypes, context):
    return PolynomialNode(op, op.output_dtypes(input_dtypes)[0])


class PowerTransformNode(nn.Module):
    """Computed in the result type of the input and the lambdas (as NumPy), the
    logarithms of Yeo-Johnson in the input's dtype; the result in the input's dtype."""

    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = _torch_dtype(dtype)
        compute = np.result_type(np.dtype(dtype), op.lambdas.dtype)
        self.box_cox = op.method == "box-cox"
        if self.box_cox:  # scipy.special.boxcox: float64 unless both are float32
            compute = np.dtype(np.float32) if compute == np.float32 else np.dtype(np.float64)
        self.compute = _torch_dtype(compute)
        lambdas = op.lambdas.astype(np.float64)
        eps = float(np.finfo(compute).eps)

        def buffer(name, values):
            self.register_buffer(name, torch.from_numpy(np.asarray(values)).unsqueeze(0))

        if self.box_cox:
            zero = np.abs(lambdas) < 1e-19
            buffer("log_only", zero)
            buffer("lmbda", np.where(zero, 1.0, lambdas).astype(compute))
        else:
            zero, two = np.abs(lambdas) < eps, np.abs(lambdas - 2) <= eps
            buffer("zero", zero)
            buffer("two", two)
            buffer("lmbda", np.where(zero, 1.0, lambdas).astype(compute))
            buffer("other", np.where(two, 1.0, 2 - op.lambdas).astype(compute))
        self.estimate_bytes = _estimate(op.n_features, 4 * op.n_features)

    def forward(self, x):
        x = x.to(self.dtype)
        if self.box_cox:
            log = torch.log(x.to(self.compute))
            out = torch.where(self.log_only, log, torch.expm1(self.lmbda * log) / self.lmbda)
            return (out.to(self.dtype),)
        pos = x >= 0
        log_pos = torch.log1p(torch.where(pos, x, torch.zeros_like(x))).to(self.compute)
        log_neg = torch.log1p(torch.where(pos, torch.zeros_like(x), -x)).to(self.compute)
        positive = torch.where(self.zero, log_pos, torch.expm1(self.lmbda * log_pos) / self.lmbda)
        negative = torch.where(self.two, -log_neg,
                               -torch.expm1(self.other * log_neg) / self.other)
        return (torch.where(pos, positive, negative).to(self.dtype),)


@register_lowering("power_transform")
def _power_transform(op, input_dtypes, context):
    return PowerTransformNode(op, op.output_dtypes(input_dtypes)[0])


class QuantileTransformNode(nn.Module):
    """np.interp forwards and backwards, per column: the segment ``j`` with
    ``xp[j] <= x < xp[j + 1]`` (NumPy's binary search), ``slope * (x - xp[j]) + fp[j]``."""

    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = _torch_dtype(dtype)
        self.normal = op.output_distribution == "normal"
        q = op.quantiles.T  # (F, Q)
        r = op.references
        self._tables("forward", q, np.broadcast_to(r, q.shape))
        self._tables("backward", -q[:, ::-1], np.broadcast_to(-r[::-1], q.shape))
        self.register_buffer("lower", torch.from_numpy(q[:, 0].copy()).unsqueeze(0))
        self.register_buffer("upper", torch.from_numpy(q[:, -1].copy()).unsqueeze(0))
        register_constant(self, "bounds_threshold", BOUNDS_THRESHOLD, self.dtype)
        if self.normal:
            clip_min, clip_max = normal_clip_bounds()
            register_constant(self, "clip_min", clip_min)
            register_constant(self, "clip_max", clip_max)
            reason = ("the 'torch', 'torch.jit' and 'torch.compile' backends: the normal "
                      "output's quantile function (torch.special.ndtri) has no ONNX "
                      "operator and no TVM operator")
            self.refused_by = {backend: unsupported_message(
                "QuantileTransformer(output_distribution='normal')", "backend", backend, reason)
                for backend in ("onnx", "tvm")}
        self.n_quantiles = q.shape[1]
        self.estimate_bytes = _estimate(op.n_features * (self.n_quantiles + 8), op.n_features)

    def _tables(self, name, xp, fp):
        xp, fp = np.ascontiguousarray(xp), np.ascontiguousarray(fp)
        with np.errstate(all="ignore"):
            slope = (fp[:, 1:] - fp[:, :-1]) / (xp[:, 1:] - xp[:, :-1])
        # a tie xp[j] == xp[j + 1] is never the segment of an x (j is the largest index
        # with xp[j] <= x): its slope is never read, keep it finite for the compilers
        slope = np.where(np.isfinite(slope), slope, 0.0)
        slope = np.concatenate([slope, np.zeros((len(xp), 1))], axis=1)
        for key, table in (("xp", xp), ("fp", fp), ("slope", slope)):
            self.register_buffer(f"{name}_{key}", torch.from_numpy(table).unsqueeze(0))
        self.register_buffer(f"{name}_left", torch.from_numpy(fp[:, 0].copy()).unsqueeze(0))
        self.register_buffer(f"{name}_right", torch.from_numpy(fp[:, -1].copy()).unsqueeze(0))

    def _interp(self, x, name):
        xp = getattr(self, f"{name}_xp")
        fp = getattr(self, f"{name}_fp")
        slope = getattr(self, f"{name}_slope")
        j = (x.unsqueeze(2) >= xp).sum(dim=2) - 1  # largest j with xp[j] <= x
        at = torch.clamp(j, 0, self.n_quantiles - 1).unsqueeze(2)
        xj = torch.gather(xp.expand(x.shape[0], -1, -1), 2, at).squeeze(2)
        fj = torch.gather(fp.expand(x.shape[0], -1, -1), 2, at).squeeze(2)
        sj = torch.gather(slope.expand(x.shape[0], -1, -1), 2, at).squeeze(2)
        value = torch.where(xj == x, fj, sj * (x - xj) + fj)
        value = torch.where(j >= self.n_quantiles - 1, getattr(self, f"{name}_right"), value)
        return torch.where(j < 0, getattr(self, f"{name}_left"), value)

    def forward(self, x):
        x = x.to(self.dtype)
        if self.normal:
            # the shift in the input's dtype, the comparison in float64 (as NumPy)
            lower = (x - self.bounds_threshold).to(torch.float64) < self.lower
            upper = (x + self.bounds_threshold).to(torch.float64) > self.upper
        else:
            lower = x.to(torch.float64) == self.lower
            upper = x.to(torch.float64) == self.upper
        v = x.to(torch.float64)
        y = 0.5 * (self._interp(v, "forward") - self._interp(-v, "backward"))
        y = y.to(self.dtype)
        y = torch.where(upper, torch.ones_like(y), y)
        y = torch.where(lower, torch.zeros_like(y), y)
        y = torch.where(torch.isnan(x), x, y)
        if self.normal:
            z = torch.special.ndtri(y.to(torch.float64))
            z = torch.minimum(torch.maximum(z, self.clip_min), self.clip_max)
            return (z.to(self.dtype),)
        return (y,)


@register_lowering("quantile_transform")
def _quantile_transform(op, input_dtypes, context):
    return QuantileTransformNode(op, op.output_dtypes(input_dtypes)[0])


_TORCH_UFUNCS = {
    "log1p": torch.log1p, "expm1": torch.expm1, "exp": torch.exp, "exp2": torch.exp2,
    "log": torch.log, "log2": torch.log2, "log10": torch.log10, "sqrt": torch.sqrt,
    "cbrt": lambda x: torch.sign(x) * torch.pow(torch.abs(x), 1.0 / 3.0),
    "square": torch.square, "absolute": torch.abs, "fabs": torch.abs,
    "negative": torch.negative, "reciprocal": torch.reciprocal, "sin": torch.sin,
    "cos": torch.cos, "tan": torch.tan, "arcsin": torch.asin, "arccos": torch.acos,
    "arctan": torch.atan, "sinh": torch.sinh, "cosh": torch.cosh, "tanh": torch.tanh,
    "arcsinh": torch.asinh, "arctanh": torch.atanh, "floor": torch.floor, "ceil": torch.ceil,
    "rint": torch.round, "trunc": torch.trunc, "sign": torch.sign, "deg2rad": torch.deg2rad,
    "rad2deg": torch.rad2deg,
}


# NumPy's deg2rad and rad2deg multiply by one constant of the input's dtype (its float32
# constant is computed in float32: torch.rad2deg's differs by an ulp); held as a buffer
_SCALED = ("deg2rad", "rad2deg")
# ONNX has no Log2 or Log10: the exporter divides Log(x) by a float32 constant, so a
# float64 program divides by the float64 logarithm of the base itself (within an ulp
# or two of NumPy's log2 and log10)
_LOG_BASES = {"log2": 2.0, "log10": 10.0}


class UfuncNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.name = op.name
        self.dtype = _torch_dtype(dtype)
        self.function = _TORCH_UFUNCS[op.name]
        if op.name in _SCALED:
            factor = getattr(np, op.name)(np.ones((), dtype=np.dtype(dtype)))
            register_constant(self, "factor", factor, self.dtype)
        self.divide_log = op.name in _LOG_BASES and self.dtype == torch.float64
        if self.divide_log:
            register_constant(self, "log_base", np.log(_LOG_BASES[op.name]))
        self.estimate_bytes = _estimate(op.n_features, op.n_features)

    def forward(self, x):
        x = x.to(self.dtype)
        if self.name in _SCALED:
            return (x * self.factor,)
        if self.divide_log:
            return (torch.log(x) / self.log_base,)
        if self.name == "sign":  # torch.sign(NaN) is 0, NumPy's NaN
            return (torch.where(torch.isnan(x), x, torch.sign(x)),)
        return (self.function(x),)


@register_lowering("ufunc")
def _ufunc(op, input_dtypes, context):
    return UfuncNode(op, op.output_dtypes(input_dtypes)[0])
