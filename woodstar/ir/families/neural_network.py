"""The multilayer perceptron IR: scikit-learn's ``_forward_pass_fast``.

``activation = X @ coefs[i]; activation += intercepts[i]``, then the hidden
activation in place (the output activation after the last layer), in the dtype NumPy
gives ``X @ coefs[0]`` (float32 stays float32 for a network fitted on float32). The
reference repeats scikit-learn's NumPy expressions (sklearn/neural_network/_base.py:
``np.tanh``, ``np.maximum(X, 0)``, scipy's ``expit``, ``np.exp``, its softmax), so the CPU route
is its answer to the bit.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ..graph import Op, ValueType, register_op
from ..transforms import _sigmoid

__all__ = ["MultilayerPerceptron", "HIDDEN_ACTIVATIONS", "OUTPUT_ACTIVATIONS"]

HIDDEN_ACTIVATIONS = ("identity", "logistic", "tanh", "relu")
OUTPUT_ACTIVATIONS = ("identity", "exp", "logistic", "softmax")  # exp: a poisson regressor


def _identity(X):
    pass


def _logistic(X):
    X[...] = _sigmoid(X)  # scipy's expit, as scikit-learn's inplace_logistic


def _exp(X):
    np.exp(X, out=X)


def _tanh(X):
    np.tanh(X, out=X)


def _relu(X):
    np.maximum(X, 0, out=X)


def _softmax(X):
    tmp = X - X.max(axis=1)[:, np.newaxis]
    np.exp(tmp, out=X)
    X /= X.sum(axis=1)[:, np.newaxis]


ACTIVATIONS = {"identity": _identity, "exp": _exp, "logistic": _logistic, "tanh": _tanh,
               "relu": _relu, "softmax": _softmax}


def _float_dtype(array):
    return array.dtype in (np.float32, np.float64)


@register_op
@dataclass(frozen=True, eq=False)
class MultilayerPerceptron(Op):
    """``coefs[i]`` (fan_in, fan_out) and ``intercepts[i]`` (fan_out,), float32 or
    float64, the hidden ``activation`` and the ``out_activation``. ``binary``: one
    logistic output shown as the two columns ``(1 - p, p)`` (MLPClassifier's
    ``predict_proba`` on two classes). One output value: what ``predict_proba`` (a
    classifier) or ``predict`` (a regressor) shows."""

    kind = "mlp"

    coefs: Tuple[np.ndarray, ...]
    intercepts: Tuple[np.ndarray, ...]
    activation: str
    out_activation: str
    binary: bool = False

    def __post_init__(self):
        object.__setattr__(self, "coefs", tuple(np.ascontiguousarray(c) for c in self.coefs))
        object.__setattr__(self, "intercepts",
                           tuple(np.ascontiguousarray(b).reshape(-1) for b in self.intercepts))

    @property
    def n_features(self) -> int:
        return int(self.coefs[0].shape[0])

    @property
    def n_outputs(self) -> int:
        return int(self.coefs[-1].shape[1])

    @property
    def width(self) -> int:
        return 2 if self.binary else self.n_outputs

    def layer_dtypes(self, input_dtype):
        """The dtype of each layer's activation for an input of ``input_dtype``."""
        dtypes, dtype = [], np.dtype(input_dtype)
        for coef in self.coefs:
            dtype = np.result_type(dtype, coef.dtype)
            dtypes.append(dtype)
        return dtypes

    def validate(self):
        self.expect(len(self.coefs) >= 1 and len(self.coefs) == len(self.intercepts),
                    f"{len(self.coefs)} weight matrices and {len(self.intercepts)} bias vectors; "
                    f"expected as many, at least one")
        fan_in = None
        for i, (coef, bias) in enumerate(zip(self.coefs, self.intercepts)):
            self.expect(coef.ndim == 2 and min(coef.shape) >= 1,
                        f"layer {i}: coefs has shape {coef.shape}; expected (fan_in, fan_out)")
            self.expect(fan_in is None or coef.shape[0] == fan_in,
                        f"layer {i}: reads {coef.shape[0]} values; the layer before gives {fan_in}")
            self.expect(bias.shape == (coef.shape[1],),
                        f"layer {i}: intercepts has shape {bias.shape}; "
                        f"expected ({coef.shape[1]},)")
            self.expect(_float_dtype(coef) and _float_dtype(bias),
                        f"layer {i}: dtypes {coef.dtype}, {bias.dtype}; "
                        f"expected float32 or float64")
            self.expect(np.isfinite(coef).all() and np.isfinite(bias).all(),
                        f"layer {i}: non-finite weights")
            fan_in = coef.shape[1]
        self.expect(self.activation in HIDDEN_ACTIVATIONS,
                    f"activation {self.activation!r} not in {HIDDEN_ACTIVATIONS}")
        self.expect(self.out_activation in OUTPUT_ACTIVATIONS,
                    f"out_activation {self.out_activation!r} not in {OUTPUT_ACTIVATIONS}")
        self.expect(not self.binary or (self.out_activation == "logistic" and self.n_outputs == 1),
                    "binary needs one logistic output")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.width)]

    def output_dtypes(self, input_dtypes):
        return [self.layer_dtypes(input_dtypes[0])[-1]]

    def forward(self, X):
        """scikit-learn's ``_forward_pass_fast`` (``X`` dense or scipy sparse)."""
        activation = X
        hidden_activation = ACTIVATIONS[self.activation]
        n_layers = len(self.coefs) + 1
        for i in range(n_layers - 1):
            activation = np.asarray(activation @ self.coefs[i])  # safe_sparse_dot
            activation += self.intercepts[i]
            if i != n_layers - 2:
                hidden_activation(activation)
        ACTIVATIONS[self.out_activation](activation)
        if self.binary:  # MLPClassifier.predict_proba on one output
            y_pred = activation.ravel()
            return np.vstack([1 - y_pred, y_pred]).T
        return activation

    def reference(self, inputs):
        return [self.forward(inputs[0])]

    def to_saved(self):
        arrays = {f"coef_{i}": c for i, c in enumerate(self.coefs)}
        arrays.update({f"intercept_{i}": b for i, b in enumerate(self.intercepts)})
        return ({"n_layers": len(self.coefs), "activation": self.activation,
                 "out_activation": self.out_activation, "binary": self.binary}, arrays)

    @classmethod
    def from_saved(cls, meta, arrays):
        n = int(meta["n_layers"])
        return cls(coefs=tuple(arrays[f"coef_{i}"] for i in range(n)),
                   intercepts=tuple(arrays[f"intercept_{i}"] for i in range(n)),
                   activation=str(meta["activation"]), out_activation=str(meta["out_activation"]),
                   binary=bool(meta["binary"]))
