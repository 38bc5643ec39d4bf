"""Category encoders: ``one_hot`` and ``ordinal``.

Both read, per input column ``j``, a value ``v`` (a number, or a string's code from
the input edge) and find the category ``k`` with ``categories[j][k] == v`` (NaN
matches a NaN category). Each category has an output: for ``one_hot`` the output
column it sets to 1 (or -1: none, a dropped category), for ``ordinal`` the value it
writes. A value that matches no category takes the column's ``unknown`` output.

The tables are read off the source estimator's own ``transform`` by its frontend
(infrequent categories, ``drop``, ``min_frequency`` and ``max_categories`` included),
so the op itself knows no policy. Where the source refuses unknown values
(``handle_unknown="error"``) the input edge checks them (``schema.InputColumn``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from .graph import FLOAT, Op, ValueType, register_op

__all__ = ["OneHotEncode", "OrdinalEncode", "match_categories"]


def match_categories(values: np.ndarray, categories: np.ndarray) -> np.ndarray:
    """For each of ``values`` (1-D), the index of its category, or -1."""
    order = np.argsort(categories, kind="stable")  # NaN sorts last
    ordered = categories[order]
    position = np.searchsorted(ordered, values)
    position = np.minimum(position, max(len(ordered) - 1, 0))
    found = np.zeros(len(values), dtype=bool) if not len(ordered) else ordered[position] == values
    result = np.where(found, order[position] if len(order) else -1, -1)
    nan_categories = np.flatnonzero(np.isnan(categories))
    if len(nan_categories):
        result = np.where(np.isnan(values), nan_categories[0], result)
    return result.astype(np.int64)


class _Encoder(Op):
    def _check_tables(self):
        self.expect(len(self.categories) == len(self.outputs) == len(self.unknown)
                    == self.n_features, f"{self.n_features} columns but "
                    f"{len(self.categories)} category lists, {len(self.outputs)} output lists "
                    f"and {len(self.unknown)} unknown outputs")
        for j, (c, o) in enumerate(zip(self.categories, self.outputs)):
            self.expect(c.shape == o.shape and c.ndim == 1,
                        f"column {j}: {c.shape} categories for {o.shape} outputs")
            self.expect(len(np.unique(c[~np.isnan(c)])) == np.count_nonzero(~np.isnan(c))
                        and np.count_nonzero(np.isnan(c)) <= 1, f"column {j}: a category repeats")

    def _saved_arrays(self):
        arrays = {}
        for j, (c, o) in enumerate(zip(self.categories, self.outputs)):
            arrays[f"categories_{j}"] = c
            arrays[f"outputs_{j}"] = o
        arrays["unknown"] = np.asarray(self.unknown)
        return arrays

    @staticmethod
    def _tables_from(meta, arrays):
        n = int(meta["n_features"])
        return (tuple(arrays[f"categories_{j}"] for j in range(n)),
                tuple(arrays[f"outputs_{j}"] for j in range(n)))


@register_op
@dataclass(frozen=True, eq=False)
class OneHotEncode(_Encoder):
    """``outputs[j][k]``: the output column of category ``k`` of column ``j`` (-1: none);
    ``unknown[j]``: the output column an unmatched value sets (-1: none). Output:
    ``n_outputs`` columns of 0/1 in ``dtype``."""

    kind = "one_hot"
    n_features: int
    n_outputs: int
    categories: Tuple[np.ndarray, ...]
    outputs: Tuple[np.ndarray, ...]
    unknown: Tuple[int, ...]
    dtype: str = "float64"
    sparse: bool = False  # the source returns a sparse matrix (same numbers)

    def __post_init__(self):
        object.__setattr__(self, "categories",
                           tuple(np.ascontiguousarray(c, dtype=np.float64) for c in self.categories))
        object.__setattr__(self, "outputs",
                           tuple(np.ascontiguousarray(o, dtype=np.int64) for o in self.outputs))
        object.__setattr__(self, "unknown", tuple(int(u) for u in self.unknown))

    def validate(self):
        self._check_tables()
        self.expect(self.dtype in ("float32", "float64"), f"dtype {self.dtype!r}")
        for j, (o, u) in enumerate(zip(self.outputs, self.unknown)):
            bad = [int(v) for v in (*o.tolist(), u) if not -1 <= v < self.n_outputs]
            self.expect(not bad, f"column {j}: output columns {bad[:5]} are outside "
                                 f"0..{self.n_outputs - 1}")
        return self

    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_features)
        return [ValueType((FLOAT,) * self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(self.dtype)]

    def positions(self, X: np.ndarray) -> np.ndarray:
        """(n, n_features) output column set by each input value (-1: none)."""
        columns = []
        for j in range(self.n_features):
            k = match_categories(X[:, j].astype(np.float64), self.categories[j])
            table = np.append(self.outputs[j], self.unknown[j])  # k == -1 reads the last
            columns.append(table[k])
        return np.stack(columns, axis=1) if columns else np.zeros((len(X), 0), np.int64)

    def reference(self, inputs):
        X = inputs[0]
        out = np.zeros((len(X), self.n_outputs), dtype=self.dtype)
        positions = self.positions(X)
        rows = np.broadcast_to(np.arange(len(X))[:, None], positions.shape)
        hit = positions >= 0
        out[rows[hit], positions[hit]] = 1
        return [out]

    def to_saved(self):
        return ({"n_features": self.n_features, "n_outputs": self.n_outputs, "dtype": self.dtype,
                 "sparse": self.sparse}, self._saved_arrays())

    @classmethod
    def from_saved(cls, meta, arrays):
        categories, outputs = cls._tables_from(meta, arrays)
        return cls(n_features=int(meta["n_features"]), n_outputs=int(meta["n_outputs"]),
                   categories=categories, outputs=outputs,
                   unknown=tuple(arrays["unknown"].tolist()), dtype=str(meta["dtype"]),
                   sparse=bool(meta["sparse"]))


@register_op
@dataclass(frozen=True, eq=False)
class OrdinalEncode(_Encoder):
    """``outputs[j][k]``: the value written for category ``k`` of column ``j``;
    ``unknown[j]``: the value for an unmatched one (NaN allowed). Output: one column per
    input column, in ``dtype``."""

    kind = "ordinal"
    n_features: int
    categories: Tuple[np.ndarray, ...]
    outputs: Tuple[np.ndarray, ...]
    unknown: Tuple[float, ...]
    dtype: str = "float64"

    def __post_init__(self):
        object.__setattr__(self, "categories",
                           tuple(np.ascontiguousarray(c, dtype=np.float64) for c in self.categories))
        object.__setattr__(self, "outputs",
                           tuple(np.ascontiguousarray(o, dtype=np.float64) for o in self.outputs))
        object.__setattr__(self, "unknown", tuple(float(u) for u in self.unknown))

    def validate(self):
        self._check_tables()
        self.expect(self.dtype in ("float32", "float64"), f"dtype {self.dtype!r}")
        return self

    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_features)
        return [ValueType.floats(self.n_features)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(self.dtype)]

    def reference(self, inputs):
        X = inputs[0]
        out = np.empty((len(X), self.n_features), dtype=self.dtype)
        for j in range(self.n_features):
            k = match_categories(X[:, j].astype(np.float64), self.categories[j])
            out[:, j] = np.append(self.outputs[j], self.unknown[j])[k]
        return [out]

    def to_saved(self):
        return ({"n_features": self.n_features, "dtype": self.dtype}, self._saved_arrays())

    @classmethod
    def from_saved(cls, meta, arrays):
        categories, outputs = cls._tables_from(meta, arrays)
        return cls(n_features=int(meta["n_features"]), categories=categories, outputs=outputs,
                   unknown=tuple(arrays["unknown"].tolist()), dtype=str(meta["dtype"]))
