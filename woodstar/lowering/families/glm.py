"""Torch lowering of the GLMs' inverse link (NumPy reference: woodstar/ir/families/glm.py)."""

import torch
from torch import nn

from ..ops import register_lowering

__all__ = ["InverseLinkNode"]


class InverseLinkNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.estimate_bytes = lambda n_rows: 16 * n_rows * op.n_features

    def forward(self, raw):
        return (torch.exp(raw),)  # the log link's inverse


@register_lowering("glm_inverse_link")
def _glm_inverse_link(op, input_dtypes, context):
    return InverseLinkNode(op)
