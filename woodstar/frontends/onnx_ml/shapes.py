"""``Shape``, ``ConstantOfShape`` and ``ReduceProd``, as skl2onnx's PolynomialFeatures
graph uses them: each monomial is the ``ReduceProd`` of the input columns it
multiplies (selected by ``ArrayFeatureExtractor``), and the bias column is
``ConstantOfShape(Shape(a monomial))``, a column of ones on every row. A shape is
only ever that of a block of rows (``(n, width)``), read as such; nothing else about
dynamic shapes is read."""

import numpy as np

from ...ir.families.onnx_math import OnnxFill, OnnxReduceProd
from ._attributes import attributes, reduce_axes, refuse

__all__ = ["handle_shape", "handle_constant_of_shape", "handle_reduce_prod"]


def _features_class():
    from . import _Features

    return _Features


def handle_shape(node, state):
    """The shape of a block of features: its rows (per call) and its width."""
    _, features = state.read(node, 0, ("features",))
    a = attributes(node)
    if a.get("start", 0) != 0 or "end" in a:
        refuse(node, "attributes (start, end)", (a.get("start", 0), a.get("end")),
               "the whole shape (no start or end)")
    if getattr(features, "one_dimensional", False):
        refuse(node, "the shape of", "a one-dimensional tensor", "an (n, columns) block")
    state.values[node.output[0]] = ("shape", features)


def handle_constant_of_shape(node, state):
    """A float block of the shape's rows and width, every value the attribute's."""
    _, features = state.read(node, 0, ("shape",))
    value = attributes(node).get("value", np.zeros(1, np.float32))
    value = np.asarray(value)
    if value.size != 1 or value.dtype != np.float32:
        refuse(node, "a value of dtype", str(value.dtype), "one float")
    op = OnnxFill(width=features.width, value=float(value.reshape(-1)[0]))
    (out,) = state.add(op, [features.value], node)
    state.values[node.output[0]] = ("features", _features_class()(out, np.float32, features.width))


def handle_reduce_prod(node, state):
    """ReduceProd over each row's columns (axes [1], keepdims 1) of a float block."""
    _, features = state.read(node, 0, ("features",))
    axes, keepdims = reduce_axes(node, state)
    if axes not in ([1], [-1]) or keepdims != 1:
        refuse(node, "axes and keepdims", (axes, keepdims), "([1], 1)")
    if features.dtype != np.float32:
        refuse(node, "input of dtype", str(features.dtype), "float")
    features = state.rounded(features, node)
    (out,) = state.add(OnnxReduceProd(width=features.width), [features.value], node)
    state.values[node.output[0]] = ("features", _features_class()(out, np.float32, 1))
