"""The torch backend's CPU route for linear models and pipeline steps: the source's own
NumPy expressions, so the answer is the source's to the bit on the same NumPy and BLAS,
and a small batch pays no Torch dispatch."""

import numpy as np

from ..ir import ModelIR
from ..ir.column_ops import NUMPY_OPS
from ..ir.transforms import apply_post_transform

__all__ = ["NumpySteps", "NumpyLinear", "NumpyTransformer", "with_steps"]


class NumpySteps:
    """A pipeline's column-wise steps, in place on one copy of the rows, as scikit-learn's
    scalers do: NumPy computes ``X32 -= operand64`` in float64 and rounds to float32,
    which is what ``ColumnOps`` defines."""

    def __init__(self, steps, dtype: str):
        self.ops = []
        for step in steps:
            for op, operand, cast in zip(step.ops, step.operands, step.cast_operand):
                self.ops.append((NUMPY_OPS[op], operand.astype(dtype) if cast else operand))

    def __call__(self, X: np.ndarray) -> np.ndarray:
        if not self.ops:
            return X
        X = X.copy()  # the caller's rows are never written
        for ufunc, operand in self.ops:  # an overflow warns, as it does in scikit-learn
            ufunc(X, operand, out=X)
        return X


class NumpyLinear:
    """steps -> ``X @ coef.T + intercept`` -> post-transform: (raw, transformed)."""

    def __init__(self, ir: ModelIR, dtype: str):
        self.steps = NumpySteps(ir.steps, dtype)
        linear = ir.linear
        self.vector = linear.coef[0] if linear.vector_coef else None
        self.coef_t = linear.coef.T
        self.intercept = linear.intercept
        self.post_transform = linear.post_transform

    def __call__(self, X: np.ndarray):
        X = self.steps(X)
        if self.vector is not None:
            raw = (X @ self.vector + self.intercept).reshape(-1, 1)
        else:
            raw = X @ self.coef_t + self.intercept
        return raw, apply_post_transform(self.post_transform, raw)


class NumpyTransformer:
    """A bare transformer: the steps' output is both results."""

    def __init__(self, ir: ModelIR, dtype: str):
        self.steps = NumpySteps(ir.steps, dtype)

    def __call__(self, X: np.ndarray):
        X = self.steps(X)
        return X, X


def with_steps(steps: NumpySteps, route):
    """A tree route fed by a pipeline's steps."""
    if not steps.ops:
        return route

    def run(X):
        return route(steps(X))

    return run
