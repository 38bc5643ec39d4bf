"""A linear model's NumPy calls in one native call (woodstar/runtimes/linear_entry.c): the
input check, a scaler's column-wise steps, the product, the intercept and the logistic
link, with the answers of the NumPy route to the bit. Small calls use the C call's own
buffers; larger ones (where the CPU steps rows as vectors) buffers from NumPy.

The product keeps NumPy's BLAS order because it *is* NumPy's BLAS call: the C code calls
``?dot``/``?gemv``/``?gemm`` of the BLAS library NumPy is linked with (found beside
NumPy), with the arguments NumPy's matmul passes for those shapes. An entry is built
only when a check on random rows gives the NumPy route's answers exactly; otherwise
(another BLAS, no compiler, shapes or steps the C code does not take) the caller keeps
the NumPy route.
"""

from __future__ import annotations

import ctypes
import glob
import math
import os
from pathlib import Path

import numpy as np

from ..ir import INPUT
from ..ir.transforms import apply_post_transform
from ._native import NativeLibrary, simd_code, simd_name

__all__ = ["LinearNativeEntry", "limit_simd_rows", "linear_entry", "numpy_blas",
           "simd_rows"]

_FLAGS = ("-O2", "-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math")
_STEP_CODES = {"add": 1, "sub": 2, "mul": 3, "div": 4}
_CHECK_NAN, _CHECK_RANGE = 1, 2
_LINK_CODES = {"identity": 1, "sigmoid_binary": 2}  # any other link: NumPy's, after the call
# Where it prepares one value at a time, the one call is faster than the NumPy route up
# to 64 rows (NumPy's SIMD ufuncs win on more; docs/benchmarks.md, "A linear model's small
# calls in one native call"). With AVX2 or AVX-512 it is faster at every size for one
# output ("Every size of call"): up to 255 rows in the C call's own buffers (16384 row
# values and 256 scores), beyond that in NumPy's.
_MAX_ROWS_SCALAR, _MAX_ROWS_SIMD, _MAX_CELLS = 64, 255, 16384
_MAX_ROWS = None  # set for a benchmark; else by the CPU
_ANY_ROWS = 2 ** 62  # with SIMD: the caller bounds it by the rows of one batch
_CHECK_ROWS = 2053  # a size OpenBLAS splits over its threads, and not a round one
_MAX = {"float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}
_F32, _F64 = np.dtype(np.float32), np.dtype(np.float64)


class _Spec(ctypes.Structure):
    _fields_ = [("n_features", ctypes.c_int64), ("n_outputs", ctypes.c_int64),
                ("rows_double", ctypes.c_int64), ("check", ctypes.c_int64),
                ("limit", ctypes.c_double), ("n_steps", ctypes.c_int64),
                ("step_ops", ctypes.c_void_p), ("operands", ctypes.c_void_p),
                ("product_double", ctypes.c_int64), ("coef", ctypes.c_void_p),
                ("coef_fortran", ctypes.c_int64),
                ("raw_double", ctypes.c_int64), ("intercept", ctypes.c_void_p),
                ("link", ctypes.c_int64), ("dot", ctypes.c_void_p), ("gemv", ctypes.c_void_p),
                ("steps_float", ctypes.c_int64), ("tiled_operands", ctypes.c_void_p),
                ("float_operands", ctypes.c_void_p), ("period", ctypes.c_int64),
                ("gemm", ctypes.c_void_p)]


def _setup(lib):
    lib.woodstar_linear_layout.restype = ctypes.c_int64
    if lib.woodstar_linear_layout() != 2000 + ctypes.sizeof(_Spec):
        raise RuntimeError("the C structure differs from the Python side")
    lib.woodstar_linear_simd.restype = ctypes.c_int64
    lib.woodstar_linear_limit_simd.restype = ctypes.c_int64
    lib.woodstar_linear_limit_simd.argtypes = [ctypes.c_int64]
    lib.woodstar_linear_predict.restype = ctypes.c_int64
    lib.woodstar_linear_predict.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                            ctypes.c_void_p, ctypes.c_void_p,
                                            ctypes.c_void_p, ctypes.c_void_p]


_LIBRARY = NativeLibrary(Path(__file__).parent / "linear_entry.c", _FLAGS, _setup,
                         "the linear models' native entry")
_BLAS = {}


def numpy_blas():
    """{"sdot", "ddot", "sgemv", "dgemv", "sgemm", "dgemm"} -> address in the BLAS
    library NumPy's wheels bundle (scipy-openblas, symbols ``scipy_cblas_*64_``), or
    None where it is not found. Integers are passed as 64-bit, which a 32-bit-integer
    build reads too."""
    if "routines" not in _BLAS:
        _BLAS["routines"] = _find_numpy_blas()
    return _BLAS["routines"]


def _find_numpy_blas():
    numpy_dir = Path(np.__file__).resolve().parent
    candidates = sorted(glob.glob(str(numpy_dir.parent / "numpy.libs" / "*openblas*")))
    candidates += sorted(glob.glob(str(numpy_dir / ".dylibs" / "*openblas*")))
    for path in candidates:
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_", "64_"), ("scipy_", ""), ("", "64_"), ("", "")):
            try:
                return {name: ctypes.cast(getattr(lib, f"{prefix}cblas_{name}{suffix}"),
                                          ctypes.c_void_p).value
                        for name in ("sdot", "ddot", "sgemv", "dgemv", "sgemm", "dgemm")}
            except AttributeError:
                continue
    return None


def _address(array: np.ndarray) -> int:
    try:  # the buffer protocol: the fastest way to a writable array's data pointer
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError, BufferError):
        return array.ctypes.data


def _chain_parts(ir):
    """(column_ops steps, the linear op) of a graph that is a chain of column-wise steps
    ending in one dense BLAS-summed linear model, else None."""
    nodes = ir.graph.nodes
    if not nodes or nodes[-1].kind != "linear":
        return None
    previous = (INPUT,)
    for node in nodes:
        if tuple(node.inputs) != previous:
            return None
        previous = tuple(node.outputs)
    if previous != (ir.graph.raw, ir.graph.transformed):
        return None
    steps = [node.op for node in nodes[:-1]]
    if any(node.kind != "column_ops" for node in nodes[:-1]):
        return None
    return steps, nodes[-1].op


def _step_operands(steps, dtype):
    """(op codes, operands as float64 rows): each operand as the NumPy route applies it to
    rows of ``dtype`` (rounded to it first where the source does)."""
    codes, operands = [], []
    for columns in steps:
        for name, operand, cast in zip(columns.ops, columns.operands, columns.cast_operand):
            if name not in _STEP_CODES or operand.ndim != 1 or operand.dtype.kind != "f":
                return None
            codes.append(_STEP_CODES[name])
            operands.append((operand.astype(dtype) if cast else operand).astype(np.float64))
    return codes, operands


class LinearNativeEntry:
    """``entry(X)``: ``(raw, transformed)`` of the NumPy route for a C-contiguous array of
    the route's dtype, ``n_features`` wide, of 1 to ``max_rows`` rows (up to
    ``stack_rows`` in the C call's own buffers); None for anything else and for values
    the input check refuses, so that the caller's full path handles them (and words its
    errors) as before."""

    def __init__(self, lib, blas, steps, linear, dtype: str, refuse_nan: bool,
                 refuse_inf: bool, source_precision: str):
        self.dtype = np.dtype(dtype)
        rows = self.dtype
        self.n_features, self.n_outputs = linear.n_features, linear.n_outputs
        product = np.result_type(rows, linear.coef.dtype)
        raw = np.result_type(product, linear.intercept.dtype)
        codes, operands = _step_operands(steps, rows)
        # Kept referenced: the C structure holds their addresses.
        self._codes = np.ascontiguousarray(codes, dtype=np.int64)
        self._operands = np.ascontiguousarray(
            np.stack(operands) if operands else np.zeros((1, self.n_features)))
        # The source's memory order (NumPy's matmul passes BLAS other arguments for it).
        coef = linear.coef_as_source
        self._coef = coef if coef.dtype == product else coef.astype(product, order="K")
        self._intercept = np.ascontiguousarray(linear.intercept, dtype=np.float64)
        self.raw_dtype = raw
        self.post_transform = linear.post_transform
        self._link = _LINK_CODES.get(linear.post_transform, 0)
        self.width = 2 if self._link == _LINK_CODES["sigmoid_binary"] else self.n_outputs
        simd = bool(lib.woodstar_linear_simd())
        # Up to stack_rows in the C call's buffers (MAX_CELLS row values, 256 scores).
        # With one output, larger calls take buffers from NumPy where the rows are
        # stepped as vectors. Several outputs stop at the stack's 256 scores (past them
        # NumPy's softmax dominates and the entry gained nothing), one row where the
        # rows are stepped value by value.
        ceiling = _MAX_ROWS or (_MAX_ROWS_SIMD if simd else _MAX_ROWS_SCALAR)
        self.stack_rows = min(ceiling, _MAX_CELLS // self.n_features, 256 // self.n_outputs)
        if not simd and self.n_outputs > 1:
            self.stack_rows = 1
        self.max_rows = _MAX_ROWS or (_ANY_ROWS if simd and self.n_outputs == 1
                                      else self.stack_rows)
        double = product == _F64
        self.product_dtype = np.dtype(product)
        # No step and rows of the product's dtype: the C call multiplies the rows where
        # they lie (it only checks them), so it needs no row buffer.
        self.rows_in_place = not codes and rows == self.product_dtype
        # Float32 rows whose operands are all float32 values step in float32 (the same
        # answers: linear_entry.c, prepare_floats_avx512).
        floats = self._operands.astype(np.float32)
        steps_float = rows == _F32 and np.array_equal(floats.astype(np.float64), self._operands)
        # Repeated to a multiple of 16 values: the SIMD forms read the rows as one run.
        period = math.lcm(self.n_features, 16)
        self._tiled_operands = np.ascontiguousarray(
            np.tile(self._operands, (1, period // self.n_features)))
        self._float_operands = self._tiled_operands.astype(np.float32)
        self._spec = _Spec(
            self.n_features, self.n_outputs, int(rows == _F64),
            (_CHECK_NAN if refuse_nan else 0) | (_CHECK_RANGE if refuse_inf else 0),
            _MAX[str(np.dtype(source_precision))], len(codes), _address(self._codes),
            _address(self._operands), int(double), self._coef.ctypes.data,
            int(linear.coef_layout == "F"), int(raw == _F64),
            _address(self._intercept), self._link, blas["ddot" if double else "sdot"],
            blas["dgemv" if double else "sgemv"], int(steps_float),
            _address(self._tiled_operands), _address(self._float_operands), period,
            blas["dgemm" if double else "sgemm"])
        self._spec_address = ctypes.addressof(self._spec)
        self._predict = lib.woodstar_linear_predict
        self._cells = self.n_outputs + (self.width if self._link == 2 else 0)

    def __call__(self, X: np.ndarray):
        n = X.shape[0]
        if not (0 < n <= self.max_rows and X.shape[1] == self.n_features
                and X.dtype == self.dtype and X.flags.c_contiguous):
            return None
        out = np.empty(n * self._cells, dtype=self.raw_dtype)  # both results, one block
        split = n * self.n_outputs
        address = _address(out)
        rows = sums = None  # up to stack_rows, the C call's own buffers
        if n > self.stack_rows:
            if not self.rows_in_place:
                rows = np.empty(n * self.n_features, dtype=self.product_dtype)
            sums = np.empty(split, dtype=self.product_dtype)
        if self._predict(self._spec_address, _address(X), n, address,
                         address + out.itemsize * split,
                         None if rows is None else _address(rows),
                         None if sums is None else _address(sums)) != -1:
            return None
        raw = out[:split].reshape(n, self.n_outputs)
        if self._link == 1:
            return raw, raw
        if self._link == 2:
            return raw, out[split:].reshape(n, 2)
        return raw, apply_post_transform(self.post_transform, raw)


def _agrees(entry, graph, n_features, dtype) -> bool:
    """Whether ``entry`` gives ``graph``'s answers, dtypes and shapes on random rows of
    every size class it takes (one row; several rows; past its own buffers)."""
    rng = np.random.default_rng(0)
    sizes = {1, min(3, entry.max_rows), entry.stack_rows}
    if entry.max_rows > entry.stack_rows:  # the caller's buffers, and BLAS's threads
        sizes |= {entry.stack_rows + 1, min(entry.max_rows, _CHECK_ROWS)}
    for n in sorted(sizes):
        for _ in range(8):
            X = (rng.standard_normal((n, n_features)) * 4.0).astype(dtype)
            mine, theirs = entry(X), graph(X)
            if mine is None:
                return False
            for a, b in zip(mine, theirs):
                b = np.asarray(b)
                if a.dtype != b.dtype or a.shape != b.shape or not np.array_equal(
                        a, b, equal_nan=True):
                    return False
    return True


def simd_rows():
    """The instruction set the entry prepares rows with: "avx512" (eight values at a
    time), "avx2" (four), or None (one at a time; the answers are the same)."""
    lib = _LIBRARY.load()
    return None if lib is None else simd_name(lib.woodstar_linear_simd())


def limit_simd_rows(name):
    """Prepare rows with at most ``name`` from now on, in this process (for tests and
    A/B timing); returns the form taken. Entries made before keep their row ceiling."""
    lib = _LIBRARY.load()
    if lib is None:
        return None
    return simd_name(lib.woodstar_linear_limit_simd(simd_code(name)))


def linear_entry(ir, graph, precision: str, refuse_nan: bool, refuse_inf: bool):
    """The native entry for ``ir``'s small calls at ``precision`` (``graph``: the NumPy
    route's callable, which it must agree with), or None where none applies."""
    if os.environ.get("WOODSTAR_LINEAR_ENTRY", "1") == "0":  # for A/B timing
        return None
    parts = _chain_parts(ir)
    if parts is None:
        return None
    steps, linear = parts
    if linear.summation != "blas" or linear.coef.dtype.kind != "f" or linear.coef.shape[1] < 2 \
            or _step_operands(steps, np.dtype(precision)) is None \
            or linear.coef.shape[0] > 256:
        return None
    lib, blas = _LIBRARY.load(), numpy_blas()
    if lib is None or blas is None:
        return None
    entry = LinearNativeEntry(lib, blas, steps, linear, precision, refuse_nan, refuse_inf,
                              ir.input_precision)
    return entry if _agrees(entry, graph, entry.n_features, precision) else None
