"""Torch lowering of ``k_neighbors``: the distance matrix to the training rows, k
rounds of argmin (ties: the lower training index first), the k nearest, then the vote or mean.
Plain tensor ops with static shapes: it traces and exports."""

import torch
from torch import nn

from ..ops import register_lowering

__all__ = ["KNeighborsNode"]


def _row_norms(x):
    return (x * x).sum(dim=1)


class KNeighborsNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        fit_X = torch.from_numpy(op.fit_X.copy())
        self.register_buffer("fit_X", fit_X)
        norms = torch.sqrt(_row_norms(fit_X))
        self.register_buffer("fit_normalized",
                             fit_X / torch.where(norms == 0, torch.ones_like(norms), norms)[:, None])
        if op.mode == "classifier":
            targets = torch.nn.functional.one_hot(torch.from_numpy(op.y), op.n_classes)
            self.register_buffer("targets", targets.to(torch.float64))
        else:
            self.register_buffer("targets", torch.from_numpy(op.y.copy()))
        self.k, self.metric, self.p = op.n_neighbors, op.metric, float(op.p)
        self.formula, self.weights, self.mode = op.formula, op.weights, op.mode
        self.n_features, self.width = op.n_features, self.targets.shape[1]
        n_train = op.n_train
        # the distance matrix, its sort (values and int64 indices) and a temporary
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (4 * n_train + 2 * self.k * (self.width + 2))

    def reduced(self, x):
        # The brute-force euclidean search (formula "gemm") is computed here as a sum
        # of squared differences: same distances to rounding, and exactly 0 where a
        # query equals a training row (which decides the distance weights), as in
        # scikit-learn, without depending on the two products' summation orders.
        if self.formula == "cosine":
            norms = torch.sqrt(_row_norms(x))
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
                dist = torch.sqrt(chosen)
            elif self.metric == "minkowski" and self.formula == "direct":
                dist = torch.pow(chosen, 1.0 / self.p)
            else:
                dist = chosen
            weights = 1.0 / dist
            infinite = torch.isinf(weights)
            weights = torch.where(infinite.any(dim=1, keepdim=True), infinite.to(weights.dtype),
                                  weights)
        summed = (targets * weights[:, :, None]).sum(dim=1)
        if self.mode == "regressor":
            value = summed / weights.sum(dim=1, keepdim=True)
            return value, value
        proba = summed / summed.sum(dim=1, keepdim=True)
        label = torch.argmax(summed, dim=1).to(torch.float64)
        return proba, torch.cat([proba, label[:, None]], dim=1)


@register_lowering("k_neighbors")
def _k_neighbors(op, input_dtypes, context):
    return KNeighborsNode(op)
