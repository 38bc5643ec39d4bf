"""Passes over the TreeEnsemble IR: each a pure function, IR in, arrays or IR out."""

import numpy as np

from .tree_ensemble import LE, TreeEnsemble

__all__ = ["le_thresholds", "fold_base_score"]


def le_thresholds(ens: TreeEnsemble, dtype) -> np.ndarray:
    """Thresholds ``t'`` in ``dtype`` such that ``x <= t'`` is the node's own test.

    ``x`` is any value of the input precision (a float32, or a float64 on the float64
    route). For ``x <= t`` the answer is the largest ``dtype`` value not above ``t``;
    for ``x < t`` the largest one strictly below ``t``. Because every ``x`` is itself
    a ``dtype`` value, the rounded comparison takes the same branch for every input:
    no tolerance, no lost ties. Categorical nodes and leaves get +inf (unused).
    """
    dtype = np.dtype(dtype)
    t64 = ens.threshold
    with np.errstate(over="ignore", invalid="ignore"):
        t = t64.astype(dtype)
        too_high = np.where(ens.comparison == LE, t.astype(np.float64) > t64, t.astype(np.float64) >= t64)
        # (a threshold beyond float32's range rounds to inf, stepped down to the max)
        t = np.where(too_high, np.nextafter(t, dtype.type(-np.inf)), t).astype(dtype)
    unused = (ens.left < 0) | ens.is_categorical
    return np.where(unused, dtype.type(np.inf), t).astype(dtype)


def fold_base_score(ens: TreeEnsemble) -> TreeEnsemble:
    """The same ensemble with each output's base score added into the leaves of the
    first tree that feeds that output, and that base score set to 0.

    The libraries start a sum-aggregated prediction at the base score and add the
    trees one by one (see ``reference.predict_raw``). Adding the base at build time,
    ``base + leaf``, is the same float64 operation as their first runtime addition, so
    a strategy that sums trees in order from 0 rounds exactly as they do, with no
    extra work per row. Linear leaves are computed per row and mean aggregation
    divides before the base is added: those ensembles are returned unchanged.
    """
    if ens.aggregation != "sum" or ens.has_linear_leaves or not np.any(ens.base_score):
        return ens
    leaf_value = ens.leaf_value.copy()
    base = ens.base_score.copy()
    starts, width = ens.tree_output_start, ens.leaf_width
    for column in np.flatnonzero(base):
        feeding = np.flatnonzero((starts <= column) & (column < starts + width))
        if len(feeding) == 0:
            continue
        tree = int(feeding[0])
        nodes = slice(ens.tree_offsets[tree], ens.tree_offsets[tree + 1])
        leaf_value[nodes, column - starts[tree]] += base[column]
        base[column] = 0.0
    return ens.replace(leaf_value=leaf_value, base_score=base)
