"""Torch module for the linear-model IR (NumPy reference: ``LinearModel.scores``)."""

import torch
from torch import nn

from ..ir.linear import LinearModel

__all__ = ["LinearScores"]


class LinearScores(nn.Module):
    """(n, n_features) -> (n, n_outputs) scores, in the dtype NumPy computes them in
    for the source: ``result_type(input, coef)`` for the product, then promoted with
    the intercept's dtype."""

    name = "linear"

    def __init__(self, linear: LinearModel, dtype: str):
        super().__init__()
        self.n_features = linear.n_features
        self.n_outputs = linear.n_outputs
        self.dtype_name = dtype
        self.compute_dtype = getattr(torch, str(linear.compute_dtype(dtype)))
        self.register_buffer("coef_t", torch.from_numpy(linear.coef.T.copy()).to(self.compute_dtype))
        self.register_buffer("intercept", torch.from_numpy(linear.intercept.copy()))

    @staticmethod
    def estimate_bytes(linear: LinearModel, n_rows: int, dtype: str) -> int:
        """Peak bytes of one call: the steps' float64 temporaries, the widened input and
        the scores."""
        return 8 * n_rows * (2 * linear.n_features + 2 * linear.n_outputs)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.matmul(x.to(self.compute_dtype), self.coef_t) + self.intercept
