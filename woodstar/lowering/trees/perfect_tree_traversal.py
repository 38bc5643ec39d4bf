"""Perfect-tree traversal: trees padded to full depth, children found by arithmetic."""

import numpy as np
import torch

from ...ir.tree_ensemble import TreeEnsemble
from ..registry import register_strategy
from ._common import (
    TreeStrategyBase, always_left_column, as_buffer, node_input_columns, node_thresholds,
)
from ._fast import INDEX_DTYPE, exporting, spread_leaf_table, sum_leaves, tracing_torchscript
from .walk_op import emits_whole_walk_op, perfect_tree_walk, perfect_walk_sums

__all__ = ["PerfectTreeTraversalTrees"]


def _needs_general_walk(ens: TreeEnsemble) -> bool:
    """Categorical splits and linear leaves take the plain walk, not the lean one."""
    return ens.has_categorical or ens.has_linear_leaves


def _heap_layout(ens: TreeEnsemble, depth: int):
    """Each tree as a complete binary heap of the given depth. Returns, per heap slot,
    the IR node to read (or -1 for an always-left filler) and, per leaf slot, the IR
    leaf whose value it holds."""
    n_internal, n_leaves = 2 ** depth - 1, 2 ** depth
    internal = np.full((ens.n_trees, n_internal), -1, dtype=np.int64)
    leaves = np.zeros((ens.n_trees, n_leaves), dtype=np.int64)
    for t in range(ens.n_trees):
        offset = int(ens.tree_offsets[t])
        stack = [(0, 0, 0)]  # (local node, heap slot, depth)
        while stack:
            node, slot, d = stack.pop()
            if ens.left[offset + node] >= 0:
                internal[t, slot] = offset + node
                stack.append((int(ens.left[offset + node]), 2 * slot + 1, d + 1))
                stack.append((int(ens.right[offset + node]), 2 * slot + 2, d + 1))
            else:
                # A leaf above full depth: every leaf slot below it holds its value,
                # and the filler nodes in between all send rows left.
                first = slot
                for _ in range(depth - d):
                    first = 2 * first + 1
                span = 2 ** (depth - d)
                leaves[t, first - n_internal:first - n_internal + span] = offset + node
    return internal, leaves


def _mirrored_levels(table: np.ndarray, depth: int):
    """Heap-ordered (trees, 2**depth - 1) node tables as one flat array, level by level,
    trees within a level, and each tree's level in reverse heap order. In that order
    the node at level position ``i = t * 2**d + p`` has its left child at ``2 * i + 1``
    and its right child at ``2 * i`` of the next level: one step is
    ``i = 2 * i + go_left``, with no per-tree offset."""
    parts = []
    for d in range(depth):
        parts.append(table[:, 2 ** d - 1:2 ** (d + 1) - 1][:, ::-1].reshape(-1))
    return np.concatenate(parts) if parts else table.reshape(-1)[:0]


@register_strategy
class PerfectTreeTraversalTrees(TreeStrategyBase):
    """Trees padded to the ensemble's depth D; a step is
    ``i = 2 * i + (x[col[i]] <= threshold[i])`` over a mirrored level-by-level layout
    (see ``_mirrored_levels``), all in place on int32 indices; leaves are summed by
    ``embedding_bag``. Memory grows as 2**D."""

    name = "perf_tree_trav"

    @classmethod
    def model_bytes(cls, ens: TreeEnsemble, dtype: str) -> int:
        depth = int(ens.tree_depths().max())
        item = np.dtype(dtype).itemsize
        return ens.n_trees * (2 ** depth) * (4 + item + ens.n_outputs * 8 + 8)

    @classmethod
    def refusal(cls, ens: TreeEnsemble, dtype: str, budget_bytes: int):
        need = cls.model_bytes(ens, dtype)
        if need > budget_bytes:
            depth = int(ens.tree_depths().max())
            return (f"padding {ens.n_trees} trees to depth {depth} needs {need / 2**20:.0f} MiB, "
                    f"over the memory budget of {budget_bytes / 2**20:.0f} MiB")
        return None

    @classmethod
    def estimate_bytes(cls, ens: TreeEnsemble, n_rows: int, dtype: str) -> int:
        item = np.dtype(dtype).itemsize
        # index, columns (int32), values, thresholds, go_left; widened input; outputs.
        per_row = (ens.n_trees * (4 + 4 + 2 * item + 1) + 3 * ens.n_features * item
                   + 2 * ens.n_outputs * 8)
        if _needs_general_walk(ens):
            per_row += ens.n_trees * (4 * 8 + ens.leaf_width * 8)
        return int(n_rows * per_row)

    def __init__(self, ens: TreeEnsemble, dtype: str = "float32"):
        super().__init__(ens, dtype)
        self.depth = int(ens.tree_depths().max())
        internal, leaves = _heap_layout(ens, self.depth)
        filler = internal < 0
        safe = np.where(filler, 0, internal)
        columns = np.where(filler, always_left_column(ens), node_input_columns(ens)[safe])
        thresholds = node_thresholds(ens, dtype)
        thresholds = np.where(filler, np.inf, thresholds[safe]).astype(dtype)
        n_internal = 2 ** self.depth - 1
        self.register_buffer("tree_base", torch.arange(ens.n_trees, dtype=torch.int64) * n_internal)
        self.register_buffer("leaf_base", torch.arange(ens.n_trees, dtype=torch.int64) * 2 ** self.depth
                             - n_internal)
        self.register_buffer("columns", as_buffer(columns.reshape(-1)))
        self.register_buffer("thresholds", as_buffer(thresholds.reshape(-1)))
        if _needs_general_walk(ens):
            self.register_buffer("leaf_values", as_buffer(ens.leaf_value[leaves.reshape(-1)], np.float64))
            if self.has_linear:
                self._init_linear(ens, leaves.reshape(-1))
            if self.has_categorical:
                self.register_buffer("node_is_categorical", as_buffer(
                    (~filler & ens.is_categorical[safe]).reshape(-1)))
                self.register_buffer("category_rows", as_buffer(
                    self.category_row_of_node[safe].reshape(-1)))
            return
        # Numerical trees: mirrored level layout (children by doubling, see above).
        self.level_offsets = [int(ens.n_trees * (2 ** d - 1)) for d in range(self.depth + 1)]
        self.register_buffer("level_columns", as_buffer(
            _mirrored_levels(columns, self.depth), np.int32))
        self.register_buffer("level_thresholds", as_buffer(
            _mirrored_levels(thresholds, self.depth), dtype))
        mirrored_leaves = leaves[:, ::-1].reshape(-1)
        tree_of_leaf = np.repeat(np.arange(ens.n_trees), 2 ** self.depth)
        self.register_buffer("leaf_table", as_buffer(spread_leaf_table(
            ens, mirrored_leaves, tree_of_leaf, np.float64)))

    # Tiny batches: every node's test at once (rows x nodes stays under this many
    # elements), then each level is one gather of a decision; fewer ops per level is
    # what counts when per-op overhead dominates (docs/benchmarks.md, "tiny batches").
    dense_max_elements = 1 << 16

    @property
    def exports_whole_walk(self) -> bool:
        return not (self.has_categorical or self.has_linear)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.has_categorical or self.has_linear:
            return self._forward_general(x)
        wide = self.widen(x)
        n, T = x.shape[0], self.n_trees
        if tracing_torchscript() and not self.walk_as_operator:
            return self._forward_traced(wide)
        if exporting():
            if emits_whole_walk_op() or self.walk_as_operator:
                sums = perfect_tree_walk(wide, self.level_columns, self.level_thresholds,
                                         self.leaf_table, T, self.depth)
                return self.finish_sums(sums)
            return self._forward_functional(wide)
        index = torch.arange(T, dtype=INDEX_DTYPE, device=x.device).repeat(n, 1)
        if n * self.level_columns.shape[0] <= self.dense_max_elements:
            decisions = torch.le(wide.index_select(1, self.level_columns), self.level_thresholds)
            decisions = decisions.view(torch.uint8)
            for d in range(self.depth):
                start, stop = self.level_offsets[d], self.level_offsets[d + 1]
                go_left = torch.gather(decisions[:, start:stop], 1, index)
                index.mul_(2).add_(go_left)
            return sum_leaves(self, index, self.leaf_table)
        flat = index.view(-1)
        columns = torch.empty((n, T), dtype=INDEX_DTYPE, device=x.device)
        thresholds = torch.empty((n, T), dtype=wide.dtype, device=x.device)
        values = torch.empty((n, T), dtype=wide.dtype, device=x.device)
        go_left = torch.empty((n, T), dtype=torch.bool, device=x.device)
        for d in range(self.depth):
            start, stop = self.level_offsets[d], self.level_offsets[d + 1]
            torch.index_select(self.level_columns[start:stop], 0, flat, out=columns.view(-1))
            torch.gather(wide, 1, columns, out=values)
            torch.index_select(self.level_thresholds[start:stop], 0, flat, out=thresholds.view(-1))
            torch.le(values, thresholds, out=go_left)
            index.mul_(2).add_(go_left)
        return sum_leaves(self, index, self.leaf_table)

    def _forward_traced(self, wide: torch.Tensor) -> torch.Tensor:
        """The eager level walk's ops (int32 ``index_select`` per level, leaves by
        ``embedding_bag``) without ``out=`` buffers or the tiny-batch branch, which a
        trace would freeze: TorchScript's form."""
        n, T = wide.shape[0], self.n_trees
        index = torch.arange(T, dtype=INDEX_DTYPE, device=wide.device).unsqueeze(0).expand(n, T).reshape(-1)
        for d in range(self.depth):
            start, stop = self.level_offsets[d], self.level_offsets[d + 1]
            columns = torch.index_select(self.level_columns[start:stop], 0, index).view(n, T)
            thresholds = torch.index_select(self.level_thresholds[start:stop], 0, index).view(n, T)
            go_left = torch.le(torch.gather(wide, 1, columns), thresholds)
            index = 2 * index + go_left.view(-1).to(INDEX_DTYPE)
        return sum_leaves(self, index.view(n, T), self.leaf_table)

    def _forward_functional(self, wide: torch.Tensor) -> torch.Tensor:
        """The same walk without ``out=`` buffers: what torch.compile can trace and
        fuse (in-place buffers are an eager-mode optimisation)."""
        return self.finish_sums(perfect_walk_sums(wide, self.level_columns, self.level_thresholds,
                                                  self.leaf_table, self.n_trees, self.depth))

    def _forward_general(self, x: torch.Tensor) -> torch.Tensor:
        """The plain walk, for categorical splits and linear leaves."""
        wide = self.widen(x)
        slot = torch.zeros((x.shape[0], self.n_trees), dtype=torch.int64, device=x.device)
        for _ in range(self.depth):
            node = self.tree_base + slot
            values = torch.gather(wide, 1, self.columns[node])
            go_left = values <= self.thresholds[node]
            if self.has_categorical:
                cat_left = self.category_goes_left(values, self.category_rows[node])
                go_left = torch.where(self.node_is_categorical[node], cat_left, go_left)
            slot = 2 * slot + 2 - go_left.to(torch.int64)
        if self.has_linear:
            leaf = self.leaf_base + slot
            return self.sum_outputs(self.linear_leaves(x, leaf, self.leaf_values[leaf]))
        return self.sum_outputs(self.leaf_values[self.leaf_base + slot])
