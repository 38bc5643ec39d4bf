"""Torch lowerings of the meta-estimators' ops (NumPy references:
woodstar/ir/families/ensemble_meta.py).

Sums run in the reference's order, one input after another, in float64 (elementwise
float64 arithmetic is IEEE in both libraries, so these sums are the reference's to
the bit); NumPy's own reductions over a contiguous axis (a row sum, ``np.sum`` in the
normalisations) add in blocks, which the Torch programs approximate within 1e-12.
"""

import numpy as np
import torch
from torch import nn

from ...exceptions import unsupported_message
from ..ops import register_lowering
from ..post_transforms import logistic
from ._constants import register_constant

__all__ = []

F64 = torch.float64


def _torch_dtype(dtype):
    return getattr(torch, np.dtype(dtype).name)


def _estimate(width):
    return lambda n_rows: 16 * n_rows * max(1, width)


def _buffer(module, name, array, dtype=F64):
    module.register_buffer(name, torch.from_numpy(np.ascontiguousarray(array)).to(dtype))


# ------------------------------------------------------------------ labels
def _indices(x, rule, threshold):
    if rule == "argmax":
        return torch.argmax(x, dim=1)
    if rule == "index":
        return x[:, 0].to(torch.int64)
    if rule == "gt":
        return (x[:, 0] > threshold).to(torch.int64)
    return (x[:, 0] >= threshold).to(torch.int64)


class LabelNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.rule = op.rule
        register_constant(self, "threshold", op.threshold)
        _buffer(self, "values", op.values)
        self.estimate_bytes = _estimate(op.n_columns)

    def forward(self, x):
        index = _indices(x, self.rule, self.threshold)
        return (torch.index_select(self.values, 0, index).reshape(-1, 1),)


@register_lowering("meta_label")
def _label(op, input_dtypes, context):
    return LabelNode(op)


# ------------------------------------------------------------------ running sums
def _logaddexp(x, y, log2):
    """NumPy's npy_logaddexp: x + log(2) when equal (so -inf stays -inf), else the
    larger plus log1p(exp(-|x - y|)). ``log2``: a float64 constant tensor."""
    tmp = x - y
    bigger = torch.where(tmp > 0, x, y)
    result = bigger + torch.log1p(torch.exp(-torch.abs(tmp)))
    result = torch.where(torch.isnan(tmp), tmp, result)
    return torch.where(x == y, x + log2, result)


class AccumulateNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.n_outputs = op.n_outputs
        self.mode = op.mode
        self.has_divisor = bool(op.divisor)
        register_constant(self, "divisor", op.divisor)
        register_constant(self, "log_divisor", np.log(op.divisor) if op.divisor else 0.0)
        register_constant(self, "log2", np.log(2.0))
        self.groups = tuple(op.groups) + (len(op.widths),)
        self.kinds = []
        for i, (width, columns, index) in enumerate(zip(op.widths, op.columns, op.as_index)):
            weight = f"weight_{i}" if op.weighted else None  # a buffer's name
            if op.weighted:
                register_constant(self, weight, op.weights[i])
            if index:
                # output column of each class index, compared with every output column
                _buffer(self, f"map_{i}", np.asarray(columns, np.int64), torch.int64)
                self.kinds.append(("index", weight))
            elif tuple(columns) == tuple(range(op.n_outputs)):
                self.kinds.append(("identity", weight))
            else:
                # gather from the input padded with one neutral column
                source = np.full(op.n_outputs, width, dtype=np.int64)
                source[list(columns)] = np.arange(width)
                _buffer(self, f"map_{i}", source, torch.int64)
                self.kinds.append(("gather", weight))
        _buffer(self, "positions", np.arange(op.n_outputs), torch.int64)
        self.estimate_bytes = _estimate(op.n_outputs * 4 + sum(op.widths))

    def _term(self, i, x, neutral):
        kind, weight = self.kinds[i]
        if kind == "index":
            target = torch.index_select(getattr(self, f"map_{i}"), 0, x[:, 0].to(torch.int64))
            hit = (target.unsqueeze(1) == self.positions.unsqueeze(0)).to(F64)
            return (hit if weight is None else hit * getattr(self, weight)), None
        x = x.to(F64)
        if weight is not None:
            x = x * getattr(self, weight)
        if kind == "identity":
            return x, None
        pad = torch.full_like(x[:, :1], neutral)
        gathered = torch.index_select(torch.cat([x, pad], dim=1), 1, getattr(self, f"map_{i}"))
        return gathered, None

    def forward(self, *inputs):
        n = inputs[0].shape[0]
        neutral = 0.0 if self.mode == "add" else float("-inf")
        total = None
        for start, stop in zip(self.groups[:-1], self.groups[1:]):
            acc = torch.full((n, self.n_outputs), neutral, dtype=F64, device=inputs[0].device)
            for i in range(start, stop):
                term, _ = self._term(i, inputs[i], neutral)
                acc = acc + term if self.mode == "add" else _logaddexp(acc, term, self.log2)
            if total is None:
                total = acc
            else:
                total = total + acc if self.mode == "add" else _logaddexp(total, acc, self.log2)
        if self.mode == "add":
            return (total / self.divisor if self.has_divisor else total,)
        return (total - self.log_divisor if self.has_divisor else total,)


@register_lowering("meta_accumulate")
def _accumulate(op, input_dtypes, context):
    return AccumulateNode(op)


# ------------------------------------------------------------------ np.average
class AverageNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = _torch_dtype(dtype)
        self.weighted = len(op.weights) > 0
        weights = op.weights.astype(np.dtype(dtype)) if self.weighted else np.ones(len(op.widths))
        _buffer(self, "weights", weights, self.dtype)
        # np.average divides by the weights' sum, a scalar of the result's dtype
        register_constant(self, "scale", np.sum(op.weights, dtype=np.dtype(dtype)) if self.weighted
                          else len(op.widths), self.dtype)
        self.estimate_bytes = _estimate(op.widths[0] * 2)

    def forward(self, *inputs):
        total = None
        for i, x in enumerate(inputs):
            term = x.to(self.dtype) * self.weights[i] if self.weighted else x.to(self.dtype)
            total = term if total is None else total + term
        return (total / self.scale,)


@register_lowering("meta_average")
def _average(op, input_dtypes, context):
    return AverageNode(op, op.output_dtypes(input_dtypes)[0])


# ------------------------------------------------------------------ calibration
class CalibrateNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.method = op.method
        self.n_classes = op.n_classes
        self.class_index = tuple(op.class_index)
        if op.method == "sigmoid":
            _buffer(self, "a", op.a)
            _buffer(self, "b", op.b)
        else:
            # TVM's build of the interpolation gave every row the same probabilities
            self.refused_by = {"tvm": unsupported_message(
                "CalibratedClassifierCV(method='isotonic')", "backend", "tvm",
                "torch, torch.jit, torch.compile, onnx: TVM's build of the isotonic "
                "interpolation gives other answers than the Torch program")}
            for j in range(op.n_columns):
                x, y = op.thresholds(j)
                _buffer(self, f"x_{j}", x)
                _buffer(self, f"y_{j}", y)
        self.n_columns = op.n_columns
        self.numpy_interp = op.numpy_interp
        _buffer(self, "positions", np.arange(op.n_classes), torch.int64)
        register_constant(self, "uniform", 1 / op.n_classes)
        register_constant(self, "nearly_one", 1.0 + 1e-5)  # scikit-learn's clip above 1
        self.estimate_bytes = _estimate(op.n_classes * 4 + max(
            [len(op.thresholds(j)[0]) for j in range(op.n_columns)] if op.method == "isotonic" else [1]))

    def _isotonic(self, j, t):
        x, y = getattr(self, f"x_{j}"), getattr(self, f"y_{j}")
        t = torch.clamp(t, x[0], x[-1])
        if x.shape[0] == 1:
            return y[0] + 0.0 * t
        if self.numpy_interp:
            return self._np_interp(x, y, t)
        # np.searchsorted(x, t) (left side): how many thresholds are below t
        hi = (t.unsqueeze(1) > x.unsqueeze(0)).sum(dim=1).clamp(1, x.shape[0] - 1)
        lo = hi - 1
        x_lo, x_hi = torch.index_select(x, 0, lo), torch.index_select(x, 0, hi)
        y_lo, y_hi = torch.index_select(y, 0, lo), torch.index_select(y, 0, hi)
        slope = (y_hi - y_lo) / (x_hi - x_lo)
        return slope * (t - x_lo) + y_lo

    @staticmethod
    def _np_interp(x, y, t):
        """np.interp: j with x[j] <= t < x[j + 1]; y[j] where t equals x[j], the last
        value from the last threshold on, else the slope formula."""
        n = x.shape[0]
        j = (t.unsqueeze(1) >= x.unsqueeze(0)).sum(dim=1) - 1
        inside = j.clamp(0, n - 2)
        x_lo, x_hi = torch.index_select(x, 0, inside), torch.index_select(x, 0, inside + 1)
        y_lo, y_hi = torch.index_select(y, 0, inside), torch.index_select(y, 0, inside + 1)
        slope = (y_hi - y_lo) / (x_hi - x_lo)
        value = slope * (t - x_lo) + y_lo
        value = torch.where(t == x_lo, y_lo, value)
        value = torch.where(j >= n - 1, y[n - 1] + 0.0 * t, value)
        value = torch.where(j < 0, y[0] + 0.0 * t, value)
        return torch.where(torch.isnan(t), t, value)

    def forward(self, scores):
        scores = scores.to(F64)
        n = scores.shape[0]
        columns = [torch.zeros(n, dtype=F64, device=scores.device)] * self.n_classes
        for j, class_idx in enumerate(self.class_index):
            s = scores[:, j]
            if self.method == "sigmoid":
                p = logistic(-(self.a[j] * s + self.b[j]))
            else:
                p = self._isotonic(j, s)
            columns[class_idx] = p
        if self.n_classes == 2:
            proba = torch.stack([1.0 - columns[1], columns[1]], dim=1)
        else:
            proba = torch.stack(columns, dim=1)
            denominator = proba.sum(dim=1, keepdim=True)
            zero = denominator == 0
            proba = torch.where(zero, self.uniform,
                                proba / torch.where(zero, torch.ones_like(denominator), denominator))
        proba = torch.where((proba > 1.0) & (proba <= self.nearly_one), torch.ones_like(proba), proba)
        return (proba,)


@register_lowering("meta_calibrate")
def _calibrate(op, input_dtypes, context):
    return CalibrateNode(op)


# ------------------------------------------------------------------ one-vs-rest / one-vs-one
class OvrProbaNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.single = op.n_estimators == 1
        self.dtype = _torch_dtype(dtype)
        self.estimate_bytes = _estimate(op.n_estimators * 2 + 2)

    def forward(self, *inputs):
        Y = torch.cat([x.to(self.dtype) for x in inputs], dim=1)
        if self.single:
            Y = torch.cat([1 - Y, Y], dim=1)
        row_sums = Y.sum(dim=1, keepdim=True)
        nonzero = row_sums != 0
        return (torch.where(nonzero, Y / torch.where(nonzero, row_sums, torch.ones_like(row_sums)), Y),)


@register_lowering("meta_ovr_proba")
def _ovr_proba(op, input_dtypes, context):
    return OvrProbaNode(op, op.output_dtypes(input_dtypes)[0])


class OvoNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        pairs = [(i, j) for i in range(op.n_classes) for j in range(i + 1, op.n_classes)]
        self.pairs = tuple(pairs)
        self.n_classes = op.n_classes
        self.estimate_bytes = _estimate(op.n_classes * 4 + 2 * len(pairs))

    def forward(self, predictions, confidences):
        predictions, confidences = predictions.to(F64), confidences.to(F64)
        n = predictions.shape[0]
        zero = torch.zeros(n, dtype=F64, device=predictions.device)
        votes = [zero] * self.n_classes
        sums = [zero] * self.n_classes
        for k, (i, j) in enumerate(self.pairs):
            sums[i] = sums[i] - confidences[:, k]
            sums[j] = sums[j] + confidences[:, k]
            votes[i] = votes[i] + (predictions[:, k] == 0).to(F64)
            votes[j] = votes[j] + (predictions[:, k] == 1).to(F64)
        votes, sums = torch.stack(votes, dim=1), torch.stack(sums, dim=1)
        return (votes + sums / (3 * (torch.abs(sums) + 1)),)


@register_lowering("meta_ovo")
def _ovo(op, input_dtypes, context):
    return OvoNode(op)


# ------------------------------------------------------------------ AdaBoost
def _softmax(x):
    x = x - x.max(dim=1, keepdim=True).values
    e = torch.exp(x)
    return e / e.sum(dim=1, keepdim=True)


class SammeNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.n_classes = op.n_classes
        for i, (pos, neg) in enumerate(zip(op.pos, op.neg)):
            register_constant(self, f"pos_{i}", pos)
            register_constant(self, f"neg_{i}", neg)
        register_constant(self, "divisor", op.divisor)
        _buffer(self, "classes", np.arange(op.n_classes), F64)
        self.estimate_bytes = _estimate(op.n_classes * 4)

    def forward(self, *inputs):
        pred = None
        for i, x in enumerate(inputs):
            hit = x.to(F64) == self.classes.unsqueeze(0)
            term = torch.where(hit, getattr(self, f"pos_{i}"), getattr(self, f"neg_{i}"))
            pred = term if pred is None else pred + term
        pred = pred / self.divisor
        if self.n_classes == 2:
            decision = -pred[:, :1] + pred[:, 1:]
            return decision, _softmax(torch.cat([-decision, decision], dim=1) / 2)
        return pred, _softmax(pred / (self.n_classes - 1))


@register_lowering("meta_samme")
def _samme(op, input_dtypes, context):
    return SammeNode(op)


class WeightedMedianNode(nn.Module):
    """The smallest prediction whose cumulative weight (in the order of a stable sort:
    by value, then by estimator) reaches half the total: without a sort, which the
    exporters do not all take, as comparisons of every pair of estimators."""

    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = _torch_dtype(dtype)
        m = len(op.weights)
        _buffer(self, "weights", op.weights)
        _buffer(self, "not_after", np.tril(np.ones((m, m), dtype=bool)), torch.bool)
        register_constant(self, "infinity", float("inf"), self.dtype)
        self.estimate_bytes = _estimate(m * m * 3)

    def forward(self, *inputs):
        p = torch.cat([x.to(self.dtype) for x in inputs], dim=1)
        mine, other = p.unsqueeze(2), p.unsqueeze(1)  # [row, i, j]
        before = (other < mine) | ((other == mine) & self.not_after.unsqueeze(0))
        cdf = (before.to(F64) * self.weights.reshape(1, 1, -1)).sum(dim=2)
        reached = cdf >= 0.5 * self.weights.sum()
        candidates = torch.where(reached, p, self.infinity)  # a constant: TVM fails on full
        # min as -max(-x): TVM's importer has max.dim, not min.dim
        return (-(-candidates).max(dim=1, keepdim=True).values,)


@register_lowering("meta_weighted_median")
def _weighted_median(op, input_dtypes, context):
    return WeightedMedianNode(op, op.output_dtypes(input_dtypes)[0])


# ------------------------------------------------------------------ ufuncs
_TORCH_UFUNCS = {"log": torch.log, "exp": torch.exp, "expm1": torch.expm1, "log1p": torch.log1p,
                 "sqrt": torch.sqrt, "square": torch.square, "negative": torch.neg,
                 "reciprocal": torch.reciprocal}


class UfuncNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.name = op.name
        self.dtype = _torch_dtype(dtype)
        self.estimate_bytes = _estimate(op.n_features * 2)

    def forward(self, x):
        x = x.to(self.dtype)
        if self.name in ("float64", "identity"):
            return (x + 0.0,)
        return (_TORCH_UFUNCS[self.name](x),)


@register_lowering("meta_ufunc")
def _ufunc(op, input_dtypes, context):
    return UfuncNode(op, op.output_dtypes(input_dtypes)[0])
