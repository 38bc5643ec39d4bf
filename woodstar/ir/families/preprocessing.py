"""Preprocessing transformers as ops, each a NumPy copy of scikit-learn's own transform.

* ``normalize``: rows divided by their l1, l2 or max norm (``sklearn.preprocessing.normalize``);
* ``binarize``: 1 where ``x > threshold`` else 0 (``Binarizer``);
* ``kbins``: bin indices from the fitted inner bin edges (``np.searchsorted(..., "right")``),
  optionally one-hot (``KBinsDiscretizer``);
* ``polynomial``: products of columns, each output column the product of an earlier
  output column and one input column, in scikit-learn's order (``PolynomialFeatures``);
* ``power_transform``: Yeo-Johnson or Box-Cox with the fitted lambdas
  (``PowerTransformer``; its standardisation is a ``column_ops`` node after it);
* ``quantile_transform``: ``np.interp`` forwards and backwards, averaged, then the normal
  quantile function where asked (``QuantileTransformer``);
* ``ufunc``: a one-argument NumPy ufunc (``FunctionTransformer(func=np.log1p)``).

Each ``reference`` repeats scikit-learn's NumPy expressions in its order and dtypes, so
the CPU route gives its answer to the bit. Box-Cox and the normal quantile function are
SciPy's (imported when they run), as in scikit-learn.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["Normalize", "Binarize", "KBinsDiscretize", "PolynomialExpand", "PowerTransform",
           "QuantileTransform", "Ufunc", "UFUNCS", "BOUNDS_THRESHOLD"]

BOUNDS_THRESHOLD = 1e-7  # sklearn.preprocessing._data.BOUNDS_THRESHOLD
# The ufuncs a FunctionTransformer may hold (one input, one output, a Torch twin).
UFUNCS = ("log1p", "expm1", "exp", "exp2", "log", "log2", "log10", "sqrt", "cbrt", "square",
          "absolute", "negative", "reciprocal", "sin", "cos", "tan", "arcsin", "arccos",
          "arctan", "sinh", "cosh", "tanh", "arcsinh", "arctanh", "floor", "ceil", "rint",
          "trunc", "sign", "deg2rad", "rad2deg", "fabs")


def _float_dtype(dtype):
    dtype = np.dtype(dtype)
    return dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)


class _Elementwise(Op):
    """n_features numeric columns in, the same number out, in the input's float dtype."""

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_features)]

    def output_dtypes(self, input_dtypes):
        return [_float_dtype(input_dtypes[0])]


def _working_copy(X):
    return np.array(X, dtype=_float_dtype(X.dtype), copy=True)


@register_op
@dataclass(frozen=True, eq=False)
class Normalize(_Elementwise):
    kind = "normalize"
    n_features: int
    norm: str  # "l1", "l2" or "max"

    def validate(self):
        self.expect(self.norm in ("l1", "l2", "max"), f"norm {self.norm!r}")
        return self

    def reference(self, inputs):
        X = _working_copy(inputs[0])
        if self.norm == "l1":
            norms = np.sum(np.abs(X), axis=1)
        elif self.norm == "l2":
            norms = np.sqrt(np.einsum("ij,ij->i", X, X))
        else:
            norms = np.max(np.abs(X), axis=1)
        norms[norms < 10 * np.finfo(norms.dtype).eps] = 1.0  # _handle_zeros_in_scale
        X /= norms[:, None]
        return [X]

    def to_saved(self):
        return {"n_features": self.n_features, "norm": self.norm}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), norm=str(meta["norm"]))


@register_op
@dataclass(frozen=True, eq=False)
class Binarize(_Elementwise):
    """``weak``: the threshold is a Python number, so NumPy compares in the input's
    dtype (a float32 input against the float32 rounding of the threshold)."""

    kind = "binarize"
    n_features: int
    threshold: float
    weak: bool = True

    def compare_threshold(self, dtype):
        return np.dtype(dtype).type(self.threshold) if self.weak else np.float64(self.threshold)

    def reference(self, inputs):
        X = _working_copy(inputs[0])
        cond = X > (float(self.threshold) if self.weak else np.float64(self.threshold))
        X[cond] = 1
        X[np.logical_not(cond)] = 0
        return [X]

    def to_saved(self):
        return {"n_features": self.n_features, "threshold": float(self.threshold),
                "weak": self.weak}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), threshold=float(meta["threshold"]),
                   weak=bool(meta["weak"]))


@register_op
@dataclass(frozen=True, eq=False)
class KBinsDiscretize(Op):
    """``edges[j]``: column ``j``'s inner bin edges (``bin_edges_[j][1:-1]``); a value's
    bin is ``searchsorted(edges[j], x, side="right")``. ``onehot``: the bins one-hot
    (column ``j``'s block has ``len(edges[j]) + 1`` columns); ``sparse``: the source
    returns a sparse matrix (same numbers). ``dtype``: the working dtype, or "" for the
    input's float dtype."""

    kind = "kbins"
    n_features: int
    edges: Tuple[np.ndarray, ...]
    onehot: bool = False
    sparse: bool = False
    dtype: str = ""

    def __post_init__(self):
        object.__setattr__(self, "edges", tuple(np.ascontiguousarray(e, dtype=np.float64)
                                                for e in self.edges))

    @property
    def n_bins(self):
        return [len(e) + 1 for e in self.edges]

    @property
    def n_outputs(self):
        return sum(self.n_bins) if self.onehot else self.n_features

    def validate(self):
        self.expect(len(self.edges) == self.n_features,
                    f"{len(self.edges)} edge lists for {self.n_features} columns")
        for j, e in enumerate(self.edges):
            self.expect(e.ndim == 1 and bool(np.all(np.diff(e) >= 0)),
                        f"column {j}: bin edges are not sorted")
        self.expect(self.dtype in ("", "float32", "float64"), f"dtype {self.dtype!r}")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(self.dtype) if self.dtype else _float_dtype(input_dtypes[0])]

    def reference(self, inputs):
        dtype = self.output_dtypes([inputs[0].dtype])[0]
        Xt = np.array(inputs[0], dtype=dtype, copy=True)
        for jj in range(Xt.shape[1]):
            Xt[:, jj] = np.searchsorted(self.edges[jj], Xt[:, jj], side="right")
        if not self.onehot:
            return [Xt]
        out = np.zeros((len(Xt), self.n_outputs), dtype=dtype)
        start = 0
        for jj, n in enumerate(self.n_bins):
            out[np.arange(len(Xt)), start + Xt[:, jj].astype(np.int64)] = 1
            start += n
        return [out]

    def to_saved(self):
        return ({"n_features": self.n_features, "onehot": self.onehot, "sparse": self.sparse,
                 "dtype": self.dtype}, {f"edges_{j}": e for j, e in enumerate(self.edges)})

    @classmethod
    def from_saved(cls, meta, arrays):
        n = int(meta["n_features"])
        return cls(n_features=n, edges=tuple(arrays[f"edges_{j}"] for j in range(n)),
                   onehot=bool(meta["onehot"]), sparse=bool(meta["sparse"]),
                   dtype=str(meta["dtype"]))


@register_op
@dataclass(frozen=True, eq=False)
class PolynomialExpand(Op):
    """Full output column ``c`` is 1 (``parents[c] == factors[c] == -1``), input column
    ``factors[c]`` (``parents[c] == -1``), or full column ``parents[c] < c`` times input
    column ``factors[c]``; the output is the full columns ``keep``. scikit-learn builds
    each column of degree d as a column of degree d - 1 times one input column, in this
    order, so each product rounds as it does there."""

    kind = "polynomial"
    n_features: int
    parents: np.ndarray
    factors: np.ndarray
    keep: np.ndarray

    def __post_init__(self):
        for name in ("parents", "factors", "keep"):
            object.__setattr__(self, name, np.asarray(getattr(self, name), dtype=np.int64))

    def validate(self):
        n = len(self.parents)
        self.expect(self.parents.shape == self.factors.shape == (n,), "parents and factors differ")
        self.expect(bool(np.all(self.parents < np.arange(n))), "a column's parent comes after it")
        self.expect(bool(np.all((self.factors >= -1) & (self.factors < self.n_features))),
                    "a factor is outside the input's columns")
        self.expect(bool(np.all((self.factors >= 0) | (self.parents == -1))),
                    "a product without a factor")
        self.expect(bool(np.all((self.keep >= 0) & (self.keep < n))), "kept columns outside")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(len(self.keep))]

    def output_dtypes(self, input_dtypes):
        return [_float_dtype(input_dtypes[0])]

    def levels(self):
        """Each full column's degree of nesting: 0 for the bias and the inputs."""
        level = np.zeros(len(self.parents), dtype=np.int64)
        for c, p in enumerate(self.parents):
            level[c] = 0 if p < 0 else level[p] + 1
        return level

    def reference(self, inputs):
        X = np.asarray(inputs[0], dtype=_float_dtype(inputs[0].dtype))
        XP = np.empty((len(X), len(self.parents)), dtype=X.dtype, order="F")
        for c, (p, f) in enumerate(zip(self.parents, self.factors)):
            if p >= 0:
                np.multiply(XP[:, p], X[:, f], out=XP[:, c])
            elif f >= 0:
                XP[:, c] = X[:, f]
            else:
                XP[:, c] = 1
        return [np.ascontiguousarray(XP[:, self.keep])]

    def to_saved(self):
        return {"n_features": self.n_features}, {"parents": self.parents, "factors": self.factors,
                                                 "keep": self.keep}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), parents=arrays["parents"],
                   factors=arrays["factors"], keep=arrays["keep"])


def yeo_johnson(x, lmbda):
    """scipy.stats._morestats._yeojohnson_transform, in NumPy: the result dtype is that
    of ``x`` and ``lmbda`` together, the logarithms in ``x``'s own dtype."""
    dtype = np.result_type(x, lmbda, np.float16)
    eps = np.finfo(dtype).eps
    out = np.zeros_like(x, dtype=dtype)
    pos = x >= 0
    if abs(lmbda) < eps:
        out[pos] = np.log1p(x[pos])
    else:
        out[pos] = np.expm1(lmbda * np.log1p(x[pos])) / lmbda
    if abs(lmbda - 2) > eps:
        out[~pos] = -np.expm1((2 - lmbda) * np.log1p(-x[~pos])) / (2 - lmbda)
    else:
        out[~pos] = -np.log1p(-x[~pos])
    return out


@register_op
@dataclass(frozen=True, eq=False)
class PowerTransform(_Elementwise):
    kind = "power_transform"
    n_features: int
    method: str  # "yeo-johnson" or "box-cox"
    lambdas: np.ndarray  # in their fitted dtype (float32 after a float32 fit): NumPy
    # computes in the result type of the column and its lambda

    def __post_init__(self):
        lambdas = np.asarray(self.lambdas)
        object.__setattr__(self, "lambdas", np.ascontiguousarray(
            lambdas, dtype=lambdas.dtype if lambdas.dtype == np.float32 else np.float64))

    def validate(self):
        self.expect(self.method in ("yeo-johnson", "box-cox"), f"method {self.method!r}")
        self.expect(self.lambdas.shape == (self.n_features,),
                    f"{self.lambdas.shape} lambdas for {self.n_features} columns")
        return self

    def reference(self, inputs):
        X = _working_copy(inputs[0])
        if self.method == "box-cox":
            from scipy.special import boxcox as transform
        else:
            transform = yeo_johnson
        for i, lmbda in enumerate(self.lambdas):
            with np.errstate(invalid="ignore", divide="ignore"):
                X[:, i] = transform(X[:, i], lmbda)
        return [X]

    def to_saved(self):
        return {"n_features": self.n_features, "method": self.method}, {"lambdas": self.lambdas}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), method=str(meta["method"]),
                   lambdas=arrays["lambdas"])


def normal_clip_bounds():
    """scikit-learn's clip of the normal output: ppf(1e-7 - eps), ppf(1 - (1e-7 - eps))."""
    from scipy import stats

    return (stats.norm.ppf(BOUNDS_THRESHOLD - np.spacing(1)),
            stats.norm.ppf(1 - (BOUNDS_THRESHOLD - np.spacing(1))))


@register_op
@dataclass(frozen=True, eq=False)
class QuantileTransform(_Elementwise):
    """``quantiles``: (n_quantiles, n_features); ``references``: (n_quantiles,)."""

    kind = "quantile_transform"
    n_features: int
    output_distribution: str  # "uniform" or "normal"
    quantiles: np.ndarray
    references: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "quantiles", np.ascontiguousarray(self.quantiles, dtype=np.float64))
        object.__setattr__(self, "references",
                           np.ascontiguousarray(self.references, dtype=np.float64))

    def validate(self):
        self.expect(self.output_distribution in ("uniform", "normal"),
                    f"output_distribution {self.output_distribution!r}")
        self.expect(self.quantiles.ndim == 2 and self.quantiles.shape[1] == self.n_features
                    and self.references.shape == (self.quantiles.shape[0],),
                    f"quantiles {self.quantiles.shape}, references {self.references.shape}")
        return self

    def _column(self, X_col, quantiles):
        lower_bound_x, upper_bound_x = quantiles[0], quantiles[-1]
        with np.errstate(invalid="ignore"):
            if self.output_distribution == "normal":
                lower_bounds_idx = X_col - BOUNDS_THRESHOLD < lower_bound_x
                upper_bounds_idx = X_col + BOUNDS_THRESHOLD > upper_bound_x
            else:
                lower_bounds_idx = X_col == lower_bound_x
                upper_bounds_idx = X_col == upper_bound_x
        isfinite_mask = ~np.isnan(X_col)
        X_col_finite = X_col[isfinite_mask]
        X_col[isfinite_mask] = 0.5 * (
            np.interp(X_col_finite, quantiles, self.references)
            - np.interp(-X_col_finite, -quantiles[::-1], -self.references[::-1]))
        X_col[upper_bounds_idx] = 1
        X_col[lower_bounds_idx] = 0
        if self.output_distribution == "normal":
            from scipy import stats

            with np.errstate(invalid="ignore"):
                X_col = stats.norm.ppf(X_col)
                clip_min, clip_max = normal_clip_bounds()
                X_col = np.clip(X_col, clip_min, clip_max)
        return X_col

    def reference(self, inputs):
        X = _working_copy(inputs[0])
        for j in range(X.shape[1]):
            X[:, j] = self._column(X[:, j], self.quantiles[:, j])
        return [X]

    def to_saved(self):
        return ({"n_features": self.n_features, "output_distribution": self.output_distribution},
                {"quantiles": self.quantiles, "references": self.references})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]),
                   output_distribution=str(meta["output_distribution"]),
                   quantiles=arrays["quantiles"], references=arrays["references"])


@register_op
@dataclass(frozen=True, eq=False)
class Ufunc(_Elementwise):
    """``np.<name>(X)``, element by element."""

    kind = "ufunc"
    n_features: int
    name: str

    def validate(self):
        self.expect(self.name in UFUNCS, f"ufunc {self.name!r} not in {UFUNCS}")
        return self

    def reference(self, inputs):
        X = np.asarray(inputs[0], dtype=_float_dtype(inputs[0].dtype))
        with np.errstate(all="ignore"):
            return [getattr(np, self.name)(X)]

    def to_saved(self):
        return {"n_features": self.n_features, "name": self.name}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), name=str(meta["name"]))
