"""Torch module for the column-wise transformer IR (NumPy reference: ``ColumnOps.apply``)."""

import numpy as np
import torch
from torch import nn

from ..ir.column_ops import ColumnOps

__all__ = ["ColumnOpsModule"]

def _fill_nan(x: torch.Tensor, operand: torch.Tensor) -> torch.Tensor:
    return torch.where(torch.isnan(x), operand, x)


def _fill_value(x: torch.Tensor, operand: torch.Tensor) -> torch.Tensor:
    # operand: (2, n_features), the value to match and what replaces it
    return torch.where(x == operand[0:1], operand[1:2], x)


_TORCH_OPS = {"sub": torch.sub, "div": torch.div, "mul": torch.mul, "add": torch.add,
              "maximum": torch.maximum, "minimum": torch.minimum, "fill_nan": _fill_nan,
              "fill_value": _fill_value}


class ColumnOpsModule(nn.Module):
    """(n, n_features) of the working dtype -> the same, each operation computed in
    float64 and rounded to the working dtype, as the IR defines it."""

    def __init__(self, step: ColumnOps, dtype: str):
        super().__init__()
        self.source = step.name
        self.ops = step.ops
        self.working = getattr(torch, dtype)
        for i, (operand, cast) in enumerate(zip(step.operands, step.cast_operand)):
            if cast:  # the source rounds the operand to the working dtype first
                operand = operand.astype(dtype)
            rows = operand.shape[0] if operand.ndim == 2 else 1
            self.register_buffer(f"operand_{i}", torch.from_numpy(
                np.ascontiguousarray(operand, dtype=np.float64)).reshape(rows, -1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i, op in enumerate(self.ops):
            operand = getattr(self, f"operand_{i}")
            x = _TORCH_OPS[op](x.to(torch.float64), operand).to(self.working)
        return x
