"""Torch lowering of ``k_neighbors``: the distance matrix to the training rows, k
rounds of argmin (ties: the lower training index first), the k nearest, then the vote or mean.
Plain tensor ops with static shapes: it traces and exports. Among rows tied at the k-th
distance scikit-learn keeps the ones its heap leaves, which only the CPU route
replays (woodstar/runtimes/families/neighbors.py); a program keeps the lower index."""

import numpy as np
import torch
from torch import nn

from ..ops import register_lowering
from ..exact_sqrt import exact_sqrt
from ..ordered_sum import numpy_sum, running_sum
from ._constants import register_constant

__all__ = ["KNeighborsNode", "RadiusNeighborsNode", "CentroidDiscriminantNode"]


def _row_norms(x):
    return (x * x).sum(dim=1)


class KNeighborsNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self._setup(op)
        self.k = op.n_neighbors
        n_train = op.n_train
        # the distance matrix, its sort (values and int64 indices) and a temporary
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (4 * n_train + 2 * self.k * (self.width + 2))

    def _setup(self, op):
        fit_X = torch.from_numpy(op.fit_X.copy())
        self.register_buffer("fit_X", fit_X)
        norms = exact_sqrt(_row_norms(fit_X))
        self.register_buffer("fit_normalized",
                             fit_X / torch.where(norms == 0, torch.ones_like(norms), norms)[:, None])
        if op.mode == "classifier":
            targets = torch.nn.functional.one_hot(torch.from_numpy(op.y), op.n_classes)
            self.register_buffer("targets", targets.to(torch.float64))
        else:
            self.register_buffer("targets", torch.from_numpy(op.y.copy()))
        self.metric, self.p = op.metric, float(op.p)  # p: a pow exponent, exported exactly
        self.formula, self.weights, self.mode = op.formula, op.weights, op.mode
        self.n_features, self.width = op.n_features, self.targets.shape[1]

    def reduced(self, x):
        # The brute-force euclidean search (formula "gemm") is computed here as a sum
        # of squared differences: same distances to rounding, and exactly 0 where a
        # query equals a training row (which decides the distance weights), as in
        # scikit-learn, without depending on the two products' summation orders.
        if self.formula == "cosine":
            norms = exact_sqrt(_row_norms(x))
            norms = torch.where(norms == 0, torch.ones_like(norms), norms)
            return torch.clamp(1.0 - (x / norms[:, None]) @ self.fit_normalized.T, 0.0, 2.0)
        acc = None
        for j in range(self.n_features):
            d = x[:, j:j + 1] - self.fit_X[:, j][None, :]
            if self.metric == "euclidean" or self.formula == "gemm":
                term = d * d
            elif self.metric == "minkowski":
                term = torch.pow(torch.abs(d), self.p)
            else:
                term = torch.abs(d)
            if acc is None:
                acc = term
            elif self.metric == "chebyshev":
                acc = torch.maximum(acc, term)
            else:
                acc = acc + term
        return acc

    def forward(self, x):
        x = x.to(torch.float64)
        # k rounds of argmin (the first minimum: ties go to the lower training index),
        # each found row then masked with +inf; sort and topk would not say which of
        # tied rows comes first, and a stable sort does not export to ONNX or TVM.
        reduced = self.reduced(x)
        # NaN rows (refused before they get here) as +inf: Torch's argmin takes a NaN
        # as the minimum, ONNX Runtime's and TVM's do not, and exporters check the
        # program on rows with NaN
        reduced = torch.where(torch.isnan(reduced), float("inf"), reduced)
        found, picked = [], []
        for _ in range(self.k):
            index = torch.argmin(reduced, dim=1, keepdim=True)
            found.append(torch.gather(reduced, 1, index))
            picked.append(index)
            reduced = torch.scatter(reduced, 1, index, float("inf"))
        chosen, index = torch.cat(found, dim=1), torch.cat(picked, dim=1)
        targets = self.targets.index_select(0, index.reshape(-1)).reshape(-1, self.k, self.width)
        if self.weights == "uniform":
            weights = torch.ones_like(chosen)
        else:
            if self.formula == "gemm" or self.metric == "euclidean":
                dist = exact_sqrt(chosen)
            elif self.metric == "minkowski" and self.formula == "direct":
                dist = torch.pow(chosen, 1.0 / self.p)
            else:
                dist = chosen
            weights = 1.0 / dist
            infinite = torch.isinf(weights)
            weights = torch.where(infinite.any(dim=1, keepdim=True), infinite.to(weights.dtype),
                                  weights)
        terms = targets * weights[:, :, None]
        if self.mode == "regressor":
            # scikit-learn: uniform weights, np.mean over a (rows, k, outputs) array, which
            # adds the neighbours one after another when there are several outputs and
            # pairwise with one; distance weights, np.sum over (rows, k) per output.
            if self.weights == "uniform" and self.width > 1:
                total = running_sum(terms, dim=1)
            else:
                total = numpy_sum(terms, dim=1)
            value = total / numpy_sum(weights, dim=1)[:, None]
            return value, value
        # scikit-learn adds each neighbour's weight to its class one neighbour after
        # another, nearest first; distance weights round differently in another order.
        summed = running_sum(terms, dim=1)
        proba = summed / numpy_sum(summed, dim=1)[:, None]
        label = torch.argmax(summed, dim=1).to(torch.float64)
        return proba, torch.cat([proba, label[:, None]], dim=1)


@register_lowering("k_neighbors")
def _k_neighbors(op, input_dtypes, context):
    return KNeighborsNode(op)


class RadiusNeighborsNode(KNeighborsNode):
    """The training rows within the radius as a (n, m) mask; weights 0 elsewhere."""

    def __init__(self, op):
        nn.Module.__init__(self)
        self._setup(op)
        register_constant(self, "r_reduced", op.reduced_radius)
        self.outlier_index = int(op.outlier_index) if op.mode == "classifier" else -1
        outlier_row = torch.zeros((1, self.width), dtype=torch.float64)
        if self.outlier_index >= 0:
            outlier_row[0, self.outlier_index] = 1.0
        self.register_buffer("outlier_row", outlier_row)
        n_train, width = op.n_train, self.width
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (5 * n_train + 3 * width + 2)

    def forward(self, x):
        x = x.to(torch.float64)
        reduced = self.reduced(x)
        within = reduced <= self.r_reduced
        inside = within.to(torch.float64)
        if self.weights == "uniform":
            weights = inside
        else:
            if self.formula == "gemm" or self.metric == "euclidean":
                dist = exact_sqrt(reduced)
            elif self.metric == "minkowski" and self.formula == "direct":
                dist = torch.pow(reduced, 1.0 / self.p)
            else:
                dist = reduced
            zero = (dist == 0) & within
            inverse = torch.where(within, 1.0 / dist, torch.zeros_like(dist))
            weights = torch.where(zero.any(dim=1, keepdim=True), zero.to(torch.float64), inverse)
        summed = weights @ self.targets
        empty = inside.sum(dim=1, keepdim=True) == 0
        if self.mode == "regressor":
            value = summed / weights.sum(dim=1, keepdim=True)  # 0/0: NaN with no neighbour
            return value, value
        empty = empty.to(torch.float64)  # rows with no neighbour sum to 0 here
        if self.outlier_index >= 0:
            summed = summed + empty * self.outlier_row
        else:
            summed = summed / (1.0 - empty)  # 0/0: NaN where no neighbour, else unchanged
        normalizer = summed.sum(dim=1, keepdim=True)
        normalizer = torch.where(normalizer == 0, torch.ones_like(normalizer), normalizer)
        proba = summed / normalizer
        label = torch.argmax(torch.nan_to_num(proba, nan=0.0), dim=1).to(torch.float64)
        return proba, torch.cat([proba, label[:, None]], dim=1)


class CentroidDiscriminantNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        mask = op.std != 0
        scale = np.where(mask, op.std, 1.0)
        centroids = op.centroids.copy()
        centroids[:, mask] /= op.std[mask]
        self.register_buffer("scale", torch.from_numpy(scale.copy()))
        self.register_buffer("centroids", torch.from_numpy(centroids))
        self.register_buffer("log_prior", torch.from_numpy(2.0 * np.log(op.prior)))
        self.binary = op.n_classes == 2
        n_classes = op.n_classes
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (2 * op.n_features + 8 * n_classes)

    def forward(self, x):
        x = x.to(torch.float64) / self.scale
        # scikit-learn's euclidean_distances: max(0, (-2 x.c + |x|^2) + |c|^2), sqrt, squared
        squared = -2 * (x @ self.centroids.T) + _row_norms(x)[:, None]
        squared = torch.clamp(squared + _row_norms(self.centroids)[None, :], min=0.0)
        distances = torch.sqrt(squared)
        scores = -(distances * distances) + self.log_prior[None, :]
        decision = scores[:, 1:2] - scores[:, 0:1] if self.binary else scores
        log_likelihood = scores - scores.max(dim=1, keepdim=True).values
        log_proba = log_likelihood - torch.log(torch.exp(log_likelihood).sum(dim=1, keepdim=True))
        proba = torch.exp(log_proba)
        label = torch.argmax(scores, dim=1).to(torch.float64)[:, None]
        return decision, torch.cat([decision, proba, log_proba, label], dim=1)


@register_lowering("radius_neighbors")
def _radius_neighbors(op, input_dtypes, context):
    return RadiusNeighborsNode(op)


@register_lowering("centroid_discriminant")
def _centroid_discriminant(op, input_dtypes, context):
    return CentroidDiscriminantNode(op)
