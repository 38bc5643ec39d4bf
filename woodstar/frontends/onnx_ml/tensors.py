"""Typed tensors: ONNX values that are not a plain (n, columns) float block.

woodstar's values are float columns. An int64 tensor's columns hold its integers,
exactly: the input edge refuses magnitudes above 2**53, so do LabelEncoder values,
and a float truncated to int64 is an integer float64 holds already. A string
tensor's columns hold codes, each column with its codebook: ``("input", j)``, the index in the vocabulary of input column ``j`` (the schema's,
filled as encoders ask for strings), or ``("table", strings)``, the index in a
constant list (a LabelEncoder's string values). A tensor of more than two
dimensions (a OneHotEncoder's (n, k, categories) output) keeps its non-batch
``shape`` and holds its elements in row-major order.

A float tensor of shape (n, w) or (n,) is handed back as the package's plain
``features`` role, which every other handler reads; the rest travel as role
``"tensor"``. ``Concat``, ``Reshape``, ``Gather``, ``ArrayFeatureExtractor``,
``Identity`` and ``Cast`` read both.
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import Concat, OrdinalEncode, Select
from ...ir.families.onnx_ops import OnnxCast, OnnxTruncateToInt64
from ._attributes import attributes, refuse

__all__ = ["Tensor", "read_tensor", "write_tensor", "typed", "handle_gather", "table_index",
           "HANDLER_PAIRS", "FLOATS", "EXACT_INT", "truncated"]

FLOATS = ("float32", "float64")
EXACT_INT = 2.0 ** 53
_ONNX_TYPES = {1: "float32", 11: "float64", 7: "int64", 8: "string"}


class Tensor:
    """``value``: the woodstar value; ``element``: float32, float64, int64 or string;
    ``shape``: the non-batch dimensions; ``codebooks`` (strings and int64s): one per
    element, ``("input", j)`` where it is input column ``j`` unchanged, a string's
    ``("table", strings)``, else None; ``table`` (int64): the sorted values it can
    hold, where a LabelEncoder wrote them."""

    def __init__(self, value, element, shape, codebooks=None, table=None):
        self.value, self.element, self.shape = value, element, tuple(int(d) for d in shape)
        self.codebooks = None if codebooks is None else tuple(codebooks)
        self.table = table

    @property
    def width(self):
        return int(np.prod(self.shape, dtype=np.int64))


def _features_class():
    from . import _Features  # the package's value record (imported late: a cycle)

    return _Features


def read_tensor(state, node, index):
    """Input ``index`` of ``node`` as a Tensor (a float block rounded to its type)."""
    role, payload = state.read(node, index, ("features", "tensor"))
    if role == "features":
        payload = state.rounded(payload, node)
        shape = () if getattr(payload, "one_dimensional", False) else (payload.width,)
        payload = Tensor(payload.value, str(payload.dtype), shape)
    return payload


def write_tensor(state, name, tensor):
    if tensor.element in FLOATS and len(tensor.shape) <= 1:
        features = _features_class()(tensor.value, np.dtype(tensor.element), tensor.width)
        if tensor.shape == ():
            features.one_dimensional = True
        state.values[name] = ("features", features)
    else:
        state.values[name] = ("tensor", tensor)


def typed(plain_handler, tensor_handler):
    """``tensor_handler`` where an input is a typed tensor (or its ``takes`` says so),
    else the plain handler."""
    takes = getattr(tensor_handler, "takes", None)

    def handler(node, state):
        if any(state.values.get(name, ("",))[0] == "tensor" for name in node.input) \
                or (takes is not None and takes(node, state)):
            return tensor_handler(node, state)
        return plain_handler(node, state)
    handler.__name__ = plain_handler.__name__
    return handler


def _positions(shape):
    return np.arange(int(np.prod(shape, dtype=np.int64))).reshape(shape)


def _axis(node, axis, rank):
    """A non-batch axis of a tensor of ``rank`` dimensions (batch included), as an
    index into its ``shape``."""
    if not -rank <= axis < rank or axis % rank == 0:
        refuse(node, "axis", axis, f"1..{rank - 1} (or negative): an axis other than the rows")
    return axis % rank - 1


def _moved(state, node, tensor, order, shape, suffix=""):
    """``tensor``'s elements at flat positions ``order``, as a tensor of ``shape``."""
    order = [int(i) for i in np.asarray(order).reshape(-1)]
    value = tensor.value
    if order != list(range(tensor.width)):
        (value,) = state.add(Select(n_features=tensor.width, indices=tuple(order)), [value],
                             node, suffix)
    codebooks = None if tensor.codebooks is None else [tensor.codebooks[i] for i in order]
    return Tensor(value, tensor.element, shape, codebooks, tensor.table)


def _concat_tensors(node, state):
    parts = [read_tensor(state, node, i) for i in range(len(node.input))]
    if len({p.element for p in parts}) != 1:
        refuse(node, "inputs of several element types", sorted({p.element for p in parts}),
               "one element type")
    ranks = {len(p.shape) for p in parts}
    if len(ranks) != 1 or ranks == {0}:
        refuse(node, "inputs of shapes", [p.shape for p in parts], "tensors of one rank >= 2")
    axis = _axis(node, int(attributes(node).get("axis", 1)), len(parts[0].shape) + 1)
    others = {p.shape[:axis] + p.shape[axis + 1:] for p in parts}
    if len(others) != 1:
        refuse(node, "inputs of shapes", [p.shape for p in parts],
               f"shapes that agree except on axis {axis + 1}")
    offsets = np.cumsum([0] + [p.width for p in parts])
    order = np.concatenate([_positions(p.shape) + o for p, o in zip(parts, offsets)], axis=axis)
    first = parts[0]
    (value,) = state.add(Concat(widths=tuple(p.width for p in parts)), [p.value for p in parts],
                         node, ":columns")
    codebooks = None if any(p.codebooks is None for p in parts) \
        else [c for p in parts for c in p.codebooks]
    tables = [p.table for p in parts]
    table = None if first.element != "int64" or any(t is None for t in tables) \
        else np.unique(np.concatenate(tables))
    joined = Tensor(value, first.element, (int(offsets[-1]),), codebooks, table)
    write_tensor(state, node.output[0], _moved(state, node, joined, order, order.shape))


def _constant(state, node, index, what):
    value = state.constants.get(node.input[index]) if len(node.input) > index else None
    if value is None or value.dtype.kind not in "iu":
        refuse(node, f"{what} that is not a constant of integers", node.input[index:index + 1],
               "an int64 initializer or Constant")
    return value.astype(np.int64)


def _reshape_tensor(node, state):
    tensor = read_tensor(state, node, 0)
    shape = [int(d) for d in _constant(state, node, 1, "a shape").reshape(-1)]
    if attributes(node).get("allowzero", 0):
        refuse(node, "allowzero", 1, "0")
    if not shape or shape[0] not in (0, -1):
        refuse(node, "a reshape to", shape, "[-1 or 0, dims...]: one that keeps the rows")
    # a 0 copies the input's dimension at its place; one -1 is inferred
    rest = [tensor.shape[i] if d == 0 and i < len(tensor.shape) else d
            for i, d in enumerate(shape[1:])]
    if shape[0] == 0 and rest.count(-1) == 1:
        known = int(np.prod([d for d in rest if d != -1], dtype=np.int64))
        if known > 0 and tensor.width % known == 0:
            rest = [tensor.width // known if d == -1 else d for d in rest]
    if any(d <= 0 for d in rest) or int(np.prod(rest, dtype=np.int64)) != tensor.width:
        refuse(node, f"a reshape of shape (n, {', '.join(map(str, tensor.shape))}) to", shape,
               "a shape that keeps the rows: [-1 or 0, dims...] of the same element count")
    write_tensor(state, node.output[0],
                 Tensor(tensor.value, tensor.element, rest, tensor.codebooks, tensor.table))


def _identity_tensor(node, state):
    write_tensor(state, node.output[0], read_tensor(state, node, 0))


def handle_gather(node, state):
    """Gather by constant indices along a non-batch axis (negative indices count from
    the end, as ONNX Runtime reads them)."""
    tensor = read_tensor(state, node, 0)
    indices = _constant(state, node, 1, "indices")
    axis = _axis(node, int(attributes(node).get("axis", 0)), len(tensor.shape) + 1)
    size = tensor.shape[axis]
    if indices.size and (indices.min() < -size or indices.max() >= size):
        refuse(node, "indices", indices.reshape(-1).tolist(), f"-{size}..{size - 1}")
    order = np.take(_positions(tensor.shape), np.where(indices < 0, indices + size, indices),
                    axis=axis)
    write_tensor(state, node.output[0], _moved(state, node, tensor, order, order.shape))


def _array_feature_extractor_tensor(node, state):
    """The elements at constant indices of the last axis (ONNX Runtime refuses an index
    out of range)."""
    tensor = read_tensor(state, node, 0)
    if not tensor.shape:
        refuse(node, "an input of shape", "(n,)", "a tensor of two or more dimensions")
    indices = _constant(state, node, 1, "indices").reshape(-1)
    size = tensor.shape[-1]
    if not indices.size or indices.min() < 0 or indices.max() >= size:
        refuse(node, "indices", indices.tolist(), f"0..{size - 1}")
    order = np.take(_positions(tensor.shape), indices, axis=len(tensor.shape) - 1)
    write_tensor(state, node.output[0], _moved(state, node, tensor, order, order.shape))


def truncated(state, node, tensor):
    """A float tensor as ONNX Runtime converts it to int64 (``OnnxTruncateToInt64``)."""
    (value,) = state.add(OnnxTruncateToInt64(width=tensor.width), [tensor.value], node, ":int64")
    return Tensor(value, "int64", tensor.shape, [None] * tensor.width)


def _cast_tensor(node, state):
    """int64 to float or double (one rounding of the exact integer), float or double to
    int64 (toward zero, ONNX Runtime's INT64_MIN for NaN and out-of-range values), and
    a Cast to the type a tensor already has. Casts to and from strings are refused."""
    tensor = read_tensor(state, node, 0)
    to = _ONNX_TYPES.get(attributes(node).get("to"))
    if to == tensor.element:
        return write_tensor(state, node.output[0], tensor)
    if tensor.element in ("int64",) + FLOATS and to in FLOATS:
        (value,) = state.add(OnnxCast(width=tensor.width, dtype=to), [tensor.value], node)
        return write_tensor(state, node.output[0], Tensor(value, to, tensor.shape))
    if tensor.element in FLOATS and to == "int64":
        return write_tensor(state, node.output[0], truncated(state, node, tensor))
    refuse(node, f"a Cast of {tensor.element} to element type", attributes(node).get("to"),
           "between float (1), double (11) and int64 (7), or to the tensor's own type")


# float features cast to int64 are read here too (the package's Cast refuses them)
_cast_tensor.takes = lambda node, state: attributes(node).get("to") == 7 and \
    state.values.get(node.input[0], ("",))[0] == "features"


def table_index(state, name, tensor):
    """For a graph output ``name`` holding an int64 or string tensor of one column: a
    value holding each row's index in ``labels`` (the values it can hold), and
    ``labels``."""
    def refuse_output(what, value, choices):
        raise MissingConverter(unsupported_message(f"the ONNX graph's output {name!r}", what,
                                                   value, choices))

    if tensor.element in FLOATS:
        refuse_output("a float tensor of shape", ("n",) + tensor.shape, "(n, k) or (n,)")
    if tensor.width != 1:
        refuse_output(f"{tensor.element} values of shape", ("n",) + tensor.shape,
                      "one column: (n, 1) or (n,)")
    source = tensor.codebooks[0] if tensor.codebooks is not None else None
    if tensor.element == "string":
        if source is None or source[0] != "table":
            refuse_output("strings that are", "the input's own", "strings a LabelEncoder writes")
        return tensor.value, np.asarray(source[1], dtype=object)
    if tensor.table is None:
        refuse_output("int64 values that are", "unbounded (not a LabelEncoder's)",
                      "integers a LabelEncoder writes")
    labels = np.asarray(tensor.table, dtype=np.int64)
    op = OrdinalEncode(n_features=1, categories=(labels.astype(np.float64),),
                       outputs=(np.arange(len(labels), dtype=np.float64),),
                       unknown=(np.nan,), dtype="float64")
    (value,) = state.builder.add(op, [tensor.value], name=f"{name}:label_index")
    return value, labels


HANDLER_PAIRS = {"Concat": _concat_tensors, "Reshape": _reshape_tensor,
                 "Identity": _identity_tensor, "Cast": _cast_tensor,
                 "ArrayFeatureExtractor": _array_feature_extractor_tensor}
