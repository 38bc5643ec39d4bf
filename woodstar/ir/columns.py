"""Ops that move columns without computing on them: ``select`` (a subset, in a given
order) and ``concat`` (values side by side). A ColumnTransformer is selections, one
branch per transformer, and a concat."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from .graph import Op, ValueType, register_op

__all__ = ["Select", "Concat"]


@register_op
@dataclass(frozen=True, eq=False)
class Select(Op):
    """Columns ``indices`` of a value of ``n_features`` columns."""

    kind = "select"
    n_features: int
    indices: Tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "indices", tuple(int(i) for i in self.indices))

    def validate(self):
        bad = [i for i in self.indices if not 0 <= i < self.n_features]
        self.expect(not bad, f"column indices {bad[:5]} are outside 0..{self.n_features - 1}")
        return self

    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_features)
        return [ValueType(tuple(value.kinds[i] for i in self.indices))]

    def reference(self, inputs):
        return [inputs[0][:, list(self.indices)]]

    def to_saved(self):
        return {"n_features": self.n_features}, {"indices": np.asarray(self.indices, np.int64)}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), indices=tuple(arrays["indices"].tolist()))


@register_op
@dataclass(frozen=True, eq=False)
class Concat(Op):
    """Values side by side, in the dtype NumPy's ``hstack`` gives them. ``sparse``:
    the source stacks them into a sparse matrix (scikit-learn's ColumnTransformer
    decides that at fit time); the numbers are the same, but an estimator after it
    computes on the sparse matrix, which the CPU route repeats."""

    kind = "concat"
    widths: Tuple[int, ...]
    sparse: bool = False

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))

    def output_types(self, input_types):
        self.expect(len(input_types) == len(self.widths),
                    f"reads {len(input_types)} values; it concatenates {len(self.widths)}")
        for i, (value, width) in enumerate(zip(input_types, self.widths)):
            self.expect_width(value, width, f"input {i}")
        return [ValueType(tuple(k for value in input_types for k in value.kinds))]

    def output_dtypes(self, input_dtypes):
        return [np.result_type(*input_dtypes)]

    def reference(self, inputs):
        return [np.hstack(inputs)]

    def to_saved(self):
        return {"widths": list(self.widths), "sparse": self.sparse}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(widths=tuple(meta["widths"]), sparse=bool(meta["sparse"]))
