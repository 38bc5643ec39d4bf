"""The operators of skl2onnx's OneVsRestClassifier and OneVsOneClassifier graphs beyond
the package's. One-vs-rest: each binary estimator's probabilities ``Slice``d to their
positive column, the columns ``Concat``enated, ``ArgMax`` over them for the labels and
``LpNormalization`` (p=1) for the probabilities (``onnx_normalizer`` with norm
``LP1``: ONNX Runtime sums the absolute values left to right and divides; a zero sum
writes zeros). One-vs-one: each pair's label (0 or 1) ``Reshape``d to a column and
``Cast`` to float, its probabilities ``Reshape``d to ``(Shape(X)[0], -1)`` (the rows'
count ``Gather``ed from the input's shape: a block stays as it is) and sliced, then
the votes and confidences of the SVC graph (``plain_ops.py``); the graph's label is
the ``ArgMax`` index itself, a column as ONNX Runtime gives it (``mixture.py``). With
ZipMap (skl2onnx's default) that index is ``Cast`` to int64, which keeps it, and the
scores go through ``ZipMap``: the labels stay the index (not the classes ZipMap names,
as ONNX Runtime gives them) and ``predict_proba`` is the scores' matrix."""

import numpy as np

from ...ir import Select
from ...ir.families.onnx_ops import OnnxNormalizer
from ._attributes import attributes, refuse
from .plain_ops import _block, features_class

__all__ = ["handle_slice", "handle_lp_normalization", "gathering_row_count",
           "concatenating_row_count", "reshaping_to_rows", "casting_label_columns",
           "casting_argmax", "zipmap_beside_argmax"]

_INT64_MAX = np.iinfo(np.int64).max


def _constant_ints(node, state, index, default):
    if index >= len(node.input) or not node.input[index]:
        return default
    value = state.constants.get(node.input[index])
    if value is None or value.dtype.kind not in "iu":
        refuse(node, f"input {index} that is not a constant list of integers",
               node.input[index], "an int64 initializer or Constant")
    return [int(v) for v in np.asarray(value).reshape(-1)]


def _slice_indices(node, start, end, step, width):
    """ONNX's Slice of ``width`` columns: negative bounds count from the end, bounds
    clamp to the columns (Python's slice rules, which ONNX follows)."""
    if step == 0:
        refuse(node, "a step of", 0, "a nonzero step")
    end = min(end, _INT64_MAX)  # INT64_MAX means "to the end"
    return tuple(range(width)[slice(start, end, step)])


def handle_slice(node, state):
    """Slice of the columns (axis 1 or -1) of a float block by constant bounds."""
    block = _block(state, node, 0)
    if getattr(block, "one_dimensional", False):
        refuse(node, "an input reshaped to", "one dimension", "an (n, columns) matrix")
    starts = _constant_ints(node, state, 1, None)
    ends = _constant_ints(node, state, 2, None)
    axes = _constant_ints(node, state, 3, [0] if starts is None else list(range(len(starts))))
    steps = _constant_ints(node, state, 4, [1] * len(axes))
    if starts is None or ends is None or not len(starts) == len(ends) == len(axes) == len(steps):
        refuse(node, "bounds (starts, ends, axes, steps)", (starts, ends, axes, steps),
               "one constant start, end, axis and step")
    if len(axes) != 1 or axes[0] not in (1, -1):
        refuse(node, "axes", axes, "[1] or [-1] (each row's columns)")
    indices = _slice_indices(node, starts[0], ends[0], steps[0], block.width)
    if not indices:
        refuse(node, "a slice of no columns", (starts, ends, steps), "at least one column")
    (value,) = state.add(Select(n_features=block.width, indices=indices), [block.value], node)
    state.values[node.output[0]] = ("features", features_class()(value, block.dtype,
                                                                 len(indices)))


def handle_lp_normalization(node, state):
    """LpNormalization with p=1 over each row's columns of a float block."""
    block = _block(state, node, 0)
    a = attributes(node)
    if a.get("p", 2) != 1 or a.get("axis", -1) not in (1, -1):
        refuse(node, "(p, axis)", (a.get("p", 2), a.get("axis", -1)), "(1, 1) or (1, -1)")
    if getattr(block, "one_dimensional", False):
        refuse(node, "an input reshaped to", "one dimension", "an (n, columns) matrix")
    (value,) = state.add(OnnxNormalizer(norm="LP1", width=block.width), [block.value], node)
    state.values[node.output[0]] = ("features", features_class()(value, np.float32, block.width))


def _constant_value(state, name):
    value = state.constants.get(name)
    return None if value is None else [int(v) for v in np.asarray(value).reshape(-1)]


def gathering_row_count(handler):
    """``handler`` (the package's Gather) reading ``Shape(x)[0]`` first: the rows' count,
    kept aside for a Concat into a shape."""
    def handle(node, state):
        role = state.values.get(node.input[0], ("",))[0] if node.input else ""
        if role != "shape":
            return handler(node, state)
        if _constant_value(state, node.input[1]) != [0] or attributes(node).get("axis", 0) != 0:
            refuse(node, "a Gather from a shape of", _constant_value(state, node.input[1]),
                   "[0] (the rows' count)")
        state.values[node.output[0]] = ("row_count", None)
        return None

    handle.__doc__ = handler.__doc__
    return handle


def concatenating_row_count(handler):
    """``handler`` (the package's Concat) reading ``Concat(rows' count, [-1])`` on axis 0
    first: the shape (n, -1), kept aside for a Reshape."""
    def handle(node, state):
        roles = [state.values.get(name, ("",))[0] for name in node.input]
        if "row_count" not in roles:
            return handler(node, state)
        rest = [_constant_value(state, name) for name in node.input[1:]]
        if roles[0] != "row_count" or attributes(node).get("axis") != 0 or rest != [[-1]]:
            refuse(node, "a shape built of", [roles[0]] + rest, "the rows' count, then [-1]")
        state.values[node.output[0]] = ("row_shape", None)
        return None

    handle.__doc__ = handler.__doc__
    return handle


def reshaping_to_rows(handler):
    """``handler`` (the package's Reshape) taking a Reshape to (n, -1) of an (n, k) block
    first: the block as it is."""
    def handle(node, state):
        if len(node.input) < 2 or state.values.get(node.input[1], ("",))[0] != "row_shape":
            return handler(node, state)
        role, payload = state.read(node, 0, ("features", "probabilities", "values"))
        if role == "features" and (getattr(payload, "one_dimensional", False) or
                                   len(getattr(payload, "inner", None) or (1,)) != 1):
            refuse(node, "a reshape to (n, -1) of", "a tensor other than (n, k)",
                   "an (n, k) block")
        state.values[node.output[0]] = (role, payload)
        return None

    handle.__doc__ = handler.__doc__
    return handle


def casting_label_columns(handler):
    """``handler`` (the package's Cast) taking a label column cast to float first: the
    label itself where the labels are 0..k-1 (a pair's vote)."""
    def handle(node, state):
        role, payload = state.values.get(node.input[0], ("", None)) if node.input else ("", None)
        if role != "label_column" or attributes(node).get("to") != 1:
            return handler(node, state)
        (result,) = payload
        if result.labels.dtype.kind not in "iu" or \
                list(result.labels) != list(range(len(result.labels))):
            refuse(node, "a Cast to float of labels", list(result.labels)[:5],
                   "labels 0..k-1 (the label's index)")
        from .multioutput import label_index

        index = label_index(state, result, node.name or node.op_type)
        state.values[node.output[0]] = ("features", features_class()(index, np.float32, 1))
        return None

    handle.__doc__ = handler.__doc__
    return handle


def casting_argmax(handler):
    """``handler`` (the package's Cast) taking a Cast to int64 of an ArgMax index (int64
    already: ONNX Runtime keeps it as it is)."""
    def handle(node, state):
        role, payload = state.values.get(node.input[0], ("", None)) if node.input else ("", None)
        if role != "argmax" or attributes(node).get("to") != 7:  # onnx.TensorProto.INT64
            return handler(node, state)
        state.values[node.output[0]] = (role, payload)
        return None

    handle.__doc__ = handler.__doc__
    return handle


def zipmap_beside_argmax(outputs):
    """Outputs (an ArgMax index, a ZipMap of a float block) as (the index, the block):
    ``predict_proba`` gives the ZipMap's values as a matrix, as for the other ZipMap
    graphs."""
    if len(outputs) == 2 and outputs[0][0] == "argmax" and outputs[1][0] == "zipmap" and \
            isinstance(outputs[1][1], features_class()):
        return [outputs[0], ("features", outputs[1][1])]
    return outputs
