"""The tree walks as one operator each, for exporters that compile them natively.

Level by level, a tensor program writes every level's (rows x trees) indices, columns,
values and decisions to memory; a compiler that sees those ops one by one (TVM's
default CPU pipeline fuses none of them: gathers are opaque to its fusion) runs each
at memory speed. ``woodstar::perfect_tree_walk`` hands an exporter the whole walk, leaf
sums included, as one call with the strategy's own arrays, so it can emit one kernel
that keeps a row block's indices in registers (``backends/tvm_tree_walk.py``).
``perfect_tree_walk`` is the perfect-tree strategy's walk, ``node_tree_walk`` the
node-walk strategy's (numerical splits, constant leaves: the strategies' lean forms).

The operators' eager bodies are the strategies' functional walks themselves
(``perfect_walk_sums``, ``node_walk_sums``: what torch.compile and the other exporters
trace), so an operator answers what the tensor program answers. They are emitted only
inside ``whole_walk_op()``, which an exporter enters around its export.
"""

import contextlib
import threading

import torch

from ._common import sum_in_tree_order

__all__ = ["whole_walk_op", "emits_whole_walk_op", "perfect_tree_walk", "node_tree_walk",
           "perfect_walk_sums", "node_walk_sums"]

# A plain module flag, not a ContextVar: torch.compile traces the strategies' forward and
# cannot trace ContextVar.get. The lock keeps two exports from overlapping in time.
_EMIT = False
_EXPORT_LOCK = threading.Lock()


@contextlib.contextmanager
def whole_walk_op():
    """Within the block, the traversal strategies export their walk as one operator."""
    global _EMIT
    with _EXPORT_LOCK:
        _EMIT = True
        try:
            yield
        finally:
            _EMIT = False


def emits_whole_walk_op() -> bool:
    return _EMIT


def perfect_walk_sums(wide: torch.Tensor, level_columns: torch.Tensor,
                      level_thresholds: torch.Tensor, leaf_table: torch.Tensor,
                      n_trees: int, depth: int) -> torch.Tensor:
    """(rows, widened columns) -> (rows, outputs) float64 sums of the trees' leaves.

    Tree ``t``'s node at level ``d`` and position ``i`` of that level is entry
    ``n_trees * (2**d - 1) + i`` of ``level_columns``/``level_thresholds``; a walk
    starts at ``i = t`` and steps ``i = 2 * i + (wide[column] <= threshold)``;
    ``leaf_table[i]`` after ``depth`` steps is the leaf's vector."""
    index = torch.arange(n_trees, device=wide.device).unsqueeze(0).expand(wide.shape[0], -1)
    columns = level_columns.to(torch.int64)
    for d in range(depth):
        node = index + n_trees * (2 ** d - 1)
        values = torch.gather(wide, 1, columns[node])
        index = 2 * index + (values <= level_thresholds[node]).to(index.dtype)
    return sum_in_tree_order(leaf_table[index])


@torch.library.custom_op("woodstar::perfect_tree_walk", mutates_args=())
def perfect_tree_walk(wide: torch.Tensor, level_columns: torch.Tensor,
                      level_thresholds: torch.Tensor, leaf_table: torch.Tensor,
                      n_trees: int, depth: int) -> torch.Tensor:
    """``perfect_walk_sums`` as one operator."""
    return perfect_walk_sums(wide, level_columns, level_thresholds, leaf_table, n_trees, depth)


@perfect_tree_walk.register_fake
def _(wide, level_columns, level_thresholds, leaf_table, n_trees, depth):
    return wide.new_empty((wide.shape[0], leaf_table.shape[1]), dtype=torch.float64)


def node_walk_sums(wide: torch.Tensor, roots: torch.Tensor, columns: torch.Tensor,
                   thresholds: torch.Tensor, rights: torch.Tensor, leaf_table: torch.Tensor,
                   steps: int) -> torch.Tensor:
    """(rows, widened columns) -> (rows, outputs) float64 sums of the trees' leaves.

    Nodes in the sibling-adjacent layout: a walk starts at ``roots[t]`` and takes
    ``steps`` steps ``node = rights[node] - (wide[columns[node]] <= thresholds[node])``
    (a leaf's step leaves it in place); ``leaf_table[node]`` is then the leaf's vector."""
    node = roots.to(torch.int64).unsqueeze(0).expand(wide.shape[0], -1)
    columns, rights = columns.to(torch.int64), rights.to(torch.int64)
    for _ in range(steps):
        values = torch.gather(wide, 1, columns[node])
        node = rights[node] - (values <= thresholds[node]).to(torch.int64)
    return sum_in_tree_order(leaf_table[node])


@torch.library.custom_op("woodstar::node_tree_walk", mutates_args=())
def node_tree_walk(wide: torch.Tensor, roots: torch.Tensor, columns: torch.Tensor,
                   thresholds: torch.Tensor, rights: torch.Tensor, leaf_table: torch.Tensor,
                   steps: int) -> torch.Tensor:
    """``node_walk_sums`` as one operator."""
    return node_walk_sums(wide, roots, columns, thresholds, rights, leaf_table, steps)


@node_tree_walk.register_fake
def _(wide, roots, columns, thresholds, rights, leaf_table, steps):
    return wide.new_empty((wide.shape[0], leaf_table.shape[1]), dtype=torch.float64)
