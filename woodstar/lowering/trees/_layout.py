"""NumPy helpers that re-lay the IR's trees for the strategies (no torch here)."""

import numpy as np

from ...ir.tree_ensemble import TreeEnsemble

__all__ = ["tree_nodes", "sibling_adjacent_order", "sibling_adjacent_layout", "leaf_paths"]


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


def _all_sibling_adjacent_orders(ens: TreeEnsemble) -> np.ndarray:
    """``sibling_adjacent_order`` of every tree, as global indices, tree after tree:
    the walk runs one level of all trees at a time (a Python loop per node cost most
    of a large model's conversion)."""
    offsets = ens.tree_offsets[:-1].astype(np.int64)
    frontier, tree = offsets, np.arange(ens.n_trees)
    nodes, trees, levels = [], [], []
    level = 0
    while frontier.size:
        nodes.append(frontier)
        trees.append(tree)
        levels.append(np.full(frontier.size, level))
        split = ens.left[frontier] >= 0
        parents, tree = frontier[split], np.repeat(tree[split], 2)
        base = offsets[tree[::2]]
        # each parent's left then right child, parents in this level's order
        frontier = np.stack([base + ens.left[parents], base + ens.right[parents]], axis=1).ravel()
        level += 1
    nodes, trees, levels = np.concatenate(nodes), np.concatenate(trees), np.concatenate(levels)
    return nodes[np.lexsort((levels, trees))]  # stable: a level keeps its order


def sibling_adjacent_layout(ens: TreeEnsemble):
    """Every tree renumbered by ``sibling_adjacent_order``, one after another, so that a
    walk step is ``node = right[node] - (x <= t)`` (left child = right child - 1).

    Returns ``(order, rights, roots, tree_of_node)``: the IR node at each new position;
    per new position the new index of its right child (a leaf's is itself + 1, and its
    test always says left, so it stays put); each tree's root; the tree of each new
    position."""
    order = _all_sibling_adjacent_orders(ens)
    new_index = np.empty_like(order)
    new_index[order] = np.arange(len(order))
    is_leaf = ens.left[order] < 0
    tree_of_node = np.repeat(np.arange(ens.n_trees), ens.tree_sizes())[order]
    left_global = ens.tree_offsets[tree_of_node] + np.maximum(ens.left[order], 0)
    rights = np.where(is_leaf, np.arange(len(order)), new_index[left_global]) + 1
    return order, rights, new_index[ens.tree_offsets[:-1]], tree_of_node


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
