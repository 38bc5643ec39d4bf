"""skl2onnx's KNeighborsClassifier / KNeighborsRegressor graph after its distance
``Scan`` (``scan.py``), read as one ``onnx_neighbors`` op:

* ``Transpose`` (perm 1, 0) to rows by training rows, ``Sqrt`` (euclidean), ``TopK``
  (the k smallest, sorted), ``Flatten``, ``ArrayFeatureExtractor`` of the constant
  targets at those indices, ``Reshape`` to (n, k);
* distance weights: ``Reciprocal(Max(values * c, floor))`` (``Mul``, ``Max``);
* a classifier: per class ``Equal`` to its code, ``Cast`` to float (``Mul`` by the
  weights), ``ReduceSum``; ``Concat`` of the scores, ``ArgMax`` and
  ``ArrayFeatureExtractor`` of the constant classes (the label, ``Cast`` and
  ``Reshape`` to a column), ``Div`` by their ``ReduceSum`` (the probabilities);
* a regressor: ``Cast`` to float, then ``ReduceMean``, or (weighted) ``Mul`` by the
  weights and ``ReduceSum``, divided by the weights' ``ReduceSum`` (through ``Shape``
  and ``Reshape``), ``Reshape`` to (n, 1).

RadiusNeighborsClassifier/Regressor: ``Less`` than the radius, the column index from
``ConstantOfShape`` of -1, ``CumSum``, ``Neg`` and ``Add``, ``Where`` (the index, or -1
beyond the radius; the distance, or 0) and the same lookup, vote or mean, each product
by the ``Cast`` indicator. ONNX Runtime rejects a call whose rows have a training row
beyond the radius (the index -1); a call it answers has every training row as a
neighbour, in index order. The op's last column marks the rows it rejects (NaN), read
as the raw scores so the container raises on such a call (``Head.nan_scores_error``).

Each node after the Scan that reads what it computes is matched to one of those
steps (any other is refused by name), and the matched nodes are marked consumed so
the package's reader skips them. The arithmetic is ONNX Runtime's
(``woodstar/ir/families/onnx_ops.py``: ``neighbor_outputs``)."""

import numpy as np

from ...ir.families.onnx_neighbors import OnnxNeighbors
from ._attributes import refuse

__all__ = ["read_neighbors"]

_FLOAT, _INT64, _STRING = 1, 7, 8


def _attrs(node):
    from onnx import AttributeProto, helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute
            if a.type != AttributeProto.GRAPH}


def _axes(node, constants):
    a = _attrs(node)
    if "axes" in a:
        return [int(x) for x in a["axes"]]
    if len(node.input) > 1 and node.input[1] in constants:
        return [int(x) for x in np.asarray(constants[node.input[1]]).reshape(-1)]
    return None


class _Tail:
    """What the nodes after the Scan compute, by ONNX value name: a tag and its
    parameters (``symbols``), and the facts the op needs (``k``, ``targets``, ...)."""

    def __init__(self, state, scan, metric):
        self.state, self.scan = state, scan
        self.constants = state.constants
        self.symbols = {scan.output[1]: ("scan",)}
        self.metric = metric
        self.k = self.targets = self.classes = None
        self.radius = 0.0  # a radius-neighbours graph's radius
        self.weights = None  # (scale, floor)
        self.scores = {}  # score value name -> class code
        self.codes = None  # the class codes in the Concat's order

    def constant(self, node, index, what):
        name = node.input[index] if index < len(node.input) else ""
        if name not in self.constants:
            refuse(node, f"{what} that is not a constant", name, "an initializer or Constant")
        return np.asarray(self.constants[name])

    def scalar(self, node, index, dtype):
        value = self.constant(node, index, "an operand")
        if value.size != 1 or value.dtype != dtype:
            refuse(node, "an operand of shape and dtype", (value.shape, str(value.dtype)),
                   f"one {np.dtype(dtype)} value")
        return value.reshape(-1)[0]

    def tag(self, node, index):
        name = node.input[index] if index < len(node.input) else ""
        return self.symbols.get(name, (None,))[0]

    def expect(self, node, index, tags):
        tag = self.tag(node, index)
        if tag not in tags:
            refuse(node, f"input {index} holding", tag, list(tags))
        return self.symbols[node.input[index]]

    def write(self, node, *symbols):
        for name, symbol in zip(node.output, symbols):
            if name:
                self.symbols[name] = symbol


def _transpose(t, node):
    t.expect(node, 0, ("scan",))
    if [int(p) for p in _attrs(node).get("perm", [])] != [1, 0]:
        refuse(node, "perm", _attrs(node).get("perm"), "[1, 0]")
    t.write(node, ("distances", False))


def _sqrt(t, node):
    _, rooted = t.expect(node, 0, ("distances",))
    if rooted or t.metric != "sqeuclidean":
        refuse(node, "a square root of", t.metric, "squared euclidean distances")
    t.metric = "euclidean"
    t.write(node, ("distances", True))


def _less(t, node):
    # skl2onnx's RadiusNeighborsClassifier/Regressor graph: Less than the radius, then
    # Where(within, column index, -1) as the indices of the targets' lookup
    t.expect(node, 0, ("distances",))
    t.radius = float(t.scalar(node, 1, np.float32))
    if not t.radius > 0:
        refuse(node, "a radius", t.radius, "a positive float")
    t.k = int(t.state.constants[t.scan.input[1]].shape[0])
    t.write(node, ("within",))


def _constant_of_shape(t, node):
    from onnx import numpy_helper

    t.expect(node, 0, ("dist_shape",))
    value = [a for a in node.attribute if a.name == "value"]
    fill = numpy_helper.to_array(value[0].t) if value else np.zeros(1, np.float32)
    if fill.size != 1 or float(fill.reshape(-1)[0]) not in (-1.0, 0.0):
        refuse(node, "a fill value", fill.tolist(), "-1 (the indices) or 0 (the distances)")
    t.write(node, ("fill", float(fill.reshape(-1)[0])))


def _cumsum(t, node):
    t.expect(node, 0, ("minus_ones",))
    a = _attrs(node)
    if int(t.scalar(node, 1, np.int64)) not in (1, -1) or a.get("exclusive", 0) or \
            a.get("reverse", 0):
        refuse(node, "a CumSum other than over each row", a, "axis 1, not exclusive or reversed")
    t.write(node, ("cumsum",))


def _neg(t, node):
    t.expect(node, 0, ("cumsum",))
    t.write(node, ("neg_cumsum",))


def _add(t, node):
    if (t.tag(node, 0), t.tag(node, 1)) != ("neg_cumsum", "minus_ones"):
        refuse(node, "inputs holding", (t.tag(node, 0), t.tag(node, 1)),
               "(-CumSum(-1), -1): the column index")
    t.write(node, ("arange",))


def _where(t, node):
    tags = tuple(t.tag(node, i) for i in range(3))
    if tags == ("within", "arange", "minus_ones"):
        t.write(node, ("indices",))
    elif tags == ("within", "distances", "zeros"):
        t.write(node, ("values",))
    else:
        refuse(node, "inputs holding", tags,
               "(within, column index, -1) or (within, distances, 0)")


def _topk(t, node):
    t.expect(node, 0, ("distances",))
    a = _attrs(node)
    if a.get("largest", 1) != 0 or a.get("sorted", 1) != 1 or a.get("axis", -1) not in (1, -1):
        refuse(node, "attributes (largest, sorted, axis)",
               (a.get("largest", 1), a.get("sorted", 1), a.get("axis", -1)), "(0, 1, -1 or 1)")
    t.k = int(t.scalar(node, 1, np.int64))
    t.write(node, ("values",), ("indices",))


def _flatten(t, node):
    t.expect(node, 0, ("indices",))
    if _attrs(node).get("axis", 1) != 1:
        refuse(node, "axis", _attrs(node).get("axis"), "1")
    t.write(node, ("indices",))


def _array_feature_extractor(t, node):
    tag = t.tag(node, 1)
    if tag == "indices":
        targets = t.constant(node, 0, "the neighbours' targets")
        n_train = t.state.constants[t.scan.input[1]].shape[0]
        if targets.ndim != 1 or len(targets) != n_train or \
                targets.dtype not in (np.int64, np.float32):
            refuse(node, "targets of shape and dtype", (targets.shape, str(targets.dtype)),
                   f"{n_train} int64 or float values, one per training row")
        if targets.dtype == np.int64 and np.abs(targets).max() >= 2 ** 24:
            refuse(node, "class codes up to", int(np.abs(targets).max()), "codes below 2**24")
        t.targets = targets
        t.write(node, ("neighbors", str(targets.dtype)))
        return
    t.expect(node, 1, ("argmax",))
    classes = t.constant(node, 0, "the class labels")
    if classes.ndim != 1:
        refuse(node, "class labels of shape", classes.shape, "one dimension")
    t.classes = classes
    t.write(node, ("label",))


def _reshape(t, node):
    tag = t.tag(node, 0)
    if tag == "denominator":
        t.expect(node, 1, ("shape",))
        t.write(node, ("denominator",))
        return
    shape = [int(d) for d in t.constant(node, 1, "a shape").reshape(-1)]
    expected = {"neighbors": [-1, t.k], "label": [-1], "quotient": [-1, 1]}
    if tag not in expected:
        t.expect(node, 0, tuple(expected))
    if shape != expected[tag]:
        refuse(node, f"a reshape of the {tag} to", shape, expected[tag])
    t.write(node, t.symbols[node.input[0]] if tag != "quotient" else ("mean",))


def _cast(t, node):
    tag = t.tag(node, 0)
    to = _attrs(node).get("to")
    if tag == "within" and to == _FLOAT:
        t.write(node, ("bin",))
    elif tag == "fill" and t.symbols[node.input[0]][1] == -1.0 and to == _INT64:
        t.write(node, ("minus_ones",))
    elif tag == "fill" and t.symbols[node.input[0]][1] == 0.0 and to == _FLOAT:
        t.write(node, ("zeros",))
    elif tag == "hit" and to == _FLOAT:
        t.write(node, ("hit_float", t.symbols[node.input[0]][1]))
    elif tag == "neighbors" and to == _FLOAT:
        t.write(node, ("targets_float",))
    elif tag == "label" and to in (_INT64, _STRING):
        t.write(node, ("label",))
    else:
        refuse(node, f"a Cast of the {tag} to element type", to,
               "float (class hits, targets) or int64/string (labels)")


def _equal(t, node):
    _, dtype = t.expect(node, 0, ("neighbors",))
    code = t.scalar(node, 1, np.dtype(dtype))
    t.write(node, ("hit", float(code)))


def _mul(t, node):
    tags = (t.tag(node, 0), t.tag(node, 1))
    if tags == ("values", None):
        t.write(node, ("scaled", t.scalar(node, 1, np.float32)))
        return
    if "bin" in tags:  # a radius graph's 1 for a training row within the radius
        # (a row ONNX Runtime answers has only those: the product is the other factor)
        other = t.symbols[node.input[1 - tags.index("bin")]]
        if other[0] == "targets_float":
            other = ("weighted_targets",)
        elif other[0] not in ("weights", "hit_float"):
            refuse(node, "the radius indicator times", other[0],
                   ["weights", "class hits", "targets"])
        t.write(node, other)
        return
    if "weights" not in tags:
        refuse(node, "inputs holding", tags, "the TopK distances and a constant, or weights")
    other = 1 - tags.index("weights")
    tag = tags[other]
    if tag == "hit_float":
        t.write(node, ("hit_weighted", t.symbols[node.input[other]][1]))
    elif tag == "targets_float":
        t.write(node, ("weighted_targets",))
    else:
        refuse(node, "weights times", tag, ["class hits", "targets"])


def _max(t, node):
    if t.tag(node, 0) == "values":  # a radius graph: the distances themselves
        t.write(node, ("floored", np.float32(1.0), t.scalar(node, 1, np.float32)))
        return
    _, scale = t.expect(node, 0, ("scaled",))
    t.write(node, ("floored", scale, t.scalar(node, 1, np.float32)))


def _reciprocal(t, node):
    _, scale, floor = t.expect(node, 0, ("floored",))
    if t.weights not in (None, (scale, floor)):
        refuse(node, "a second weighting", (scale, floor), t.weights)
    t.weights = (scale, floor)
    t.write(node, ("weights",))


def _reduce(t, node):
    tag = t.tag(node, 0)
    keepdims = _attrs(node).get("keepdims", 1)
    if _axes(node, t.constants) not in ([1], [-1]):
        refuse(node, "axes", _axes(node, t.constants), "[1] (over each row)")
    if node.op_type == "ReduceMean":
        t.expect(node, 0, ("targets_float",))
        if keepdims != 1:
            refuse(node, "keepdims", keepdims, "1")
        t.write(node, ("mean",))
        return
    wanted = {"hit_float": 1, "hit_weighted": 1, "scores": 1, "weighted_targets": 0, "weights": 0,
              "bin": 0}
    if tag not in wanted:
        t.expect(node, 0, tuple(wanted))
    if keepdims != wanted[tag]:
        refuse(node, "keepdims", keepdims, wanted[tag])
    if tag in ("hit_float", "hit_weighted"):
        if (tag == "hit_weighted") != (t.weights is not None):
            refuse(node, "a vote mixing", "weighted and unweighted classes", "one kind")
        t.scores[node.output[0]] = t.symbols[node.input[0]][1]
        t.write(node, ("score",))
    else:
        t.write(node, {"scores": ("total",), "weighted_targets": ("numerator",),
                       "weights": ("denominator",), "bin": ("denominator",)}[tag])


def _concat(t, node):
    if _attrs(node).get("axis") not in (1, -1):
        refuse(node, "axis", _attrs(node).get("axis"), "1")
    for i in range(len(node.input)):
        t.expect(node, i, ("score",))
    t.codes = [t.scores[name] for name in node.input]
    t.write(node, ("scores",))


def _argmax(t, node):
    t.expect(node, 0, ("scores",))
    a = _attrs(node)
    if (a.get("axis", 0), a.get("keepdims", 1), a.get("select_last_index", 0)) not in \
            ((1, 0, 0), (-1, 0, 0)):
        refuse(node, "attributes (axis, keepdims, select_last_index)",
               (a.get("axis", 0), a.get("keepdims", 1), a.get("select_last_index", 0)),
               "(1, 0, 0)")
    t.write(node, ("argmax",))


def _div(t, node):
    tags = (t.tag(node, 0), t.tag(node, 1))
    if tags == ("scores", "total"):
        t.write(node, ("probabilities",))
    elif tags == ("numerator", "denominator"):
        t.write(node, ("quotient",))
    else:
        refuse(node, "inputs holding", tags, "(scores, their total) or (weighted sum, weights)")


def _shape(t, node):
    tag, *_ = t.expect(node, 0, ("numerator", "distances"))
    t.write(node, ("shape",) if tag == "numerator" else ("dist_shape",))


_STEPS = {"Transpose": _transpose, "Sqrt": _sqrt, "Less": _less, "TopK": _topk,
          "ConstantOfShape": _constant_of_shape, "CumSum": _cumsum, "Neg": _neg, "Add": _add,
          "Where": _where, "Flatten": _flatten,
          "ArrayFeatureExtractor": _array_feature_extractor, "Reshape": _reshape, "Cast": _cast,
          "Equal": _equal, "Mul": _mul, "Max": _max, "Reciprocal": _reciprocal,
          "ReduceSum": _reduce, "ReduceMean": _reduce, "Concat": _concat, "ArgMax": _argmax,
          "Div": _div, "Shape": _shape}


def read_neighbors(scan, state, features, train, metric):
    """Match the nodes after ``scan`` that read its distances; add the op and write
    the graph's outputs (a classifier's labels and probabilities, or a regressor's
    values) into ``state``."""
    from . import _Features, _Result

    t = _Tail(state, scan, metric)
    consumed = []
    nodes = list(state.graph.node)
    after = [i for i, n in enumerate(nodes) if list(n.output) == list(scan.output)][0] + 1
    for node in nodes[after:]:
        if not any(name in t.symbols for name in node.input):
            continue
        step = _STEPS.get(node.op_type) if node.domain in ("", "ai.onnx", "ai.onnx.ml") else None
        if step is None:
            refuse(node, "an operator reading the neighbours' distances", node.op_type,
                   sorted(_STEPS))
        step(t, node)
        consumed.extend(o for o in node.output if o)
    if scan.output[0] in {i for n in nodes for i in n.input} or \
            scan.output[0] in {o.name for o in state.graph.output}:
        refuse(scan, "a use of the carried output", scan.output[0], "none")
    outputs = {o.name: t.symbols[o.name][0] for o in state.graph.output if o.name in t.symbols}
    found = sorted(outputs.values())
    if t.k is None or found not in (["label", "probabilities"], ["mean"]):
        refuse(scan, "a k-nearest-neighbours graph whose outputs hold", found,
               "a label and probabilities (classifier) or a mean (regressor)")
    weighted = t.weights is not None
    scale, floor = t.weights if weighted else (1.0, 0.0)
    classifier = "label" in found
    if classifier:
        if t.targets.dtype != np.int64 or t.classes is None or len(t.classes) != len(t.codes):
            refuse(scan, "class labels", None if t.classes is None else len(t.classes),
                   f"one label per score column ({len(t.codes)})")
    op = OnnxNeighbors(train=train, targets=t.targets, k=t.k, metric=t.metric,
                       mode="vote" if classifier else "mean",
                       codes=np.asarray(t.codes if classifier else [], np.float32),
                       weighted=weighted, weight_scale=scale, weight_floor=floor,
                       radius=t.radius)
    op.validate()
    (value,) = state.add(op, [features.value], scan, ":neighbors")
    state.consumed.update(consumed)
    if t.radius:
        _radius_results(state, scan, op, value, outputs, t.classes)
        return
    if not classifier:
        (name,) = outputs
        state.values[name] = ("features", _Features(value, np.float32, 1))
        return
    classes = t.classes
    labels = classes.astype(str) if classes.dtype.kind in "OSU" else classes.astype(np.int64)
    result = _Result(scan, value, value, labels, len(labels))
    state.results.append(result)
    for name, tag in outputs.items():
        state.values[name] = ("labels" if tag == "label" else "probabilities", result)


_RADIUS_REJECTION = (
    "ONNX Runtime rejects this radius-neighbours graph on a call holding a row that has a "
    "training row at or beyond the radius (or a NaN distance): its ArrayFeatureExtractor "
    "is given the index -1 there")


def _radius_results(state, scan, op, value, outputs, classes):
    """The op's last column (NaN where ONNX Runtime rejects the row) as the raw scores,
    so the container raises on such a call as ONNX Runtime does; the others as the
    classifier's probabilities and label index or the regressor's value."""
    from ...ir import Select
    from . import _Result

    width = op.output_width
    (flag,) = state.add(Select(n_features=width, indices=(width - 1,)), [value], scan,
                        ":rejected")
    (answer,) = state.add(Select(n_features=width, indices=tuple(range(width - 1))), [value],
                          scan, ":answer")
    if op.mode == "vote":
        labels = classes.astype(str) if classes.dtype.kind in "OSU" else classes.astype(np.int64)
        result = _Result(scan, flag, answer, labels, len(labels))
    else:
        result = _Result(scan, flag, answer, None, 0)
    result.nan_scores_error = _RADIUS_REJECTION
    state.results.append(result)
    for name, tag in outputs.items():
        state.values[name] = ({"label": "labels", "probabilities": "probabilities"}.get(
            tag, "values"), result)
