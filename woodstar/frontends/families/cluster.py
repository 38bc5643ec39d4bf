"""scikit-learn's clustering and mixture models -> ``nearest_centers``,
``bisecting_kmeans`` and ``gaussian_mixture`` ops (woodstar/ir/families/cluster.py).

Clusters are classes: ``head.classes = (arange(n_clusters),)``, ``predict`` reads the
label-index block, ``transform`` (KMeans family) the distances, and the mixtures'
``predict_proba`` and ``score_samples`` their own blocks. Fitted parameters are read,
never recomputed: ``cluster_centers_``, BisectingKMeans's ``_bisecting_tree`` and
``_X_mean``, and the mixtures' ``means_``, ``precisions_cholesky_``, with their
per-component constants computed by scikit-learn's own functions.
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import GraphBuilder, INPUT, ModelIR, ValueType
from ...ir.families.cluster import BisectingCenters, GaussianMixtureScores, NearestCenters
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend

__all__ = []


def _single_op_ir(op, head):
    builder = GraphBuilder(ValueType.floats(op.n_features))
    raw, transformed = builder.add(op, [INPUT], op.kind)
    return ModelIR(head=head, graph=builder.build(raw, transformed)).validate()


def _centers(model):
    centers = np.asarray(model.cluster_centers_)
    if centers.dtype not in (np.float32, np.float64):
        raise MissingConverter(unsupported_message(
            type(model).__name__, "cluster_centers_ dtype", str(centers.dtype), "float32, float64"))
    return np.ascontiguousarray(centers)


def _cluster_head(model, k, methods, blocks):
    return sklearn_head(model, "classification", methods, classes=(np.arange(k),),
                        allows_inf=False, blocks=blocks)


@register_frontend("sklearn", "KMeans", "MiniBatchKMeans")
def _kmeans(model, options):
    check_fitted(model, "cluster_centers_")
    op = NearestCenters(centers=_centers(model), rule="lloyd", with_transform=True).validate()
    k = op.n_centers
    head = _cluster_head(model, k, ("predict", "transform"),
                         (("transform", 0, k), ("label_index", k, k + 1)))
    return _single_op_ir(op, head)


@register_frontend("sklearn", "MeanShift")
def _mean_shift(model, options):
    check_fitted(model, "cluster_centers_")
    centers = np.ascontiguousarray(_centers(model), dtype=np.float64)
    op = NearestCenters(centers=centers, rule="argkmin").validate()
    head = _cluster_head(model, op.n_centers, ("predict",), (("label_index", 0, 1),))
    return _single_op_ir(op, head)


@register_frontend("sklearn", "BisectingKMeans")
def _bisecting_kmeans(model, options):
    check_fitted(model, "cluster_centers_")
    centers = _centers(model)
    nodes, children, pairs, labels = [model._bisecting_tree], [], [], []
    i = 0
    while i < len(nodes):  # breadth first: children always after their parent
        node = nodes[i]
        if node.left is None:
            children.append((-1, -1))
            pairs.append(np.zeros((2, centers.shape[1]), dtype=centers.dtype))
            labels.append(int(node.label))
        else:
            pair = np.vstack((node.left.center, node.right.center))
            if hasattr(model, "_X_mean"):
                pair += model._X_mean
            children.append((len(nodes), len(nodes) + 1))
            nodes.extend([node.left, node.right])
            pairs.append(pair.astype(centers.dtype, copy=False))
            labels.append(-1)
        i += 1
    op = BisectingCenters(children=np.asarray(children, dtype=np.int64),
                          pair_centers=np.ascontiguousarray(np.stack(pairs)),
                          leaf_label=np.asarray(labels, dtype=np.int64),
                          centers=centers).validate()
    k = op.n_centers
    head = _cluster_head(model, k, ("predict", "transform"),
                         (("transform", 0, k), ("label_index", k, k + 1)))
    return _single_op_ir(op, head)


def _per_component(value, model, empty):
    """A constant added to every component's column, one value per component (a
    scalar when tied: adding it or its broadcast copy rounds the same)."""
    if value is empty:
        return empty
    return np.broadcast_to(np.asarray(value), (len(model.means_),)).copy()


@register_frontend("sklearn", "GaussianMixture", "BayesianGaussianMixture")
def _gaussian_mixture(model, options):
    check_fitted(model, "precisions_cholesky_")
    from scipy.special import digamma
    from sklearn.mixture._gaussian_mixture import _compute_log_det_cholesky

    n_features = model.means_.shape[1]
    log_det = np.asarray(_compute_log_det_cholesky(model.precisions_cholesky_,
                                                   model.covariance_type, n_features))
    log_weights = np.asarray(model._estimate_log_weights())
    empty = np.zeros(0, dtype=np.float64)
    sub, add = empty, empty
    if type(model).__name__ == "BayesianGaussianMixture":
        # BayesianGaussianMixture._estimate_log_prob's terms, as it writes them
        sub = 0.5 * n_features * np.log(model.degrees_of_freedom_)
        log_lambda = n_features * np.log(2.0) + np.sum(
            digamma(0.5 * (model.degrees_of_freedom_ - np.arange(0, n_features)[:, np.newaxis])),
            0)
        add = 0.5 * (log_lambda - n_features / model.mean_precision_)
    op = GaussianMixtureScores(
        means=np.ascontiguousarray(model.means_),
        precisions_chol=np.ascontiguousarray(model.precisions_cholesky_),
        covariance_type=model.covariance_type,
        log_det=np.broadcast_to(log_det, (len(model.means_),)).copy(),  # one value when tied
        log_weights=log_weights, log_gauss_sub=_per_component(sub, model, empty),
        log_gauss_add=_per_component(add, model, empty),
    ).validate()
    k = op.n_components
    head = _cluster_head(model, k, ("predict", "predict_proba", "score_samples"),
                         (("proba", 0, k), ("label_index", k, k + 1),
                          ("score_samples", k + 1, k + 2)))
    return _single_op_ir(op, head)
