"""Allocation-lean pieces shared by the traversal strategies' forward passes.

Measured on CPU (docs/benchmarks.md): per level, every fresh (rows x trees) int64
temporary costs a page-faulting allocation, and advanced indexing (``table[idx]``)
is several times slower than ``index_select`` into a preallocated ``out=`` buffer
with an int32 index. The leaves are summed by ``embedding_bag(mode="sum")``: one
fused gather-and-add, without the (rows, trees, width) temporary. Trees whose
leaves feed different outputs (multiclass boosting) get a leaf table already
spread over all outputs, so the same bag sum lands every value in its column.
"""

import numpy as np
import torch
import torch.nn.functional as F

from ...ir.tree_ensemble import TreeEnsemble

__all__ = ["spread_leaf_table", "sum_leaves", "INDEX_DTYPE", "exporting", "tracing_torchscript"]

INDEX_DTYPE = torch.int32
"""Node indices; an ensemble with more nodes than int32 holds is refused by the strategies."""


def spread_leaf_table(ens: TreeEnsemble, leaf_ids: np.ndarray, tree_of: np.ndarray,
                      dtype: str) -> np.ndarray:
    """(len(leaf_ids), width) leaf vectors: the IR's own when every tree feeds every
    output, otherwise each vector placed at its tree's output columns."""
    values = ens.leaf_value[leaf_ids]
    if ens.single_output_block:
        return values.astype(dtype)
    table = np.zeros((len(leaf_ids), ens.n_outputs), dtype=dtype)
    rows = np.arange(len(leaf_ids))[:, None]
    cols = ens.tree_output_start[tree_of][:, None] + np.arange(ens.leaf_width)[None, :]
    table[rows, cols] = values
    return table


def sum_leaves(strategy, leaves: torch.Tensor, table: torch.Tensor) -> torch.Tensor:
    """(rows, trees) leaf indices -> (rows, n_outputs) aggregated raw scores."""
    return strategy.finish_sums(F.embedding_bag(leaves, table, mode="sum"))


def exporting() -> bool:
    """True under torch.compile, TorchScript tracing or ONNX export: strategies then
    take their functional path (no ``out=`` buffers, no branch on the batch size that
    a trace would freeze)."""
    return bool(torch.compiler.is_compiling() or torch.jit.is_tracing()
                or torch.onnx.is_in_onnx_export())


def tracing_torchscript() -> bool:
    """True while ``torch.jit.trace`` records a TorchScript program (not an ONNX export
    that traces): TorchScript runs each recorded op as is, with no fusion, so it takes
    the walk form that is fastest op by op (int32 ``index_select``), not the
    advanced-indexing one that torch.compile fuses."""
    return bool(torch.jit.is_tracing() and not torch.onnx.is_in_onnx_export())
