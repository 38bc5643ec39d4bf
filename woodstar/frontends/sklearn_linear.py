"""scikit-learn linear models -> LinearModel IR.

Every one of them predicts ``X @ coef_.T + intercept_`` (``X @ coef_`` when ``coef_`` is
a vector) in NumPy, then a classifier takes the sign (two classes) or the argmax of
the scores, and ``predict_proba``, where the estimator has it, is a sigmoid (binary;
one-vs-rest normalised for SGDClassifier) or a softmax (multinomial
LogisticRegression); SGDClassifier(loss="modified_huber") clips its scores to
[-1, 1] and maps them to [0, 1] (normalised over classes for more than two). Only public fitted attributes are read: ``coef_``,
``intercept_``, ``classes_``.
"""

import numpy as np

from ..exceptions import MissingConverter, unsupported_message
from ..ir import LinearModel, ModelIR, chain
from ._sklearn import check_fitted, sklearn_head
from .registry import register_frontend

__all__ = ["LINEAR_CLASSIFIERS", "LINEAR_REGRESSORS"]

LINEAR_CLASSIFIERS = ("LogisticRegression", "LogisticRegressionCV", "LinearSVC",
                      "RidgeClassifier", "RidgeClassifierCV", "SGDClassifier", "Perceptron",
                      "PassiveAggressiveClassifier")
LINEAR_REGRESSORS = ("LinearRegression", "Ridge", "RidgeCV", "Lasso", "LassoCV", "ElasticNet",
                     "ElasticNetCV", "Lars", "LassoLars", "OrthogonalMatchingPursuit",
                     "BayesianRidge", "ARDRegression", "HuberRegressor", "SGDRegressor",
                     "LinearSVR", "TheilSenRegressor", "QuantileRegressor")
_SGD_PROBA_LOSSES = ("log_loss",)


def _coef_arrays(model):
    """``coef_`` and ``intercept_`` as arrays of the dtypes NumPy will compute in.

    A Python float intercept (``fit_intercept=False`` gives ``0.0``) is a "weak"
    scalar to NumPy: it takes the scores' dtype instead of promoting them, so it is
    stored in the coefficients' dtype."""
    coef = np.asarray(model.coef_)
    if coef.dtype not in (np.float32, np.float64):
        raise MissingConverter(unsupported_message(
            type(model).__name__, "coef_ dtype", str(coef.dtype), "float32, float64"))
    intercept = model.intercept_
    if type(intercept) in (float, int):
        intercept = np.asarray(intercept, dtype=coef.dtype)
    intercept = np.asarray(intercept)
    if intercept.dtype not in (np.float32, np.float64):
        intercept = intercept.astype(coef.dtype)
    n_outputs = 1 if coef.ndim == 1 else coef.shape[0]
    return coef, np.broadcast_to(intercept.reshape(-1), (n_outputs,)).copy()


def _probability(model, n_classes):
    """The post-transform of ``predict_proba``, or None when the estimator has none."""
    name = type(model).__name__
    if name.startswith("LogisticRegression"):
        return "sigmoid_binary" if n_classes == 2 else "softmax"
    if name == "SGDClassifier":
        loss = model.loss
        if loss in _SGD_PROBA_LOSSES:
            return "sigmoid_binary" if n_classes == 2 else "sigmoid_ovr"
        if loss == "modified_huber":
            return "modified_huber_binary" if n_classes == 2 else "modified_huber"
    return None


@register_frontend("sklearn", *LINEAR_CLASSIFIERS)
def _linear_classifier(model, options):
    check_fitted(model, "coef_")
    name = type(model).__name__
    label_binarizer = getattr(model, "_label_binarizer", None)
    if label_binarizer is not None and str(getattr(label_binarizer, "y_type_", "")).startswith(
            "multilabel"):
        raise MissingConverter(unsupported_message(name, "multilabel targets", "multilabel-indicator",
                                                   "binary and multiclass targets"))
    classes = np.asarray(model.classes_)
    coef, intercept = _coef_arrays(model)
    # A binary model may hold its coefficients as one vector (RidgeClassifierCV does).
    if coef.ndim not in (1, 2) or (coef.ndim == 1 and len(classes) != 2):
        raise MissingConverter(unsupported_message(name, "coef_ shape", coef.shape,
                                                   "(n_classes or 1, n_features)"))
    probability = _probability(model, len(classes))
    methods = ("predict", "decision_function") + (
        ("predict_proba", "predict_log_proba") if probability else ())
    linear = LinearModel(coef=coef, intercept=intercept, vector_coef=coef.ndim == 1,
                         post_transform=probability or "identity")
    binary = coef.ndim == 1 or coef.shape[0] == 1
    head = sklearn_head(model, "classification", methods, classes=(classes,),
                        decision_rule="raw_gt_zero" if binary else "raw_argmax",
                        allows_inf=False)
    return chain(head, linear=linear).validate()


@register_frontend("sklearn", *LINEAR_REGRESSORS)
def _linear_regressor(model, options):
    check_fitted(model, "coef_")
    coef, intercept = _coef_arrays(model)
    if coef.ndim not in (1, 2):
        raise MissingConverter(unsupported_message(type(model).__name__, "coef_ shape", coef.shape,
                                                   "(n_features,) or (n_targets, n_features)"))
    linear = LinearModel(coef=coef, intercept=intercept, vector_coef=coef.ndim == 1)
    head = sklearn_head(model, "regression", ("predict",), squeeze_output=coef.ndim == 1,
                        allows_inf=False)
    return chain(head, linear=linear).validate()
