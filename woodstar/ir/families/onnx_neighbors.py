"""ONNX-ML ops for skl2onnx's Scan graphs: k nearest neighbours (``onnx_neighbors``:
pairwise distances, TopK, a vote or a mean), kernel PCA's rbf kernel rows
(``onnx_rbf_kernel_rows``) and LocalOutlierFactor (``onnx_outlier_factor``), as ONNX
Runtime computes them. The shared array operations and MLAS's exp are in ``onnx_ops``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op
from .onnx_ops import NumpyMath, mlas_exp_avx512

__all__ = []


# ------------------------------------------------------- k nearest neighbours (Scan)
# skl2onnx's KNeighborsClassifier/Regressor graph: a Scan whose body gives each
# training row's distance to every input row, TopK of the k smallest, the neighbours'
# labels or targets, then a vote or a mean.
NEIGHBOR_METRICS = ("euclidean", "sqeuclidean", "manhattan")
NEIGHBOR_MODES = ("vote", "mean")


def eigen_sse_sum(columns, start):
    """The sum of ``columns`` (one per term, each a column of rows) in the order Eigen's
    vectorized reduction adds a contiguous float32 segment with SSE packets of four
    when its first ``start`` terms precede the first 16-byte boundary: packets from
    that boundary (two accumulators past two packets), the packet's lanes as
    (0 + 2) + (1 + 3), then the leading and trailing terms one by one. Under four
    terms after the boundary: one by one from the first."""
    k = len(columns)
    start = min(start, k)
    aligned = ((k - start) // 4) * 4
    if aligned == 0:
        total = columns[0]
        for column in columns[1:]:
            total = total + column
        return total
    lanes = list(columns[start:start + 4])
    if aligned > 4:
        second = list(columns[start + 4:start + 8])
        aligned2 = ((k - start) // 8) * 8
        for index in range(start + 8, start + aligned2, 8):
            lanes = [a + b for a, b in zip(lanes, columns[index:index + 4])]
            second = [a + b for a, b in zip(second, columns[index + 4:index + 8])]
        lanes = [a + b for a, b in zip(lanes, second)]
        if aligned > aligned2:
            lanes = [a + b for a, b in zip(lanes, columns[start + aligned2:start + aligned2 + 4])]
    total = (lanes[0] + lanes[2]) + (lanes[1] + lanes[3])
    for column in list(columns[:start]) + list(columns[start + aligned:]):
        total = total + column
    return total


def row_sums(math, columns, row_start):
    """ONNX Runtime's ReduceSum over the last axis of an (n, len(columns)) float32
    tensor (Eigen's ``colwise().sum()`` of each contiguous row): row i begins
    ``i * len(columns)`` floats past a 64-byte aligned buffer, so its first
    ``(-i * len(columns)) % 4`` terms precede a packet boundary. ``row_start`` gives
    that count per row (``math.row_starts``); each possible count's order is computed
    and the row's own is kept."""
    k = len(columns)
    starts = sorted({(-i * k) % 4 for i in range(4)})
    if k < 4 or starts == [0]:
        return eigen_sse_sum(columns, 0)
    out = eigen_sse_sum(columns, starts[0])
    for start in starts[1:]:
        out = math.where(row_start == start, eigen_sse_sum(columns, start), out)
    return out


def neighbor_distances(op, X, train_columns, math=NumpyMath):
    """(n, n_train) float32 distances as the Scan body computes them: ``x - t`` per
    feature, then ReduceSumSquare (term after term: its lambda does not vectorize;
    Sqrt after it for ``euclidean``) or Abs and ReduceSum (``row_sums``, an input
    row's terms at stride n_features)."""
    X = math.cast(X, "float32")
    differences = [math.column(X, f)[:, None] - train_columns[f] for f in range(op.n_features)]
    if op.metric == "manhattan":
        starts = math.row_starts(X, op.n_features)[:, None]
        return row_sums(math, [math.abs(d) for d in differences], starts)
    total = differences[0] * differences[0]
    for d in differences[1:]:
        total = total + d * d
    return math.sqrt(total) if op.metric == "euclidean" else total


def neighbor_outputs(op, X, arrays, math=NumpyMath):
    """The graph's answer per row: TopK of the k smallest distances (ties and NaN as
    ONNX Runtime's kernel orders them: by value, NaN last, then by index), the
    neighbours' targets, then

    * ``vote``: per class (in the graph's Concat order), the ReduceSum over the k
      neighbours of ``label == class`` (times the weight ``1 / max(d * weight_scale,
      weight_floor)`` when weighted; both ReduceSums in ``row_sums`` order), the
      probabilities ``score / ReduceSum(scores)`` and the first largest score's index
      (NaN never larger), as (n, classes + 1);
    * ``mean``: ReduceMean (``row_sums`` then ``/ k``), or, weighted,
      ``ReduceSum(y * w) / ReduceSum(w)``, as (n, 1)."""
    distances = neighbor_distances(op, X, arrays["train_columns"], math)
    if op.radius:
        # the radius graph: every training row, in index order (ONNX Runtime answers
        # only rows whose training rows all lie within the radius; ``rejected``)
        values, order = distances, math.index_order(distances)
    else:
        values, order = math.smallest(distances, op.k)
    starts = math.row_starts(X, op.k)
    targets = math.take_targets(arrays["targets"], order)  # (n, k) float32
    flag = [math.rejected(distances, op.radius)] if op.radius else []
    values = [math.column(values, j) for j in range(op.k)]
    targets = [math.column(targets, j) for j in range(op.k)]
    weights = None
    if op.weighted:
        weights = [1.0 / math.maximum(v * math.scalar32(op.weight_scale, v),
                                      math.scalar32(op.weight_floor, v)) for v in values]
    if op.mode == "mean":
        if weights is None:
            return math.stack([row_sums(math, targets, starts) / math.scalar32(op.k, targets[0])]
                              + flag)
        num = row_sums(math, [t * w for t, w in zip(targets, weights)], starts)
        return math.stack([num / row_sums(math, weights, starts)] + flag)
    scores = []
    for code in op.codes.tolist():
        hits = [math.cast(t == code, "float32") for t in targets]
        if weights is not None:
            hits = [h * w for h, w in zip(hits, weights)]
        scores.append(row_sums(math, hits, starts))
    total = row_sums(math, scores, math.row_starts(X, len(scores)))
    best, index = scores[0], math.scalar32(0.0, scores[0])
    for j, score in enumerate(scores[1:], start=1):
        larger = score > best
        best = math.where(larger, score, best)
        index = math.where(larger, math.scalar32(float(j), score), index)
    return math.stack([s / total for s in scores] + [index] + flag)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxNeighbors(Op):
    """skl2onnx's k-nearest-neighbours graph (Scan of pairwise distances, TopK, vote or
    mean) as ONNX Runtime computes it (``neighbor_outputs``). ``train`` holds the
    training rows (float32), ``targets`` each row's target (a class code, or a
    regressor's float32 value), ``codes`` the class codes in the graph's score order
    (a classifier). Output: a classifier's probabilities then its label's index, or a
    regressor's value. ``radius`` (> 0): skl2onnx's radius-neighbours graph, whose
    neighbours are every training row (k of them) in index order, with one more column:
    NaN where ONNX Runtime rejects the row (a training row not within the radius, which
    its ArrayFeatureExtractor is given as index -1), else 0."""

    kind = "onnx_neighbors"

    train: np.ndarray
    targets: np.ndarray
    k: int
    metric: str = "euclidean"
    mode: str = "vote"
    codes: np.ndarray = None
    weighted: bool = False
    weight_scale: float = 1.0
    weight_floor: float = 0.0
    radius: float = 0.0

    def __post_init__(self):
        train = np.ascontiguousarray(self.train, dtype=np.float32)
        targets = np.ascontiguousarray(self.targets, dtype=np.float32).reshape(-1)
        codes = np.ascontiguousarray(np.zeros(0) if self.codes is None else self.codes,
                                     dtype=np.float32).reshape(-1)
        for name, value in (("train", train), ("targets", targets), ("codes", codes)):
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "k", int(self.k))
        object.__setattr__(self, "weighted", bool(self.weighted))
        object.__setattr__(self, "weight_scale", float(np.float32(self.weight_scale)))
        object.__setattr__(self, "weight_floor", float(np.float32(self.weight_floor)))
        object.__setattr__(self, "radius", float(np.float32(self.radius)))

    @property
    def n_features(self):
        return self.train.shape[1]

    @property
    def output_width(self):
        width = len(self.codes) + 1 if self.mode == "vote" else 1
        return width + 1 if self.radius else width

    @property
    def whole_call(self):
        """Whether a row's answer depends on its place in the call (``row_sums`` of
        rounded terms over a width that is not a multiple of 4): then a call is never
        split into batches. A plain vote adds 0s and 1s, exact in any order."""
        widths = [self.n_features] if self.metric == "manhattan" else []
        if self.mode == "mean" or self.weighted:
            widths += [self.k] + ([len(self.codes)] if self.mode == "vote" else [])
        return any(w >= 4 and w % 4 for w in widths)

    def validate(self):
        self.expect(self.train.ndim == 2 and self.train.shape[0] >= 1, "train must be a matrix")
        self.expect(np.isfinite(self.train).all(), "train holds NaN or infinite values")
        self.expect(len(self.targets) == self.train.shape[0], "one target per training row")
        self.expect(1 <= self.k <= self.train.shape[0], f"k={self.k} outside 1..n_train")
        self.expect(self.metric in NEIGHBOR_METRICS, f"metric {self.metric!r} not in {NEIGHBOR_METRICS}")
        self.expect(self.mode in NEIGHBOR_MODES, f"mode {self.mode!r} not in {NEIGHBOR_MODES}")
        self.expect(self.mode == "mean" or len(self.codes) >= 1, "a vote needs class codes")
        self.expect(self.radius >= 0 and (not self.radius or self.k == self.train.shape[0]),
                    "a radius graph's k is every training row")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.output_width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        arrays = {"train_columns": [self.train[:, f][None, :] for f in range(self.n_features)],
                  "targets": self.targets}
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [neighbor_outputs(self, inputs[0], arrays, NeighborsNumpyMath)]

    def to_saved(self):
        meta = {"k": self.k, "metric": self.metric, "mode": self.mode, "weighted": self.weighted,
                "weight_scale": self.weight_scale, "weight_floor": self.weight_floor,
                "radius": self.radius}
        return meta, {"train": self.train, "targets": self.targets, "codes": self.codes}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta, **arrays)


class NeighborsNumpyMath(NumpyMath):
    """``NumpyMath`` and the operations ``neighbor_outputs`` adds."""

    @staticmethod
    def row_starts(X, width):
        """Per row i, the terms of an (n, width) float32 row before its first 16-byte
        boundary in a 64-byte aligned buffer: (-i * width) mod 4."""
        return (-np.arange(X.shape[0]) * width) % 4

    @staticmethod
    def smallest(distances, k):
        # a stable sort: ties by index, NaN last (ONNX Runtime's TopK, largest=0)
        order = np.argsort(distances, axis=1, kind="stable")[:, :k]
        return np.take_along_axis(distances, order, axis=1), order

    @staticmethod
    def take_targets(targets, order):
        return targets[order]

    @staticmethod
    def index_order(distances):
        return np.broadcast_to(np.arange(distances.shape[1]), distances.shape)

    @staticmethod
    def rejected(distances, radius):
        """NaN where a row's distances are not all below ``radius`` (NaN included), else 0."""
        inside = (distances < np.float32(radius)).all(axis=1)
        return np.where(inside, np.float32(0.0), np.float32(np.nan))

    @staticmethod
    def maximum(a, b):
        return np.maximum(a, b)  # NaN propagates, as ONNX Runtime's Max

    @staticmethod
    def scalar32(value, like):
        return np.float32(value)


__all__ += ["OnnxNeighbors", "neighbor_outputs", "neighbor_distances", "row_sums",
            "eigen_sse_sum", "NeighborsNumpyMath"]


# ------------------------------------------------ kernel PCA's rbf kernel rows (Scan)
def rbf_kernel_rows(op, X, arrays, math=NumpyMath):
    """skl2onnx's KernelPCA (rbf) graph up to its MatMul, as ONNX Runtime computes it:
    the Scan's squared distances (``neighbor_distances``), ``Mul`` by ``scale``
    (-gamma), ``Exp`` (MLAS's kernel: ``mlas_exp_avx512``), then the centring
    ``((K - column_means) - ReduceSum(K) / divisor) + offset`` in float32 (ReduceSum
    over each row in ``row_sums`` order)."""
    distances = neighbor_distances(op, X, arrays["train_columns"], math)
    scaled = distances * math.scalar32(op.scale, distances)
    # exp overflows to +inf from 88.73 on (a negative gamma); above 100 the mirrored
    # scaling by 2^m would leave float32's exponent range, so larger values take 100's
    large = math.scalar32(100.0, scaled)
    scaled = math.where(scaled > large, large, scaled)
    kernel = mlas_exp_avx512(math, scaled.reshape(-1)).reshape(scaled.shape)
    columns = [math.column(kernel, j) for j in range(arrays["column_means"].shape[1])]
    total = row_sums(math, columns, math.row_starts(X, len(columns)))
    row_mean = total / math.scalar32(op.divisor, total)
    centered = (kernel - arrays["column_means"]) - row_mean[:, None]
    return centered + math.scalar32(op.offset, centered)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxRbfKernelRows(Op):
    """The centred rbf kernel between each input row and the training rows, as
    skl2onnx's KernelPCA graph computes it before its MatMul (``rbf_kernel_rows``)."""

    kind = "onnx_rbf_kernel_rows"

    train: np.ndarray
    column_means: np.ndarray
    scale: float
    divisor: float
    offset: float
    metric = "sqeuclidean"

    def __post_init__(self):
        for name in ("train", "column_means"):
            value = np.ascontiguousarray(getattr(self, name), dtype=np.float32)
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        for name in ("scale", "divisor", "offset"):
            object.__setattr__(self, name, float(np.float32(getattr(self, name))))

    @property
    def n_features(self):
        return self.train.shape[1]

    @property
    def whole_call(self):
        """Whether a row's answer depends on its place in the call (``row_sums`` over a
        width that is not a multiple of 4): then a call is never split."""
        n_train = self.train.shape[0]
        return n_train >= 4 and n_train % 4 != 0

    def validate(self):
        self.expect(self.train.ndim == 2 and np.isfinite(self.train).all(),
                    "train must be a finite matrix")
        self.expect(self.column_means.shape == (self.train.shape[0],),
                    "one column mean per training row")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.train.shape[0])]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        arrays = {"train_columns": [self.train[:, f][None, :] for f in range(self.n_features)],
                  "column_means": self.column_means[None, :]}
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [rbf_kernel_rows(self, inputs[0], arrays, NeighborsNumpyMath)]

    def to_saved(self):
        return {"scale": self.scale, "divisor": self.divisor, "offset": self.offset}, \
            {"train": self.train, "column_means": self.column_means}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta, **arrays)


__all__ += ["OnnxRbfKernelRows", "rbf_kernel_rows"]


# ------------------------------------- LocalOutlierFactor(novelty=True) (Scan, TopK)
def outlier_factor_outputs(op, X, arrays, math=NumpyMath):
    """skl2onnx's LocalOutlierFactor graph as ONNX Runtime computes it: TopK of the k
    smallest distances (``neighbor_outputs``' order), the neighbours' own k-distances
    and local reachability densities (``Gather`` of the constant tables), then in
    float32 the reachability ``Max(d, k_distance)`` (NaN propagates), the row's density
    ``1 / (ReduceMean(reach) + eps)``, ``score_samples = -ReduceMean(lrd / density)``
    (each ReduceMean a ``row_sums`` over k, then ``/ k``), the decision ``score_samples
    + offset`` and the label's index (0 for -1 where the decision is below 0, else 1
    for 1). Output: (decision, score_samples, label index)."""
    distances = neighbor_distances(op, X, arrays["train_columns"], math)
    values, order = math.smallest(distances, op.k)
    starts = math.row_starts(X, op.k)
    k_distances = math.take_targets(arrays["k_distances"], order)
    densities = math.take_targets(arrays["densities"], order)
    k = math.scalar32(op.k, distances)
    reach = [math.maximum(math.column(values, j), math.column(k_distances, j))
             for j in range(op.k)]
    density = math.scalar32(1.0, k) / (row_sums(math, reach, starts) / k
                                       + math.scalar32(op.eps, k))
    ratios = [math.column(densities, j) / density for j in range(op.k)]
    score_samples = -(row_sums(math, ratios, starts) / k)
    decision = score_samples + math.scalar32(op.offset, k)
    zero = math.scalar32(0.0, k)
    index = math.where(decision < zero, zero, math.scalar32(1.0, k))
    return math.stack([decision, score_samples, index])


@register_op
@dataclass(frozen=True, eq=False)
class OnnxOutlierFactor(Op):
    """skl2onnx's LocalOutlierFactor(novelty=True) graph (``outlier_factor_outputs``):
    ``train`` the training rows, ``k_distances`` and ``densities`` each training row's
    distance to its k-th neighbour and local reachability density (float32), ``eps``
    the density's guard and ``offset`` the decision's (``-offset_``)."""

    kind = "onnx_outlier_factor"

    train: np.ndarray
    k_distances: np.ndarray
    densities: np.ndarray
    k: int
    eps: float
    offset: float
    metric: str = "euclidean"

    def __post_init__(self):
        for name in ("train", "k_distances", "densities"):
            value = np.ascontiguousarray(getattr(self, name), dtype=np.float32)
            if name != "train":
                value = value.reshape(-1)
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        object.__setattr__(self, "k", int(self.k))
        for name in ("eps", "offset"):
            object.__setattr__(self, name, float(np.float32(getattr(self, name))))

    @property
    def n_features(self):
        return self.train.shape[1]

    @property
    def whole_call(self):
        """Whether a row's answer depends on its place in the call (``row_sums`` over k
        or the features, a width that is not a multiple of 4): then a call is never
        split into batches."""
        widths = [self.k] + ([self.n_features] if self.metric == "manhattan" else [])
        return any(w >= 4 and w % 4 for w in widths)

    def validate(self):
        n_train = self.train.shape[0] if self.train.ndim == 2 else 0
        self.expect(n_train >= 1 and np.isfinite(self.train).all(),
                    "train must be a finite matrix")
        for name in ("k_distances", "densities"):
            self.expect(getattr(self, name).shape == (n_train,), f"one {name} per training row")
        self.expect(1 <= self.k <= n_train, f"k={self.k} outside 1..n_train")
        self.expect(self.metric in NEIGHBOR_METRICS,
                    f"metric {self.metric!r} not in {NEIGHBOR_METRICS}")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(3)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        arrays = {"train_columns": [self.train[:, f][None, :] for f in range(self.n_features)],
                  "k_distances": self.k_distances, "densities": self.densities}
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [outlier_factor_outputs(self, inputs[0], arrays, NeighborsNumpyMath)]

    def to_saved(self):
        meta = {"k": self.k, "eps": self.eps, "offset": self.offset, "metric": self.metric}
        return meta, {"train": self.train, "k_distances": self.k_distances,
                      "densities": self.densities}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta, **arrays)


__all__ += ["OnnxOutlierFactor", "outlier_factor_outputs"]
