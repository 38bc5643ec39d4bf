"""Lowerings of the ops every model family uses: trees, linear models, column-wise
steps, column selection and concatenation, encoders and missing indicators."""

import numpy as np
import torch
from torch import nn

from ..ir.passes import fold_base_score
from .column_ops import ColumnOpsModule
from .linear import LinearScores
from .ops import register_lowering
from .post_transforms import PostTransform

__all__ = ["TreesNode", "LinearNode"]


def _torch_dtype(dtype):
    return getattr(torch, np.dtype(dtype).name)


def _estimate(width_in, width_out):
    return lambda n_rows: 16 * n_rows * (width_in + width_out)


class TreesNode(nn.Module):
    """The trees' raw sums (starting at the base score) and their post-transform."""

    def __init__(self, ens, strategy_cls, dtype):
        super().__init__()
        self.ensemble = ens
        self.dtype_name = dtype
        self.trees = strategy_cls(fold_base_score(ens), dtype)
        self.post_transform = PostTransform(ens.post_transform, ens.post_transform_scale)
        self.strategy = strategy_cls.name
        self.input_dtype = getattr(torch, dtype)

    def estimate_bytes(self, n_rows):
        return type(self.trees).estimate_bytes(self.ensemble, n_rows, self.dtype_name)

    def forward(self, x):
        raw = self.trees(x.to(self.input_dtype))
        return raw, self.post_transform(raw)


@register_lowering("trees")
def _trees(op, input_dtypes, context):
    dtype = np.dtype(input_dtypes[0]).name
    dtype = dtype if dtype in ("float32", "float64") else "float64"
    return TreesNode(op, context.strategy_for(op, dtype), dtype)


class LinearNode(nn.Module):
    def __init__(self, linear, dtype):
        super().__init__()
        self.scores = LinearScores(linear, dtype)
        self.post_transform = PostTransform(linear.post_transform)
        self.estimate_bytes = lambda n: LinearScores.estimate_bytes(linear, n, dtype)

    def forward(self, x):
        raw = self.scores(x)
        return raw, self.post_transform(raw)


@register_lowering("linear")
def _linear(op, input_dtypes, context):
    return LinearNode(op, np.dtype(input_dtypes[0]).name)


class _Single(nn.Module):
    """Wraps a one-output module so that it returns a tuple."""

    def __init__(self, module, estimate):
        super().__init__()
        self.inner = module
        self.estimate_bytes = estimate

    def forward(self, x):
        return (self.inner(x),)


@register_lowering("column_ops")
def _column_ops(op, input_dtypes, context):
    return _Single(ColumnOpsModule(op, np.dtype(input_dtypes[0]).name),
                   _estimate(op.n_features, op.n_features))


class SelectNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.register_buffer("indices", torch.tensor(op.indices, dtype=torch.int64))
        self.estimate_bytes = _estimate(0, len(op.indices))

    def forward(self, x):
        return (torch.index_select(x, 1, self.indices),)


@register_lowering("select")
def _select(op, input_dtypes, context):
    return SelectNode(op)


class ConcatNode(nn.Module):
    def __init__(self, op, dtype):
        super().__init__()
        self.dtype = _torch_dtype(dtype)
        self.estimate_bytes = _estimate(0, sum(op.widths))

    def forward(self, *values):
        return (torch.cat([v.to(self.dtype) for v in values], dim=1),)


@register_lowering("concat")
def _concat(op, input_dtypes, context):
    return ConcatNode(op, op.output_dtypes(input_dtypes)[0])


def _padded_categories(op):
    """(n_features, K) categories padded with NaN, and which entries are real."""
    width = max([len(c) for c in op.categories] + [1])
    table = np.full((op.n_features, width), np.nan)
    real = np.zeros((op.n_features, width), dtype=bool)
    for j, c in enumerate(op.categories):
        table[j, :len(c)] = c
        real[j, :len(c)] = True
    return table, real


class _Matcher(nn.Module):
    """Which category each value matches: (n, F, K) booleans, NaN matching a NaN
    category; and the index of the match with whether there was one."""

    def __init__(self, op):
        super().__init__()
        table, real = _padded_categories(op)
        self.register_buffer("categories", torch.from_numpy(table).unsqueeze(0))
        self.register_buffer("is_number", torch.from_numpy(real & ~np.isnan(table)).unsqueeze(0))
        self.register_buffer("is_nan", torch.from_numpy(real & np.isnan(table)).unsqueeze(0))
        self.n_categories = table.shape[1]

    def match(self, x):
        v = x.to(torch.float64).unsqueeze(2)
        hits = ((v == self.categories) & self.is_number) | (torch.isnan(v) & self.is_nan)
        found = hits.any(dim=2)
        index = torch.argmax(hits.to(torch.int32), dim=2)
        return index, found


class OneHotNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.matcher = _Matcher(op)
        table = np.full((op.n_features, self.matcher.n_categories), -1, dtype=np.int64)
        for j, o in enumerate(op.outputs):
            table[j, :len(o)] = o
        self.register_buffer("positions", torch.from_numpy(table))
        self.register_buffer("unknown", torch.tensor(op.unknown, dtype=torch.int64))
        self.register_buffer("columns", torch.arange(op.n_outputs, dtype=torch.int64))
        self.dtype = _torch_dtype(op.dtype)
        width = op.n_features * (self.matcher.n_categories + op.n_outputs)
        self.estimate_bytes = _estimate(width, op.n_outputs)

    def forward(self, x):
        index, found = self.matcher.match(x)
        known = torch.gather(self.positions.expand(x.shape[0], -1, -1), 2,
                             index.unsqueeze(2)).squeeze(2)
        position = torch.where(found, known, self.unknown.unsqueeze(0))
        hot = (position.unsqueeze(2) == self.columns).any(dim=1)
        return (hot.to(self.dtype),)


@register_lowering("one_hot")
def _one_hot(op, input_dtypes, context):
    return OneHotNode(op)


class OrdinalNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.matcher = _Matcher(op)
        table = np.zeros((op.n_features, self.matcher.n_categories))
        for j, o in enumerate(op.outputs):
            table[j, :len(o)] = o
        self.register_buffer("values", torch.from_numpy(table))
        self.register_buffer("unknown", torch.tensor(op.unknown, dtype=torch.float64))
        self.dtype = _torch_dtype(op.dtype)
        self.estimate_bytes = _estimate(op.n_features * self.matcher.n_categories, op.n_features)

    def forward(self, x):
        index, found = self.matcher.match(x)
        known = torch.gather(self.values.expand(x.shape[0], -1, -1), 2,
                             index.unsqueeze(2)).squeeze(2)
        return (torch.where(found, known, self.unknown.unsqueeze(0)).to(self.dtype),)


@register_lowering("ordinal")
def _ordinal(op, input_dtypes, context):
    return OrdinalNode(op)


class MissingIndicatorNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.register_buffer("indices", torch.tensor(op.features, dtype=torch.int64))
        self.estimate_bytes = _estimate(0, len(op.features))

    def forward(self, x):
        return (torch.isnan(torch.index_select(x, 1, self.indices)),)


@register_lowering("missing_indicator")
def _missing_indicator(op, input_dtypes, context):
    return MissingIndicatorNode(op)
