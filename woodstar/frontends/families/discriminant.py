"""scikit-learn discriminant analysis -> ``linear`` (+ ``log_floor``, ``projection``)
and ``qda_scores`` / ``qda_posterior``.

LinearDiscriminantAnalysis decides as every linear classifier does
(``X @ coef_.T + intercept_``, then the sign or the argmax); ``predict_proba`` is the
sigmoid (two classes) or the softmax of those scores, ``predict_log_proba`` their log
after raising exact zeros to the smallest normal number, ``transform`` the projection
on ``scalings_`` (not for the 'lsqr' solver, whose ``transform`` raises).

QuadraticDiscriminantAnalysis: per-class log posteriors (``qda_scores``), then
``decision_function``: for two classes their difference ``s1 - s0``, else the scores
themselves; the difference is a ``linear`` op with coefficients ``[-1, 1]`` (one
rounding of the exact difference, as the source's subtraction).
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, Concat, GraphBuilder, LinearModel, ModelIR, ValueType
from ...ir.families.discriminant import LogFloor, QDAPosterior, QDAScores
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend
from ..sklearn_linear import _coef_arrays
from .decomposition import chain_ops, transform_ops

__all__ = []


@register_frontend("sklearn", "LinearDiscriminantAnalysis")
def _lda(model, options):
    name = "LinearDiscriminantAnalysis"
    check_fitted(model, "coef_")
    classes = np.asarray(model.classes_)
    k = len(classes)
    coef, intercept = _coef_arrays(model)
    if coef.ndim != 2 or coef.shape[0] != (1 if k == 2 else k):
        raise MissingConverter(unsupported_message(name, "coef_ shape", coef.shape,
                                                   "(1, n_features) or (n_classes, n_features)"))
    builder = GraphBuilder(ValueType.floats(int(model.n_features_in_)))
    linear = LinearModel(coef=coef, intercept=intercept,
                         post_transform="sigmoid_binary" if k == 2 else "softmax")
    raw, proba = builder.add(linear, [INPUT], "linear")
    (log_proba,) = builder.add(LogFloor(k), [proba], "log_proba")
    parts, blocks = [proba, log_proba], [("proba", 0, k), ("log_proba", k, 2 * k)]
    methods = ("predict", "predict_proba", "predict_log_proba", "decision_function")
    if model.solver != "lsqr":
        projected = chain_ops(builder, transform_ops(model), INPUT, "transform")
        width = builder.type_of(projected).width
        parts.append(projected)
        blocks.append(("transform", 2 * k, 2 * k + width))
        methods += ("transform",)
    widths = tuple(builder.type_of(p).width for p in parts)
    (transformed,) = builder.add(Concat(widths), parts, "outputs")
    head = sklearn_head(model, "classification", methods, classes=(classes,),
                        decision_rule="raw_gt_zero" if k == 2 else "raw_argmax",
                        allows_inf=False, blocks=tuple(blocks))
    return ModelIR(head=head, graph=builder.build(raw, transformed)).validate()


@register_frontend("sklearn", "QuadraticDiscriminantAnalysis")
def _qda(model, options):
    check_fitted(model, "rotations_")
    classes = np.asarray(model.classes_)
    k = len(classes)
    # QuadraticDiscriminantAnalysis._decision_function's per-call constants
    weights = [R * (S ** (-0.5)) for R, S in zip(model.rotations_, model.scalings_)]
    u = np.asarray([np.sum(np.log(s)) for s in model.scalings_])
    scores_op = QDAScores(means=np.asarray(model.means_), weights=tuple(weights), u=u,
                          log_priors=np.log(model.priors_))
    builder = GraphBuilder(ValueType.floats(int(model.n_features_in_)))
    (scores,) = builder.add(scores_op, [INPUT], "scores")
    raw = scores
    if k == 2:  # s1 - s0 as one product: one rounding of the exact difference
        dtype = scores_op.output_dtypes([np.float32])[0]
        decision = LinearModel(coef=np.asarray([[-1.0, 1.0]], dtype), intercept=np.zeros(1, dtype))
        raw, _ = builder.add(decision, [scores], "decision")
    (transformed,) = builder.add(QDAPosterior(k), [scores], "posterior")
    head = sklearn_head(model, "classification",
                        ("predict", "predict_proba", "predict_log_proba", "decision_function"),
                        classes=(classes,), decision_rule="raw_gt_zero" if k == 2 else "raw_argmax",
                        allows_inf=False, blocks=(("proba", 0, k), ("log_proba", k, 2 * k)))
    return ModelIR(head=head, graph=builder.build(raw, transformed)).validate()
