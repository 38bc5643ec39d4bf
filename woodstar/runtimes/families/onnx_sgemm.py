"""MLAS's SGEMM slices for NumPy arrays in C (woodstar/runtimes/fma_slices.c, ``fmaf``):
the CPU route's fast form of ``slice_sums`` in woodstar/ir/families/onnx_ops.py, whose
float64 mirror (a two-sum and a tie check per step) is several times slower in NumPy.
Registered at import; without a C compiler the mirror runs."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from ...ir.families.onnx_ops import register_fma_slices
from .._native import NativeLibrary

_FLAGS = ("-O2", "-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math")


def _setup(lib):
    lib.woodstar_fma_slices.restype = None
    lib.woodstar_fma_slices.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p]


_LIBRARY = NativeLibrary(Path(__file__).parent.parent / "fma_slices.c", _FLAGS, _setup,
                         "MLAS's SGEMM slices")


def fma_slices(A: np.ndarray, B: np.ndarray, stride: int):
    """[(n, N) float32 per K slice] of float32 ``A`` (n, K) and ``B`` (N, K), or None
    without the compiled library."""
    lib = _LIBRARY.load()
    if lib is None:
        return None
    A = np.ascontiguousarray(A, dtype=np.float32)
    B = np.ascontiguousarray(B, dtype=np.float32)
    n, K = A.shape
    N = B.shape[0]
    n_slices = -(-K // stride)
    out = np.empty((n_slices, n, N), dtype=np.float32)
    if n and N and K:
        lib.woodstar_fma_slices(A.ctypes.data, n, K, B.ctypes.data, N, stride, out.ctypes.data)
    return list(out)


register_fma_slices(fma_slices)
