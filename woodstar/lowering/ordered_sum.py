"""Sums in a fixed order, for lowerings whose source adds in a known order (tree
leaves, distance-weighted neighbours, linear leaves' terms): ``Tensor.sum`` reduces in
blocks whose layout depends on the CPU's vector width, so its rounding differs from
the source's; these keep the order on every backend and CPU."""

import torch

__all__ = ["running_sum", "numpy_sum"]


def running_sum(values: torch.Tensor, dim: int) -> torch.Tensor:
    """The sum along ``dim`` (non-empty), added left to right from 0. The index is
    non-negative because TVM 0.27 lowers ``[..., -1]`` to an unchecked take(-1)."""
    return values.cumsum(dim=dim).select(dim, values.shape[dim] - 1)


def numpy_sum(values: torch.Tensor, dim: int) -> torch.Tensor:
    """The sum along ``dim`` in the order of NumPy's ``sum`` over a contiguous axis
    (pairwise summation): below 8 terms left to right; up to 128, eight interleaved
    partial sums combined as ((0+1)+(2+3))+((4+5)+(6+7)), then the remainder left to
    right; above, the two halves (the first a multiple of 8) summed so and added.
    The term count is a shape, fixed when the program is traced."""
    return _pairwise(values.movedim(dim, -1))


def _pairwise(a: torch.Tensor) -> torch.Tensor:
    n = a.shape[-1]
    if n < 8:
        total = a[..., 0]
        for i in range(1, n):
            total = total + a[..., i]
        return total
    if n <= 128:
        partial = [a[..., j] for j in range(8)]
        i = 8
        while i < n - n % 8:
            partial = [partial[j] + a[..., i + j] for j in range(8)]
            i += 8
        total = ((partial[0] + partial[1]) + (partial[2] + partial[3])) \
            + ((partial[4] + partial[5]) + (partial[6] + partial[7]))
        for rest in range(i, n):
            total = total + a[..., rest]
        return total
    half = n // 2
    half -= half % 8
    return _pairwise(a[..., :half]) + _pairwise(a[..., half:])
