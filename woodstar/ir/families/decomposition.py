"""Decomposition and projection ops: ``projection``, ``kernel_pca`` and
``nmf_transform``.

``projection`` is every linear projection scikit-learn's decomposition and projection
estimators compute (PCA, IncrementalPCA, TruncatedSVD, FastICA, the random
projections, LinearDiscriminantAnalysis.transform, PLSRegression.transform), in the
order and dtypes of their own NumPy expressions:

1. ``X - mean`` (a new array, in ``result_type(X, mean)``) when ``mean`` is given
   (LinearDiscriminantAnalysis' svd solver; in-place centring, as FastICA and PLS
   do it, is a ``column_ops`` step before this op);
2. ``@ matrix.T`` (``transpose``) or ``@ matrix``, in ``result_type`` of both;
3. ``-= offset`` in place (PCA subtracts ``mean_ @ components_.T`` after the product);
4. ``/= scale`` in place (PCA's whitening);
5. the first ``n_outputs`` columns (LinearDiscriminantAnalysis keeps at most
   ``_max_components`` of its product).

``kernel_pca`` is KernelPCA.transform: the kernel between the rows and the training
rows ``X_fit`` as ``sklearn.metrics.pairwise`` computes it, centred as
``KernelCenterer.transform`` centres it, times the scaled eigenvectors.

``nmf_transform`` is NMF.transform and MiniBatchNMF.transform: the optimisation each
call solves over all its rows (see the NMF section below).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["Projection", "KernelPCAOp", "KERNELS", "pairwise_kernel", "NMFTransform", "NMF_SOLVERS",
           "nmf_beta_divergence"]


def _array(value):
    return None if value is None else np.array(value, order="K", copy=True)


@register_op
@dataclass(frozen=True, eq=False)
class Projection(Op):
    """See the module's docstring. ``sparse_indices``/``sparse_indptr``: the source
    holds ``matrix`` as a CSR matrix with its nonzeros in this order (a sparse
    product sums them in stored order; the CPU route repeats it)."""

    kind = "projection"
    name: str
    matrix: np.ndarray
    transpose: bool = True
    mean: Optional[np.ndarray] = None
    offset: Optional[np.ndarray] = None
    scale: Optional[np.ndarray] = None
    n_outputs: int = -1
    sparse_indices: Optional[np.ndarray] = None
    sparse_indptr: Optional[np.ndarray] = None

    def __post_init__(self):
        for field in ("matrix", "mean", "offset", "scale", "sparse_indices", "sparse_indptr"):
            object.__setattr__(self, field, _array(getattr(self, field)))
        if self.n_outputs < 0:
            object.__setattr__(self, "n_outputs", self.n_products)

    @property
    def n_features(self) -> int:
        return int(self.matrix.shape[1] if self.transpose else self.matrix.shape[0])

    @property
    def n_products(self) -> int:
        return int(self.matrix.shape[0] if self.transpose else self.matrix.shape[1])

    @property
    def operator(self) -> np.ndarray:
        """The right operand of the product, as the source writes it."""
        return self.matrix.T if self.transpose else self.matrix

    def validate(self):
        self.expect(self.matrix.ndim == 2 and self.matrix.dtype in (np.float32, np.float64),
                    f"{self.name}: matrix of shape {self.matrix.shape} and dtype "
                    f"{self.matrix.dtype}; expected a 2-D float32 or float64 array")
        self.expect(bool(np.isfinite(self.matrix).all()), f"{self.name}: matrix holds non-finite values")
        for field, width in (("mean", self.n_features), ("offset", self.n_products),
                             ("scale", self.n_products)):
            value = getattr(self, field)
            if value is not None:
                self.expect(value.size == width and value.dtype in (np.float32, np.float64),
                            f"{self.name}: {field} has {value.size} values of dtype "
                            f"{value.dtype}; expected {width} floats")
        self.expect(1 <= self.n_outputs <= self.n_products,
                    f"{self.name}: n_outputs {self.n_outputs} outside 1..{self.n_products}")
        if self.sparse_indptr is not None:
            self.expect(self.transpose and len(self.sparse_indptr) == self.n_products + 1
                        and int(self.sparse_indptr[-1]) == len(self.sparse_indices),
                        f"{self.name}: the sparse layout does not match the matrix")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_outputs)]

    def dtypes(self, input_dtype):
        """(centred dtype, product dtype)."""
        centred = np.dtype(input_dtype)
        if self.mean is not None:
            centred = np.result_type(centred, self.mean.dtype)
        return centred, np.result_type(centred, self.matrix.dtype)

    def output_dtypes(self, input_dtypes):
        return [self.dtypes(input_dtypes[0])[1]]

    def finish(self, product):
        """Steps 3 to 5 on the product (written in place, as the source does)."""
        if self.offset is not None:
            product -= self.offset.reshape(1, -1)
        if self.scale is not None:
            product /= self.scale
        if self.n_outputs < self.n_products:
            product = product[:, :self.n_outputs]
        return product

    def reference(self, inputs):
        X = inputs[0]
        if self.mean is not None:
            X = X - self.mean
        return [self.finish(X @ self.operator)]

    def to_saved(self):
        arrays = {"matrix": self.matrix}
        for field in ("mean", "offset", "scale", "sparse_indices", "sparse_indptr"):
            if getattr(self, field) is not None:
                arrays[field] = getattr(self, field)
        return ({"name": self.name, "transpose": self.transpose, "n_outputs": self.n_outputs},
                arrays)

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(name=str(meta["name"]), matrix=arrays["matrix"],
                   transpose=bool(meta["transpose"]), mean=arrays.get("mean"),
                   offset=arrays.get("offset"), scale=arrays.get("scale"),
                   n_outputs=int(meta["n_outputs"]), sparse_indices=arrays.get("sparse_indices"),
                   sparse_indptr=arrays.get("sparse_indptr"))


# ---------------------------------------------------------------------- kernels
KERNELS = ("linear", "poly", "rbf", "sigmoid", "cosine", "precomputed")


def _row_norms(X, squared):
    norms = np.einsum("ij,ij->i", X, X)  # sklearn.utils.extmath.row_norms
    return norms if squared else np.sqrt(norms)


def _normalize(X):
    """sklearn.preprocessing.normalize(X, copy=True) for dense rows, norm "l2"."""
    X = np.array(X, copy=True)
    norms = _row_norms(X, squared=False)
    norms[norms < 10 * np.finfo(norms.dtype).eps] = 1.0  # _handle_zeros_in_scale
    X /= norms[:, None]
    return X


def pairwise_kernel(kernel, X, Y, gamma, degree, coef0):
    """``pairwise_kernels(X, Y, metric=kernel, gamma, degree, coef0)`` for dense
    float64 rows (or float32 rows and a float32 ``Y``, except "rbf"), written as
    scikit-learn writes each kernel."""
    dtype = np.float32 if X.dtype == Y.dtype == np.float32 else np.float64
    X, Y = X.astype(dtype, copy=False), Y.astype(dtype, copy=False)
    if kernel == "precomputed":
        return X
    if kernel == "cosine":
        return _normalize(X) @ _normalize(Y).T
    if kernel == "rbf":
        XX = _row_norms(X, squared=True)[:, None]
        YY = _row_norms(Y, squared=True)[None, :]
        K = -2 * (X @ Y.T)
        K += XX
        K += YY
        np.maximum(K, 0, out=K)
        K *= -gamma
        np.exp(K, K)
        return K
    K = X @ Y.T
    if kernel == "linear":
        return K
    K *= gamma
    K += coef0
    if kernel == "poly":
        K **= degree
    else:  # sigmoid
        np.tanh(K, K)
    return K


@register_op
@dataclass(frozen=True, eq=False)
class KernelPCAOp(Op):
    """KernelPCA.transform. ``X_fit`` (n_fit, n_features): the training rows (for
    "precomputed", the training kernel, and the input is the kernel itself);
    ``K_fit_rows`` (n_fit,) and ``K_fit_all``: the fitted centerer's; ``alphas``
    (n_fit, n_components): the eigenvectors scaled as ``transform`` scales them."""

    kind = "kernel_pca"
    kernel: str
    X_fit: np.ndarray
    K_fit_rows: np.ndarray
    K_fit_all: np.ndarray  # 0-d, in the centerer's dtype (a NumPy scalar there)
    alphas: np.ndarray
    gamma: float = 1.0
    degree: float = 3.0
    coef0: float = 1.0
    n_features: int = 0

    def __post_init__(self):
        for field in ("X_fit", "K_fit_rows", "alphas", "K_fit_all"):
            object.__setattr__(self, field, _array(getattr(self, field)))
        if not self.n_features:
            width = self.X_fit.shape[0] if self.kernel == "precomputed" else self.X_fit.shape[1]
            object.__setattr__(self, "n_features", int(width))

    @property
    def n_components(self) -> int:
        return int(self.alphas.shape[1])

    def validate(self):
        self.expect(self.kernel in KERNELS, f"kernel {self.kernel!r} not in {KERNELS}")
        n_fit = self.X_fit.shape[0]
        self.expect(self.K_fit_rows.shape == (n_fit,) and self.alphas.ndim == 2
                    and self.alphas.shape[0] == n_fit,
                    f"{n_fit} training rows but K_fit_rows {self.K_fit_rows.shape} and "
                    f"alphas {self.alphas.shape}")
        self.expect(self.kernel != "rbf" or self.X_fit.dtype == np.float64,
                    "the rbf kernel is computed in float64 here (X_fit must be float64)")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_components)]

    def kernel_dtype(self, input_dtype):
        return np.dtype(np.float32 if np.dtype(input_dtype) == self.X_fit.dtype == np.float32
                        else np.float64)

    def output_dtypes(self, input_dtypes):  # the centring is in place: K keeps its dtype
        return [np.result_type(self.kernel_dtype(input_dtypes[0]), self.alphas.dtype)]

    def reference(self, inputs):
        K = pairwise_kernel(self.kernel, inputs[0], self.X_fit, self.gamma, self.degree,
                            self.coef0)
        K = np.array(K, copy=True)  # KernelCenterer.transform(K, copy=True)
        K_pred_cols = (np.sum(K, axis=1) / self.K_fit_rows.shape[0])[:, None]
        K -= self.K_fit_rows
        K -= K_pred_cols
        K += self.K_fit_all[()]
        return [np.dot(K, self.alphas)]

    def to_saved(self):
        return ({"kernel": self.kernel,
                 "gamma": float(self.gamma), "degree": float(self.degree),
                 "coef0": float(self.coef0), "n_features": self.n_features},
                {"X_fit": self.X_fit, "K_fit_rows": self.K_fit_rows, "alphas": self.alphas,
                 "K_fit_all": self.K_fit_all})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(kernel=str(meta["kernel"]), X_fit=arrays["X_fit"],
                   K_fit_rows=arrays["K_fit_rows"], K_fit_all=arrays["K_fit_all"],
                   alphas=arrays["alphas"], gamma=float(meta["gamma"]),
                   degree=float(meta["degree"]), coef0=float(meta["coef0"]),
                   n_features=int(meta["n_features"]))


# ---------------------------------------------------------------------- NMF
# ``nmf_transform`` is NMF.transform and MiniBatchNMF.transform: an optimisation over
# the whole call (scikit-learn's ``_fit_transform(X, H=components_, update_H=False)``
# and ``MiniBatchNMF._solve_W``), repeated with the same NumPy calls on arrays of the
# same dtypes and layouts, so each BLAS product and reduction is the one scikit-learn
# computes. The starting point and the stopping test read every row of the call, so a
# row's answer depends on the rows beside it: the op sees the call whole
# (``whole_call``; the container does not split such a call into batches).

NMF_SOLVERS = ("cd", "mu", "minibatch")  # NMF's two solvers; MiniBatchNMF's _solve_W
NMF_EPSILON = np.finfo(np.float32).eps  # scikit-learn's EPSILON in decomposition/_nmf.py


def nmf_beta_divergence(X, W, H, beta):
    """``_beta_divergence(X, W, H, beta, square_root=True)`` for dense rows, with the
    source's expressions (the mu solver's stopping test reads it)."""
    if beta == 2:
        residual = np.ravel(X - np.dot(W, H), order="K")
        res = np.dot(residual, residual) / 2.0
        return np.sqrt(res * 2)
    WH = np.dot(W, H)
    WH_data, X_data = WH.ravel(), X.ravel()
    kept = X_data > NMF_EPSILON  # zeros of X are left out: 0 ** -1 is taken as 0
    WH_data, X_data = WH_data[kept], X_data[kept]
    WH_data[WH_data < NMF_EPSILON] = NMF_EPSILON
    if beta == 1:
        sum_WH = np.dot(np.sum(W, axis=0), np.sum(H, axis=1))
        res = np.dot(X_data, np.log(X_data / WH_data))
        res += sum_WH - X_data.sum()
    elif beta == 0:
        div = X_data / WH_data
        res = np.sum(div) - np.prod(X.shape) - np.sum(np.log(div))
    else:
        sum_WH_beta = np.sum(WH ** beta)
        sum_X_WH = np.dot(X_data, WH_data ** (beta - 1))
        res = (X_data ** beta).sum() - beta * sum_X_WH
        res += sum_WH_beta * (beta - 1)
        res /= beta * (beta - 1)
    res = max(res, 0)  # the builtin, as the source takes it (0 stays a Python int)
    return np.sqrt(2 * res)


def _mu_update_w(X, W, H, beta, l1_reg, l2_reg, gamma, kept=None):
    """One multiplicative update of W, in place (``_multiplicative_update_w``).
    ``kept``: NMF's transform keeps H's products from one iteration to the next in
    this dict (and writes the l1 term into its kept ``H_sum`` each time, as the source
    does); MiniBatchNMF passes None and every product is computed again."""
    keep = kept is not None
    if beta == 2:
        XHt = kept.get("XHt") if keep else None
        if XHt is None:
            XHt = X @ H.T
        HHt = kept.get("HHt") if keep else None
        if HHt is None:
            HHt = np.dot(H, H.T)
        if keep:
            kept["XHt"], kept["HHt"] = XHt, HHt
        numerator = XHt.copy() if keep else XHt
        denominator = np.dot(W, HHt)
    else:
        WH_safe_X = np.dot(W, H)
        WH = WH_safe_X.copy()
        if beta - 1.0 < 0:
            WH[WH < NMF_EPSILON] = NMF_EPSILON
        if beta - 2.0 < 0:
            WH_safe_X[WH_safe_X < NMF_EPSILON] = NMF_EPSILON
        if beta == 1:
            np.divide(X, WH_safe_X, out=WH_safe_X)
        elif beta == 0:
            WH_safe_X **= -1
            WH_safe_X **= 2
            WH_safe_X *= X
        else:
            WH_safe_X **= beta - 2
            WH_safe_X *= X
        numerator = WH_safe_X @ H.T
        if beta == 1:
            H_sum = kept.get("H_sum") if keep else None
            if H_sum is None:
                H_sum = np.sum(H, axis=1)
            if keep:
                kept["H_sum"] = H_sum
            denominator = H_sum[np.newaxis, :]  # a view: the steps below write H_sum
        else:
            WH **= beta - 1
            denominator = np.dot(WH, H.T)
    if l1_reg > 0:
        denominator += l1_reg
    if l2_reg > 0:
        denominator = denominator + l2_reg * W
    denominator[denominator == 0] = NMF_EPSILON
    numerator /= denominator
    if gamma != 1:
        numerator **= gamma
    W *= numerator
    return W


def _cd_sweep(W, HHt, XHt, permutation):
    """``_update_cdnmf_fast``: one pass of coordinate descent over W's columns in
    ``permutation`` order, in place; returns the summed projected gradient. The
    source's loop updates W[i, t] row after row; rows do not read each other, so each
    column is updated for all rows at once. The gradient adds ``HHt[t, r] * W[i, r]``
    for r in order and the violation adds |pg| row after row, column after column: both
    are running sums here (``add.accumulate``), never NumPy's pairwise ``sum``."""
    n_samples, n_components = W.shape
    zero = W.dtype.type(0)
    terms = np.empty((n_samples, n_components + 1), W.dtype)
    abs_pg = np.empty((n_components, n_samples), W.dtype)
    # Negated once, contiguous to contiguous: NumPy 2.4's float32 ``negative`` from a
    # strided column into a strided column reads the wrong elements.
    minus_XHt = -XHt
    for s, t in enumerate(permutation):
        terms[:, 0] = minus_XHt[:, t]
        np.multiply(W, HHt[t], out=terms[:, 1:])
        grad = np.add.accumulate(terms, axis=1)[:, -1]
        w = W[:, t]
        # pg = min(0., grad) where W[i, t] == 0 (the source's min keeps 0. for NaN)
        pg = np.where(w == 0, np.where(grad < 0, grad, zero), grad)
        np.abs(pg, out=abs_pg[s])
        hess = HHt[t, t]
        if hess != 0:
            updated = w - grad / hess
            W[:, t] = np.where(zero > updated, zero, updated)  # the source's max(x, 0.)
    return float(np.add.accumulate(abs_pg.ravel())[-1]) if abs_pg.size else 0.0


def _solve_cd(X, H, n_components, tol, max_iter, l1_reg, l2_reg, seed, sweep=_cd_sweep):
    """``_fit_coordinate_descent`` with ``update_H=False`` from W = 0. scikit-learn
    computes HHt and XHt again on each iteration; the same products of the same
    arrays, so they are computed once here. ``sweep``: ``_cd_sweep`` or another
    implementation with its bits (the CPU route's compiled one)."""
    W = np.zeros((X.shape[0], n_components), dtype=X.dtype)
    Ht = np.ascontiguousarray(H.T)
    rng = np.random.RandomState(seed) if seed is not None else None
    HHt = np.dot(Ht.T, Ht)
    XHt = X @ Ht
    if l2_reg != 0.0:
        HHt.flat[:: n_components + 1] += l2_reg
    if l1_reg != 0.0:
        XHt -= l1_reg
    in_order = np.arange(n_components)
    violation_init = None
    for n_iter in range(1, max_iter + 1):
        permutation = rng.permutation(n_components) if rng is not None else in_order
        violation = 0.0
        violation += sweep(W, HHt, XHt, permutation)
        if n_iter == 1:
            violation_init = violation
        if violation_init == 0:
            break
        if violation / violation_init <= tol:
            break
    return W


def _solve_mu(X, H, n_components, beta, gamma, tol, max_iter, l1_reg, l2_reg):
    """``_fit_multiplicative_update`` with ``update_H=False`` from W filled with
    ``sqrt(X.mean() / n_components)``; the error is tested every 10 iterations."""
    avg = np.sqrt(X.mean() / n_components)
    W = np.full((X.shape[0], n_components), avg, dtype=X.dtype)
    error_at_init = nmf_beta_divergence(X, W, H, beta)
    previous_error = error_at_init
    kept = {}
    for n_iter in range(1, max_iter + 1):
        W = _mu_update_w(X, W, H, beta, l1_reg, l2_reg, gamma, kept)
        if beta < 1:
            W[W < np.finfo(np.float64).eps] = 0.0
        if tol > 0 and n_iter % 10 == 0:
            error = nmf_beta_divergence(X, W, H, beta)
            if (previous_error - error) / error_at_init < tol:
                break
            previous_error = error
    return W


def _frobenius_norm(A, name):
    """``scipy.linalg.norm(A)`` of a 2-D array: it refuses NaN and infinity, then is
    NumPy's norm."""
    if not np.isfinite(A).all():
        raise ValueError(f"{name}.transform diverged on this input (its iterate holds NaN "
                         f"or infinity); scikit-learn raises 'array must not contain infs "
                         f"or NaNs' here.")
    return np.linalg.norm(A)


def _solve_minibatch(X, H, n_components, beta, gamma, tol, max_iter, l1_reg, l2_reg, name):
    """``MiniBatchNMF._solve_W``: multiplicative updates from
    ``sqrt(X.mean() / n_components)`` until W moves less than ``tol`` (relatively)."""
    avg = np.sqrt(X.mean() / n_components)
    W = np.full((X.shape[0], n_components), avg, dtype=X.dtype)
    W_buffer = W.copy()
    for _ in range(max_iter):
        W = _mu_update_w(X, W, H, beta, l1_reg, l2_reg, gamma)
        W_diff = _frobenius_norm(W - W_buffer, name) / _frobenius_norm(W, name)
        if tol > 0 and W_diff <= tol:
            break
        W_buffer[:] = W
    return W


def _number(value):
    """An int stays an int (the source's exponents and tests read it as given)."""
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


@register_op
@dataclass(frozen=True, eq=False)
class NMFTransform(Op):
    """NMF.transform (``solver`` "cd" or "mu") and MiniBatchNMF.transform ("minibatch")
    over the whole call; see the section comment above. ``components``: the fitted H,
    in its own memory layout (a cd fit leaves it Fortran-ordered, and the products
    read it as it is); ``beta_loss`` the float (or int) the source maps its loss to;
    ``l1_reg``/``l2_reg`` the scaled W penalties (``_compute_regularization``);
    ``seed``: the int random_state of NMF's cd solver with ``shuffle=True`` (a fresh
    ``RandomState(seed)`` per call, one permutation per iteration), else None."""

    kind = "nmf_transform"
    whole_call = True  # the answer of a row depends on the whole call: never split it
    name: str
    components: np.ndarray
    solver: str
    beta_loss: float = 2
    gamma: float = 1.0
    tol: float = 1e-4
    max_iter: int = 200
    l1_reg: float = 0.0
    l2_reg: float = 0.0
    seed: Optional[int] = None

    def __post_init__(self):
        object.__setattr__(self, "components", _array(self.components))
        for field in ("beta_loss", "gamma", "tol", "l1_reg", "l2_reg"):
            object.__setattr__(self, field, _number(getattr(self, field)))
        object.__setattr__(self, "max_iter", int(self.max_iter))
        if self.seed is not None:
            object.__setattr__(self, "seed", int(self.seed))

    @property
    def n_components(self) -> int:
        return int(self.components.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.components.shape[1])

    def validate(self):
        H = self.components
        self.expect(H.ndim == 2 and H.dtype in (np.float32, np.float64),
                    f"{self.name}: components of shape {H.shape} and dtype {H.dtype}; "
                    f"expected a 2-D float32 or float64 array")
        self.expect(bool(np.isfinite(H).all()), f"{self.name}: components hold non-finite values")
        self.expect(self.solver in NMF_SOLVERS,
                    f"{self.name}: solver {self.solver!r} not in {NMF_SOLVERS}")
        self.expect(self.solver == "mu" or self.solver == "minibatch" or self.beta_loss == 2,
                    f"{self.name}: the cd solver minimises the Frobenius loss only")
        self.expect(self.max_iter >= 1, f"{self.name}: max_iter {self.max_iter} < 1")
        self.expect(self.seed is None or self.solver == "cd",
                    f"{self.name}: a shuffle seed belongs to the cd solver")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_components)]

    def check_input(self, X):
        """What the source's ``transform`` checks before it solves, with its meaning."""
        name = self.name
        if X.shape[0] == 0:
            raise ValueError(f"{name}.transform needs at least one row; got 0 (scikit-learn: "
                             f"'Found array with 0 sample(s)').")
        if not np.isfinite(X).all():
            what = "NaN" if np.isnan(X).any() else "infinity"
            raise ValueError(f"Input contains {what}; {name}.transform does not accept it.")
        if self.solver == "minibatch":  # MiniBatchNMF.transform checks nothing more
            return
        if X.min() < 0:
            raise ValueError(f"{name}.transform takes non-negative values only; the input "
                             f"holds negative values (scikit-learn: 'Negative values in "
                             f"data passed to X in {name}.').")
        if X.min() == 0 and self.beta_loss <= 0:
            raise ValueError(f"{name}: with beta_loss <= 0 the input may not hold zeros "
                             f"(the solver may diverge); scikit-learn refuses such input.")
        if X.dtype != self.components.dtype:
            raise TypeError(f"{name}.transform takes input of the dtype it was fitted in "
                            f"({self.components.dtype}); got {X.dtype} (scikit-learn: "
                            f"'H should have the same dtype as X').")

    def reference(self, inputs):
        return [self.solve(inputs[0])]

    def solve(self, X, cd_sweep=_cd_sweep):
        """W for the rows ``X`` (the whole call). ``cd_sweep``: the cd solver's sweep,
        ``_cd_sweep`` or another implementation with its bits."""
        self.check_input(X)
        H, k = self.components, self.n_components
        if self.solver == "cd":
            W = _solve_cd(X, H, k, self.tol, self.max_iter, self.l1_reg, self.l2_reg, self.seed,
                          cd_sweep)
        elif self.solver == "mu":
            W = _solve_mu(X, H, k, self.beta_loss, self.gamma, self.tol, self.max_iter,
                          self.l1_reg, self.l2_reg)
        else:
            W = _solve_minibatch(X, H, k, self.beta_loss, self.gamma, self.tol,
                                 self.max_iter, self.l1_reg, self.l2_reg, self.name)
        return W

    def to_saved(self):
        meta = {"name": self.name, "solver": self.solver, "beta_loss": self.beta_loss,
                "gamma": self.gamma, "tol": self.tol, "max_iter": self.max_iter,
                "l1_reg": self.l1_reg, "l2_reg": self.l2_reg, "seed": self.seed}
        return meta, {"components": self.components}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(name=str(meta["name"]), components=arrays["components"],
                   solver=str(meta["solver"]), beta_loss=meta["beta_loss"],
                   gamma=meta["gamma"], tol=meta["tol"], max_iter=int(meta["max_iter"]),
                   l1_reg=meta["l1_reg"], l2_reg=meta["l2_reg"], seed=meta["seed"])
