"""scikit-learn's nearest-neighbour estimators and NearestCentroid -> ``k_neighbors``,
``radius_neighbors``, ``nearest_centers`` and ``centroid_discriminant`` ops
(woodstar/ir/families/neighbors.py, cluster.py).

The search scikit-learn fitted (``_fit_method``) decides the distance arithmetic: the
KD and ball trees (the default for small data) and the brute-force search with a
non-euclidean metric sum the reduced distance feature after feature; the brute-force
euclidean search uses ``|x|^2 - 2 x.t + |t|^2``; cosine goes through
``cosine_distances``. Read: ``_fit_X``, ``_y``, ``classes_``, ``n_neighbors``,
``weights``, ``effective_metric_(params_)``, ``_fit_method``, and for k-neighbours
over a KD or ball tree the fitted tree's arrays (``_tree.get_arrays()``: its row
permutation, nodes and bounds), whose query the CPU route replays to keep the rows
scikit-learn keeps among ties at the k-th distance.
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import GraphBuilder, INPUT, ModelIR, ValueType
from ...ir.families.cluster import NearestCenters
from ...ir.columns import Concat
from ...ir.families.neighbors import CentroidDiscriminant, KNeighbors, RadiusNeighbors
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend

__all__ = []

_METRICS = ("euclidean", "manhattan", "chebyshev", "minkowski", "cosine")


def _refuse(model, what, value, choices):
    raise MissingConverter(unsupported_message(type(model).__name__, what, value, choices))


def _single_op_ir(model, op, head):
    builder = GraphBuilder(ValueType.floats(op.n_features))
    raw, transformed = builder.add(op, [INPUT], op.kind)
    return ModelIR(head=head, graph=builder.build(raw, transformed)).validate()


def _metric(model):
    metric = model.effective_metric_
    params = dict(model.effective_metric_params_ or {})
    if model.metric == "precomputed":
        _refuse(model, "metric", "precomputed", ", ".join(_METRICS))
    if callable(metric) or not isinstance(metric, str) or metric not in _METRICS:
        _refuse(model, "metric", metric, ", ".join(_METRICS))
    if params.get("w") is not None:
        _refuse(model, "metric_params w (weighted minkowski)", "w", "no weights")
    extra = sorted(set(params) - {"p", "w"})
    if extra:
        _refuse(model, "metric_params", extra, "p")
    p = float(params.get("p", 2.0)) if metric == "minkowski" else 2.0
    return metric, p


def _search_fields(model):
    """The training set and the distance arithmetic of the search scikit-learn fitted."""
    metric, p = _metric(model)
    if model.weights not in ("uniform", "distance"):
        _refuse(model, "weights", model.weights, "'uniform', 'distance'")
    fit_X = model._fit_X
    if hasattr(fit_X, "toarray"):
        _refuse(model, "a sparse training set", type(fit_X).__name__, "dense arrays")
    method = model._fit_method
    if method == "brute":
        if fit_X.dtype != np.float64:
            # scikit-learn then computes in float32 or float64 depending on the query's
            # own dtype (ArgKmin32 or the pairwise fallback): two arithmetics for one model
            _refuse(model, "a brute-force search over a training set of dtype", str(fit_X.dtype),
                    "float64 (or a KD/ball tree, which compute in float64)")
        formula = {"euclidean": "gemm", "cosine": "cosine"}.get(metric, "direct")
    else:
        formula = "direct"
    return dict(fit_X=np.ascontiguousarray(fit_X, dtype=np.float64), metric=metric, p=p,
                formula=formula, weights=model.weights)


def _tree_arrays(model):
    """The fitted KD or ball tree's arrays, which the CPU route's replay of its query
    reads (none for the brute-force search, or a tree over other data than ``_fit_X``)."""
    if model._fit_method not in ("kd_tree", "ball_tree"):
        return {}
    data, idx_array, node_data, node_bounds = model._tree.get_arrays()
    if not np.array_equal(np.asarray(data), model._fit_X):
        return {}
    return dict(
        tree_index=np.ascontiguousarray(idx_array, dtype=np.int64),
        tree_nodes=np.ascontiguousarray(np.column_stack(
            [node_data["idx_start"], node_data["idx_end"], node_data["is_leaf"]]), dtype=np.int64),
        tree_radius=np.ascontiguousarray(node_data["radius"], dtype=np.float64),
        tree_bounds=np.ascontiguousarray(node_bounds, dtype=np.float64))


@register_frontend("sklearn", "KNeighborsClassifier", "KNeighborsRegressor")
def _k_neighbors(model, options):
    check_fitted(model, "_fit_X")
    name = type(model).__name__
    fields = dict(_search_fields(model), n_neighbors=int(model.n_neighbors),
                  search=str(model._fit_method), **_tree_arrays(model))
    if name == "KNeighborsClassifier":
        if model.outputs_2d_:
            _refuse(model, "multi-output targets", "2-D y", "one target")
        classes = np.asarray(model.classes_)
        op = KNeighbors(y=np.asarray(model._y, dtype=np.int64), mode="classifier",
                        n_classes=len(classes), **fields).validate()
        c = len(classes)
        head = sklearn_head(model, "classification", ("predict", "predict_proba"),
                            classes=(classes,), allows_inf=False,
                            blocks=(("proba", 0, c), ("label_index", c, c + 1)))
    else:
        y = np.asarray(model._y)
        if y.dtype.kind not in "iub" and y.dtype != np.float64:
            _refuse(model, "targets of dtype", str(y.dtype), "float64 or integers")
        op = KNeighbors(y=np.ascontiguousarray(y.reshape(len(y), -1), dtype=np.float64),
                        mode="regressor", **fields).validate()
        head = sklearn_head(model, "regression", ("predict",), squeeze_output=y.ndim == 1,
                            allows_inf=False)
    return _single_op_ir(model, op, head)


@register_frontend("sklearn", "RadiusNeighborsClassifier", "RadiusNeighborsRegressor")
def _radius_neighbors(model, options):
    """A mask over the training set (reduced distance <= reduced radius); a row with
    no neighbour: the classifier's ``outlier_label_`` (None: NaN scores, refused as
    scikit-learn refuses it), the regressor's NaN."""
    check_fitted(model, "_fit_X")
    name = type(model).__name__
    radius = float(model.radius)
    if not np.isfinite(radius) or radius < 0:
        _refuse(model, "radius", model.radius, "a finite radius >= 0")
    fields = dict(_search_fields(model), radius=radius)
    if name == "RadiusNeighborsClassifier":
        if model.outputs_2d_:
            _refuse(model, "multi-output targets", "2-D y", "one target")
        classes = np.asarray(model.classes_)
        outlier = -1
        if model.outlier_label_ is not None:
            label = model.outlier_label_[0]
            found = np.flatnonzero(classes == label)
            if found.size != 1:
                # scikit-learn then gives all-zero probabilities and predicts a label
                # outside classes_
                _refuse(model, "an outlier_label outside classes_", label,
                        "None, 'most_frequent' or one of classes_")
            outlier = int(found[0])
        op = RadiusNeighbors(y=np.asarray(model._y, dtype=np.int64), mode="classifier",
                             n_classes=len(classes), outlier_index=outlier, **fields).validate()
        c = len(classes)
        head = sklearn_head(
            model, "classification", ("predict", "predict_proba"), classes=(classes,),
            allows_inf=False, blocks=(("proba", 0, c), ("label_index", c, c + 1)),
            nan_scores_error="no neighbors found within the radius for some test samples; "
                             "give a larger radius or an outlier_label" if outlier < 0 else "")
    else:
        y = np.asarray(model._y)
        if y.dtype.kind not in "iub" and y.dtype != np.float64:
            _refuse(model, "targets of dtype", str(y.dtype), "float64 or integers")
        op = RadiusNeighbors(y=np.ascontiguousarray(y.reshape(len(y), -1), dtype=np.float64),
                             mode="regressor", **fields).validate()
        head = sklearn_head(model, "regression", ("predict",), squeeze_output=y.ndim == 1,
                            allows_inf=False)
    return _single_op_ir(model, op, head)


@register_frontend("sklearn", "NearestCentroid")
def _nearest_centroid(model, options):
    """predict: the nearest centroid (uniform priors; a ``nearest_centers`` op) or the
    argmax of the discriminant scores (other priors); decision_function,
    predict_proba, predict_log_proba (euclidean): a ``centroid_discriminant`` op."""
    check_fitted(model, "centroids_")
    classes = np.asarray(model.classes_)
    c = len(classes)
    uniform = np.isclose(model.class_prior_, 1 / c).all()
    if model.metric not in ("euclidean", "manhattan"):
        _refuse(model, "metric", model.metric, "'euclidean', 'manhattan'")
    if model.metric == "manhattan":
        if not uniform:
            # scikit-learn then predicts from manhattan discriminant scores
            _refuse(model, "class priors with the manhattan metric", "non-uniform",
                    "uniform priors")
        op = NearestCenters(centers=np.ascontiguousarray(model.centroids_, dtype=np.float64),
                            rule="manhattan").validate()
        head = sklearn_head(model, "classification", ("predict",), classes=(classes,),
                            allows_inf=False, blocks=(("label_index", 0, 1),))
        return _single_op_ir(model, op, head)
    scores = CentroidDiscriminant(
        centroids=np.ascontiguousarray(model.centroids_, dtype=np.float64),
        std=np.ascontiguousarray(model.within_class_std_dev_, dtype=np.float64),
        prior=np.ascontiguousarray(model.class_prior_, dtype=np.float64)).validate()
    d = scores.n_decision
    width = d + 2 * c + 1
    builder = GraphBuilder(ValueType.floats(scores.n_features))
    raw, transformed = builder.add(scores, [INPUT], scores.kind)
    blocks = [("decision", 0, d), ("proba", d, d + c), ("log_proba", d + c, d + 2 * c)]
    if uniform:  # scikit-learn predicts the nearest centroid (pairwise_distances_argmin)
        nearest = NearestCenters(centers=np.ascontiguousarray(model.centroids_, dtype=np.float64),
                                 rule="argkmin").validate()
        _, label = builder.add(nearest, [INPUT], nearest.kind)
        (transformed,) = builder.add(Concat(widths=(width, 1)), [transformed, label], "concat")
        blocks.append(("label_index", width, width + 1))
    else:
        blocks.append(("label_index", width - 1, width))
    head = sklearn_head(model, "classification",
                        ("predict", "predict_proba", "predict_log_proba", "decision_function"),
                        classes=(classes,), allows_inf=False, blocks=tuple(blocks))
    return ModelIR(head=head, graph=builder.build(raw, transformed)).validate()
