"""A NumPy program for small batches: the tree-traversal walk without Torch.

At a handful of rows the Torch program's time is per-operator dispatch, not work; the
same walk in NumPy does the same comparisons on the same layout for a fraction of that
per call (docs/benchmarks.md, "small batches"). It is exact
for the same reasons: thresholds rounded by ``le_thresholds`` in the route's dtype,
NaN routed by the widened input, trees added in order from the base score (a running
sum, as every strategy does). Ensembles with categorical splits or linear leaves are
left to Torch (``supports``).
"""

import numpy as np

from ..ir.tree_ensemble import TreeEnsemble
from ._cpu_route import CpuRoute
from ..lowering.trees._common import missing_range_bounds, node_input_columns, node_thresholds
from ..lowering.trees._fast import spread_leaf_table
from ..lowering.trees._layout import sibling_adjacent_layout

__all__ = ["NumpyTreeWalk"]


class NumpyTreeWalk(CpuRoute):
    """Callable ``X (n, n_features) of dtype -> (raw, transformed)``, float64."""

    @staticmethod
    def supports(ens: TreeEnsemble) -> bool:
        return not (ens.has_categorical or ens.has_linear_leaves)

    def __init__(self, ens: TreeEnsemble, dtype: str):
        if not self.supports(ens):
            raise ValueError("the NumPy walk does not take categorical splits or linear leaves")
        ens = self._prepare(ens, dtype)
        self.has_missing_range = ens.has_missing_range
        if self.has_missing_range:
            self.missing_lo, self.missing_hi = missing_range_bounds(ens, dtype)
        # The tree-traversal layout: a step is ``node = right[node] - (x <= t)``.
        order, rights, roots, tree_of_node = sibling_adjacent_layout(ens)
        self.rights = rights.astype(np.intp)
        self.roots = roots.astype(np.intp)
        self.columns = node_input_columns(ens)[order].astype(np.intp)
        self.thresholds = node_thresholds(ens, dtype)[order]
        self.max_depth = int(ens.tree_depths().max())
        self.leaf_table = spread_leaf_table(ens, order, tree_of_node, np.float64)

    def _widen(self, x: np.ndarray) -> np.ndarray:
        blocks = [x, np.where(np.isnan(x), -np.inf, x)]
        if self.has_missing_range:
            r = np.where((x >= self.missing_lo) & (x <= self.missing_hi), np.nan, x)
            blocks += [r, np.where(np.isnan(r), -np.inf, r)]
        return np.concatenate(blocks, axis=1)

    def _tree_sums(self, X: np.ndarray) -> np.ndarray:
        wide = self._widen(X)
        n = wide.shape[0]
        columns, thresholds, rights = self.columns, self.thresholds, self.rights
        # One level per step over (rows, trees): six NumPy calls a level whatever the
        # forest's size. (Testing every node at once, as perf_tree_trav does for tiny
        # batches, reads every node's data and lost at every measured size.)
        if n == 1:
            row = wide[0]
            node = self.roots
            for _ in range(self.max_depth):
                node = rights[node] - (row[columns[node]] <= thresholds[node])
            node = node[None, :]
        else:
            flat = wide.ravel()
            row_start = (np.arange(n, dtype=np.intp) * wide.shape[1])[:, None]
            node = np.broadcast_to(self.roots, (n, self.n_trees))
            for _ in range(self.max_depth):
                node = rights[node] - (flat[row_start + columns[node]] <= thresholds[node])
        return np.cumsum(self.leaf_table[node], axis=1)[:, -1]  # in tree order
