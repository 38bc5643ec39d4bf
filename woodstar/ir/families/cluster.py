"""Clustering and mixture models: nearest centres, the bisecting tree, Gaussian mixtures.

* ``NearestCenters`` (kind ``nearest_centers``): the index of the nearest centre, and
  optionally the euclidean distance to every centre (``transform``). ``rule`` says how
  scikit-learn finds the nearest one:

  - ``"lloyd"`` (KMeans, MiniBatchKMeans: ``_labels_inertia``): in the centres' dtype,
    ``|c|^2 + -2 x.c`` (one GEMM, the row's own norm left out), first minimum;
  - ``"argkmin"`` (MeanShift, NearestCentroid with the euclidean metric:
    ``pairwise_distances_argmin``): in float64, ``(|x|^2 + -2 x.c) + |c|^2``, first
    minimum;
  - ``"manhattan"`` (NearestCentroid with the manhattan metric): ``sum |x - c|``
    feature after feature, first minimum.

  The transform is ``euclidean_distances(X, centers)``: float64 as
  ``sqrt(max(-2 x.c + |x|^2 + |c|^2, 0))``, or, when both the input and the centres
  are float32, the same in float64 rounded to float32 before ``max`` and ``sqrt``.
  Outputs: raw = the transform (or the label), transformed = [transform | label].

* ``BisectingCenters`` (kind ``bisecting_kmeans``): BisectingKMeans's tree; every inner
  node sends a row left or right by the lloyd rule between its two children's centres
  (``center + _X_mean``, as scikit-learn adds them); leaves hold the labels.

* ``GaussianMixtureScores`` (kind ``gaussian_mixture``): GaussianMixture's and
  BayesianGaussianMixture's weighted log-probabilities for every covariance type,
  with scikit-learn's own expressions in the input's dtype, then ``_logsumexp``.
  Outputs: raw = the weighted log-probabilities, transformed = [predict_proba | label |
  score_samples].
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op
from .neighbors import row_norms

__all__ = ["NearestCenters", "BisectingCenters", "GaussianMixtureScores", "CENTER_RULES",
           "COVARIANCE_TYPES", "logsumexp_rows", "lloyd_labels", "euclidean_distances"]

CENTER_RULES = ("lloyd", "argkmin", "manhattan")
COVARIANCE_TYPES = ("full", "tied", "diag", "spherical")
_FLOATS = (np.float32, np.float64)


def lloyd_labels(X, centers):
    """scikit-learn's ``lloyd_iter_chunked_dense`` labels (X already in the centres' dtype)."""
    pairwise = row_norms(centers)[None, :] + (-2.0 * (X @ centers.T)).astype(centers.dtype)
    return np.argmin(pairwise, axis=1)


def euclidean_distances(X, centers):
    """scikit-learn's ``euclidean_distances(X, centers)``."""
    if X.dtype == np.float32 and centers.dtype == np.float32:
        X64, C64 = X.astype(np.float64), centers.astype(np.float64)
        d = -2 * (X64 @ C64.T)
        d += row_norms(X64)[:, None]
        d += row_norms(C64)[None, :]
        distances = d.astype(np.float32)
    else:
        X64, C64 = X.astype(np.float64, copy=False), centers.astype(np.float64, copy=False)
        distances = -2 * (X64 @ C64.T)
        distances += row_norms(X64)[:, None]
        distances += row_norms(C64)[None, :]
    np.maximum(distances, 0, out=distances)
    return np.sqrt(distances, out=distances)


def argkmin_labels(X, centers):
    X = X.astype(np.float64, copy=False)
    d = (row_norms(X)[:, None] + -2.0 * (X @ centers.T)) + row_norms(centers)[None, :]
    return np.argmin(np.maximum(0.0, d), axis=1)


def manhattan_labels(X, centers):
    X = X.astype(np.float64, copy=False)
    acc = np.abs(X[:, 0, None] - centers[None, :, 0])
    for j in range(1, X.shape[1]):
        acc += np.abs(X[:, j, None] - centers[None, :, j])
    return np.argmin(acc, axis=1)


def _check_centers(op, centers, what="centers"):
    op.expect(centers.ndim == 2 and centers.dtype in _FLOATS and len(centers) >= 1,
              f"{what} must be a float32 or float64 (n_centers, n_features) matrix")
    op.expect(np.isfinite(centers).all(), f"{what} hold non-finite values")


@register_op
@dataclass(frozen=True, eq=False)
class NearestCenters(Op):
    kind = "nearest_centers"

    centers: np.ndarray
    rule: str = "lloyd"
    with_transform: bool = False

    @property
    def n_features(self):
        return int(self.centers.shape[1])

    @property
    def n_centers(self):
        return int(self.centers.shape[0])

    def validate(self):
        _check_centers(self, self.centers)
        self.expect(self.rule in CENTER_RULES, f"rule {self.rule!r} not in {CENTER_RULES}")
        self.expect(self.rule == "lloyd" or self.centers.dtype == np.float64,
                    f"the {self.rule} rule computes in float64; centers must be float64")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        k = self.n_centers if self.with_transform else 0
        return [ValueType.floats(k or 1), ValueType.floats(k + 1)]

    def output_dtypes(self, input_dtypes):
        both32 = np.dtype(input_dtypes[0]) == np.float32 and self.centers.dtype == np.float32
        dtype = np.dtype(np.float32 if both32 else np.float64)
        return [dtype, dtype]

    def labels(self, X):
        if self.rule == "lloyd":
            return lloyd_labels(X.astype(self.centers.dtype, copy=False), self.centers)
        if self.rule == "argkmin":
            return argkmin_labels(X, self.centers)
        return manhattan_labels(X, self.centers)

    def reference(self, inputs):
        (X,) = inputs
        dtype = self.output_dtypes([X.dtype])[0]
        label = self.labels(X).astype(dtype)[:, None]
        if not self.with_transform:
            return [label, label]
        distances = euclidean_distances(X, self.centers).astype(dtype, copy=False)
        return [distances, np.hstack([distances, label])]

    def to_saved(self):
        return ({"rule": self.rule, "with_transform": bool(self.with_transform)},
                {"centers": self.centers})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(centers=arrays["centers"], rule=str(meta["rule"]),
                   with_transform=bool(meta["with_transform"]))


@register_op
@dataclass(frozen=True, eq=False)
class BisectingCenters(Op):
    """``children`` (n_nodes, 2) int64 (-1 at leaves), ``pair_centers`` (n_nodes, 2, F)
    the children's centres as scikit-learn compares them (zeros at leaves),
    ``leaf_label`` (n_nodes,) int64 (-1 at inner nodes), node 0 the root; ``centers``
    (``cluster_centers_``) for the transform."""

    kind = "bisecting_kmeans"

    children: np.ndarray
    pair_centers: np.ndarray
    leaf_label: np.ndarray
    centers: np.ndarray

    @property
    def n_features(self):
        return int(self.centers.shape[1])

    @property
    def n_centers(self):
        return int(self.centers.shape[0])

    @property
    def depth(self):
        depth = np.zeros(len(self.children), dtype=np.int64)
        for node in range(len(self.children)):  # parents come before their children
            for child in self.children[node]:
                if child >= 0:
                    depth[child] = depth[node] + 1
        return int(depth.max())

    def validate(self):
        _check_centers(self, self.centers)
        n = len(self.children)
        self.expect(self.children.shape == (n, 2) and self.leaf_label.shape == (n,)
                    and self.pair_centers.shape == (n, 2, self.n_features)
                    and self.pair_centers.dtype == self.centers.dtype,
                    "children (n, 2), leaf_label (n,), pair_centers (n, 2, F) in the centres' dtype")
        inner = self.children[:, 0] >= 0
        self.expect(((self.children[:, 1] >= 0) == inner).all(), "a node has one child")
        self.expect((self.leaf_label[~inner] >= 0).all() and (self.leaf_label[inner] == -1).all(),
                    "leaves need labels; inner nodes none")
        for node in np.flatnonzero(inner):
            self.expect((self.children[node] > node).all() and (self.children[node] < n).all(),
                        f"node {node}: children {self.children[node].tolist()} must come after it")
        self.expect(sorted(self.leaf_label[~inner].tolist()) == list(range(self.n_centers)),
                    "leaf labels must be 0..n_clusters-1")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_centers), ValueType.floats(self.n_centers + 1)]

    def output_dtypes(self, input_dtypes):
        both32 = np.dtype(input_dtypes[0]) == np.float32 and self.centers.dtype == np.float32
        dtype = np.dtype(np.float32 if both32 else np.float64)
        return [dtype, dtype]

    def labels(self, X):
        Xc = X.astype(self.centers.dtype, copy=False)
        node = np.zeros(len(X), dtype=np.int64)
        for _ in range(self.depth):
            for inner in np.flatnonzero(self.children[:, 0] >= 0):
                rows = np.flatnonzero(node == inner)
                if len(rows):
                    side = lloyd_labels(Xc[rows], self.pair_centers[inner])
                    node[rows] = self.children[inner, side]
        return self.leaf_label[node]

    def reference(self, inputs):
        (X,) = inputs
        dtype = self.output_dtypes([X.dtype])[0]
        distances = euclidean_distances(X, self.centers).astype(dtype, copy=False)
        label = self.labels(X).astype(dtype)[:, None]
        return [distances, np.hstack([distances, label])]

    def to_saved(self):
        return ({}, {"children": self.children, "pair_centers": self.pair_centers,
                     "leaf_label": self.leaf_label, "centers": self.centers})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(children=arrays["children"], pair_centers=arrays["pair_centers"],
                   leaf_label=arrays["leaf_label"], centers=arrays["centers"])


def logsumexp_rows(array):
    """scikit-learn's ``_logsumexp(array, axis=1)`` (sklearn/utils/_array_api.py) in NumPy."""
    array_max = np.max(array, axis=1, keepdims=True)
    index_max = array == array_max
    array = np.array(array, copy=True)
    array[index_max] = -np.inf
    m = np.sum(index_max.astype(array.dtype), axis=1, keepdims=True, dtype=array.dtype)
    shift = np.where(np.isfinite(array_max), array_max, 0)
    exp = np.exp(array - shift)
    s = np.sum(exp, axis=1, keepdims=True, dtype=exp.dtype)
    with np.errstate(divide="ignore", invalid="ignore"):
        s = np.where(s == 0, s, s / m)
    out = np.log1p(s) + np.log(m) + array_max
    return np.squeeze(out, axis=1)


@register_op
@dataclass(frozen=True, eq=False)
class GaussianMixtureScores(Op):
    """``means`` (K, F), ``precisions_chol`` (as scikit-learn stores it for the
    covariance type), ``log_det`` (K,) (``_compute_log_det_cholesky``),
    ``log_weights`` (K,) (``_estimate_log_weights()``), and for the Bayesian mixture
    ``log_gauss_sub`` (``0.5 * n_features * log(degrees_of_freedom_)``) and
    ``log_gauss_add`` (``0.5 * (log_lambda - n_features / mean_precision_)``), applied
    in that order as scikit-learn does (empty arrays otherwise)."""

    kind = "gaussian_mixture"

    means: np.ndarray
    precisions_chol: np.ndarray
    covariance_type: str
    log_det: np.ndarray
    log_weights: np.ndarray
    log_gauss_sub: np.ndarray
    log_gauss_add: np.ndarray

    @property
    def n_features(self):
        return int(self.means.shape[1])

    @property
    def n_components(self):
        return int(self.means.shape[0])

    @property
    def bayesian(self):
        return self.log_gauss_sub.size > 0

    def validate(self):
        k, f = self.means.shape
        self.expect(self.covariance_type in COVARIANCE_TYPES,
                    f"covariance_type {self.covariance_type!r} not in {COVARIANCE_TYPES}")
        shape = {"full": (k, f, f), "tied": (f, f), "diag": (k, f), "spherical": (k,)}
        self.expect(self.precisions_chol.shape == shape[self.covariance_type],
                    f"precisions_chol has shape {self.precisions_chol.shape}; a "
                    f"{self.covariance_type} mixture holds {shape[self.covariance_type]}")
        for name in ("means", "precisions_chol", "log_det", "log_weights", "log_gauss_sub",
                     "log_gauss_add"):
            array = getattr(self, name)
            self.expect(array.dtype in _FLOATS, f"{name} must be float32 or float64")
        for name in ("log_det", "log_weights"):
            self.expect(getattr(self, name).shape == (k,), f"{name} must have {k} values")
        self.expect(self.log_gauss_sub.shape == self.log_gauss_add.shape
                    and self.log_gauss_sub.shape in ((0,), (k,)),
                    "log_gauss_sub and log_gauss_add: both empty or both one per component")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        k = self.n_components
        return [ValueType.floats(k), ValueType.floats(k + 2)]

    def output_dtypes(self, input_dtypes):
        dtype = np.result_type(np.dtype(input_dtypes[0]), self.means.dtype,
                               self.precisions_chol.dtype, self.log_det.dtype,
                               self.log_weights.dtype, self.log_gauss_add.dtype)
        return [dtype, dtype]

    def log_gaussian(self, X):
        """``_estimate_log_gaussian_prob``, as scikit-learn writes it."""
        n_samples, n_features = X.shape
        means, precisions_chol = self.means, self.precisions_chol
        if self.covariance_type in ("full", "tied"):
            log_prob = np.empty((n_samples, self.n_components), dtype=X.dtype)
            for k in range(self.n_components):
                mu = means[k, :]
                prec_chol = precisions_chol[k] if self.covariance_type == "full" else precisions_chol
                y = (X @ prec_chol) - (mu @ prec_chol)
                log_prob[:, k] = np.sum(np.square(y), axis=1)
        elif self.covariance_type == "diag":
            precisions = precisions_chol**2
            log_prob = (np.sum((means**2 * precisions), axis=1)
                        - 2.0 * (X @ (means * precisions).T)
                        + (X**2 @ precisions.T))
        else:
            precisions = precisions_chol**2
            log_prob = (np.sum(means**2, axis=1) * precisions
                        - 2 * (X @ means.T * precisions)
                        + np.outer(row_norms(X), precisions))
        return -0.5 * (n_features * math.log(2 * math.pi) + log_prob) + self.log_det

    def weighted_log_prob(self, X):
        log_prob = self.log_gaussian(X)
        if self.bayesian:
            log_prob = log_prob - self.log_gauss_sub
            log_prob = log_prob + self.log_gauss_add
        return log_prob + self.log_weights

    def reference(self, inputs):
        (X,) = inputs
        weighted = self.weighted_log_prob(X)
        norm = logsumexp_rows(weighted)
        with np.errstate(under="ignore"):
            log_resp = weighted - norm[:, np.newaxis]
        proba = np.exp(log_resp)
        label = np.argmax(weighted, axis=1).astype(weighted.dtype)
        return [weighted, np.hstack([proba, label[:, None], norm[:, None]])]

    def to_saved(self):
        return ({"covariance_type": self.covariance_type},
                {name: getattr(self, name) for name in
                 ("means", "precisions_chol", "log_det", "log_weights", "log_gauss_sub",
                  "log_gauss_add")})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(covariance_type=str(meta["covariance_type"]), **arrays)
