"""Lowering: IR -> torch.nn.Module. Never imports a source library or a backend."""

from typing import Callable, Optional

import numpy as np
import torch
from torch import nn

from ..ir import INPUT, ModelIR
from ..ir.tree_ensemble import TreeEnsemble
from . import core_ops  # noqa: F401  (registers the built-in op lowerings)
from . import families  # noqa: F401  (registers the lowerings of lowering/families/)
from . import trees  # noqa: F401  (registers the strategies)
from .ops import get_lowering, lowered_kinds, register_lowering
from .registry import get_strategy, strategy_names
from .routing import choose_strategy

__all__ = ["LoweredModel", "lower_model", "choose_strategy", "get_strategy", "strategy_names",
           "register_lowering", "lowered_kinds", "LoweringContext", "lower_tree_ensemble"]


class LoweringContext:
    """What a node's lowering may ask of the caller: the tree strategy for an
    ensemble (the plan's choice, or the user's)."""

    def __init__(self, choose: Callable[[TreeEnsemble, str], type]):
        self._choose = choose
        self.strategies = []

    def strategy_for(self, ens: TreeEnsemble, dtype: str):
        strategy = self._choose(ens, dtype)
        self.strategies.append(strategy.name)
        return strategy


class LoweredModel(nn.Module):
    """The whole graph as one module: ``forward(x) -> (raw, transformed)``.
    ``input_dtype`` is the dtype the program takes, ``strategy`` the tree strategy
    (or "linear"/"transform" for models without trees)."""

    def __init__(self, ir: ModelIR, dtype: str, context: LoweringContext):
        super().__init__()
        graph = ir.graph
        dtypes = graph.dtypes(dtype)
        index = {INPUT: 0}
        parts, reads = [], []
        for node in graph.nodes:
            module = get_lowering(node.kind)(node.op, [dtypes[v] for v in node.inputs], context)
            parts.append(module)
            reads.append(tuple(index[v] for v in node.inputs))
            for name in node.outputs:
                index[name] = len(index)
        self.parts = nn.ModuleList(parts)
        self.reads = tuple(reads)
        self.raw_index = index[graph.raw]
        self.transformed_index = index[graph.transformed]
        self.node_names = tuple(n.name for n in graph.nodes)
        self.dtype_name = dtype
        self.input_dtype = getattr(torch, dtype)
        self.n_features = graph.input_type.width
        self.output_dtypes = (dtypes[graph.raw], dtypes[graph.transformed])
        final = ir.final
        self.strategy = (context.strategies[0] if context.strategies
                         else final.kind if final is not None else "transform")
        self.has_trees = bool(context.strategies)

    @property
    def trees(self):
        """The tree strategy module of a model with one tree ensemble."""
        found = [p.trees for p in self.parts if hasattr(p, "trees")]
        return found[0] if len(found) == 1 else None

    def estimate_bytes(self, n_rows: int) -> int:
        """Peak bytes of one call of ``n_rows`` rows: the largest node's, plus the
        values that stay alive (counted as every node's output, an upper bound)."""
        sizes = [p.estimate_bytes(n_rows) for p in self.parts]
        return max(sizes + [0]) + 8 * n_rows * self.n_features

    def forward(self, x: torch.Tensor):
        values = [x]
        for part, reads in zip(self.parts, self.reads):
            values.extend(part(*[values[i] for i in reads]))
        return values[self.raw_index], values[self.transformed_index]


def _frozen(module):
    module.eval()
    for p in module.parameters():
        p.requires_grad_(False)
    return module


def lower_model(ir: ModelIR, strategy: Optional[object], dtype: str) -> LoweredModel:
    """The whole model as one module taking ``dtype`` rows. ``strategy``: a strategy
    class for every tree ensemble, or a callable ``(ensemble, dtype) -> class``, or
    None for a model without trees."""
    if strategy is None or isinstance(strategy, type):
        fixed = strategy

        def choose(ens, node_dtype):
            if fixed is None:
                raise ValueError("a model with trees needs a tree strategy")
            return fixed
    else:
        choose = strategy
    return _frozen(LoweredModel(ir, dtype, LoweringContext(choose)))


def lower_tree_ensemble(ens: TreeEnsemble, strategy_cls, dtype: str) -> LoweredModel:
    """A bare tree ensemble as a module ``x -> (raw, transformed)`` (for tests and
    benchmarks that work on the ensemble alone)."""
    from ..ir import Head, chain

    head = Head(estimator="TreeEnsemble", task="regression", n_features=ens.n_features,
                methods=("predict",))
    return lower_model(chain(head, ensemble=ens).validate(), strategy_cls, dtype)
