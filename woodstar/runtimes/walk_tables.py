"""What the walk operators' C kernels (``walk_ops.c``) read besides the operators' own
arguments, derived from those arguments once per model (``walk_ops._TablesCache``):

- for the node walk, each tree's depth, the steps its deepest leaf needs, so that a
  tree stops there instead of stepping in place up to the deepest tree's depth (a
  leaf's step keeps it in place, so the node reached is the same);
- for leaf vectors of several outputs, the one column each tree's leaves fill where it
  feeds one output (multiclass boosting), so that a row adds one value per tree instead
  of a vector of +0.0 around it (``tree_columns`` says when that keeps the bits).
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np

__all__ = ["NodeTables", "node_tables", "perfect_tree_columns", "tree_columns"]


@dataclass
class NodeTables:
    depths: np.ndarray                      # int32 per tree
    columns: Optional[np.ndarray] = None    # int32 per tree (tree_columns); None: one output


def _walk_down(roots, rights):
    """(per-tree depths: how many steps from its root each tree's deepest leaf is, 0 for a
    lone leaf; (tree, node) of every leaf reached from the roots), for the node
    walk's sibling-adjacent arrays: a leaf's "right child" is the slot after it and its
    test says left, so it steps to itself; no internal node's left child is itself."""
    is_leaf = rights.astype(np.int64) - 1 == np.arange(len(rights))
    depths = np.zeros(len(roots), np.int32)
    tree, node, level = np.arange(len(roots)), np.asarray(roots, np.int64), 0
    leaf_trees, leaf_nodes = [], []
    while len(node):
        leaf = is_leaf[node]
        leaf_trees.append(tree[leaf])
        leaf_nodes.append(node[leaf])
        tree, node = tree[~leaf], node[~leaf]
        if len(node):
            level += 1
            depths[tree] = level  # levels grow: the last assignment is the deepest
            right = rights[node].astype(np.int64)
            tree, node = np.concatenate([tree, tree]), np.concatenate([right - 1, right])
    return depths, (np.concatenate(leaf_trees), np.concatenate(leaf_nodes))


def tree_columns(n_trees: int, leaf_trees: np.ndarray, leaf_rows: np.ndarray) -> np.ndarray:
    """Per tree, the one column of its leaf vectors (``leaf_rows``, one per leaf of tree
    ``leaf_trees``) that is not +0.0 in every leaf, where adding that column alone gives
    the bits of adding the whole vector; -1 where the whole vector must be added.

    Adding +0.0 leaves every float as it is but -0.0, which becomes +0.0. A running sum
    starts at -0.0 in every column and stays -0.0 only while every value added to it is
    -0.0; so a tree may skip its +0.0 columns once no column but its own can still hold
    -0.0, which is known from the trees before it, whatever the rows."""
    width = leaf_rows.shape[1]
    bits = np.ascontiguousarray(leaf_rows, np.float64).view(np.uint64)
    nonzero = np.zeros((n_trees, width), bool)
    negative_zero = np.zeros((n_trees, width), bool)
    np.logical_or.at(nonzero, leaf_trees, bits != 0)
    np.logical_or.at(negative_zero, leaf_trees, bits == np.uint64(1 << 63))
    columns = np.full(n_trees, -1, np.int32)
    maybe_negative_zero = np.ones(width, bool)  # the columns' sums before tree t
    for t in range(n_trees):
        filled = np.flatnonzero(nonzero[t])
        if len(filled) == 1 and not np.delete(maybe_negative_zero, filled[0]).any():
            columns[t] = filled[0]
        maybe_negative_zero &= negative_zero[t]
    return columns


def node_tables(roots: np.ndarray, rights: np.ndarray, leaf_table: np.ndarray) -> NodeTables:
    """The node walk's tables (``roots``, ``rights``, ``leaf_table`` as the operator's)."""
    depths, (leaf_trees, leaf_nodes) = _walk_down(roots, rights)
    columns = None
    if leaf_table.shape[1] > 1:
        columns = tree_columns(len(roots), leaf_trees, leaf_table[leaf_nodes])
    return NodeTables(depths=depths, columns=columns)


def perfect_tree_columns(n_trees: int, depth: int, leaf_table: np.ndarray):
    """``tree_columns`` of the perfect walk's leaf table (tree t's leaves are its rows
    t 2^depth to (t + 1) 2^depth - 1); None for one output."""
    if leaf_table.shape[1] == 1:
        return None
    return tree_columns(n_trees, np.repeat(np.arange(n_trees), 1 << depth), leaf_table)
