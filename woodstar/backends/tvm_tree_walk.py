"""TVM's kernels for ``woodstar::perfect_tree_walk`` and ``woodstar::node_tree_walk``
on the CPU: one TensorIR function each instead of the walks' tensor ops.

Relax's default CPU pipeline leaves every operator unscheduled and does not fuse
gathers, so the level-by-level program runs five passes over (rows x trees) arrays per
level. These kernels walk a block of ``ROW_BLOCK`` rows through one tree at a time,
level by level with the block's node indices in locals: the rows' loads are
independent, so they overlap, as the compiled C walk's lockstep rows do. Row blocks
run in parallel on TVM's thread pool. Each row's leaves are added tree after tree from
the first, in float64, as ``sum_in_tree_order`` does, so answers are the tensor
program's to the bit, at any thread count.

The last block's rows past the end re-read the last row (their results are not
stored), so the inner loops have no bounds test.

tvm is imported only inside these functions.
"""

import contextlib
import threading

import numpy as np
import torch

ROW_BLOCK = 16
"""Rows walked in lockstep (benchmarks/notes.md, "tvm: one kernel per tree walk")."""
WALK_TABLES = True
"""False: the kernels take every tree's ``steps`` and add whole leaf vectors (A/B
timing)."""


def perfect_walk_kernel(n_columns, n_trees, depth, n_nodes, n_leaves, width, dtype,
                        row_block=None):
    """The TensorIR function ``(wide, columns, thresholds, leaves, tree_columns, out)``
    of the perfect-tree walk (a tree adds only column ``tree_columns[t]`` of its leaf
    vector where that is >= 0); the row count is symbolic, everything else fixed by the
    model."""
    from tvm.script import tirx as T

    B = row_block or ROW_BLOCK

    @T.prim_func(private=True)
    def perfect_tree_walk(var_wide: T.handle, columns: T.Buffer((n_nodes,), "int32"),
                          thresholds: T.Buffer((n_nodes,), dtype),
                          leaves: T.Buffer((n_leaves, width), "float64"),
                          tree_columns: T.Buffer((n_trees,), "int32"), var_out: T.handle):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        wide = T.match_buffer(var_wide, (n, n_columns), dtype)
        out = T.match_buffer(var_out, (n, width), "float64")
        for block in T.parallel((n + B - 1) // B):
            acc = T.decl_buffer((B, width), "float64", scope="local")
            index = T.decl_buffer((B,), "int32", scope="local")
            for r in range(B):
                for w in range(width):
                    acc[r, w] = T.float64(-0.0)  # x + -0.0 is x, the sign of zero included
            for t in range(n_trees):
                for r in range(B):
                    index[r] = t
                for d in T.unroll(depth):
                    for r in range(B):
                        row: T.int64 = T.min(block * B + r, n - 1)
                        node: T.int32 = index[r] + n_trees * ((1 << d) - 1)
                        index[r] = index[r] * 2 + T.Cast(
                            "int32", wide[row, columns[node]] <= thresholds[node])
                if tree_columns[t] >= 0:
                    for r in range(B):
                        acc[r, tree_columns[t]] = acc[r, tree_columns[t]] + leaves[index[r], tree_columns[t]]
                else:
                    for r in range(B):
                        for w in range(width):
                            acc[r, w] = acc[r, w] + leaves[index[r], w]
            for r in range(B):
                if block * B + r < n:
                    for w in range(width):
                        out[block * B + r, w] = acc[r, w]

    return perfect_tree_walk


def node_walk_kernel(n_columns, n_trees, steps, n_nodes, width, dtype, row_block=None):
    """The TensorIR function ``(wide, roots, columns, thresholds, rights, leaves, depths,
    tree_columns, out)`` of the node walk: tree ``t`` takes ``min(depths[t], steps)``
    steps (a leaf's step keeps it in place, so the node reached is the same) and adds
    only column ``tree_columns[t]`` of its leaf vector where that is >= 0
    (``runtimes/walk_tables.py`` says when that keeps the bits)."""
    from tvm.script import tirx as T

    B = row_block or ROW_BLOCK

    @T.prim_func(private=True)
    def node_tree_walk(var_wide: T.handle, roots: T.Buffer((n_trees,), "int64"),
                       columns: T.Buffer((n_nodes,), "int32"),
                       thresholds: T.Buffer((n_nodes,), dtype),
                       rights: T.Buffer((n_nodes,), "int32"),
                       leaves: T.Buffer((n_nodes, width), "float64"),
                       depths: T.Buffer((n_trees,), "int32"),
                       tree_columns: T.Buffer((n_trees,), "int32"), var_out: T.handle):
        T.func_attr({"tir.noalias": True})
        n = T.int64()
        wide = T.match_buffer(var_wide, (n, n_columns), dtype)
        out = T.match_buffer(var_out, (n, width), "float64")
        for block in T.parallel((n + B - 1) // B):
            acc = T.decl_buffer((B, width), "float64", scope="local")
            node = T.decl_buffer((B,), "int32", scope="local")
            for r in range(B):
                for w in range(width):
                    acc[r, w] = T.float64(-0.0)
            for t in range(n_trees):
                for r in range(B):
                    node[r] = T.Cast("int32", roots[t])
                for s in range(steps):
                    if s < depths[t]:
                        for r in range(B):
                            row: T.int64 = T.min(block * B + r, n - 1)
                            at: T.int32 = node[r]
                            node[r] = rights[at] - T.Cast("int32", wide[row, columns[at]] <= thresholds[at])
                if tree_columns[t] >= 0:
                    for r in range(B):
                        acc[r, tree_columns[t]] = acc[r, tree_columns[t]] + leaves[node[r], tree_columns[t]]
                else:
                    for r in range(B):
                        for w in range(width):
                            acc[r, w] = acc[r, w] + leaves[node[r], w]
            for r in range(B):
                if block * B + r < n:
                    for w in range(width):
                        out[block * B + r, w] = acc[r, w]

    return node_tree_walk


def _emit(importer, kernel, name, args, rows, width):
    from tvm import relax

    function = importer.block_builder.add_func(kernel, name)
    return importer.block_builder.emit(relax.call_tir(
        function, relax.Tuple(list(args)), out_ty=relax.TensorType([rows, width], "float64")))


def _shape(var):
    return [int(s) for s in var.ty.shape]


def convert_perfect_walk(node, importer):
    """``custom_convert_map`` entry: the operator's call as a ``call_tir`` of the kernel."""
    from tvm import relax

    from ..runtimes.walk_tables import perfect_tree_columns

    wide, columns, thresholds, leaves = (importer.env[a] for a in node.args[:4])
    n_trees, depth = int(node.args[4]), int(node.args[5])
    rows, n_columns = wide.ty.shape
    n_leaves, width = _shape(leaves)
    kernel = perfect_walk_kernel(int(n_columns), n_trees, depth, _shape(columns)[0],
                                 n_leaves, width, wide.ty.dtype)
    tree_columns = np.full(n_trees, -1, np.int32)
    (table,) = _lifted(node.args[3])
    if WALK_TABLES and table is not None and width > 1:
        tree_columns = perfect_tree_columns(n_trees, depth, table)
    return _emit(importer, kernel, "perfect_tree_walk",
                 (wide, columns, thresholds, leaves, relax.const(tree_columns, "int32")),
                 rows, width)


_LIFTED = threading.local()


@contextlib.contextmanager
def lifted_tensors(program):
    """Within the block, the converters below can read the exported program's buffers,
    parameters and constants by their placeholders' names (Relax sees them as inputs)."""
    signature, found = program.graph_signature, {}
    for name, target in {**signature.inputs_to_parameters, **signature.inputs_to_buffers,
                         **signature.inputs_to_lifted_tensor_constants}.items():
        tensor = program.state_dict.get(target, program.constants.get(target))
        if isinstance(tensor, torch.Tensor):
            found[name] = tensor
    _LIFTED.tensors = found
    try:
        yield
    finally:
        _LIFTED.tensors = {}


def _lifted(*args):
    """The NumPy values of the operator's arguments ``args`` (fx nodes) where
    ``lifted_tensors`` holds them, else None each."""
    lifted = getattr(_LIFTED, "tensors", {})
    found = [lifted.get(getattr(arg, "name", None)) for arg in args]
    return [None if a is None else a.detach().cpu().numpy() for a in found]


def _node_tables(node, n_trees, steps):
    """(depths, tree_columns) of the node walk's arrays, as Relax constants: derived
    from the model's arrays (``runtimes/walk_tables.py``) where ``lifted_tensors``
    holds them, else every tree ``steps`` steps and whole vectors (the same sums)."""
    from tvm import relax

    from ..runtimes.walk_tables import node_tables

    depths = np.full(n_trees, steps, np.int32)
    columns = np.full(n_trees, -1, np.int32)
    arrays = _lifted(node.args[1], node.args[4], node.args[5])
    if WALK_TABLES and all(a is not None for a in arrays):
        tables = node_tables(*arrays)
        depths = tables.depths
        if tables.columns is not None:
            columns = tables.columns
    return relax.const(depths, "int32"), relax.const(columns, "int32")


def convert_node_walk(node, importer):
    wide, roots, columns, thresholds, rights, leaves = (importer.env[a] for a in node.args[:6])
    steps = node.args[6]
    rows, n_columns = wide.ty.shape
    n_nodes, width = _shape(leaves)
    n_trees = _shape(roots)[0]
    kernel = node_walk_kernel(int(n_columns), n_trees, int(steps), n_nodes, width,
                              wide.ty.dtype)
    depths, tree_columns = _node_tables(node, n_trees, int(steps))
    return _emit(importer, kernel, "node_tree_walk",
                 (wide, roots, columns, thresholds, rights, leaves, depths, tree_columns),
                 rows, width)


CONVERTERS = {"perfect_tree_walk.default": convert_perfect_walk,
              "node_tree_walk.default": convert_node_walk}
"""``from_exported_program``'s ``custom_convert_map`` entries (keyed by the operators'
names as it sees them)."""
