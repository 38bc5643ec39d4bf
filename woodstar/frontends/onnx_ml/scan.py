"""``Scan``: the loop skl2onnx writes to compute, for every training row it holds as a
constant, that row's distance to each input row. Only that body is read (``Identity``
of the carried input; ``Sub`` of the scanned row; then ``ReduceSumSquare`` over the
features, or ``Abs`` and ``ReduceSum``); any other body is refused by its operators.
What follows the Scan is read by the model's own reader: the k-nearest-neighbours
graph (``neighbors.py``) or KernelPCA's rbf kernel (``kernel_pca.py``)."""

import numpy as np

from ._attributes import node_label, refuse

__all__ = ["handle_scan", "scan_distance_body"]

_BODIES = {("Identity", "Sub", "ReduceSumSquare", "Identity"): "sqeuclidean",
           ("Identity", "Sub", "Abs", "ReduceSum", "Identity"): "manhattan"}


def _body(node):
    bodies = [a.g for a in node.attribute if a.name == "body"]
    if not bodies:
        refuse(node, "a Scan without a body", None, "a body graph")
    return bodies[0]


def _plain_attributes(node):
    from onnx import AttributeProto, helper

    return {a.name: helper.get_attribute_value(a) for a in node.attribute
            if a.type != AttributeProto.GRAPH}


def _axes(node, constants):
    """A reduction's axes: the ``axes`` attribute (before opset 18) or its constant
    second input."""
    a = _plain_attributes(node)
    if "axes" in a:
        return [int(x) for x in a["axes"]]
    if len(node.input) > 1 and node.input[1] in constants:
        return [int(x) for x in np.asarray(constants[node.input[1]]).reshape(-1)]
    return None


def scan_distance_body(node):
    """The metric a Scan's body computes (``sqeuclidean`` or ``manhattan``): the body
    reduces ``carried - scanned`` over axis 1 (the features), the carried input passes
    through unchanged, and the Scan runs forward over the rows of one scanned input."""
    from onnx import numpy_helper

    a = _plain_attributes(node)
    if a.get("num_scan_inputs") != 1 or len(node.input) != 2 or len(node.output) != 2 or \
            any(a.get(name) not in (None, [0], [0, 0]) for name in
                ("scan_input_axes", "scan_input_directions", "scan_output_axes",
                 "scan_output_directions")):
        refuse(node, "a Scan of inputs/outputs/attributes",
               (list(node.input), list(node.output), sorted(a)),
               "one carried input and one scanned input, forward over axis 0")
    body = _body(node)
    ops = tuple(n.op_type for n in body.node)
    metric = _BODIES.get(ops)
    if metric is None:
        refuse(node, "a Scan body of operators", list(ops),
               [list(k) for k in _BODIES] + ["(skl2onnx's pairwise distances)"])
    constants = {i.name: numpy_helper.to_array(i) for i in body.initializer}
    carried, scanned = (i.name for i in body.input)
    carried_out, scan_out = (o.name for o in body.output)
    nodes = list(body.node)
    first, sub, last = nodes[0], nodes[1], nodes[-1]
    reduce = nodes[-2]
    chain_ok = (list(first.input) == [carried] and list(first.output) == [carried_out]
                and list(sub.input) == [carried, scanned]
                and list(last.input) == list(reduce.output) and list(last.output) == [scan_out])
    if metric == "manhattan":
        absolute = nodes[2]
        chain_ok = chain_ok and list(absolute.input) == list(sub.output) and \
            reduce.input[0] == absolute.output[0]
    else:
        chain_ok = chain_ok and reduce.input[0] == sub.output[0]
    keepdims = _plain_attributes(reduce).get("keepdims", 1)
    if not chain_ok or _axes(reduce, constants) not in ([1], [-1]) or keepdims != 0:
        refuse(node, f"a Scan body {node_label(reduce)} reading", list(reduce.input),
               "the scanned difference, reduced over axis 1 with keepdims=0")
    return metric


def handle_scan(node, state):
    """A Scan of pairwise distances, read with the nodes after it that skl2onnx's
    k-nearest-neighbours, LocalOutlierFactor or KernelPCA graph holds."""
    from .kernel_pca import read_kernel_pca
    from .neighbors import read_neighbors
    from .outlier_factor import read_outlier_factor, reads_outlier_factor

    metric = scan_distance_body(node)
    _, features = state.read(node, 0, ("features",))
    if features.dtype != np.float32:
        refuse(node, "input of dtype", str(features.dtype), "float")
    train = state.constants.get(node.input[1])
    if train is None or train.ndim != 2 or train.dtype != np.float32 or \
            train.shape[1] != features.width:
        refuse(node, "scanned rows", None if train is None else (train.shape, str(train.dtype)),
               f"a constant float matrix of {features.width} columns (the training rows)")
    if not np.isfinite(train).all():
        refuse(node, "training rows holding", "NaN or infinite values", "finite values")
    reader = read_kernel_pca if _feeds_exp(node, state.graph) else read_neighbors
    if reader is read_neighbors and reads_outlier_factor(node, state.graph):
        reader = read_outlier_factor
    reader(node, state, state.rounded(features, node), train, metric)


def _feeds_exp(scan, graph):
    """Whether the distances go on through ``Mul`` to ``Exp`` (a kernel PCA's rbf
    kernel) rather than to ``TopK`` (nearest neighbours)."""
    reads = {}
    for n in graph.node:
        for name in n.input:
            reads.setdefault(name, []).append(n)
    frontier, seen = [scan.output[1]], set()
    for _ in range(3):
        frontier = [o for name in frontier for n in reads.get(name, []) for o in n.output
                    if n.op_type in ("Transpose", "Mul", "Exp") and o not in seen]
        seen.update(frontier)
    return any(n.op_type == "Exp" for n in graph.node if set(n.output) & seen)
