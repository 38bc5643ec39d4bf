"""skl2onnx's KernelPCA graph with the rbf kernel after its distance ``Scan``
(``scan.py``), read as one ``onnx_rbf_kernel_rows`` op: ``Transpose`` (perm 1, 0),
``Mul`` by -gamma, ``Exp``; the centring ``Sub`` of the constant column means,
``ReduceSum`` over the row divided (``Div``) by a constant, ``Sub`` of that, ``Add``
of a constant. The result is the package's features, so the ``MatMul`` by the
constant eigenvectors that follows is read as any other MatMul (MLAS's SGEMM).
The other kernels (linear, poly, sigmoid, cosine) need no Scan; their graphs are
read, or refused, operator by operator."""

import numpy as np

from ...ir.families.onnx_neighbors import OnnxRbfKernelRows
from ._attributes import refuse
from .neighbors import _Tail, _attrs, _axes

__all__ = ["read_kernel_pca"]


def _one_float(t, node, index):
    return float(t.scalar(node, index, np.float32))


def read_kernel_pca(scan, state, features, train, metric):
    """Match the nodes from ``scan`` to the centred kernel; add the op and write that
    node's output as features."""
    from . import _Features

    if metric != "sqeuclidean":
        refuse(scan, "a kernel over distances", metric, "squared euclidean (rbf)")
    t = _Tail(state, scan, metric)
    n_train = train.shape[0]
    facts, consumed, last = {}, [], None
    nodes = list(state.graph.node)
    after = [i for i, n in enumerate(nodes) if list(n.output) == list(scan.output)][0] + 1
    for node in nodes[after:]:
        if not any(name in t.symbols for name in node.input):
            continue
        tags = tuple(t.tag(node, i) for i in range(len(node.input)))
        op = node.op_type
        if op == "Transpose" and tags == ("scan",):
            if [int(p) for p in _attrs(node).get("perm", [])] != [1, 0]:
                refuse(node, "perm", _attrs(node).get("perm"), "[1, 0]")
            t.write(node, ("distances",))
        elif op == "Mul" and tags == ("distances", None):
            facts["scale"] = _one_float(t, node, 1)
            t.write(node, ("scaled",))
        elif op == "Exp" and tags == ("scaled",):
            t.write(node, ("kernel",))
        elif op == "ReduceSum" and tags[0] == "kernel":
            if _axes(node, t.constants) not in ([1], [-1]) or _attrs(node).get("keepdims", 1) != 1:
                refuse(node, "axes and keepdims", (_axes(node, t.constants),
                                                    _attrs(node).get("keepdims", 1)), "([1], 1)")
            t.write(node, ("row_sum",))
        elif op == "Sub" and tags == ("kernel", None):
            means = t.constant(node, 1, "column means")
            if means.dtype != np.float32 or means.shape not in ((n_train,), (1, n_train)):
                refuse(node, "column means of shape", means.shape, f"({n_train},) float")
            facts["column_means"] = means.reshape(-1)
            t.write(node, ("column_centred",))
        elif op == "Div" and tags == ("row_sum", None):
            facts["divisor"] = _one_float(t, node, 1)
            t.write(node, ("row_mean",))
        elif op == "Sub" and tags == ("column_centred", "row_mean"):
            t.write(node, ("centred",))
        elif op == "Add" and tags == ("centred", None):
            facts["offset"] = _one_float(t, node, 1)
            last = node
        else:
            refuse(node, "an operator (or inputs) after the kernel rows' Scan",
                   (op, tags), "skl2onnx's rbf KernelPCA steps: Transpose, Mul, Exp, "
                   "ReduceSum, Sub, Div, Sub, Add")
        consumed.extend(o for o in node.output if o)
        if last is not None:
            break
    if last is None or set(facts) != {"scale", "column_means", "divisor", "offset"}:
        refuse(scan, "a kernel PCA graph holding", sorted(facts),
               "the rbf kernel and its centring (scale, column means, divisor, offset)")
    op = OnnxRbfKernelRows(train=train, **facts).validate()
    (value,) = state.add(op, [features.value], scan, ":kernel")
    state.consumed.update(consumed)
    state.values[last.output[0]] = ("features", _Features(value, np.float32, n_train))


def transposing_constants(handler):
    """``handler`` (the package's Transpose) with a constant's transpose folded first
    (KernelPCA's linear kernel multiplies the input by its training rows transposed)."""
    def handle(node, state):
        if node.input and node.input[0] in state.constants:
            value = np.asarray(state.constants[node.input[0]])
            perm = _attrs(node).get("perm")
            state.constants[node.output[0]] = np.ascontiguousarray(
                value.transpose(None if perm is None else [int(p) for p in perm]))
            return None
        return handler(node, state)

    handle.__doc__ = handler.__doc__
    return handle
