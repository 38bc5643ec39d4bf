"""Handlers of plain ONNX operators beyond the ones ``__init__`` reads: ``Softmax``
(a multiclass perceptron's output layer) and the elementwise operators of skl2onnx's
one-vs-rest SVC graph (``Less``, ``Neg``, ``Abs``, ``Sum``, and ``Add``/``Sub``/``Mul``/
``Div`` of two computed blocks; ``Where`` after a comparison), which turn a classifier's pairwise scores into
per-class scores; ``labels_beside_features`` makes such a block the classifier's
probabilities."""

import numpy as np

from ...ir import Concat, Select
from ...ir.families.onnx_ops import OnnxElementwise, OnnxSoftmax
from ._attributes import attributes, refuse

__all__ = ["handle_softmax", "handle_unary", "handle_compare", "handle_sum", "handle_binary",
           "handle_where", "labels_beside_features", "reading_blocks"]


def _features_class():
    from . import _Features  # the package's own value record (imported late: a cycle)

    return _Features


def handle_softmax(node, state):
    """Softmax over each row's columns of a float block (axis 1 or -1; a double tensor
    takes another kernel in ONNX Runtime, which woodstar does not mirror)."""
    features = _block(state, node, 0)
    if features.dtype != np.float32:
        refuse(node, "input of dtype", str(features.dtype),
               "float (ONNX Runtime's MLAS softmax kernel, mirrored bit for bit)")
    if getattr(features, "one_dimensional", False):
        refuse(node, "an input reshaped to", "one dimension", "an (n, columns) matrix")
    axis = attributes(node).get("axis", -1)
    if axis not in (1, -1):
        refuse(node, "axis", axis, "1 or -1 (each row's columns)")
    features = state.rounded(features, node)
    (value,) = state.add(OnnxSoftmax(width=features.width), [features.value], node)
    block = _features_class()(value, np.float32, features.width)
    state.values[node.output[0]] = ("features", block)


def _block(state, node, index):
    """Input ``index`` as a block of features: computed features, a regressor's values
    (an opset-5 TreeEnsemble as a classifier's body: its scores), or a classifier's
    score columns (its probabilities output: the first ``proba_width`` columns of its
    ``transformed`` value)."""
    role, payload = state.read(node, index, ("features", "probabilities", "values"))
    if role == "values":
        dtype = getattr(payload, "values_dtype", np.float32)
        width = _transformed_width(state, payload)
        return _features_class()(payload.transformed, dtype, width)
    if role == "probabilities":
        width = payload.proba_width
        cache = state.__dict__.setdefault("_score_blocks", {})
        if id(payload) not in cache:
            total = _transformed_width(state, payload)
            (value,) = state.add(Select(n_features=total, indices=tuple(range(width))),
                                 [payload.transformed], node, ":scores")
            cache[id(payload)] = _features_class()(value, np.float32, width)
        return cache[id(payload)]
    if payload.dtype != np.float32:
        refuse(node, "input of dtype", str(payload.dtype), "float")
    return state.rounded(payload, node)


def reading_blocks(handler):
    """``handler`` (one of the package's, which reads computed features) made to read a
    model's values or scores too, as ``_block`` turns them into features."""
    def handle(node, state):
        renamed = None
        for i, name in enumerate(node.input):
            if state.values.get(name, ("",))[0] not in ("values", "probabilities"):
                continue
            alias = f"{name}:block"
            state.values[alias] = ("features", _block(state, node, i))
            if renamed is None:
                renamed = type(node)()
                renamed.CopyFrom(node)
            renamed.input[i] = alias
        handler(renamed if renamed is not None else node, state)

    handle.__doc__ = handler.__doc__
    return handle


def _transformed_width(state, result):
    return state.builder.type_of(result.transformed).width


def _write(state, node, op, inputs, dtype=np.float32):
    (value,) = state.add(op, [b.value for b in inputs], node)
    state.values[node.output[0]] = ("features", _features_class()(value, dtype, op.width))


def handle_unary(node, state):
    """Neg, Abs: exact in float32."""
    block = _block(state, node, 0)
    _write(state, node, OnnxElementwise(function=node.op_type.lower(), width=block.width,
                                        widths=(block.width,)), [block])


def handle_compare(node, state):
    """Less / Greater of a float block and a constant: a boolean block (held as 0.0 and
    1.0, which a Cast to float gives as they are)."""
    block = _block(state, node, 0)
    constant = state.constants.get(node.input[1]) if len(node.input) > 1 else None
    if constant is None or constant.dtype != np.float32 or constant.size not in (1, block.width):
        refuse(node, "a second input that is not a float constant", node.input[1:],
               f"1 or {block.width} float values (an initializer or a Constant)")
    operand = np.broadcast_to(constant.reshape(-1), (block.width,))
    _write(state, node, OnnxElementwise(function=node.op_type.lower(), width=block.width,
                                        widths=(block.width,), operand=operand), [block],
           dtype=np.bool_)


def handle_where(node, state):
    """Where(condition, x, y): the condition a Less/Greater block, x and y computed float
    blocks (each of the width or 1, broadcast)."""
    _, condition = state.read(node, 0, ("features",))
    if condition.dtype != np.bool_:
        refuse(node, "a condition of dtype", str(condition.dtype),
               "a boolean block written by Less or Greater")
    if any(name in state.constants for name in node.input[1:]):
        refuse(node, "a constant branch", [n for n in node.input[1:] if n in state.constants],
               "two computed float blocks (constant branches are not read yet)")
    blocks = [condition, _block(state, node, 1), _block(state, node, 2)]
    widths = tuple(b.width for b in blocks)
    width = max(widths)
    if any(w not in (1, width) for w in widths):
        refuse(node, "inputs of widths", widths, f"one width or 1 (broadcast), here {width}")
    _write(state, node, OnnxElementwise(function="where", width=width, widths=widths), blocks)


def _fold(node, state, function, blocks):
    widths = tuple(b.width for b in blocks)
    width = max(widths)
    if any(w not in (1, width) for w in widths):
        refuse(node, "inputs of widths", widths, f"one width or 1 (broadcast), here {width}")
    _write(state, node, OnnxElementwise(function=function, width=width, widths=widths), blocks)


def handle_sum(node, state):
    """Sum of float blocks, added left to right in float32."""
    blocks = [_block(state, node, i) for i in range(len(node.input))]
    if len(blocks) == 1:
        state.values[node.output[0]] = ("features", blocks[0])
        return
    _fold(node, state, "add", blocks)


def handle_binary(node, state):
    """Add, Sub, Mul, Div: of two computed blocks here; with a constant operand, the
    package's own handler (a ``column_ops`` step)."""
    if len(node.input) == 2 and not any(name in state.constants for name in node.input):
        _fold(node, state, node.op_type.lower(), [_block(state, node, 0), _block(state, node, 1)])
        return
    from . import _arithmetic

    reading_blocks(_arithmetic)(node, state)


def labels_beside_features(state, outputs):
    """A classifier's labels and a float block computed from its scores (skl2onnx's
    one-vs-rest SVC graph: per-class scores from the pairwise ones) as the graph's two
    outputs: that block becomes the classifier's probabilities, beside its labels'
    index. Other outputs are returned as they are."""
    labels = [p for role, p in outputs if role == "labels"]
    blocks = [p for role, p in outputs if role in ("features", "zipmap")
              and isinstance(p, _features_class())]
    if len(outputs) != 2 or len(labels) != 1 or len(blocks) != 1:
        return outputs
    result, block = labels[0], blocks[0]
    if getattr(result, "decided_by_argmax", False) or block.dtype != np.float32 or \
            block.width != len(result.labels):
        return outputs
    from . import _Result

    node = result.node
    total = _transformed_width(state, result)
    (index,) = state.builder.add(Select(n_features=total, indices=(result.proba_width,)),
                                 [result.transformed], name=f"{node.name or node.op_type}:label")
    (transformed,) = state.builder.add(Concat(widths=(block.width, 1)), [block.value, index],
                                       name=f"{node.name or node.op_type}:scores")
    combined = _Result(node, result.raw, transformed, result.labels, block.width)
    combined.model = getattr(result, "model", node)
    state.results.append(combined)
    return [("labels", combined) if role == "labels" else
            ("zipmap" if role == "zipmap" else "probabilities", combined) for role, _ in outputs]
