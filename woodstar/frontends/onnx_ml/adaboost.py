"""The operators of skl2onnx's AdaBoostClassifier graph (SAMME) beyond the package's:
``Equal`` of an ``ArgMax`` with the constant class indices (each estimator's vote as
a one-hot block), ``Where`` with a constant branch (a column of that constant),
``Cast`` to int32 and ``Equal`` to 0 (the zero guard of the normaliser: 1.0 where it
truncates to 0). ``Shape`` and ``ConstantOfShape`` are ``shapes.py``'s; ``Exp`` and
``ReduceSum`` are ``calibration.py``'s."""

import numpy as np

from ...ir.families.onnx_math import OnnxFill, OnnxIndicator
from ._attributes import attributes, refuse
from .plain_ops import _block

__all__ = ["handle_equal", "integer_casts", "constant_branches"]

_INT32 = 6


def _bool_block(value, width):
    from . import _Features

    return _Features(value, np.bool_, width)  # 0.0 / 1.0, as Less/Greater write


def handle_equal(node, state):
    """Equal(ArgMax(p), constant class indices), or Equal(Cast(x, int32), 0)."""
    role, payload = state.read(node, 0, ("argmax", "int32"))
    constant = state.constants.get(node.input[1]) if len(node.input) > 1 else None
    if constant is None:
        refuse(node, "a second input that is not a constant", node.input[1:], "a constant")
    constant = np.asarray(constant)
    if role == "argmax":
        if constant.dtype != np.int64 or constant.ndim not in (1, 2) or \
                (constant.ndim == 2 and constant.shape[0] != 1):
            refuse(node, "class indices of shape and dtype", (constant.shape, str(constant.dtype)),
                   "int64 (1, classes) or (classes,)")
        codes = tuple(int(c) for c in constant.reshape(-1))
        op = OnnxIndicator(function="first_max_is", width=len(codes), input_width=payload.width,
                           codes=codes).validate()
    else:
        if constant.size != 1 or constant.dtype != np.int32 or int(constant.reshape(-1)[0]) != 0:
            refuse(node, "a comparison of an int32 cast with", constant.reshape(-1)[:3].tolist(),
                   "0 (int32)")
        op = OnnxIndicator(function="truncates_to_zero", width=payload.width,
                           input_width=payload.width).validate()
    (value,) = state.add(op, [payload.value], node)
    state.values[node.output[0]] = ("features", _bool_block(value, op.width))


def integer_casts(handler):
    """``handler`` (the package's Cast) reading a float block cast to int32 (kept aside
    until an Equal to 0 reads it)."""
    def handle(node, state):
        role = state.values.get(node.input[0], ("",))[0] if node.input else ""
        if attributes(node).get("to") == _INT32 and role in ("features", "probabilities",
                                                             "values"):
            block = _block(state, node, 0)
            if block.dtype != np.float32:
                refuse(node, "a Cast to int32 of dtype", str(block.dtype), "float")
            state.values[node.output[0]] = ("int32", block)
            return None
        return handler(node, state)

    handle.__doc__ = handler.__doc__
    return handle


def constant_branches(handler):
    """``handler`` (the package's Where) with a constant float branch made a column of
    that constant first."""
    def handle(node, state):
        if len(node.input) != 3 or not any(n in state.constants for n in node.input[1:]):
            return handler(node, state)
        _, condition = state.read(node, 0, ("features",))
        renamed = type(node)()
        renamed.CopyFrom(node)
        for i in (1, 2):
            name = node.input[i]
            if name not in state.constants:
                continue
            constant = np.asarray(state.constants[name])
            if constant.size != 1 or constant.dtype != np.float32:
                refuse(node, "a constant branch of shape and dtype",
                       (constant.shape, str(constant.dtype)), "one float")
            (filled,) = state.add(OnnxFill(width=1, value=float(constant.reshape(-1)[0])),
                                  [condition.value], node, f":branch{i}")
            from . import _Features

            alias = f"{name}:column:{node.output[0]}"
            state.values[alias] = ("features", _Features(filled, np.float32, 1))
            renamed.input[i] = alias
        return handler(renamed, state)

    handle.__doc__ = handler.__doc__
    return handle
