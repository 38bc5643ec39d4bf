"""GEMM: every node of every tree evaluated at once, leaves found by matrix products."""

import numpy as np
import torch

from ...ir.tree_ensemble import TreeEnsemble
from ..registry import register_strategy
from ._common import (
    TreeStrategyBase, always_left_column, as_buffer, node_input_columns, node_thresholds,
)
from ._layout import leaf_paths, tree_nodes

__all__ = ["GemmTrees"]


def _shape(ens: TreeEnsemble):
    n_internal = max(int(np.sum(tree_nodes(ens, t)[1] >= 0)) for t in range(ens.n_trees))
    n_leaves = max(int(np.sum(tree_nodes(ens, t)[1] < 0)) for t in range(ens.n_trees))
    return max(n_internal, 1), n_leaves


@register_strategy
class GemmTrees(TreeStrategyBase):
    """Per tree t: decisions D (internal x rows, 1 = left); ``path = A_t @ D`` where
    ``A_t[leaf, node]`` is +1 / -1 when the leaf lies left / right below the node;
    a row reaches the leaf whose path equals its count of left turns; a second product
    with the leaf values gives the tree's output. Memory per row grows with nodes."""

    name = "gemm"

    @classmethod
    def model_bytes(cls, ens: TreeEnsemble, dtype: str) -> int:
        n_internal, n_leaves = _shape(ens)
        return ens.n_trees * n_leaves * (n_internal * np.dtype(dtype).itemsize + ens.leaf_width * 8)

    @classmethod
    def refusal(cls, ens: TreeEnsemble, dtype: str, budget_bytes: int):
        need = cls.model_bytes(ens, dtype)
        if need > budget_bytes:
            return (f"the path matrices of {ens.n_trees} trees need {need / 2**20:.0f} MiB, "
                    f"over the memory budget of {budget_bytes / 2**20:.0f} MiB")
        return None

    @classmethod
    def estimate_bytes(cls, ens: TreeEnsemble, n_rows: int, dtype: str) -> int:
        n_internal, n_leaves = _shape(ens)
        item = np.dtype(dtype).itemsize
        per_row = ens.n_trees * ((2 * n_internal + n_leaves) * item + (n_leaves + ens.leaf_width) * 8)
        return int(n_rows * (per_row + 6 * ens.n_features * item))

    def __init__(self, ens: TreeEnsemble, dtype: str = "float32"):
        super().__init__(ens, dtype)
        n_internal, n_leaves = _shape(ens)
        T, W = ens.n_trees, ens.leaf_width
        columns = np.full((T, n_internal), always_left_column(ens), dtype=np.int64)
        thresholds = np.full((T, n_internal), np.inf, dtype=dtype)  # padding: always left
        paths = np.zeros((T, n_leaves, n_internal), dtype=dtype)
        left_turns = np.full((T, n_leaves), -1, dtype=dtype)  # padding: never reached
        values = np.zeros((T, W, n_leaves), dtype=np.float64)
        categorical_slots, categorical_nodes = [], []
        node_of_leaf_slot = np.full((T, n_leaves), -1, dtype=np.int64)
        node_columns = node_input_columns(ens)
        thresholds_of_node = node_thresholds(ens, dtype)
        for t in range(T):
            offset, left, right = tree_nodes(ens, t)
            internal, leaves, leaf_to_path = leaf_paths(left, right)
            slot_of = {int(node): i for i, node in enumerate(internal)}
            columns[t, :len(internal)] = node_columns[offset + internal]
            thresholds[t, :len(internal)] = thresholds_of_node[offset + internal]
            for i, node in enumerate(internal):
                if ens.is_categorical[offset + node]:
                    categorical_slots.append(t * n_internal + i)
                    categorical_nodes.append(offset + node)
            for j, leaf in enumerate(leaves):
                path = leaf_to_path[int(leaf)]
                for node, side in path:
                    paths[t, j, slot_of[node]] = side
                left_turns[t, j] = sum(1 for _, side in path if side > 0)
                values[t, :, j] = ens.leaf_value[offset + leaf]
                node_of_leaf_slot[t, j] = offset + leaf
        self.shape_ = (T, n_internal, n_leaves)
        self.register_buffer("columns", as_buffer(columns.reshape(-1)))
        self.register_buffer("thresholds", as_buffer(thresholds[:, :, None]))
        self.register_buffer("paths", as_buffer(paths))
        self.register_buffer("left_turns", as_buffer(left_turns[:, :, None]))
        self.register_buffer("values", as_buffer(values))
        if self.has_linear:
            self._init_linear(ens, node_of_leaf_slot.reshape(-1))
            self.register_buffer("leaf_slot_base", torch.arange(T, dtype=torch.int64) * n_leaves)
        if self.has_categorical:
            self.register_buffer("categorical_slots", as_buffer(categorical_slots, np.int64))
            self.register_buffer("category_rows", as_buffer(
                self.category_row_of_node[np.asarray(categorical_nodes, dtype=np.int64)][:, None]))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        T, n_internal, n_leaves = self.shape_
        n = x.shape[0]
        wide_t = self.widen(x).t().contiguous()  # (columns, rows): gathers whole rows
        selected = wide_t.index_select(0, self.columns)  # (T * internal, rows)
        decisions = (selected.view(T, n_internal, n) <= self.thresholds).to(self.compute_dtype)
        if self.has_categorical:
            cat_values = selected.index_select(0, self.categorical_slots)
            cat_left = self.category_goes_left(cat_values, self.category_rows).to(self.compute_dtype)
            decisions = decisions.view(T * n_internal, n).index_copy(
                0, self.categorical_slots, cat_left).view(T, n_internal, n)
        reached = (torch.bmm(self.paths, decisions) == self.left_turns).to(self.values.dtype)
        per_tree = torch.bmm(self.values, reached)  # (T, W, rows)
        if self.has_linear:
            slots = reached.argmax(dim=1).t() + self.leaf_slot_base  # (rows, T)
            return self.sum_outputs(self.linear_leaves(x, slots, per_tree.permute(2, 0, 1)))
        return self.sum_outputs(per_tree.permute(2, 0, 1))
