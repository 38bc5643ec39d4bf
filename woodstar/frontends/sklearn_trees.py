"""scikit-learn tree models -> TreeEnsemble IR.

scikit-learn has no documented dump of its trees, so the private state is read here
and nowhere else: ``tree_`` of the decision trees (children, feature, threshold,
``missing_go_to_left``, value), the HistGradientBoosting predictors' node records and
bitsets, GradientBoosting's init estimator and IsolationForest's path lengths. The
supported versions are pinned by tests (``SUPPORTED_SKLEARN``).
"""

import numpy as np

from ..exceptions import MissingConverter, unsupported_message
from ..ir import ModelIR, chain
from ..ir.builder import EnsembleBuilder, bitset_words
from ..ir.tree_ensemble import LE
from ._sklearn import check_fitted as _check_fitted, sklearn_head as _head
from .registry import register_frontend

__all__ = ["from_sklearn", "SUPPORTED_SKLEARN"]

SUPPORTED_SKLEARN = ">=1.4,<2"
_MAX_CATEGORY = 1 << 16


# --------------------------------------------------------------------------- trees
def _add_sklearn_tree(builder, tree, leaf_value, feature_map=None, output_start=0):
    """One ``sklearn.tree._tree.Tree``; ``leaf_value`` is (n_nodes, width)."""
    feature = tree.feature.astype(np.int64)
    if feature_map is not None:
        feature = np.where(feature >= 0, np.asarray(feature_map)[np.maximum(feature, 0)], feature)
    builder.add_tree(
        feature=feature,
        threshold=tree.threshold,
        left=tree.children_left,
        right=tree.children_right,
        default_left=tree.missing_go_to_left.astype(bool),
        leaf_value=leaf_value,
        comparison=LE,
        output_start=output_start,
    )


def _class_probabilities(tree, n_classes):
    """Leaf class fractions, as predict_proba returns them. Since scikit-learn 1.4
    ``tree_.value`` already holds fractions and predict_proba does not renormalize;
    dividing by their sum here would move some values by an ulp and, summed over a
    forest, flip near-tied labels."""
    return np.concatenate([tree.value[:, k, :n].astype(np.float64)
                           for k, n in enumerate(n_classes)], axis=1)


def _n_classes_list(model):
    n = model.n_classes_
    return [int(c) for c in (n if np.ndim(n) else [n])]


def _classes_tuple(model):
    classes = model.classes_
    if isinstance(classes, list):
        return tuple(np.asarray(c) for c in classes)
    return (np.asarray(classes),)


def _forest_ir(model, trees, is_classifier):
    n_features = int(model.n_features_in_)
    if is_classifier:
        n_classes = _n_classes_list(model)
        width = sum(n_classes)
        builder = EnsembleBuilder(width)
        for tree in trees:
            _add_sklearn_tree(builder, tree, _class_probabilities(tree, n_classes))
        ensemble = builder.build(n_features=n_features, n_outputs=width, aggregation="mean")
        head = _head(model, "classification", ("predict", "predict_proba", "predict_log_proba"),
                     classes=_classes_tuple(model), allows_inf=False)
    else:
        width = int(model.n_outputs_)
        builder = EnsembleBuilder(width)
        for tree in trees:
            _add_sklearn_tree(builder, tree, tree.value[:, :, 0])
        ensemble = builder.build(n_features=n_features, n_outputs=width, aggregation="mean")
        head = _head(model, "regression", ("predict",), squeeze_output=width == 1, allows_inf=False)
    return chain(head, ensemble=ensemble).validate()


@register_frontend("sklearn", "DecisionTreeClassifier", "ExtraTreeClassifier")
def _decision_tree_classifier(model, options):
    _check_fitted(model, "tree_")
    return _forest_ir(model, [model.tree_], is_classifier=True)


@register_frontend("sklearn", "DecisionTreeRegressor", "ExtraTreeRegressor")
def _decision_tree_regressor(model, options):
    _check_fitted(model, "tree_")
    return _forest_ir(model, [model.tree_], is_classifier=False)


@register_frontend("sklearn", "RandomForestClassifier", "ExtraTreesClassifier")
def _forest_classifier(model, options):
    _check_fitted(model, "estimators_")
    return _forest_ir(model, [e.tree_ for e in model.estimators_], is_classifier=True)


@register_frontend("sklearn", "RandomForestRegressor", "ExtraTreesRegressor")
def _forest_regressor(model, options):
    _check_fitted(model, "estimators_")
    return _forest_ir(model, [e.tree_ for e in model.estimators_], is_classifier=False)


# --------------------------------------------------------------- gradient boosting
_GB_LOSSES = {
    "GradientBoostingClassifier": ("log_loss", "exponential"),
    "GradientBoostingRegressor": ("squared_error", "absolute_error", "huber", "quantile"),
}


@register_frontend("sklearn", "GradientBoostingClassifier", "GradientBoostingRegressor")
def _gradient_boosting(model, options):
    name = type(model).__name__
    _check_fitted(model, "estimators_")
    if model.loss not in _GB_LOSSES[name]:
        raise MissingConverter(unsupported_message(name, "loss", model.loss, _GB_LOSSES[name]))
    init = model.init_
    if not (isinstance(init, str) and init == "zero") and type(init).__name__ not in (
            "DummyClassifier", "DummyRegressor"):
        raise MissingConverter(unsupported_message(
            name, "init estimator", type(model.init).__name__,
            "None (the default prior), 'zero'"))
    n_features = int(model.n_features_in_)
    n_outputs = model.estimators_.shape[1]
    # The init estimator predicts a constant; ask scikit-learn for it on one row.
    base = model._raw_predict_init(np.zeros((1, n_features), dtype=np.float32))[0]
    builder = EnsembleBuilder(1)
    for stage in model.estimators_:
        for k, estimator in enumerate(stage):
            tree = estimator.tree_
            # predict_stages adds learning_rate * value, the same product as here.
            _add_sklearn_tree(builder, tree, model.learning_rate * tree.value[:, 0, 0],
                              output_start=k)
    if name == "GradientBoostingRegressor":
        ensemble = builder.build(n_features=n_features, n_outputs=1, base_score=base)
        head = _head(model, "regression", ("predict",), allows_inf=False)
        return chain(head, ensemble=ensemble).validate()
    if n_outputs == 1:
        transform, scale = "sigmoid_binary", (2.0 if model.loss == "exponential" else 1.0)
        rule = "raw_ge_zero"
    else:
        transform, scale, rule = "softmax", 1.0, "argmax"
    ensemble = builder.build(n_features=n_features, n_outputs=n_outputs, base_score=base,
                             post_transform=transform, post_transform_scale=scale)
    head = _head(model, "classification", _with_log_proba(model, ("predict", "predict_proba",
                                                                  "decision_function")),
                 classes=_classes_tuple(model), decision_rule=rule, allows_inf=False)
    return chain(head, ensemble=ensemble).validate()


# ---------------------------------------------------------- hist gradient boosting
def _hgb_feature_layout(model):
    """(remapped -> original column, known categories per remapped column or None)."""
    n_features = int(model.n_features_in_)
    preprocessor = getattr(model, "_preprocessor", None)
    if preprocessor is None:
        return np.arange(n_features), [None] * n_features
    is_categorical = np.asarray(model.is_categorical_, dtype=bool)
    order = np.concatenate([np.flatnonzero(is_categorical), np.flatnonzero(~is_categorical)])
    encoder = preprocessor.named_transformers_["encoder"]
    known = [None] * n_features
    for position, categories in enumerate(encoder.categories_):
        categories = np.asarray(categories)
        if categories.size and categories.dtype.kind == "f" and np.isnan(categories[-1]):
            categories = categories[:-1]
        if categories.dtype.kind not in "biuf" or not np.all(
                (categories >= 0) & (categories < _MAX_CATEGORY) & (categories == np.trunc(categories))):
            raise MissingConverter(unsupported_message(
                type(model).__name__, f"categorical feature {order[position]} with categories",
                list(categories[:5]), f"non-negative integer categories below {_MAX_CATEGORY} "
                "(encode string categories as integers before fitting)"))
        known[position] = categories.astype(np.int64)
    return order, known


def _hgb_tree(builder, predictor, original_column, known, output_start):
    nodes = predictor.nodes
    n = len(nodes)
    is_leaf = nodes["is_leaf"].astype(bool)
    left = np.where(is_leaf, -1, nodes["left"].astype(np.int64))
    right = np.where(is_leaf, -1, nodes["right"].astype(np.int64))
    default_left = nodes["missing_go_to_left"].astype(bool).copy()
    categories = {}
    for node in np.flatnonzero(nodes["is_categorical"].astype(bool) & ~is_leaf):
        column = int(nodes["feature_idx"][node])
        words = predictor.raw_left_cat_bitsets[nodes["bitset_idx"][node]]
        bits = np.unpackbits(words.astype("<u4").view(np.uint8), bitorder="little").astype(bool)
        codes = np.arange(len(known[column]))
        goes_left = bits[codes] if len(codes) <= len(bits) else np.zeros(len(codes), bool)
        if default_left[node]:
            # Unknown, negative and NaN values follow the missing side (left). The IR
            # sends "not in the set" right, so swap the children and list the
            # categories that go right instead.
            left[node], right[node] = right[node], left[node]
            default_left[node] = False
            goes_left = ~goes_left
        values = known[column][goes_left]
        categories[node] = bitset_words(values) if len(values) else np.zeros(1, np.uint32)
    builder.add_tree(
        feature=np.asarray(original_column)[nodes["feature_idx"].astype(np.int64)],
        threshold=nodes["num_threshold"],
        left=left,
        right=right,
        default_left=default_left,
        leaf_value=nodes["value"],
        comparison=LE,
        output_start=output_start,
        categories=categories,
    )
    return n


@register_frontend("sklearn", "HistGradientBoostingClassifier", "HistGradientBoostingRegressor")
def _hist_gradient_boosting(model, options):
    name = type(model).__name__
    _check_fitted(model, "_predictors")
    original_column, known = _hgb_feature_layout(model)
    n_outputs = int(model.n_trees_per_iteration_)
    builder = EnsembleBuilder(1)
    for iteration in model._predictors:
        for k, predictor in enumerate(iteration):
            _hgb_tree(builder, predictor, original_column, known, k)
    base = np.asarray(model._baseline_prediction, dtype=np.float64).reshape(-1)
    common = dict(n_features=int(model.n_features_in_), n_outputs=n_outputs, base_score=base,
                  input_precision="float64", categorical_rule="exact")
    # The categorical columns go through an OrdinalEncoder, which rejects infinities.
    categorical_fields = dict(inf_rejected_features=tuple(
        int(original_column[i]) for i, categories in enumerate(known) if categories is not None))
    if name == "HistGradientBoostingRegressor":
        link = type(model._loss.link).__name__
        links = {"IdentityLink": "identity", "LogLink": "exp"}
        if link not in links:
            raise MissingConverter(unsupported_message(name, "link function", link, sorted(links)))
        ensemble = builder.build(post_transform=links[link], **common)
        head = _head(model, "regression", ("predict",), **categorical_fields)
        return chain(head, ensemble=ensemble).validate()
    transform, rule = ("sigmoid_binary", "raw_gt_zero") if n_outputs == 1 else ("softmax", "argmax")
    ensemble = builder.build(post_transform=transform, **common)
    head = _head(model, "classification", _with_log_proba(model, ("predict", "predict_proba",
                                                                  "decision_function")),
                 classes=_classes_tuple(model), decision_rule=rule, **categorical_fields)
    return chain(head, ensemble=ensemble).validate()


# ----------------------------------------------------------------- isolation forest
def _average_path_length(n_samples):
    """Average depth of an unsuccessful search in a binary search tree of n samples."""
    n = np.asarray(n_samples, dtype=np.float64)
    out = np.zeros_like(n)
    out[n == 2] = 1.0
    big = n > 2
    out[big] = 2.0 * (np.log(n[big] - 1.0) + np.euler_gamma) - 2.0 * (n[big] - 1.0) / n[big]
    return out


@register_frontend("sklearn", "IsolationForest")
def _isolation_forest(model, options):
    _check_fitted(model, "estimators_")
    n_features = int(model.n_features_in_)
    subsample = model._max_features != n_features
    builder = EnsembleBuilder(1)
    for t, (estimator, features) in enumerate(zip(model.estimators_, model.estimators_features_)):
        tree = estimator.tree_
        depth_term = getattr(model, "_decision_path_lengths", None)
        apl = getattr(model, "_average_path_length_per_tree", None)
        if depth_term is not None and apl is not None:
            leaf_value = depth_term[t] + apl[t] - 1.0
        else:  # older releases: recompute what the newer ones cache
            depth = np.zeros(tree.node_count)
            for node in range(tree.node_count):
                if tree.children_left[node] >= 0:
                    depth[tree.children_left[node]] = depth[tree.children_right[node]] = depth[node] + 1
            leaf_value = depth + 1 + _average_path_length(tree.n_node_samples) - 1.0
        _add_sklearn_tree(builder, tree, leaf_value, feature_map=features if subsample else None)
    c = float(_average_path_length([model._max_samples])[0])
    # With one training sample every tree is a leaf of value 0 and scikit-learn defines
    # the score as 2 ** -1: a base score of 1 gives exactly that.
    fields = dict(post_transform_scale=1.0 / c) if c > 0 else dict(base_score=[1.0])
    ensemble = builder.build(n_features=n_features, n_outputs=1, aggregation="mean",
                             post_transform="isolation_forest", **fields)
    head = _head(model, "anomaly", ("predict", "decision_function", "score_samples"),
                 anomaly_offset=float(model.offset_))
    return chain(head, ensemble=ensemble).validate()


def from_sklearn(model, options=None):
    """The IR of a fitted scikit-learn tree model."""
    from .registry import find_frontend

    return find_frontend(model)(model, options)


def _with_log_proba(model, methods):
    """The estimator's ``predict_log_proba`` (the log of its probabilities) where it has one."""
    return methods + (("predict_log_proba",) if hasattr(model, "predict_log_proba") else ())
