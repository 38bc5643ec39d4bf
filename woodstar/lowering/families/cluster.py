"""Torch lowerings of ``nearest_centers``, ``bisecting_kmeans`` and
``gaussian_mixture``: scikit-learn's expressions as tensor ops, in the dtypes the IR
gives (woodstar/ir/families/cluster.py)."""

import math

import numpy as np
import torch
from torch import nn

from ..ops import register_lowering
from ._constants import register_constant

__all__ = ["NearestCentersNode", "BisectingCentersNode", "GaussianMixtureNode"]


def _torch_dtype(dtype):
    return getattr(torch, np.dtype(dtype).name)


def _row_norms(x):
    return (x * x).sum(dim=1)


def _euclidean(x, centers64, norms64, both32):
    x64 = x.to(torch.float64)
    d = -2.0 * (x64 @ centers64.T)
    d = d + _row_norms(x64)[:, None]
    d = d + norms64[None, :]
    if both32:
        d = d.to(torch.float32)
    return torch.sqrt(torch.clamp_min(d, 0.0))


class NearestCentersNode(nn.Module):
    def __init__(self, op, input_dtype):
        super().__init__()
        centers = torch.from_numpy(op.centers.copy())
        self.register_buffer("centers", centers)
        self.register_buffer("norms", _row_norms(centers))
        c64 = centers.to(torch.float64).clone()  # buffers never share storage (tracing)
        self.register_buffer("centers64", c64)
        self.register_buffer("norms64", _row_norms(c64))
        self.rule, self.with_transform = op.rule, op.with_transform
        self.out_dtype = _torch_dtype(op.output_dtypes([input_dtype])[0])
        self.both32 = self.out_dtype == torch.float32
        k = op.n_centers
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (4 * k + op.n_features + 2)

    def labels(self, x):
        if self.rule == "lloyd":
            xc = x.to(self.centers.dtype)
            return torch.argmin(self.norms[None, :] + (-2.0 * (xc @ self.centers.T)), dim=1)
        x = x.to(torch.float64)
        if self.rule == "argkmin":
            d = (_row_norms(x)[:, None] + -2.0 * (x @ self.centers64.T)) + self.norms64[None, :]
            return torch.argmin(torch.clamp_min(d, 0.0), dim=1)
        acc = torch.abs(x[:, 0:1] - self.centers64[:, 0][None, :])
        for j in range(1, self.centers64.shape[1]):
            acc = acc + torch.abs(x[:, j:j + 1] - self.centers64[:, j][None, :])
        return torch.argmin(acc, dim=1)

    def forward(self, x):
        label = self.labels(x).to(self.out_dtype)[:, None]
        if not self.with_transform:
            return label, label
        distances = _euclidean(x, self.centers64, self.norms64, self.both32).to(self.out_dtype)
        return distances, torch.cat([distances, label], dim=1)


@register_lowering("nearest_centers")
def _nearest_centers(op, input_dtypes, context):
    return NearestCentersNode(op, input_dtypes[0])


class BisectingCentersNode(nn.Module):
    """Every inner node's choice for every row (one product), then a walk of ``depth``
    gathers from the root."""

    def __init__(self, op, input_dtype):
        super().__init__()
        pairs = torch.from_numpy(op.pair_centers.reshape(-1, op.n_features).copy())
        self.register_buffer("pairs", pairs)
        self.register_buffer("pair_norms", _row_norms(pairs))
        self.register_buffer("child_index", torch.from_numpy(op.children.reshape(-1).copy()))
        self.register_buffer("inner", torch.from_numpy(op.children[:, 0] >= 0))
        self.register_buffer("leaf_label", torch.from_numpy(op.leaf_label.copy()))
        c64 = torch.from_numpy(op.centers.astype(np.float64))
        self.register_buffer("centers64", c64)
        self.register_buffer("norms64", _row_norms(c64))
        self.n_nodes, self.depth = len(op.children), op.depth
        self.out_dtype = _torch_dtype(op.output_dtypes([input_dtype])[0])
        self.both32 = self.out_dtype == torch.float32
        width = 4 * self.n_nodes + 2 * op.n_centers
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (width + op.n_features + 2)

    def forward(self, x):
        xc = x.to(self.pairs.dtype)
        scores = (self.pair_norms[None, :] + (-2.0 * (xc @ self.pairs.T))).reshape(-1, self.n_nodes, 2)
        right = (scores[:, :, 1] < scores[:, :, 0]).to(torch.int64)  # first minimum
        node = torch.zeros_like(right[:, 0])
        for _ in range(self.depth):
            side = torch.gather(right, 1, node[:, None])[:, 0]
            child = self.child_index.index_select(0, node * 2 + side)
            node = torch.where(self.inner.index_select(0, node), child, node)
        label = self.leaf_label.index_select(0, node).to(self.out_dtype)[:, None]
        distances = _euclidean(x, self.centers64, self.norms64, self.both32).to(self.out_dtype)
        return distances, torch.cat([distances, label], dim=1)


@register_lowering("bisecting_kmeans")
def _bisecting(op, input_dtypes, context):
    return BisectingCentersNode(op, input_dtypes[0])


class GaussianMixtureNode(nn.Module):
    def __init__(self, op, input_dtype):
        super().__init__()
        self.covariance_type = op.covariance_type
        self.input_dtype = _torch_dtype(input_dtype)
        self.out_dtype = _torch_dtype(op.output_dtypes([input_dtype])[0])
        wide = self.out_dtype
        means = torch.from_numpy(op.means.copy()).to(wide).clone()
        prec = torch.from_numpy(op.precisions_chol.copy()).to(wide).clone()
        self.register_buffer("means", means)
        self.register_buffer("prec", prec)
        if op.covariance_type in ("diag", "spherical"):
            precisions = prec ** 2
            self.register_buffer("precisions", precisions)
        if op.covariance_type == "diag":
            self.register_buffer("const", (means ** 2 * precisions).sum(dim=1))
            self.register_buffer("mp", (means * precisions).T.contiguous())
        elif op.covariance_type == "spherical":
            self.register_buffer("const", (means ** 2).sum(dim=1) * precisions)
        elif op.covariance_type == "full":
            self.register_buffer("mu_prec", torch.einsum("kf,kfg->kg", means, prec))
        else:
            self.register_buffer("mu_prec", means @ prec)
        offset = torch.from_numpy(op.log_det.astype(np.float64)).to(wide)
        self.register_buffer("log_det", offset)
        extra = torch.zeros_like(offset)
        if op.bayesian:
            extra = -torch.from_numpy(op.log_gauss_sub.astype(np.float64)).to(wide) \
                + torch.from_numpy(op.log_gauss_add.astype(np.float64)).to(wide)
        self.register_buffer("extra", extra)
        self.register_buffer("log_weights", torch.from_numpy(op.log_weights.astype(np.float64)).to(wide))
        register_constant(self, "constant", op.n_features * math.log(2 * math.pi))
        k, f = op.n_components, op.n_features
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (k * (f + 6) + 2 * f + 4)

    def forward(self, x):
        x = x.to(self.input_dtype)
        xw = x.to(self.out_dtype)
        if self.covariance_type == "full":
            y = torch.einsum("nf,kfg->nkg", xw, self.prec) - self.mu_prec[None, :, :]
            log_prob = (y * y).sum(dim=2).to(self.input_dtype)
        elif self.covariance_type == "tied":
            y = (xw @ self.prec)[:, None, :] - self.mu_prec[None, :, :]
            log_prob = (y * y).sum(dim=2).to(self.input_dtype)
        elif self.covariance_type == "diag":
            log_prob = self.const[None, :] - 2.0 * (xw @ self.mp) + (x * x).to(self.out_dtype) @ self.precisions.T
        else:
            norms = _row_norms(x).to(self.out_dtype)
            log_prob = self.const[None, :] - 2.0 * ((xw @ self.means.T) * self.precisions[None, :]) \
                + norms[:, None] * self.precisions[None, :]
        gauss = (-0.5 * (self.constant + log_prob)).to(self.out_dtype) + self.log_det[None, :]
        weighted = gauss + self.extra[None, :] + self.log_weights[None, :]
        # logsumexp written out: torch.logsumexp exports as amax, which TVM's importer lacks
        top = weighted.max(dim=1, keepdim=True).values
        top = torch.where(torch.abs(top) == math.inf, torch.zeros_like(top), top)
        norm = torch.log(torch.exp(weighted - top).sum(dim=1)) + top[:, 0]
        proba = torch.exp(weighted - norm[:, None])
        label = torch.argmax(weighted, dim=1).to(weighted.dtype)
        return weighted, torch.cat([proba, label[:, None], norm[:, None]], dim=1)


@register_lowering("gaussian_mixture")
def _gaussian_mixture(op, input_dtypes, context):
    return GaussianMixtureNode(op, input_dtypes[0])
