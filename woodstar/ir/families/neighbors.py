"""Nearest-neighbour models: the training set, a distance matrix, then the k nearest.

``KNeighbors`` (kind ``k_neighbors``) holds scikit-learn's fitted rows (``_fit_X``) and
their targets. For each query row it computes the distance to every training row as
scikit-learn's search does, keeps the ``n_neighbors`` nearest, and then repeats the
estimator's own NumPy code on them (``predict``'s mode or weighted mode,
``predict_proba``'s vote, the regressor's mean or weighted mean).

Distances (``formula``):

* ``"direct"``: what the KD tree, the ball tree and the brute-force search with a
  non-euclidean metric compute: the reduced distance summed feature after feature in
  float64 (``d*d``, ``|d|``, ``max |d|``, ``|d|**p``), then the distance from it
  (``sqrt``, ``**(1/p)``);
* ``"gemm"``: the brute-force euclidean search (scikit-learn's ``ArgKmin``):
  ``max(0, (|x|^2 + -2 x.t) + |t|^2)``, then ``sqrt``;
* ``"cosine"``: ``1 - x.t / (|x| |t|)`` clipped to [0, 2] (``cosine_distances``).

Ties at the k-th distance. scikit-learn keeps the rows its search leaves in a
fixed-size max-heap (``sklearn.utils._heap.heap_push``, scikit-learn 1.9): a candidate
is pushed only when strictly below the heap's largest value, and then replaces the
root, which is whichever of the tied largest values the heap's layout put there. So
the rows kept, and the order its final sort (an introsort, not stable) leaves tied
rows in, depend on the order the candidates are pushed in:

* brute force (``ArgKmin``): training-index order ("parallel on X": more queries than
  training rows, more than ``4 * 256 * threads`` queries, or a classifier with uniform
  weights and a non-euclidean metric), else "parallel on Y": each thread fills its
  own heaps from a static share of the 256-row training chunks, then those are pushed
  into one heap thread after thread; the thread count is that of the calling process;
* KD tree and ball tree: the order the depth-first search visits the leaves (by their
  lower distance bound, nearer child first) and the tree's permutation of the rows
  within a leaf;
* the cosine metric's brute force: NumPy's ``argpartition``, then ``argsort``.

The CPU route replays each of these (woodstar/runtimes/families/neighbors.py, which
also says where the caller's input, not the model, decides scikit-learn's search;
``search`` names scikit-learn's search and ``tree_*`` hold the fitted tree), so its
answers are scikit-learn's on tied rows too. The reference here, and the traced
programs (woodstar/lowering/families/neighbors.py), keep the lower training index
among rows at the same distance instead: replaying a heap takes ``n_train``
sequential pushes per query, thousands of operations in a traced program. With three
features taking five integer values and k from 2 to 7 (ties everywhere), about one
query in eight keeps other rows than brute force does and two in three other rows
than the trees do; the neighbours' distances are the same either way.

``RadiusNeighbors`` (kind ``radius_neighbors``): every training row whose reduced
distance is ``<=`` the reduced radius (``r**2`` for euclidean, ``r**p`` for Minkowski,
as scikit-learn's searches compare), a mask over the training set; then the
estimator's own per-row NumPy code over those rows in training-index order.

``NearestCentroid`` predicts with a ``nearest_centers`` op (woodstar/ir/families/cluster.py);
its discriminant scores (``decision_function``, ``predict_proba``, ``predict_log_proba``)
are a ``centroid_discriminant`` op.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["KNeighbors", "RadiusNeighbors", "CentroidDiscriminant", "KNN_METRICS", "KNN_FORMULAS", "reduced_distances",
           "distances_from_reduced", "gemm_squared_distances", "row_norms"]

KNN_METRICS = ("euclidean", "manhattan", "chebyshev", "minkowski", "cosine")
KNN_FORMULAS = ("direct", "gemm", "cosine")
KNN_MODES = ("classifier", "regressor")
WEIGHTS = ("uniform", "distance")
KNN_SEARCHES = ("", "brute", "kd_tree", "ball_tree")
_TREE_ARRAYS = ("tree_index", "tree_nodes", "tree_radius", "tree_bounds")
_CHUNK_ELEMENTS = 1 << 22  # query rows x training rows per block of the reference


def row_norms(X):
    """scikit-learn's ``row_norms(X, squared=True)``."""
    return np.einsum("ij,ij->i", X, X)


def reduced_distances(X, T, metric, p):
    """(n, m) reduced distances, summed feature after feature in float64, as
    scikit-learn's DistanceMetric.rdist loops do."""
    X = np.asarray(X, dtype=np.float64)
    acc = None
    for j in range(X.shape[1]):
        d = X[:, j, None] - T[None, :, j]
        if metric == "euclidean":
            term = d * d
        elif metric == "minkowski":
            term = np.abs(d) ** p
        else:
            term = np.abs(d)
        if acc is None:
            acc = term
        elif metric == "chebyshev":
            acc = np.maximum(acc, term)
        else:
            acc += term
    return acc


def distances_from_reduced(rdist, metric, p):
    if metric == "euclidean":
        return np.sqrt(rdist)
    if metric == "minkowski":
        return rdist ** (1.0 / p)
    return rdist


def dot_norms(X):
    """Squared row norms as BLAS ``ddot`` sums them (scikit-learn's ArgKmin takes them
    from ``ddot``; a 1 x F by F x 1 product runs the same kernel). The order matters:
    a query equal to a training row then cancels to exactly 0, as in scikit-learn."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    return np.matmul(X[:, None, :], X[:, :, None])[:, 0, 0]


def gemm_squared_distances(X, T, T_norms):
    """scikit-learn's ArgKmin (euclidean): ``max(0, (|x|^2 + -2 x.t) + |t|^2)`` in float64."""
    X = np.asarray(X, dtype=np.float64)
    middle = -2.0 * (X @ T.T)
    return np.maximum(0.0, (dot_norms(X)[:, None] + middle) + T_norms[None, :])


def cosine_distances(X, T_normalized):
    """scikit-learn's ``cosine_distances`` (the training rows already normalised)."""
    X = np.asarray(X, dtype=np.float64)
    norms = np.sqrt(row_norms(X))
    norms[norms == 0.0] = 1.0
    S = (X / norms[:, None]) @ T_normalized.T
    S *= -1
    S += 1
    np.clip(S, 0, 2, out=S)
    return S


def normalized_rows(T):
    norms = np.sqrt(row_norms(T))
    norms[norms == 0.0] = 1.0
    return T / norms[:, None]


@register_op
@dataclass(frozen=True, eq=False)
class KNeighbors(Op):
    """k nearest training rows, then the estimator's vote or mean.

    ``fit_X`` (m, F) float64; classifier: ``y`` (m,) int64 class indices and
    ``n_classes``; regressor: ``y`` (m, n_outputs) float64.

    Outputs: classifier: raw = predict_proba (n, C), transformed = [proba | label
    index]; regressor: raw = transformed = the prediction (n, n_outputs)."""

    kind = "k_neighbors"

    fit_X: np.ndarray
    y: np.ndarray
    n_neighbors: int
    metric: str = "euclidean"
    p: float = 2.0
    formula: str = "direct"
    weights: str = "uniform"
    mode: str = "classifier"
    n_classes: int = 0
    search: str = ""  # scikit-learn's _fit_method ("": not recorded, saved before)
    # the fitted KD or ball tree (read by the CPU route's replay of its query; None:
    # not recorded): idx_array; node_data's (idx_start, idx_end, is_leaf) and radius;
    # node_bounds ((2, nodes, F) lower and upper bounds, or (1, nodes, F) centroids)
    tree_index: np.ndarray | None = None
    tree_nodes: np.ndarray | None = None
    tree_radius: np.ndarray | None = None
    tree_bounds: np.ndarray | None = None

    @property
    def n_features(self) -> int:
        return int(self.fit_X.shape[1])

    @property
    def n_train(self) -> int:
        return int(self.fit_X.shape[0])

    @property
    def n_outputs(self) -> int:
        return self.n_classes if self.mode == "classifier" else int(self.y.shape[1])

    def validate(self):
        self.expect(self.fit_X.ndim == 2 and self.fit_X.dtype == np.float64,
                    "fit_X must be a float64 matrix")
        self.expect(np.isfinite(self.fit_X).all(), "fit_X holds non-finite values")
        self.expect(self.metric in KNN_METRICS, f"metric {self.metric!r} not in {KNN_METRICS}")
        self.expect(self.formula in KNN_FORMULAS, f"formula {self.formula!r} not in {KNN_FORMULAS}")
        self.expect(self.weights in WEIGHTS, f"weights {self.weights!r} not in {WEIGHTS}")
        self.expect(self.mode in KNN_MODES, f"mode {self.mode!r} not in {KNN_MODES}")
        self.expect(self.search in KNN_SEARCHES, f"search {self.search!r} not in {KNN_SEARCHES}")
        if self.tree_index is not None:
            self._validate_tree()
        self.expect(1 <= self.n_neighbors <= self.n_train,
                    f"n_neighbors {self.n_neighbors} not in [1, {self.n_train}]")
        self.expect(len(self.y) == self.n_train, f"{len(self.y)} targets for {self.n_train} rows")
        if self.mode == "classifier":
            self.expect(self.y.ndim == 1 and self.y.dtype == np.int64 and self.n_classes >= 1
                        and (self.y >= 0).all() and (self.y < self.n_classes).all(),
                        "classifier targets must be int64 class indices below n_classes")
        else:
            self.expect(self.y.ndim == 2 and self.y.dtype == np.float64,
                        "regressor targets must be a float64 (rows, outputs) matrix")
        return self

    def _validate_tree(self):
        self.expect(self.search in ("kd_tree", "ball_tree"), "tree arrays without a tree search")
        n_nodes = len(self.tree_nodes) if self.tree_nodes is not None else -1
        self.expect(self.tree_index.dtype == np.int64 and np.array_equal(
            np.sort(self.tree_index), np.arange(self.n_train)),
            "tree_index must be an int64 permutation of the training rows")
        self.expect(n_nodes >= 1 and self.tree_nodes.dtype == np.int64
                    and self.tree_nodes.shape == (n_nodes, 3), "tree_nodes must be int64 (nodes, 3)")
        starts, ends, leaf = self.tree_nodes.T
        self.expect(((0 <= starts) & (starts <= ends) & (ends <= self.n_train)).all()
                    and np.isin(leaf, (0, 1)).all()
                    and (2 * np.flatnonzero(leaf == 0) + 2 < n_nodes).all(),
                    "tree_nodes: row ranges outside the training set or children missing")
        width = 2 if self.search == "kd_tree" else 1
        self.expect(self.tree_radius is not None and self.tree_radius.shape == (n_nodes,)
                    and self.tree_radius.dtype == np.float64, "tree_radius must be float64 (nodes,)")
        self.expect(self.tree_bounds is not None and self.tree_bounds.dtype == np.float64
                    and self.tree_bounds.shape == (width, n_nodes, self.n_features),
                    f"tree_bounds must be float64 ({width}, nodes, features)")

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        if self.mode == "classifier":
            return [ValueType.floats(self.n_classes), ValueType.floats(self.n_classes + 1)]
        return [ValueType.floats(self.n_outputs), ValueType.floats(self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64), np.dtype(np.float64)]

    # ------------------------------------------------------------- reference
    def reduced(self, X):
        """(n, m) reduced distances to every training row, as the search computes them."""
        if self.formula == "gemm":
            return gemm_squared_distances(X, self.fit_X, dot_norms(self.fit_X))
        if self.formula == "cosine":
            return cosine_distances(X, normalized_rows(self.fit_X))
        return reduced_distances(X, self.fit_X, self.metric, self.p)

    def distances(self, chosen):
        """The distances of the neighbours from their reduced distances."""
        if self.formula == "cosine":
            return chosen
        metric = "euclidean" if self.formula == "gemm" else self.metric
        return distances_from_reduced(chosen, metric, self.p)

    def neighbours(self, X):
        """(indices, distances) of the k nearest rows, (n, k) each, nearest first; among
        tied rows the lower training index first (the rule of the traced programs)."""
        rdist = self.reduced(X)
        index = np.argsort(rdist, axis=1, kind="stable")[:, :self.n_neighbors]
        return index, self.distances(np.take_along_axis(rdist, index, axis=1))

    def _weights(self, dist):
        """scikit-learn's ``_get_weights``."""
        if self.weights == "uniform":
            return None
        with np.errstate(divide="ignore"):
            dist = 1.0 / dist
        inf_mask = np.isinf(dist)
        inf_row = np.any(inf_mask, axis=1)
        dist[inf_row] = inf_mask[inf_row]
        return dist

    def _predict_block(self, X):
        return self.predict_from(*self.neighbours(X))

    def predict_from(self, index, dist):
        """The estimator's outputs from the neighbours' (n, k) indices and distances, in
        the order the search returned them (the order of the mean's and votes' sums)."""
        weights = self._weights(dist)
        n = index.shape[0]
        if self.mode == "regressor":
            _y = self.y
            if weights is None:
                value = np.mean(_y[index], axis=1)
            else:
                value = np.empty((n, _y.shape[1]), dtype=np.float64)
                denom = np.sum(weights, axis=1)
                for j in range(_y.shape[1]):
                    num = np.sum(_y[index, j] * weights, axis=1)
                    value[:, j] = num / denom
            return value, value
        labels = self.y[index]  # (n, k) class indices
        all_rows = np.arange(n)
        vote = np.ones_like(index) if weights is None else weights
        proba = np.zeros((n, self.n_classes))
        for i, idx in enumerate(labels.T):
            proba[all_rows, idx] += vote[:, i]
        normalizer = proba.sum(axis=1)[:, np.newaxis]
        proba /= normalizer
        if weights is None:  # scipy.stats.mode: the smallest of the most frequent
            label = np.argmax(proba, axis=1)
        else:  # sklearn.utils.extmath.weighted_mode over the classes in order
            counts = np.empty((n, self.n_classes))
            for c in range(self.n_classes):
                template = np.zeros(labels.shape)
                ind = labels == c
                template[ind] = weights[ind]
                counts[:, c] = np.sum(template, axis=1)
            label = np.argmax(counts, axis=1)
        return proba, np.hstack([proba, label[:, None].astype(np.float64)])

    def reference(self, inputs):
        (X,) = inputs
        step = max(1, _CHUNK_ELEMENTS // max(1, self.n_train))
        parts = [self._predict_block(X[s:s + step]) for s in range(0, max(len(X), 1), step)]
        if len(X) == 0:
            width = self.n_classes + 1 if self.mode == "classifier" else self.n_outputs
            return [np.zeros((0, self.n_outputs)), np.zeros((0, width))]
        return [np.vstack([a for a, _ in parts]), np.vstack([b for _, b in parts])]

    def to_saved(self):
        return ({"n_neighbors": int(self.n_neighbors), "metric": self.metric, "p": float(self.p),
                 "formula": self.formula, "weights": self.weights, "mode": self.mode,
                 "n_classes": int(self.n_classes), "search": self.search},
                {"fit_X": self.fit_X, "y": self.y, **{
                    name: getattr(self, name) for name in _TREE_ARRAYS
                    if getattr(self, name) is not None}})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(fit_X=arrays["fit_X"], y=arrays["y"], n_neighbors=int(meta["n_neighbors"]),
                   metric=str(meta["metric"]), p=float(meta["p"]), formula=str(meta["formula"]),
                   weights=str(meta["weights"]), mode=str(meta["mode"]),
                   n_classes=int(meta["n_classes"]), search=str(meta.get("search", "")),
                   **{name: arrays[name] for name in _TREE_ARRAYS if name in arrays})


def _reduced_radius(radius, metric, formula, p):
    """scikit-learn's ``_dist_to_rdist(radius)`` for the search it runs."""
    if formula == "gemm" or (formula == "direct" and metric == "euclidean"):
        return radius * radius
    if formula == "direct" and metric == "minkowski":
        return radius ** p
    return radius


@register_op
@dataclass(frozen=True, eq=False)
class RadiusNeighbors(Op):
    """Training rows within ``radius``, then the estimator's vote or mean.

    Fields as ``KNeighbors``, with ``radius`` instead of ``n_neighbors``;
    ``outlier_index``: a classifier's class index for rows with no neighbour
    (``-1``: none, scikit-learn refuses such a row; the scores are then NaN).

    Outputs: classifier: raw = predict_proba (n, C), transformed = [proba | label
    index]; regressor: raw = transformed = the prediction (NaN with no neighbour)."""

    kind = "radius_neighbors"

    fit_X: np.ndarray
    y: np.ndarray
    radius: float
    metric: str = "euclidean"
    p: float = 2.0
    formula: str = "direct"
    weights: str = "uniform"
    mode: str = "classifier"
    n_classes: int = 0
    outlier_index: int = -1

    n_features = KNeighbors.n_features
    n_train = KNeighbors.n_train
    n_outputs = KNeighbors.n_outputs

    def validate(self):
        self.expect(self.fit_X.ndim == 2 and self.fit_X.dtype == np.float64,
                    "fit_X must be a float64 matrix")
        self.expect(np.isfinite(self.fit_X).all(), "fit_X holds non-finite values")
        self.expect(self.metric in KNN_METRICS, f"metric {self.metric!r} not in {KNN_METRICS}")
        self.expect(self.formula in KNN_FORMULAS, f"formula {self.formula!r} not in {KNN_FORMULAS}")
        self.expect(self.weights in WEIGHTS, f"weights {self.weights!r} not in {WEIGHTS}")
        self.expect(self.mode in KNN_MODES, f"mode {self.mode!r} not in {KNN_MODES}")
        self.expect(np.isfinite(self.radius) and self.radius >= 0, "radius must be finite, >= 0")
        self.expect(len(self.y) == self.n_train, f"{len(self.y)} targets for {self.n_train} rows")
        if self.mode == "classifier":
            self.expect(self.y.ndim == 1 and self.y.dtype == np.int64 and self.n_classes >= 1
                        and (self.y >= 0).all() and (self.y < self.n_classes).all(),
                        "classifier targets must be int64 class indices below n_classes")
            self.expect(-1 <= self.outlier_index < self.n_classes,
                        "outlier_index must be -1 or a class index")
        else:
            self.expect(self.y.ndim == 2 and self.y.dtype == np.float64,
                        "regressor targets must be a float64 (rows, outputs) matrix")
        return self

    output_types = KNeighbors.output_types

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64), np.dtype(np.float64)]

    @property
    def reduced_radius(self):
        return _reduced_radius(float(self.radius), self.metric, self.formula, self.p)

    def reduced(self, X):
        if self.formula == "gemm":
            return gemm_squared_distances(X, self.fit_X, dot_norms(self.fit_X))
        if self.formula == "cosine":
            return cosine_distances(X, normalized_rows(self.fit_X))
        return reduced_distances(X, self.fit_X, self.metric, self.p)

    def _predict_block(self, X):
        rdist = self.reduced(X)
        within = rdist <= self.reduced_radius
        metric = "euclidean" if self.formula == "gemm" else self.metric
        n, width = X.shape[0], self.n_outputs
        out = np.empty((n, width))
        for i in range(n):
            ind = np.flatnonzero(within[i])
            weights = None
            if self.weights == "distance" and len(ind):  # scikit-learn's _get_weights
                dist = rdist[i, ind] if self.formula == "cosine" else \
                    distances_from_reduced(rdist[i, ind], metric, self.p)
                if 0.0 in dist:
                    weights = dist == 0.0
                else:
                    weights = 1.0 / dist
            if self.mode == "regressor":
                if not len(ind):
                    out[i] = np.nan
                elif weights is None:
                    out[i] = np.mean(self.y[ind, :], axis=0)
                else:
                    out[i] = np.average(self.y[ind, :], axis=0, weights=weights)
                continue
            if len(ind):
                out[i] = np.bincount(self.y[ind], weights, minlength=self.n_classes)
            elif self.outlier_index >= 0:
                out[i] = 0.0
                out[i, self.outlier_index] = 1.0
            else:
                out[i] = np.nan
        if self.mode == "regressor":
            return out, out
        normalizer = out.sum(axis=1)[:, np.newaxis]
        normalizer[normalizer == 0.0] = 1.0
        out /= normalizer
        label = np.argmax(np.nan_to_num(out, nan=0.0), axis=1).astype(np.float64)
        return out, np.hstack([out, label[:, None]])

    def reference(self, inputs):
        (X,) = inputs
        if len(X) == 0:
            width = self.n_classes + 1 if self.mode == "classifier" else self.n_outputs
            return [np.zeros((0, self.n_outputs)), np.zeros((0, width))]
        step = max(1, _CHUNK_ELEMENTS // max(1, self.n_train))
        parts = [self._predict_block(X[s:s + step]) for s in range(0, len(X), step)]
        return [np.vstack([a for a, _ in parts]), np.vstack([b for _, b in parts])]

    def to_saved(self):
        return ({"radius": float(self.radius), "metric": self.metric, "p": float(self.p),
                 "formula": self.formula, "weights": self.weights, "mode": self.mode,
                 "n_classes": int(self.n_classes), "outlier_index": int(self.outlier_index)},
                {"fit_X": self.fit_X, "y": self.y})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(fit_X=arrays["fit_X"], y=arrays["y"], radius=float(meta["radius"]),
                   metric=str(meta["metric"]), p=float(meta["p"]), formula=str(meta["formula"]),
                   weights=str(meta["weights"]), mode=str(meta["mode"]),
                   n_classes=int(meta["n_classes"]), outlier_index=int(meta["outlier_index"]))


@register_op
@dataclass(frozen=True, eq=False)
class CentroidDiscriminant(Op):
    """NearestCentroid's discriminant scores (euclidean; ESL eq. 18.2), as scikit-learn's
    ``_decision_function`` computes them: features scaled by ``within_class_std_dev_``
    (where non-zero), ``-d(x, centroid)**2 + 2 log(prior)`` with ``euclidean_distances``
    one class at a time, then DiscriminantAnalysisPredictionMixin's methods.

    Outputs: raw = decision_function (n, 1 for two classes else C); transformed =
    [decision | proba (C) | log_proba (C) | argmax label index (1)]."""

    kind = "centroid_discriminant"

    centroids: np.ndarray  # (C, F) float64
    std: np.ndarray  # (F,) within_class_std_dev_
    prior: np.ndarray  # (C,) class_prior_

    @property
    def n_features(self):
        return int(self.centroids.shape[1])

    @property
    def n_classes(self):
        return int(self.centroids.shape[0])

    @property
    def n_decision(self):
        return 1 if self.n_classes == 2 else self.n_classes

    def validate(self):
        self.expect(self.centroids.ndim == 2 and self.centroids.dtype == np.float64
                    and self.n_classes >= 2, "centroids must be a float64 (C >= 2, F) matrix")
        self.expect(self.std.shape == (self.n_features,) and self.std.dtype == np.float64,
                    "std must be float64, one per feature")
        self.expect(self.prior.shape == (self.n_classes,) and self.prior.dtype == np.float64,
                    "prior must be float64, one per class")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_decision),
                ValueType.floats(self.n_decision + 2 * self.n_classes + 1)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64), np.dtype(np.float64)]

    def scores(self, X):
        X_normalized = np.array(X, dtype=np.float64, copy=True)
        discriminant_score = np.empty((X_normalized.shape[0], self.n_classes), dtype=np.float64)
        mask = self.std != 0
        X_normalized[:, mask] /= self.std[mask]
        centroids_normalized = self.centroids.copy()
        centroids_normalized[:, mask] /= self.std[mask]
        XX = row_norms(X_normalized)[:, None]
        for class_idx in range(self.n_classes):
            Y = centroids_normalized[[class_idx]]
            distances = -2 * (X_normalized @ Y.T)  # sklearn's _euclidean_distances
            distances += XX
            distances += row_norms(Y)[None, :]
            np.maximum(distances, 0, out=distances)
            distances = np.sqrt(distances).ravel()
            distances **= 2
            discriminant_score[:, class_idx] = np.squeeze(
                -distances + 2.0 * np.log(self.prior[class_idx]))
        return discriminant_score

    def reference(self, inputs):
        (X,) = inputs
        scores = self.scores(X)
        decision = scores[:, 1:2] - scores[:, 0:1] if self.n_classes == 2 else scores
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            log_likelihood = scores - scores.max(axis=1)[:, np.newaxis]
            log_proba = log_likelihood - np.log(
                np.exp(log_likelihood).sum(axis=1)[:, np.newaxis])
            proba = np.exp(log_proba)
        label = scores.argmax(axis=1).astype(np.float64)[:, None]
        return [decision, np.hstack([decision, proba, log_proba, label])]

    def to_saved(self):
        return {}, {"centroids": self.centroids, "std": self.std, "prior": self.prior}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(centroids=arrays["centroids"], std=arrays["std"], prior=arrays["prior"])
