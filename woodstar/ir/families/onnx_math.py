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
                       glibc_logf, mlas_exp, mlas_tanh)

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
    vectorized logarithm (SSE packets of four, no fused multiply-adds: frexp, a
    rational (3, 3) approximation of log1p, ``e * ln2`` added) on the first
    ``size - size % 4`` elements, ``std::log`` (glibc's logf) on the rest."""
    flat = np.ascontiguousarray(x, dtype=np.float32).reshape(-1)
    f32 = np.float32
    with np.errstate(all="ignore"):
        m, e = np.frexp(flat)
        m, e = m.astype(f32), e.astype(f32)
        below = m < f32(0.707106781186547524)
        shifted = m - f32(1.0) + np.where(below, m, f32(0.0))
        e = e - np.where(below, f32(1.0), f32(0.0))
        p = shifted * f32(0.18256296349849254) + f32(1.0000000190281063)
        p = shifted * p + f32(1.0000000190281136)
        p = shifted * p
        q = shifted * f32(0.049616247954120038) + f32(0.59923249590823520)
        q = shifted * q + f32(1.4999999999999927)
        q = shifted * q + f32(1.0)
        out = e * f32(_LN2) + p / q
        out = np.where(flat == f32(np.inf), flat, out)
        out = np.where((flat < 0) | np.isnan(flat), f32(np.nan), out)
        out = np.where(flat == 0, f32(-np.inf), out).astype(f32)
        tail = flat.size - flat.size % 4
        out[tail:] = glibc_logf(ReduceNumpyMath, flat[tail:])
    return out.reshape(np.shape(x))


MATH_FUNCTIONS = ("exp", "sqrt", "square", "cube")


def math_columns(op, X, math=NumpyMath):
    """``op.function`` of each column: ``exp`` MLAS's (``mlas_exp``), ``sqrt`` IEEE's
    (correctly rounded, as ``sqrtps``), ``square``/``cube`` ONNX Runtime's Pow by a
    scalar 2 or 3 (``x * x``, ``x * x * x``)."""
    X = math.cast(X, "float32")
    out = []
    for j in range(op.width):
        x = math.column(X, j)
        if op.function == "exp":
            out.append(mlas_exp(math, x))
        elif op.function == "sqrt":
            out.append(math.sqrt(x))
        elif op.function == "square":
            out.append(x * x)
        else:
            out.append(x * x * x)
    return math.stack(out)


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
    * ``max``: ReduceMax of at most 3 columns, ``std::max(m, x)`` term after term
      (``m < x ? x : m``: a NaN met is skipped, a NaN first stays)."""
    X = math.cast(X, "float32")
    width = op.groups * op.size
    starts = math.row_starts(X, width) if op.function == "sum" and op.whole_call else None
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
            top = columns[0]
            for c in columns[1:]:
                top = math.where(top < c, c, top)
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
        return self.function == "sum" and self.size >= 4 and (self.groups * self.size) % 4 != 0

    def validate(self):
        self.expect(self.function in REDUCE_FUNCTIONS,
                    f"function {self.function!r} not in {REDUCE_FUNCTIONS}")
        self.expect(self.groups >= 1 and self.size >= 1, "groups and size must be positive")
        self.expect(self.function != "max" or self.size <= 3,
                    "max is ONNX Runtime's scalar loop only up to 3 columns")
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
    from 0, then ``fma(acc, alpha, out)`` (rounded once: ``exact_fma32``)."""
    X = math.cast(X, "float32")
    K = op.n_features
    X64 = math.cast(X, "float64")
    W64 = math.cast(weights, "float64")
    alpha = math.scalar32(op.alpha, X)
    out = math.cast(C, "float32")
    for k0 in range(0, K, SGEMM_PACKED_STRIDE_K):
        acc = None
        for j in range(k0, min(K, k0 + SGEMM_PACKED_STRIDE_K)):
            product = X64[:, j:j + 1] * W64[None, :, j]
            acc = math.cast(product if acc is None else product + math.cast(acc, "float64"),
                            "float32")
        out = exact_fma32(math, acc, alpha, out)  # C (n, 1) broadcasts over the columns
    return out


@register_op
@dataclass(frozen=True, eq=False)
class OnnxGemm(Op):
    """ONNX ``Gemm(X, W, C)`` with a constant W (``weights``, (N, K), transB applied)
    and a computed C of width 1 or N, beta 1 (``gemm_with_bias``)."""

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
        self.expect(self.bias_width in (1, self.n_outputs),
                    f"a bias of width {self.bias_width} for {self.n_outputs} outputs")
        return self

    def output_types(self, input_types):
        self.expect(len(input_types) == 2, "Gemm reads the features and its bias")
        self.numeric_input(input_types[:1], self.n_features)
        self.expect_width(input_types[1], self.bias_width)
        return [ValueType.floats(self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore"):
            return [gemm_with_bias(self, inputs[0], inputs[1], self.weights, ReduceNumpyMath)]

    def to_saved(self):
        return {"alpha": self.alpha, "bias_width": self.bias_width}, {"weights": self.weights}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(weights=arrays["weights"], **meta)


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
