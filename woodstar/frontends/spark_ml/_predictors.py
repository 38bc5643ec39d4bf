"""Spark ML predictors: the last stage of a pipeline, reading one features vector.

Each returns the graph values (raw, transformed) and the head fields. Classifiers
write ``rawPrediction`` as the raw result and [``probability``, prediction index] as
the transformed one (ops ``linear``/``trees`` then ``spark_classify``); regressors
write ``prediction`` as both.
"""

import math

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import LinearModel, Select
from ...ir.families.spark_ops import SparkClassify
from ._columns import param
from ._trees import add_trees

__all__ = ["PREDICTORS", "CLASSIFIERS", "convert_predictor"]

CLASSIFIERS = ("LogisticRegressionModel", "DecisionTreeClassificationModel",
               "RandomForestClassificationModel", "GBTClassificationModel")
REGRESSORS = ("LinearRegressionModel", "DecisionTreeRegressionModel",
              "RandomForestRegressionModel", "GBTRegressionModel")
PREDICTORS = CLASSIFIERS + REGRESSORS


def _dense(matrix):
    return np.asarray(matrix.toArray(), dtype=np.float64)


def _prediction_rule(model, n_classes, binary_logistic=False):
    """(prediction rule, raw threshold, thresholds) as Spark's transform decides."""
    thresholds = param(model, "thresholds") if model.isSet("thresholds") else None
    if binary_logistic:
        # LogisticRegressionModel (binary) predicts raw[1] > log(t / (1 - t)); getThreshold
        # derives t from thresholds where they are set. The logit is the JVM's own.
        t = float(model.getThreshold())
        if t == 0.0:
            return "binary_threshold", -math.inf, ()
        if t == 1.0:
            return "binary_threshold", math.inf, ()
        from pyspark import SparkContext

        logit = SparkContext._jvm.java.lang.Math.log(t / (1.0 - t))
        return "binary_threshold", float(logit), ()
    if thresholds is not None:
        thresholds = tuple(float(t) for t in thresholds)
        if len(thresholds) != n_classes:
            raise MissingConverter(unsupported_message(
                type(model).__name__, "thresholds", thresholds, f"{n_classes} values"))
        return "thresholds", 0.0, thresholds
    return "argmax", 0.0, ()


def _classify(columns, raw, model, n_classes, probability, binary_logistic=False):
    rule, raw_threshold, thresholds = _prediction_rule(model, n_classes, binary_logistic)
    op = SparkClassify(n_classes=n_classes, probability=probability, prediction=rule,
                       raw_threshold=raw_threshold, thresholds=thresholds)
    (transformed,) = columns.add(op, [raw], "probability")
    head = dict(task="classification",
                methods=("predict", "predict_proba", "decision_function"),
                classes=(np.arange(n_classes, dtype=np.float64),),
                blocks=(("proba", 0, n_classes), ("label_index", n_classes, n_classes + 1)))
    return raw, transformed, head


def _regression(value):
    return value, value, dict(task="regression", methods=("predict",))


def _linear(columns, coef, intercept, features, name):
    """The scores of a linear model. A select writes them: Spark answers NaN scores for
    NaN features, so the container must not apply scikit-learn's finite-score check,
    which it applies when a linear model writes the raw result."""
    (scores, _) = columns.add(LinearModel(coef=coef, intercept=intercept), [features], name)
    width = coef.shape[0]
    (scores,) = columns.add(Select(width, tuple(range(width))), [scores], f"{name}:scores")
    return scores


def _logistic(model, columns, features):
    name = type(model).__name__
    coef = _dense(model.coefficientMatrix)
    intercept = np.asarray(model.interceptVector.toArray(), dtype=np.float64)
    n_classes = int(model.numClasses)
    if n_classes == 2 and coef.shape[0] == 1:  # raw = [-margin, margin]
        coef = np.concatenate([-coef, coef])
        intercept = np.concatenate([-intercept, intercept])
        raw = _linear(columns, coef, intercept, features, name)
        return _classify(columns, raw, model, 2, "logistic", binary_logistic=True)
    raw = _linear(columns, coef, intercept, features, name)
    return _classify(columns, raw, model, n_classes, "softmax")


def _linear_regression(model, columns, features):
    coef = np.asarray(model.coefficients.toArray(), dtype=np.float64).reshape(1, -1)
    intercept = np.asarray([float(model.intercept)])
    return _regression(_linear(columns, coef, intercept, features, type(model).__name__))


def _stats(node):
    return np.asarray(list(node.impurityStats().stats()), dtype=np.float64)


def _tree_classifier(model, columns, features):
    name = type(model).__name__
    n_classes = int(model.numClasses)
    if name == "DecisionTreeClassificationModel":
        leaf = _stats  # raw = the leaf's class counts
    else:
        def leaf(node):  # each tree votes its leaf's class fractions
            stats = _stats(node)
            total = stats.sum()
            return stats / total if total != 0 else np.zeros_like(stats)
    builder = add_trees(model, leaf, n_classes, name)
    ensemble = builder.build(n_features=int(model.numFeatures), n_outputs=n_classes,
                             input_precision="float64", categorical_rule="exact")
    (raw, _) = columns.add(ensemble, [features], name)
    return _classify(columns, raw, model, n_classes, "normalize")


def _weights(model):
    return [float(w) for w in model.treeWeights]


def _gbt_classifier(model, columns, features):
    name = type(model).__name__
    weights = iter(_weights(model))
    # raw = [-margin, margin]; each tree adds weight * its leaf's prediction
    builder = add_trees(model, _weighted_leaf(weights, both_signs=True), 2, name)
    ensemble = builder.build(n_features=int(model.numFeatures), n_outputs=2,
                             input_precision="float64", categorical_rule="exact")
    (raw, _) = columns.add(ensemble, [features], name)
    return _classify(columns, raw, model, 2, "gbt_logistic")


def _weighted_leaf(weights, both_signs=False):
    state = {"weight": None}

    def leaf(node):
        margin = state["weight"] * float(node.prediction())
        return [-margin, margin] if both_signs else [margin]

    def start_tree():
        state["weight"] = next(weights)
    leaf.start_tree = start_tree
    return leaf


def _tree_regressor(model, columns, features):
    name = type(model).__name__
    if name == "GBTRegressionModel":
        leaf, aggregation = _weighted_leaf(iter(_weights(model))), "sum"
    else:
        leaf = lambda node: [float(node.prediction())]  # noqa: E731
        aggregation = "mean" if name == "RandomForestRegressionModel" else "sum"
    builder = add_trees(model, leaf, 1, name)
    ensemble = builder.build(n_features=int(model.numFeatures), n_outputs=1,
                             input_precision="float64", categorical_rule="exact",
                             aggregation=aggregation)
    (value, _) = columns.add(ensemble, [features], name)
    return _regression(value)


_CONVERTERS = {
    "LogisticRegressionModel": _logistic,
    "LinearRegressionModel": _linear_regression,
    "DecisionTreeClassificationModel": _tree_classifier,
    "RandomForestClassificationModel": _tree_classifier,
    "GBTClassificationModel": _gbt_classifier,
    "DecisionTreeRegressionModel": _tree_regressor,
    "RandomForestRegressionModel": _tree_regressor,
    "GBTRegressionModel": _tree_regressor,
}


def n_features(model):
    return int(model.numFeatures)


def convert_predictor(model, columns, features):
    """(raw value, transformed value, head fields) of ``model`` reading ``features``."""
    return _CONVERTERS[type(model).__name__](model, columns, features)
