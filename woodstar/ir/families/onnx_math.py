"""ONNX-ML ops for plain ONNX math operators and reductions as skl2onnx's graphs use
them (PCA with whitening, KMeans, naive Bayes, QDA, KBinsDiscretizer, PolynomialFeatures,
calibration, bagging, AdaBoost): ``onnx_math`` (Exp, Sqrt, Pow by 2 or 3),
``onnx_reduce``, ``onnx_gemm`` (a computed bias), ``onnx_reduce_prod``, ``onnx_fill``,
``onnx_stack_mean``, ``onnx_row_sums``, ``onnx_is_zero``, ``onnx_indicator`` and
``onnx_mlas_tanh``, each as ONNX Runtime's CPU kernel computes it (1.32, x86-64 with
AVX-512F). The shared array operations and the scalar routines are in ``onnx_ops``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op
from .onnx_neighbors import NeighborsNumpyMath, eigen_sse_sum, row_sums
from .onnx_ops import (_LN2, SGEMM_PACKED_STRIDE_K, NumpyMath, _f32, exact_fma32, glibc_expf,
                       glibc_logf, logf_reduction, mlas_exp, mlas_tanh, slice_sums, _LOGF_INVC)

__all__ = []


# ------------------------------------------- ReduceProd and ConstantOfShape (columns)
@register_op
@dataclass(frozen=True, eq=False)
class OnnxReduceProd(Op):
    """ONNX ``ReduceProd`` over each row's ``width`` float32 columns (keepdims): ONNX
    Runtime multiplies them one after the other, first to last (no vectorized
    path for products)."""

    kind = "onnx_reduce_prod"

    width: int

    def output_types(self, input_types):
        self.numeric_input(input_types, self.width)
        return [ValueType.floats(1)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore", under="ignore"):
            return [reduce_prod_columns(self, inputs[0])]

    def to_saved(self):
        return {"width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


def reduce_prod_columns(op, X, math=NumpyMath):
    X = math.cast(X, "float32")
    out = math.column(X, 0)
    for j in range(1, op.width):
        out = out * math.column(X, j)
    return math.stack([out])


@register_op
@dataclass(frozen=True, eq=False)
class OnnxFill(Op):
    """ONNX ``ConstantOfShape`` of a ``Shape`` of a block: ``width`` columns holding
    ``value`` (float32) on every row of its input, whatever that row holds."""

    kind = "onnx_fill"

    width: int
    value: float

    def __post_init__(self):
        object.__setattr__(self, "value", float(np.float32(self.value)))

    def output_types(self, input_types):
        (value,) = input_types
        return [ValueType.floats(self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        return [np.full((inputs[0].shape[0], self.width), self.value, np.float32)]

    def to_saved(self):
        return {"width": self.width, "value": self.value}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


__all__ += ["OnnxReduceProd", "reduce_prod_columns", "OnnxFill"]


# ------------------------------------------- math operators, reductions, Gemm with a bias
# skl2onnx's graphs of PCA(whiten), KMeans and the naive Bayes classifiers: Exp, Sqrt,
# Pow, Log, ReduceSum, ReduceSumSquare, ReduceLogSumExp, ArgMax/ArgMin and a Gemm whose
# bias is computed. Each repeats ONNX Runtime's CPU kernel (1.32, x86-64 with AVX-512F).
def eigen_log(x):
    """ONNX Runtime's float ``Log`` of a whole tensor (NumPy, for constants): Eigen's
    vectorized logarithm (``eigen_log_packets``) on the first ``size - size % 4``
    elements, ``std::log`` (glibc's logf) on the rest."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    with np.errstate(all="ignore"):
        out = np.array(eigen_log_packets(ReduceNumpyMath, flat), np.float32)
        tail = flat.size - flat.size % 4
        out[tail:] = glibc_logf(ReduceNumpyMath, flat[tail:])
    return out.reshape(np.shape(x))


MATH_FUNCTIONS = ("exp", "sqrt", "square", "cube", "sign", "sign_class")
# Cast(Sign(x), int64) on x86-64: a NaN's sign casts to int64's smallest value
SIGN_CLASSES = (-2 ** 63, -1, 0, 1)


def math_columns(op, X, math=NumpyMath):
    """``op.function`` of each column: ``exp`` MLAS's (``mlas_exp``), ``sqrt`` IEEE's
    (correctly rounded, as ``sqrtps``), ``square``/``cube`` ONNX Runtime's Pow by a
    scalar 2 or 3 (``x * x``, ``x * x * x``), ``sign`` ONNX Runtime's Sign (1, -1, +0
    for either zero, a NaN as it is), ``sign_class`` the index of ``Cast(Sign(x),
    int64)`` in ``SIGN_CLASSES`` (a NaN's cast is int64's smallest value, index 0)."""
    X = math.cast(X, "float32")
    out = []
    for j in range(op.width):
        x = math.column(X, j)
        if op.function == "exp":
            out.append(mlas_exp(math, x))
        elif op.function == "sqrt":
            out.append(math.sqrt(x))
        elif op.function in ("sign", "sign_class"):
            out.append(_sign(math, x, op.function == "sign_class"))
        elif op.function == "square":
            out.append(x * x)
        else:
            out.append(x * x * x)
    return math.stack(out)


def _sign(math, x, as_class):
    zero = math.scalar32(0.0, x)
    if as_class:  # the index in SIGN_CLASSES: NaN 0, -1 1, 0 2, 1 3
        values = [math.scalar32(v, x) for v in (3.0, 1.0, 2.0, 0.0)]
    else:  # Sign: -0 gives +0, a NaN stays as it is
        values = [math.scalar32(1.0, x), math.scalar32(-1.0, x), zero, x]
    positive, negative, zeros, other = values
    return math.where(x > zero, positive, math.where(x < zero, negative,
                                                     math.where(x == zero, zeros, other)))


@register_op
@dataclass(frozen=True, eq=False)
class OnnxMath(Op):
    """An ONNX unary float operator as ONNX Runtime's kernel computes it
    (``math_columns``)."""

    kind = "onnx_math"

    function: str
    width: int

    def validate(self):
        self.expect(self.function in MATH_FUNCTIONS,
                    f"function {self.function!r} not in {MATH_FUNCTIONS}")
        return self

    def output_types(self, input_types):
        return [ValueType.floats(self.numeric_input(input_types, self.width).width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [math_columns(self, inputs[0], ReduceNumpyMath)]

    def to_saved(self):
        return {"function": self.function, "width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


REDUCE_FUNCTIONS = ("sum", "sum_square", "log_sum_exp", "argmax", "argmin", "max")


def eigen_sse_max(math, columns, start):
    """The maximum of ``columns`` in the order Eigen's vectorized ``maxCoeff`` takes a
    contiguous float32 segment whose first ``start`` terms precede a 16-byte boundary
    (the order of ``eigen_sse_sum``), each step ``std::max(kept, met)``: packets of
    four from the boundary (two accumulators past two packets), the lanes as
    max(max(0, 2), max(1, 3)), then the leading and trailing terms one by one; under
    four terms past the boundary, one by one from the first. Which NaN or which of -0
    and +0 comes out depends on that order."""
    def keep(kept, met):  # std::max: the kept value unless the met one is larger
        return math.where(kept < met, met, kept)

    k = len(columns)
    start = min(start, k)
    aligned = ((k - start) // 4) * 4
    if aligned == 0:
        top = columns[0]
        for column in columns[1:]:
            top = keep(top, column)
        return top
    lanes = list(columns[start:start + 4])
    if aligned > 4:
        second = list(columns[start + 4:start + 8])
        aligned2 = ((k - start) // 8) * 8
        for index in range(start + 8, start + aligned2, 8):
            lanes = [keep(a, b) for a, b in zip(lanes, columns[index:index + 4])]
            second = [keep(a, b) for a, b in zip(second, columns[index + 4:index + 8])]
        lanes = [keep(a, b) for a, b in zip(lanes, second)]
        if aligned > aligned2:
            tail = columns[start + aligned2:start + aligned2 + 4]
            lanes = [keep(a, b) for a, b in zip(lanes, tail)]
    top = keep(keep(lanes[0], lanes[2]), keep(lanes[1], lanes[3]))
    for column in list(columns[:start]) + list(columns[start + aligned:]):
        top = keep(top, column)
    return top


def reduce_columns(op, X, math=NumpyMath):
    """ONNX Runtime's reductions over the last axis of an (n, groups, size) float32
    tensor held as (n, groups * size) columns; one output column per group:

    * ``sum``: ReduceSum, Eigen's vectorized sum of each contiguous group
      (``eigen_sse_sum``), whose order depends on where the group starts against a
      16-byte boundary: group g of row i starts ``(i * groups + g) * size`` floats
      into a 64-byte aligned buffer;
    * ``sum_square``: ReduceSumSquare, ``x * x`` added term after term;
    * ``log_sum_exp``: ReduceLogSumExp, ``log(sum(exp(x - max))) + max`` with
      ``std::exp`` and ``std::log`` (glibc's expf and logf), the exps added in order;
      the maximum skips NaN and infinities (so +inf gives +inf, NaN a NaN);
    * ``argmax``/``argmin``: the first strictly largest (smallest) column, the first
      one unless a later one compares larger (a NaN never does), as a float;
    * ``max``: ReduceMax, ``std::max(m, x)`` (``m < x ? x : m``: a NaN met is skipped,
      a NaN kept stays, of equal values such as -0 and +0 the kept one stays) in the
      order of Eigen's vectorized maximum, which depends on where the group starts
      against a 16-byte boundary as the sum's does (``eigen_sse_max``)."""
    X = math.cast(X, "float32")
    width = op.groups * op.size
    starts = math.row_starts(X, width) if op.whole_call else None
    out = []
    for g in range(op.groups):
        columns = [math.column(X, g * op.size + j) for j in range(op.size)]
        if op.function == "sum":
            if starts is None:
                out.append(eigen_sse_sum(columns, (-g * op.size) % 4))
                continue
            group_starts = (starts - g * op.size) % 4
            total = eigen_sse_sum(columns, 0)
            for start in (1, 2, 3):
                total = math.where(group_starts == start, eigen_sse_sum(columns, start), total)
            out.append(total)
        elif op.function == "max":
            if starts is None:
                out.append(eigen_sse_max(math, columns, (-g * op.size) % 4))
                continue
            group_starts = (starts - g * op.size) % 4
            top = eigen_sse_max(math, columns, 0)
            for start in (1, 2, 3):
                top = math.where(group_starts == start, eigen_sse_max(math, columns, start), top)
            out.append(top)
        elif op.function == "sum_square":
            total = columns[0] * columns[0]
            for c in columns[1:]:
                total = total + c * c
            out.append(total)
        elif op.function == "log_sum_exp":
            # the kernel's maximum skips NaN and +-inf: it starts from the first value
            # (0 if that is infinite) and takes each finite value not below it
            inf = math.scalar32(np.inf, columns[0])
            top = math.where(math.abs(columns[0]) == inf, math.scalar32(0.0, columns[0]),
                             columns[0])
            for c in columns:
                skip = (math.abs(c) == inf) | (c != c) | (c < top)
                top = math.where(skip, top, c)
            # glibc_expf reads (n, 1) matrices
            total = glibc_expf(math, (columns[0] - top)[:, None])[:, 0]
            for c in columns[1:]:
                total = total + glibc_expf(math, (c - top)[:, None])[:, 0]
            out.append(glibc_logf(math, total) + top)
        else:
            best, index = columns[0], math.zeros(columns[0], "float32")
            for j, c in enumerate(columns[1:], start=1):
                better = c > best if op.function == "argmax" else c < best
                best = math.where(better, c, best)
                index = math.where(better, math.scalar32(float(j), c), index)
            out.append(index)
    return math.stack(out)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxReduce(Op):
    """An ONNX reduction over consecutive groups of ``size`` columns (the last axis of
    an (n, groups, size) tensor), as ONNX Runtime's kernel computes it
    (``reduce_columns``). A ``sum`` whose order depends on a row's place in the call
    (``groups * size`` not a multiple of 4) is ``whole_call``: a call is never split."""

    kind = "onnx_reduce"

    function: str
    groups: int
    size: int

    @property
    def whole_call(self):
        return self.function in ("sum", "max") and self.size >= 4 and \
            (self.groups * self.size) % 4 != 0

    def validate(self):
        self.expect(self.function in REDUCE_FUNCTIONS,
                    f"function {self.function!r} not in {REDUCE_FUNCTIONS}")
        self.expect(self.groups >= 1 and self.size >= 1, "groups and size must be positive")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.groups * self.size)
        return [ValueType.floats(self.groups)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [reduce_columns(self, inputs[0], ReduceNumpyMath)]

    def to_saved(self):
        return {"function": self.function, "groups": self.groups, "size": self.size}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


def gemm_with_bias(op, X, C, weights, math=NumpyMath):
    """ONNX Runtime's Gemm ``alpha * X @ weights.T + C`` (beta 1) with a prepacked
    constant ``weights`` (N, K) and a computed C ((n, 1) or (n, N)): C is copied into
    the output, then MLAS's packed SGEMM adds K slices of 256, each one FMA per column
    from 0, then ``fma(acc, alpha, out)`` (rounded once: ``exact_fma32``). Without C
    (beta 0, ``C`` None) the first slice writes ``alpha * acc``."""
    X = math.cast(X, "float32")
    alpha = math.scalar32(op.alpha, X)
    out = None if C is None else math.cast(C, "float32")
    for acc in slice_sums(math, X, weights, SGEMM_PACKED_STRIDE_K):
        if out is None:
            out = acc * alpha
        else:
            out = exact_fma32(math, acc, alpha, out)  # C (n, 1) broadcasts over the columns
    return out


@register_op
@dataclass(frozen=True, eq=False)
class OnnxGemm(Op):
    """ONNX ``Gemm(X, W, C)`` with a constant W (``weights``, (N, K), transB applied)
    and a computed C of width 1 or N, beta 1, or no C (``bias_width`` 0: beta 0)
    (``gemm_with_bias``)."""

    kind = "onnx_gemm"

    weights: np.ndarray
    alpha: float = 1.0
    bias_width: int = 1

    def __post_init__(self):
        value = np.ascontiguousarray(self.weights, dtype=np.float32)
        value.flags.writeable = False
        object.__setattr__(self, "weights", value)
        object.__setattr__(self, "alpha", float(np.float32(self.alpha)))

    @property
    def n_features(self):
        return int(self.weights.shape[1])

    @property
    def n_outputs(self):
        return int(self.weights.shape[0])

    def validate(self):
        self.expect(self.weights.ndim == 2, "weights must be a matrix")
        self.expect(self.bias_width in (0, 1, self.n_outputs),
                    f"a bias of width {self.bias_width} for {self.n_outputs} outputs")
        return self

    def output_types(self, input_types):
        self.expect(len(input_types) == 1 + (self.bias_width > 0),
                    "Gemm reads the features and its bias (none with beta 0)")
        self.numeric_input(input_types[:1], self.n_features)
        if self.bias_width:
            self.expect_width(input_types[1], self.bias_width)
        return [ValueType.floats(self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore"):
            bias = inputs[1] if self.bias_width else None
            return [gemm_with_bias(self, inputs[0], bias, self.weights, ReduceNumpyMath)]

    def to_saved(self):
        return {"alpha": self.alpha, "bias_width": self.bias_width}, {"weights": self.weights}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(weights=arrays["weights"], **meta)


def vector_product_chunks(n_features):
    """The sizes of the runs MatMul by a vector sums on its own (measured on ONNX
    Runtime 1.32, x86-64): fours, then a pair, then a single term."""
    return [4] * (n_features // 4) + [2] * (n_features % 4 // 2) + [1] * (n_features % 2)


def vector_product_columns(op, X, weights, math=NumpyMath):
    """ONNX Runtime's ``MatMul`` of float32 rows by a constant vector (``weights``,
    (K,) float32): each run of ``vector_product_chunks`` is summed term after term
    (``x * w`` rounded, then added), the runs' sums are added left to right, and the
    total gets ``+ 0`` (so a zero is never negative). A row's answer does not depend
    on the call (found by probing the kernel with cancelling terms and checked on
    K = 1..513 with 1 to 1000 rows)."""
    X = math.cast(X, "float32")
    total, j = None, 0
    for size in vector_product_chunks(op.n_features):
        part = None
        for k in range(j, j + size):
            product = X[:, k] * weights[k]
            part = product if part is None else part + product
        total = part if total is None else total + part
        j += size
    return math.stack([total + _f32(math, 0.0, total)])


@register_op
@dataclass(frozen=True, eq=False)
class OnnxVectorProduct(Op):
    """ONNX ``MatMul(X, w)`` by a constant vector ``w`` (skl2onnx's Poisson, Gamma and
    Tweedie regressors): one float32 column (``vector_product_columns``)."""

    kind = "onnx_vector_product"

    weights: np.ndarray

    def __post_init__(self):
        value = np.ascontiguousarray(self.weights, dtype=np.float32)
        value.flags.writeable = False
        object.__setattr__(self, "weights", value)

    @property
    def n_features(self):
        return int(self.weights.shape[0])

    def validate(self):
        self.expect(self.weights.ndim == 1 and self.weights.size > 0,
                    "weights must be a non-empty vector")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(1)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore"):
            return [vector_product_columns(self, inputs[0], self.weights)]

    def to_saved(self):
        return {}, {"weights": self.weights}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(weights=arrays["weights"])


__all__ += ["OnnxVectorProduct", "vector_product_columns", "vector_product_chunks"]


class ReduceNumpyMath(NeighborsNumpyMath):
    """``NeighborsNumpyMath`` and the ``frexp`` ``glibc_logf`` reads."""

    @staticmethod
    def frexp(x):
        """(mantissa in [0.5, 1), exponent), both float64, of positive finite x."""
        mantissa, exponent = np.frexp(x)
        return mantissa.astype(np.float64), exponent.astype(np.float64)


__all__ += ["OnnxMath", "OnnxReduce", "OnnxGemm", "math_columns", "reduce_columns",
            "gemm_with_bias", "eigen_log", "ReduceNumpyMath",
            "MATH_FUNCTIONS", "REDUCE_FUNCTIONS"]


# ---------------------------------------- ReduceMean over stacked blocks (axis 0)
@register_op
@dataclass(frozen=True, eq=False)
class OnnxStackMean(Op):
    """ONNX ``ReduceMean`` over axis 0 of ``count`` (n, width) float32 blocks stacked
    by ``Reshape`` to (1, n, width) and ``Concat`` on axis 0 (a BaggingClassifier's
    averaged probabilities): ONNX Runtime sums the blocks through MLAS's SGEMM by a
    row of ones, block after block (each product by 1 exact, each sum rounded once),
    then divides by ``count`` in float32."""

    kind = "onnx_stack_mean"

    width: int
    count: int

    def output_types(self, input_types):
        self.expect(len(input_types) == self.count,
                    f"{len(input_types)} inputs; this {self.kind} reads {self.count}")
        for value in input_types:
            self.expect_width(value, self.width)
            self.expect_numeric(value)
        return [ValueType.floats(self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore"):
            return [stack_mean(self, inputs)]

    def to_saved(self):
        return {"width": self.width, "count": self.count}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


def stack_mean(op, blocks, math=NumpyMath):
    total = math.cast(blocks[0], "float32")
    for block in blocks[1:]:
        total = total + math.cast(block, "float32")
    return total / _f32(math, float(op.count), total)[:, None]


__all__ += ["OnnxStackMean", "stack_mean"]


# ------------------------------------ ReduceSum over a row, "== 0" (calibration)
@register_op
@dataclass(frozen=True, eq=False)
class OnnxRowSums(Op):
    """ONNX ``ReduceSum`` over each row's ``width`` float32 columns (axes [1],
    keepdims 1), in the order ONNX Runtime's Eigen reduction adds a row
    (``row_sums``: it depends on the row's position in the call modulo 4 floats)."""

    kind = "onnx_row_sums"

    width: int

    @property
    def whole_call(self):
        """A row's order depends on its place in the call unless the width is a
        multiple of 4 (or under 4): then a call is never split."""
        return self.width >= 4 and self.width % 4 != 0

    def output_types(self, input_types):
        self.numeric_input(input_types, self.width)
        return [ValueType.floats(1)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore"):
            return [row_sum_columns(self, inputs[0], NeighborsNumpyMath)]

    def to_saved(self):
        return {"width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


def row_sum_columns(op, X, math=NumpyMath):
    X = math.cast(X, "float32")
    columns = [math.column(X, j) for j in range(op.width)]
    return math.stack([row_sums(math, columns, math.row_starts(X, op.width))])


@register_op
@dataclass(frozen=True, eq=False)
class OnnxIsZero(Op):
    """``Cast(Not(Cast(x, bool)), float)``: 1.0 where x is zero (either sign), else
    0.0 (NaN is true as a bool, so 0.0)."""

    kind = "onnx_is_zero"

    width: int

    def output_types(self, input_types):
        return [ValueType.floats(self.numeric_input(input_types, self.width).width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        return [is_zero_columns(self, inputs[0])]

    def to_saved(self):
        return {"width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


def is_zero_columns(op, X, math=NumpyMath):
    X = math.cast(X, "float32")
    return math.cast(X == _f32(math, 0.0, X)[:, None], "float32")


__all__ += ["OnnxRowSums", "row_sum_columns", "OnnxIsZero", "is_zero_columns"]


# --------------------------------- indicator blocks (AdaBoost's SAMME graph)
INDICATORS = ("first_max_is", "truncates_to_zero")


@register_op
@dataclass(frozen=True, eq=False)
class OnnxIndicator(Op):
    """A 0.0/1.0 block from one float32 block (``indicator_columns``):
    ``first_max_is``: ``Equal(ArgMax(x), codes)``, column j 1.0 where the first
    largest column of the row (ONNX Runtime's ArgMax: a later column must be larger;
    a NaN never is) is ``codes[j]``; ``truncates_to_zero``: ``Equal(Cast(x, int32),
    0)``, 1.0 where x truncates to 0 (-1 < x < 1; NaN and values out of int32's range
    convert to INT32_MIN on x86)."""

    kind = "onnx_indicator"

    function: str
    width: int  # of the output
    input_width: int
    codes: tuple = ()

    def __post_init__(self):
        object.__setattr__(self, "codes", tuple(int(c) for c in self.codes))

    def validate(self):
        self.expect(self.function in INDICATORS, f"function {self.function!r} not in {INDICATORS}")
        if self.function == "first_max_is":
            self.expect(len(self.codes) == self.width, "one code per output column")
        else:
            self.expect(self.width == self.input_width, "one output column per input column")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.input_width)
        return [ValueType.floats(self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore"):
            return [indicator_columns(self, inputs[0])]

    def to_saved(self):
        return {"function": self.function, "width": self.width, "input_width": self.input_width,
                "codes": list(self.codes)}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


def indicator_columns(op, X, math=NumpyMath):
    X = math.cast(X, "float32")
    columns = [math.column(X, j) for j in range(op.input_width)]
    if op.function == "truncates_to_zero":
        one = _f32(math, 1.0, columns[0])
        return math.stack([math.cast((c < one) & (c > -one), "float32") for c in columns])
    best, index = columns[0], _f32(math, 0.0, columns[0])
    for j, c in enumerate(columns[1:], start=1):
        larger = c > best
        best = math.where(larger, c, best)
        index = math.where(larger, _f32(math, float(j), c), index)
    return math.stack([math.cast(index == _f32(math, float(code), index), "float32")
                       for code in op.codes])


__all__ += ["OnnxIndicator", "indicator_columns"]


@register_op
@dataclass(frozen=True, eq=False)
class OnnxMlasTanh(Op):
    """ONNX ``Tanh`` of a float32 block as ONNX Runtime computes it: MLAS's rational
    approximation (``mlas_tanh``; NaN stays NaN, infinities give +-1)."""

    kind = "onnx_mlas_tanh"

    width: int

    def output_types(self, input_types):
        return [ValueType.floats(self.numeric_input(input_types, self.width).width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore"):
            return [tanh_columns(self, inputs[0])]

    def to_saved(self):
        return {"width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


def tanh_columns(op, X, math=NumpyMath):
    return mlas_tanh(math, math.cast(X, "float32"))


__all__ += ["OnnxMlasTanh", "tanh_columns"]


# ------------------------------------------- Log and Pow of computed blocks (PowerTransformer)
def eigen_log_packets(math, x):
    """Eigen's vectorized float32 logarithm of a column (what ONNX Runtime's Log runs
    on whole packets of four; ``eigen_log`` for its constants): frexp, a rational (3, 3)
    approximation of log1p in float32 without fused multiply-adds, ``e * ln2`` added;
    0 gives -inf, +inf itself, below 0 or NaN a NaN."""
    x = math.cast(x, "float32")
    zero, one = math.scalar32(0.0, x), math.scalar32(1.0, x)
    inf = math.scalar32(np.inf, x)
    finite = math.where((x > zero) & (x < inf), x, one)
    mantissa, exponent = math.frexp(finite)  # exact float64: cast to float32 exactly
    m, e = math.cast(mantissa, "float32"), math.cast(exponent, "float32")
    below = m < math.scalar32(0.707106781186547524, x)
    shifted = m - one + math.where(below, m, zero)
    e = e - math.where(below, one, zero)
    c = [math.scalar32(v, x) for v in (0.18256296349849254, 1.0000000190281063,
                                       1.0000000190281136, 0.049616247954120038,
                                       0.59923249590823520, 1.4999999999999927, _LN2)]
    p = shifted * c[0] + c[1]
    p = shifted * p + c[2]
    p = shifted * p
    q = shifted * c[3] + c[4]
    q = shifted * q + c[5]
    q = shifted * q + one
    out = e * c[6] + p / q
    out = math.where(x == inf, x, out)
    out = math.where((x < zero) | (x != x), math.scalar32(np.nan, x), out)
    return math.where(x == zero, -inf, out)


def log_columns(op, X, math=NumpyMath):
    """ONNX Runtime's float ``Log`` of an (n, width) block: Eigen's packets of four on
    the first ``n * width - (n * width) % 4`` elements of the row-major tensor,
    ``std::log`` (glibc's logf) on the rest. Where ``width`` is a multiple of 4 no
    element is left over; otherwise the last elements of the call are (``whole_call``:
    ``math.rows_from_end`` counts a row's place from the call's end)."""
    X = math.cast(X, "float32")
    if op.width % 4:
        from_end = math.rows_from_end(X)  # float64, 0 on the last row
        rows = from_end + math.rows_from_start(X) + 1.0  # the call's row count, per row
        total = rows * float(op.width)
        left_over = total - math.floor(total / 4.0) * 4.0
    out = []
    for j in range(op.width):
        x = math.column(X, j)
        packets = eigen_log_packets(math, x)
        if op.width % 4:
            # elements after this one in the flat tensor
            after = from_end * float(op.width) + float(op.width - 1 - j)
            packets = math.where(after < left_over, glibc_logf(math, x), packets)
        out.append(packets)
    return math.stack(out)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxLog(Op):
    """ONNX ``Log`` of a computed float32 block as ONNX Runtime computes it
    (``log_columns``); ``whole_call`` where the width is not a multiple of 4."""

    kind = "onnx_log"

    width: int

    @property
    def whole_call(self):
        return self.width % 4 != 0

    def output_types(self, input_types):
        return [ValueType.floats(self.numeric_input(input_types, self.width).width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [log_columns(self, inputs[0], PositionNumpyMath)]

    def to_saved(self):
        return {"width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


class PositionNumpyMath(ReduceNumpyMath):
    """``ReduceNumpyMath`` and each row's place in the call, as float64."""

    @staticmethod
    def rows_from_end(X):
        return np.arange(X.shape[0] - 1, -1, -1, dtype=np.float64)

    @staticmethod
    def rows_from_start(X):
        return np.arange(X.shape[0], dtype=np.float64)


# glibc's powf (2.28 and later, what ``std::pow(float, float)`` calls): log2 of |x| in
# double from 16 (1/c, log2 c) pairs and a degree-5 polynomial, times y, then 2^(y log2 x)
# from 32 table values 2^(i/32) and a degree-3 polynomial, rounded once to float.
_POWF_INVC = _LOGF_INVC
_POWF_LOG2C = tuple(float.fromhex(h) for h in (
    "-0x1.efec65b963019p-2", "-0x1.b0b6832d4fca4p-2", "-0x1.7418b0a1fb77bp-2", "-0x1.39de91a6dcf7bp-2",
    "-0x1.01d9bf3f2b631p-2", "-0x1.97c1d1b3b7afp-3", "-0x1.2f9e393af3c9fp-3", "-0x1.960cbbf788d5cp-4",
    "-0x1.a6f9db6475fcep-5", "0x0p+0", "0x1.338ca9f24f53dp-4", "0x1.476a9543891bap-3",
    "0x1.e840b4ac4e4d2p-3", "0x1.40645f0c6651cp-2", "0x1.88e9c2c1b9ff8p-2", "0x1.ce0a44eb17bccp-2"))
_POWF_LOG2_POLY = tuple(float.fromhex(h) for h in (
    "0x1.27616c9496e0bp-2", "-0x1.71969a075c67ap-2", "0x1.ec70a6ca7baddp-2",
    "-0x1.7154748bef6c8p-1", "0x1.71547652ab82bp0"))
# 2^(i/32) as glibc's table holds it (its bits less i << 47, which the kernel adds back)
_EXP2F_TABLE = tuple(
    float(np.array([bits + (i << 47)], np.uint64).view(np.float64)[0]) for i, bits in enumerate((
        0x3FF0000000000000, 0x3FEFD9B0D3158574, 0x3FEFB5586CF9890F, 0x3FEF9301D0125B51,
        0x3FEF72B83C7D517B, 0x3FEF54873168B9AA, 0x3FEF387A6E756238, 0x3FEF1E9DF51FDEE1,
        0x3FEF06FE0A31B715, 0x3FEEF1A7373AA9CB, 0x3FEEDEA64C123422, 0x3FEECE086061892D,
        0x3FEEBFDAD5362A27, 0x3FEEB42B569D4F82, 0x3FEEAB07DD485429, 0x3FEEA47EB03A5585,
        0x3FEEA09E667F3BCD, 0x3FEE9F75E8EC5F74, 0x3FEEA11473EB0187, 0x3FEEA589994CCE13,
        0x3FEEACE5422AA0DB, 0x3FEEB737B0CDC5E5, 0x3FEEC49182A3F090, 0x3FEED503B23E255D,
        0x3FEEE89F995AD3AD, 0x3FEEFF76F2FB5E47, 0x3FEF199BDD85529C, 0x3FEF3720DCEF9069,
        0x3FEF5818DCFBA487, 0x3FEF7C97337B9B5F, 0x3FEFA4AFA2A490DA, 0x3FEFD0765B6E4540)))
_EXP2F_POLY = tuple(float.fromhex(h) for h in (
    "0x1.c6af84b912394p-5", "0x1.ebfce50fac4f3p-3", "0x1.62e42ff0c52d6p-1"))
_EXP2F_SHIFT = float.fromhex("0x1.8p+52") / 32  # adding it rounds to a multiple of 1/32
_POWF_OVERFLOW = float.fromhex("0x1.fffffffd1d571p+6")  # above: +-inf; at or below -150: +-0


def powf_parity(y):
    """0 when float ``y`` is not an integer, 1 when odd, 2 when even (glibc's checkint)."""
    y = float(np.float32(y))
    if not np.isfinite(y) or y != np.floor(y):
        return 0
    return 1 if abs(y) < 2.0 ** 24 and int(abs(y)) % 2 == 1 else 2


def glibc_powf(math, x, y):
    """float32 ``powf(x, y)`` of a float32 column ``x`` and a finite float ``y`` (a
    constant), operation by operation as glibc computes it (no fused multiply-adds:
    checked against glibc 2.36 on eight million pairs): ``log2 |x|`` in double with
    the reduction ``glibc_logf`` uses, ``y * log2 |x|`` split into k/32 + r, the table
    value times 2^(k div 32) times a polynomial in r, rounded once. A negative x gives
    NaN unless y is an integer (negated for an odd one); 0, infinities and NaN as C's
    pow; y == 0 gives 1 for every x."""
    x = math.cast(x, "float32")
    y = float(np.float32(y))
    zero, one, inf = (math.scalar32(v, x) for v in (0.0, 1.0, np.inf))
    parity = powf_parity(y)
    size = math.abs(x)
    finite = math.where((size > zero) & (size < inf), size, one)
    z, k, index = logf_reduction(math, finite)
    a0, a1, a2, a3, a4, shift, c0, c1, c2, ys = (
        math.full(x, v, "float64") for v in (*_POWF_LOG2_POLY, _EXP2F_SHIFT, *_EXP2F_POLY, y))
    r = z * math.take(_POWF_INVC, index) - 1.0
    y0 = math.take(_POWF_LOG2C, index) + k
    r2 = r * r
    p0 = a0 * r + a1
    p = a2 * r + a3
    r4 = r2 * r2
    q = a4 * r + y0
    q = p * r2 + q
    log2x = p0 * r4 + q
    ylogx = ys * log2x
    kd = (ylogx + shift) - shift  # k / 32, rounded to nearest (even)
    r = ylogx - kd
    m = kd * 32.0
    high = math.floor(m / 32.0)
    # 2^high may be 2^128 (a result just below float32's overflow): two exact steps
    scale = math.take(_EXP2F_TABLE, m - high * 32.0) * math.pow2(high - 1.0) * 2.0
    poly = c0 * r + c1
    rr = r * r
    e = c2 * r + 1.0
    e = poly * rr + e
    out = math.cast(e * scale, "float32")
    out = math.where(ylogx > math.full(x, _POWF_OVERFLOW, "float64"), inf, out)
    out = math.where(ylogx <= math.full(x, -150.0, "float64"), zero, out)
    # 0 and infinities: |x|^y is 0 or inf by the signs
    small = size == zero
    out = math.where(small, inf if y < 0 else zero, out)
    out = math.where(size == inf, zero if y < 0 else inf, out)
    negative = x < zero
    if parity == 1:  # an odd integer keeps the sign (-0 too)
        signed = (x < zero) | ((x == zero) & (one / x < zero))
        out = math.where(signed, -out, out)
    elif parity == 0:
        out = math.where(negative & (size != inf), math.scalar32(np.nan, x), out)
    out = math.where(x != x, math.scalar32(np.nan, x), out)
    if y == 0.0:
        out = math.where(x == x, one, one)
    return out


def powf_columns(op, X, math=NumpyMath):
    """ONNX Runtime's float ``Pow`` of a block by a constant exponent per column:
    ``std::pow`` (glibc's powf, ``glibc_powf``) element by element."""
    X = math.cast(X, "float32")
    return math.stack([glibc_powf(math, math.column(X, j), float(y))
                       for j, y in enumerate(op.exponents.tolist())])


@register_op
@dataclass(frozen=True, eq=False)
class OnnxPowf(Op):
    """ONNX ``Pow`` of a computed float32 block by constant float exponents, one per
    column (``powf_columns``)."""

    kind = "onnx_powf"

    exponents: np.ndarray

    def __post_init__(self):
        exponents = np.ascontiguousarray(self.exponents, dtype=np.float32).reshape(-1)
        exponents.flags.writeable = False
        object.__setattr__(self, "exponents", exponents)

    @property
    def width(self):
        return len(self.exponents)

    def validate(self):
        self.expect(bool(np.all(np.isfinite(self.exponents))), "exponents must be finite")
        return self

    def output_types(self, input_types):
        return [ValueType.floats(self.numeric_input(input_types, self.width).width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [powf_columns(self, inputs[0], ReduceNumpyMath)]

    def to_saved(self):
        return {}, {"exponents": self.exponents}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(exponents=arrays["exponents"])


__all__ += ["OnnxLog", "OnnxPowf", "log_columns", "powf_columns", "glibc_powf",
            "eigen_log_packets", "powf_parity", "PositionNumpyMath"]


# ------------------------------------------- the Scan's squared distances as a block
def squared_distance_rows(op, X, train_columns, math=NumpyMath):
    """(n, n_train) float32 squared euclidean distances as skl2onnx's distance Scan body
    computes them (``neighbor_distances``: ``x - t`` per feature, squares added term
    after term)."""
    from .onnx_neighbors import neighbor_distances

    return neighbor_distances(op, X, train_columns, math)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxSquaredDistances(Op):
    """Each input row's squared euclidean distances to constant ``train`` rows, as the
    Scan of skl2onnx's GaussianProcessRegressor graph gives them (transposed to one row
    per input row): ``squared_distance_rows``."""

    kind = "onnx_squared_distances"

    train: np.ndarray
    metric = "sqeuclidean"

    def __post_init__(self):
        train = np.ascontiguousarray(self.train, dtype=np.float32)
        train.flags.writeable = False
        object.__setattr__(self, "train", train)

    @property
    def n_features(self):
        return self.train.shape[1]

    def validate(self):
        self.expect(self.train.ndim == 2 and np.isfinite(self.train).all(),
                    "train must be a finite matrix")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.train.shape[0])]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        columns = [self.train[:, f][None, :] for f in range(self.n_features)]
        with np.errstate(invalid="ignore", over="ignore"):
            return [squared_distance_rows(self, inputs[0], columns, ReduceNumpyMath)]

    def to_saved(self):
        return {}, {"train": self.train}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**arrays)


__all__ += ["OnnxSquaredDistances", "squared_distance_rows"]


# ------------------------------------------- skl2onnx's QuantileTransformer graph
def quantile_interpolation(x, quantiles, references, math):
    """One half of skl2onnx's QuantileTransformer graph for one float32 column: the
    binary search over a column's padded quantiles (``len - 1`` a power of two; a step
    moves up while ``x >= q[index + step]``, so NaN stays at index 0) and the
    interpolation between the two quantiles found, in the graph's float32 order."""
    size = len(quantiles) - 1
    index = math.zeros(x, "float64")
    step = size // 2
    while step >= 1:
        candidate = index + float(step)
        moves = x >= math.cast(math.take(quantiles, candidate), "float32")
        index = math.where(moves, candidate, index)
        step //= 2
    above = index + 1.0
    q_low = math.cast(math.take(quantiles, index), "float32")
    q_high = math.cast(math.take(quantiles, above), "float32")
    r_low = math.cast(math.take(references, index), "float32")
    r_high = math.cast(math.take(references, above), "float32")
    zero = _f32(math, 0.0, x)
    delta_q = q_high - q_low
    slope = (r_high - r_low) / delta_q
    slope = math.where((delta_q <= zero) | (slope != slope), zero, slope)
    between = r_low + slope * (x - q_low)
    return math.where(x >= q_high, r_high, math.where(x <= q_low, r_low, between))


def quantile_columns(op, X, math=NumpyMath):
    """skl2onnx's QuantileTransformer (uniform output) graph, column by column: half the
    difference of the ascending interpolation of x and the descending one of -x, then
    1.0 where x is the last quantile and that half times 0.0 where x is the first."""
    X = math.cast(X, "float32")
    out = []
    for j in range(len(op.low)):
        x = math.column(X, j)
        up = quantile_interpolation(x, op.quantiles[j], op.references[j], math)
        down = quantile_interpolation(-x, op.quantiles_neg[j], op.references_neg[j], math)
        half = (up - down) * _f32(math, 0.5, x)
        at_low = math.where(x == _f32(math, op.low[j], x), half * _f32(math, 0.0, x), half)
        out.append(math.where(x == _f32(math, op.high[j], x), _f32(math, 1.0, x), at_low))
    return math.stack(out)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxQuantile(Op):
    """skl2onnx's QuantileTransformer graph (uniform output) read as one op:
    ``quantile_columns``. Per column, ``quantiles``/``references`` are the graph's padded
    ascending tables and ``quantiles_neg``/``references_neg`` its negated, reversed
    ones (rows of ``2**m + 1`` float32 values); ``low``/``high`` the first and last
    quantiles it compares x with."""

    kind = "onnx_quantile"

    quantiles: np.ndarray
    references: np.ndarray
    quantiles_neg: np.ndarray
    references_neg: np.ndarray
    low: np.ndarray
    high: np.ndarray

    _TABLES = ("quantiles", "references", "quantiles_neg", "references_neg", "low", "high")

    def __post_init__(self):
        for name in self._TABLES:
            table = np.array(getattr(self, name), dtype=np.float32)
            table.flags.writeable = False
            object.__setattr__(self, name, table)

    @property
    def width(self):
        return len(self.low)

    def validate(self):
        tables = [getattr(self, name) for name in self._TABLES[:4]]
        self.expect(all(t.ndim == 2 and t.shape == tables[0].shape for t in tables),
                    "the four tables must be (columns, size) matrices of one shape")
        size = tables[0].shape[1] - 1
        self.expect(size >= 1 and size & (size - 1) == 0, "a table's size must be 2**m + 1")
        self.expect(self.low.shape == self.high.shape == (tables[0].shape[0],),
                    "one low and one high quantile per column")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.width)
        return [ValueType.floats(self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
            return [quantile_columns(self, inputs[0])]

    def to_saved(self):
        return {}, {name: getattr(self, name) for name in self._TABLES}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**arrays)


__all__ += ["OnnxQuantile", "quantile_columns", "quantile_interpolation"]
