"""The linear-model IR: ``scores = X @ coef.T + intercept``, then a named post-transform.

The arrays keep the source's dtype (scikit-learn keeps float32 coefficients for models
fitted on float32 data), because the dtype decides the arithmetic: the scores are
computed in ``result_type(input dtype, coef dtype)``, as NumPy does for the source.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..exceptions import InvalidModelError
from .graph import Op, ValueType, register_op
from .transforms import apply_post_transform, transformed_width

__all__ = ["LinearModel", "LINEAR_POST_TRANSFORMS"]

# Names shared with the tree IR (ir/transforms.py), plus the one-vs-rest sigmoid and
# SGDClassifier(loss="modified_huber")'s clipped scores (two classes; several).
LINEAR_POST_TRANSFORMS = ("identity", "sigmoid_binary", "softmax", "sigmoid_ovr",
                          "modified_huber_binary", "modified_huber")
_ONE_OUTPUT = ("sigmoid_binary", "modified_huber_binary")
SUMMATIONS = ("blas", "in_order")


@register_op
@dataclass(frozen=True, eq=False)
class LinearModel(Op):
    """``coef`` (n_outputs, n_features) and ``intercept`` (n_outputs,), float32 or float64.

    ``vector_coef``: the source holds one output's coefficients as a 1-D vector (a
    matrix-vector product rather than a matrix product: the NumPy route repeats the
    source's own call, so the BLAS routine and its summation order are the same).

    ``coef_layout``: ``"C"`` or ``"F"``, the memory order of the source's coefficients
    (``""``: read from the array given). NumPy's matmul passes BLAS other arguments for
    a Fortran-ordered matrix, and the BLAS kernel then sums in another order, so the NumPy
    route multiplies by a matrix of the source's order (``coef_as_source``).

    ``summation``: ``"blas"`` (the source's matrix product) or ``"in_order"`` (each
    score summed term after term in column order, then the intercept added: libsvm's
    decision values). Programs (Torch, ONNX, TVM) sum in their own order either way.

    As a graph op (kind ``linear``): one numeric value in, the scores and their
    post-transform out, in ``compute_dtype`` of the input."""

    kind = "linear"

    coef: np.ndarray
    intercept: np.ndarray
    post_transform: str = "identity"
    vector_coef: bool = False
    summation: str = "blas"
    coef_layout: str = ""

    def __post_init__(self):
        given = np.asarray(self.coef)
        if not self.coef_layout:
            fortran = given.ndim == 2 and given.flags.f_contiguous and not given.flags.c_contiguous
            object.__setattr__(self, "coef_layout", "F" if fortran else "C")
        coef = np.ascontiguousarray(given)
        if coef.ndim == 1:
            coef = coef.reshape(1, -1)
        object.__setattr__(self, "coef", coef)
        object.__setattr__(self, "intercept", np.ascontiguousarray(self.intercept).reshape(-1))

    @property
    def coef_as_source(self) -> np.ndarray:
        """``coef`` in the memory order the source holds it in."""
        return np.asfortranarray(self.coef) if self.coef_layout == "F" else self.coef

    @property
    def n_features(self) -> int:
        return int(self.coef.shape[1])

    @property
    def n_outputs(self) -> int:
        return int(self.coef.shape[0])

    def compute_dtype(self, input_dtype) -> np.dtype:
        return np.result_type(np.dtype(input_dtype), self.coef.dtype)

    def validate(self) -> "LinearModel":
        def fail(message):
            raise InvalidModelError(f"LinearModel: {message}")

        for name in ("coef", "intercept"):
            array = getattr(self, name)
            if array.dtype not in (np.float32, np.float64):
                fail(f"{name} has dtype {array.dtype}; expected float32 or float64")
            if not np.isfinite(array).all():
                fail(f"{name} holds non-finite values")
        if self.coef.ndim != 2 or self.coef.shape[0] < 1 or self.coef.shape[1] < 1:
            fail(f"coef has shape {self.coef.shape}; expected (n_outputs, n_features)")
        if self.intercept.shape != (self.n_outputs,):
            fail(f"intercept has shape {self.intercept.shape}; expected ({self.n_outputs},)")
        if self.post_transform not in LINEAR_POST_TRANSFORMS:
            fail(f"post_transform {self.post_transform!r} not in {LINEAR_POST_TRANSFORMS}")
        if self.summation not in SUMMATIONS:
            fail(f"summation {self.summation!r} not in {SUMMATIONS}")
        if self.coef_layout not in ("C", "F"):
            fail(f"coef_layout {self.coef_layout!r} not in ('C', 'F')")
        if self.vector_coef and self.n_outputs != 1:
            fail("vector_coef needs exactly one output")
        if self.post_transform in _ONE_OUTPUT and self.n_outputs != 1:
            fail(f"{self.post_transform} needs exactly one output")
        return self

    def scores(self, X: np.ndarray) -> np.ndarray:
        """The reference: the source's own NumPy expression, (n, n_outputs)."""
        if self.vector_coef:
            return (X @ self.coef[0] + self.intercept).reshape(-1, 1)
        if self.summation == "in_order":
            total = np.zeros((X.shape[0], self.n_outputs), np.result_type(X, self.coef))
            for t in range(self.n_features):
                total = total + X[:, t:t + 1] * self.coef[:, t]
            return total + self.intercept
        return X @ self.coef_as_source.T + self.intercept

    # ---------------------------------------------------------------- graph op
    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_outputs),
                ValueType.floats(transformed_width(self.post_transform, self.n_outputs))]

    def output_dtypes(self, input_dtypes):
        dtype = np.result_type(self.compute_dtype(input_dtypes[0]), self.intercept.dtype)
        return [dtype, dtype]

    def reference(self, inputs):
        raw = self.scores(inputs[0])
        return [raw, apply_post_transform(self.post_transform, raw)]

    def to_saved(self):
        return ({"post_transform": self.post_transform, "vector_coef": self.vector_coef,
                 "summation": self.summation, "coef_layout": self.coef_layout},
                {"coef": self.coef, "intercept": self.intercept})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(coef=arrays["coef"], intercept=arrays["intercept"],
                   post_transform=str(meta["post_transform"]), vector_coef=bool(meta["vector_coef"]),
                   summation=str(meta.get("summation", "blas")),
                   coef_layout=str(meta.get("coef_layout", "C")))
