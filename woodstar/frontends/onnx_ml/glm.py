"""skl2onnx's graphs of the generalized linear models (PoissonRegressor, GammaRegressor,
TweedieRegressor): ``MatMul`` of the float rows by a constant vector, then ``Add`` of
the intercept, ``Exp`` for a log link and ``Reshape`` to (-1, 1). The product becomes
``onnx_vector_product``, which sums each row's terms in the order ONNX Runtime's
kernel does (``woodstar/ir/families/onnx_math.py``); the other nodes are the
package's usual handlers."""

import numpy as np

from ...ir.families.onnx_math import OnnxVectorProduct
from ._attributes import refuse
from .plain_ops import features_class, inner_shape, reading_block

__all__ = ["handle_vector_product"]


def handle_vector_product(node, state):
    """MatMul of an (n, K) float block by a constant float vector of length K: an (n,)
    column (``one_dimensional``, as ONNX Runtime's output is)."""
    weights = state.constants[node.input[1]]
    block = reading_block(state, node, 0)
    if weights.dtype != np.float32:
        refuse(node, "a constant vector of dtype", str(weights.dtype),
               "float (the kernel mirrored is ONNX Runtime's float MatMul)")
    if len(inner_shape(block)) != 1 or getattr(block, "one_dimensional", False):
        refuse(node, "an input of shape", (None,) + inner_shape(block),
               "an (n, K) matrix of rows")
    if weights.shape[0] != block.width:
        refuse(node, f"a vector of length {weights.shape[0]} for rows of width", block.width,
               "as many values as the rows have columns")
    (value,) = state.add(OnnxVectorProduct(weights=weights), [block.value], node)
    out = features_class()(value, np.float32, 1)
    out.one_dimensional = True
    state.values[node.output[0]] = ("features", out)
