"""Meta-estimator graphs over several classifiers' probabilities, as skl2onnx writes
them. A BaggingClassifier's: each estimator's probabilities ``Reshape``d to
(1, n, classes), ``Concat``enated on axis 0 (a ``stack``: a list of blocks, never a
tensor), ``ReduceMean`` over axis 0 (``onnx_stack_mean``), then ``ArgMax`` and the
classes (read by the package). ``stacking`` wraps the package's Reshape and Concat
handlers so that they take this case and leave every other to the handler."""

import numpy as np

from ...ir.families.onnx_math import OnnxStackMean
from ._attributes import attributes, reduce_axes, refuse
from .plain_ops import _block

__all__ = ["stacking", "handle_reduce_mean", "relabel_scored_results"]

# ONNX Runtime sums the stacked blocks with MLAS's SGEMM by a row of ones; measured
# term after term (the order ``onnx_stack_mean`` repeats) up to this many blocks
MAX_STACKED = 200


def _features_class():
    from . import _Features

    return _Features


def _is_stack_reshape(node, state):
    if node.op_type != "Reshape" or len(node.input) != 2:
        return False
    role = state.values.get(node.input[0], ("",))[0]
    shape = state.constants.get(node.input[1])
    return role in ("probabilities", "features", "values") and shape is not None and \
        shape.size == 3 and [int(d) for d in shape.reshape(-1)[:2]] == [1, -1]


def _reshape_to_stack(node, state):
    block = _block(state, node, 0)
    width = int(state.constants[node.input[1]].reshape(-1)[2])
    if width not in (block.width, -1) or getattr(block, "one_dimensional", False):
        refuse(node, "a reshape to (1, -1, width) of a block of width", block.width,
               f"the block's own width ({block.width})")
    if block.dtype != np.float32:
        refuse(node, "a stacked block of dtype", str(block.dtype), "float")
    state.values[node.output[0]] = ("stack", [block])


def _concat_stacks(node, state):
    if attributes(node).get("axis") != 0:
        refuse(node, "a Concat of stacked blocks on axis", attributes(node).get("axis"), "0")
    blocks = []
    for i in range(len(node.input)):
        blocks.extend(state.read(node, i, ("stack",))[1])
    if len({b.width for b in blocks}) != 1:
        refuse(node, "stacked blocks of widths", sorted({b.width for b in blocks}), "one width")
    state.values[node.output[0]] = ("stack", blocks)


def stacking(handler):
    """``handler`` (the package's Reshape or Concat) with the stacking cases first."""
    def handle(node, state):
        if _is_stack_reshape(node, state):
            return _reshape_to_stack(node, state)
        if node.op_type == "Concat" and node.input and \
                state.values.get(node.input[0], ("",))[0] == "stack":
            return _concat_stacks(node, state)
        return handler(node, state)

    handle.__doc__ = handler.__doc__
    return handle


def handle_reduce_mean(node, state):
    """ReduceMean over axis 0 of a stack of blocks (keepdims 0): their mean."""
    _, blocks = state.read(node, 0, ("stack",))
    axes, keepdims = reduce_axes(node, state)
    if axes != [0] or keepdims != 0:
        refuse(node, "axes and keepdims", (axes, keepdims), "([0], 0)")
    if len(blocks) > MAX_STACKED:
        refuse(node, "a mean of blocks numbering", len(blocks),
               f"up to {MAX_STACKED} (MLAS's sum order is measured that far)")
    width = blocks[0].width
    op = OnnxStackMean(width=width, count=len(blocks))
    (value,) = state.add(op, [b.value for b in blocks], node)
    state.values[node.output[0]] = ("features", _features_class()(value, np.float32, width))


def relabel_scored_results(state, scores, result):
    """A model's probabilities that an ``ArgMax`` lookup labels (``result``, over their
    score block ``scores``): a StackingClassifier's final estimator, whose graph takes
    its labels from the normalised probabilities rather than from the model node. The
    probabilities become ``result``'s, so one result lies behind the graph's outputs."""
    blocks = state.__dict__.get("_score_blocks", {})
    for name, (role, payload) in list(state.values.items()):
        if role == "probabilities" and blocks.get(id(payload)) is scores:
            state.values[name] = ("probabilities", result)
