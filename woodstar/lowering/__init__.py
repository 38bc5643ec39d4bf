"""Lowering: IR -> torch.nn.Module. Never imports a source library."""

import torch
from torch import nn

from ..ir.passes import fold_base_score
from ..ir.tree_ensemble import TreeEnsemble
from . import trees  # noqa: F401  (registers the strategies)
from .post_transforms import PostTransform
from .registry import get_strategy, strategy_names
from .routing import choose_strategy

__all__ = ["TreeEnsembleModule", "lower_tree_ensemble", "choose_strategy", "get_strategy",
           "strategy_names"]


class TreeEnsembleModule(nn.Module):
    """trees -> (raw scores, transformed scores); the one executable form."""

    def __init__(self, trees: nn.Module, post_transform: PostTransform):
        super().__init__()
        self.trees = trees
        self.post_transform = post_transform
        self.strategy = trees.name
        self.dtype_name = trees.dtype_name
        self.n_features = trees.n_features

    def forward(self, x: torch.Tensor):
        raw = self.trees(x)
        return raw, self.post_transform(raw)


def lower_tree_ensemble(ens: TreeEnsemble, strategy_cls, dtype: str) -> TreeEnsembleModule:
    trees = strategy_cls(fold_base_score(ens), dtype)  # sums start at the base score
    module = TreeEnsembleModule(trees, PostTransform(ens.post_transform, ens.post_transform_scale))
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module
