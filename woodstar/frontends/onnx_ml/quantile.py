"""skl2onnx's QuantileTransformer graph (``output_distribution="uniform"``; skl2onnx
writes no graph for the normal output) read as one ``onnx_quantile`` op.

The graph is a binary search written out node by node: ``IsNaN``/``Not``/``Where`` of
the input, int64 indices into flattened per-column tables (``Cast``, ``Mul`` by 0,
``Add`` of column offsets, ``Flatten``), ``log2(size)`` rounds of ``Gather``,
``GreaterOrEqual`` and ``Where`` with the step halved by ``Div``/``Cast``, then the
interpolation (``Sub``, ``Div``, ``LessOrEqual``, ``IsNaN``, ``Or``, ``Mul``, ``Add``),
done once on x and once on -x, and ``Equal`` to the first and last quantiles before a
``Reshape`` to the input's ``Shape``. ``quantile_reader`` matches that whole graph from
the ``IsNaN`` of a float block to the ``Reshape`` against a template of the same
operators, wiring, attributes and constants, takes the tables from the matched
constants and marks the nodes consumed; any other use of ``IsNaN`` is refused."""

import numpy as np

from ...ir.families.onnx_math import OnnxQuantile
from ._attributes import attributes, refuse
from .plain_ops import features_class, inner_shape, reading_block

__all__ = ["quantile_reader"]

_INT64 = 7  # onnx.TensorProto.INT64
_EXPECTED = ("skl2onnx's QuantileTransformer graph (IsNaN of the input, a binary search "
             "over Gathered constant tables, the interpolation, Equal to the end quantiles, "
             "Reshape to the input's Shape)")


class _Node:
    """A template node: an operator, its inputs (templates) and its attributes."""

    def __init__(self, op_type, *inputs, **attrs):
        self.op_type, self.inputs, self.attrs = op_type, inputs, attrs


class _Constant:
    """A template constant: an initializer bound to ``role``."""

    def __init__(self, role):
        self.role = role


_INPUT = object()


def _interpolation(x, quantiles, references, rounds):
    """The template of one interpolation (x ascending, or -x with the negated tables)."""
    flat = _Node("Flatten", x, axis=0)
    zero_i = _Constant("zero_i")
    index = _Node("Flatten", _Node("Add", _Node("Mul", _Node("Cast", x, to=_INT64), zero_i),
                                   _Constant("offsets")), axis=0)
    step = _Node("Flatten", _Node("Add", _Node("Mul", index, zero_i), _Constant("half_size")))
    table = _Constant(quantiles)
    for _ in range(rounds):
        candidate = _Node("Add", index, step)
        moves = _Node("GreaterOrEqual", flat, _Node("Gather", table, candidate, axis=0))
        index = _Node("Where", moves, candidate, index)
        step = _Node("Cast", _Node("Div", step, _Constant("two_i")), to=_INT64)
    above = _Node("Add", index, _Constant("one_i"))
    q_low, q_high = _Node("Gather", table, index, axis=0), _Node("Gather", table, above, axis=0)
    r_table = _Constant(references)
    r_low = _Node("Gather", r_table, index, axis=0)
    r_high = _Node("Gather", r_table, above, axis=0)
    zero = _Constant("zero")
    delta_q = _Node("Sub", q_high, q_low)
    slope = _Node("Div", _Node("Sub", r_high, r_low), delta_q)
    invalid = _Node("Or", _Node("LessOrEqual", delta_q, zero), _Node("IsNaN", slope))
    slope = _Node("Where", invalid, zero, slope)
    between = _Node("Add", r_low, _Node("Mul", slope, _Node("Sub", flat, q_low)))
    result = _Node("Where", _Node("GreaterOrEqual", flat, q_high), r_high,
                   _Node("Where", _Node("LessOrEqual", flat, q_low), r_low, between))
    return result, step  # the last halved step: a dead end the graph still holds


def _template(rounds):
    """The whole graph's template and its dead ends, for tables of ``2**rounds + 1``."""
    x = _Node("Where", _Node("Not", _Node("IsNaN", _INPUT)), _INPUT, _INPUT)
    up, dead_up = _interpolation(x, "quantiles", "references", rounds)
    down, dead_down = _interpolation(_Node("Neg", x), "quantiles_neg", "references_neg", rounds)
    half = _Node("Mul", _Node("Sub", up, down), _Constant("half"))
    at_low = _Node("Where", _Node("Flatten", _Node("Equal", x, _Constant("low")), axis=0),
                   _Node("Mul", half, _Constant("zero")), half)
    out = _Node("Where", _Node("Flatten", _Node("Equal", x, _Constant("high")), axis=0),
                _Constant("one"), at_low)
    return _Node("Reshape", out, _Node("Shape", x)), (dead_up, dead_down)


class _Matcher:
    def __init__(self, state, input_name):
        self.state, self.input_name = state, input_name
        self.producers = {o: n for n in state.graph.node for o in n.output}
        self.bound = {}  # id(template) -> value name
        self.roles = {}  # constant role -> initializer name
        self.nodes = []

    def match(self, name, template):
        if id(template) in self.bound:
            return self.bound[id(template)] == name
        if template is _INPUT:
            ok = name == self.input_name
        elif isinstance(template, _Constant):
            ok = name in self.state.constants and name not in self.producers and \
                self.roles.setdefault(template.role, name) == name
        else:
            node = self.producers.get(name)
            ok = node is not None and node.domain in ("", "ai.onnx") and \
                node.op_type == template.op_type and len(node.output) == 1 and \
                len(node.input) == len(template.inputs) and \
                _same_attributes(attributes(node), template.attrs) and \
                all(self.match(i, t) for i, t in zip(node.input, template.inputs))
            if ok:
                self.nodes.append(node)
        if ok:
            self.bound[id(template)] = name
        return ok

    def dead_end(self, template):
        """The node computing ``template`` (a halved step no node reads) from its bound
        inputs, or None."""
        inner = template.inputs[0]  # Cast(Div(step, two))
        for node in self.state.graph.node:
            if node.op_type == inner.op_type and len(node.input) == 2 and \
                    node.input[0] == self.bound.get(id(inner.inputs[0])) and \
                    node.input[1] == self.roles.get("two_i"):
                casts = [n for n in self.state.graph.node if list(n.input) == [node.output[0]]]
                if len(casts) == 1 and casts[0].op_type == "Cast" and \
                        _same_attributes(attributes(casts[0]), template.attrs):
                    return [node, casts[0]]
        return None


def _same_attributes(found, expected):
    return set(found) == set(expected) and all(
        np.array_equal(found[k], expected[k]) for k in expected)


def _downstream(state, node):
    """The nodes that read ``node``'s outputs, directly or not, in graph order."""
    reached, found = set(node.output), []
    for later in state.graph.node:
        if any(i in reached for i in later.input):
            reached.update(later.output)
            found.append(later)
    return found


def _table_size(below, constants, width):
    """``2**m`` from the first constant a Gather in ``below`` reads."""
    for later in below:
        if later.op_type == "Gather" and later.input[0] in constants:
            size = constants[later.input[0]].size // max(width, 1) - 1
            if size >= 2 and size & (size - 1) == 0:
                return size
            return None
    return None


def _constants_hold(c, width, size):
    """The constants' values are those the template's arithmetic assumes."""
    def scalar(role, value, dtype):
        array = c[role]
        return array.dtype == dtype and array.size == 1 and array.reshape(-1)[0] == value

    tables = ("quantiles", "references", "quantiles_neg", "references_neg")
    return all(c[t].dtype == np.float32 and c[t].shape == (width * (size + 1),) for t in tables) \
        and all(c[e].dtype == np.float32 and c[e].shape == (width,) for e in ("low", "high")) \
        and scalar("zero_i", 0, np.int64) and scalar("two_i", 2, np.int64) \
        and scalar("one_i", 1, np.int64) and scalar("half_size", size // 2, np.int64) \
        and c["half_size"].shape == (1,) \
        and c["offsets"].dtype == np.int64 and np.array_equal(
            c["offsets"], np.arange(width, dtype=np.int64) * (size + 1)) \
        and scalar("zero", 0.0, np.float32) and scalar("half", 0.5, np.float32) \
        and scalar("one", 1.0, np.float32) and all(c[r].ndim == 0 for r in ("zero", "half", "one"))


def quantile_reader(node, state):
    """``IsNaN`` of a float32 block that starts skl2onnx's QuantileTransformer graph:
    the graph up to its ``Reshape`` as one ``onnx_quantile`` op."""
    block = reading_block(state, node, 0)
    if block.dtype != np.float32 or len(inner_shape(block)) > 1 or \
            getattr(block, "one_dimensional", False):
        refuse(node, f"an input of shape {inner_shape(block)} and dtype", str(block.dtype),
               "an (n, columns) float matrix")
    width = block.width
    below = _downstream(state, node)
    size = _table_size(below, state.constants, width)
    reshapes = [n for n in below if n.op_type == "Reshape"]
    if size is None or len(reshapes) != 1:
        refuse(node, "a use of", "IsNaN", _EXPECTED)
    template, dead = _template(size.bit_length() - 1)
    matcher = _Matcher(state, node.input[0])
    if not matcher.match(reshapes[0].output[0], template):
        refuse(node, "a use of", "IsNaN", _EXPECTED)
    dead_nodes = [matcher.dead_end(d) for d in dead]
    c = {role: state.constants[name] for role, name in matcher.roles.items()}
    if any(d is None for d in dead_nodes) or not _constants_hold(c, width, size):
        refuse(node, "a use of", "IsNaN", _EXPECTED + " with its constants")
    tables = {t: c[t].reshape(width, size + 1) for t in
              ("quantiles", "references", "quantiles_neg", "references_neg")}
    op = OnnxQuantile(low=c["low"], high=c["high"], **tables)
    block = state.rounded(block, node)
    (value,) = state.add(op, [block.value], node)
    for matched in matcher.nodes + [n for d in dead_nodes for n in d]:
        state.consumed.update(matched.output)
    state.values[reshapes[0].output[0]] = ("features", features_class()(value, np.float32, width))
