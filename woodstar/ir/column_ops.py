"""The column-wise transformer IR: scalers as a short list of per-column operations.

scikit-learn's scalers work in place on a copy of the input in the input's float dtype
(float32 stays float32): ``X -= mean``, ``X /= scale``, ``X *= scale``, ``X += min``,
``np.clip``, and SimpleImputer's ``X[missing] = statistic`` (missing: NaN, ``fill_nan``,
or equal to a number, ``fill_value``). Each operation therefore rounds its result to
that working dtype, and
some cast their operand to it first. ``ColumnOps`` records exactly that, so every
route repeats the source's roundings: an operation computes in float64 on the value
and the (possibly pre-rounded) operand, then rounds to the working dtype. For one
operation on float32 values this equals float32 arithmetic (float64 holds the exact
result before the single rounding).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ..exceptions import InvalidModelError
from .graph import Op, register_op

__all__ = ["ColumnOps", "COLUMN_OPS", "NUMPY_OPS"]

COLUMN_OPS = ("sub", "div", "mul", "add", "maximum", "minimum", "fill_nan", "fill_value")
# Ops whose operand has two rows: (the value to match, what replaces it) per column.
TWO_ROW_OPS = ("fill_value",)


@register_op
@dataclass(frozen=True, eq=False)
class ColumnOps(Op):
    """``x -> op_k(... op_1(x))`` per column. ``operands[i]`` is a (n_features,) array
    in the source's dtype ((2, n_features) for ``fill_value``: the value to match, then
    its replacement); ``cast_operand[i]`` says whether the source rounds it to the
    working dtype before the operation (for ``fill_value``: whether the value is
    compared in the working dtype, as NumPy compares with a Python number, or in its
    own). As a graph op (kind ``column_ops``): one
    numeric value in, one of the same width and dtype out."""

    kind = "column_ops"

    name: str  # the source transformer's class, for messages
    n_features: int
    ops: Tuple[str, ...]
    operands: Tuple[np.ndarray, ...]
    cast_operand: Tuple[bool, ...]

    def __post_init__(self):
        object.__setattr__(self, "ops", tuple(self.ops))
        object.__setattr__(self, "operands", tuple(np.ascontiguousarray(o) for o in self.operands))
        object.__setattr__(self, "cast_operand", tuple(bool(c) for c in self.cast_operand))

    def validate(self) -> "ColumnOps":
        def fail(message):
            raise InvalidModelError(f"ColumnOps of {self.name}: {message}")

        if not (len(self.ops) == len(self.operands) == len(self.cast_operand)):
            fail(f"{len(self.ops)} ops, {len(self.operands)} operands, "
                 f"{len(self.cast_operand)} cast flags")
        for i, (op, operand) in enumerate(zip(self.ops, self.operands)):
            if op not in COLUMN_OPS:
                fail(f"op {i} {op!r} not in {COLUMN_OPS}")
            shape = (2, self.n_features) if op in TWO_ROW_OPS else (self.n_features,)
            if operand.shape != shape:
                fail(f"op {i} ({op}): operand shape {operand.shape}, expected {shape}")
            if operand.dtype not in (np.float32, np.float64):
                fail(f"op {i} ({op}): operand dtype {operand.dtype}")
        return self

    def apply(self, X: np.ndarray) -> np.ndarray:
        """The reference: ``X`` (n, n_features) float32 or float64 -> same dtype."""
        working = X.dtype
        for op, operand, cast in zip(self.ops, self.operands, self.cast_operand):
            if cast:
                operand = operand.astype(working)
            X = NUMPY_OPS[op](X.astype(np.float64), operand.astype(np.float64)).astype(working)
        return X

    # ---------------------------------------------------------------- graph op
    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_features)
        if set(self.ops) - {"fill_nan", "fill_value"}:  # an imputer may fill string codes
            self.expect_numeric(value)
        return [value]

    def reference(self, inputs):
        return [self.apply(inputs[0])]

    def to_saved(self):
        return ({"name": self.name, "n_features": self.n_features, "ops": list(self.ops),
                 "cast_operand": list(self.cast_operand)},
                {f"operand_{i}": operand for i, operand in enumerate(self.operands)})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(name=str(meta["name"]), n_features=int(meta["n_features"]),
                   ops=tuple(str(op) for op in meta["ops"]),
                   operands=tuple(arrays[f"operand_{i}"] for i in range(len(meta["ops"]))),
                   cast_operand=tuple(bool(c) for c in meta["cast_operand"]))


def _fill_nan(values, operand, out=None):
    """A missing value takes the column's operand (SimpleImputer's statistic); called
    like a ufunc, ``out`` included."""
    if out is None:
        return np.where(np.isnan(values), operand, values)
    np.copyto(out, np.broadcast_to(operand, values.shape), where=np.isnan(values))
    return out


def _fill_value(values, operand, out=None):
    """A value equal to the column's ``operand[0]`` takes ``operand[1]`` (SimpleImputer
    with a number as ``missing_values``); called like a ufunc, ``out`` included."""
    match = values == operand[0]
    if out is None:
        return np.where(match, operand[1], values)
    np.copyto(out, np.broadcast_to(operand[1], values.shape), where=match)
    return out


# Each op as a NumPy callable ``(values, operand, out=None)``: the reference below, and
# the torch backend's NumPy route in place (runtimes/numpy_graph.py).
NUMPY_OPS = {"sub": np.subtract, "div": np.divide, "mul": np.multiply, "add": np.add,
             "maximum": np.maximum, "minimum": np.minimum, "fill_nan": _fill_nan,
             "fill_value": _fill_value}

