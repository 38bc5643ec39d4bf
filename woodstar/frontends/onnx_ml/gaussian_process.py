"""Shape arithmetic on constants, as skl2onnx's GaussianProcessRegressor graph writes it
for its training rows: ``Shape`` of a constant, ``Gather`` and ``Concat`` of constant
integer vectors and ``ConstantOfShape`` of a constant shape are folded when the graph
is read (they move values and compute nothing, so NumPy's answer is ONNX Runtime's).
The rows' count of the input, concatenated with a constant width k, is the shape of
an (n, k) block (``ConstantOfShape`` of it: ``onnx_fill``). The distance ``Scan``
whose transposed rows go on through ``Mul`` and ``Neg`` (the RBF kernel
``exp(-0.5 d)``) is read as the block of squared distances
(``onnx_squared_distances``); the operators after it are read one by one. Each wraps
the package's handler, which keeps the other cases."""

import numpy as np

from ...ir.families.onnx_math import OnnxSquaredDistances
from ._attributes import attributes, refuse

__all__ = ["folding_constant_shapes", "keeping_row_blocks", "row_and_width_shapes",
           "reading_kernel_distances"]


def _fold(node, state, values):
    a = attributes(node)
    if node.op_type == "Shape":
        if a.get("start", 0) != 0 or "end" in a:
            refuse(node, "attributes (start, end)", (a.get("start", 0), a.get("end")),
                   "the whole shape")
        return np.array(values[0].shape, np.int64)
    if node.op_type == "Gather":
        data, indices, axis = values[0], values[1], a.get("axis", 0)
        size = data.shape[axis] if -data.ndim <= axis < data.ndim else 0
        if indices.dtype.kind not in "iu" or indices.size == 0 or \
                not ((indices >= -size) & (indices < size)).all():
            refuse(node, "indices", indices.tolist(), f"integers in [-{size}, {size - 1}]")
        return np.take(data, indices.astype(np.int64), axis=axis)
    if node.op_type == "Concat":
        if "axis" not in a or len({v.ndim for v in values}) != 1:
            refuse(node, "inputs of ranks", [v.ndim for v in values], "one rank and an axis")
        return np.concatenate(values, axis=a["axis"])
    # ConstantOfShape
    value = np.asarray(a.get("value", np.zeros(1, np.float32)))
    shape = tuple(int(d) for d in values[0].reshape(-1))
    if value.size != 1 or min(shape, default=0) < 0:
        refuse(node, "a value and shape", (value.size, shape), "one value, dimensions >= 0")
    return np.full(shape, value.reshape(-1)[0], value.dtype)


def folding_constant_shapes(handler):
    """``handler`` with a node whose inputs are all constants folded into a constant."""
    def handle(node, state):
        names = [name for name in node.input if name]
        if not names or not all(name in state.constants for name in names):
            return handler(node, state)
        state.constants[node.output[0]] = _fold(node, state, [state.constants[n] for n in names])

    handle.__doc__ = handler.__doc__
    return handle


def keeping_row_blocks(handler):
    """``handler`` (a Gather that reads ``Shape(x)[0]`` as the rows' count) made to keep
    the block x, whose rows the count stands for."""
    def handle(node, state):
        handler(node, state)
        role, payload = state.values.get(node.output[0], ("", None))
        if role == "row_count" and payload is None:
            state.values[node.output[0]] = ("row_count", state.values[node.input[0]][1])

    handle.__doc__ = handler.__doc__
    return handle


def row_and_width_shapes(handler):
    """``handler`` (Concat) with ``Concat(rows' count, [k])`` on axis 0, k >= 0 a
    constant, read first: the shape of an (n, k) block."""
    def handle(node, state):
        roles = [state.values.get(name, ("",))[0] for name in node.input]
        widths = [state.constants.get(name) for name in node.input[1:]]
        if len(node.input) != 2 or roles[0] != "row_count" or widths[0] is None or \
                state.values[node.input[0]][1] is None or attributes(node).get("axis") != 0 or \
                widths[0].size != 1 or int(widths[0].reshape(-1)[0]) < 0:
            return handler(node, state)
        block = state.values[node.input[0]][1]
        from . import _Features

        width = int(widths[0].reshape(-1)[0])
        state.values[node.output[0]] = ("shape", _Features(block.value, np.float32, width))

    handle.__doc__ = handler.__doc__
    return handle


def _readers(graph, name):
    return [n for n in graph.node if name in n.input]


def _kernel_transpose(scan, graph):
    """The Transpose (perm 1, 0) of the Scan's distances when they go on through Mul
    and then Neg (skl2onnx's GaussianProcessRegressor), else None."""
    readers = _readers(graph, scan.output[1]) if len(scan.output) > 1 else []
    if len(readers) != 1 or readers[0].op_type != "Transpose":
        return None
    transpose = readers[0]
    after = _readers(graph, transpose.output[0])
    if len(after) != 1 or after[0].op_type != "Mul":
        return None
    if [n.op_type for n in _readers(graph, after[0].output[0])] != ["Neg"]:
        return None
    return transpose


def reading_kernel_distances(handler):
    """``handler`` (the package's Scan) with the distance Scan of a Gaussian process's
    RBF kernel read first: its transposed squared distances become a block of features
    (one row per input row, one column per training row)."""
    def handle(node, state):
        transpose = _kernel_transpose(node, state.graph)
        if transpose is None:
            return handler(node, state)
        from . import _Features
        from .scan import scan_distance_body

        metric = scan_distance_body(node)
        if metric != "sqeuclidean":
            refuse(node, "a kernel over distances", metric, "squared euclidean (RBF)")
        perm = [int(p) for p in attributes(transpose).get("perm", [])]
        if perm != [1, 0]:
            refuse(transpose, "perm", perm, "[1, 0]")
        _, features = state.read(node, 0, ("features",))
        if features.dtype != np.float32:
            refuse(node, "input of dtype", str(features.dtype), "float")
        train = state.constants.get(node.input[1])
        if train is None or train.ndim != 2 or train.dtype != np.float32 or \
                train.shape[1] != features.width or not np.isfinite(train).all():
            refuse(node, "scanned rows", None if train is None else (train.shape, str(train.dtype)),
                   f"a finite constant float matrix of {features.width} columns")
        features = state.rounded(features, node)
        (value,) = state.add(OnnxSquaredDistances(train=train).validate(), [features.value], node)
        state.consumed.update(o for o in transpose.output if o)
        state.values[transpose.output[0]] = ("features", _Features(value, np.float32, len(train)))

    handle.__doc__ = handler.__doc__
    return handle
