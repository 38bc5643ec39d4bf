"""Lowering of ``onnx_tree_scores``: the IR's own definition (``tree_scores``) run on
Torch tensors through a Torch twin of its NumPy operations, so the program adds the
trees in the same order and dtype and finalizes with the same float32 steps."""

from typing import Optional

import numpy as np
import torch
from torch import nn

from ...exceptions import unsupported_message
from ...ir.families.onnx_math import (gemm_with_bias, indicator_columns, is_zero_columns,
                                      log_columns, math_columns, powf_columns, reduce_columns,
                                      reduce_prod_columns, row_sum_columns,
                                      squared_distance_rows, stack_mean,
                                      tanh_columns, quantile_columns)
from ...ir.families.onnx_math import vector_product_columns
from ...ir.families.onnx_isolation import isolation_forest_outputs
from ...ir.families.onnx_neighbors import neighbor_outputs, rbf_kernel_rows
from ...ir.families.onnx_ops import (elementwise_columns, linear_scores, normalize, sigmoid_columns,
                                     softmax_columns, svm_scores, tree_scores)
from ..ops import register_lowering

__all__ = ["OnnxTreeScoresNode", "OnnxLinearNode", "OnnxNormalizerNode", "OnnxCastNode",
           "OnnxBinarizerNode", "OnnxSigmoidNode", "OnnxSvmNode", "OnnxSoftmaxNode",
           "OnnxElementwiseNode"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class TorchMath:
    eager = False  # a traced or exported program decides nothing on values

    @staticmethod
    def cast(x, dtype):
        return x.to(_DTYPES[str(np.dtype(dtype))])

    @staticmethod
    def column(x, j: int):
        return x[:, j]

    @staticmethod
    def zeros(like, dtype):
        return torch.zeros_like(like[..., 0] if like.dim() == 2 else like,
                                dtype=_DTYPES[str(np.dtype(dtype))])

    @staticmethod
    def full(like, value, dtype):
        base = like[..., 0] if like.dim() == 2 else like
        dtype = _DTYPES[str(np.dtype(dtype))]
        value = float(value)
        if dtype == torch.float64 and float(np.float32(value)) != value:
            # an exporter writes a fill value as float32: a float64 tensor keeps its bits
            return torch.zeros_like(base, dtype=dtype) + torch.tensor(value, dtype=dtype, device=base.device)
        return torch.full_like(base, value, dtype=dtype)

    @staticmethod
    def log32(x):
        return torch.log(x.to(torch.float64)).to(torch.float32)

    @staticmethod
    def sqrt(x):
        # Torch's vectorized float32 sqrt is within 0.5001 ulp, not always the IEEE
        # result; a float64 sqrt rounded to float32 is (and so is NumPy's)
        return torch.sqrt(x.to(torch.float64)).to(x.dtype)

    @staticmethod
    def where(condition, a, b):
        return torch.where(condition, a, b)

    @staticmethod
    def abs(x):
        return torch.abs(x)

    @staticmethod
    def stack(columns):
        return torch.stack(columns, dim=1)

    @staticmethod
    def floor(x):
        return torch.floor(x)

    @staticmethod
    def constant64(value, like):
        # a tensor constant: ONNX export keeps its float64 bits (a full_like value it
        # rounds to float32)
        return torch.tensor([[value]], dtype=torch.float64, device=like.device)

    @staticmethod
    def take(table, index):
        values = torch.tensor(table, dtype=torch.float64, device=index.device)
        return values[index.to(torch.int64)]

    @staticmethod
    def pow2(e):
        # 2.0 ** e, exact, for integral float64 e in [-255, 127]: a product of powers of
        # two chosen by the bits of |e| (a traced program cannot reinterpret int64 bits;
        # the factors are tensor constants, which an ONNX export keeps in float64)
        magnitude = torch.abs(e)
        out = torch.ones_like(e)
        for bit in range(8):
            up = 2.0 ** (2 ** bit) if bit < 7 else 1.0  # e < 128: bit 7 only downwards
            factors = torch.tensor([2.0 ** -(2 ** bit), up], dtype=torch.float64, device=e.device)
            factor = torch.where(e < 0, factors[0], factors[1])
            set_ = torch.remainder(torch.floor(magnitude / 2 ** bit), 2.0) == 1.0
            out = torch.where(set_, out * factor, out)
        return out

    @staticmethod
    def scalar32(value, like):
        return torch.tensor(float(np.float32(value)), dtype=torch.float32, device=like.device)

    @staticmethod
    def frexp(x):
        return exportable_frexp(x)

    @staticmethod
    def repeat_sweeps(sweep, values, done, most: int):
        """``NumpyMath.repeat_sweeps`` in a program: an exported one holds one loop
        (ONNX ``Loop``) that stops when every row is done; a trace or a compiled graph
        runs every sweep (a stop would be baked in for every later input); eager calls
        stop early."""
        if torch.compiler.is_exporting():
            from torch._higher_order_ops.while_loop import while_loop

            count = torch.zeros((), dtype=torch.int64, device=done.device)
            _, done, *values = while_loop(
                lambda i, done, *values: (i < most) & ~done.all(),
                lambda i, done, *values: _sweep_step(sweep, i, done, values), (count, done, *values))
            return list(values)
        eager = not (torch.jit.is_tracing() or torch.compiler.is_compiling())
        for _ in range(most):
            if eager and bool(done.all()):
                break
            values, done = sweep(values, done)
        return values

    @staticmethod
    def single_row(x):
        # a tensor, so a traced or compiled program decides per call, not once
        return (torch.ones_like(x[:, :1]).sum(dim=0, keepdim=True) == 1)

    @staticmethod
    def rows_at_least(x, n: int):
        # counted in float64: exact far past any batch, and decided per call
        return torch.ones_like(x[:, :1], dtype=torch.float64).sum(dim=0) >= n  # shape (1,)


def exportable_frexp(x):
    """(mantissa in [0.5, 1), exponent), both float64, of positive finite float32 x,
    exactly, without ``torch.frexp`` (the ONNX exporter has no frexp): x is scaled by
    powers of two into [1, 2) in float64 (every step exact), the exponent found bit by
    bit from the largest step down, through comparisons."""
    y = x.to(torch.float64)
    exponent = torch.zeros_like(y)
    for bit in (64, 32, 16, 8, 4, 2, 1):  # x < 2^128: down into [1, 2^128) -> [1, 2)
        steps = torch.tensor([2.0 ** bit, 2.0 ** -bit], dtype=torch.float64, device=y.device)
        big = y >= steps[0]
        y = torch.where(big, y * steps[1], y)
        exponent = torch.where(big, exponent + bit, exponent)
    for bit in (128, 64, 32, 16, 8, 4, 2, 1):  # x >= 2^-149: up from there into [1, 2)
        steps = torch.tensor([2.0 ** (1 - bit), 2.0 ** bit], dtype=torch.float64, device=y.device)
        small = y < steps[0]
        y = torch.where(small, y * steps[1], y)
        exponent = torch.where(small, exponent - bit, exponent)
    return y * 0.5, exponent + 1.0


def _sweep_step(sweep, i, done, values):
    values, done = sweep(list(values), done)
    return (i + 1, done, *values)


def _mlas_exp_refusal(what):
    """``refused_by`` for ops that mirror MLAS's exp: its fused multiply-adds are
    float64 steps whose TVM build fails LLVM's module verification."""
    return {"tvm": unsupported_message(what, "backend", "tvm", _TVM_FMA_REFUSAL)}


class _Listed(list):
    def tolist(self):
        return list(self)


class _PlainOp:
    """The op's fields as Python values: a compiler tracing the program must not see
    NumPy arrays (TorchDynamo would turn them into tensors and their lists into
    data-dependent values)."""

    def __init__(self, op):
        import dataclasses

        for field in dataclasses.fields(op):
            value = getattr(op, field.name)
            if isinstance(value, np.ndarray):
                value = _Listed(value.tolist())
            setattr(self, field.name, value)
        for name in ("n_targets", "n_features", "output_width"):
            if hasattr(type(op), name):
                setattr(self, name, getattr(op, name))


class OnnxTreeScoresNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (op.n_trees * op.width + 4 * op.n_targets)

    def forward(self, per_tree):
        raw, transformed = tree_scores(self.op, per_tree, TorchMath)
        return raw, transformed


@register_lowering("onnx_tree_scores")
def _onnx_tree_scores(op, input_dtypes, context):
    return OnnxTreeScoresNode(op)


class OnnxLinearNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        # float32 buffers, never Python floats (an ONNX export would round those anyway)
        self.register_buffer("coefficients", torch.from_numpy(op.coefficients.copy()))
        self.register_buffer("intercepts", torch.from_numpy(op.intercepts.reshape(1, -1).copy()))
        self.estimate_bytes = lambda n_rows: 16 * n_rows * (op.n_features + 4 * op.n_targets)
        if op.post_transform == "SOFTMAX" and op.n_targets > 1:  # MLAS's softmax on large calls
            self.refused_by = _mlas_exp_refusal("an ONNX LinearClassifier with SOFTMAX")

    def forward(self, x):
        arrays = {"coefficients": self.coefficients, "intercepts": self.intercepts}
        raw, transformed = linear_scores(self.op, x, arrays, TorchMath)
        return raw, transformed


@register_lowering("onnx_linear")
def _onnx_linear(op, input_dtypes, context):
    return OnnxLinearNode(op)


class OnnxNormalizerNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.estimate_bytes = lambda n_rows: 16 * n_rows * (op.width + op.passthrough)

    def forward(self, x):
        return (normalize(self.op, x, TorchMath),)


@register_lowering("onnx_normalizer")
def _onnx_normalizer(op, input_dtypes, context):
    return OnnxNormalizerNode(op)


class OnnxCastNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.dtype = _DTYPES[op.dtype]
        self.estimate_bytes = lambda n_rows: 8 * n_rows * op.width

    def forward(self, x):
        return (x.to(self.dtype),)


@register_lowering("onnx_cast")
def _onnx_cast(op, input_dtypes, context):
    return OnnxCastNode(op)


class OnnxBinarizerNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.register_buffer("threshold", torch.tensor([op.threshold], dtype=torch.float32))
        self.estimate_bytes = lambda n_rows: 8 * n_rows * op.width

    def forward(self, x):
        return ((x.to(torch.float32) > self.threshold).to(torch.float32),)


@register_lowering("onnx_binarizer")
def _onnx_binarizer(op, input_dtypes, context):
    return OnnxBinarizerNode(op)


class OnnxSigmoidNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.estimate_bytes = lambda n_rows: 16 * n_rows * op.width

    def forward(self, x):
        return (sigmoid_columns(self.op, x, TorchMath),)


@register_lowering("onnx_sigmoid")
def _onnx_sigmoid(op, input_dtypes, context):
    return OnnxSigmoidNode(op)


class OnnxSvmNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        # plain Python values: a compiler must not trace NumPy calls
        for name in ("n_classes", "n_vectors", "coefficient_rows", "vector_starts"):
            setattr(self.op, name, getattr(op, name))
        self.register_buffer("support_vectors", torch.from_numpy(op.support_vectors.copy()))
        self.register_buffer("coefficients",
                             torch.from_numpy(op.coefficients.reshape(1, -1).copy()))
        self.estimate_bytes = lambda n_rows: 24 * n_rows * (op.n_vectors + op.n_features + 4)
        if len(getattr(op, "prob_a", ())):
            # TVM's importer takes the exported program's coupling loop (while_loop)
            # nowhere; unrolled, its 100 sweeps take many minutes to compile
            self.refused_by = {"tvm": unsupported_message(
                "an ONNX SVMClassifier with probabilities (prob_a, prob_b)", "backend",
                "tvm", "'torch', 'torch.jit', 'onnx' (TVM does not import the coupling "
                "loop, and compiling its 100 sweeps unrolled takes many minutes)")}

    def forward(self, x):
        arrays = {"support_vectors": self.support_vectors, "coefficients": self.coefficients}
        raw, transformed = svm_scores(self.op, x, arrays, TorchMath)
        return raw, transformed


@register_lowering("onnx_svm")
def _onnx_svm(op, input_dtypes, context):
    return OnnxSvmNode(op)


class OnnxSoftmaxNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.estimate_bytes = lambda n_rows: 64 * n_rows * op.width
        self.refused_by = _mlas_exp_refusal("an ONNX Softmax")

    def forward(self, x):
        return (softmax_columns(self.op, x, TorchMath),)


@register_lowering("onnx_softmax")
def _onnx_softmax(op, input_dtypes, context):
    return OnnxSoftmaxNode(op)


class OnnxElementwiseNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.estimate_bytes = lambda n_rows: 16 * n_rows * op.width * (len(op.widths) + 1)

    def forward(self, *inputs):
        return (elementwise_columns(self.op, list(inputs), TorchMath),)


@register_lowering("onnx_elementwise")
def _onnx_elementwise(op, input_dtypes, context):
    return OnnxElementwiseNode(op)


class OnnxTruncateToInt64Node(nn.Module):
    """toward zero; NaN, infinities and values outside [-2**63, 2**63): INT64_MIN,
    as float64 (both bounds are powers of two, exact in any float)."""

    def __init__(self, op):
        super().__init__()
        self.register_buffer("limit", torch.tensor(2.0 ** 63, dtype=torch.float64))
        self.estimate_bytes = lambda n_rows: 16 * n_rows * op.width

    def forward(self, x):
        x = x.to(torch.float64)
        return (torch.where(torch.abs(x) < self.limit, torch.trunc(x), -self.limit),)


@register_lowering("onnx_truncate_int64")
def _onnx_truncate_int64(op, input_dtypes, context):
    return OnnxTruncateToInt64Node(op)


class NeighborsTorchMath(TorchMath):
    """``TorchMath`` and the operations ``neighbor_outputs`` adds (the twin of the IR's
    ``NeighborsNumpyMath``)."""

    @staticmethod
    def row_starts(X, width: int):
        # each row's index, counted per call (a traced program must not fix the rows)
        index = torch.cumsum(torch.ones_like(X[:, 0], dtype=torch.int64), 0) - 1
        return torch.remainder(-index * width, 4)

    @staticmethod
    def smallest(distances, k: int):
        if torch.compiler.is_exporting():
            # written as the graph's own TopK, which ONNX Runtime then runs on the same
            # distances: the same neighbours, ties and NaN included
            return torch.topk(distances, k, dim=1, largest=False, sorted=True)
        values, order = torch.sort(distances, dim=1, stable=True)  # NaN last, ties by index
        return values[:, :k], order[:, :k]

    @staticmethod
    def take_targets(targets, order):
        return targets[order]

    @staticmethod
    def index_order(distances):
        return torch.arange(distances.shape[1], device=distances.device).expand_as(distances)

    @staticmethod
    def rejected(distances, radius: float):
        inside = (distances < torch.tensor(radius, dtype=torch.float32,
                                           device=distances.device)).all(dim=1)
        zero = torch.zeros_like(distances[:, 0])
        return torch.where(inside, zero, zero + float("nan"))

    @staticmethod
    def maximum(a, b):
        return torch.maximum(a, b)

    @staticmethod
    def scalar32(value, like):
        return torch.tensor(float(np.float32(value)), dtype=torch.float32, device=like.device)


class TrainingRowsNode(nn.Module):
    """A graph op over the training rows' distances (neighbours, LOF): the rows held as
    one (1, n_train) buffer per feature, ``buffers`` beside them, and TVM refused (its
    build loses the NaN of a row's distances, measured); the ONNX export writes the
    graph's own TopK (``NeighborsTorchMath.smallest``), so ONNX Runtime picks the same
    neighbours."""

    def __init__(self, op, buffers, what):
        super().__init__()
        self.op = _PlainOp(op)
        self.op.n_features = op.n_features
        for f in range(op.n_features):
            self.register_buffer(f"train_{f}", torch.from_numpy(op.train[:, f][None, :].copy()))
        for name, array in buffers.items():
            self.register_buffer(name, torch.from_numpy(array.copy()))
        n_train = op.train.shape[0]
        self.estimate_bytes = lambda n_rows: 4 * n_rows * n_train * (op.n_features + 8)
        self.refused_by = {"tvm": unsupported_message(
            what, "backend", "tvm",
            "'torch', 'torch.jit', 'onnx' (TVM's build loses the NaN of a row's distances)")}

    def train_columns(self):
        return [getattr(self, f"train_{f}") for f in range(self.op.n_features)]


class OnnxNeighborsNode(TrainingRowsNode):
    def __init__(self, op):
        super().__init__(op, {"targets": op.targets},
                         "an ONNX nearest-neighbours graph (a Scan of distances)")

    def forward(self, x):
        arrays = {"train_columns": self.train_columns(), "targets": self.targets}
        return (neighbor_outputs(self.op, x, arrays, NeighborsTorchMath),)


@register_lowering("onnx_neighbors")
def _onnx_neighbors(op, input_dtypes, context):
    return OnnxNeighborsNode(op)


class OnnxRbfKernelRowsNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.op.n_features = op.n_features
        self.op.metric = op.metric
        for f in range(op.n_features):
            self.register_buffer(f"train_{f}", torch.from_numpy(op.train[:, f][None, :].copy()))
        self.register_buffer("column_means", torch.from_numpy(op.column_means[None, :].copy()))
        n_train = op.train.shape[0]
        self.estimate_bytes = lambda n_rows: 8 * n_rows * n_train * (op.n_features + 12)
        self.refused_by = _mlas_exp_refusal("an ONNX KernelPCA's rbf kernel (MLAS's Exp)")

    def forward(self, x):
        arrays = {"train_columns": [getattr(self, f"train_{f}") for f in range(self.op.n_features)],
                  "column_means": self.column_means}
        return (rbf_kernel_rows(self.op, x, arrays, NeighborsTorchMath),)


@register_lowering("onnx_rbf_kernel_rows")
def _onnx_rbf_kernel_rows(op, input_dtypes, context):
    return OnnxRbfKernelRowsNode(op)


class OnnxReduceProdNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (op.width + 2)

    def forward(self, x):
        return (reduce_prod_columns(self.op, x, TorchMath),)


@register_lowering("onnx_reduce_prod")
def _onnx_reduce_prod(op, input_dtypes, context):
    return OnnxReduceProdNode(op)


class OnnxFillNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.width, self.value = op.width, op.value
        self.estimate_bytes = lambda n_rows: 4 * n_rows * op.width

    def forward(self, x):
        # from the input's rows, so a traced program keeps the row count per call
        return (torch.full_like(x[:, :1], self.value, dtype=torch.float32).expand(-1, self.width)
                .contiguous(),)


@register_lowering("onnx_fill")
def _onnx_fill(op, input_dtypes, context):
    return OnnxFillNode(op)


# ------------------------------------------- math operators, reductions, Gemm with a bias
class ReduceTorchMath(NeighborsTorchMath):
    """``NeighborsTorchMath`` and the ``frexp`` ``glibc_logf`` reads (the twin of the
    IR's ``ReduceNumpyMath``)."""

    @staticmethod
    def frexp(x):
        return exportable_frexp(x)


_TVM_FMA_REFUSAL = ("'torch', 'torch.jit', 'onnx' (the fused multiply-adds are mirrored "
                    "with float64 steps whose TVM build fails LLVM's module verification)")


class OnnxMathNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.estimate_bytes = lambda n_rows: 64 * n_rows * op.width
        if op.function == "exp":
            self.refused_by = {"tvm": unsupported_message("an ONNX Exp (MLAS's kernel)", "backend",
                                                          "tvm", _TVM_FMA_REFUSAL)}

    def forward(self, x):
        return (math_columns(self.op, x, ReduceTorchMath),)


@register_lowering("onnx_math")
def _onnx_math(op, input_dtypes, context):
    return OnnxMathNode(op)


class OnnxReduceNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.op.whole_call = op.whole_call
        self.estimate_bytes = lambda n_rows: 64 * n_rows * op.groups * op.size
        if op.function == "log_sum_exp":
            # measured: TVM's build of the sum of exps drops a NaN (the row gets its
            # largest other value where ONNX Runtime gives NaN)
            self.refused_by = {"tvm": unsupported_message(
                "an ONNX ReduceLogSumExp", "backend", "tvm",
                "'torch', 'torch.jit', 'onnx' (TVM's build loses a NaN in the sum of exps)")}

    def forward(self, x):
        return (reduce_columns(self.op, x, ReduceTorchMath),)


@register_lowering("onnx_reduce")
def _onnx_reduce(op, input_dtypes, context):
    return OnnxReduceNode(op)


class OnnxGemmNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.op.n_features = op.n_features
        self.register_buffer("weights", torch.from_numpy(op.weights.copy()))
        self.estimate_bytes = lambda n_rows: 32 * n_rows * (op.n_features + op.n_outputs)
        what = "an ONNX Gemm over a computed bias" if op.bias_width else \
            "an ONNX Gemm with beta 0 (MLAS's packed SGEMM)"
        self.refused_by = {"tvm": unsupported_message(what, "backend", "tvm", _TVM_FMA_REFUSAL)}

    def forward(self, x, bias: Optional[torch.Tensor] = None):
        return (gemm_with_bias(self.op, x, bias, self.weights, ReduceTorchMath),)


@register_lowering("onnx_gemm")
def _onnx_gemm(op, input_dtypes, context):
    return OnnxGemmNode(op)


class OnnxVectorProductNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.op.n_features = op.n_features
        self.register_buffer("weights", torch.from_numpy(op.weights.copy()))
        self.estimate_bytes = lambda n_rows: 16 * n_rows * op.n_features

    def forward(self, x):
        return (vector_product_columns(self.op, x, self.weights, TorchMath),)


@register_lowering("onnx_vector_product")
def _onnx_vector_product(op, input_dtypes, context):
    return OnnxVectorProductNode(op)


class OnnxStackMeanNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.estimate_bytes = lambda n_rows: 8 * n_rows * op.width * (op.count + 2)

    def forward(self, *blocks):
        return (stack_mean(self.op, list(blocks), TorchMath),)


@register_lowering("onnx_stack_mean")
def _onnx_stack_mean(op, input_dtypes, context):
    return OnnxStackMeanNode(op)


class _OneBlockNode(nn.Module):
    """An op of one float block computed by ``function(op, x, math)``."""

    def __init__(self, op, function, math, bytes_per_value):
        super().__init__()
        self.op, self.function, self.math = _PlainOp(op), function, math
        self.estimate_bytes = lambda n_rows: bytes_per_value * n_rows * op.width

    def forward(self, x):
        return (self.function(self.op, x, self.math),)


@register_lowering("onnx_row_sums")
def _onnx_row_sums(op, input_dtypes, context):
    return _OneBlockNode(op, row_sum_columns, NeighborsTorchMath, 32)


@register_lowering("onnx_is_zero")
def _onnx_is_zero(op, input_dtypes, context):
    return _OneBlockNode(op, is_zero_columns, TorchMath, 8)


@register_lowering("onnx_indicator")
def _onnx_indicator(op, input_dtypes, context):
    return _OneBlockNode(op, indicator_columns, TorchMath, 16)


@register_lowering("onnx_mlas_tanh")
def _onnx_mlas_tanh(op, input_dtypes, context):
    return _OneBlockNode(op, tanh_columns, TorchMath, 64)


@register_lowering("onnx_quantile")
def _onnx_quantile(op, input_dtypes, context):
    return _OneBlockNode(op, quantile_columns, TorchMath, 96)


# ------------------------------------------- Log and Pow of computed blocks (PowerTransformer)
class PositionTorchMath(ReduceTorchMath):
    """``ReduceTorchMath`` and each row's place in the call (the twin of the IR's
    ``PositionNumpyMath``), counted per call so a traced program keeps no row count."""

    @staticmethod
    def rows_from_start(X):
        return torch.cumsum(torch.ones_like(X[:, 0], dtype=torch.float64), 0) - 1.0

    @staticmethod
    def rows_from_end(X):
        return torch.flip(torch.cumsum(torch.ones_like(X[:, 0], dtype=torch.float64), 0), [0]) - 1.0


def _slow_export_refusal(what):
    """``refused_by`` for the mirrored libm routines: each column is dozens of float64
    steps (frexp and powers of two by comparisons, table lookups), which the onnx
    and tvm backends take minutes to export and build."""
    return {name: unsupported_message(what, "backend", name, "'torch', 'torch.jit' (exporting "
                                      "the mirrored libm steps takes minutes)")
            for name in ("onnx", "tvm")}


@register_lowering("onnx_log")
def _onnx_log(op, input_dtypes, context):
    node = _OneBlockNode(op, log_columns, PositionTorchMath, 48)
    node.op.whole_call = op.whole_call
    node.refused_by = _slow_export_refusal("an ONNX Log of a computed block (Eigen's and glibc's logarithm)")
    return node


@register_lowering("onnx_powf")
def _onnx_powf(op, input_dtypes, context):
    node = _OneBlockNode(op, powf_columns, ReduceTorchMath, 160)
    node.refused_by = _slow_export_refusal("an ONNX Pow of a computed block (glibc's powf)")
    return node


class _TableTorchMath(PositionTorchMath):
    """``PositionTorchMath`` whose ``take`` also reads a registered table buffer."""

    @staticmethod
    def take(table, index):
        if isinstance(table, torch.Tensor):  # torch.take: a gather, unlike indexing
            return torch.take(table, index.to(torch.int64).contiguous())
        return PositionTorchMath.take(table, index)


class OnnxIsolationForestNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.op.whole_call, self.op.n_trees = op.whole_call, op.n_trees
        packet, tail, offsets = op.flat_tables()
        self.register_buffer("packet", torch.from_numpy(packet))
        self.register_buffer("tail", torch.from_numpy(tail))
        self.register_buffer("offsets", torch.from_numpy(offsets))
        self.estimate_bytes = lambda n_rows: 64 * n_rows * op.n_trees
        self.refused_by = _slow_export_refusal("skl2onnx's IsolationForest scores (glibc's powf)")

    def forward(self, x):
        return (isolation_forest_outputs(self.op, x, self.packet, self.tail, self.offsets,
                                          _TableTorchMath),)


@register_lowering("onnx_isolation_forest")
def _onnx_isolation_forest(op, input_dtypes, context):
    return OnnxIsolationForestNode(op)


class OnnxSquaredDistancesNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.op = _PlainOp(op)
        self.op.n_features, self.op.metric = op.n_features, op.metric
        for f in range(op.n_features):
            self.register_buffer(f"train_{f}", torch.from_numpy(op.train[:, f][None, :].copy()))
        n_train = op.train.shape[0]
        self.estimate_bytes = lambda n_rows: 8 * n_rows * n_train * 3

    def forward(self, x):
        columns = [getattr(self, f"train_{f}") for f in range(self.op.n_features)]
        return (squared_distance_rows(self.op, x, columns, ReduceTorchMath),)


@register_lowering("onnx_squared_distances")
def _onnx_squared_distances(op, input_dtypes, context):
    return OnnxSquaredDistancesNode(op)
