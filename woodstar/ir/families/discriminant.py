"""Discriminant-analysis ops: ``qda_scores``, ``qda_posterior`` and ``log_floor``.

LinearDiscriminantAnalysis is a linear model (``linear``) with a projection for
``transform`` (``projection``); its ``predict_log_proba`` is ``log_floor`` of its
probabilities. QuadraticDiscriminantAnalysis computes per-class log posteriors
(``qda_scores``) and normalises them (``qda_posterior``), with the NumPy expressions
of ``sklearn/discriminant_analysis.py``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["QDAScores", "QDAPosterior", "LogFloor"]


@register_op
@dataclass(frozen=True, eq=False)
class QDAScores(Op):
    """``-0.5 * (norm2 + u) + log_priors`` where ``norm2[:, i]`` is
    ``np.sum(np.dot(X - means[i], weights[i]) ** 2, axis=1)``; ``weights[i]`` is
    ``rotations_[i] * scalings_[i] ** -0.5`` and ``u[i]`` ``np.sum(np.log(scalings_[i]))``,
    computed once by the frontend with the source's expressions."""

    kind = "qda_scores"
    means: np.ndarray
    weights: Tuple[np.ndarray, ...]
    u: np.ndarray
    log_priors: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "means", np.array(self.means, copy=True))
        object.__setattr__(self, "weights", tuple(np.array(w, order="K", copy=True)
                                                  for w in self.weights))
        object.__setattr__(self, "u", np.array(self.u, copy=True))
        object.__setattr__(self, "log_priors", np.array(self.log_priors, copy=True))

    @property
    def n_classes(self) -> int:
        return int(self.means.shape[0])

    @property
    def n_features(self) -> int:
        return int(self.means.shape[1])

    def validate(self):
        k, f = self.means.shape
        self.expect(len(self.weights) == k and self.u.shape == (k,)
                    and self.log_priors.shape == (k,),
                    f"{k} classes but {len(self.weights)} weight matrices, u {self.u.shape}, "
                    f"log_priors {self.log_priors.shape}")
        for i, w in enumerate(self.weights):
            self.expect(w.ndim == 2 and w.shape[0] == f,
                        f"class {i}: weights of shape {w.shape} for {f} features")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_classes)]

    def output_dtypes(self, input_dtypes):
        return [np.result_type(input_dtypes[0], self.means.dtype, *self.weights, self.u,
                               self.log_priors)]

    def reference(self, inputs):
        X = inputs[0]
        norm2 = []
        for i in range(self.n_classes):
            Xm = X - self.means[i]
            X2 = np.dot(Xm, self.weights[i])
            norm2.append(np.sum(X2**2, axis=1))
        norm2 = np.array(norm2).T
        return [-0.5 * (norm2 + self.u) + self.log_priors]

    def to_saved(self):
        arrays = {"means": self.means, "u": self.u, "log_priors": self.log_priors}
        arrays.update({f"weights_{i}": w for i, w in enumerate(self.weights)})
        return {"n_classes": self.n_classes}, arrays

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(means=arrays["means"], u=arrays["u"], log_priors=arrays["log_priors"],
                   weights=tuple(arrays[f"weights_{i}"] for i in range(int(meta["n_classes"]))))


@register_op
@dataclass(frozen=True, eq=False)
class QDAPosterior(Op):
    """Scores (n, k) -> ``[proba, log_proba]`` (n, 2k) as
    ``DiscriminantAnalysisPredictionMixin`` computes them: ``ll = scores - max``,
    ``log_proba = ll - log(sum(exp(ll)))``, ``proba = exp(log_proba)``."""

    kind = "qda_posterior"
    n_classes: int

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_classes)
        return [ValueType.floats(2 * self.n_classes)]

    def reference(self, inputs):
        scores = inputs[0]
        log_likelihood = scores - scores.max(axis=1)[:, np.newaxis]
        log_proba = log_likelihood - np.log(np.exp(log_likelihood).sum(axis=1)[:, np.newaxis])
        return [np.hstack([np.exp(log_proba), log_proba])]

    def to_saved(self):
        return {"n_classes": self.n_classes}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_classes=int(meta["n_classes"]))


@register_op
@dataclass(frozen=True, eq=False)
class LogFloor(Op):
    """``log(p)`` after raising exact zeros to the dtype's smallest normal number
    (LinearDiscriminantAnalysis.predict_log_proba)."""

    kind = "log_floor"
    n_features: int

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_features)]

    def reference(self, inputs):
        prediction = np.array(inputs[0], copy=True)
        prediction[prediction == 0.0] += np.finfo(prediction.dtype).smallest_normal
        return [np.log(prediction)]

    def to_saved(self):
        return {"n_features": self.n_features}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]))
