"""The ``missing_indicator`` op: scikit-learn's MissingIndicator (alone, or as a
SimpleImputer's ``add_indicator``): for each of ``features``, whether the value is
missing (NaN), as booleans."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from .graph import FLOAT, Op, ValueType, register_op

__all__ = ["MissingIndicator"]


@register_op
@dataclass(frozen=True, eq=False)
class MissingIndicator(Op):
    kind = "missing_indicator"
    n_features: int
    features: Tuple[int, ...]

    def __post_init__(self):
        object.__setattr__(self, "features", tuple(int(f) for f in self.features))

    def validate(self):
        bad = [f for f in self.features if not 0 <= f < self.n_features]
        self.expect(not bad, f"features {bad[:5]} are outside 0..{self.n_features - 1}")
        return self

    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_features)
        return [ValueType((FLOAT,) * len(self.features))]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(bool)]

    def reference(self, inputs):
        return [np.isnan(inputs[0][:, list(self.features)].astype(np.float64))]

    def to_saved(self):
        return {"n_features": self.n_features}, {"features": np.asarray(self.features, np.int64)}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), features=tuple(arrays["features"].tolist()))
