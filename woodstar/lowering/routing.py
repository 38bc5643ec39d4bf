"""Choose a tree strategy for a model.

The rule starts from tree depth, as Hummingbird's does: GEMM for shallow trees,
perfect-tree traversal for medium depth, plain traversal for deep trees. A strategy
that refuses the model (its memory would exceed the budget) is skipped. The
benchmark suite replaces these thresholds with measured ones.
"""

import numpy as np

from ..exceptions import MissingConverter
from ..ir.tree_ensemble import TreeEnsemble
from .registry import get_strategy

__all__ = ["choose_strategy", "GEMM_MAX_DEPTH", "PERFECT_MAX_DEPTH"]

GEMM_MAX_DEPTH = 3
PERFECT_MAX_DEPTH = 10


def choose_strategy(ens: TreeEnsemble, requested, dtype: str, budget_bytes: int, owner: str):
    """The strategy class to use; a user's explicit request always wins (or fails
    with the reason it cannot hold the model)."""
    if requested is not None:
        strategy = get_strategy(requested, owner)
        reason = strategy.refusal(ens, dtype, budget_bytes)
        if reason:
            raise MissingConverter(
                f"Cannot convert {owner}: tree_implementation {requested!r} cannot hold this "
                f"model ({reason}); use 'tree_trav' or raise extra_config['memory_budget_bytes'].")
        return strategy
    depth = int(np.max(ens.tree_depths()))
    if depth <= GEMM_MAX_DEPTH:
        preferences = ("gemm", "perf_tree_trav", "tree_trav")
    elif depth <= PERFECT_MAX_DEPTH:
        preferences = ("perf_tree_trav", "tree_trav")
    else:
        preferences = ("tree_trav",)
    for name in preferences:
        strategy = get_strategy(name, owner)
        if strategy.refusal(ens, dtype, budget_bytes) is None:
            return strategy
    return get_strategy("tree_trav", owner)
