"""Torch lowerings of Spark ML's ops (woodstar/ir/families/spark_ops.py).

The sums run left to right and the comparisons are the reference's, so they give its
bits; ``exp`` is Torch's (the reference's is NumPy's, Spark's the JVM's: each within
an ulp or two of the others)."""

import numpy as np
import torch
from torch import nn

from ..ops import register_lowering
from ._constants import register_constant


def _first_argmax(values):
    """Spark's ``Vector.argmax``: a later entry wins only when strictly greater."""
    best = values[:, 0]
    index = torch.zeros_like(best, dtype=torch.int64)
    for i in range(1, values.shape[1]):
        greater = values[:, i] > best
        best = torch.where(greater, values[:, i], best)
        index = torch.where(greater, torch.full_like(index, i), index)
    return index


def _left_sum(values):
    total = values[:, 0]
    for k in range(1, values.shape[1]):
        total = total + values[:, k]
    return total


class SparkClassifyNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.probability = op.probability
        self.prediction = op.prediction
        self.n_classes = op.n_classes
        register_constant(self, "raw_threshold", op.raw_threshold)
        self.register_buffer("thresholds", torch.tensor(
            op.thresholds if op.thresholds else [1.0] * op.n_classes, dtype=torch.float64))
        # a buffer, not a literal: some compilers read float literals as float32
        self.register_buffer("lowest", torch.tensor(np.finfo(np.float64).min, dtype=torch.float64))
        self.estimate_bytes = lambda n_rows: 16 * n_rows * (4 * op.n_classes + 2)

    def _proba(self, raw):
        if self.probability in ("logistic", "gbt_logistic"):
            margin = raw[:, :1] if self.probability == "logistic" else 2.0 * raw[:, :1]
            p0 = 1.0 / (1.0 + torch.exp(-margin))
            return torch.cat([p0, 1.0 - p0], dim=1)
        if self.probability == "normalize":
            return raw / _left_sum(raw).unsqueeze(1)
        candidates = torch.where(raw > -float("inf"), raw, self.lowest)
        top = candidates[:, :1]
        for k in range(1, self.n_classes):
            top = torch.maximum(top, candidates[:, k:k + 1])
        exp = torch.exp(raw - top)
        proba = exp * (1.0 / _left_sum(exp)).unsqueeze(1)
        infinite = torch.isposinf(raw)
        first = torch.argmax(infinite.to(torch.int64), dim=1, keepdim=True)
        one_hot = torch.where(torch.arange(self.n_classes, device=raw.device).unsqueeze(0) == first,
                              torch.ones_like(raw), raw * 0.0)
        return torch.where(infinite.any(dim=1, keepdim=True), one_hot, proba)

    def _index(self, raw, proba):
        if self.prediction == "binary_threshold":
            return (raw[:, 1] > self.raw_threshold).to(torch.int64)
        if self.prediction == "thresholds":
            scaled = proba / self.thresholds.unsqueeze(0)
            best = torch.full_like(scaled[:, 0], -float("inf"))
            index = torch.zeros_like(best, dtype=torch.int64)
            for i in range(self.n_classes):
                greater = scaled[:, i] > best
                best = torch.where(greater, scaled[:, i], best)
                index = torch.where(greater, torch.full_like(index, i), index)
            return index
        return _first_argmax(raw)

    def forward(self, raw):
        raw = raw.to(torch.float64)
        proba = self._proba(raw)
        index = self._index(raw, proba)
        return (torch.cat([proba, index.to(torch.float64).unsqueeze(1)], dim=1),)


@register_lowering("spark_classify")
def _spark_classify(op, input_dtypes, context):
    return SparkClassifyNode(op)


class SparkBucketizeNode(nn.Module):
    """Outer splits are -inf and inf (the op's validation): the bucket is the number of
    inner splits at or below the value, in Java's order (-0.0 below 0.0)."""

    def __init__(self, op):
        super().__init__()
        width = max(len(s) - 2 for s in op.splits)
        table = np.full((op.n_features, width), np.nan)  # NaN pads: never counted
        for j, s in enumerate(op.splits):
            table[j, :len(s) - 2] = s[1:-1]
        self.register_buffer("inner", torch.from_numpy(table).unsqueeze(0))
        self.register_buffer("positive_zero", torch.from_numpy(
            (table == 0) & ~np.signbit(table)).unsqueeze(0))
        self.register_buffer("nan_bucket", torch.tensor(
            [len(s) - 1 if keep else np.nan for s, keep in zip(op.splits, op.keep_nan)],
            dtype=torch.float64).unsqueeze(0))
        self.estimate_bytes = lambda n_rows: 16 * n_rows * op.n_features * (width + 2)

    def forward(self, x):
        x = x.to(torch.float64)
        value = x.unsqueeze(2)
        negative_zero = (value == 0) & (1.0 / value < 0)
        at_or_above = (value >= self.inner) & ~(negative_zero & self.positive_zero)
        bucket = at_or_above.to(torch.float64).sum(dim=2)
        return (torch.where(torch.isnan(x), self.nan_bucket.expand_as(x), bucket),)


@register_lowering("spark_bucketize")
def _spark_bucketize(op, input_dtypes, context):
    return SparkBucketizeNode(op)


class SparkFloat64Node(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.estimate_bytes = lambda n_rows: 8 * n_rows * op.n_features

    def forward(self, x):
        return (x.to(torch.float64),)


@register_lowering("spark_float64")
def _spark_float64(op, input_dtypes, context):
    return SparkFloat64Node(op)
