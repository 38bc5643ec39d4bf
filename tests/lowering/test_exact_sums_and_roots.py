"""``numpy_sum`` adds in NumPy's pairwise order and ``exact_sqrt`` rounds float64 square
roots to nearest, both bit for bit with NumPy whatever Torch's vector kernels do on
this CPU (scikit-learn's distance weights and class totals go through them)."""

import numpy as np
import pytest
import torch

from woodstar.lowering.exact_sqrt import exact_sqrt, nearest_root
from woodstar.lowering.ordered_sum import numpy_sum


def _same_bits(got, expected):
    np.testing.assert_array_equal(np.asarray(got).view(np.int64), np.asarray(expected).view(np.int64))


@pytest.mark.parametrize("n", [1, 2, 3, 7, 8, 9, 15, 16, 17, 63, 127, 128, 129, 130, 257, 1000])
def test_numpy_sum_adds_in_numpys_order(rng, n):
    values = rng.standard_normal((40, n)) * 10.0 ** rng.integers(-8, 9, (40, n))
    _same_bits(numpy_sum(torch.from_numpy(values), dim=1).numpy(), values.sum(axis=1))
    # along another axis: the terms are the middle axis of a 3-d array
    cube = np.ascontiguousarray(values.T[None].repeat(2, axis=0))  # (2, n, 40)
    _same_bits(numpy_sum(torch.from_numpy(cube), dim=1).numpy(),
               np.ascontiguousarray(cube.transpose(0, 2, 1)).sum(axis=2))


def test_exact_sqrt_rounds_to_nearest(rng):
    squares = np.arange(1, 50_000, dtype=np.float64) ** 2
    samples = [rng.random(100_000) * 100,
               10.0 ** rng.uniform(-250, 250, 100_000),
               np.arange(100_000, dtype=np.float64),
               squares, np.nextafter(squares, 0), np.nextafter(squares, np.inf),
               np.array([2.0 ** -900, 2.0 ** 900, 0.25, 2.0, 3.0]),
               # just below a power of 4: the root lies just below the midpoint under
               # a power of two, where the residual's test meets zero
               np.nextafter(4.0 ** np.arange(-400, 400), 0)]
    for x in samples:
        _same_bits(exact_sqrt(torch.from_numpy(x)).numpy(), np.sqrt(x))
        # from a root one place off either way (whatever Torch's kernel gave here),
        # in the range where the correction applies
        x = x[(x >= 2.0 ** -900) & (x <= 2.0 ** 900)]
        for start in (np.nextafter(np.sqrt(x), np.inf), np.nextafter(np.sqrt(x), 0)):
            _same_bits(nearest_root(torch.from_numpy(x), torch.from_numpy(start)).numpy(),
                       np.sqrt(x))


def test_exact_sqrt_leaves_special_values_to_torch():
    x = torch.tensor([0.0, -0.0, float("inf"), float("nan"), -1.0, 5e-324, 1e-300, 1e300],
                     dtype=torch.float64)
    got, plain = exact_sqrt(x), torch.sqrt(x)
    _same_bits(got.numpy(), plain.numpy())
    assert torch.equal(torch.sqrt(x[:3]), got[:3]) and torch.signbit(got[1])


def test_exact_sqrt_is_torchs_in_a_trace_and_in_float32(rng):
    traced = torch.jit.trace(exact_sqrt, torch.ones(4, dtype=torch.float64))
    kinds = {node.kind() for node in traced.graph.nodes()}
    assert "aten::sqrt" in kinds and "aten::nextafter" not in kinds
    x = torch.from_numpy(rng.random(1000).astype(np.float32))
    assert torch.equal(exact_sqrt(x), torch.sqrt(x))
