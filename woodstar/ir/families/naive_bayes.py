"""The naive Bayes IR: joint log-likelihoods, then scikit-learn's posterior.

Every naive Bayes classifier of scikit-learn computes a joint log-likelihood ``jll``
(n, n_classes) in ``_joint_log_likelihood``; ``predict`` is the argmax of ``jll``,
``predict_log_proba`` is ``jll - logsumexp(jll)`` (its own ``_logsumexp``) and
``predict_proba`` the exp of that. The ops here repeat those NumPy expressions, in
the same order and dtypes, and keep the arrays' memory layout where it decides a
sum's order (GaussianNB stacks its per-class columns and transposes them), so the CPU
route is scikit-learn's answer to the bit:

* ``gaussian_nb``: GaussianNB, from ``theta_``, ``var_`` and ``class_prior_``;
* ``discrete_nb``: ``X @ weights.T (+ bias)``, after ``binarize`` where it is set
  (MultinomialNB, ComplementNB, BernoulliNB: their log-probabilities folded into
  weights and a bias with scikit-learn's own expressions, by the frontend);
* ``categorical_nb``: CategoricalNB, one table per feature, read at the category
  index ``int(x)``; an index the table does not hold gives NaN scores (scikit-learn
  raises: a negative index is a ValueError, one past the table an IndexError);
* ``nb_posterior``: ``[exp(log_proba) | log_proba]`` from ``jll``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["GaussianNaiveBayes", "DiscreteNaiveBayes", "CategoricalNaiveBayes",
           "NaiveBayesPosterior", "logsumexp"]

_FLOATS = (np.float32, np.float64)


def _check_float(op, name, array):
    op.expect(array.dtype in _FLOATS,
              f"{name} has dtype {array.dtype}; expected float32 or float64")


@register_op
@dataclass(frozen=True, eq=False)
class GaussianNaiveBayes(Op):
    """GaussianNB's ``_joint_log_likelihood``: ``theta`` and ``var`` (n_classes,
    n_features), ``class_prior`` (n_classes,), in the dtype they were fitted in."""

    kind = "gaussian_nb"

    theta: np.ndarray
    var: np.ndarray
    class_prior: np.ndarray

    @property
    def n_classes(self) -> int:
        return int(self.theta.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.theta.shape[1])

    def constants(self):
        """Per class: ``log(class_prior_[i])`` and ``-0.5 * sum(log(2 pi var_[i]))``, as
        scikit-learn computes them on each call (NumPy scalars of its dtypes)."""
        joint = [np.log(self.class_prior[i]) for i in range(self.n_classes)]
        norm = [-0.5 * np.sum(np.log(2.0 * np.pi * self.var[i, :])) for i in range(self.n_classes)]
        return joint, norm

    def validate(self):
        for name in ("theta", "var", "class_prior"):
            _check_float(self, name, getattr(self, name))
        self.expect(self.theta.ndim == 2 and min(self.theta.shape) >= 1,
                    f"theta has shape {self.theta.shape}; expected (n_classes, n_features)")
        self.expect(self.var.shape == self.theta.shape,
                    f"var has shape {self.var.shape}; theta {self.theta.shape}")
        self.expect(self.class_prior.shape == (self.n_classes,),
                    f"class_prior has shape {self.class_prior.shape}; expected ({self.n_classes},)")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_classes)]

    def output_dtypes(self, input_dtypes):
        return [np.result_type(np.dtype(input_dtypes[0]), self.theta.dtype, self.var.dtype,
                               self.class_prior.dtype)]

    def reference(self, inputs):
        X = inputs[0]
        joint, norm = self.constants()
        joint_log_likelihood = []
        for i in range(self.n_classes):
            n_ij = norm[i] - 0.5 * np.sum(((X - self.theta[i, :]) ** 2) / (self.var[i, :]), axis=1)
            joint_log_likelihood.append(joint[i] + n_ij)
        # stacked per class and transposed, as scikit-learn does: the layout decides
        # the order of logsumexp's sum over classes
        return [np.stack(joint_log_likelihood).T]

    def to_saved(self):
        return {}, {"theta": self.theta, "var": self.var, "class_prior": self.class_prior}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(theta=arrays["theta"], var=arrays["var"], class_prior=arrays["class_prior"])


def binarize(X, threshold):
    """scikit-learn's ``preprocessing.binarize`` (copy=True), dense or sparse.
    ``threshold``: a Python float, or a NumPy scalar (which NumPy compares in its own
    dtype, where a Python float takes X's)."""
    if hasattr(X, "toarray"):
        if threshold < 0:
            raise ValueError("Cannot binarize a sparse matrix with threshold < 0")
        X = X.tocsr(copy=True)
        cond = X.data > threshold
        not_cond = np.logical_not(cond)
        X.data[cond] = 1
        X.data[not_cond] = 0
        X.eliminate_zeros()
        return X
    X = np.array(X, copy=True)
    dtypes = [X.dtype] + ([threshold.dtype] if hasattr(threshold, "dtype") else [])
    float_dtype = np.result_type(*dtypes) if X.dtype.kind == "f" else np.dtype(np.float64)
    cond = X.astype(float_dtype, copy=False) > threshold
    not_cond = np.logical_not(cond)
    X[cond] = 1
    X[not_cond] = 0
    return X


@register_op
@dataclass(frozen=True, eq=False)
class DiscreteNaiveBayes(Op):
    """``jll = X @ weights.T``, then ``jll += bias`` where there is one; ``X`` first
    binarized at ``threshold`` where set (BernoulliNB). ``threshold_dtype``: None for
    a Python number (compared in X's dtype), else the NumPy scalar's dtype."""

    kind = "discrete_nb"

    weights: np.ndarray
    bias: Optional[np.ndarray] = None
    threshold: Optional[float] = None
    threshold_dtype: Optional[str] = None

    def __post_init__(self):
        object.__setattr__(self, "weights", np.ascontiguousarray(self.weights))

    @property
    def n_classes(self) -> int:
        return int(self.weights.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.weights.shape[1])

    def threshold_value(self):
        """The threshold as scikit-learn holds it: a Python float or a NumPy scalar."""
        if self.threshold_dtype is None:
            return float(self.threshold)
        return np.dtype(self.threshold_dtype).type(self.threshold)

    def validate(self):
        _check_float(self, "weights", self.weights)
        self.expect(self.weights.ndim == 2 and min(self.weights.shape) >= 1,
                    f"weights has shape {self.weights.shape}; expected (n_classes, n_features)")
        if self.bias is not None:
            _check_float(self, "bias", self.bias)
            self.expect(self.bias.shape == (self.n_classes,),
                        f"bias has shape {self.bias.shape}; expected ({self.n_classes},)")
        self.expect(self.threshold_dtype in (None, "float32", "float64"),
                    f"threshold_dtype {self.threshold_dtype!r} not in (None, 'float32', 'float64')")
        self.expect(self.threshold is None or not np.isnan(self.threshold), "threshold is NaN")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_classes)]

    def output_dtypes(self, input_dtypes):
        dtypes = [np.dtype(input_dtypes[0]), self.weights.dtype]
        return [np.result_type(*dtypes, *([self.bias.dtype] if self.bias is not None else []))]

    def reference(self, inputs):
        X = inputs[0]
        if self.threshold is not None:
            X = binarize(X, self.threshold_value())
        jll = np.asarray(X @ self.weights.T)  # safe_sparse_dot: scipy's product for sparse X
        if self.bias is not None:
            jll += self.bias
        return [jll]

    def to_saved(self):
        arrays = {"weights": self.weights}
        if self.bias is not None:
            arrays["bias"] = self.bias
        return {"threshold": self.threshold, "threshold_dtype": self.threshold_dtype}, arrays

    @classmethod
    def from_saved(cls, meta, arrays):
        threshold = meta["threshold"]
        return cls(weights=arrays["weights"], bias=arrays.get("bias"),
                   threshold=None if threshold is None else float(threshold),
                   threshold_dtype=meta["threshold_dtype"])


@register_op
@dataclass(frozen=True, eq=False)
class CategoricalNaiveBayes(Op):
    """CategoricalNB: ``tables[i]`` (n_classes, n_categories_i) is
    ``feature_log_prob_[i]``; ``jll = zeros; jll += tables[i][:, int(x_i)].T`` feature
    after feature, then ``+ class_log_prior``. ``int(x)`` truncates toward zero, as
    scikit-learn's ``check_array(dtype="int")`` does; an index outside
    ``0..n_categories_i - 1`` gives NaN."""

    kind = "categorical_nb"

    tables: Tuple[np.ndarray, ...]
    class_log_prior: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "tables", tuple(np.ascontiguousarray(t) for t in self.tables))

    @property
    def n_classes(self) -> int:
        return int(self.class_log_prior.shape[0])

    @property
    def n_features(self) -> int:
        return len(self.tables)

    @property
    def n_categories(self) -> Tuple[int, ...]:
        return tuple(int(t.shape[1]) for t in self.tables)

    def validate(self):
        _check_float(self, "class_log_prior", self.class_log_prior)
        self.expect(self.class_log_prior.ndim == 1 and self.n_classes >= 1,
                    f"class_log_prior has shape {self.class_log_prior.shape}; "
                    f"expected (n_classes,)")
        self.expect(self.n_features >= 1, "no feature tables")
        for i, table in enumerate(self.tables):
            _check_float(self, f"table {i}", table)
            shaped = table.ndim == 2 and table.shape[0] == self.n_classes and table.shape[1] >= 1
            self.expect(shaped, f"table {i} has shape {table.shape}; "
                                f"expected ({self.n_classes}, n_categories)")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_classes)]

    def output_dtypes(self, input_dtypes):
        dtypes = [self.class_log_prior.dtype] + [t.dtype for t in self.tables]
        return [np.result_type(np.float64, *dtypes)]  # jll starts as float64 zeros

    def reference(self, inputs):
        X = inputs[0]
        jll = np.zeros((X.shape[0], self.n_classes))
        for i, table in enumerate(self.tables):
            n = table.shape[1]
            x = X[:, i]
            with np.errstate(invalid="ignore"):
                known = (x > -1) & (x < n)  # int(x) in 0..n-1 (NaN is not)
            indices = np.where(known, x, 0).astype(np.int64)
            values = table[:, indices].T
            if not known.all():
                values = np.where(known[:, np.newaxis], values, np.nan)
            jll += values
        total_ll = jll + self.class_log_prior
        return [total_ll]

    def to_saved(self):
        arrays = {f"table_{i}": t for i, t in enumerate(self.tables)}
        arrays["class_log_prior"] = self.class_log_prior
        return {"n_features": self.n_features}, arrays

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(tables=tuple(arrays[f"table_{i}"] for i in range(int(meta["n_features"]))),
                   class_log_prior=arrays["class_log_prior"])


def logsumexp(array, axis):
    """scikit-learn's ``utils._array_api._logsumexp`` in NumPy, step for step."""
    array_max = np.max(array, axis=axis, keepdims=True)
    index_max = array == array_max
    array = np.asarray(array, copy=True)
    array[index_max] = -np.inf
    i_max_dt = index_max.astype(array.dtype)
    m = np.sum(i_max_dt, axis=axis, keepdims=True, dtype=array.dtype)
    shift = np.where(np.isfinite(array_max), array_max, 0)
    exp = np.exp(array - shift)
    s = np.sum(exp, axis=axis, keepdims=True, dtype=exp.dtype)
    s = np.where(s == 0, s, s / m)
    out = np.log1p(s) + np.log(m) + array_max
    out = np.squeeze(out, axis=axis)
    return out[()] if out.ndim == 0 else out


@register_op
@dataclass(frozen=True, eq=False)
class NaiveBayesPosterior(Op):
    """From ``jll`` (n, n_classes): ``[predict_proba | predict_log_proba]``, 2 *
    n_classes columns, as ``_BaseNB.predict_log_proba`` and ``predict_proba``."""

    kind = "nb_posterior"

    n_classes: int

    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_classes)
        return [ValueType.floats(2 * self.n_classes)]

    def reference(self, inputs):
        jll = inputs[0]
        with np.errstate(invalid="ignore", divide="ignore"):  # NaN scores stay NaN
            log_prob_x = logsumexp(jll, axis=1)
            log_proba = jll - np.atleast_2d(log_prob_x).T
            return [np.hstack([np.exp(log_proba), log_proba])]

    def to_saved(self):
        return {"n_classes": self.n_classes}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_classes=int(meta["n_classes"]))
