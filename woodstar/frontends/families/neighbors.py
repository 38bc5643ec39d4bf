"""scikit-learn's k-nearest-neighbour estimators and NearestCentroid -> ``k_neighbors``
and ``nearest_centers`` ops (woodstar/ir/families/neighbors.py, cluster.py).

The search scikit-learn fitted (``_fit_method``) decides the distance arithmetic: the
KD and ball trees (the default for small data) and the brute-force search with a
non-euclidean metric sum the reduced distance feature after feature; the brute-force
euclidean search uses ``|x|^2 - 2 x.t + |t|^2``; cosine goes through
``cosine_distances``. Read: ``_fit_X``, ``_y``, ``classes_``, ``n_neighbors``,
``weights``, ``effective_metric_(params_)``, ``_fit_method``.
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import GraphBuilder, INPUT, ModelIR, ValueType
from ...ir.families.cluster import NearestCenters
from ...ir.families.neighbors import KNeighbors
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


@register_frontend("sklearn", "KNeighborsClassifier", "KNeighborsRegressor")
def _k_neighbors(model, options):
    check_fitted(model, "_fit_X")
    name = type(model).__name__
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
    fields = dict(fit_X=np.ascontiguousarray(fit_X, dtype=np.float64),
                  n_neighbors=int(model.n_neighbors), metric=metric, p=p, formula=formula,
                  weights=model.weights)
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


@register_frontend("sklearn", "NearestCentroid")
def _nearest_centroid(model, options):
    check_fitted(model, "centroids_")
    classes = np.asarray(model.classes_)
    if not np.isclose(model.class_prior_, 1 / len(classes)).all():
        # scikit-learn then predicts from its discriminant scores, not the nearest centroid
        _refuse(model, "class priors", "non-uniform", "uniform priors")
    if model.metric not in ("euclidean", "manhattan"):
        _refuse(model, "metric", model.metric, "'euclidean', 'manhattan'")
    rule = "argkmin" if model.metric == "euclidean" else "manhattan"
    op = NearestCenters(centers=np.ascontiguousarray(model.centroids_, dtype=np.float64),
                        rule=rule).validate()
    head = sklearn_head(model, "classification", ("predict",), classes=(classes,),
                        allows_inf=False, blocks=(("label_index", 0, 1),))
    return _single_op_ir(model, op, head)
