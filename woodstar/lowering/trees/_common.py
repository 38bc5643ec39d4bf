"""Pieces every tree strategy shares: NaN routing, categorical lookups, output sums.

Missing values are routed without a per-node test: the input is widened to
``[x, x with NaN -> -inf]`` and every node asks ``x <= t`` (true means left). A node
whose NaNs go right reads the first block (a NaN compares false), one whose NaNs go
left reads the second (``-inf <= t`` is true), so one comparison decides every value;
real infinities are untouched and compare as the source library compares them.
Categorical nodes read the first block and look the value up in a small table with
extra columns for "not a category" and "NaN". Leaves and padding read the second
block (never NaN) against +inf: always "left".

An ensemble whose nodes treat a value range as missing (``missing_in_range``) gets two
more blocks, ``r = x with the range -> NaN`` and ``r with NaN -> -inf``; its flagged
nodes read those instead, so the range follows the default side with no extra test.

Linear leaves (LightGBM linear_tree, XGBoost gblinear) are applied after the walk: a
strategy hands over the leaf slot each row reached in each tree, and the terms of
that leaf (padded to the longest leaf, intercept and padding reading 1.0) are
gathered from the input and summed.
"""

import numpy as np
import torch
from torch import nn

from ...ir.passes import le_thresholds
from ...ir.tree_ensemble import TreeEnsemble
from ..ordered_sum import running_sum

__all__ = [
    "TreeStrategyBase", "node_input_columns", "node_thresholds", "always_left_column",
    "categorical_table", "as_buffer", "missing_range_bounds", "sum_in_tree_order",
]

TORCH_DTYPES = {"float32": torch.float32, "float64": torch.float64}


def as_buffer(array, dtype=None) -> torch.Tensor:
    """A torch tensor owning a copy of ``array`` (IR arrays are read-only)."""
    return torch.tensor(np.array(array, dtype=dtype))


def always_left_column(ens: TreeEnsemble) -> int:
    """A widened column that is never NaN: compared with +inf it always says left."""
    return ens.n_features


def node_input_columns(ens: TreeEnsemble) -> np.ndarray:
    """The column of the widened input each node reads (see the module docstring)."""
    numerical_left = ens.default_left & ~ens.is_categorical
    columns = np.where(numerical_left, ens.feature + ens.n_features, ens.feature)
    columns = np.where(ens.missing_in_range, columns + 2 * ens.n_features, columns)
    return np.where(ens.left < 0, always_left_column(ens), columns).astype(np.int64)


def node_thresholds(ens: TreeEnsemble, dtype: str) -> np.ndarray:
    """Thresholds for ``x <= t`` in ``dtype``; +inf for leaves and categorical nodes."""
    return le_thresholds(ens, np.dtype(dtype))


def missing_range_bounds(ens: TreeEnsemble, dtype: str):
    """(lo, hi) in ``dtype`` such that ``lo <= x <= hi`` is the IR's range test for
    every ``x`` of that dtype: lo rounded up, hi rounded down."""
    dtype = np.dtype(dtype)
    lo64, hi64 = (float(v) for v in ens.missing_range)
    with np.errstate(over="ignore"):
        lo, hi = dtype.type(lo64), dtype.type(hi64)
    if float(lo) < lo64:
        lo = np.nextafter(lo, dtype.type(np.inf))
    if float(hi) > hi64:
        hi = np.nextafter(hi, dtype.type(-np.inf))
    return float(lo), float(hi)


def categorical_table(ens: TreeEnsemble, nodes: np.ndarray):
    """Rows of booleans, one per categorical node: column c says whether category c
    goes left; the last two columns are "not a category" (right) and NaN (default)."""
    n_bits = int(32 * ens.cat_bitset_size[nodes].max(initial=0))
    table = np.zeros((len(nodes), n_bits + 2), dtype=bool)
    for row, node in enumerate(nodes):
        start, size = ens.cat_bitset_start[node], ens.cat_bitset_size[node]
        words = ens.cat_bitsets[start:start + size]
        bits = np.unpackbits(words.astype("<u4").view(np.uint8), bitorder="little").astype(bool)
        table[row, :len(bits)] = bits
        table[row, n_bits + 1] = ens.default_left[node]
    return table, n_bits


# Leaf values, sums and transforms are float64 on every route: the comparisons decide
# exactness of the branch (and are exact in float32 by the threshold rounding), but a
# float32 sum of hundreds of leaves can flip a near-tied label or a margin near zero.
ACCUMULATE = torch.float64


def sum_in_tree_order(per_tree: torch.Tensor) -> torch.Tensor:
    """(n, T, W) -> (n, W), adding tree after tree from 0 as the source libraries'
    loops do. A float sum's rounding depends on its order and a near tie between two
    classes is decided by that rounding; ``Tensor.sum`` reduces in blocks and does
    not keep the order, a running sum (``cumsum``) does, on every backend."""
    return running_sum(per_tree, dim=1)  # at least one tree: the IR requires it


def output_blocks(ens: TreeEnsemble):
    """For ensembles whose trees feed different outputs: the trees feeding each block
    of ``leaf_width`` outputs, in tree order, when the blocks tile the outputs
    (multiclass boosting); None for any other layout."""
    width, starts = ens.leaf_width, ens.tree_output_start
    if ens.n_outputs % width:
        return None
    blocks = [np.flatnonzero(starts == start) for start in range(0, ens.n_outputs, width)]
    if sum(len(b) for b in blocks) != ens.n_trees or any(len(b) == 0 for b in blocks):
        return None
    return blocks


class TreeStrategyBase(nn.Module):
    """Shared state and steps.

    Subclass ``forward`` is: widen input -> per-tree leaf vectors (n, T, W) in float64
    -> sum into outputs -> aggregation -> base score.
    """

    name = ""

    @property
    def exports_whole_walk(self) -> bool:
        """Whether, inside ``walk_op.whole_walk_op()`` or with ``walk_as_operator`` set,
        the export holds the walk as one operator (the lean forms of the traversal
        strategies do)."""
        return False

    def __init__(self, ens: TreeEnsemble, dtype: str):
        super().__init__()
        self.n_features = ens.n_features
        self.n_outputs = ens.n_outputs
        self.n_trees = ens.n_trees
        self.leaf_width = ens.leaf_width
        self.dtype_name = dtype
        # Set by a backend whose compiled program calls the walk operator's native
        # kernel (torch.compile and TorchScript on the CPU): a plain attribute, so a
        # compiled graph depends on it as on the strategy's other settings.
        self.walk_as_operator = False
        self.compute_dtype = TORCH_DTYPES[dtype]
        self.round_to_float32 = dtype == "float64" and ens.input_precision == "float32"
        self.mean = ens.aggregation == "mean"
        self.categorical_rule = ens.categorical_rule
        self.has_categorical = ens.has_categorical
        starts = ens.tree_output_start
        self.single_block = ens.single_output_block
        columns = (starts[:, None] + np.arange(ens.leaf_width)[None, :]).reshape(-1)
        self.register_buffer("output_columns", as_buffer(columns, np.int64))
        self.register_buffer("base_score", as_buffer(ens.base_score, np.float64))
        # A mean's divisor as a float64 buffer, not a Python number: a trace would hold
        # an int as an int64 constant that every call converts, and the ONNX exporter
        # writes a float as a float32 constant.
        self.register_buffer("tree_count", torch.tensor(float(ens.n_trees), dtype=torch.float64))
        self.block_names = []
        blocks = None if self.single_block else output_blocks(ens)
        for b, trees in enumerate(blocks or []):
            self.register_buffer(f"block{b}_trees", as_buffer(trees, np.int64))
            self.block_names.append(f"block{b}_trees")
        self.has_missing_range = ens.has_missing_range
        self.missing_lo, self.missing_hi = (
            missing_range_bounds(ens, dtype) if self.has_missing_range else (0.0, 0.0))
        self.n_category_columns = 0
        if self.has_categorical:
            self._init_categorical(ens)
        self.has_linear = ens.has_linear_leaves
        self.linear_skip_missing = ens.linear_missing == "skip"

    def _init_linear(self, ens, node_of_slot):
        """Buffers for linear leaves; ``node_of_slot`` is the IR node (or -1 for
        padding) behind each of the strategy's leaf slots."""
        node_of_slot = np.asarray(node_of_slot, dtype=np.int64)
        safe = np.maximum(node_of_slot, 0)
        size = np.where(node_of_slot >= 0, ens.linear_size[safe], 0)
        width = max(int(size.max(initial=0)), 1)
        features = np.zeros((len(safe), width), dtype=np.int64)
        coefs = np.zeros((len(safe), width), dtype=np.float64)  # summed with leaves: float64
        is_one = np.ones((len(safe), width), dtype=bool)
        for slot in np.flatnonzero(size > 0):
            start = ens.linear_start[safe[slot]]
            f = ens.linear_feature[start:start + size[slot]]
            features[slot, :size[slot]] = np.maximum(f, 0)
            coefs[slot, :size[slot]] = ens.linear_coef[start:start + size[slot]]
            is_one[slot, :size[slot]] = f < 0
        self.register_buffer("linear_features", as_buffer(features))
        self.register_buffer("linear_coefs", as_buffer(coefs))
        self.register_buffer("linear_is_one", as_buffer(is_one))
        self.register_buffer("linear_active", as_buffer(size > 0))

    def linear_leaves(self, x: torch.Tensor, slots: torch.Tensor, values: torch.Tensor):
        """Leaf outputs (n, T, 1) with linear leaves evaluated; ``slots`` (n, T)."""
        if x.dtype != self.compute_dtype:
            x = x.to(self.compute_dtype)
        if self.round_to_float32:
            x = x.to(torch.float32)
        x = x.to(ACCUMULATE)
        n, n_trees = slots.shape
        features = self.linear_features[slots]  # (n, T, K)
        v = torch.gather(x, 1, features.reshape(n, -1)).reshape(features.shape)
        v = torch.where(self.linear_is_one[slots], torch.ones_like(v), v)
        missing = torch.isnan(v)
        terms = self.linear_coefs[slots] * torch.where(missing, torch.zeros_like(v), v)
        # Term after term, as the reference (and LightGBM's leaf model) adds them.
        linear = running_sum(terms, dim=2).unsqueeze(2)
        if not self.linear_skip_missing:
            linear = torch.where(missing.any(dim=2, keepdim=True), values, linear)
        return torch.where(self.linear_active[slots].unsqueeze(2), linear, values)

    def _init_categorical(self, ens):
        nodes = np.flatnonzero(ens.is_categorical & (ens.left >= 0))
        table, n_bits = categorical_table(ens, nodes)
        self.n_category_columns = n_bits
        # Row of each node in the table (0 for non-categorical nodes: never read).
        row_of_node = np.zeros(ens.n_nodes, dtype=np.int64)
        row_of_node[nodes] = np.arange(len(nodes))
        self.category_row_of_node = row_of_node  # strategies re-index this to their layout
        self.register_buffer("category_table", as_buffer(table.reshape(-1)))

    # ------------------------------------------------------------------ steps
    def widen(self, x: torch.Tensor) -> torch.Tensor:
        if x.dtype != self.compute_dtype:
            x = x.to(self.compute_dtype)
        if self.round_to_float32:
            x = x.to(torch.float32).to(self.compute_dtype)
        minus_inf = torch.full((), float("-inf"), dtype=x.dtype, device=x.device)
        if not self.has_missing_range:
            return torch.cat([x, torch.where(torch.isnan(x), minus_inf, x)], dim=1)
        nan = torch.full((), float("nan"), dtype=x.dtype, device=x.device)
        r = torch.where((x >= self.missing_lo) & (x <= self.missing_hi), nan, x)
        return torch.cat([x, torch.where(torch.isnan(x), minus_inf, x),
                          r, torch.where(torch.isnan(r), minus_inf, r)], dim=1)

    def category_goes_left(self, values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        """Table lookup for categorical nodes; ``rows`` are their table rows."""
        n_bits = self.n_category_columns
        code = torch.trunc(values)
        valid = (code >= 0) & (code < n_bits)
        if self.categorical_rule == "nonnegative":
            valid = valid & (values >= 0)
        elif self.categorical_rule == "exact":
            valid = valid & (values == code)
        column = torch.where(valid, code, torch.full_like(code, n_bits))
        column = torch.where(torch.isnan(values), torch.full_like(code, n_bits + 1), column)
        return self.category_table[rows * (n_bits + 2) + column.to(torch.int64)]

    def finish_sums(self, raw: torch.Tensor) -> torch.Tensor:
        """(n, n_outputs) tree sums -> aggregated raw scores (mean, base score)."""
        if self.mean:
            raw = raw / self.tree_count
        return raw + self.base_score

    def sum_outputs(self, per_tree: torch.Tensor) -> torch.Tensor:
        """(n, T, W) float64 leaf vectors -> (n, n_outputs) aggregated raw scores."""
        if self.single_block:
            raw = sum_in_tree_order(per_tree)
        elif self.block_names:
            raw = torch.cat([sum_in_tree_order(per_tree.index_select(1, getattr(self, name)))
                             for name in self.block_names], dim=1)
        else:  # an irregular layout: index_add keeps the order in eager mode only
            n = per_tree.shape[0]
            raw = torch.zeros((n, self.n_outputs), dtype=per_tree.dtype, device=per_tree.device)
            raw = raw.index_add(1, self.output_columns, per_tree.reshape(n, -1))
        return self.finish_sums(raw)
