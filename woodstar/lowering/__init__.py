"""Lowering: IR -> torch.nn.Module. Never imports a source library."""

import torch
from torch import nn

from ..ir import ModelIR
from ..ir.passes import fold_base_score
from ..ir.tree_ensemble import TreeEnsemble
from . import trees  # noqa: F401  (registers the strategies)
from .column_ops import ColumnOpsModule
from .linear import LinearScores
from .post_transforms import PostTransform
from .registry import get_strategy, strategy_names
from .routing import choose_strategy

__all__ = ["LoweredModel", "TreeEnsembleModule", "LinearModelModule", "TransformerModule",
           "lower_model", "lower_tree_ensemble", "choose_strategy", "get_strategy",
           "strategy_names"]


class LoweredModel(nn.Module):
    """steps (a pipeline's scalers) -> core -> (raw scores, transformed scores): the
    one executable form. ``input_dtype`` is the dtype the program takes."""

    def __init__(self, core: nn.Module, post_transform: nn.Module, steps=(), dtype=None):
        super().__init__()
        self.steps = nn.Sequential(*steps)
        self.core = core
        self.post_transform = post_transform
        self.strategy = core.name
        self.dtype_name = dtype or core.dtype_name
        self.input_dtype = getattr(torch, self.dtype_name)
        self.n_features = core.n_features

    def forward(self, x: torch.Tensor):
        raw = self.core(self.steps(x))
        return raw, self.post_transform(raw)


class TreeEnsembleModule(LoweredModel):
    @property
    def trees(self):
        return self.core


class LinearModelModule(LoweredModel):
    pass


class _Identity(nn.Module):
    name = "transform"

    def __init__(self, n_features, dtype):
        super().__init__()
        self.n_features = n_features
        self.dtype_name = dtype

    def estimate_bytes(self, final, n_rows, dtype):
        """Peak bytes of one call: the steps' float64 temporaries and their result."""
        return 16 * n_rows * self.n_features

    def forward(self, x):
        return x


class TransformerModule(LoweredModel):
    """A bare transformer: its output is the steps' output (raw and transformed alike)."""


def _frozen(module):
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def lower_tree_ensemble(ens: TreeEnsemble, strategy_cls, dtype: str, steps=()) -> TreeEnsembleModule:
    core = strategy_cls(fold_base_score(ens), dtype)  # sums start at the base score
    return _frozen(TreeEnsembleModule(
        core, PostTransform(ens.post_transform, ens.post_transform_scale), steps))


def lower_model(ir: ModelIR, strategy_cls, dtype: str) -> LoweredModel:
    """The whole model: its steps, then its final function. ``strategy_cls`` is the
    tree strategy (ignored for a model without trees)."""
    steps = [ColumnOpsModule(step, dtype) for step in ir.steps]
    if ir.ensemble is not None:
        return lower_tree_ensemble(ir.ensemble, strategy_cls, dtype, steps)
    if ir.linear is not None:
        return _frozen(LinearModelModule(LinearScores(ir.linear, dtype),
                                         PostTransform(ir.linear.post_transform), steps, dtype))
    return _frozen(TransformerModule(_Identity(ir.head.n_features, dtype), nn.Identity(), steps))
