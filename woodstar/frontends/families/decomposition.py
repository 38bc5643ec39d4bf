"""scikit-learn decomposition and projection estimators -> ``projection``,
``kernel_pca`` (and ``column_ops`` where the source centres in place).

Each is a pipeline step (registered in ``sklearn_compose.TRANSFORMERS``) and a bare
estimator. Fitted attributes are read as the source's ``transform`` reads them;
what ``transform`` recomputes on every call from fitted attributes alone (PCA's
``mean_ @ components_.T``, its whitening scale, KernelPCA's scaled eigenvectors) is
computed once here with the same expression. Private attributes read:
KernelPCA ``_centerer``, PLSRegression ``_x_mean``/``_x_std``/``_predict_1d``,
LinearDiscriminantAnalysis ``_max_components`` (the ones ``transform``/``predict`` use).

NMF and MiniBatchNMF -> ``nmf_transform``: their ``transform`` solves an
optimisation on each call, started from the whole call (NMF's ``mu`` solver and
MiniBatchNMF start at ``sqrt(X.mean() / n_components)``) and stopped by a tolerance
on the whole call, so a row's answer depends on the rows beside it. The op repeats
that solve on the call's rows, all at once (the container never splits such a call
into batches), on the CPU route and in the torch backend's eager program; traced and
exported programs refuse it (woodstar/lowering/families/decomposition.py says why). What ``transform`` derives from the parameters is derived
here with the source's expressions (``_compute_regularization``'s W penalties, the
loss's beta and the MM exponent gamma); MiniBatchNMF's are read from its fitted
private attributes ``_beta_loss``, ``_gamma``, ``_n_components`` and
``_transform_max_iter``. NMF's cd solver with ``shuffle=True`` draws one permutation
per iteration from ``check_random_state(random_state)``: an int seed is a fresh
``RandomState`` on every call (repeated here); a RandomState instance or None draws
from a state that moves from call to call, so it is refused.
"""

from numbers import Integral

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, ColumnOps, Concat, GraphBuilder, LinearModel, ModelIR, ValueType
from ...ir.families.decomposition import KERNELS, KernelPCAOp, NMFTransform, Projection
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend
from ..sklearn_compose import transformer
from ..sklearn_linear import _coef_arrays

__all__ = ["transform_ops", "DECOMPOSITIONS"]

DECOMPOSITIONS = ("PCA", "IncrementalPCA", "KernelPCA", "TruncatedSVD", "FastICA",
                  "GaussianRandomProjection", "SparseRandomProjection", "NMF", "MiniBatchNMF")


def _pca(model):
    check_fitted(model, "components_")
    components = np.asarray(model.components_)
    offset = np.reshape(model.mean_, (1, -1)) @ components.T  # _BasePCA._transform
    scale = None
    if model.whiten:
        scale = np.sqrt(model.explained_variance_)
        scale[scale < np.finfo(scale.dtype).eps] = np.finfo(scale.dtype).eps
    return [Projection(type(model).__name__, components, transpose=True, offset=offset[0],
                       scale=scale)]


def _truncated_svd(model):
    check_fitted(model, "components_")
    return [Projection("TruncatedSVD", np.asarray(model.components_), transpose=True)]


def _random_projection(model):
    check_fitted(model, "components_")
    components = model.components_
    if hasattr(components, "toarray"):  # SparseRandomProjection: CSR, in stored order
        csr = components.tocsr()
        return [Projection(type(model).__name__, csr.toarray(), transpose=True,
                           sparse_indices=np.asarray(csr.indices, np.int64),
                           sparse_indptr=np.asarray(csr.indptr, np.int64))]
    return [Projection(type(model).__name__, np.asarray(components), transpose=True)]


def _fast_ica(model):
    check_fitted(model, "components_")
    ops = []
    if model.whiten:  # X -= mean_, in place on the validated copy
        n = int(model.n_features_in_)
        ops.append(ColumnOps(name="FastICA", n_features=n, ops=("sub",),
                             operands=(np.asarray(model.mean_),), cast_operand=(False,)))
    ops.append(Projection("FastICA", np.asarray(model.components_), transpose=True))
    return ops


def _kernel_pca(model):
    name = "KernelPCA"
    check_fitted(model, "eigenvectors_")
    kernel = model.kernel
    if callable(kernel) or kernel not in KERNELS:
        raise MissingConverter(unsupported_message(
            name, "kernel", getattr(kernel, "__name__", kernel), ", ".join(KERNELS)))
    X_fit = model.X_fit_
    if hasattr(X_fit, "toarray"):
        raise MissingConverter(unsupported_message(
            name, "a model fitted on a sparse matrix", type(X_fit).__name__, "dense training data"))
    X_fit = np.asarray(X_fit)
    if kernel == "rbf" and X_fit.dtype != np.float64:
        # float32 rows and training rows take scikit-learn's chunked float64 upcast
        raise MissingConverter(unsupported_message(
            name, "the rbf kernel on training data of dtype", str(X_fit.dtype), "float64"))
    if X_fit.dtype not in (np.float32, np.float64):
        X_fit = X_fit.astype(np.float64)
    eigenvalues, eigenvectors = model.eigenvalues_, model.eigenvectors_
    non_zeros = np.flatnonzero(eigenvalues)  # KernelPCA.transform's scaled eigenvectors
    alphas = np.zeros_like(eigenvectors)
    alphas[:, non_zeros] = eigenvectors[:, non_zeros] / np.sqrt(eigenvalues[non_zeros])
    centerer = model._centerer
    return [KernelPCAOp(kernel=kernel, X_fit=X_fit, K_fit_rows=np.asarray(centerer.K_fit_rows_),
                        K_fit_all=np.asarray(centerer.K_fit_all_), alphas=alphas,
                        gamma=float(model.gamma_) if model.gamma_ is not None else 1.0,
                        degree=float(model.degree), coef0=float(model.coef0),
                        n_features=int(model.n_features_in_))]


def _lda_projection(model):
    name = "LinearDiscriminantAnalysis"
    check_fitted(model, "coef_")
    if model.solver == "lsqr":
        raise MissingConverter(unsupported_message(
            name, "transform with solver", "lsqr", "'svd', 'eigen' (scikit-learn's own "
            "transform raises NotImplementedError for 'lsqr')"))
    n_outputs = int(getattr(model, "_max_components", model.scalings_.shape[1]))
    n_outputs = min(n_outputs, model.scalings_.shape[1])
    mean = np.asarray(model.xbar_) if model.solver == "svd" else None
    return [Projection(name, np.asarray(model.scalings_), transpose=False, mean=mean,
                       n_outputs=n_outputs)]


def _pls_projection(model):
    check_fitted(model, "x_rotations_")
    n = int(model.n_features_in_)
    scale = ColumnOps(name="PLSRegression", n_features=n, ops=("sub", "div"),
                      operands=(np.asarray(model._x_mean), np.asarray(model._x_std)),
                      cast_operand=(False, False))
    return [scale, Projection("PLSRegression", np.asarray(model.x_rotations_), transpose=False)]


_BETA_LOSSES = {"frobenius": 2, "kullback-leibler": 1, "itakura-saito": 0}


def _mm_gamma(beta):
    """The exponent of the Maximization-Minimization update for ``beta``, as both
    estimators compute it."""
    if beta < 1:
        return 1.0 / (2.0 - beta)
    if beta > 2:
        return 1.0 / (beta - 1.0)
    return 1.0


def _w_penalties(model):
    """``_compute_regularization``'s W terms (l1, l2); n_features is the rows' width."""
    n_features = int(model.n_features_in_)
    alpha_W, l1_ratio = model.alpha_W, model.l1_ratio
    return n_features * alpha_W * l1_ratio, n_features * alpha_W * (1.0 - l1_ratio)


def _refuse_components_count(model, given, k):
    raise MissingConverter(unsupported_message(
        type(model).__name__, "n_components", given,
        f"{k}, the fitted components' count (transform raises on every call otherwise)"))


def _minibatch_nmf(model):
    check_fitted(model, "_transform_max_iter")
    H = np.asarray(model.components_)
    if int(model._n_components) != H.shape[0]:
        _refuse_components_count(model, model._n_components, H.shape[0])
    l1_reg, l2_reg = _w_penalties(model)
    return [NMFTransform(name="MiniBatchNMF", components=H, solver="minibatch",
                         beta_loss=model._beta_loss, gamma=model._gamma, tol=model.tol,
                         max_iter=model._transform_max_iter, l1_reg=l1_reg, l2_reg=l2_reg)]


def _shuffle_seed(model):
    """The int seed of the cd solver's shuffled coordinate order, or None."""
    if model.solver != "cd" or not model.shuffle:
        return None
    seed = model.random_state
    if isinstance(seed, bool) or not isinstance(seed, Integral):
        raise MissingConverter(unsupported_message(
            "NMF", "random_state with shuffle=True", type(seed).__name__,
            "an int: the cd solver draws its coordinate order from "
            "check_random_state(random_state) on every call, and only an int seed "
            "starts each call from the same state (None or a RandomState instance "
            "moves from call to call)"))
    return int(seed)


def _nmf(model):
    check_fitted(model, "components_")
    if type(model).__name__ == "MiniBatchNMF":
        return _minibatch_nmf(model)
    H = np.asarray(model.components_)
    k = H.shape[0]
    expected = {None: int(model.n_features_in_), "auto": k}.get(model.n_components,
                                                                model.n_components)
    if expected != k:
        _refuse_components_count(model, model.n_components, k)
    beta = _BETA_LOSSES.get(model.beta_loss, model.beta_loss)
    solver = model.solver
    if solver not in ("cd", "mu") or (solver == "cd" and beta != 2):
        raise MissingConverter(unsupported_message(
            "NMF", "solver and beta_loss", f"{solver!r} with {model.beta_loss!r}",
            "'cd' with 'frobenius', or 'mu' with any beta_loss (scikit-learn's transform "
            "raises for the others)"))
    l1_reg, l2_reg = _w_penalties(model)
    return [NMFTransform(name="NMF", components=H, solver=solver, beta_loss=beta,
                         gamma=_mm_gamma(beta), tol=model.tol, max_iter=model.max_iter,
                         l1_reg=l1_reg, l2_reg=l2_reg, seed=_shuffle_seed(model))]


_OPS = {"PCA": _pca, "IncrementalPCA": _pca, "TruncatedSVD": _truncated_svd,
        "GaussianRandomProjection": _random_projection,
        "SparseRandomProjection": _random_projection, "FastICA": _fast_ica,
        "KernelPCA": _kernel_pca, "LinearDiscriminantAnalysis": _lda_projection,
        "PLSRegression": _pls_projection, "NMF": _nmf, "MiniBatchNMF": _nmf}


def transform_ops(model):
    """The ops of ``model.transform``, in order (one value in, one out)."""
    return _OPS[type(model).__name__](model)


@transformer(*_OPS)
def _step(model, composer, value):
    name = type(model).__name__
    ops = transform_ops(model)
    composer.refuse_sparse(value, name)
    for op in ops:
        (value,) = composer.add(op, [value], name)
    return value


def chain_ops(builder, ops, value, name):
    for op in ops:
        (value,) = builder.add(op, [value], name)
    return value


@register_frontend("sklearn", *DECOMPOSITIONS)
def _bare(model, options):
    ops = transform_ops(model)
    builder = GraphBuilder(ValueType.floats(int(model.n_features_in_)))
    out = chain_ops(builder, ops, INPUT, type(model).__name__)
    head = sklearn_head(model, "transform", ("transform",), allows_inf=False)
    return ModelIR(head=head, graph=builder.build(out, out)).validate()


@register_frontend("sklearn", "PLSRegression")
def _pls_regression(model, options):
    name = "PLSRegression"
    check_fitted(model, "coef_")
    n = int(model.n_features_in_)
    builder = GraphBuilder(ValueType.floats(n))
    centre = ColumnOps(name=name, n_features=n, ops=("sub",),
                       operands=(np.asarray(model._x_mean),), cast_operand=(False,))
    (centred,) = builder.add(centre, [INPUT], f"{name}:centre")
    coef, intercept = _coef_arrays(model)
    raw, values = builder.add(LinearModel(coef=coef, intercept=intercept), [centred], "linear")
    scores = chain_ops(builder, _pls_projection(model), INPUT, f"{name}:transform")
    n_targets, n_components = coef.shape[0], builder.type_of(scores).width
    (transformed,) = builder.add(Concat((n_targets, n_components)), [values, scores], "outputs")
    head = sklearn_head(model, "regression", ("predict", "transform"), allows_inf=False,
                        squeeze_output=bool(getattr(model, "_predict_1d", n_targets == 1)),
                        blocks=(("value", 0, n_targets),
                                ("transform", n_targets, n_targets + n_components)))
    return ModelIR(head=head, graph=builder.build(raw, transformed)).validate()
