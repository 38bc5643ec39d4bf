"""A sum in a fixed order, for lowerings whose source adds term after term (tree
leaves, distance-weighted neighbours, linear leaves' terms): ``Tensor.sum`` reduces in
blocks, so its rounding differs from the source's; a running sum keeps the order on
every backend."""

import torch

__all__ = ["running_sum"]


def running_sum(values: torch.Tensor, dim: int) -> torch.Tensor:
    """The sum along ``dim`` (non-empty), added left to right from 0. The index is
    non-negative because TVM 0.27 lowers ``[..., -1]`` to an unchecked take(-1)."""
    return values.cumsum(dim=dim).select(dim, values.shape[dim] - 1)
