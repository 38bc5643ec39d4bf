"""``ai.onnx.ml`` SVMRegressor / SVMClassifier -> ``onnx_svm`` (see
``woodstar/ir/families/onnx_ops.py`` for ONNX Runtime's arithmetic it repeats).

Read: the libsvm layout skl2onnx writes for SVR, NuSVR, SVC and NuSVC (support
vectors, kernels LINEAR, POLY of degree 2 or 3, RBF, SIGMOID), with or without
probabilities (``prob_a``/``prob_b``: ONNX Runtime's Platt scaling and pairwise
coupling, ``svm_probabilities``). Refused, by name: ``one_class`` (skl2onnx writes
OneClassSVM as a plain SVMRegressor and a Sign: ``sign.py``), a post-transform, the liblinear layout (no support vectors) and other POLY
degrees."""

import numpy as np

from ...ir.families.onnx_ops import SVM_KERNELS, OnnxSvm
from ._attributes import attributes, refuse

__all__ = ["svm_op"]


def _common(node, a, n_features):
    kernel = a.get("kernel_type", "LINEAR")
    if kernel not in SVM_KERNELS:
        refuse(node, "kernel_type", kernel, SVM_KERNELS)
    params = a.get("kernel_params", np.zeros(0, np.float32))
    if len(params) not in (0, 3):
        refuse(node, "kernel_params of length", len(params), "3 (gamma, coef0, degree)")
    gamma, coef0, degree = (float(p) for p in params) if len(params) else (0.0, 0.0, 0.0)
    if kernel == "POLY" and degree not in (2.0, 3.0):
        refuse(node, "POLY degree", degree, "2 or 3 (ONNX Runtime computes other degrees with "
               "Eigen's pow, which woodstar does not mirror)")
    post = a.get("post_transform", "NONE")
    if post != "NONE":
        refuse(node, "post_transform", post, "NONE")
    vectors = a.get("support_vectors", np.zeros(0, np.float32))
    if len(vectors) == 0 or len(vectors) % n_features:
        refuse(node, f"{len(vectors)} support-vector values for", n_features,
               "n_vectors x n_features values (the liblinear layout without support vectors "
               "is not read)")
    return dict(kernel=kernel, gamma=gamma, coef0=coef0, degree=degree,
                support_vectors=np.asarray(vectors, np.float32).reshape(-1, n_features))


def svm_op(node, n_features):
    """(op, class labels or None) for one SVM node."""
    a = attributes(node)
    common = _common(node, a, n_features)
    n_vectors = common["support_vectors"].shape[0]
    coefficients = a.get("coefficients", np.zeros(0, np.float32))
    rho = a.get("rho", np.zeros(0, np.float32))
    if node.op_type == "SVMRegressor":
        if a.get("one_class", 0):
            refuse(node, "one_class", a["one_class"], "0 (skl2onnx's OneClassSVM graph: an "
                   "SVMRegressor, then Sign)")
        if a.get("n_supports", 0) != n_vectors or len(coefficients) != n_vectors or len(rho) != 1:
            refuse(node, f"n_supports {a.get('n_supports', 0)}, coefficients and rho of lengths",
                   (len(coefficients), len(rho)), f"{n_vectors} support vectors, as many "
                   "coefficients, one rho")
        return OnnxSvm(coefficients=coefficients, rho=rho, role="regressor", **common), None
    strings, ints = a.get("classlabels_strings"), a.get("classlabels_ints")
    labels = np.asarray(strings).astype(str) if strings else np.asarray(ints, np.int64)
    per_class = np.asarray(a.get("vectors_per_class", []), np.int64)
    n_classes = len(labels)
    if len(per_class) != n_classes or int(per_class.sum()) != n_vectors or n_classes < 2:
        refuse(node, f"vectors_per_class {per_class.tolist()} for", f"{n_classes} labels and "
               f"{n_vectors} support vectors", "one count per class (2 classes or more), "
               "adding up to the support vectors")
    n_pairs = n_classes * (n_classes - 1) // 2
    if len(coefficients) != (n_classes - 1) * n_vectors or len(rho) != n_pairs:
        refuse(node, "coefficients and rho of lengths", (len(coefficients), len(rho)),
               f"({(n_classes - 1) * n_vectors}, {n_pairs})")
    prob_a = a.get("prob_a", np.zeros(0, np.float32))
    prob_b = a.get("prob_b", np.zeros(0, np.float32))
    if (len(prob_a), len(prob_b)) not in ((0, 0), (n_pairs, n_pairs)):
        refuse(node, "prob_a and prob_b of lengths", (len(prob_a), len(prob_b)),
               f"none, or one each per class pair ({n_pairs})")
    op = OnnxSvm(coefficients=coefficients, rho=rho, role="classifier",
                 vectors_per_class=per_class, prob_a=prob_a, prob_b=prob_b, **common)
    return op, labels
