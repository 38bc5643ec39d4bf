"""skl2onnx's IsolationForest graph, read as one ``onnx_isolation_forest`` op after
its trees.

The graph: per tree a ``Gather`` of its features and a one-tree
``TreeEnsembleRegressor`` whose leaves weigh their own node ids; the ids ``Cast`` to
int64 and two ``LabelEncoder`` (leaf id -> samples in the leaf, leaf id -> depth);
then float32 elementwise steps per tree (``Reshape``, ``Equal``/``Greater``, ``Cast``
of the flags, ``Mul``/``Add``/``Sub``/``Div``/``Max``/``Min``, ``Neg``, ``Log``: the
average path length of the leaf's samples added to its depth); a ``Sum`` of every
tree's term, ``Div`` by a constant, ``Neg``, ``Pow`` of a constant base, ``Neg``
(``score_samples``), ``Add`` of the offset (``scores``, the decision), and ``Less``,
``Cast`` to int64, ``Mul`` by -2, ``Add`` of 1 (the labels -1/1).

A tree's term depends on its leaf only, so this reader evaluates the per-tree steps on
every leaf with the same float32 operations ONNX Runtime runs (a ``Log`` twice:
Eigen's packets and glibc's logf, since which one a row gets depends on its place in
the call) and hands the tables to the op. The steps after the ``Sum`` are matched as
written above; any other operator or operand is refused by name. The container gives
``predict`` (labels as ONNX Runtime's (n, 1) column), ``decision_function`` and, where
the graph has that output (skl2onnx's ``score_samples`` option), ``score_samples``."""

import numpy as np

from ...ir import Concat
from ...ir.families.onnx_isolation import ISOLATION_LABELS, OnnxIsolationForest
from ...ir.families.onnx_math import eigen_log_packets
from ...ir.families.onnx_neighbors import NeighborsNumpyMath
from ...ir.families.onnx_ops import glibc_logf
from ._attributes import attributes, refuse
from .trees import tree_ensemble_ops

__all__ = ["isolation_forest_trees"]

_FLOAT, _INT64 = 1, 7
_MAX_LEAF_ID = 2 ** 24  # ids a float32 leaf weight holds exactly
_ELEMENTWISE = {"Mul": np.multiply, "Add": np.add, "Sub": np.subtract, "Div": np.divide,
                "Max": np.maximum, "Min": np.minimum, "Equal": np.equal,
                "Greater": np.greater, "Less": np.less}


def isolation_forest_trees(handler):
    """Wrap the TreeEnsembleRegressor handler: a one-tree ensemble whose leaf ids are
    cast to int64 starts an IsolationForest graph (``read_isolation_forest``)."""

    def handle(node, state):
        if node.op_type == "TreeEnsembleRegressor" and _ids_cast(node, state.graph):
            return read_isolation_forest(node, state)
        return handler(node, state)

    return handle


def _ids_cast(node, graph):
    return any(n.op_type == "Cast" and n.input and n.input[0] == node.output[0] and
               attributes(n).get("to") == _INT64 for n in graph.node)


class _Reader:
    """Symbols of the values read so far: ``("tree", t)`` a tree's leaf ids,
    ``("ids", t)`` the same cast to int64, ``("term", t, (packet, tail))`` a per-tree
    value over the tree's possible leaf ids, ``("sum", order)`` and the tail's steps."""

    def __init__(self, state):
        self.state, self.symbols = state, {}
        self.trees = []  # (tree value, sorted leaf ids)
        self.sum_order, self.terms = None, {}
        self.divisor = self.base = self.offset = self.threshold = None

    def constant(self, node, index, dtype):
        name = node.input[index] if index < len(node.input) else ""
        value = self.state.constants.get(name)
        if value is None or value.size != 1 or value.dtype != dtype:
            refuse(node, f"input {name!r}", "not a constant of one value",
                   f"one {np.dtype(dtype)} constant")
        return value.reshape(-1)[0]

    def symbol(self, node, index):
        name = node.input[index] if index < len(node.input) else ""
        return self.symbols.get(name)

    def write(self, node, symbol):
        self.symbols[node.output[0]] = symbol


def read_isolation_forest(first, state):
    """Read every node from ``first`` (the first tree) on; nodes that do not belong to
    the IsolationForest's part (the later trees' ``Gather``) go to their own handlers."""
    from . import HANDLERS, _Result

    r = _Reader(state)
    nodes = list(state.graph.node)
    start = [i for i, n in enumerate(nodes) if n is first][0]
    for node in nodes[start:]:
        if node.output and set(node.output) <= state.consumed:
            continue
        state.consumed.update(o for o in node.output if o)
        if node.op_type == "TreeEnsembleRegressor" and _ids_cast(node, state.graph):
            _tree(r, node)
        elif any(name in r.symbols for name in node.input):
            _step(r, node)
        else:
            handler = HANDLERS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
            if handler is None:
                refuse(node, "an operator of an IsolationForest graph", node.op_type,
                       "the operators its converter writes")
            handler(node, state)
    outputs = {o.name: r.symbols.get(o.name, ("",))[0] for o in state.graph.output}
    found = sorted(outputs.values())
    if found not in (["decision", "label"], ["decision", "label", "score"]) or \
            None in (r.sum_order, r.divisor, r.base, r.offset, r.threshold):
        refuse(first, "an IsolationForest graph whose outputs hold", found,
               "the labels, the scores and optionally score_samples")
    packet = np.full((len(r.trees), max(ids[-1] for _, ids in r.trees) + 1),
                     np.nan, np.float32)
    tail = packet.copy()
    for row, t in enumerate(r.sum_order):
        ids = r.trees[t][1]
        packet[row, ids], tail[row, ids] = r.terms[t]
    op = OnnxIsolationForest(packet_terms=packet, tail_terms=tail, divisor=r.divisor,
                             base=r.base, offset=r.offset, threshold=r.threshold).validate()
    columns = [r.trees[t][0] for t in r.sum_order]
    (leaves,) = state.add(Concat(widths=(1,) * len(columns)), columns, first, ":leaf_ids")
    (value,) = state.add(op, [leaves], first, ":isolation_forest")
    result = _Result(first, value, value, np.array(ISOLATION_LABELS, np.int64), 1)
    methods = ("predict", "decision_function") + (("score_samples",) if "score" in found else ())
    result.head_layout = (methods, (("decision", 0, 1), ("score_samples", 1, 2),
                                    ("label_index", 2, 3)))
    result.labels_as_column = True  # ONNX Runtime's (n, 1) labels
    state.results.append(result)
    roles = {"label": "labels", "decision": "decision", "score": "score_samples"}
    for name, tag in outputs.items():
        state.values[name] = (roles[tag], result)


def _tree(r, node):
    """One tree: the ``trees`` op of its leaf weights, which must be its leaves' ids."""
    _, features = r.state.read(node, 0, ("features",))
    if features.dtype != np.float32:
        refuse(node, "input of dtype", str(features.dtype), "float (skl2onnx's float32 graph)")
    a = attributes(node)
    if int(a.get("n_targets", 0)) != 1 or len(set(a.get("nodes_treeids", []).tolist())) != 1:
        refuse(node, "(n_targets, trees)", (a.get("n_targets"), len(set(
            a.get("nodes_treeids", []).tolist()))), "one target of one tree")
    if np.any(a.get("base_values", np.zeros(0, np.float32)) != 0) or \
            a.get("post_transform", "NONE") != "NONE":
        refuse(node, "base_values or post_transform", (a.get("base_values"), a.get(
            "post_transform")), "none: the leaves' own ids")
    weights = np.asarray(a.get("target_weights"), np.float32)
    if weights.size == 0 or np.any(weights != np.floor(weights)) or \
            weights.min() < 0 or weights.max() >= _MAX_LEAF_ID:
        refuse(node, "leaf weights", "not leaf ids", f"whole numbers in 0..{_MAX_LEAF_ID - 1}")
    ensemble, _, _ = tree_ensemble_ops(node, np.float32, features.width)
    (value, _) = r.state.add(ensemble, [features.value], node, ":trees")
    r.trees.append((value, np.unique(weights.astype(np.int64))))
    r.write(node, ("tree", len(r.trees) - 1))


def _pair(values):
    return (values, values)


def _operand(r, node, index, tree):
    """A per-tree operand as a (packet, tail) pair, or a one-value float constant."""
    symbol = r.symbol(node, index)
    if symbol is None:
        value = r.constant(node, index, np.float32)
        return _pair(np.float32(value))
    if symbol[0] != "term" or symbol[1] != tree:
        refuse(node, f"input {node.input[index]!r} holding", symbol[0],
               "one tree's values or a float constant")
    return symbol[2]


def _step(r, node):
    symbols = [r.symbol(node, i) for i in range(len(node.input))]
    kinds = [s[0] for s in symbols if s is not None]
    if node.op_type == "Sum":
        return _sum(r, node, symbols)
    if kinds[0] in ("tree", "ids"):
        return _leaf_step(r, node, symbols[0])
    if kinds[0] == "term":
        return _term_step(r, node, symbols)
    return _tail_step(r, node, symbols)


def _leaf_step(r, node, symbol):
    kind, t = symbol
    a = attributes(node)
    if kind == "tree" and node.op_type == "Cast" and a.get("to") == _INT64:
        return r.write(node, ("ids", t))
    if kind == "ids" and node.op_type == "LabelEncoder" and node.domain == "ai.onnx.ml":
        keys, values = a.get("keys_int64s"), a.get("values_floats")
        if keys is None or values is None or len(keys) != len(values):
            refuse(node, "a LabelEncoder without", "keys_int64s and values_floats",
                   "int64 keys mapped to floats")
        table = dict(zip(np.asarray(keys).tolist(), np.asarray(values, np.float32).tolist()))
        default = np.float32(a.get("default_float", np.float32(-0.0)))
        ids = r.trees[t][1]
        mapped = np.array([table.get(int(i), default) for i in ids], np.float32)
        return r.write(node, ("term", t, _pair(mapped)))
    refuse(node, f"a {node.op_type} of a tree's leaf ids", kind,
           "Cast to int64, then LabelEncoder to floats")


def _term_step(r, node, symbols):
    t = symbols[0][1]
    op = node.op_type
    x = symbols[0][2]
    if op == "Reshape":
        shape = r.state.constants.get(node.input[1])
        if shape is None or [int(d) for d in shape.reshape(-1)] != [-1, 1]:
            refuse(node, "shape", None if shape is None else shape.tolist(), "[-1, 1]")
        return r.write(node, symbols[0])
    with np.errstate(all="ignore"):
        if op == "Cast":
            to = attributes(node).get("to")
            if to != _FLOAT or x[0].dtype != np.bool_:
                refuse(node, "a Cast of", f"{x[0].dtype} to {to}", "flags to float")
            return r.write(node, ("term", t, tuple(v.astype(np.float32) for v in x)))
        if op == "Neg":
            return r.write(node, ("term", t, tuple(-v for v in x)))
        if op == "Log":
            if x[0].dtype != np.float32:
                refuse(node, "a Log of", str(x[0].dtype), "float")
            packet = np.asarray(eigen_log_packets(NeighborsNumpyMath, x[0]), np.float32)
            tail = np.asarray(glibc_logf(NeighborsNumpyMath, x[1]), np.float32)
            return r.write(node, ("term", t, (packet, tail)))
        if op in _ELEMENTWISE and len(node.input) == 2:
            first = _operand(r, node, 0, t)
            second = _operand(r, node, 1, t)
            if any(v.dtype != np.float32 for v in (*first, *second)):
                refuse(node, "operands of dtype", sorted({str(v.dtype) for v in (*first, *second)}),
                       "float")
            function = _ELEMENTWISE[op]
            return r.write(node, ("term", t, tuple(
                np.asarray(function(a, b)) for a, b in zip(first, second))))
    refuse(node, "an operator on a tree's values", op, sorted(("Reshape", "Cast", "Neg", "Log",
                                                               *_ELEMENTWISE)))


def _sum(r, node, symbols):
    if any(s is None or s[0] != "term" for s in symbols):
        refuse(node, "inputs holding", [s and s[0] for s in symbols], "one term per tree")
    order = [s[1] for s in symbols]
    if sorted(order) != list(range(len(r.trees))) or \
            any(s[2][0].dtype != np.float32 for s in symbols):
        refuse(node, "terms of trees", order, f"each of the {len(r.trees)} trees' float terms once")
    r.sum_order = order
    r.terms = {s[1]: s[2] for s in symbols}
    r.write(node, ("sum",))


# the steps after the Sum: (symbol, operator) -> the next symbol
_TAIL = {("sum", "Div"): "scaled", ("scaled", "Neg"): "negated", ("negated", "Pow"): "power",
         ("power", "Neg"): "score", ("score", "Add"): "decision", ("decision", "Less"): "outlier",
         ("outlier", "Cast"): "outlier_int", ("outlier_int", "Mul"): "label_times",
         ("label_times", "Add"): "label"}


def _tail_step(r, node, symbols):
    position = 1 if node.op_type == "Pow" else 0  # Pow(base, exponent)
    symbol = symbols[position] if position < len(symbols) else None
    following = _TAIL.get((symbol[0] if symbol else None, node.op_type))
    others = [s for i, s in enumerate(symbols) if i != position and s is not None]
    if following is None or others:
        refuse(node, "a step of the scores", (symbol and symbol[0], node.op_type),
               sorted(f"{o} of {s}" for s, o in _TAIL))
    if following == "scaled":
        r.divisor = r.constant(node, 1, np.float32)
    elif following == "power":
        r.base = r.constant(node, 0, np.float32)
        if not (np.isfinite(r.base) and r.base > 0 and r.base != 1):
            refuse(node, "a base of", float(r.base), "a positive finite float other than 1")
    elif following == "decision":
        r.offset = r.constant(node, 1, np.float32)
    elif following == "outlier":
        r.threshold = r.constant(node, 1, np.float32)
    elif following == "outlier_int" and attributes(node).get("to") != _INT64:
        refuse(node, "a Cast of the outlier flags to", attributes(node).get("to"), "int64")
    elif following == "label_times" and r.constant(node, 1, np.int64) != -2:
        refuse(node, "a factor of the outlier flags", r.constant(node, 1, np.int64), "-2")
    elif following == "label" and r.constant(node, 1, np.int64) != 1:
        refuse(node, "a term of the labels", r.constant(node, 1, np.int64), "1")
    r.write(node, (following,))
