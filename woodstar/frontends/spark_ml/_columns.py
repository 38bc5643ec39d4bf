"""The Spark DataFrame columns a pipeline reads and writes, as graph values.

A Spark column is a scalar or a vector; here it is a ``Ref``: a graph value and the
positions of its columns in that value. Input columns are the columns a stage reads
before any stage writes them; they become the input schema, in the order first read.
"""

from dataclasses import dataclass
from typing import Tuple

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, STRING, Concat, GraphBuilder, SchemaBuilder, Select
from ...ir.families.spark_ops import SparkFloat64

__all__ = ["Ref", "Columns", "param"]


def param(stage, name, default=None):
    """A param's value (set or default), or ``default`` where the stage lacks it."""
    if stage.hasParam(name) and stage.isDefined(name):
        return stage.getOrDefault(name)
    return default


@dataclass(frozen=True)
class Ref:
    value: str
    indices: Tuple[int, ...]
    input_column: int = -1  # the schema column it is, unchanged (-1: computed)

    @property
    def width(self):
        return len(self.indices)


class Columns:
    """The graph, the schema and the Spark column names, built together."""

    def __init__(self, names, kinds):
        self.schema = SchemaBuilder(names, kinds)
        self.graph = GraphBuilder(self.schema.value_type)
        self.names = list(names)
        self.refs = {}

    def bind_inputs(self, groups):
        """``groups``: Spark column name -> the schema columns it is made of. Every stage
        reads the input widened to float64 (Spark computes in double)."""
        (wide,) = self.graph.add(SparkFloat64(len(self.names)), [INPUT], "float64")
        for name, columns in groups.items():
            columns = tuple(columns)
            self.refs[name] = Ref(wide, columns, columns[0] if len(columns) == 1 else -1)

    def ref(self, name, owner):
        try:
            return self.refs[name]
        except KeyError:
            raise MissingConverter(unsupported_message(
                owner, "reading a column no stage writes", name, sorted(self.refs))) from None

    def gather(self, refs, name="columns"):
        """One graph value holding the columns of ``refs`` side by side."""
        parts = []
        for ref in refs:
            width = self.graph.type_of(ref.value).width
            if list(ref.indices) == list(range(width)):
                parts.append(ref.value)
            else:
                (value,) = self.graph.add(Select(width, ref.indices), [ref.value], f"{name}:select")
                parts.append(value)
        if len(parts) == 1:
            return parts[0]
        widths = [self.graph.type_of(p).width for p in parts]
        (value,) = self.graph.add(Concat(tuple(widths)), parts, name)
        return value

    def add(self, op, inputs, name):
        return self.graph.add(op, inputs, name)

    def write(self, name, value, indices=None):
        if indices is None:
            indices = range(self.graph.type_of(value).width)
        self.refs[name] = Ref(value, tuple(indices))

    def code(self, ref, label, owner):
        """The schema code of string ``label`` in the input column ``ref`` is."""
        if ref.input_column < 0 or self.schema.value_type.kinds[ref.input_column] != STRING:
            raise MissingConverter(unsupported_message(
                owner, "string labels on a computed column", label, "input string columns"))
        return self.schema.code(ref.input_column, label)

    def build(self, raw, transformed):
        return self.graph.build(raw, transformed), self.schema.build()
