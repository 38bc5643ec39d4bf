"""A NumPy reference predictor for the TreeEnsemble IR.

It follows the IR's definition literally, one tree at a time, in float64. It is the
oracle between a frontend and the lowerings: source library == reference says the
frontend is right; reference == tensor module says the lowering is right.
"""

import numpy as np

from .transforms import apply_post_transform
from .tree_ensemble import LE, TreeEnsemble

__all__ = ["predict_raw", "predict", "decide_left"]


def decide_left(ens: TreeEnsemble, nodes: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Which of ``nodes`` (global indices of internal nodes) send ``values`` left."""
    is_nan = np.isnan(values)
    in_range = ens.missing_in_range[nodes]
    if in_range.any():
        lo, hi = ens.missing_range
        is_nan = is_nan | (in_range & (values >= lo) & (values <= hi))
    threshold = ens.threshold[nodes]
    with np.errstate(invalid="ignore"):
        numerical = np.where(ens.comparison[nodes] == LE, values <= threshold, values < threshold)
    go_left = numerical
    categorical = ens.is_categorical[nodes]
    if categorical.any():
        go_left = go_left.copy()
        go_left[categorical] = _category_in_set(ens, nodes[categorical], values[categorical])
    return np.where(is_nan, ens.default_left[nodes], go_left)


def _category_in_set(ens, nodes, values):
    with np.errstate(invalid="ignore"):
        code = np.trunc(values)
        n_bits = 32 * ens.cat_bitset_size[nodes]
        valid = (code >= 0) & (code < n_bits)
        if ens.categorical_rule == "nonnegative":
            valid &= values >= 0
        elif ens.categorical_rule == "exact":
            valid &= values == code
    code = np.where(valid, code, 0).astype(np.int64)
    words = ens.cat_bitsets[np.minimum(ens.cat_bitset_start[nodes] + code // 32, len(ens.cat_bitsets) - 1)]
    bits = (words >> (code % 32).astype(np.uint32)) & 1
    return valid & (bits == 1)


def _linear_leaves(ens, leaves, X, values):
    """Leaf outputs where ``leaves`` (one per row) may be linear (see the IR)."""
    values = values.copy()
    for row in np.flatnonzero(ens.linear_size[leaves] > 0):
        leaf = leaves[row]
        terms = slice(ens.linear_start[leaf], ens.linear_start[leaf] + ens.linear_size[leaf])
        features, coefs = ens.linear_feature[terms], ens.linear_coef[terms]
        v = np.where(features < 0, 1.0, X[row, np.maximum(features, 0)])
        missing = np.isnan(v)
        if missing.any() and ens.linear_missing == "leaf_value":
            continue
        total = 0.0
        with np.errstate(invalid="ignore"):  # inf - inf is NaN, as in the source library
            for c, value in zip(coefs[~missing], v[~missing]):
                total += c * value
        values[row, 0] = total
    return values


def predict_raw(ens: TreeEnsemble, X) -> np.ndarray:
    """Raw scores (aggregated trees + base score), shape (n, n_outputs), float64."""
    X = np.asarray(X, dtype=np.float64)
    if ens.input_precision == "float32":
        with np.errstate(over="ignore"):
            X = X.astype(np.float32).astype(np.float64)
    n = X.shape[0]
    # The order of float64 additions is part of the contract (it decides near ties):
    # a sum starts at the base score and adds tree after tree, as the libraries' own
    # loops do; a mean adds the trees from 0, divides, then adds the base.
    summing = ens.aggregation == "sum"
    raw = np.tile(ens.base_score, (n, 1)) if summing else np.zeros((n, ens.n_outputs))
    if ens.sum_precision == "float32":  # each float32 += of float32 leaves rounds as XGBoost
        raw = raw.astype(np.float32)
    rows = np.arange(n)
    width = ens.leaf_width
    for t in range(ens.n_trees):
        offset = ens.tree_offsets[t]
        node = np.zeros(n, dtype=np.int64)
        while True:
            current = offset + node
            active = ens.left[current] >= 0
            if not active.any():
                break
            nodes = current[active]
            values = X[rows[active], ens.feature[nodes]]
            go_left = decide_left(ens, nodes, values)
            node[active] = np.where(go_left, ens.left[nodes], ens.right[nodes])
        start = ens.tree_output_start[t]
        values = ens.leaf_value[offset + node]
        if ens.has_linear_leaves:
            values = _linear_leaves(ens, offset + node, X, values)
        with np.errstate(invalid="ignore"):  # linear leaves may give +-inf
            raw[:, start:start + width] += values.astype(raw.dtype, copy=False)
    if summing:
        return raw.astype(np.float64)
    raw /= ens.n_trees
    return raw + ens.base_score


def predict(ens: TreeEnsemble, X):
    """(raw scores, transformed scores), both float64."""
    raw = predict_raw(ens, X)
    return raw, apply_post_transform(ens.post_transform, raw, ens.post_transform_scale)
