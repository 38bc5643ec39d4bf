"""Scalar constants of the lowered programs, held as tensors.

torch's default ONNX exporter writes a Python float that enters arithmetic, a
comparison, ``full_like`` or ``clamp`` as a float32 value, even in a float64 graph
(``x * 0.1`` becomes a product with 0.100000001490116...), and some compilers read
float literals as float32 too. A 0-dim buffer keeps its dtype in every exported graph.
In eager Torch it behaves as the Python float did: a 0-dim tensor does not widen a
tensor of its own kind, so a float32 tensor still computes in float32 with the
constant rounded to float32. Exact float32 values (0, 0.5, 2, integers below 2**24,
infinities) and ``pow`` exponents (exported in float64) may stay Python floats.
"""

import torch

__all__ = ["register_constant"]


def register_constant(module, name, value, dtype=torch.float64):
    """``module.<name>``: ``value`` as a 0-dim buffer of ``dtype``."""
    module.register_buffer(name, torch.tensor(float(value), dtype=dtype))
