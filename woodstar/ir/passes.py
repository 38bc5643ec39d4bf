"""Passes over the TreeEnsemble IR: each a pure function, IR in, arrays or IR out."""

import numpy as np

from .tree_ensemble import LE, TreeEnsemble

__all__ = ["le_thresholds"]


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
    t = np.where(too_high, np.nextafter(t, dtype.type(-np.inf)), t).astype(dtype)
    unused = (ens.left < 0) | ens.is_categorical
    return np.where(unused, dtype.type(np.inf), t).astype(dtype)
