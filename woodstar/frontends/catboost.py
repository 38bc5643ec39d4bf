"""CatBoost models -> TreeEnsemble IR, read from CatBoost's JSON export.

The model is written with ``save_model(path, format="json")`` into a temporary
directory (never the working directory) and read back. What CatBoost 1.2 does at
predict time, and how it lands in the IR:

* oblivious trees: every level tests one split ``x > border`` on the float32 value;
  split ``k`` is bit ``k`` of the leaf index. Each is expanded into a full binary IR
  tree whose level ``k`` tests split ``k``: "not greater" goes left, so the IR node is
  ``x <= border`` (LE, input_precision float32).
* NaN: a feature's ``nan_value_treatment`` "AsFalse" (nan_mode Min) sends NaN to the
  "not greater" side (left), "AsTrue" (Max) to the other; "AsIs" (nan_mode Forbidden,
  or a feature without NaN in training) compares NaN as it is: ``NaN > border`` is
  false, left. CatBoost accepts NaN at predict time in every mode.
* leaves hold one value per dimension (classes of MultiClass, targets of MultiRMSE);
  ``scale_and_bias``: raw = scale * sum + bias (the scale is folded into the leaves).
* categorical, text and embedding features are refused. The JSON export does carry
  the categorical statistics (``ctr_data``: counts per category and per combination of
  categories), but keyed by CatBoost's own 64-bit hashes of the category strings
  (CityHash) and of their combinations; predicting needs those hashes, for values
  never seen in training too, and woodstar's IR has no op that computes them.
"""

import json
import os
import tempfile

import numpy as np

from ..exceptions import MissingConverter, NotFittedError, unsupported_message
from ..ir import Head, ModelIR, chain
from ..ir.builder import EnsembleBuilder
from ..ir.tree_ensemble import LE
from .registry import register_frontend

__all__ = ["from_catboost", "SUPPORTED_CATBOOST", "LOSSES"]

SUPPORTED_CATBOOST = ">=1.2,<1.3"

# loss function -> post-transform of the estimator's predict / predict_proba
LOSSES = {
    "Logloss": "sigmoid_binary",
    "CrossEntropy": "sigmoid_binary",
    "MultiClass": "softmax",
    "RMSE": "identity",
    "MAE": "identity",
    "Quantile": "identity",
    "MAPE": "identity",
    "Huber": "identity",
    "Expectile": "identity",
    "Lq": "identity",
    "RMSPE": "identity",
    "MultiRMSE": "identity",
    "Poisson": "exp",
    "Tweedie": "exp",
    "YetiRank": "identity",
    "YetiRankPairwise": "identity",
    "PairLogit": "identity",
    "PairLogitPairwise": "identity",
    "QueryRMSE": "identity",
    "QuerySoftMax": "identity",
}
# Why each kind of non-numerical feature is refused (said in the message).
_CTR_REASON = ("CatBoost predicts from its categorical statistics (CTRs); the exported "
               "model keys them by CatBoost's own hashes of the category strings and of "
               "their combinations, which woodstar does not compute, so it cannot look them "
               "up exactly")
_REFUSED_FEATURES = {
    "categorical_features": _CTR_REASON,
    "text_features": "CatBoost's text processing (tokenizers, dictionaries, text "
                     "estimators) is not in the exported model in a form woodstar evaluates",
    "embedding_features": "CatBoost's embedding estimators are not in the exported model "
                          "in a form woodstar evaluates",
}
_NAN_LEFT = {"AsFalse": True, "AsTrue": False, "AsIs": True}


def _versions():
    import catboost

    return (("catboost", catboost.__version__),)


def _export_json(model):
    with tempfile.TemporaryDirectory(prefix="woodstar-catboost-") as folder:
        path = os.path.join(folder, "model.json")
        model.save_model(path, format="json")
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)


def _add_oblivious_tree(builder, tree, float_features, n_dims, scale):
    splits = tree.get("splits") or []
    depth = len(splits)
    leaf_values = np.asarray(tree["leaf_values"], dtype=np.float64).reshape(2 ** depth, n_dims)
    if scale != 1.0:
        leaf_values = leaf_values * scale
    n_internal = 2 ** depth - 1
    n = n_internal + 2 ** depth
    feature = np.full(n, -1, dtype=np.int64)
    threshold = np.zeros(n)
    default_left = np.zeros(n, dtype=bool)
    left = np.full(n, -1, dtype=np.int64)
    right = np.full(n, -1, dtype=np.int64)
    for level, split in enumerate(splits):
        info = float_features[split["float_feature_index"]]
        for position in range(2 ** level):
            node = 2 ** level - 1 + position
            feature[node] = info["flat_feature_index"]
            threshold[node] = np.float32(split["border"])
            default_left[node] = _NAN_LEFT[info.get("nan_value_treatment", "AsIs")]
            left[node] = 2 * node + 1
            right[node] = 2 * node + 2
    leaf = np.zeros((n, n_dims))
    for position in range(2 ** depth):
        # The path's first split is the position's most significant bit; CatBoost's
        # leaf index has split k at bit k: reverse the bits.
        index = int(format(position, f"0{depth}b")[::-1], 2) if depth else 0
        leaf[n_internal + position] = leaf_values[index]
    builder.add_tree(feature=feature, threshold=threshold, left=left, right=right,
                     default_left=default_left, leaf_value=leaf, comparison=LE)


def ir_from_json(model_json, estimator, kind, classes=None, feature_names=None):
    """The IR of a CatBoost JSON export (a dict). ``kind``: "classifier", "regressor",
    "ranker", or "raw" (the generic ``catboost.CatBoost``, whose predict returns the
    raw formula values whatever the loss)."""
    info = model_json["features_info"]
    for what, reason in _REFUSED_FEATURES.items():
        if info.get(what):
            raise MissingConverter(unsupported_message(
                estimator, what.replace("_", " "), f"{len(info[what])} feature(s)",
                f"numerical features only ({reason})"))
    if "oblivious_trees" not in model_json:
        raise MissingConverter(unsupported_message(
            estimator, "grow_policy", "non-symmetric trees", "SymmetricTree"))
    params = model_json["model_info"].get("params", {})
    loss = params.get("loss_function", {}).get("type", "RMSE")
    if loss not in LOSSES:
        raise MissingConverter(unsupported_message(estimator, "loss_function", loss, sorted(LOSSES)))
    float_features = {f["feature_index"]: f for f in info.get("float_features", [])}
    n_features = 1 + max((f["flat_feature_index"] for f in float_features.values()), default=0)
    scale, bias = model_json.get("scale_and_bias", [1.0, [0.0]])
    bias = np.atleast_1d(np.asarray(bias, dtype=np.float64))
    trees = model_json["oblivious_trees"]
    n_dims = len(bias)
    if not trees:
        raise MissingConverter(unsupported_message(
            estimator, "a model with", "no trees", "models with at least one iteration"))
    builder = EnsembleBuilder(n_dims)
    for tree in trees:
        _add_oblivious_tree(builder, tree, float_features, n_dims, float(scale))
    transform = "identity" if kind == "raw" else LOSSES[loss]
    if transform == "sigmoid_binary" and kind != "classifier":
        transform = "sigmoid"
    ensemble = builder.build(n_features=n_features, n_outputs=n_dims, base_score=bias,
                             post_transform=transform, input_precision="float32")
    common = dict(estimator=estimator, n_features=n_features, feature_names=feature_names,
                  library_versions=_versions())
    if kind == "classifier":
        head = Head(task="classification", methods=("predict", "predict_proba", "decision_function"),
                    classes=(np.asarray(classes),), decision_rule="argmax",
                    labels_as_column=n_dims > 1,  # CatBoost's MultiClass labels are (n, 1)
                    **common)
    elif kind == "raw":  # catboost.CatBoost (e.g. loaded from .cbm): predict gives raw values
        head = Head(task="regression", methods=("predict",), squeeze_output=n_dims == 1, **common)
    else:
        head = Head(task="ranking" if kind == "ranker" else "regression",
                    methods=("predict", "decision_function"), **common)
    return chain(head, ensemble=ensemble).validate()


_KINDS = {"CatBoostClassifier": "classifier", "CatBoostRegressor": "regressor",
          "CatBoostRanker": "ranker", "CatBoost": "raw"}


@register_frontend("catboost", *_KINDS)
def _catboost(model, options):
    owner = type(model).__name__
    if not model.is_fitted():
        raise NotFittedError(
            f"Cannot convert {owner}: the model is not fitted; call fit() before convert().")
    names = model.feature_names_
    default_names = [str(i) for i in range(len(names or []))]
    feature_names = tuple(names) if names and list(names) != default_names else None
    classes = getattr(model, "classes_", None) if _KINDS[owner] == "classifier" else None
    return ir_from_json(_export_json(model), owner, _KINDS[owner], classes=classes,
                        feature_names=feature_names)


def from_catboost(model, options=None):
    """The IR of a fitted CatBoost model."""
    return _catboost(model, options)
