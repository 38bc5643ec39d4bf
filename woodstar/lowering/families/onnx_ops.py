"""Lowering of ``onnx_tree_scores``: the IR's own definition (``tree_scores``) run on
Torch tensors through a Torch twin of its NumPy operations, so the program adds the
trees in the same order and dtype and finalizes with the same float32 steps."""

import numpy as np
import torch
from torch import nn

from ...exceptions import unsupported_message
from ...ir.families.onnx_ops import (elementwise_columns, linear_scores, normalize,
                                     sigmoid_columns, softmax_columns, svm_scores, tree_scores)
from ..ops import register_lowering

__all__ = ["OnnxTreeScoresNode", "OnnxLinearNode", "OnnxNormalizerNode", "OnnxCastNode",
           "OnnxBinarizerNode", "OnnxSigmoidNode", "OnnxSvmNode", "OnnxSoftmaxNode",
           "OnnxElementwiseNode"]

_DTYPES = {"float32": torch.float32, "float64": torch.float64}


class TorchMath:
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


def _sweep_step(sweep, i, done, values):
    values, done = sweep(list(values), done)
    return (i + 1, done, *values)


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
