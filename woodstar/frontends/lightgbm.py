"""LightGBM models -> TreeEnsemble IR, read from ``Booster.dump_model()``.

What LightGBM 4.x does at predict time, and how each piece lands in the IR:

* numerical split ``fval <= threshold`` in double: comparison LE, input_precision
  float64 (the container runs a float64 program for float64 input). The dump clips
  thresholds to +-1e300 (LightGBM's AvoidInf); they are read back as +-inf, which is
  what a bin's last bound is (a real threshold beyond 1e300 would be misread).
* LightGBM's predictor stores a row sparsely: every ``|x| <= 1e-35f`` is read as 0.0.
  Only a threshold inside that band can tell the difference; it is moved to the band's
  edge on the side where 0.0 goes (exact, no IR change).
* ``missing_type``: "NaN" -> NaN follows ``default_left``; "None" -> NaN is replaced
  by 0.0 before the test, so NaN goes where 0.0 goes; "Zero" -> NaN and every
  ``|x| <= 1e-35f`` follow ``default_left`` (the IR's ``missing_range``).
* categorical split (``decision_type "=="``, threshold ``"a||b||c"``): the listed
  categories go left; NaN, negative values and unlisted categories go right; the
  category of ``x`` is ``int(x)`` (truncation): IR categorical_rule "truncate".
* pandas ``category`` columns: the model stores each column's training categories
  (``pandas_categorical``, numbers or strings) and its trees test their *codes*. LightGBM
  re-codes a DataFrame's category column to those categories by value
  (``cat.set_categories``: a value outside them, or missing, becomes NaN) and reads a
  NumPy array as codes already. The trees keep LightGBM's codes and the categories go
  into the input schema (``InputColumn.category_values``), so the container's edge does
  the same re-coding: a DataFrame is read by value, an array as codes.
* leaves hold shrunk values (learning rate, DART weights, boost_from_average already
  applied); ``average_output`` (boosting "rf") is the mean over iterations.
* ``linear_tree``: a leaf outputs ``leaf_const + sum leaf_coeff * x`` unless one of
  its features is NaN, then ``leaf_value``: the IR's linear leaves, "leaf_value" mode.
* the trees dumped are those LightGBM predicts with by default: ``best_iteration``
  after early stopping, else all.

The container's methods: ``predict`` (labels for a classifier, the transformed output
otherwise, as ``Booster.predict`` gives it), ``predict_proba`` for classifiers, and
``decision_function`` = ``predict(raw_score=True)`` for every LightGBM model, except
boosting "rf": there LightGBM's raw score is the *sum* over iterations while its
``predict`` transforms the mean, and ``decision_function`` is that mean (the margin
the prediction is made from). For a raw
``lightgbm.Booster``, ``predict`` mirrors ``Booster.predict(X)`` (transformed scores,
one column per class for multi-class, 1-D otherwise).
"""

import numpy as np

from ..exceptions import MissingConverter, NotFittedError, unsupported_message
from ..ir import CATEGORY, FLOAT, Head, InputColumn, InputSchema, ModelIR, chain
from ..ir.builder import EnsembleBuilder, bitset_words
from ..ir.tree_ensemble import LE
from .registry import register_frontend

__all__ = ["from_lightgbm", "SUPPORTED_LIGHTGBM", "OBJECTIVES"]

SUPPORTED_LIGHTGBM = ">=4.0,<5"
ZERO_THRESHOLD = float(np.float32(1e-35))  # LightGBM's kZeroThreshold, a float
DUMPED_INF = 1e300  # dump_model() writes thresholds beyond +-1e300 (infinities) as +-1e300

# objective name -> post-transform of the raw score (before any parameters).
OBJECTIVES = {
    "binary": "sigmoid_binary",
    "multiclass": "softmax",
    "multiclassova": "sigmoid",
    "regression": "identity",
    "regression_l1": "identity",
    "huber": "identity",
    "fair": "identity",
    "quantile": "identity",
    "mape": "identity",
    "poisson": "exp",
    "gamma": "exp",
    "tweedie": "exp",
    "cross_entropy": "sigmoid",
    "cross_entropy_lambda": "softplus",
    "lambdarank": "identity",
    "rank_xendcg": "identity",
}
_CLASSIFIER_OBJECTIVES = ("binary", "multiclass", "multiclassova")


def _versions():
    import lightgbm

    return (("lightgbm", lightgbm.__version__),)


def _parse_objective(text, owner):
    """'binary sigmoid:1' -> ('binary', {'sigmoid': '1'}); 'regression sqrt' -> flags."""
    parts = str(text).split()
    if not parts:
        raise MissingConverter(unsupported_message(owner, "objective", text, sorted(OBJECTIVES)))
    name, params = parts[0], {}
    for part in parts[1:]:
        key, _, value = part.partition(":")
        params[key] = value if value else True
    if name not in OBJECTIVES:
        raise MissingConverter(unsupported_message(owner, "objective", name, sorted(OBJECTIVES)))
    if params.get("sqrt"):
        raise MissingConverter(unsupported_message(
            owner, "objective option", f"{name} sqrt (reg_sqrt=True)", "reg_sqrt=False"))
    return name, params


def _pandas_categories(pandas_categorical, n_features, categorical_features, owner):
    """Per feature, the pandas categories it was fitted on, in code order (None: not a
    pandas category column)."""
    values = [None] * n_features
    if not pandas_categorical:
        return values
    if len(pandas_categorical) != len(categorical_features):
        # pandas_categorical covers the DataFrame's category columns only; other
        # categorical features (integer columns named in categorical_feature, or a
        # constant category column LightGBM dropped) would misalign the lists.
        raise MissingConverter(unsupported_message(
            owner, "a mix of pandas category columns and other categorical features",
            f"{len(pandas_categorical)} pandas category column(s) for "
            f"{len(categorical_features)} categorical feature(s)",
            "categorical features that are all pandas category columns, or none"))
    for feature, categories in zip(categorical_features, pandas_categorical):
        categories = [c.item() if isinstance(c, np.generic) else c for c in categories]
        if not all(isinstance(c, (str, int, float)) and c == c for c in categories):
            raise MissingConverter(unsupported_message(
                owner, f"pandas categorical feature {feature} with categories",
                categories[:5], "categories that are strings or numbers"))
        values[feature] = tuple(categories)
    return values


def _schema(names, category_values):
    """The input columns: pandas category columns carry their categories (the edge
    re-codes a DataFrame by value), every other column is a plain number."""
    return InputSchema(tuple(
        InputColumn(name, kind=FLOAT) if values is None
        else InputColumn(name, kind=CATEGORY, category_values=values)
        for name, values in zip(names, category_values)))


def _add_tree(builder, root, output_start, owner, leaf_scale=1.0):
    """Flatten one dumped tree (nested dicts) breadth-first into the builder."""
    feature, threshold, left, right, default_left, zero_missing, leaf = [], [], [], [], [], [], []
    categories, linear = {}, {}
    queue = [root]
    position = 0
    while position < len(queue):
        node = queue[position]
        index = position
        position += 1
        if "split_index" not in node:
            if "leaf_const" in node:  # linear_tree: const + sum coeff * x, NaN -> leaf_value
                linear[index] = ([-1] + [int(f) for f in node.get("leaf_features", [])],
                                 [float(node["leaf_const"]) * leaf_scale]
                                 + [float(c) * leaf_scale for c in node.get("leaf_coeff", [])])
            feature.append(-1)
            threshold.append(0.0)
            left.append(-1)
            right.append(-1)
            default_left.append(False)
            zero_missing.append(False)
            leaf.append(float(node["leaf_value"]) * leaf_scale)
            continue
        f = int(node["split_feature"])
        feature.append(f)
        left.append(len(queue))
        right.append(len(queue) + 1)
        queue += [node["left_child"], node["right_child"]]
        leaf.append(0.0)
        missing_type = node.get("missing_type", "None")
        if node["decision_type"] == "==":
            codes = np.asarray([int(c) for c in str(node["threshold"]).split("||")], dtype=np.int64)
            codes = codes[codes >= 0]
            categories[index] = bitset_words(codes) if len(codes) else np.zeros(1, np.uint32)
            threshold.append(0.0)
            default_left.append(False)  # NaN goes right in a categorical split
            zero_missing.append(False)
            continue
        if node["decision_type"] != "<=":
            raise MissingConverter(unsupported_message(
                owner, "decision_type", node["decision_type"], "'<=', '=='"))
        t = float(node["threshold"])
        if abs(t) >= DUMPED_INF:  # the dump writes an infinite threshold as +-1e300
            t = float(np.copysign(np.inf, t))
        if -ZERO_THRESHOLD <= t < ZERO_THRESHOLD:
            # The predictor reads |x| <= 1e-35f as 0.0 (it stores rows sparsely), so the
            # whole band goes where 0.0 goes: move the threshold to the band's edge.
            t = ZERO_THRESHOLD if t >= 0.0 else float(np.nextafter(-ZERO_THRESHOLD, -np.inf))
        threshold.append(t)
        if missing_type == "NaN":
            default_left.append(bool(node["default_left"]))
            zero_missing.append(False)
        elif missing_type == "None":
            default_left.append(0.0 <= t)  # NaN is read as 0.0
            zero_missing.append(False)
        elif missing_type == "Zero":
            default_left.append(bool(node["default_left"]))
            zero_missing.append(True)
        else:
            raise MissingConverter(unsupported_message(
                owner, "missing_type", missing_type, "'None', 'Zero', 'NaN'"))
    builder.add_tree(feature=feature, threshold=threshold, left=left, right=right,
                     default_left=default_left, leaf_value=leaf, comparison=LE,
                     output_start=output_start, categories=categories,
                     missing_in_range=zero_missing, linear=linear)


def ir_from_dump(dump, estimator, kind, classes=None, feature_names=None):
    """The IR of a ``Booster.dump_model()`` dict. ``kind``: "classifier", "regressor",
    "ranker" or "booster" (a raw Booster: predict gives the transformed scores)."""
    name, params = _parse_objective(dump.get("objective", ""), estimator)
    n_features = int(dump["max_feature_idx"]) + 1
    n_per_iteration = int(dump.get("num_tree_per_iteration", 1))
    n_outputs = n_per_iteration
    trees = dump["tree_info"]
    if not trees:
        raise MissingConverter(unsupported_message(
            estimator, "a model with", "no trees", "models with at least one iteration"))
    categorical_features = [i for i, info in enumerate(
        dump.get("feature_infos", {}).values()) if isinstance(info, dict) and "values" in info
        and info.get("values")]
    category_values = _pandas_categories(dump.get("pandas_categorical"), n_features,
                                         categorical_features, estimator)
    fields = dict(input_precision="float64", categorical_rule="truncate",
                  missing_range=(-ZERO_THRESHOLD, ZERO_THRESHOLD))
    leaf_scale = 1.0
    if dump.get("average_output"):  # boosting "rf": the mean over iterations
        if n_per_iteration == 1:
            fields["aggregation"] = "mean"
        else:  # the IR's mean divides by all trees, LightGBM by iterations
            leaf_scale = 1.0 / (len(trees) // n_per_iteration)
    builder = EnsembleBuilder(1)
    for i, tree in enumerate(trees):
        _add_tree(builder, tree["tree_structure"], i % n_per_iteration, estimator, leaf_scale)
    transform = OBJECTIVES[name]
    if transform in ("sigmoid", "sigmoid_binary"):
        # predict_proba of a one-output classifier has two columns; Booster.predict one.
        one_output_classifier = kind == "classifier" and n_outputs == 1
        transform = "sigmoid_binary" if one_output_classifier else "sigmoid"
    scale = float(params.get("sigmoid", 1.0)) if "sigmoid" in transform else 1.0
    fields.update(post_transform=transform, post_transform_scale=scale)
    ensemble = builder.build(n_features=n_features, n_outputs=n_outputs, **fields)
    if kind == "classifier":
        head = Head(estimator=estimator, task="classification", n_features=n_features,
                    methods=("predict", "predict_proba", "decision_function"),
                    feature_names=feature_names, classes=(np.asarray(classes),),
                    decision_rule="argmax", library_versions=_versions())
    else:
        head = Head(estimator=estimator, task="ranking" if kind == "ranker" else "regression",
                    n_features=n_features, methods=("predict", "decision_function"),
                    feature_names=feature_names, library_versions=_versions())
    schema = None
    if any(v is not None for v in category_values):
        names = feature_names or tuple(str(i) for i in range(n_features))
        schema = _schema(names, category_values)
    return chain(head, ensemble=ensemble, schema=schema).validate()


def _feature_names(dump, fitted_names):
    if fitted_names is not None:
        return tuple(str(n) for n in fitted_names)
    names = dump.get("feature_names")
    if not names or all(n == f"Column_{i}" for i, n in enumerate(names)):
        return None  # LightGBM's own placeholders: the model was fitted without names
    return tuple(names)


@register_frontend("lightgbm", "LGBMClassifier", "LGBMRegressor", "LGBMRanker", "LGBMModel")
def _lgbm_sklearn(model, options):
    owner = type(model).__name__
    if not getattr(model, "fitted_", False):
        raise NotFittedError(
            f"Cannot convert {owner}: the model is not fitted; call fit() before convert().")
    dump = model.booster_.dump_model()
    name, _ = _parse_objective(dump.get("objective", ""), owner)
    is_classifier = hasattr(model, "classes_") and name in _CLASSIFIER_OBJECTIVES
    kind = "classifier" if is_classifier else ("ranker" if owner == "LGBMRanker" else "regressor")
    names = getattr(model, "feature_names_in_", None)
    return ir_from_dump(dump, owner, kind, classes=model.classes_ if is_classifier else None,
                        feature_names=_feature_names(dump, names) if names is not None else None)


@register_frontend("lightgbm", "Booster")
def _lgbm_booster(model, options):
    dump = model.dump_model()
    return ir_from_dump(dump, "Booster", "booster", feature_names=_feature_names(dump, None))


def from_lightgbm(model, options=None):
    """The IR of a fitted LightGBM model (sklearn wrapper or Booster)."""
    if type(model).__name__ == "Booster":
        return _lgbm_booster(model, options)
    return _lgbm_sklearn(model, options)
