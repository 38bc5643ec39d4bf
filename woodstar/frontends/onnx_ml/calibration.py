"""The operators of skl2onnx's CalibratedClassifierCV graph (sigmoid calibration)
beyond the package's (``Exp`` is ``math_ops.py``'s): ``Tanh`` (MLAS's kernel, for
KernelPCA's sigmoid kernel), ``ReduceSum`` over each row's
columns, the zero mask ``Cast(Not(Cast(x, bool)), float)``, and a constant divided
by a block (``1 / (1 + exp(a * p + b))``). The per-class columns come from an
``ArrayFeatureExtractor`` of each calibrated classifier's probabilities, read as
features (``reading_blocks``)."""

import numpy as np

from ...ir.families.onnx_ops import OnnxElementwise
from ...ir.families.onnx_math import OnnxFill, OnnxIsZero, OnnxMlasTanh, OnnxRowSums
from ._attributes import attributes, reduce_axes, refuse
from .plain_ops import _block

__all__ = ["handle_tanh", "handle_reduce_sum", "handle_not", "truth_casts",
           "constant_divisions"]

_FLOAT, _BOOL = 1, 9


def _features(value, width, dtype=np.float32):
    from . import _Features

    return _Features(value, dtype, width)


def _float_block(node, state, index=0):
    block = _block(state, node, index)
    if block.dtype != np.float32 or getattr(block, "one_dimensional", False):
        refuse(node, "input of dtype", str(block.dtype), "a float (n, columns) block")
    return block


def handle_tanh(node, state):
    """Tanh of a float block: MLAS's kernel (KernelPCA's sigmoid kernel)."""
    block = _float_block(node, state)
    (value,) = state.add(OnnxMlasTanh(width=block.width), [block.value], node)
    state.values[node.output[0]] = ("features", _features(value, block.width))


def handle_reduce_sum(node, state):
    """ReduceSum over each row's columns (axes [1], keepdims 1) of a float block."""
    block = _float_block(node, state)
    axes, keepdims = reduce_axes(node, state)
    if axes not in ([1], [-1]) or keepdims != 1:
        refuse(node, "axes and keepdims", (axes, keepdims), "([1], 1)")
    (value,) = state.add(OnnxRowSums(width=block.width), [block.value], node)
    state.values[node.output[0]] = ("features", _features(value, 1))


def handle_not(node, state):
    """Not of a float block cast to bool: its zero mask, once cast back to float."""
    _, (block, negated) = state.read(node, 0, ("truth",))
    state.values[node.output[0]] = ("truth", (block, not negated))


def truth_casts(handler):
    """``handler`` (the package's Cast) reading a float block cast to bool, and that
    bool, negated, cast back to float (1.0 where the block is zero)."""
    def handle(node, state):
        to = attributes(node).get("to")
        role = state.values.get(node.input[0], ("",))[0] if node.input else ""
        if to == _BOOL and role in ("features", "probabilities", "values"):
            state.values[node.output[0]] = ("truth", (_float_block(node, state), False))
            return None
        if role == "truth":
            block, negated = state.values[node.input[0]][1]
            if to != _FLOAT or not negated:
                refuse(node, "a Cast of a truth value to element type", to,
                       "float, of Not(Cast(x, bool)) (the zero mask)")
            (value,) = state.add(OnnxIsZero(width=block.width), [block.value], node)
            state.values[node.output[0]] = ("features", _features(value, block.width))
            return None
        return handler(node, state)

    handle.__doc__ = handler.__doc__
    return handle


def constant_divisions(handler):
    """``handler`` (the package's Add/Sub/Mul/Div) with ``constant / block`` first: a
    column of the constant divided by the block, each quotient rounded once."""
    def handle(node, state):
        if node.op_type == "Div" and len(node.input) == 2 and \
                node.input[0] in state.constants and node.input[1] not in state.constants:
            constant = np.asarray(state.constants[node.input[0]])
            if constant.size != 1 or constant.dtype != np.float32:
                refuse(node, "a dividend of shape and dtype", (constant.shape, str(constant.dtype)),
                       "one float")
            block = _float_block(node, state, 1)
            (filled,) = state.add(OnnxFill(width=1, value=float(constant.reshape(-1)[0])),
                                  [block.value], node, ":dividend")
            op = OnnxElementwise(function="div", width=block.width, widths=(1, block.width))
            (value,) = state.add(op, [filled, block.value], node)
            state.values[node.output[0]] = ("features", _features(value, block.width))
            return None
        return handler(node, state)

    handle.__doc__ = handler.__doc__
    return handle
