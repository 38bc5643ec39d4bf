"""scikit-learn's naive Bayes classifiers -> a joint log-likelihood op and the
posterior (``nb_posterior``).

The graph's raw result is ``_joint_log_likelihood`` (``predict`` is its argmax); the
transformed result holds ``predict_proba`` and ``predict_log_proba`` side by side
(``Head.blocks``), since scikit-learn computes the log-probabilities as ``jll -
logsumexp(jll)``, not as the log of the probabilities. Only fitted attributes are
read; where scikit-learn derives arrays from them on every call (BernoulliNB's
``log(1 - exp(feature_log_prob_))``), the frontend derives them once with the same
NumPy expressions.
"""

import numbers

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, GraphBuilder, ModelIR, ValueType
from ...ir.families.naive_bayes import (CategoricalNaiveBayes, DiscreteNaiveBayes,
                                        GaussianNaiveBayes, NaiveBayesPosterior)
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend

__all__ = []

_METHODS = ("predict", "predict_proba", "predict_log_proba")


def _float_array(model, attribute, value):
    array = np.asarray(value)
    if array.dtype not in (np.float32, np.float64):
        raise MissingConverter(unsupported_message(
            type(model).__name__, f"{attribute} of dtype", str(array.dtype), "float32, float64"))
    return array


def _model_ir(model, scores, **head_fields):
    classes = np.asarray(model.classes_)
    k = len(classes)
    builder = GraphBuilder(ValueType.floats(int(model.n_features_in_)))
    (jll,) = builder.add(scores, [INPUT], "joint_log_likelihood")
    (posterior,) = builder.add(NaiveBayesPosterior(n_classes=k), [jll], "posterior")
    head = sklearn_head(model, "classification", _METHODS, classes=(classes,),
                        decision_rule="raw_argmax", allows_inf=False,
                        blocks=(("proba", 0, k), ("log_proba", k, 2 * k)), **head_fields)
    return ModelIR(head=head, graph=builder.build(jll, posterior)).validate()


@register_frontend("sklearn", "GaussianNB")
def _gaussian_nb(model, options):
    check_fitted(model, "theta_")
    op = GaussianNaiveBayes(theta=_float_array(model, "theta_", model.theta_),
                            var=_float_array(model, "var_", model.var_),
                            class_prior=_float_array(model, "class_prior_", model.class_prior_))
    return _model_ir(model, op)


@register_frontend("sklearn", "MultinomialNB")
def _multinomial_nb(model, options):
    check_fitted(model, "feature_log_prob_")
    op = DiscreteNaiveBayes(
        weights=_float_array(model, "feature_log_prob_", model.feature_log_prob_),
        bias=_float_array(model, "class_log_prior_", model.class_log_prior_))
    return _model_ir(model, op)


@register_frontend("sklearn", "ComplementNB")
def _complement_nb(model, options):
    check_fitted(model, "feature_log_prob_")
    one_class = len(model.classes_) == 1  # the prior counts only then
    op = DiscreteNaiveBayes(
        weights=_float_array(model, "feature_log_prob_", model.feature_log_prob_),
        bias=_float_array(model, "class_log_prior_", model.class_log_prior_) if one_class else None)
    return _model_ir(model, op)


def _threshold(model):
    """BernoulliNB's ``binarize`` as (value, dtype): dtype None for a Python number."""
    value = model.binarize
    if value is None:
        return None, None
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, numbers.Real) \
            or isinstance(value, np.integer):
        raise MissingConverter(unsupported_message(
            type(model).__name__, "binarize", value, "None, a Python number, a NumPy float"))
    if isinstance(value, np.floating):
        if value.dtype not in (np.float32, np.float64):
            raise MissingConverter(unsupported_message(
                type(model).__name__, "binarize of dtype", str(value.dtype), "float32, float64"))
        return float(value), value.dtype.name
    return float(value), None


@register_frontend("sklearn", "BernoulliNB")
def _bernoulli_nb(model, options):
    check_fitted(model, "feature_log_prob_")
    feature_log_prob = _float_array(model, "feature_log_prob_", model.feature_log_prob_)
    class_log_prior = _float_array(model, "class_log_prior_", model.class_log_prior_)
    # scikit-learn's _joint_log_likelihood: X @ (flp - neg_prob).T, then
    # += class_log_prior_ + neg_prob.sum(axis=1)
    with np.errstate(divide="ignore"):
        neg_prob = np.log(1 - np.exp(feature_log_prob))
    threshold, threshold_dtype = _threshold(model)
    op = DiscreteNaiveBayes(weights=feature_log_prob - neg_prob,
                            bias=class_log_prior + neg_prob.sum(axis=1),
                            threshold=threshold, threshold_dtype=threshold_dtype)
    return _model_ir(model, op)


@register_frontend("sklearn", "CategoricalNB")
def _categorical_nb(model, options):
    check_fitted(model, "feature_log_prob_")
    tables = tuple(_float_array(model, "feature_log_prob_", t) for t in model.feature_log_prob_)
    op = CategoricalNaiveBayes(
        tables=tables, class_log_prior=_float_array(model, "class_log_prior_",
                                                    model.class_log_prior_))
    return _model_ir(model, op, nan_scores_error=(
        "the input holds a category index outside the categories seen in fit (a negative "
        "value, or one past n_categories_); CategoricalNB does not accept it"))
