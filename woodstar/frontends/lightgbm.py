"""LightGBM models -> TreeEnsemble IR, read from LightGBM's text format
(``Booster.model_to_string()``, parsed by ``_lightgbm_text.py``; a large model's
``dump_model()`` JSON costs several times more to make and decode). ``ir_from_dump``
reads a ``dump_model()`` dict into the same arrays, node for node.

What LightGBM 4.x does at predict time, and how each piece lands in the IR:

* numerical split ``fval <= threshold`` in double: comparison LE, input_precision
  float64 (the container runs a float64 program for float64 input). Thresholds are
  clipped to +-1e300 (LightGBM's AvoidInf); they are read back as +-inf, which is
  what a bin's last bound is (a real threshold beyond 1e300 would be misread).
* LightGBM's predictor stores a row sparsely: every ``|x| <= 1e-35f`` is read as 0.0.
  Only a threshold inside that band can tell the difference; it is moved to the band's
  edge on the side where 0.0 goes (exact, no IR change).
* ``missing_type``: "NaN" -> NaN follows ``default_left``; "None" -> NaN is replaced
  by 0.0 before the test, so NaN goes where 0.0 goes; "Zero" -> NaN and every
  ``|x| <= 1e-35f`` follow ``default_left`` (the IR's ``missing_range``).
* categorical split (a bitset of categories in the text, ``decision_type "=="`` and
  threshold ``"a||b||c"`` in the dump): the listed categories go left; NaN, negative values and unlisted categories go right; the
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
* the trees read are those LightGBM predicts with by default: ``best_iteration``
  after early stopping, else all.
* links: LightGBM computes them in double with the C library's ``exp`` (and
  ``log1p``): multiclass is ``softmax_libm`` (its Common::Softmax), poisson, gamma and
  tweedie ``exp_libm``, cross_entropy_lambda ``softplus``; the sigmoids
  ``1 / (1 + exp(-sigmoid * raw))`` are the IR's (scipy's expit, the same formula).

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
from ._lightgbm_text import MISSING_TYPES, LightGBMTree, read_model_text
from .registry import register_frontend

__all__ = ["from_lightgbm", "ir_from_booster", "ir_from_dump", "ir_from_text", "SUPPORTED_LIGHTGBM",
           "OBJECTIVES"]

SUPPORTED_LIGHTGBM = ">=4.0,<5"
ZERO_THRESHOLD = float(np.float32(1e-35))  # LightGBM's kZeroThreshold, a float
DUMPED_INF = 1e300  # LightGBM stores thresholds beyond +-1e300 (infinities) as +-1e300

# objective name -> post-transform of the raw score (before any parameters).
OBJECTIVES = {
    "binary": "sigmoid_binary",
    "multiclass": "softmax_libm",  # its links call the C library's exp, in double
    "multiclassova": "sigmoid",
    "regression": "identity",
    "regression_l1": "identity",
    "huber": "identity",
    "fair": "identity",
    "quantile": "identity",
    "mape": "identity",
    "poisson": "exp_libm",
    "gamma": "exp_libm",
    "tweedie": "exp_libm",
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


def _tree_from_dump(info, owner):
    """A ``dump_model()`` tree (nested dicts) in the text reader's form, LightGBM's own
    node numbering included."""
    n_leaves = int(info.get("num_leaves", 1))
    m = n_leaves - 1
    split_feature, left_child, right_child = (np.zeros(m, np.int64) for _ in range(3))
    threshold, leaf_value = np.zeros(m), np.zeros(n_leaves)
    is_categorical, default_left = np.zeros(m, bool), np.zeros(m, bool)
    missing_type = np.zeros(m, np.int64)
    categories, linear = {}, {}

    def number(node):  # LightGBM's child reference: a node, or ~leaf
        return int(node["split_index"]) if "split_index" in node \
            else ~int(node.get("leaf_index", 0))

    stack = [info["tree_structure"]]
    while stack:
        node = stack.pop()
        if "split_index" not in node:
            leaf = int(node.get("leaf_index", 0))
            leaf_value[leaf] = float(node["leaf_value"])
            if "leaf_const" in node:  # linear_tree: const + sum coeff * x, NaN -> leaf_value
                linear[leaf] = (float(node["leaf_const"]),
                                np.asarray(node.get("leaf_features", []), dtype=np.int64),
                                np.asarray(node.get("leaf_coeff", []), dtype=np.float64))
            continue
        i = int(node["split_index"])
        split_feature[i] = int(node["split_feature"])
        left_child[i], right_child[i] = number(node["left_child"]), number(node["right_child"])
        stack += [node["left_child"], node["right_child"]]
        if node["decision_type"] == "==":
            is_categorical[i] = True
            threshold[i] = np.nan
            categories[i] = np.asarray([int(c) for c in str(node["threshold"]).split("||")],
                                       dtype=np.int64)
            continue
        if node["decision_type"] != "<=":
            raise MissingConverter(unsupported_message(
                owner, "decision_type", node["decision_type"], "'<=', '=='"))
        kind = node.get("missing_type", "None")
        if kind not in MISSING_TYPES:
            raise MissingConverter(unsupported_message(
                owner, "missing_type", kind, "'None', 'Zero', 'NaN'"))
        threshold[i] = float(node["threshold"])
        default_left[i] = bool(node.get("default_left", False))
        missing_type[i] = MISSING_TYPES.index(kind)
    return LightGBMTree(n_leaves, split_feature, threshold, is_categorical, categories,
                        default_left, missing_type, left_child, right_child, leaf_value,
                        linear or None)


def _add_tree(builder, tree, output_start, owner, leaf_scale=1.0):
    """One tree into the builder, in LightGBM's node numbering: internal nodes first
    (the root is node 0), then the leaves."""
    m = tree.num_leaves - 1
    n = m + tree.num_leaves
    numerical = ~tree.is_categorical
    if (numerical & (tree.missing_type < 0)).any():
        raise MissingConverter(unsupported_message(
            owner, "missing_type", "a code LightGBM does not define", "'None', 'Zero', 'NaN'"))
    t = tree.threshold
    t = np.where(np.abs(t) >= DUMPED_INF, np.copysign(np.inf, t), t)  # +-1e300: infinities
    # The predictor reads |x| <= 1e-35f as 0.0 (it stores rows sparsely), so the whole
    # band goes where 0.0 goes: a threshold inside it moves to the band's edge.
    band = (-ZERO_THRESHOLD <= t) & (t < ZERO_THRESHOLD)
    t = np.where(band, np.where(t >= 0.0, ZERO_THRESHOLD, np.nextafter(-ZERO_THRESHOLD, -np.inf)),
                 t)
    none = tree.missing_type == MISSING_TYPES.index("None")  # NaN is read as 0.0
    zero = tree.missing_type == MISSING_TYPES.index("Zero")
    # Categorical nodes send NaN right (default_left False) and have no missing range.
    default_left = np.where(none, 0.0 <= t, tree.default_left) & numerical

    def full(values, fill, dtype):
        out = np.full(n, fill, dtype)
        out[:m] = values
        return out

    def nodes(child):  # ~leaf -> the leaf's node
        return np.where(child >= 0, child, m + ~child)

    leaf = np.zeros(n)
    leaf[m:] = tree.leaf_value * leaf_scale
    categories = {}
    for node, codes in sorted(tree.categories.items()):  # bitsets in node order
        codes = codes[codes >= 0]
        categories[node] = bitset_words(codes) if len(codes) else np.zeros(1, np.uint32)
    linear = {}
    for index, (const, features, coefs) in sorted((tree.linear or {}).items()):
        linear[m + index] = ([-1] + [int(f) for f in features],
                             [const * leaf_scale] + [float(c) * leaf_scale for c in coefs])
    builder.add_tree(feature=full(tree.split_feature, -1, np.int64),
                     threshold=full(np.where(numerical, t, 0.0), 0.0, np.float64),
                     left=full(nodes(tree.left_child), -1, np.int64),
                     right=full(nodes(tree.right_child), -1, np.int64),
                     default_left=full(default_left, False, bool), leaf_value=leaf,
                     comparison=LE, output_start=output_start, categories=categories,
                     missing_in_range=full(zero & numerical, False, bool), linear=linear)


def _dump_header(dump):
    """What ``_ir`` reads of a ``dump_model()`` dict."""
    names = list(dump.get("feature_names") or [])
    # feature_infos leaves out unused features ("none"): its keys are feature names.
    categorical = sorted(names.index(name) if name in names else i for i, (name, info) in
                         enumerate(dump.get("feature_infos", {}).items())
                         if isinstance(info, dict) and info.get("values"))
    return dict(objective=dump.get("objective", ""), n_features=int(dump["max_feature_idx"]) + 1,
                n_per_iteration=int(dump.get("num_tree_per_iteration", 1)),
                average_output=bool(dump.get("average_output")), feature_names=names,
                categorical_features=categorical)


def _text_header(header):
    """What ``_ir`` reads of the text format's header lines."""
    infos = header.get("feature_infos", "").split()
    return dict(objective=header.get("objective", ""),
                n_features=int(header["max_feature_idx"]) + 1,
                n_per_iteration=int(header.get("num_tree_per_iteration", 1)),
                average_output="average_output" in header,
                feature_names=header.get("feature_names", "").split(),
                # numerical features read "[min:max]", unused ones "none"
                categorical_features=[i for i, info in enumerate(infos)
                                      if info != "none" and not info.startswith("[")])


def ir_from_dump(dump, estimator, kind, classes=None, feature_names=None):
    """The IR of a ``Booster.dump_model()`` dict. ``kind``: "classifier", "regressor",
    "ranker" or "booster" (a raw Booster: predict gives the transformed scores)."""
    _parse_objective(dump.get("objective", ""), estimator)
    trees = [_tree_from_dump(info, estimator) for info in dump["tree_info"]]
    return _ir(_dump_header(dump), trees, dump.get("pandas_categorical"), estimator, kind,
               classes, feature_names)


def ir_from_text(text, estimator, kind, classes=None, feature_names=None,
                 pandas_categorical=None):
    """The IR of a ``Booster.model_to_string()`` text (``kind`` as for ir_from_dump);
    ``pandas_categorical``: the Booster's, which the text carries as its last line."""
    header, trees = read_model_text(text)
    return _ir(_text_header(header), trees, pandas_categorical, estimator, kind, classes,
               feature_names)


def _ir(header, trees, pandas_categorical, estimator, kind, classes, feature_names):
    name, params = _parse_objective(header["objective"], estimator)
    n_features = header["n_features"]
    n_per_iteration = header["n_per_iteration"]
    n_outputs = n_per_iteration
    if not trees:
        raise MissingConverter(unsupported_message(
            estimator, "a model with", "no trees", "models with at least one iteration"))
    category_values = _pandas_categories(pandas_categorical, n_features,
                                         header["categorical_features"], estimator)
    fields = dict(input_precision="float64", categorical_rule="truncate",
                  missing_range=(-ZERO_THRESHOLD, ZERO_THRESHOLD))
    leaf_scale = 1.0
    if header["average_output"]:  # boosting "rf": the mean over iterations
        if n_per_iteration == 1:
            fields["aggregation"] = "mean"
        else:  # the IR's mean divides by all trees, LightGBM by iterations
            leaf_scale = 1.0 / (len(trees) // n_per_iteration)
    builder = EnsembleBuilder(1)
    for i, tree in enumerate(trees):
        _add_tree(builder, tree, i % n_per_iteration, estimator, leaf_scale)
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


def _names(names, fitted_names):
    """The names to record: the fitted ones, else LightGBM's unless they are its own
    placeholders (the model was fitted without names)."""
    if fitted_names is not None:
        return tuple(str(n) for n in fitted_names)
    if not names or all(n == f"Column_{i}" for i, n in enumerate(names)):
        return None
    return tuple(names)


def _feature_names(dump, fitted_names):
    """``_names`` of a ``dump_model()`` dict's feature names."""
    return _names(dump.get("feature_names"), fitted_names)


def _read(booster):
    """A Booster's header and trees, read from its text format (the trees it predicts
    with by default: ``best_iteration`` after early stopping, else all)."""
    header, trees = read_model_text(booster.model_to_string())
    return _text_header(header), trees


@register_frontend("lightgbm", "LGBMClassifier", "LGBMRegressor", "LGBMRanker", "LGBMModel")
def _lgbm_sklearn(model, options):
    owner = type(model).__name__
    if not getattr(model, "fitted_", False):
        raise NotFittedError(
            f"Cannot convert {owner}: the model is not fitted; call fit() before convert().")
    header, trees = _read(model.booster_)
    name, _ = _parse_objective(header["objective"], owner)
    is_classifier = hasattr(model, "classes_") and name in _CLASSIFIER_OBJECTIVES
    kind = "classifier" if is_classifier else ("ranker" if owner == "LGBMRanker" else "regressor")
    fitted = getattr(model, "feature_names_in_", None)
    names = _names(header["feature_names"], fitted) if fitted is not None else None
    return _ir(header, trees, model.booster_.pandas_categorical, owner, kind,
               model.classes_ if is_classifier else None, names)


def ir_from_booster(booster, estimator="Booster", kind="booster", classes=None):
    """The IR of a ``lightgbm.Booster`` read from its text format (``kind`` as for
    ir_from_dump)."""
    header, trees = _read(booster)
    return _ir(header, trees, booster.pandas_categorical, estimator, kind, classes,
               _names(header["feature_names"], None))


@register_frontend("lightgbm", "Booster")
def _lgbm_booster(model, options):
    return ir_from_booster(model)


def from_lightgbm(model, options=None):
    """The IR of a fitted LightGBM model (sklearn wrapper or Booster)."""
    if type(model).__name__ == "Booster":
        return _lgbm_booster(model, options)
    return _lgbm_sklearn(model, options)
