"""The graph IR: typed values and the nodes that compute them.

A model is a graph over named *values*. A value is a block of columns, each with a
*kind*: ``float`` (a number), ``category`` (an integer category code as a number) or
``string`` (a string category, encoded at the input edge to its vocabulary index: no
tensor ever holds a string). The graph's one input value, ``"input"``, holds the
columns the source was fitted on, in order (see ``schema.InputSchema``); every node
reads named values and writes new ones, in topological order. Two values are the
model's results: ``raw`` (scores before the link function, or a transformer's
output) and ``transformed`` (what ``predict_proba``/``predict``/``transform`` show).

A node's payload is an *op*: a frozen dataclass registered with ``register_op`` under
its ``kind``. The op says, with NumPy only:

* ``validate()``: its own arrays are consistent;
* ``output_types(input_types)``: the values it writes, after checking the ones it
  reads (widths, kinds) — the graph's validation calls it at every edge;
* ``output_dtypes(input_dtypes)``: the float dtypes of its outputs for inputs of
  these dtypes (the source's own promotions, which every route repeats);
* ``reference(inputs)``: the NumPy reference of what it computes;
* ``to_saved()`` / ``from_saved(meta, arrays)``: its JSON fields and arrays, for the
  saved format.

Lowerings to Torch and the CPU runtimes are registered by kind in their own packages
(``woodstar.lowering.ops``, ``woodstar.runtimes``); a test checks that every registered
op has both.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Sequence, Tuple

import numpy as np

from ..exceptions import InvalidModelError

__all__ = ["FLOAT", "CATEGORY", "STRING", "KINDS", "ValueType", "Node", "Graph", "Op",
           "register_op", "op_class", "op_kinds", "INPUT"]

FLOAT, CATEGORY, STRING = "float", "category", "string"
KINDS = (FLOAT, CATEGORY, STRING)
INPUT = "input"


@dataclass(frozen=True)
class ValueType:
    """A block of ``width`` columns; ``kinds[i]`` is column ``i``'s kind."""

    kinds: Tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "kinds", tuple(self.kinds))

    @classmethod
    def floats(cls, width: int) -> "ValueType":
        return cls((FLOAT,) * int(width))

    @property
    def width(self) -> int:
        return len(self.kinds)

    def __repr__(self):
        return f"ValueType({self.width} columns: {', '.join(sorted(set(self.kinds))) or 'none'})"


class Op:
    """Base of the ops (node payloads); see the module's docstring for the protocol."""

    kind: str = ""

    def validate(self):
        return self

    def output_types(self, input_types: Sequence[ValueType]) -> List[ValueType]:
        raise NotImplementedError

    def output_dtypes(self, input_dtypes: Sequence[np.dtype]) -> List[np.dtype]:
        """By default: one output, in the first input's dtype."""
        return [np.dtype(input_dtypes[0])]

    def reference(self, inputs: Sequence[np.ndarray]) -> List[np.ndarray]:
        raise NotImplementedError

    def to_saved(self) -> Tuple[dict, Dict[str, np.ndarray]]:
        raise NotImplementedError

    @classmethod
    def from_saved(cls, meta: dict, arrays: Dict[str, np.ndarray]) -> "Op":
        raise NotImplementedError

    # helpers for output_types
    def numeric_input(self, input_types, width):
        """The op's one input value, checked to hold ``width`` numeric columns."""
        (value,) = input_types
        self.expect_width(value, width)
        self.expect_numeric(value)
        return value

    def expect(self, condition, message):
        if not condition:
            raise InvalidModelError(message)

    def expect_width(self, value_type: ValueType, width: int, what="its input"):
        self.expect(value_type.width == width,
                    f"{what} has {value_type.width} columns; this {self.kind} reads {width}")

    def expect_numeric(self, value_type: ValueType, what="its input"):
        strings = [i for i, k in enumerate(value_type.kinds) if k == STRING]
        self.expect(not strings, f"{what} holds string columns {strings[:5]}; "
                                 f"this {self.kind} computes on numbers")


_OPS: Dict[str, type] = {}


def register_op(cls):
    """Class decorator: an op kind, by its ``kind``. Refuses a second class for a kind."""
    kind = getattr(cls, "kind", "")
    if not isinstance(kind, str) or not kind:
        raise TypeError(f"op {cls.__name__} needs a non-empty string `kind`")
    for method in ("output_types", "reference", "to_saved", "from_saved"):
        if getattr(cls, method, None) is getattr(Op, method, None):
            raise TypeError(f"op {cls.__name__} must define `{method}`")
    if kind in _OPS and _OPS[kind] is not cls:
        raise ValueError(f"an op of kind {kind!r} is already registered ({_OPS[kind].__name__})")
    _OPS[kind] = cls
    return cls


def op_class(kind: str) -> type:
    try:
        return _OPS[kind]
    except KeyError:
        raise InvalidModelError(
            f"unknown op kind {kind!r}; registered: {', '.join(sorted(_OPS))}") from None


def op_kinds() -> Tuple[str, ...]:
    return tuple(sorted(_OPS))


@dataclass(frozen=True, eq=False)
class Node:
    name: str
    op: Op
    inputs: Tuple[str, ...]
    outputs: Tuple[str, ...]

    def __post_init__(self):
        object.__setattr__(self, "inputs", tuple(self.inputs))
        object.__setattr__(self, "outputs", tuple(self.outputs))

    @property
    def kind(self) -> str:
        return self.op.kind


@dataclass(frozen=True, eq=False)
class Graph:
    """``input_type`` (the input value's columns), the nodes in topological order,
    and the names of the two result values."""

    input_type: ValueType
    nodes: Tuple[Node, ...]
    raw: str
    transformed: str
    types: Dict[str, ValueType] = field(default=None, repr=False)

    def __post_init__(self):
        object.__setattr__(self, "nodes", tuple(self.nodes))

    def validate(self, owner="the model") -> "Graph":
        """Check every edge in order; fills ``types`` (value name -> ValueType)."""
        def fail(node, message):
            where = f"node {node.name!r} ({node.kind})" if node is not None else "the graph"
            raise InvalidModelError(f"{owner}: {where}: {message}")

        types = {INPUT: self.input_type}
        names = set()
        for node in self.nodes:
            if node.name in names:
                fail(node, "the node name is used twice")
            names.add(node.name)
            if not isinstance(node.op, Op) or op_class(node.op.kind) is not type(node.op):
                fail(node, f"payload {type(node.op).__name__} is not a registered op")
            missing = [v for v in node.inputs if v not in types]
            if missing:
                fail(node, f"reads {missing}, which no earlier node writes")
            try:
                node.op.validate()
                outputs = node.op.output_types([types[v] for v in node.inputs])
            except InvalidModelError as error:
                fail(node, str(error))
            if len(outputs) != len(node.outputs):
                fail(node, f"writes {len(node.outputs)} values; the op gives {len(outputs)}")
            for name, value_type in zip(node.outputs, outputs):
                if name in types:
                    fail(node, f"writes {name!r}, which is already written")
                types[name] = value_type
        for result in (self.raw, self.transformed):
            if result not in types:
                fail(None, f"result {result!r} is not written by any node")
        object.__setattr__(self, "types", types)
        return self

    def dtypes(self, input_dtype) -> Dict[str, np.dtype]:
        """Every value's dtype for an input of ``input_dtype``."""
        dtypes = {INPUT: np.dtype(input_dtype)}
        for node in self.nodes:
            for name, dtype in zip(node.outputs,
                                   node.op.output_dtypes([dtypes[v] for v in node.inputs])):
                dtypes[name] = np.dtype(dtype)
        return dtypes

    def reference(self, X: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
        """The NumPy reference of the whole graph: (raw, transformed)."""
        values = {INPUT: X}
        for node in self.nodes:
            outputs = node.op.reference([values[v] for v in node.inputs])
            values.update(zip(node.outputs, outputs))
        return values[self.raw], values[self.transformed]

    def nodes_of(self, kind: str) -> List[Node]:
        return [n for n in self.nodes if n.kind == kind]

    def consumers(self, value: str) -> List[Node]:
        return [n for n in self.nodes if value in n.inputs]
