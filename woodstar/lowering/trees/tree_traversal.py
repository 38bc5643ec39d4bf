"""Tree traversal: every row walks every tree one level per step, by gathers."""

import numpy as np
import torch

from ...ir.tree_ensemble import TreeEnsemble
from ..registry import register_strategy
from ._common import (
    TreeStrategyBase, as_buffer, node_input_columns, node_thresholds,
)
from ._fast import INDEX_DTYPE, exporting, spread_leaf_table, sum_leaves, tracing_torchscript
from ._layout import sibling_adjacent_layout
from .walk_op import emits_whole_walk_op, node_tree_walk, node_walk_sums

__all__ = ["TreeTraversalTrees"]


def _needs_general_walk(ens: TreeEnsemble) -> bool:
    """Categorical splits and linear leaves take the plain walk, not the lean one."""
    return ens.has_categorical or ens.has_linear_leaves


@register_strategy
class TreeTraversalTrees(TreeStrategyBase):
    """Nodes are renumbered so that a right child sits right after its left sibling;
    a step is then ``node = right[node] - (x[col[node]] <= threshold[node])``. A leaf's
    "right child" is the slot after it and its test always says left, so finished rows
    stay put. The walk runs in place on int32 indices in preallocated buffers and the
    leaves are summed by ``embedding_bag`` (see ``_fast``)."""

    name = "tree_trav"

    @classmethod
    def refusal(cls, ens: TreeEnsemble, dtype: str, budget_bytes: int):
        return None  # memory is linear in the number of nodes

    @classmethod
    def estimate_bytes(cls, ens: TreeEnsemble, n_rows: int, dtype: str) -> int:
        item = np.dtype(dtype).itemsize
        # two index buffers, columns (int32), values, thresholds, go_left; widened input.
        per_row = (ens.n_trees * (3 * 4 + 2 * item + 1) + 3 * ens.n_features * item
                   + 2 * ens.n_outputs * 8)
        if _needs_general_walk(ens):
            per_row += ens.n_trees * (4 * 8 + ens.leaf_width * 8)
        return int(n_rows * per_row)

    def __init__(self, ens: TreeEnsemble, dtype: str = "float32"):
        super().__init__(ens, dtype)
        columns = node_input_columns(ens)
        thresholds = node_thresholds(ens, dtype)
        order, new_right, roots, tree_of_node = sibling_adjacent_layout(ens)
        is_leaf = ens.left[order] < 0
        self.max_depth = int(ens.tree_depths().max())
        self.register_buffer("roots", as_buffer(roots))
        self.register_buffer("columns", as_buffer(columns[order]))
        self.register_buffer("thresholds", as_buffer(thresholds[order]))
        self.register_buffer("rights", as_buffer(new_right, np.int64))
        if _needs_general_walk(ens):
            self.register_buffer("leaf_values", as_buffer(ens.leaf_value[order], np.float64))
            if self.has_linear:
                self._init_linear(ens, order)
            if self.has_categorical:
                self.register_buffer("node_is_categorical", as_buffer(ens.is_categorical[order] & ~is_leaf))
                self.register_buffer("category_rows", as_buffer(self.category_row_of_node[order]))
            return
        if len(order) >= 2 ** 31 - 1:
            raise ValueError(f"{len(order)} nodes do not fit int32 node indices")
        self.register_buffer("columns32", as_buffer(columns[order], np.int32))
        self.register_buffer("rights32", as_buffer(new_right, np.int32))
        self.register_buffer("leaf_table", as_buffer(spread_leaf_table(
            ens, order, tree_of_node, np.float64)))

    @property
    def exports_whole_walk(self) -> bool:
        return not (self.has_categorical or self.has_linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.has_categorical or self.has_linear:
            return self._forward_general(x)
        wide = self.widen(x)
        if tracing_torchscript() and not self.walk_as_operator:
            return self._forward_traced(wide)
        if exporting():
            if emits_whole_walk_op() or self.walk_as_operator:
                sums = node_tree_walk(wide, self.roots, self.columns32, self.thresholds,
                                      self.rights32, self.leaf_table, self.max_depth)
                return self.finish_sums(sums)
            return self._forward_functional(wide)
        n, T = x.shape[0], self.n_trees
        node = self.roots.to(INDEX_DTYPE).repeat(n, 1)
        following = torch.empty_like(node)
        columns = torch.empty_like(node)
        values = torch.empty((n, T), dtype=wide.dtype, device=x.device)
        thresholds = torch.empty((n, T), dtype=wide.dtype, device=x.device)
        go_left = torch.empty((n, T), dtype=torch.bool, device=x.device)
        for _ in range(self.max_depth):
            flat = node.view(-1)
            torch.index_select(self.columns32, 0, flat, out=columns.view(-1))
            torch.gather(wide, 1, columns, out=values)
            torch.index_select(self.thresholds, 0, flat, out=thresholds.view(-1))
            torch.le(values, thresholds, out=go_left)
            torch.index_select(self.rights32, 0, flat, out=following.view(-1))
            following.sub_(go_left.view(torch.uint8))
            node, following = following, node
        return sum_leaves(self, node, self.leaf_table)

    def _forward_traced(self, wide: torch.Tensor) -> torch.Tensor:
        """The eager walk's ops (int32 ``index_select``, leaves by ``embedding_bag``)
        without ``out=`` buffers, whose shapes a trace would freeze: TorchScript's form."""
        n, T = wide.shape[0], self.n_trees
        node = self.roots.to(INDEX_DTYPE).unsqueeze(0).expand(n, T).reshape(-1)
        for _ in range(self.max_depth):
            columns = torch.index_select(self.columns32, 0, node).view(n, T)
            thresholds = torch.index_select(self.thresholds, 0, node).view(n, T)
            go_left = torch.le(torch.gather(wide, 1, columns), thresholds)
            node = torch.index_select(self.rights32, 0, node) - go_left.view(-1).to(INDEX_DTYPE)
        return sum_leaves(self, node.view(n, T), self.leaf_table)

    def _forward_functional(self, wide: torch.Tensor) -> torch.Tensor:
        """The same walk without ``out=`` buffers, for torch.compile and exporters."""
        return self.finish_sums(node_walk_sums(wide, self.roots, self.columns32, self.thresholds,
                                               self.rights32, self.leaf_table, self.max_depth))

    def _forward_general(self, x: torch.Tensor) -> torch.Tensor:
        """The plain walk, for categorical splits and linear leaves."""
        wide = self.widen(x)
        node = self.roots.unsqueeze(0).expand(x.shape[0], self.n_trees)
        for _ in range(self.max_depth):
            values = torch.gather(wide, 1, self.columns[node])
            go_left = values <= self.thresholds[node]
            if self.has_categorical:
                cat_left = self.category_goes_left(values, self.category_rows[node])
                go_left = torch.where(self.node_is_categorical[node], cat_left, go_left)
            node = self.rights[node] - go_left.to(torch.int64)
        if self.has_linear:
            return self.sum_outputs(self.linear_leaves(x, node, self.leaf_values[node]))
        return self.sum_outputs(self.leaf_values[node])
