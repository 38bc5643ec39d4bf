"""Decomposition and projection ops: ``projection`` and ``kernel_pca``.

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
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["Projection", "KernelPCAOp", "KERNELS", "pairwise_kernel"]


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
