"""skl2onnx's GaussianMixture and BayesianGaussianMixture graphs (every covariance
type): each component's weighted log-likelihood from Gemm, ReduceSumSquare, Mul and
Add (a ``Gemm`` with beta 0 in the diag and spherical graphs, ``math_ops.py``), the
labels as its ``ArgMax`` and the probabilities as ``Exp(jll - ReduceLogSumExp(jll))``.
Here the outputs meet: the ArgMax's index becomes the labels 0..k-1 of a classifier
whose ``predict_proba`` is the probability block and, where skl2onnx's
``score_samples`` option adds ReduceLogSumExp(jll) as a third output, whose
``score_samples`` is that column."""

import numpy as np

from ...ir import Concat
from ...ir.families.onnx_math import OnnxReduce
from .plain_ops import inner_shape

__all__ = ["argmax_beside_probabilities"]


def argmax_beside_probabilities(state, outputs):
    """Outputs (the ArgMax of a k-column block, a k-column float block and, with
    skl2onnx's ``score_samples`` option, a one-column float block): a classifier's
    labels, probabilities and ``score_samples`` (see the module docstring); other
    outputs as they are."""
    roles = [role for role, _ in outputs]
    if len(outputs) not in (2, 3) or roles[0] != "argmax" or \
            any(role != "features" for role in roles[1:]):
        return outputs
    scores, block = outputs[0][1], outputs[1][1]
    extra = [p for _, p in outputs[2:]]
    blocks = [scores, block] + extra
    if any(b.dtype != np.float32 or len(inner_shape(b)) != 1 for b in blocks) or \
            block.width != scores.width or any(b.width != 1 for b in extra):
        return outputs
    from . import _Result
    from .plain_ops import _OutputNode

    node = _OutputNode("ArgMax")
    scores = state.rounded(scores, node)
    (index,) = state.builder.add(OnnxReduce(function="argmax", groups=1, size=scores.width),
                                 [scores.value], name="ArgMax:labels")
    (transformed,) = state.builder.add(
        Concat(widths=(block.width, 1) + (1,) * len(extra)),
        [block.value, index] + [b.value for b in extra], name="ArgMax:probabilities")
    result = _Result(node, block.value, transformed, np.arange(block.width, dtype=np.int64),
                     block.width)
    result.model = node
    result.labels_as_column = True  # ArgMax keeps its axis: ONNX Runtime's (n, 1) labels
    if extra:
        result.extra_blocks = (("score_samples", block.width + 1, block.width + 2),)
    state.results.append(result)
    return [("labels", result)] + [("probabilities", result)] * (len(outputs) - 1)
