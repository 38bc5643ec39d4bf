"""The kernel SVMs on the CPU route, with scikit-learn's bits: the kernel values through
the same BLAS ``ddot`` scikit-learn's libsvm calls (SciPy's, reached through its
``cython_blas`` capsule), libm's ``exp``/``tanh`` and libsvm's ``powi``, in C
(woodstar/runtimes/libsvm_kernel.c). Without a C compiler, or for input the C code does
not take, the op's NumPy reference runs (within about 1e-15 relative of libsvm)."""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from .._native import NativeLibrary
from .._row_blocks import RowBlocks
from ..numpy_graph import register_cpu_op

__all__ = ["libsvm_arithmetic", "in_order_scores", "unavailable_reason"]

_KERNEL_CODES = {"linear": 0, "poly": 1, "rbf": 2, "sigmoid": 3}
_ROWS_WORK = 1 << 18  # products per row block worth a thread
_FLAGS = ("-O2", "-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math")


def _setup(lib):
    lib.woodstar_svm_kernel.restype = ctypes.c_int64
    lib.woodstar_svm_kernel.argtypes = [
        ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
        ctypes.c_int64, ctypes.c_int64, ctypes.c_double, ctypes.c_double, ctypes.c_int64,
        ctypes.c_void_p]
    lib.woodstar_libm_exp.restype = None
    lib.woodstar_libm_exp.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p]
    lib.woodstar_in_order_scores.restype = None
    lib.woodstar_in_order_scores.argtypes = [
        ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p,
        ctypes.c_int64, ctypes.c_void_p]
    _ddot_address()  # fails here, once, if SciPy's BLAS cannot be reached


_LIBRARY = NativeLibrary(Path(__file__).parent.parent / "libsvm_kernel.c", _FLAGS, _setup,
                         "libsvm's kernel arithmetic")
_DDOT = []


def _ddot_address() -> int:
    """The address of SciPy's ``ddot`` (what scikit-learn's ``_cython_blas._dot`` calls
    for libsvm)."""
    if not _DDOT:
        from scipy.linalg import cython_blas

        capsule = cython_blas.__pyx_capi__["ddot"]
        get_name = ctypes.pythonapi.PyCapsule_GetName
        get_name.restype, get_name.argtypes = ctypes.c_char_p, [ctypes.py_object]
        get_pointer = ctypes.pythonapi.PyCapsule_GetPointer
        get_pointer.restype, get_pointer.argtypes = ctypes.c_void_p, [ctypes.py_object,
                                                                       ctypes.c_char_p]
        _DDOT.append(get_pointer(capsule, get_name(capsule)))
    return _DDOT[0]


def libsvm_arithmetic():
    """The compiled library, or None (``unavailable_reason()`` says why)."""
    return _LIBRARY.load()


def unavailable_reason():
    return None if _LIBRARY.load() is not None else _LIBRARY.reason


def _address(array: np.ndarray) -> int:
    return array.ctypes.data


def _dense_float64(X):
    """X as the C code takes it (float rows widened to float64, exactly, as
    scikit-learn's input check does), or None (sparse input: the reference)."""
    if type(X) is not np.ndarray or X.dtype.kind != "f" or X.ndim != 2:
        return None
    return np.ascontiguousarray(X, dtype=np.float64)


@register_cpu_op("svm_kernel")
def _svm_kernel(op, context):
    lib = libsvm_arithmetic()
    if lib is None:
        return lambda X: tuple(op.reference([X]))
    sv = np.ascontiguousarray(op.support_vectors, dtype=np.float64)
    code, ddot = _KERNEL_CODES[op.kernel], _ddot_address()
    gamma, coef0, degree = float(op.gamma), float(op.coef0), int(op.degree)
    # rows split over threads once a block holds enough work to pay for the hand-off;
    # each kernel value is computed alone, so the answer does not depend on the split
    blocks = RowBlocks(context.n_threads, min_rows=max(2, _ROWS_WORK // (sv.size + 1)))

    def kernel_values(rows):
        out = np.empty((rows.shape[0], sv.shape[0]))
        if lib.woodstar_svm_kernel(ddot, code, _address(rows), rows.shape[0], _address(sv),
                                   sv.shape[0], sv.shape[1], gamma, coef0, degree,
                                   _address(out)) != 0:
            raise MemoryError("libsvm kernel: no scratch row")
        return out

    def run(X):
        rows = _dense_float64(X)
        if rows is None:
            return tuple(op.reference([X]))
        return (blocks.run(kernel_values, rows),)

    return run


def in_order_scores(K: np.ndarray, coef: np.ndarray, intercept: np.ndarray):
    """``K @ coef.T + intercept`` summed term after term, as libsvm sums its decision
    values; None where the C code does not take the operands."""
    lib = libsvm_arithmetic()
    K = _dense_float64(K)
    if lib is None or K is None or coef.dtype != np.float64 or intercept.dtype != np.float64:
        return None
    coef, intercept = np.ascontiguousarray(coef), np.ascontiguousarray(intercept)
    out = np.empty((K.shape[0], coef.shape[0]))
    lib.woodstar_in_order_scores(_address(K), K.shape[0], K.shape[1], _address(coef),
                                 _address(intercept), coef.shape[0], _address(out))
    return out


@register_cpu_op("svm_pairwise_proba")
def _svm_pairwise_proba(op, context):
    from ...ir.families.svm import multiclass_probability

    lib = libsvm_arithmetic()
    if lib is None:
        return lambda dec: tuple(op.reference([dec]))

    def libm_exp(x):
        x = np.ascontiguousarray(x, dtype=np.float64)
        out = np.empty_like(x)
        lib.woodstar_libm_exp(_address(x), x.size, _address(out))
        return out

    return lambda dec: (multiclass_probability(op.pairwise(dec, libm_exp)),)
