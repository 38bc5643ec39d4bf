"""The graph's input tensors: which are read, where their columns lie in woodstar's
input matrix, and the schema and head fields that tell the container's edge how to
build that matrix (``woodstar/_onnx_feeds.py``).

Every input is a float, double, int64 or string tensor of shape (n, k) with a known
k, or (n,); they lie side by side in the graph's order. A float input is rounded to
float32 as ONNX Runtime's tensor holds it; a string input's columns are codes in the
schema's vocabulary of that column (``tensors.py``).
"""

from ..._onnx_feeds import column_names
from ...exceptions import MissingConverter, unsupported_message
from ...ir import FLOAT, INPUT, STRING, Select
from ...ir.families.onnx_ops import OnnxCast
from .tensors import Tensor, write_tensor

__all__ = ["GraphInput", "graph_inputs", "bind_inputs", "single_float_input"]

_ELEMENTS = {1: "float", 11: "double", 7: "int64", 8: "string"}


class GraphInput:
    def __init__(self, name, element, width, rank, start):
        self.name, self.element, self.width, self.rank, self.start = \
            name, element, width, rank, start


def _refuse(what, value, choices):
    raise MissingConverter(unsupported_message("the ONNX graph", what, value, choices))


def graph_inputs(graph):
    """The graph's input tensors (initializers listed as inputs are constants)."""
    initializers = {i.name for i in graph.initializer}
    found, start = [], 0
    for value in graph.input:
        if value.name in initializers:
            continue
        tensor = value.type.tensor_type
        if not value.type.HasField("tensor_type") or tensor.elem_type not in _ELEMENTS:
            _refuse(f"input {value.name!r} of element type", tensor.elem_type,
                    "float (1), double (11), int64 (7) or string (8) tensors")
        dims = tensor.shape.dim
        if len(dims) not in (1, 2) or (len(dims) == 2 and not dims[1].dim_value):
            _refuse(f"input {value.name!r} of shape",
                    [d.dim_value or d.dim_param or "?" for d in dims],
                    "(n, k) with a known k, or (n,)")
        width = int(dims[1].dim_value) if len(dims) == 2 else 1
        found.append(GraphInput(value.name, _ELEMENTS[tensor.elem_type], width, len(dims), start))
        start += width
    if not found:
        _refuse("number of inputs", 0, "one or more input tensors")
    names = column_names([(i.name, i.element, i.width) for i in found])
    if len(set(names)) != len(names):
        _refuse("inputs whose DataFrame columns repeat", names,
                "inputs named so that 'x' (width 1) and 'x_0'.. (width k) differ")
    return found


def single_float_input(inputs):
    """The one float/double (n, k) input read straight from woodstar's input, as before
    several inputs were read (the trees and the NaN refusals read it there)."""
    return len(inputs) == 1 and inputs[0].element in ("float", "double") and inputs[0].rank == 2


def schema_columns(inputs):
    names = column_names([(i.name, i.element, i.width) for i in inputs])
    kinds = [STRING if i.element == "string" else FLOAT for i in inputs for _ in range(i.width)]
    return names, kinds


def bind_inputs(state, inputs, n_features):
    """Each input's value: its columns of woodstar's input (a float input rounded to
    float32, a double one held as float64)."""
    for graph_input in inputs:
        columns = range(graph_input.start, graph_input.start + graph_input.width)
        value = INPUT
        if len(inputs) > 1:
            (value,) = state.builder.add(Select(n_features=n_features, indices=tuple(columns)),
                                         [INPUT], name=f"input:{graph_input.name}")
        shape = (graph_input.width,) if graph_input.rank == 2 else ()
        element = {"float": "float32", "double": "float64"}.get(graph_input.element,
                                                                 graph_input.element)
        codebooks = None
        if element in ("float32", "float64"):
            (value,) = state.builder.add(OnnxCast(width=graph_input.width, dtype=element),
                                         [value], name=f"input:{graph_input.name}:{element}")
        else:
            codebooks = [("input", j) for j in columns]
        write_tensor(state, graph_input.name, Tensor(value, element, shape, codebooks))


def input_blocks(inputs):
    return tuple((i.name, i.element, i.width) for i in inputs)


def feature_names(inputs):
    """The DataFrame columns (several inputs), else None: one input's DataFrame is read
    by position, as any single-input model's."""
    if len(inputs) == 1:
        return None
    return tuple(schema_columns(inputs)[0])

