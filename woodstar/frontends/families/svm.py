"""scikit-learn's kernel SVMs (libsvm) -> graph IR: ``SVC``, ``NuSVC``, ``SVR``,
``NuSVR``, ``OneClassSVM``.

Read from the public fitted attributes: ``support_vectors_``, ``dual_coef_``,
``intercept_``, ``n_support_``, ``classes_``, ``offset_``, ``probA_``/``probB_``, the
kernel's ``coef0`` and ``degree``, and ``_gamma`` (``gamma`` as resolved at fit time:
``"scale"`` depends on the training data). The graph is the kernel
(``svm_kernel``), the decision values (a ``linear`` op over the kernel values) and, for
the classifiers, the shown decision function with libsvm's vote
(``svm_ovo_vote``) and the probabilities (``svm_pairwise_proba``) side by side in the
transformed result, read by ``Head.blocks``. See woodstar/ir/families/svm.py.
"""

import warnings

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import Concat, ColumnOps, GraphBuilder, LinearModel, ModelIR, ValueType
from ...ir.families.svm import SVM_KERNELS, SVMKernel, SVMOvoVote, SVMPairwiseProba, pairs_of
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend

__all__ = ["SVM_CLASSIFIERS", "SVM_REGRESSORS"]

SVM_CLASSIFIERS = ("SVC", "NuSVC")
SVM_REGRESSORS = ("SVR", "NuSVR")


def _dense(array):
    """A model fitted on sparse data keeps sparse support vectors and coefficients."""
    array = array.toarray() if hasattr(array, "toarray") else array
    return np.asarray(array, dtype=np.float64)


def _kernel(model):
    name = type(model).__name__
    kernel = model.kernel
    if callable(kernel) or kernel not in SVM_KERNELS:
        raise MissingConverter(unsupported_message(
            name, "kernel", kernel if isinstance(kernel, str) else getattr(kernel, "__name__", kernel),
            ", ".join(repr(k) for k in SVM_KERNELS)))
    support_vectors = _dense(model.support_vectors_)
    if support_vectors.shape[0] == 0:
        raise MissingConverter(unsupported_message(
            name, "a model without support vectors", support_vectors.shape,
            "models with at least one support vector"))
    degree = model.degree
    if kernel == "poly" and int(degree) != degree:
        raise MissingConverter(unsupported_message(name, "degree", degree, "integers"))
    return SVMKernel(kernel=kernel, support_vectors=support_vectors, gamma=float(model._gamma),
                     coef0=float(model.coef0), degree=int(degree) if kernel == "poly" else 0)


def _pair_coefficients(dual_coef, n_support):
    """libsvm's pairwise sums as a (n_pairs, n_SV) matrix: pair (i, j) weighs class i's
    support vectors by ``dual_coef[j - 1]`` and class j's by ``dual_coef[i]``; the other
    classes' support vectors get 0."""
    n_classes = len(n_support)
    start = np.concatenate([[0], np.cumsum(n_support)]).astype(np.int64)
    coef = np.zeros((len(pairs_of(n_classes)), dual_coef.shape[1]))
    for p, (i, j) in enumerate(pairs_of(n_classes)):
        coef[p, start[i]:start[i + 1]] = dual_coef[j - 1, start[i]:start[i + 1]]
        coef[p, start[j]:start[j + 1]] = dual_coef[i, start[j]:start[j + 1]]
    return coef


def _probabilities(model):
    """``probA_``, ``probB_`` (deprecated in scikit-learn 1.9 with ``probability``)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return _dense(model.probA_).reshape(-1), _dense(model.probB_).reshape(-1)


@register_frontend("sklearn", *SVM_CLASSIFIERS)
def _svm_classifier(model, options):
    check_fitted(model, "support_vectors_")
    name = type(model).__name__
    classes = np.asarray(model.classes_)
    k = len(classes)
    shape = model.decision_function_shape
    if shape not in ("ovo", "ovr"):
        raise MissingConverter(unsupported_message(name, "decision_function_shape", shape,
                                                   "'ovo', 'ovr'"))
    if model.break_ties and shape == "ovo":
        # scikit-learn's own predict raises ValueError for this combination
        raise MissingConverter(unsupported_message(
            name, "break_ties=True with decision_function_shape", shape, "'ovr'"))
    n_support = np.asarray(model.n_support_, dtype=np.int64)
    dual_coef = _dense(model.dual_coef_)
    binary = k == 2
    coef = dual_coef if binary else _pair_coefficients(dual_coef, n_support)
    intercept = np.asarray(model.intercept_, dtype=np.float64).reshape(-1)

    kernel = _kernel(model)
    builder = GraphBuilder(ValueType.floats(kernel.n_features))
    (kernel_values,) = builder.add(kernel, ["input"], "kernel")
    raw, _ = builder.add(LinearModel(coef=coef, intercept=intercept, summation="in_order"),
                         [kernel_values], "pairs")
    vote = SVMOvoVote(n_classes=k, decision_shape=shape, break_ties=bool(model.break_ties),
                      negated=binary)
    decision, label_index = builder.add(vote, [raw], "vote")
    width = vote.decision_width
    parts, widths = [decision, label_index], [width, 1]
    blocks = [("decision", 0, width), ("label_index", width, width + 1)]
    methods = ("predict", "decision_function")
    if hasattr(model, "predict_proba"):
        prob_a, prob_b = _probabilities(model)
        if prob_a.size == 0:
            raise MissingConverter(unsupported_message(
                name, "probability=True without fitted probA_/probB_", prob_a.size,
                "models fitted with probability=True"))
        (proba,) = builder.add(SVMPairwiseProba(n_classes=k, prob_a=prob_a, prob_b=prob_b,
                                                negated=binary), [raw], "proba")
        parts.append(proba)
        widths.append(k)
        blocks.append(("proba", width + 1, width + 1 + k))
        methods += ("predict_proba", "predict_log_proba")
    (transformed,) = builder.add(Concat(widths=tuple(widths)), parts, "outputs")
    head = sklearn_head(model, "classification", methods, classes=(classes,),
                        allows_inf=False, blocks=tuple(blocks))
    return ModelIR(head=head, graph=builder.build(raw, transformed)).validate()


def _single_output(model):
    """Kernel -> ``K @ dual_coef_[0] + intercept_[0]``: (graph builder, raw value)."""
    kernel = _kernel(model)
    builder = GraphBuilder(ValueType.floats(kernel.n_features))
    (kernel_values,) = builder.add(kernel, ["input"], "kernel")
    linear = LinearModel(coef=_dense(model.dual_coef_)[:1],
                         intercept=np.asarray(model.intercept_, dtype=np.float64).reshape(-1)[:1],
                         summation="in_order")
    raw, _ = builder.add(linear, [kernel_values], "decision")
    return builder, raw


@register_frontend("sklearn", *SVM_REGRESSORS)
def _svm_regressor(model, options):
    check_fitted(model, "support_vectors_")
    builder, raw = _single_output(model)
    head = sklearn_head(model, "regression", ("predict",), allows_inf=False)
    return ModelIR(head=head, graph=builder.build(raw, raw)).validate()


@register_frontend("sklearn", "OneClassSVM")
def _one_class_svm(model, options):
    """score_samples is ``decision_function(X) + offset_``, as scikit-learn adds it."""
    check_fitted(model, "support_vectors_")
    builder, raw = _single_output(model)
    offset = np.asarray(model.offset_, dtype=np.float64).reshape(-1)[:1]
    add = ColumnOps(name="OneClassSVM.offset_", n_features=1, ops=("add",), operands=(offset,),
                    cast_operand=(False,))
    (scores,) = builder.add(add, [raw], "score_samples")
    head = sklearn_head(model, "anomaly", ("predict", "decision_function", "score_samples"),
                        anomaly_offset=float(offset[0]), allows_inf=False,
                        blocks=(("score_samples", 0, 1),),
                        # decision_function is libsvm's own value; inliers are above 0
                        decision_rule="raw_gt_zero")
    return ModelIR(head=head, graph=builder.build(raw, scores)).validate()
