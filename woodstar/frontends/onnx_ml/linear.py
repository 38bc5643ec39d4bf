"""``ai.onnx.ml`` LinearClassifier / LinearRegressor -> ``onnx_linear`` (see
``woodstar/ir/families/onnx_ops.py`` for ONNX Runtime's arithmetic it repeats)."""

import numpy as np

from ...ir.families.onnx_ops import LINEAR_POST_TRANSFORMS, OnnxLinear
from ._attributes import attributes, refuse

__all__ = ["linear_op"]


def linear_op(node, n_features):
    """(op, class labels or None, probability columns) for one linear node."""
    a = attributes(node)
    is_classifier = node.op_type == "LinearClassifier"
    post = a.get("post_transform", "NONE")
    coefficients = a.get("coefficients", np.zeros(0, np.float32))
    intercepts = a.get("intercepts")
    if is_classifier:
        n_targets = len(intercepts) if intercepts is not None else 0
    else:
        n_targets = int(a.get("targets", 1))
        if intercepts is None:
            intercepts = np.zeros(n_targets, np.float32)
    if n_targets < 1 or len(coefficients) != n_targets * n_features or len(intercepts) != n_targets:
        refuse(node, f"coefficients/intercepts of lengths ({len(coefficients)}, "
               f"{0 if intercepts is None else len(intercepts)}) for", n_features,
               "n_targets x n_features coefficients and n_targets intercepts")
    allowed = LINEAR_POST_TRANSFORMS if is_classifier else ("NONE",)
    if post not in allowed:
        refuse(node, "post_transform", post, allowed)
    labels, width = None, n_targets
    if is_classifier:
        strings, ints = a.get("classlabels_strings"), a.get("classlabels_ints")
        labels = np.asarray(strings).astype(str) if strings else np.asarray(ints, np.int64)
        if n_targets == 1:
            if len(labels) != 2:
                refuse(node, "one score column with class labels", list(labels),
                       "two class labels (else ONNX Runtime returns the literal labels 0 and 1)")
            width = 2
            if post not in ("NONE", "LOGISTIC"):
                refuse(node, "post_transform of one score column", post, ("NONE", "LOGISTIC"))
        elif len(labels) != n_targets:
            refuse(node, f"{len(labels)} class labels for", n_targets, "one label per score column")
    op = OnnxLinear(coefficients=np.asarray(coefficients, np.float32).reshape(n_targets, n_features),
                    intercepts=np.asarray(intercepts, np.float32),
                    role="classifier" if is_classifier else "regressor", post_transform=post,
                    n_labels=0 if labels is None else len(labels))
    return op, labels, width
