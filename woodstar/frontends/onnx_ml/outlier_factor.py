"""skl2onnx's LocalOutlierFactor(novelty=True) graph after its distance ``Scan``
(``scan.py``), read as one ``onnx_outlier_factor`` op:

* ``Transpose`` (perm 1, 0), ``Sqrt`` (euclidean), ``TopK`` (the k smallest, sorted);
* ``Gather`` of the training rows' densities at the TopK indices; ``Gather`` of their
  (n_train, k) neighbour distances at those indices, then ``Gather`` of one column on
  axis 2 and ``Squeeze`` (each neighbour's k-distance);
* ``Mul`` of the TopK distances by -1 twice, ``Max`` with the k-distances,
  ``ReduceMean``, ``Add`` of a guard, ``Div`` of 1 by it (the row's density);
* ``Div`` of the neighbours' densities by it, ``ReduceMean``, ``Mul`` by -1 (the
  ``score_samples`` output), ``Add`` of the offset (``scores``: decision_function);
* ``Less`` than 0, ``Cast`` to int64, ``Mul`` by -2, ``Add`` of 1 (the labels).

Any other node reading those values is refused by name; the matched nodes are marked
consumed. The container gives ``predict`` (labels -1/1 as ONNX Runtime's (n, 1)
column), ``decision_function`` and, where the graph has that output,
``score_samples``. The arithmetic is ``outlier_factor_outputs``
(``woodstar/ir/families/onnx_neighbors.py``)."""

import numpy as np

from ...ir.families.onnx_neighbors import OnnxOutlierFactor
from ._attributes import refuse
from .neighbors import _attrs, _axes, _Tail

__all__ = ["read_outlier_factor", "reads_outlier_factor"]

_INT64 = 7


def reads_outlier_factor(scan, graph):
    """Whether a ``Gather`` reads the TopK indices after ``scan`` (LocalOutlierFactor's
    tables) rather than an ArrayFeatureExtractor (nearest neighbours' targets)."""
    topk = [n for n in graph.node if n.op_type == "TopK"]
    indices = {n.output[1] for n in topk if len(n.output) > 1}
    return any(n.op_type == "Gather" and len(n.input) > 1 and n.input[1] in indices
               for n in graph.node)


class _Lof(_Tail):
    def __init__(self, state, scan, metric):
        super().__init__(state, scan, metric)
        self.k_column = self.k_table = self.densities = None
        self.eps = self.offset = None


def _constant_equal(t, node, index, value, dtype, what):
    got = t.scalar(node, index, dtype)
    if got != value:
        refuse(node, what, got.item(), str(value))


def _transpose(t, node):
    t.expect(node, 0, ("scan",))
    if [int(p) for p in _attrs(node).get("perm", [])] != [1, 0]:
        refuse(node, "perm", _attrs(node).get("perm"), "[1, 0]")
    t.write(node, ("distances",))


def _sqrt(t, node):
    t.expect(node, 0, ("distances",))
    if t.metric != "sqeuclidean":
        refuse(node, "a square root of", t.metric, "squared euclidean distances")
    t.metric = "euclidean"
    t.write(node, ("distances",))


def _topk(t, node):
    t.expect(node, 0, ("distances",))
    a = _attrs(node)
    if a.get("largest", 1) != 0 or a.get("sorted", 1) != 1 or a.get("axis", -1) not in (1, -1):
        refuse(node, "attributes (largest, sorted, axis)",
               (a.get("largest", 1), a.get("sorted", 1), a.get("axis", -1)), "(0, 1, -1 or 1)")
    t.k = int(t.scalar(node, 1, np.int64))
    t.write(node, ("values", 1), ("indices",))


def _gather(t, node):
    axis = _attrs(node).get("axis", 0)
    if t.tag(node, 1) == "indices":
        table = t.constant(node, 0, "a table of the training rows")
        n_train = t.state.constants[t.scan.input[1]].shape[0]
        if axis != 0 or table.dtype != np.float32 or table.shape[0] != n_train or \
                table.ndim not in (1, 2):
            refuse(node, "a table of shape, dtype and axis", (table.shape, str(table.dtype), axis),
                   f"float32 ({n_train},) or ({n_train}, k) gathered on axis 0")
        if table.ndim == 1:
            t.densities = table
            t.write(node, ("densities",))
        else:
            t.k_table = table
            t.write(node, ("k_table",))
        return
    t.expect(node, 0, ("k_table",))
    column = t.constant(node, 1, "a column index").reshape(-1)
    if axis != 2 or column.size != 1 or column.dtype != np.int64 or \
            not 0 <= int(column[0]) < t.k_table.shape[1]:
        refuse(node, "a Gather of the neighbours' distances at (axis, index)",
               (axis, column.tolist()), f"axis 2, one index below {t.k_table.shape[1]}")
    t.k_column = int(column[0])
    t.write(node, ("k_column",))


def _squeeze(t, node):
    t.expect(node, 0, ("k_column",))
    if _axes(node, t.constants) != [2]:
        refuse(node, "axes", _axes(node, t.constants), "[2]")
    t.write(node, ("k_distances",))


def _mul(t, node):
    tag = t.tag(node, 0)
    if tag == "values":
        _constant_equal(t, node, 1, -1.0, np.float32, "a factor of the distances")
        t.write(node, ("values", -t.symbols[node.input[0]][1]))
    elif tag == "mean_ratio":
        _constant_equal(t, node, 1, -1.0, np.float32, "a factor of the mean ratio")
        t.write(node, ("score_samples",))
    elif tag == "outlier_int":
        _constant_equal(t, node, 1, -2, np.int64, "a factor of the outlier flags")
        t.write(node, ("label_times",))
    else:
        t.expect(node, 0, ("values", "mean_ratio", "outlier_int"))


def _max(t, node):
    tags = sorted((t.tag(node, 0), t.tag(node, 1)), key=str)
    if tags != ["k_distances", "values"] or \
            t.symbols[node.input[[t.tag(node, 0), t.tag(node, 1)].index("values")]][1] != 1:
        refuse(node, "inputs holding", tags, "the TopK distances and the neighbours' k-distances")
    t.write(node, ("reach",))


def _reduce_mean(t, node):
    tag = t.tag(node, 0)
    if tag not in ("reach", "ratios"):
        t.expect(node, 0, ("reach", "ratios"))
    if _axes(node, t.constants) not in ([1], [-1]) or _attrs(node).get("keepdims", 1) != 1:
        refuse(node, "(axes, keepdims)",
               (_axes(node, t.constants), _attrs(node).get("keepdims", 1)), "([1], 1)")
    t.write(node, ("mean_reach",) if tag == "reach" else ("mean_ratio",))


def _add(t, node):
    tag = t.tag(node, 0)
    if tag == "mean_reach":
        t.eps = t.scalar(node, 1, np.float32)
        t.write(node, ("guarded",))
    elif tag == "score_samples":
        t.offset = t.scalar(node, 1, np.float32)
        t.write(node, ("decision",))
    elif tag == "label_times":
        _constant_equal(t, node, 1, 1, np.int64, "a term of the labels")
        t.write(node, ("label",))
    else:
        t.expect(node, 0, ("mean_reach", "score_samples", "label_times"))


def _div(t, node):
    tags = (t.tag(node, 0), t.tag(node, 1))
    if tags == (None, "guarded"):
        _constant_equal(t, node, 0, 1.0, np.float32, "a numerator of the density")
        t.write(node, ("density",))
    elif tags == ("densities", "density"):
        t.write(node, ("ratios",))
    else:
        refuse(node, "inputs holding", tags, "(1, the guarded mean) or (densities, density)")


def _less(t, node):
    t.expect(node, 0, ("decision",))
    _constant_equal(t, node, 1, 0.0, np.float32, "a threshold of the decision")
    t.write(node, ("outlier",))


def _cast(t, node):
    t.expect(node, 0, ("outlier",))
    if _attrs(node).get("to") != _INT64:
        refuse(node, "a Cast of the outlier flags to element type", _attrs(node).get("to"), "int64")
    t.write(node, ("outlier_int",))


_STEPS = {"Transpose": _transpose, "Sqrt": _sqrt, "TopK": _topk, "Gather": _gather,
          "Squeeze": _squeeze, "Mul": _mul, "Max": _max, "ReduceMean": _reduce_mean,
          "Add": _add, "Div": _div, "Less": _less, "Cast": _cast}
_OUTPUTS = {"label": "labels", "decision": "decision", "score_samples": "score_samples"}


def read_outlier_factor(scan, state, features, train, metric):
    """Match the nodes after ``scan``; add the op and write the graph's outputs (the
    labels, the decision and, where present, score_samples) into ``state``."""
    from . import _Result

    t = _Lof(state, scan, metric)
    consumed = []
    nodes = list(state.graph.node)
    after = [i for i, n in enumerate(nodes) if list(n.output) == list(scan.output)][0] + 1
    for node in nodes[after:]:
        if not any(name in t.symbols for name in node.input):
            continue
        step = _STEPS.get(node.op_type) if node.domain in ("", "ai.onnx") else None
        if step is None:
            refuse(node, "an operator of a LocalOutlierFactor graph", node.op_type, sorted(_STEPS))
        step(t, node)
        consumed.extend(o for o in node.output if o)
    if scan.output[0] in {i for n in nodes for i in n.input} or \
            scan.output[0] in {o.name for o in state.graph.output}:
        refuse(scan, "a use of the carried output", scan.output[0], "none")
    outputs = {o.name: t.symbols[o.name][0] for o in state.graph.output if o.name in t.symbols}
    found = sorted(outputs.values())
    if found not in (["decision", "label"], ["decision", "label", "score_samples"]) or \
            len(outputs) != len(state.graph.output) or t.k_column is None or t.densities is None:
        refuse(scan, "a LocalOutlierFactor graph whose outputs hold", found,
               "the labels, the scores and optionally score_samples")
    op = OnnxOutlierFactor(train=train, k_distances=t.k_table[:, t.k_column],
                           densities=t.densities, k=t.k, eps=t.eps, offset=t.offset,
                           metric=t.metric)
    op.validate()
    (value,) = state.add(op, [features.value], scan, ":outlier_factor")
    state.consumed.update(consumed)
    result = _Result(scan, value, value, np.array([-1, 1], np.int64), 1)
    methods = ("predict", "decision_function") + \
        (("score_samples",) if "score_samples" in found else ())
    result.head_layout = (methods, (("decision", 0, 1), ("score_samples", 1, 2),
                                    ("label_index", 2, 3)))
    result.labels_as_column = True  # ONNX Runtime's (n, 1) labels
    state.results.append(result)
    for name, tag in outputs.items():
        state.values[name] = (_OUTPUTS[tag], result)
