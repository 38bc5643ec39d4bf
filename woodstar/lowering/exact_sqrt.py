"""A float64 square root rounded to nearest, as NumPy's and the C library's.

Torch's vectorised ``sqrt`` calls the platform's vector math library, which on some
CPUs (MKL on Intel) returns a neighbour of the nearest double for some inputs. A
lowering whose source takes a square root it then divides by (scikit-learn's
distance weights) would then differ in the last bit. ``exact_sqrt`` takes Torch's
root ``s`` (within one unit in the last place) and moves it to a neighbour when ``x``
lies beyond the square of the midpoint between them, computed without rounding:
``s * s`` is split into a double and its rounding error (Dekker's product, by
Veltkamp's split), and the residual ``x - s*s - s*u`` is then exact near the
midpoint, where its sign matters.

It needs ``nextafter``, which the exporters do not take; exported programs keep
Torch's ``sqrt``.
"""

import torch

from .trees._fast import exporting

__all__ = ["exact_sqrt", "nearest_root"]

_SPLIT = 134217729.0  # 2**27 + 1: Veltkamp's factor for float64
_SAFE_MIN, _SAFE_MAX = 2.0 ** -900, 2.0 ** 900  # where the split neither overflows nor underflows


def _square_error(s: torch.Tensor) -> torch.Tensor:
    """``s*s - fl(s*s)``, exactly (Dekker)."""
    scaled = s * _SPLIT
    high = scaled - (scaled - s)
    low = s - high
    product = s * s
    return ((high * high - product) + 2.0 * high * low) + low * low


def exact_sqrt(x: torch.Tensor) -> torch.Tensor:
    """``sqrt(x)`` of a float64 tensor, correctly rounded for ``x`` in [2**-900, 2**900]
    (Torch's root elsewhere, and in an export)."""
    s = torch.sqrt(x)
    if exporting() or x.dtype != torch.float64:
        return s
    return nearest_root(x, s)


def nearest_root(x: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    """The double nearest to ``sqrt(x)``, given ``s`` within one unit in the last place
    of it (``s`` itself outside [2**-900, 2**900])."""
    # x - s*s, exact near s's midpoints (both terms are multiples of ulp(s)**2 there)
    residual = (x - s * s) - _square_error(s)
    up = torch.nextafter(s, torch.full_like(s, float("inf")))
    down = torch.nextafter(s, torch.zeros_like(s))
    # x above (s + u/2)**2  <=>  residual - s*u > 0;  x below (s - d/2)**2  <=>  residual + s*d <= 0
    above = residual - s * (up - s) > 0
    below = residual + s * (s - down) <= 0
    safe = (x >= _SAFE_MIN) & (x <= _SAFE_MAX)
    return torch.where(safe & above, up, torch.where(safe & below, down, s))
