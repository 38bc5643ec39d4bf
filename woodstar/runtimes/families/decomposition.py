"""NumPy CPU implementation of ``projection`` for a sparse source matrix
(SparseRandomProjection): scikit-learn multiplies the dense rows by the CSR matrix's
transpose with SciPy, summing each output's nonzeros in their stored order; the same
product here gives its answer to the bit. Dense matrices run the IR reference.

``nmf_transform`` runs its IR reference (NMF's solve, in scikit-learn's NumPy calls)
on the whole call, with the cd solver's sweep compiled from
woodstar/runtimes/nmf_kernel.c: the loop of scikit-learn's Cython ``_update_cdnmf_fast``
in the same order and precision, without a NumPy call per column (the NumPy sweep, the
fallback without a compiler, gives the same bits). Sparse rows are refused: scikit-learn
solves those with its sparse products, summed in another order."""

import ctypes
from pathlib import Path

import numpy as np

from .._native import NativeLibrary
from ..numpy_graph import register_cpu_op

__all__ = ["compiled_cd_sweep", "cd_sweep_unavailable_reason"]


@register_cpu_op("projection")
def _projection(op, context):
    if op.sparse_indptr is None:
        return lambda X: tuple(op.reference([X]))
    from scipy import sparse

    rows = np.repeat(np.arange(op.n_products), np.diff(op.sparse_indptr))
    data = op.matrix[rows, op.sparse_indices]
    matrix = sparse.csr_matrix((data, op.sparse_indices, op.sparse_indptr), shape=op.matrix.shape)

    def run(X):
        X = X.toarray() if hasattr(X, "toarray") else X
        if op.mean is not None:
            X = X - op.mean
        return (op.finish(np.asarray(X @ matrix.T)),)

    return run


_FLAGS = ("-O2", "-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math")
_SWEEPS = {np.dtype(np.float64): "woodstar_cdnmf_sweep_f64",
           np.dtype(np.float32): "woodstar_cdnmf_sweep_f32"}


def _setup(lib):
    for name in _SWEEPS.values():
        function = getattr(lib, name)
        function.restype = ctypes.c_double
        function.argtypes = [ctypes.c_void_p] * 4 + [ctypes.c_int64] * 2


_LIBRARY = NativeLibrary(Path(__file__).parent.parent / "nmf_kernel.c", _FLAGS, _setup,
                         "NMF's coordinate-descent sweep")


def cd_sweep_unavailable_reason():
    return None if _LIBRARY.load() is not None else _LIBRARY.reason


def compiled_cd_sweep():
    """``sweep(W, HHt, XHt, permutation)`` in C, with the NumPy sweep's signature and
    bits (operands the C code does not take go to the NumPy sweep); None without a
    compiler."""
    from ...ir.families.decomposition import _cd_sweep

    lib = _LIBRARY.load()
    if lib is None:
        return None

    def sweep(W, HHt, XHt, permutation):
        name = _SWEEPS.get(W.dtype)
        if name is None or HHt.dtype != W.dtype or XHt.dtype != W.dtype \
                or not W.flags.c_contiguous:
            return _cd_sweep(W, HHt, XHt, permutation)
        HHt, XHt = np.ascontiguousarray(HHt), np.ascontiguousarray(XHt)
        order = np.ascontiguousarray(permutation, dtype=np.int64)
        return getattr(lib, name)(W.ctypes.data, HHt.ctypes.data, XHt.ctypes.data,
                                  order.ctypes.data, W.shape[0], W.shape[1])

    return sweep


@register_cpu_op("nmf_transform")
def _nmf_transform(op, context):
    from ...ir.families.decomposition import _cd_sweep

    sweep = (compiled_cd_sweep() if op.solver == "cd" else None) or _cd_sweep

    def run(X):
        if hasattr(X, "toarray"):
            raise TypeError(f"{op.name}.transform on sparse rows is not reproduced here: "
                            f"scikit-learn solves them with its sparse products, which sum "
                            f"in another order; pass dense rows.")
        return (op.solve(X, sweep),)

    return run
