"""Handlers for the elementwise operators of skl2onnx's PowerTransformer graphs
(Yeo-Johnson and Box-Cox) that the other readers take for constants only: ``Log`` of a
computed block (``onnx_log``: Eigen's packets or glibc's logf by an element's place in
the tensor), ``Pow`` of a computed block by a constant exponent per column
(``onnx_powf``: glibc's powf), ``Less``/``Greater`` of two computed blocks and ``Not``
of such a comparison. Each wraps the package's handler, which keeps the other cases."""

import numpy as np

from ...ir.families.onnx_math import OnnxLog, OnnxPowf
from ...ir.families.onnx_ops import OnnxElementwise
from ._attributes import refuse
from .plain_ops import features_class, inner_shape, reading_block

__all__ = ["computed_logs", "computed_powers", "computed_comparisons", "comparison_negations"]


def _write(state, node, op, inputs, dtype=np.float32, suffix=""):
    (value,) = state.add(op, [b.value for b in inputs], node, suffix)
    block = features_class()(value, dtype, op.width)
    if not suffix:
        state.values[node.output[0]] = ("features", block)
    return block


def _computed(state, node, index):
    name = node.input[index] if index < len(node.input) else ""
    return name not in state.constants and state.values.get(name, ("",))[0] in (
        "features", "values", "probabilities")


def _plain_block(state, node, index):
    block = reading_block(state, node, index)
    if len(inner_shape(block)) > 1 or getattr(block, "one_dimensional", False):
        refuse(node, "an input of shape", inner_shape(block), "an (n, columns) float matrix")
    return block


def computed_logs(handler):
    """``handler`` (Log of a constant) with Log of a computed float block added."""
    def handle(node, state):
        if not _computed(state, node, 0):
            return handler(node, state)
        block = _plain_block(state, node, 0)
        _write(state, node, OnnxLog(width=block.width), [block])

    handle.__doc__ = handler.__doc__
    return handle


def computed_powers(handler):
    """``handler`` (Pow by a scalar 2 or 3, or of a constant) with Pow of a computed
    float block by other float constants: one exponent, or one per column. ONNX
    Runtime multiplies for a one-element exponent of 2 or 3 (``handler``) and calls
    ``std::pow`` otherwise."""
    def handle(node, state):
        exponent = state.constants.get(node.input[1]) if len(node.input) > 1 else None
        if not _computed(state, node, 0) or exponent is None or (
                exponent.size == 1 and float(exponent.reshape(-1)[0]) in (2.0, 3.0)):
            return handler(node, state)
        block = _plain_block(state, node, 0)
        if exponent.dtype != np.float32 or exponent.size not in (1, block.width) or \
                (exponent.ndim == 2 and exponent.shape[0] != 1) or exponent.ndim > 2:
            refuse(node, f"an exponent of shape {exponent.shape} and dtype", str(exponent.dtype),
                   f"float, one value or {block.width} (one per column)")
        exponents = np.broadcast_to(exponent.reshape(-1), (block.width,))
        if not np.all(np.isfinite(exponents)):
            refuse(node, "exponents", exponents.tolist(), "finite values")
        _write(state, node, OnnxPowf(exponents=exponents), [block])

    handle.__doc__ = handler.__doc__
    return handle


def computed_comparisons(handler):
    """``handler`` (Less/Greater against a constant) with two computed float blocks
    compared: ``a < b`` is ``(a - b) < 0`` (the float32 difference has the sign of the
    exact one and is 0 only when a == b; NaN, and inf - inf, compare false)."""
    def handle(node, state):
        if len(node.input) != 2 or not (_computed(state, node, 0) and _computed(state, node, 1)):
            return handler(node, state)
        blocks = [_plain_block(state, node, 0), _plain_block(state, node, 1)]
        widths = tuple(b.width for b in blocks)
        width = max(widths)
        if any(w not in (1, width) for w in widths):
            refuse(node, "inputs of widths", widths, f"one width or 1 (broadcast), here {width}")
        difference = _write(state, node, OnnxElementwise(function="sub", width=width, widths=widths),
                            blocks, suffix=":difference")
        _write(state, node, OnnxElementwise(function=node.op_type.lower(), width=width,
                                            widths=(width,), operand=np.zeros(width, np.float32)),
               [difference], dtype=np.bool_)

    handle.__doc__ = handler.__doc__
    return handle


def comparison_negations(handler):
    """``handler`` (Not of a truth value) with Not of a comparison's boolean block (held
    as 0.0 and 1.0): 1.0 where it is below one half."""
    def handle(node, state):
        role, block = state.values.get(node.input[0], ("", None)) if node.input else ("", None)
        if role != "features" or block.dtype != np.bool_:
            return handler(node, state)
        _write(state, node, OnnxElementwise(function="less", width=block.width, widths=(block.width,),
                                            operand=np.full(block.width, 0.5, np.float32)),
               [block], dtype=np.bool_)

    handle.__doc__ = handler.__doc__
    return handle
