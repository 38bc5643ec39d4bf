"""Torch lowerings of the decomposition ops (NumPy references:
woodstar/ir/families/decomposition.py): the same steps, in the same dtypes; the NMF
solve hands the batch to its NumPy reference (``NMFTransformNode`` says why)."""

import numpy as np
import torch
from torch import nn

from ...exceptions import unsupported_message
from ...ir.families.decomposition import _normalize, _row_norms
from ..ops import register_lowering
from ._constants import register_constant

__all__ = ["ProjectionNode", "KernelPCANode", "NMFTransformNode", "torch_dtype", "in_place"]


def torch_dtype(dtype):
    return getattr(torch, np.dtype(dtype).name)


def _buffer(array, dtype):
    return torch.from_numpy(np.ascontiguousarray(array)).to(torch_dtype(dtype))


def in_place(values, operand, fn):
    """``values op= operand`` as NumPy computes it: in the promoted dtype, then
    rounded to the values' dtype."""
    common = torch.promote_types(values.dtype, operand.dtype)
    return fn(values.to(common), operand).to(values.dtype)


class ProjectionNode(nn.Module):
    def __init__(self, op, input_dtype):
        super().__init__()
        centred, product = op.dtypes(input_dtype)
        self.centred, self.product = torch_dtype(centred), torch_dtype(product)
        self.has_mean = op.mean is not None
        self.has_offset = op.offset is not None
        self.has_scale = op.scale is not None
        if self.has_mean:
            self.register_buffer("mean", _buffer(op.mean.reshape(1, -1), centred))
        self.register_buffer("operator", _buffer(op.operator, product))
        if self.has_offset:
            self.register_buffer("offset", _buffer(op.offset.reshape(1, -1), op.offset.dtype))
        if self.has_scale:
            self.register_buffer("scale", _buffer(op.scale.reshape(1, -1), op.scale.dtype))
        self.n_outputs = op.n_outputs
        width = op.n_features + op.n_products
        self.estimate_bytes = lambda n_rows: 16 * n_rows * width

    def forward(self, x):
        x = x.to(self.centred)
        if self.has_mean:
            x = x - self.mean
        y = torch.matmul(x.to(self.product), self.operator)
        if self.has_offset:
            y = in_place(y, self.offset, torch.sub)
        if self.has_scale:
            y = in_place(y, self.scale, torch.div)
        return (y[:, :self.n_outputs],)


@register_lowering("projection")
def _projection(op, input_dtypes, context):
    return ProjectionNode(op, input_dtypes[0])


class KernelPCANode(nn.Module):
    def __init__(self, op, input_dtype):
        super().__init__()
        kd = op.kernel_dtype(input_dtype)
        out = op.output_dtypes([input_dtype])[0]
        self.kernel = op.kernel
        self.kd, self.out = torch_dtype(kd), torch_dtype(out)
        self.degree = float(op.degree)  # a pow exponent: exported exactly
        register_constant(self, "neg_gamma", -float(op.gamma), self.kd)
        register_constant(self, "gamma", op.gamma, self.kd)
        register_constant(self, "coef0", op.coef0, self.kd)
        Y = op.X_fit.astype(kd)
        if op.kernel == "cosine":
            Y = _normalize(Y)
        self.register_buffer("fit_t", _buffer(Y.T, kd))
        if op.kernel == "rbf":
            self.register_buffer("fit_norms", _buffer(_row_norms(Y, squared=True)[None, :], kd))
        self.register_buffer("fit_rows", _buffer(op.K_fit_rows.reshape(1, -1), op.K_fit_rows.dtype))
        self.register_buffer("fit_all", _buffer(op.K_fit_all.reshape(1, 1), op.K_fit_all.dtype))
        self.register_buffer("alphas", _buffer(op.alphas, out))
        self.n_fit = float(op.X_fit.shape[0])
        n_fit, width = op.X_fit.shape[0], op.n_features + op.n_components
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (3 * n_fit + 2 * width)

    def _kernel(self, x):
        if self.kernel == "precomputed":
            return x
        if self.kernel == "cosine":
            norms = torch.sqrt((x * x).sum(dim=1, keepdim=True))
            eps = 10 * torch.finfo(x.dtype).eps
            x = x / torch.where(norms < eps, torch.ones_like(norms), norms)
            return torch.matmul(x, self.fit_t)
        if self.kernel == "rbf":
            K = -2 * torch.matmul(x, self.fit_t)
            K = K + (x * x).sum(dim=1, keepdim=True)
            K = K + self.fit_norms
            K = torch.clamp_min(K, 0)
            return torch.exp(K * self.neg_gamma)
        K = torch.matmul(x, self.fit_t)
        if self.kernel == "linear":
            return K
        K = K * self.gamma + self.coef0
        return K ** self.degree if self.kernel == "poly" else torch.tanh(K)

    def forward(self, x):
        K = self._kernel(x.to(self.kd))
        columns = K.sum(dim=1, keepdim=True) / self.n_fit
        K = in_place(K, self.fit_rows, torch.sub)
        K = K - columns
        K = in_place(K, self.fit_all, torch.add)
        return (torch.matmul(K.to(self.out), self.alphas),)


@register_lowering("kernel_pca")
def _kernel_pca(op, input_dtypes, context):
    return KernelPCANode(op, input_dtypes[0])


# Backends that trace or export the module: a trace would keep the NumPy call's result
# as a constant, an export has no NumPy to call.
NMF_REFUSING_BACKENDS = ("torch.jit", "torch.compile", "onnx", "tvm")


class NMFTransformNode(nn.Module):
    """``nmf_transform`` in a Torch program: the batch goes to the op's NumPy solve
    and back. The solve is hundreds of small BLAS products and a coordinate loop whose
    order decides the answer; Torch's own products (another BLAS, another blocking)
    would not give scikit-learn's bits, so the eager program runs the same NumPy code
    as the CPU route. Programs that trace or export refuse it by name."""

    def __init__(self, op, input_dtype):
        super().__init__()
        self.op = op
        reason = (f"'torch' (its CPU route or its eager program): {op.name}.transform "
                  f"solves an optimisation over the whole call with NumPy's BLAS products, "
                  f"to scikit-learn's bits; a traced or exported program cannot call NumPy, "
                  f"and Torch's own products would give other bits")
        self.refused_by = {backend: unsupported_message(op.name, "backend", backend, reason)
                           for backend in NMF_REFUSING_BACKENDS}
        width = op.n_features + op.n_components
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (3 * width + op.n_components)

    def forward(self, x):
        W = self.op.reference([x.detach().cpu().numpy()])[0]
        return (torch.from_numpy(W).to(x.device),)


@register_lowering("nmf_transform")
def _nmf_transform(op, input_dtypes, context):
    return NMFTransformNode(op, input_dtypes[0])
