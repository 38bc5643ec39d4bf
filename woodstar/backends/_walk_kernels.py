"""Which tree parts of a lowered module call the walk operators' C kernels
(``runtimes/walk_ops.py``) when a backend traces or compiles it on the CPU.

torch.compile and TorchScript both record a strategy's walk as one operator
(``woodstar::perfect_tree_walk`` / ``woodstar::node_tree_walk``) when the strategy's
``walk_as_operator`` is set; the operator's CPU kernel then walks a row block's trees
in registers instead of the tensor program's passes over (rows x trees) arrays.
CUDA, categorical splits, linear leaves and machines where the kernels do not build
keep the tensor ops.
"""

import contextlib

import torch

from ..lowering.trees._common import TreeStrategyBase
from ..lowering.trees.perfect_tree_traversal import PerfectTreeTraversalTrees
from ..lowering.trees.tree_traversal import TreeTraversalTrees
from ..runtimes import walk_ops

__all__ = ["WALK_KERNELS_ON_CPU", "mark_walks_in_kernels", "walks_in_kernels",
           "any_walk_as_operator"]

WALK_KERNELS_ON_CPU = True
"""Whether CPU programs call the walk operators' C kernels (the A/B turns it off)."""


def _strategies(module):
    return [m for m in module.modules() if isinstance(m, TreeStrategyBase)]


def mark_walks_in_kernels(module, device) -> bool:
    """Set each tree part's ``walk_as_operator`` where its walk can be one operator with
    a C kernel on ``device``; True when every tree part is so marked (the program then
    has no rows x trees temporaries)."""
    strategies = _strategies(module)
    use = (torch.device(device).type == "cpu" and WALK_KERNELS_ON_CPU and bool(strategies)
           and walk_ops.register_cpu_kernels())
    for strategy in strategies:
        strategy.walk_as_operator = use and strategy.exports_whole_walk
        if strategy.walk_as_operator:
            _hand_tables(strategy)
    return bool(strategies) and all(s.walk_as_operator for s in strategies)


def _hand_tables(strategy):
    """The kernel's tables for this strategy's operator, built now rather than on the
    first call (``walk_ops.hand_tables``)."""
    if isinstance(strategy, PerfectTreeTraversalTrees):
        walk_ops.hand_tables("perfect", strategy.leaf_table, strategy.n_trees, strategy.depth)
    elif isinstance(strategy, TreeTraversalTrees):
        walk_ops.hand_tables("node", strategy.roots, strategy.rights32, strategy.leaf_table)


def any_walk_as_operator(module) -> bool:
    return any(s.walk_as_operator for s in _strategies(module))


@contextlib.contextmanager
def walks_in_kernels(module, device):
    """``mark_walks_in_kernels`` for the block only (a trace made inside keeps the
    operators; the module's later traces do not); yields its answer."""
    strategies = _strategies(module)
    before = [s.walk_as_operator for s in strategies]
    try:
        yield mark_walks_in_kernels(module, device)
    finally:
        for strategy, value in zip(strategies, before):
            strategy.walk_as_operator = value
