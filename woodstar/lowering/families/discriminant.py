"""Torch lowerings of the discriminant-analysis ops (NumPy references:
woodstar/ir/families/discriminant.py)."""

import numpy as np
import torch
from torch import nn

from ..ops import register_lowering
from ._constants import register_constant
from .decomposition import torch_dtype

__all__ = ["QDAScoresNode", "QDAPosteriorNode", "LogFloorNode"]


class QDAScoresNode(nn.Module):
    """The source's dtype chain: ``X - means`` in ``result_type(X, means)``, the
    product and squares in ``result_type`` with the weights, then ``u`` and the log
    priors promote it (a float32-fitted model keeps float32 until the float64 priors)."""

    def __init__(self, op, input_dtype):
        super().__init__()
        centred = np.result_type(input_dtype, op.means.dtype)
        product = np.result_type(centred, *op.weights)
        summed = np.result_type(product, op.u)
        out = np.result_type(summed, op.log_priors)
        self.centred, self.product = torch_dtype(centred), torch_dtype(product)
        self.summed, self.out = torch_dtype(summed), torch_dtype(out)

        def buffer(a, dtype):
            return torch.from_numpy(np.ascontiguousarray(a, dtype=dtype))

        self.register_buffer("means", buffer(op.means, centred))
        for i, w in enumerate(op.weights):
            self.register_buffer(f"weights_{i}", buffer(w, product))
        self.n_classes = op.n_classes
        self.register_buffer("u", buffer(op.u, summed).reshape(1, -1))
        self.register_buffer("log_priors", buffer(op.log_priors, out).reshape(1, -1))
        width = op.n_features * (1 + op.n_classes)
        self.estimate_bytes = lambda n_rows: 16 * n_rows * width

    def forward(self, x):
        x = x.to(self.centred)
        norm2 = []
        for i in range(self.n_classes):
            X2 = torch.matmul((x - self.means[i]).to(self.product), getattr(self, f"weights_{i}"))
            norm2.append((X2 * X2).sum(dim=1))
        norm2 = torch.stack(norm2, dim=1).to(self.summed)
        return ((-0.5 * (norm2 + self.u)).to(self.out) + self.log_priors,)


@register_lowering("qda_scores")
def _qda_scores(op, input_dtypes, context):
    return QDAScoresNode(op, input_dtypes[0])


class QDAPosteriorNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.estimate_bytes = lambda n_rows: 32 * n_rows * op.n_classes

    def forward(self, scores):
        log_likelihood = scores - scores.max(dim=1, keepdim=True).values
        log_proba = log_likelihood - torch.log(torch.exp(log_likelihood).sum(dim=1, keepdim=True))
        return (torch.cat([torch.exp(log_proba), log_proba], dim=1),)


@register_lowering("qda_posterior")
def _qda_posterior(op, input_dtypes, context):
    return QDAPosteriorNode(op)


class LogFloorNode(nn.Module):
    def __init__(self, op, input_dtype):
        super().__init__()
        # float64's smallest normal is 0 in float32: it must not become a float32 literal
        register_constant(self, "tiny", np.finfo(np.dtype(input_dtype)).smallest_normal,
                          torch_dtype(input_dtype))
        self.estimate_bytes = lambda n_rows: 16 * n_rows * op.n_features

    def forward(self, p):
        return (torch.log(torch.where(p == 0, p + self.tiny, p)),)


@register_lowering("log_floor")
def _log_floor(op, input_dtypes, context):
    return LogFloorNode(op, input_dtypes[0])
