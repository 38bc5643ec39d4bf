"""Build a graph node by node: the builder names values and nodes uniquely, so
frontends composing sub-models (a pipeline's steps, a ColumnTransformer's branches)
never pick names by hand, and a sub-model's graph can be spliced in whole."""

from __future__ import annotations

from typing import List, Sequence

from ..exceptions import InvalidModelError
from .graph import INPUT, Graph, Node, Op, ValueType

__all__ = ["GraphBuilder"]


class GraphBuilder:
    def __init__(self, input_type: ValueType):
        self.input_type = input_type
        self.nodes: List[Node] = []
        self._used = {INPUT}
        self._types = {INPUT: input_type}

    def _fresh(self, base: str) -> str:
        base = base or "value"
        name, i = base, 1
        while name in self._used:
            i += 1
            name = f"{base}_{i}"
        self._used.add(name)
        return name

    def type_of(self, value: str) -> ValueType:
        return self._types[value]

    def add(self, op: Op, inputs: Sequence[str], name: str = "") -> List[str]:
        """Add a node computing ``op`` on ``inputs``; returns its output values' names.
        The op is checked against the inputs here, so a frontend fails at the node."""
        node_name = self._fresh(name or op.kind)
        try:
            types = op.validate().output_types([self._types[v] for v in inputs])
        except InvalidModelError as error:
            raise InvalidModelError(f"node {node_name!r} ({op.kind}): {error}") from None
        outputs = [self._fresh(f"{node_name}:{i}" if len(types) > 1 else node_name)
                   for i in range(len(types))]
        self._types.update(zip(outputs, types))
        self.nodes.append(Node(node_name, op, tuple(inputs), tuple(outputs)))
        return outputs

    def splice(self, graph: Graph, input_value: str, prefix: str = ""):
        """Add every node of ``graph`` reading ``input_value`` for its input; returns
        the names of its (raw, transformed) results here."""
        renamed = {INPUT: input_value}
        for node in graph.nodes:
            outputs = self.add(node.op, [renamed[v] for v in node.inputs],
                               name=f"{prefix}{node.name}")
            renamed.update(zip(node.outputs, outputs))
        return renamed[graph.raw], renamed[graph.transformed]

    def build(self, raw: str, transformed: str) -> Graph:
        return Graph(self.input_type, tuple(self.nodes), raw, transformed).validate()
