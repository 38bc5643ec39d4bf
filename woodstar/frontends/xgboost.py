"""XGBoost models -> TreeEnsemble IR, read from the JSON model (``save_raw("json")``).

What XGBoost 3.x does at predict time, and how each piece lands in the IR:

* numerical split ``x < split_condition`` on the float32 value: comparison LT,
  input_precision float32. A missing value (NaN, or the estimator's ``missing`` value
  as the IR's ``missing_range``) follows ``default_left``.
* categorical split (``split_type`` 1): the node's listed categories go *right*;
  every other valid category, and invalid ones (negative, beyond the set), go left.
  The IR sends its set left and the rest right, so children and default side are
  swapped; the "nonnegative" categorical rule is XGBoost's ``x >= 0, c = int(x)``.
* pandas ``category`` columns (``enable_categorical=True``): the model stores each
  column's training categories (``cats``: numbers, or strings as bytes and offsets)
  and its trees test their *codes*. XGBoost re-codes a DataFrame's category column to
  those categories by value and reads a NumPy array as codes already. The trees keep
  XGBoost's codes and the categories go into the input schema
  (``InputColumn.category_values``), so the container's edge does the same re-coding.
  String categories with non-ASCII characters are refused: XGBoost 3.2 writes their
  byte offsets in characters, so the stored strings are cut short.
* leaves: ``split_conditions`` (learning rate applied); vector leaves of
  ``multi_strategy="multi_output_tree"`` from ``leaf_weights``; DART trees scaled by
  ``weight_drop`` in float32, as each prediction path does: ``Booster.predict(DMatrix)``
  adds ``leaf * w``, the sklearn wrapper's ``inplace_predict`` adds
  ``((base + leaf) - base) * w`` (base: the tree's output's base margin);
  ``booster="gblinear"`` is one single-leaf tree per output whose leaf is the linear
  model (IR linear leaves, missing features skipped, as XGBoost does); ``tree_info`` says which output a tree feeds; a random forest's
  parallel trees are summed, as XGBoost does.
* base score: ``learner_model_param.base_score`` (a vector for multi-class and
  multi-target models) is in output space and turned into a margin by the
  objective's link (logit of the score bounded to [1e-6, 1 - 1e-6], log or
  identity), in float32 with the C library's ``logf`` as XGBoost does.
* the trees used: the sklearn wrapper's ``best_iteration`` when early stopping set
  one (what its ``predict`` uses), else all; a raw ``Booster`` uses all.

XGBoost's predictor starts each row at the float32 base margin and adds the trees'
float32 leaves in float32, in tree order; its links are float32 too. Tree boosters
carry ``sum_precision="float32"``: the compiled walk (the default CPU route) emulates
that arithmetic to the bit, margins and probabilities; the other routes sum in double,
within float32 rounding of XGBoost's outputs. gblinear keeps double sums.
Container methods: ``predict``/``predict_proba`` as the estimator, and
``decision_function`` = ``predict(output_margin=True)``; for a raw Booster ``predict``
is ``Booster.predict(DMatrix(X))``.
"""

import json

import numpy as np

from ..exceptions import MissingConverter, NotFittedError, unsupported_message
from ..ir import CATEGORY, FLOAT, Head, InputColumn, InputSchema, ModelIR, chain
from ..ir.builder import EnsembleBuilder, bitset_words
from ..ir.tree_ensemble import LT
from .registry import register_frontend

__all__ = ["from_xgboost", "SUPPORTED_XGBOOST", "OBJECTIVES"]

SUPPORTED_XGBOOST = ">=2.0,<4"

# objective -> (link from base_score to margin, post-transform for Booster.predict)
OBJECTIVES = {
    "binary:logistic": ("logit", "sigmoid"),
    "binary:logitraw": ("identity", "identity"),
    "binary:hinge": ("identity", "step"),
    "multi:softprob": ("identity", "softmax"),
    "multi:softmax": ("identity", "argmax"),
    "reg:squarederror": ("identity", "identity"),
    "reg:squaredlogerror": ("identity", "identity"),
    "reg:logistic": ("logit", "sigmoid"),
    "reg:pseudohubererror": ("identity", "identity"),
    "reg:absoluteerror": ("identity", "identity"),
    "reg:quantileerror": ("identity", "identity"),
    "count:poisson": ("log", "exp"),
    "reg:gamma": ("log", "exp"),
    "reg:tweedie": ("log", "exp"),
    "rank:pairwise": ("identity", "identity"),
    "rank:ndcg": ("identity", "identity"),
    "rank:map": ("identity", "identity"),
}
# What XGBClassifier.predict_proba reports for a one-margin model.
_BINARY_PROBA = {"sigmoid": "sigmoid_binary", "identity": "identity_binary", "step": "step_binary"}


def _versions():
    import xgboost

    return (("xgboost", xgboost.__version__),)


def _floats(text):
    """'[5E-1,2E-1]' or '5E-1' -> float32 array."""
    text = str(text).strip()
    if text.startswith("["):
        text = text[1:-1]
    return np.asarray([float(v) for v in text.split(",") if v.strip()], dtype=np.float32)


def _logf():
    """The C library's ``logf`` (XGBoost's link calls it), else NumPy's float32 log."""
    import ctypes
    import ctypes.util

    try:
        libm = ctypes.CDLL(ctypes.util.find_library("m") or "libm.so.6")
        logf = libm.logf
    except (OSError, AttributeError):
        return lambda v: np.log(np.float32(v))
    logf.restype, logf.argtypes = ctypes.c_float, [ctypes.c_float]
    return lambda v: np.float32(logf(float(v)))


_RT_EPS = np.float32(1e-6)  # XGBoost bounds a logistic base score to [eps, 1 - eps]


def _margin(base, link):
    base = np.asarray(base, dtype=np.float32)
    if link == "identity":
        return base
    logf = _logf()
    with np.errstate(divide="ignore"):
        if link == "logit":
            base = np.minimum(np.maximum(base, _RT_EPS), np.float32(1.0) - _RT_EPS)
            return np.asarray([-logf(np.float32(1.0) / b - np.float32(1.0)) for b in base],
                              dtype=np.float32)
        return np.asarray([logf(b) for b in base], dtype=np.float32)


def _category_values(learner, n_features, owner):
    """Per feature, the categories it was fitted on, in code order (None: the model
    stores none, the input holds codes)."""
    values = [None] * n_features
    cats = learner["gradient_booster"].get("model", {}).get("cats") or \
        learner["gradient_booster"].get("gbtree", {}).get("model", {}).get("cats") or {}
    for feature, enc in enumerate(cats.get("enc", [])[:n_features]):
        if not enc.get("values"):
            continue
        if "offsets" in enc:  # strings: the bytes of all, one after the other
            raw = np.asarray(enc["values"], dtype=np.int64)
            if (raw < 0).any() or (raw >= 128).any():
                raise MissingConverter(unsupported_message(
                    owner, f"categorical feature {feature} with non-ASCII string categories",
                    bytes(int(b) & 0xFF for b in raw[:40]),
                    "ASCII string categories (XGBoost's JSON model cuts non-ASCII ones short)"))
            text = bytes(raw.astype(np.uint8)).decode("ascii")
            offsets = enc["offsets"]
            values[feature] = tuple(text[a:b] for a, b in zip(offsets[:-1], offsets[1:]))
            continue
        categories = np.asarray(enc["values"])
        if categories.dtype.kind not in "iu":
            raise MissingConverter(unsupported_message(
                owner, f"categorical feature {feature} with categories", categories[:5].tolist(),
                "integer or string categories"))
        values[feature] = tuple(int(c) for c in categories)
    return values


def _schema(names, category_values):
    """The input columns: pandas category columns carry their categories (the edge
    re-codes a DataFrame by value), every other column is a plain number."""
    return InputSchema(tuple(
        InputColumn(name, kind=FLOAT) if values is None
        # XGBoost refuses a category beyond its training ones (and silently takes the
        # next larger one's code for a value between them): woodstar refuses both.
        else InputColumn(name, kind=CATEGORY, category_values=values, unseen_category="error")
        for name, values in zip(names, category_values)))


def _add_tree(builder, tree, output_start, width, scale, missing_is_range, dart_base=None):
    left = np.asarray(tree["left_children"], dtype=np.int64)
    right = np.asarray(tree["right_children"], dtype=np.int64)
    n = len(left)
    is_leaf = left < 0
    feature = np.asarray(tree["split_indices"], dtype=np.int64)
    threshold = np.asarray(tree["split_conditions"], dtype=np.float32).astype(np.float64)
    default_left = np.asarray(tree["default_left"], dtype=bool).copy()
    if width == 1:
        leaf = np.where(is_leaf, threshold, 0.0).reshape(n, 1)
    else:  # vector leaves: a leaf's right child is its row in leaf_weights
        weights = np.asarray(tree["leaf_weights"], dtype=np.float32).reshape(-1, width)
        leaf = np.zeros((n, width))
        leaf[is_leaf] = weights[right[is_leaf]]
        right = np.where(is_leaf, -1, right)
    if scale != 1.0 or dart_base is not None:
        leaf = leaf.astype(np.float32)
        if dart_base is not None:  # inplace_predict: the tree's prediction less the base
            leaf = (leaf + dart_base) - dart_base
        leaf = (leaf * np.float32(scale)).astype(np.float64)
    categories = {}
    split_type = np.asarray(tree.get("split_type", np.zeros(n)), dtype=np.int64)
    segments = dict(zip(tree.get("categories_nodes", []),
                        zip(tree.get("categories_segments", []), tree.get("categories_sizes", []))))
    all_categories = np.asarray(tree.get("categories", []), dtype=np.int64)
    for node in np.flatnonzero((split_type == 1) & ~is_leaf):
        start, size = segments.get(int(node), (0, 0))
        codes = all_categories[start:start + size]
        # XGBoost sends the listed categories right: swap so the IR's set goes left.
        left[node], right[node] = right[node], left[node]
        default_left[node] = not default_left[node]
        categories[int(node)] = bitset_words(codes) if len(codes) else np.zeros(1, np.uint32)
    builder.add_tree(feature=feature, threshold=threshold, left=np.where(is_leaf, -1, left),
                     right=right, default_left=default_left, leaf_value=leaf, comparison=LT,
                     output_start=output_start, categories=categories,
                     missing_in_range=missing_is_range)


def _iteration_trees(booster_json, n_iterations, owner):
    """(trees, tree_info, per-tree DART weight) of the first n_iterations."""
    name = booster_json["name"]
    if name not in ("gbtree", "dart"):
        raise MissingConverter(unsupported_message(owner, "booster", name,
                                                   "gbtree, dart, gblinear"))
    model = booster_json["gbtree"]["model"] if name == "dart" else booster_json["model"]
    trees, info = model["trees"], model["tree_info"]
    weights = booster_json.get("weight_drop") if name == "dart" else None
    weights = np.ones(len(trees)) if weights is None else np.asarray(weights, dtype=np.float32)
    indptr = model.get("iteration_indptr")
    if n_iterations is not None and indptr is not None:
        stop = indptr[min(n_iterations, len(indptr) - 1)]
        trees, info, weights = trees[:stop], info[:stop], weights[:stop]
    return trees, info, weights


def ir_from_json(model_json, estimator, kind, missing=np.nan, n_iterations=None,
                 classes=None):
    """The IR of an XGBoost JSON model (a dict). ``kind``: "classifier",
    "regressor", "ranker" or "booster"."""
    learner = model_json["learner"]
    objective = learner["objective"]["name"]
    if objective not in OBJECTIVES:
        raise MissingConverter(unsupported_message(estimator, "objective", objective,
                                                   sorted(OBJECTIVES)))
    link = OBJECTIVES[objective][0]
    params = learner["learner_model_param"]
    n_features = int(params["num_feature"])
    n_classes = int(params.get("num_class", 0))
    n_outputs = max(n_classes, int(params.get("num_target", 1)), 1)
    base = _floats(params["base_score"])
    if len(base) == 1 and n_outputs > 1:
        base = np.repeat(base, n_outputs)
    base = _margin(base, link).astype(np.float64)
    missing = float(missing)
    has_range = not np.isnan(missing)
    transform = OBJECTIVES[objective][1]
    if kind == "classifier" and n_outputs == 1:
        transform = _BINARY_PROBA[transform]
    elif kind == "classifier" and transform == "argmax":
        transform = "softmax"  # XGBClassifier reports softmax probabilities here too
    if learner["gradient_booster"]["name"] == "gblinear":
        ensemble = _gblinear(learner["gradient_booster"]["model"], n_features, n_outputs, base,
                             has_range, estimator, transform)
    else:
        ensemble = _tree_ensemble(learner, n_features, n_outputs, base, missing, n_iterations,
                                  estimator, transform, inplace=kind != "booster")
    names = learner.get("feature_names") or None
    common = dict(estimator=estimator, n_features=n_features,
                  feature_names=tuple(names) if names else None, library_versions=_versions())
    if kind == "classifier":
        head = Head(task="classification", methods=("predict", "predict_proba", "decision_function"),
                    classes=(np.asarray(classes),), decision_rule="argmax", **common)
    else:
        head = Head(task="ranking" if kind == "ranker" else "regression",
                    methods=("predict", "decision_function"), **common)
    category_values = _category_values(learner, n_features, estimator)
    schema = None
    if any(v is not None for v in category_values):
        schema = _schema(common["feature_names"] or tuple(str(i) for i in range(n_features)),
                         category_values)
    return chain(head, ensemble=ensemble, schema=schema).validate()


def _gblinear(model, n_features, n_outputs, base, has_range, owner, transform):
    """One single-leaf tree per output whose leaf is the linear model: XGBoost adds
    ``bias + sum w * x`` over the present features (a missing one is skipped)."""
    if has_range:
        raise MissingConverter(unsupported_message(
            owner, "missing with booster='gblinear'", "a value other than NaN", "missing=NaN"))
    # XGBoost 3.x's gblinear adds the first entry of a vector base score to every
    # output (found by the parity tests); do the same.
    base = np.full(n_outputs, base[0])
    weights = np.asarray(model["weights"], dtype=np.float32).astype(np.float64)
    weights = weights.reshape(n_features + 1, n_outputs)
    builder = EnsembleBuilder(1)
    for k in range(n_outputs):
        terms = (np.concatenate([[-1], np.arange(n_features)]),
                 np.concatenate([[weights[n_features, k]], weights[:n_features, k]]))
        builder.add_tree(feature=[-1], threshold=[0.0], left=[-1], right=[-1],
                         leaf_value=[0.0], output_start=k, linear={0: terms})
    return builder.build(n_features=n_features, n_outputs=n_outputs, base_score=base,
                         input_precision="float32", linear_missing="skip",
                         post_transform=transform)


def _tree_ensemble(learner, n_features, n_outputs, base, missing, n_iterations, estimator,
                   transform, inplace):
    """``inplace``: the sklearn wrapper's ``inplace_predict`` arithmetic for DART trees
    (a raw Booster's ``predict(DMatrix)`` otherwise)."""
    has_range = not np.isnan(missing)
    trees, info, weights = _iteration_trees(learner["gradient_booster"], n_iterations, estimator)
    if not trees:
        raise MissingConverter(unsupported_message(
            estimator, "a model with", "no trees", "models with at least one boosting round"))
    width = int(trees[0]["tree_param"].get("size_leaf_vector", "1"))
    width = max(width, 1)
    inplace = inplace and learner["gradient_booster"]["name"] == "dart"
    builder = EnsembleBuilder(width)
    for tree, output, weight in zip(trees, info, weights):
        start = 0 if width > 1 else int(output)
        _add_tree(builder, tree, start, width, float(weight), has_range,
                  np.float32(base[start]) if inplace else None)
    fields = dict(input_precision="float32", categorical_rule="nonnegative",
                  sum_precision="float32", post_transform=transform)
    if has_range:
        fields["missing_range"] = (missing, missing)
    return builder.build(n_features=n_features, n_outputs=n_outputs, base_score=base, **fields)


def _booster_json(booster):
    return json.loads(bytes(booster.save_raw("json")).decode("utf-8"))


_KINDS = {"XGBClassifier": "classifier", "XGBRFClassifier": "classifier",
          "XGBRegressor": "regressor", "XGBRFRegressor": "regressor", "XGBRanker": "ranker"}


@register_frontend("xgboost", *_KINDS)
def _xgb_sklearn(model, options):
    owner = type(model).__name__
    if not model.__sklearn_is_fitted__():
        raise NotFittedError(
            f"Cannot convert {owner}: the model is not fitted; call fit() before convert().")
    booster = model.get_booster()
    best = getattr(booster, "best_iteration", None) if "best_iteration" in booster.attributes() \
        else None
    kind = _KINDS[owner]
    missing = np.nan if model.missing is None else model.missing
    model_ir = ir_from_json(_booster_json(booster), owner, kind, missing=missing,
                            n_iterations=None if best is None else int(best) + 1,
                            classes=getattr(model, "classes_", None))
    return model_ir


@register_frontend("xgboost", "Booster")
def _xgb_booster(model, options):
    return ir_from_json(_booster_json(model), "Booster", "booster")


def from_xgboost(model, options=None):
    """The IR of a fitted XGBoost model (sklearn wrapper or Booster)."""
    if type(model).__name__ == "Booster":
        return _xgb_booster(model, options)
    return _xgb_sklearn(model, options)
