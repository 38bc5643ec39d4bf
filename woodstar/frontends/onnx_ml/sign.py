"""``Sign`` and the ``Cast`` of a sign to int64: skl2onnx's OneClassSVM graph writes
its scores (an ``SVMRegressor``'s values) and ``Cast(Sign(scores), int64)`` as the
labels. The labels become a classifier's, whose classes are ``SIGN_CLASSES`` (-1, 0
and 1 where ONNX Runtime writes them, and int64's smallest value for a NaN score,
which is what x86-64's conversion gives), with ``decision_function`` reading the
scores."""

import numpy as np

from ...ir import Concat
from ...ir.families.onnx_math import SIGN_CLASSES, OnnxMath
from ._attributes import attributes, refuse
from .plain_ops import features_class, inner_shape, reading_block

__all__ = ["handle_sign", "casting_signs"]

_INT64 = 7  # onnx.TensorProto.INT64


def handle_sign(node, state):
    """Sign of a float block (scores, features): 1, -1 or +0; NaN stays NaN. The block
    is kept beside its source so a Cast to int64 can make labels of it."""
    block = reading_block(state, node, 0)
    (value,) = state.add(OnnxMath(function="sign", width=block.width), [block.value], node)
    out = features_class()(value, np.float32, block.width)
    if len(inner_shape(block)) > 1:
        out.inner = inner_shape(block)
    out.one_dimensional = getattr(block, "one_dimensional", False)
    out.sign_of = (node.input[0], block)
    state.values[node.output[0]] = ("features", out)


def casting_signs(cast_handler):
    """Cast to int64 of one column a Sign wrote, from the scores of a model node
    (OneClassSVM's labels): that model's labels (see the module docstring). Other
    Casts go to ``cast_handler``."""
    def handle(node, state):
        role, payload = state.values.get(node.input[0], ("", None)) if node.input else ("", None)
        sign_of = getattr(payload, "sign_of", None) if role == "features" else None
        if attributes(node).get("to") != _INT64 or sign_of is None:
            return cast_handler(node, state)
        source_name, block = sign_of
        source_role, source = state.values.get(source_name, ("", None))
        if block.width != 1 or source_role not in ("values", "features") or \
                not hasattr(source, "node"):
            refuse(node, "a Cast to int64 of the sign of", source_role or "a block",
                   "one column of a model's scores (OneClassSVM's labels)")
        (index,) = state.add(OnnxMath(function="sign_class", width=1), [block.value], node)
        (transformed,) = state.add(Concat(widths=(1, 1)), [block.value, index], node, ":scores")
        from . import _Result

        result = _Result(node, block.value, transformed, np.array(SIGN_CLASSES, np.int64), 1)
        result.model = getattr(source, "model", source.node)
        result.second_method = "decision_function"
        result.labels_as_column = True  # ONNX Runtime's (n, 1) labels
        state.results.append(result)
        state.values[node.output[0]] = ("labels", result)
        return None

    handle.__doc__ = cast_handler.__doc__
    return handle
