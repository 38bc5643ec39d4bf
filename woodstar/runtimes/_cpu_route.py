"""What the torch backend's CPU routes (compiled walk, ONNX-ML kernel, NumPy walk) share:
the IR's finishing steps after the trees' sums, defined once.

The base score is folded into each output's first tree (``fold_base_score``) so a route
only adds trees in order from 0; what it cannot fold (a mean divides first) is added
here, after the mean, as ``reference.predict_raw`` does. The post-transform is the IR's
own NumPy definition (Torch's would cost more than the walk on a small batch)."""

import numpy as np

from ..ir.passes import fold_base_score
from ..ir.transforms import apply_post_transform
from ..ir.tree_ensemble import TreeEnsemble

__all__ = ["CpuRoute"]


class CpuRoute:
    """Callable ``X (n, n_features) of dtype -> (raw, transformed)``, float64.

    A subclass calls ``self._prepare(ens, dtype)`` first in its ``__init__`` (it returns
    the ensemble with the base score folded in, which the subclass lays out) and
    implements ``_tree_sums(X)``: the (n, n_outputs) float64 sums of the trees in order,
    from 0, for rows already in the route's dtype."""

    def _prepare(self, ens: TreeEnsemble, dtype: str) -> TreeEnsemble:
        ens = fold_base_score(ens)
        self.dtype = np.dtype(dtype)
        # A float64 route of a model that compares in float32 rounds the rows first.
        self.round_to_float32 = dtype == "float64" and ens.input_precision == "float32"
        self.n_trees = int(ens.n_trees)
        self.mean = ens.aggregation == "mean"
        self.base_score = ens.base_score.copy()
        self.add_base = bool(np.any(self.base_score))
        self.post_transform = ens.post_transform
        self.post_transform_scale = ens.post_transform_scale
        return ens

    def _tree_sums(self, X: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def raw(self, X: np.ndarray) -> np.ndarray:
        if self.round_to_float32:
            X = X.astype(np.float32)
        sums = self._tree_sums(np.ascontiguousarray(X, dtype=self.dtype))
        # In place: the sums are this call's own array (one allocation fewer per step).
        if self.mean:
            sums /= self.n_trees
        if self.add_base:
            sums += self.base_score
        return sums

    def __call__(self, X: np.ndarray):
        raw = self.raw(X)
        return raw, apply_post_transform(self.post_transform, raw, self.post_transform_scale)
