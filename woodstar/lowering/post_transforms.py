"""Torch modules for the IR's post-transforms (NumPy reference: ir/transforms.py)."""

import torch
from torch import nn

__all__ = ["PostTransform", "logistic"]


def logistic(z: torch.Tensor) -> torch.Tensor:
    """scipy's expit, ``1 / (1 + exp(-z))``, written out rather than ``torch.sigmoid``:
    ONNX's Sigmoid in ONNX Runtime flushes a logistic below exp(-37) to 0 in float64
    (and loses digits from exp(-10)), where scikit-learn keeps the tiny value; a
    one-vs-rest normalisation then divides by zero. Written out, every backend keeps it."""
    return 1.0 / (1.0 + torch.exp(-z))


class PostTransform(nn.Module):
    """Applies the ensemble's named post-transform to raw scores (n, n_outputs)."""

    def __init__(self, name: str, scale: float = 1.0):
        super().__init__()
        self.kind = name
        self.scale = float(scale)
        # A tensor, not a Python float: ONNX's exporter writes a float constant as float32.
        self.register_buffer("scale_value", torch.tensor(self.scale, dtype=torch.float64))

    def forward(self, raw: torch.Tensor) -> torch.Tensor:
        z = raw * self.scale_value.to(raw.dtype) if self.scale != 1.0 else raw
        if self.kind == "identity":
            return z
        if self.kind == "sigmoid":
            return logistic(z)
        if self.kind == "sigmoid_binary":
            p = logistic(z[:, :1])
            return torch.cat([1.0 - p, p], dim=1)
        if self.kind == "identity_binary":
            return torch.cat([1.0 - z[:, :1], z[:, :1]], dim=1)
        if self.kind == "step":
            return (z > 0).to(z.dtype)
        if self.kind == "step_binary":
            s = (z[:, :1] > 0).to(z.dtype)
            return torch.cat([1.0 - s, s], dim=1)
        if self.kind == "argmax":
            return torch.argmax(z, dim=1, keepdim=True).to(z.dtype)
        if self.kind == "softplus":
            return torch.log1p(torch.exp(z))
        if self.kind in ("softmax", "softmax_libm"):
            return torch.softmax(z, dim=1)
        if self.kind == "sigmoid_ovr":
            p = logistic(z)
            total = p.sum(dim=1, keepdim=True)
            # Rows whose sigmoids all round to 0 get uniform probabilities (scikit-learn).
            zero = total == 0
            p = torch.where(zero, torch.ones_like(p), p)
            return p / torch.where(zero, torch.full_like(total, p.shape[1]), total)
        if self.kind == "modified_huber_binary":
            p = (torch.clamp(z[:, :1], -1.0, 1.0) + 1.0) / 2.0
            return torch.cat([1.0 - p, p], dim=1)
        if self.kind == "modified_huber":
            p = (torch.clamp(z, -1.0, 1.0) + 1.0) / 2.0
            total = p.sum(dim=1, keepdim=True)
            # Rows whose clipped scores are all -1 get uniform probabilities (scikit-learn).
            zero = total == 0
            p = torch.where(zero, torch.ones_like(p), p)
            return p / torch.where(zero, torch.full_like(total, p.shape[1]), total)
        if self.kind in ("exp", "exp_libm"):
            return torch.exp(z)
        if self.kind == "isolation_forest":
            return -torch.exp2(-z)
        raise ValueError(f"unknown post_transform {self.kind!r}")
