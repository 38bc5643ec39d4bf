"""Woodstar's intermediate representation: plain data, no torch.

A converted model is a ``ModelIR``: the estimator's API (``head``), the columns it
reads (``schema``) and the ``graph`` of ops that computes its results (see
``graph.py``). Importing this package registers the built-in ops.
"""

from dataclasses import dataclass
from functools import cached_property
from typing import Optional, Tuple

from ..exceptions import InvalidModelError
from .graph_builder import GraphBuilder
from .column_ops import ColumnOps
from .columns import Concat, Select
from .encoders import OneHotEncode, OrdinalEncode
from .graph import CATEGORY, FLOAT, INPUT, STRING, Graph, Node, Op, ValueType, op_kinds, register_op
from .head import Head
from .linear import LinearModel
from .missing_indicator import MissingIndicator
from .schema import InputColumn, InputSchema, SchemaBuilder
from .tree_ensemble import LE, LT, TreeEnsemble
from . import families  # noqa: E402,F401  (registers the ops of ir/families/)

__all__ = ["Head", "TreeEnsemble", "LinearModel", "ColumnOps", "Select", "Concat",
           "OneHotEncode", "OrdinalEncode", "MissingIndicator", "ModelIR", "Graph", "Node",
           "Op", "ValueType", "GraphBuilder", "InputSchema", "InputColumn", "SchemaBuilder",
           "register_op", "op_kinds", "chain", "LE", "LT", "FLOAT", "CATEGORY", "STRING", "INPUT"]

@dataclass(frozen=True, eq=False)
class ModelIR:
    """What a frontend returns: ``head`` (the estimator's methods), ``schema`` (the
    input columns) and ``graph``."""

    head: Head
    graph: Graph
    schema: Optional[InputSchema] = None

    def __post_init__(self):
        if self.schema is None:
            names = self.head.feature_names or tuple(str(i) for i in range(self.head.n_features))
            object.__setattr__(self, "schema", InputSchema.numeric(names))

    # ------------------------------------------------------------- views of the graph
    def _only(self, kind):
        nodes = self.graph.nodes_of(kind)
        return nodes[0].op if len(nodes) == 1 else None

    @cached_property
    def ensemble(self) -> Optional[TreeEnsemble]:
        """The tree ensemble, where the graph holds exactly one."""
        return self._only("trees")

    @cached_property
    def linear(self) -> Optional[LinearModel]:
        """The linear model, where the graph holds exactly one."""
        return self._only("linear")

    @cached_property
    def final(self):
        """The op that writes the raw scores (None when the raw result is the input)."""
        for node in self.graph.nodes:
            if self.graph.raw in node.outputs:
                return node.op
        return None

    @cached_property
    def steps(self) -> Tuple[ColumnOps, ...]:
        """The column-wise ops, in order (every one, wherever it sits)."""
        return tuple(n.op for n in self.graph.nodes_of("column_ops"))

    @cached_property
    def follows_input_dtype(self) -> bool:
        """Whether the source computes in the input's float dtype (scalers keep float32
        as float32; linear models multiply in the input's dtype), rather than rounding
        every input to one precision as the tree libraries do."""
        first = self.graph.consumers("input")
        return not (len(first) == 1 and first[0].kind == "trees")

    @cached_property
    def input_precision(self) -> str:
        """The precision the source reads its input in, first thing: the trees' own
        when they read the input, else float64."""
        first = self.graph.consumers("input")
        if len(first) == 1 and first[0].kind == "trees":
            return first[0].op.input_precision
        return "float64"

    def validate(self) -> "ModelIR":
        def fail(message):
            raise InvalidModelError(f"{self.head.estimator}: {message}")

        self.head.validate()
        self.schema.validate()
        if len(self.schema.columns) != self.head.n_features:
            fail(f"the schema has {len(self.schema.columns)} columns but the estimator "
                 f"takes {self.head.n_features}")
        if self.graph.input_type != self.schema.value_type:
            fail(f"the graph reads {self.graph.input_type} but the schema gives "
                 f"{self.schema.value_type}")
        self.graph.validate(self.head.estimator)
        if self.final is None and self.head.task != "transform":
            fail("only a transformer may return its input unchanged")
        return self


def chain(head: Head, steps=(), ensemble=None, linear=None, schema=None) -> ModelIR:
    """A model that is a chain: column-wise ``steps``, then the trees or the linear
    model (or neither: a transformer)."""
    width = head.n_features
    kinds = schema.value_type.kinds if schema is not None else (FLOAT,) * width
    builder = GraphBuilder(ValueType(kinds))
    value = INPUT
    for step in steps:
        (value,) = builder.add(step, [value], name=step.name)
    final = ensemble if ensemble is not None else linear
    if final is not None:
        raw, transformed = builder.add(final, [value], name=final.kind)
    else:
        raw = transformed = value
    return ModelIR(head=head, graph=builder.build(raw, transformed), schema=schema)
