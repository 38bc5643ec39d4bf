"""NumPy helpers that re-lay the IR's trees for the strategies (no torch here)."""

import numpy as np

from ...ir.tree_ensemble import TreeEnsemble

__all__ = ["tree_nodes", "sibling_adjacent_order", "leaf_paths"]


def tree_nodes(ens: TreeEnsemble, t: int):
    """(global offset, local left, local right) of tree t."""
    start, stop = int(ens.tree_offsets[t]), int(ens.tree_offsets[t + 1])
    return start, ens.left[start:stop], ens.right[start:stop]


def sibling_adjacent_order(left: np.ndarray, right: np.ndarray) -> np.ndarray:
    """A breadth-first order of one tree's nodes in which every right child directly
    follows its left sibling; returns old local index for each new position."""
    order = [0]
    for node in order:  # grows while iterating: a breadth-first walk
        if left[node] >= 0:
            order.append(int(left[node]))
            order.append(int(right[node]))
    return np.asarray(order, dtype=np.int64)


def leaf_paths(left: np.ndarray, right: np.ndarray):
    """For each leaf: the internal nodes above it and the side taken (+1 left, -1 right).

    Returns (internal nodes in order, leaves in order, list of (leaf, [(node, side)]))."""
    internal = np.flatnonzero(left >= 0)
    leaves = np.flatnonzero(left < 0)
    paths = {0: []}
    for node in range(len(left)):  # parents come before children (IR invariant)
        if left[node] >= 0:
            paths[int(left[node])] = paths[node] + [(node, 1)]
            paths[int(right[node])] = paths[node] + [(node, -1)]
    return internal, leaves, paths
