"""The input schema: the columns a source was fitted on, by name and kind, and how the
input edge turns each into numbers.

Every route takes one float matrix. The container's edge (``woodstar/_input.py``)
builds it from what the user passes, column by column, following the schema:

* ``float`` columns: the numbers, as the source reads them;
* ``string`` columns: the index of the value in ``vocabulary``; ``None`` is
  ``NONE_CODE`` and NaN stays NaN (scikit-learn keeps the two apart); a string not in
  the vocabulary is ``UNKNOWN_CODE``, or the source's own error where ``allowed`` says
  the source refuses it;
* ``category`` columns with ``category_values`` (LightGBM's and XGBoost's pandas
  categories): a DataFrame's values become their code in that list, as those
  libraries re-code a DataFrame; an array is read as codes already, as they read it.
  Missing values become NaN; values outside the list become NaN (LightGBM) or are
  refused (``unseen_category="error"``, XGBoost). A DataFrame column that is not of
  category dtype is refused, as both libraries refuse it.

``allowed`` (codes or values) and ``allowed_missing`` record a check that the source
performs before computing (an encoder with ``handle_unknown="error"``): the edge
raises the source's ``ValueError``, naming the column.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Optional, Tuple

import numpy as np

from ..exceptions import InvalidModelError
from .graph import CATEGORY, FLOAT, KINDS, STRING, ValueType

__all__ = ["InputColumn", "InputSchema", "UNKNOWN_CODE", "NONE_CODE", "SchemaBuilder"]

UNKNOWN_CODE = -1.0
NONE_CODE = -2.0


@dataclass(frozen=True, eq=False)
class InputColumn:
    name: str
    kind: str = FLOAT
    vocabulary: Optional[Tuple[str, ...]] = None  # string columns: code i is vocabulary[i]
    category_values: Optional[tuple] = None  # category columns re-coded from DataFrames
    unseen_category: str = "missing"  # a DataFrame value outside them: "missing" or "error"
    positive_only: bool = False  # the source refuses values <= 0 (Box-Cox)
    allowed: Optional[np.ndarray] = None  # values (codes) the source accepts, sorted
    allowed_missing: bool = True
    check_owner: str = ""  # the estimator whose check ``allowed`` repeats

    def __post_init__(self):
        if self.vocabulary is not None:
            object.__setattr__(self, "vocabulary", tuple(self.vocabulary))
        if self.category_values is not None:
            object.__setattr__(self, "category_values", tuple(self.category_values))
        if self.allowed is not None:
            object.__setattr__(self, "allowed", np.sort(np.asarray(self.allowed, np.float64)))

    def validate(self):
        if self.kind not in KINDS:
            raise InvalidModelError(f"input column {self.name!r}: kind {self.kind!r} not in {KINDS}")
        if (self.kind == STRING) != (self.vocabulary is not None):
            raise InvalidModelError(f"input column {self.name!r}: a string column needs a "
                                    f"vocabulary, and only a string column has one")
        if self.vocabulary is not None and not all(isinstance(v, str) for v in self.vocabulary):
            raise InvalidModelError(f"input column {self.name!r}: the vocabulary holds non-strings")
        if self.vocabulary is not None and len(set(self.vocabulary)) != len(self.vocabulary):
            raise InvalidModelError(f"input column {self.name!r}: the vocabulary repeats a value")
        return self


@dataclass(frozen=True, eq=False)
class InputSchema:
    columns: Tuple[InputColumn, ...]

    def __post_init__(self):
        object.__setattr__(self, "columns", tuple(self.columns))

    @classmethod
    def numeric(cls, names) -> "InputSchema":
        return cls(tuple(InputColumn(str(n)) for n in names))

    @property
    def names(self) -> Tuple[str, ...]:
        return tuple(c.name for c in self.columns)

    @property
    def value_type(self) -> ValueType:
        return ValueType(tuple(c.kind for c in self.columns))

    @cached_property
    def needs_encoding(self) -> bool:
        """Whether any column is more than a plain number at the edge."""
        return any(c.kind == STRING or c.category_values is not None or c.allowed is not None
                   or not c.allowed_missing or c.positive_only for c in self.columns)

    @property
    def string_columns(self) -> Tuple[int, ...]:
        return tuple(i for i, c in enumerate(self.columns) if c.kind == STRING)

    def validate(self) -> "InputSchema":
        for column in self.columns:
            column.validate()
        return self


class SchemaBuilder:
    """Collects the schema while a frontend builds the graph: a string column's
    vocabulary grows as ops ask for the code of a value, so every op reading the
    column shares one encoding."""

    def __init__(self, names, kinds=None):
        names = [str(n) for n in names]
        kinds = list(kinds) if kinds is not None else [FLOAT] * len(names)
        self._names = names
        self._kinds = kinds
        self._vocabularies = {i: [] for i, k in enumerate(kinds) if k == STRING}
        self._extra = {i: {} for i in range(len(names))}

    @property
    def value_type(self) -> ValueType:
        return ValueType(tuple(self._kinds))

    def code(self, column: int, value) -> float:
        """The code of ``value`` in string column ``column``, adding it when new."""
        if value is None:
            return NONE_CODE
        if isinstance(value, float) and np.isnan(value):
            return np.nan
        if not isinstance(value, str):
            raise InvalidModelError(
                f"column {self._names[column]!r}: category {value!r} is not a string")
        vocabulary = self._vocabularies[column]
        if value not in vocabulary:
            vocabulary.append(value)
        return float(vocabulary.index(value))

    def set(self, column: int, **fields):
        """Extra fields of one column (``category_values``, ``allowed``, ...)."""
        self._extra[column].update(fields)

    def build(self) -> InputSchema:
        return InputSchema(tuple(
            InputColumn(name=name, kind=kind,
                        vocabulary=tuple(self._vocabularies[i]) if kind == STRING else None,
                        **self._extra[i])
            for i, (name, kind) in enumerate(zip(self._names, self._kinds)))).validate()
