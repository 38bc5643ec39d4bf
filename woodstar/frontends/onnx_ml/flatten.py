"""``Flatten`` (axis 1): each row's tensor as one row of columns (skl2onnx's
VotingRegressor flattens each weighted (n, 1) prediction before its ``Sum``). The
values are untouched; only a block's row shape changes."""

import numpy as np

from ._attributes import attributes, refuse
from .plain_ops import features_class, reading_block

__all__ = ["handle_flatten"]


def handle_flatten(node, state):
    """Flatten with axis 1 (or -1 of an (n, k) block): the block as (n, width)."""
    block = reading_block(state, node, 0)
    rank = len(getattr(block, "inner", None) or (1,)) + 1
    axis = int(attributes(node).get("axis", 1))
    if axis not in (1, 1 - rank):  # -1 of an (n, k) block is axis 1
        refuse(node, "axis", axis, "1: one row per input row (another axis mixes the rows)")
    out = features_class()(block.value, np.float32, block.width)
    state.values[node.output[0]] = ("features", out)
