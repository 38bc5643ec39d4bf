"""Reading ONNX node attributes without importing onnx at woodstar's import time."""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message

__all__ = ["attributes", "node_label", "refuse", "reduce_axes"]


def node_label(node):
    return f"{node.op_type} (domain {node.domain or 'ai.onnx'!r}, node {node.name!r})"


def refuse(node, what, value, choices):
    raise MissingConverter(unsupported_message(node_label(node), what, value, choices))


def attributes(node):
    """``{name: value}``: ints and floats as NumPy arrays (floats as float32, as ONNX
    stores them), strings decoded, scalars as Python values, tensors as arrays."""
    from onnx import AttributeProto, numpy_helper

    out = {}
    for a in node.attribute:
        if a.type == AttributeProto.INTS:
            out[a.name] = np.asarray(a.ints, dtype=np.int64)
        elif a.type == AttributeProto.FLOATS:
            out[a.name] = np.asarray(a.floats, dtype=np.float32)
        elif a.type == AttributeProto.STRINGS:
            out[a.name] = [s.decode("utf-8") for s in a.strings]
        elif a.type == AttributeProto.INT:
            out[a.name] = int(a.i)
        elif a.type == AttributeProto.FLOAT:
            out[a.name] = np.float32(a.f)
        elif a.type == AttributeProto.STRING:
            out[a.name] = a.s.decode("utf-8")
        elif a.type == AttributeProto.TENSOR:
            out[a.name] = numpy_helper.to_array(a.t)
        else:
            refuse(node, f"attribute {a.name!r} of type", int(a.type),
                   "ints, floats, strings, int, float, string, tensor")
    return out


def reduce_axes(node, state):
    """(axes as a list of ints or None, keepdims) of a Reduce* node: ``axes`` is an
    attribute before opset 18 (13 for ReduceSum) and a constant second input after."""
    a = attributes(node)
    axes = a.get("axes")
    if axes is None and len(node.input) > 1 and node.input[1] in state.constants:
        axes = state.constants[node.input[1]]
    axes = None if axes is None else [int(x) for x in np.asarray(axes).reshape(-1)]
    return axes, a.get("keepdims", 1)
