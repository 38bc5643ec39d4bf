"""Handlers of the math operators in skl2onnx's graphs of PCA (whiten), KMeans and the
naive Bayes classifiers: ``Exp``, ``Sqrt``, ``Log``, ``Pow``, ``ReduceSum``,
``ReduceSumSquare``, ``ReduceLogSumExp``, ``ArgMin``, a ``Gemm`` whose bias is computed
(or whose alpha is not 1), a ``Reshape`` to (-1, a, b, ...) and the ``Cast`` of
integer labels to float.

A node whose inputs are all constants is folded here, with ONNX Runtime's own
arithmetic (the session folds it the same way when it starts): ``Exp`` by MLAS's kernel,
``Log`` by Eigen's and glibc's (``eigen_log``), ``Sqrt`` correctly rounded, ``Pow`` by 2
or 3 as products, ``ReduceSum`` in the kernel's order. Computed blocks become
``onnx_math``, ``onnx_reduce`` and ``onnx_gemm`` ops (see
``woodstar/ir/families/onnx_ops.py`` for the kernels they repeat).

A block may carry ``inner``, the shape of each row's tensor beyond the batch axis (an
(n, 3, 4) tensor is a 12-column block with ``inner == (3, 4)``), which broadcasting and
reductions read; without it a block of width w is (n, w).
"""

import numpy as np

from ...ir import Concat
from ...ir.families.onnx_ops import mlas_exp
from ...ir.families.onnx_neighbors import eigen_sse_sum
from ...ir.families.onnx_math import eigen_log, OnnxGemm, OnnxMath, OnnxReduce, ReduceNumpyMath
from ._attributes import attributes, refuse
from .glm import handle_vector_product
from .plain_ops import features_class, inner_shape, reading_block, with_inputs_as_features

__all__ = ["handle_exp", "reduce_sum_folding", "handle_sqrt", "handle_log", "handle_pow", "handle_reduce",
           "handle_argmin", "gemm_reading_a_bias", "reshape_to_inner", "casting_labels",
           "reading_argmax", "reading_vector_products", "concatenating_rows",
           "handle_transpose", "handle_reduce_max",
           "fold_constant_unary"]

_FLOAT, _DOUBLE = 1, 11  # onnx.TensorProto element types


def _constant_input(state, node, index=0):
    name = node.input[index] if index < len(node.input) else ""
    return state.constants.get(name)


def _write(state, node, op, block, width, inner=None, one_dimensional=False):
    (value,) = state.add(op, [block.value], node)
    out = features_class()(value, np.float32, width)
    if inner is not None and len(inner) > 1:
        out.inner = tuple(int(d) for d in inner)
    out.one_dimensional = one_dimensional
    state.values[node.output[0]] = ("features", out)


def _float_constant(node, value):
    if value.dtype != np.float32:
        refuse(node, "a constant of dtype", str(value.dtype),
               "float (the kernels mirrored here are ONNX Runtime's float ones)")
    return value


def fold_constant_unary(node, state, function):
    """Whether ``node``'s one input is a constant; if so its value goes into the
    constants, computed by ``function`` (a NumPy float32 array to another)."""
    value = _constant_input(state, node)
    if value is None:
        return False
    with np.errstate(all="ignore"):
        state.constants[node.output[0]] = function(_float_constant(node, value))
    return True


def _mlas_exp_array(value):
    flat = np.ascontiguousarray(value, dtype=np.float32).reshape(-1)
    return mlas_exp(ReduceNumpyMath, flat).reshape(value.shape)


def _unary(node, state, function, fold):
    if fold_constant_unary(node, state, fold):
        return
    block = reading_block(state, node, 0)
    _write(state, node, OnnxMath(function=function, width=block.width), block, block.width,
           inner_shape(block), getattr(block, "one_dimensional", False))


def handle_exp(node, state):
    """Exp: of a constant, folded; of a block, MLAS's exp (the kernel ONNX Runtime calls
    for a float tensor: ``mlas_exp``, clamped above at 88.776 and scaled so that values
    just below float32's overflow come out right on every route)."""
    _unary(node, state, "exp", _mlas_exp_array)


def handle_sqrt(node, state):
    """Sqrt: correctly rounded."""
    _unary(node, state, "sqrt", lambda v: np.sqrt(v).astype(np.float32))


def handle_log(node, state):
    """Log of a constant only: ONNX Runtime takes Eigen's vectorized logarithm for all
    but the tensor's last ``size % 4`` elements and glibc's logf for those, so the
    answer for a computed block would depend on the number of rows in the call."""
    if fold_constant_unary(node, state, eigen_log):
        return
    refuse(node, "an input that is", "computed",
           "a constant (ONNX Runtime's float Log takes Eigen's packets of four or glibc's "
           "logf by an element's place in the whole tensor, so a row's answer would "
           "depend on the call's size)")


def _power_products(node, exponent, constant_base):
    if exponent == 2:
        return "square", lambda v: (v * v).astype(np.float32)
    if exponent == 3:
        return "cube", lambda v: (v * v * v).astype(np.float32)
    if constant_base:
        return None, lambda v: _libm_powf(node, v, exponent)
    refuse(node, "exponent", float(exponent),
           "2 or 3 for a computed base (ONNX Runtime's products x * x and x * x * x; "
           "other exponents go through std::pow, glibc's powf, which woodstar calls only "
           "on constants, when the graph is read)")


def _libm_powf(node, base, exponent):
    """``std::pow(float, float)`` of each constant: the C library's own powf (the one
    ONNX Runtime's kernel calls on this machine), element by element."""
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("m")
    if name is None:
        refuse(node, "a Pow by", float(exponent), "2 or 3 (no C math library to call powf)")
    powf = ctypes.CDLL(name).powf
    powf.restype, powf.argtypes = ctypes.c_float, [ctypes.c_float, ctypes.c_float]
    flat = [powf(float(v), float(exponent)) for v in np.asarray(base, np.float32).reshape(-1)]
    return np.array(flat, np.float32).reshape(np.shape(base))


def handle_pow(node, state):
    """Pow by a constant scalar: 2 or 3 are ONNX Runtime's ``x * x`` or ``x * x * x``;
    other exponents of a constant base are folded with powf."""
    exponent = _constant_input(state, node, 1)
    integral = exponent is not None and exponent.dtype.kind in "iu" and exponent.size == 1 \
        and int(exponent.reshape(-1)[0]) in (2, 3)  # skl2onnx's KernelPCA: int64 2 or 3
    if exponent is None or exponent.size != 1 or not (exponent.dtype == np.float32 or integral):
        refuse(node, "an exponent that is not a constant float scalar (or int 2 or 3)",
               node.input[1:], "one float initializer or Constant")
    function, fold = _power_products(node, float(exponent.reshape(-1)[0]),
                                     node.input[0] in state.constants)
    _unary(node, state, function, fold)


def _axes(node, state):
    """The reduced axes (an input from opset 13 for ReduceSum, 18 for the others; an
    attribute before), or None for every axis."""
    a = attributes(node)
    if len(node.input) > 1 and node.input[1]:
        axes = _constant_input(state, node, 1)
        if axes is None:
            refuse(node, "axes that are not constant", node.input[1], "an int64 initializer")
        axes = [int(v) for v in axes.reshape(-1)]
    else:
        axes = a.get("axes")
        axes = None if axes is None else [int(v) for v in axes]
    if not axes:
        if a.get("noop_with_empty_axes", 0):
            refuse(node, "noop_with_empty_axes", 1, "0")
        return None
    return axes


_REDUCE = {"ReduceSum": "sum", "ReduceSumSquare": "sum_square",
           "ReduceLogSumExp": "log_sum_exp"}


def _fold_reduce_sum(node, value, axes, keepdims):
    """ReduceSum of a constant: over every axis of a tensor, Eigen's vectorized sum of
    the whole buffer; over the first axis of a matrix, its rows added in order (the
    kernel's RK loop)."""
    value = _float_constant(node, value)
    if axes is None or (value.ndim == 1 and axes in ([0], [-1])):
        terms = [np.float32(v) for v in value.reshape(-1)]
        total = np.float32(eigen_sse_sum(terms, 0)) if terms else np.float32(0.0)
        shape = (1,) * value.ndim if keepdims else ()
        return np.full(shape, total, np.float32)
    if value.ndim == 2 and axes in ([0], [-2]):
        total = value[0].copy()
        for row in value[1:]:
            total = total + row
        return total.reshape((1, -1) if keepdims else (-1,))
    refuse(node, f"a constant of shape {value.shape} reduced over axes", axes,
           "every axis, or the first axis of a matrix")


def reduce_sum_folding(handler):
    """ReduceSum: of a constant, folded; over the last axis of a block shaped (n, a, b,
    ...), or without keeping the reduced axis, ``handle_reduce``; over the columns of an
    (n, columns) block keeping it, ``handler``."""
    def handle(node, state):
        role, block = state.values.get(node.input[0], ("", None))
        if node.input[0] in state.constants or (role == "features" and (
                len(inner_shape(block)) > 1 or not attributes(node).get("keepdims", 1))):
            return handle_reduce(node, state)
        return handler(node, state)

    handle.__doc__ = reduce_sum_folding.__doc__
    return handle


def handle_reduce(node, state):
    """ReduceSum, ReduceSumSquare, ReduceLogSumExp over the last axis of a computed
    block (each row's tensor reduced along its last dimension); ReduceSum of a
    constant is folded."""
    axes = _axes(node, state)
    keepdims = int(attributes(node).get("keepdims", 1))
    constant = _constant_input(state, node)
    if constant is not None:
        if node.op_type != "ReduceSum":
            refuse(node, "a constant input", node.input[0], "a computed block")
        with np.errstate(all="ignore"):
            state.constants[node.output[0]] = _fold_reduce_sum(node, constant, axes, keepdims)
        return
    block = reading_block(state, node, 0)
    inner = inner_shape(block)
    rank = len(inner) + 1
    if axes is None or len(axes) != 1 or axes[0] % rank != rank - 1:
        refuse(node, "axes", axes, f"[{rank - 1}] or [-1]: the last axis of each row's tensor "
               "(reducing the rows themselves is not read)")
    groups, size = int(np.prod(inner[:-1], dtype=np.int64)), inner[-1]
    op = OnnxReduce(function=_REDUCE[node.op_type], groups=groups, size=size)
    out_inner = inner[:-1] + ((1,) if keepdims else ())
    _write(state, node, op, block, groups, out_inner, one_dimensional=not out_inner)


def handle_argmin(node, state):
    """ArgMin over each row's columns: the first smallest (a NaN never is, unless first),
    an int64 index the graph may give as the labels of a clustering (KMeans)."""
    block = reading_block(state, node, 0)
    a = attributes(node)
    if a.get("axis", 0) not in (1, -1) or a.get("select_last_index", 0) or \
            len(inner_shape(block)) != 1:
        refuse(node, "attributes (axis, select_last_index)",
               (a.get("axis", 0), a.get("select_last_index", 0)),
               "(1, 0) over an (n, columns) block: the first smallest column of each row")
    (value,) = state.add(OnnxReduce(function="argmin", groups=1, size=block.width), [block.value],
                         node)
    index = features_class()(value, np.float32, 1)
    index.classes = block.width
    state.values[node.output[0]] = ("index", index)


def gemm_reading_a_bias(gemm_handler):
    """Gemm by a constant matrix whose bias C is computed (KMeans: each row's squared
    norm) or whose alpha is not 1: MLAS's packed SGEMM over C (``onnx_gemm``); with beta
    0 (GaussianMixture), without C. Any other Gemm goes to ``gemm_handler``."""
    def handle(node, state):
        a = attributes(node)
        alpha = float(a.get("alpha", 1.0))
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        if float(a.get("beta", 1.0)) == 0.0:  # C is not read (GaussianMixture's graphs)
            bias = None
        elif (bias is None or bias in state.constants) and alpha == 1.0:
            return gemm_handler(node, state)
        if a.get("transA", 0) or float(a.get("beta", 1.0)) not in (0.0, 1.0):
            refuse(node, "attributes (transA, beta)", (a.get("transA", 0), a.get("beta", 1.0)),
                   "(0, 1.0) or (0, 0.0)")
        weights = _constant_input(state, node, 1)
        if weights is None or weights.ndim != 2 or weights.dtype != np.float32:
            refuse(node, "a second input that is not a constant float matrix", node.input[1],
                   "a float initializer")
        weights = weights if a.get("transB", 0) else weights.T  # (N, K)
        features = reading_block(state, node, 0)
        if weights.shape[1] != features.width:
            refuse(node, f"a matrix of shape {weights.shape} for", features.width,
                   "as many columns as features")
        if bias is None and float(a.get("beta", 1.0)) == 0.0:
            op = OnnxGemm(weights=weights, alpha=alpha, bias_width=0)
            (value,) = state.add(op, [features.value], node)
            state.values[node.output[0]] = ("features", features_class()(value, np.float32,
                                                                         weights.shape[0]))
            return
        if bias is None or bias in state.constants:
            refuse(node, "alpha", alpha, "1.0 with a constant bias (a computed bias takes any)")
        c = reading_block(state, node, 2)
        if c.width not in (1, weights.shape[0]) or getattr(c, "one_dimensional", False):
            refuse(node, "a bias of width", c.width, f"1 or {weights.shape[0]} columns per row")
        op = OnnxGemm(weights=weights, alpha=alpha, bias_width=c.width)
        (value,) = state.add(op, [features.value, c.value], node)
        state.values[node.output[0]] = ("features", features_class()(value, np.float32,
                                                                     weights.shape[0]))

    handle.__doc__ = gemm_reading_a_bias.__doc__
    return handle


def reshape_to_inner(reshape_handler):
    """Reshape of a block to (-1, a, b, ...) keeping each row's values (a * b * ... ==
    its width): the block with ``inner == (a, b, ...)``; others go to
    ``reshape_handler``."""
    def handle(node, state):
        shape = _constant_input(state, node, 1) if len(node.input) > 1 else None
        role = state.values.get(node.input[0], ("",))[0]
        if role == "row_stack":
            blocks = state.values[node.input[0]][1]
            dims = None if shape is None else [int(d) for d in shape.reshape(-1)]
            if dims != [len(blocks), -1]:
                refuse(node, "a reshape of a stack of columns to", dims, f"[{len(blocks)}, -1]")
            state.values[node.output[0]] = ("row_stack_matrix", blocks)
            return
        if shape is not None and shape.ndim == 1 and len(shape) >= 3 and role == "features":
            dims = [int(d) for d in shape]
            block = reading_block(state, node, 0)
            if dims[0] != -1 or min(dims[1:]) < 1 or int(np.prod(dims[1:])) != block.width:
                refuse(node, "shape", dims, f"[-1, ...] whose dimensions multiply to {block.width}")
            out = features_class()(block.value, block.dtype, block.width)
            out.inner = tuple(dims[1:])
            state.values[node.output[0]] = ("features", out)
            return
        reshape_handler(node, state)

    return handle


def _argmax_index(node, state, payload):
    """The index column of the first largest value per row of the block an ArgMax read."""
    if payload.dtype != np.float32 or len(inner_shape(payload)) != 1:
        refuse(node, "an ArgMax over a block of dtype", str(payload.dtype),
               "float (n, columns)")
    block = state.rounded(payload, node)
    (value,) = state.add(OnnxReduce(function="argmax", groups=1, size=block.width),
                         [block.value], node, ":argmax")
    return features_class()(value, np.float32, 1)


def reading_argmax(handler):
    """``handler`` reading an ArgMax's int64 index as a float column of whole numbers
    (KBinsDiscretizer's one-hot bins: ArgMax then OneHotEncoder)."""
    def handle(node, state):
        def as_index(i, role, payload):
            return _argmax_index(node, state, payload) if role == "argmax" else None

        return handler(with_inputs_as_features(node, state, as_index, "index"), state)

    handle.__doc__ = handler.__doc__
    return handle


def casting_labels(cast_handler):
    """Cast of a classifier's integer labels to float or double (skl2onnx's naive Bayes
    graphs cast them to float and back to int64): the labels stay as they are, each a
    whole number float32 holds exactly. Cast of an ArgMax's index to float
    (KBinsDiscretizer's bins): the first largest column's index (``onnx_reduce``).
    Anything else goes to ``cast_handler``."""
    def handle(node, state):
        role, payload = state.values.get(node.input[0], ("", None))
        to = attributes(node).get("to")
        if role == "argmax" and to == _FLOAT:
            state.values[node.output[0]] = ("features", _argmax_index(node, state, payload))
            return
        if role == "labels" and to in (_FLOAT, _DOUBLE) and payload.labels.dtype.kind == "i":
            if np.abs(payload.labels).max(initial=0) > 2 ** 24:
                refuse(node, "labels as large as", int(np.abs(payload.labels).max()),
                       "integers float holds exactly (up to 2**24)")
            state.values[node.output[0]] = (role, payload)
            return
        cast_handler(node, state)

    return handle


def reading_vector_products(matmul_handler):
    """MatMul by a constant vector (skl2onnx's Poisson, Gamma and Tweedie regressors):
    ``glm.handle_vector_product``, in the order ONNX Runtime's kernel sums each row.
    Other MatMuls go to ``matmul_handler``."""
    def handle(node, state):
        weights = _constant_input(state, node, 1)
        if weights is not None and weights.ndim == 1:
            return handle_vector_product(node, state)
        return matmul_handler(node, state)

    handle.__doc__ = matmul_handler.__doc__
    return handle


def concatenating_rows(concat_handler):
    """Concat along axis 0: of constants, folded; of computed one-column blocks
    (skl2onnx's QDA graph stacks each class's (n, 1) norms into (k n, 1), reshapes it to
    (k, n) and transposes it), kept aside as a stack of columns until that Reshape and
    Transpose make it the (n, k) block. Other Concats go to ``concat_handler``."""
    def handle(node, state):
        if attributes(node).get("axis") != 0:
            return concat_handler(node, state)
        if all(name in state.constants for name in node.input):
            parts = [state.constants[name] for name in node.input]
            if len({p.dtype for p in parts}) != 1 or min(p.ndim for p in parts) < 1:
                refuse(node, "constants of dtypes and ranks", [(str(p.dtype), p.ndim) for p in parts],
                       "one dtype, at least one dimension")
            state.constants[node.output[0]] = np.concatenate(parts, axis=0)
            return None
        blocks = [reading_block(state, node, i) for i in range(len(node.input))]
        if any(b.width != 1 or len(inner_shape(b)) != 1 or getattr(b, "one_dimensional", False)
               for b in blocks):
            refuse(node, "a Concat along the rows of blocks of widths", [b.width for b in blocks],
                   "(n, 1) blocks (their stack is read back by Reshape (k, -1) and Transpose)")
        state.values[node.output[0]] = ("row_stack", tuple(blocks))
        return None

    handle.__doc__ = concatenating_rows.__doc__
    return handle


def handle_transpose(node, state):
    """Transpose (perm [1, 0]) of the (k, n) reshape of a stack of k one-column blocks:
    the blocks side by side, an (n, k) block."""
    role, payload = state.read(node, 0, ("row_stack_matrix",))
    perm = [int(p) for p in attributes(node).get("perm", [1, 0])]
    if perm != [1, 0]:
        refuse(node, "perm", perm, "[1, 0]")
    (value,) = state.add(Concat(widths=(1,) * len(payload)), [b.value for b in payload], node)
    state.values[node.output[0]] = ("features", features_class()(value, np.float32, len(payload)))


def handle_reduce_max(node, state):
    """ReduceMax over each row of an (n, k) block: ``std::max`` after ``std::max`` (a
    NaN already kept stays, a NaN met is skipped), from 4 columns in the order of
    Eigen's vectorized maximum, which depends on the row's place in the call
    (``onnx_reduce``'s ``max``)."""
    axes = _axes(node, state)
    keepdims = int(attributes(node).get("keepdims", 1))
    block = reading_block(state, node, 0)
    if axes is None or axes[0] % 2 != 1 or len(axes) != 1 or len(inner_shape(block)) != 1:
        refuse(node, "axes", axes, "[1] or [-1] of an (n, columns) block")
    op = OnnxReduce(function="max", groups=1, size=block.width)
    _write(state, node, op, block, 1, (1,) if keepdims else (), one_dimensional=not keepdims)
