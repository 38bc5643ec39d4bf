"""The compiled walk's links in the C library's double arithmetic (LightGBM's softmax,
exp and softplus: c_walk.woodstar_libm_link) against the IR's reference
(ir/transforms.py) to the bit, on edge values: overflow, underflow, infinities, NaN,
ties for the maximum, many classes (the sum's order), and a scale. The LightGBM
parity of the same links is in tests/frontends/test_lightgbm.py."""

import math

import numpy as np
import pytest

from woodstar.ir.transforms import apply_post_transform
from woodstar.runtimes import c_walk

pytestmark = pytest.mark.skipif(not c_walk.available(), reason=str(c_walk.unavailable_reason()))

EDGES = [0.0, -0.0, 1e-300, -1e-300, 709.78, 709.79, -745.2, -746.0, 1000.0, -1000.0,
         np.inf, -np.inf, np.nan, 1.0, 1.0, 36.7, -36.7]


def _scores(rng, n, width):
    z = rng.normal(size=(n, width)) * rng.choice([0.1, 3.0, 40.0], size=(n, 1))
    picked = rng.random(z.shape) < 0.15
    z[picked] = rng.choice(EDGES, size=int(picked.sum()))
    return z


# Element-wise links at two widths; the softmax also beyond 8 columns (the sum's order).
LINKS = [(name, width) for name in sorted(c_walk._LIBM_LINKS) for width in (1, 3)] \
    + [("softmax_libm", 9), ("softmax_libm", 17)]


@pytest.mark.parametrize("scale", [1.0, 0.7])
@pytest.mark.parametrize("name, width", LINKS)
def test_links_match_the_reference(name, width, scale, rng):
    z = _scores(rng, 3000, width)
    got = c_walk._libm_link(c_walk._LIBM_LINKS[name], z, scale)
    with np.errstate(all="ignore"):
        expected = apply_post_transform(name, z, scale)
    np.testing.assert_array_equal(got, expected)


def test_the_reference_is_the_c_librarys_exp(rng):
    """NumPy's exp differs from the C library's on some of these arguments (otherwise
    the links above would not need the C library)."""
    z = rng.normal(size=(20000, 1)) * 5
    libm = np.array([[math.exp(v)] for v in z[:, 0]])
    np.testing.assert_array_equal(apply_post_transform("exp_libm", z), libm)
    if (np.exp(z) == libm).all():
        pytest.skip("NumPy's exp is the C library's on this machine")

