"""Handlers of plain ONNX operators beyond the ones ``__init__`` reads: ``Softmax``
(a multiclass perceptron's output layer) and the elementwise operators of skl2onnx's
one-vs-rest SVC graph (``Less``, ``Neg``, ``Abs``, ``Sum``, and ``Add``/``Sub``/``Mul``/
``Div`` of two computed blocks; ``Where`` after a comparison), which turn a classifier's pairwise scores into
per-class scores; ``labels_beside_features`` makes such a block the classifier's
probabilities."""

import numpy as np

from ...ir import ColumnOps, Concat, Select
from ...ir.families.onnx_ops import OnnxElementwise, OnnxSoftmax
from ...ir.families.onnx_math import OnnxReduce
from ._attributes import attributes, refuse

__all__ = ["handle_softmax", "handle_unary", "handle_compare", "handle_sum", "handle_binary",
           "handle_where", "labels_beside_features", "reading_blocks", "reading_block",
           "features_class", "inner_shape"]


def _features_class():
    from . import _Features  # the package's own value record (imported late: a cycle)

    return _Features


features_class = _features_class


def inner_shape(block):
    """The shape of each row's tensor beyond the batch axis: ``block.inner`` where a
    Reshape or a broadcast gave one (``math_ops.py``), else (width,)."""
    return tuple(getattr(block, "inner", None) or (block.width,))


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


def reading_block(state, node, index):
    """Input ``index`` as a float32 block of features (computed features, a model's
    values or a classifier's scores)."""
    return _block(state, node, index)


def with_inputs_as_features(node, state, convert, suffix):
    """``node``, or a copy whose inputs ``convert(i, role, payload)`` turns into a
    features block (not None) read under the alias ``<name>:<suffix>``."""
    renamed = None
    for i, name in enumerate(node.input):
        role, payload = state.values.get(name, ("", None))
        block = convert(i, role, payload)
        if block is None:
            continue
        alias = f"{name}:{suffix}"
        state.values[alias] = ("features", block)
        if renamed is None:
            renamed = type(node)()
            renamed.CopyFrom(node)
        renamed.input[i] = alias
    return renamed if renamed is not None else node


def reading_blocks(handler):
    """``handler`` (one of the package's, which reads computed features) made to read a
    model's values or scores too, as ``_block`` turns them into features."""
    def handle(node, state):
        def as_block(i, role, payload):
            return _block(state, node, i) if role in ("values", "probabilities") else None

        handler(with_inputs_as_features(node, state, as_block, "block"), state)

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
    1.0, which a Cast to float gives as they are). A one-column block against k values
    (KBinsDiscretizer's bin edges) is compared with each: k columns."""
    block = _block(state, node, 0)
    constant = state.constants.get(node.input[1]) if len(node.input) > 1 else None
    if constant is not None and block.width == 1 and constant.size > 1 and \
            constant.shape[-1] == constant.size and len(inner_shape(block)) == 1:
        (tiled,) = state.add(Select(n_features=1, indices=(0,) * constant.size), [block.value],
                             node, ":broadcast")
        block = _features_class()(tiled, block.dtype, constant.size)
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
    """Add, Sub, Mul, Div: of two constants, folded (IEEE float32, as the kernels); of
    two computed blocks here; a block with a constant that broadcasts over each row's
    tensor (``_broadcast_constant``); else the package's own handler (a ``column_ops``
    step)."""
    constants = [name in state.constants for name in node.input]
    if len(node.input) == 2 and all(constants):
        _fold_constants(node, state)
        return
    if len(node.input) == 2 and not any(constants):
        blocks = [_block(state, node, 0), _block(state, node, 1)]
        if any(len(inner_shape(b)) > 1 for b in blocks) and \
                inner_shape(blocks[0]) != inner_shape(blocks[1]):
            refuse(node, "blocks of shapes", [inner_shape(b) for b in blocks],
                   "one shape, or (n, columns) blocks of one width or 1")
        _fold(node, state, node.op_type.lower(), blocks)
        if all(len(inner_shape(b)) > 1 for b in blocks):
            state.values[node.output[0]][1].inner = inner_shape(blocks[0])
        return
    if len(node.input) == 2 and _needs_broadcast(node, state, constants.index(True)):
        _broadcast_constant(node, state, constants.index(True))
        return
    from . import _arithmetic

    reading_blocks(_arithmetic)(node, state)


_NUMPY_BINARY = {"Add": np.add, "Sub": np.subtract, "Mul": np.multiply, "Div": np.divide}


def _fold_constants(node, state):
    a, b = (state.constants[name] for name in node.input)
    if a.dtype != b.dtype or a.dtype.kind != "f":
        refuse(node, "constants of dtypes", (str(a.dtype), str(b.dtype)), "one float dtype")
    with np.errstate(all="ignore"):
        state.constants[node.output[0]] = _NUMPY_BINARY[node.op_type](a, b).astype(a.dtype)


def _constant_inner(node, constant, rank):
    """The constant's shape against each row's tensor (rank dimensions with the batch):
    a leading batch dimension of 1 dropped."""
    if constant.ndim > rank or (constant.ndim == rank and constant.shape[0] != 1):
        refuse(node, "a constant of shape", constant.shape,
               f"at most {rank} dimensions, the first 1 where there are {rank}")
    return constant.shape[1:] if constant.ndim == rank else constant.shape


def _needs_broadcast(node, state, constant_index):
    role, block = state.values.get(node.input[1 - constant_index], ("", None))
    if role != "features":
        return False
    constant = state.constants[node.input[constant_index]]
    return len(inner_shape(block)) > 1 or constant.ndim > 2


def _broadcast_constant(node, state, constant_index):
    """A block (op) a constant, or a constant (op) a block, where the constant
    broadcasts against each row's tensor (naive Bayes: (n, 1, F) - (1, C, F)): the
    block's columns repeated to the broadcast shape (``select``), then a ``column_ops``
    step with the constant broadcast to it; ``c - x`` is ``(-x) + c`` (exact negation,
    then one rounding, as the kernel's subtraction)."""
    block = _block(state, node, 1 - constant_index)
    constant = state.constants[node.input[constant_index]]
    if constant.dtype != np.float32:
        refuse(node, "a constant of dtype", str(constant.dtype), "float")
    inner = inner_shape(block)
    constant_inner = _constant_inner(node, constant, len(inner) + 1)
    try:
        out_inner = tuple(np.broadcast_shapes(inner, constant_inner))
    except ValueError:
        refuse(node, "shapes", (inner, constant_inner), "shapes that broadcast")
    if len(out_inner) > len(inner) and out_inner[:len(out_inner) - len(inner)] != (1,) * (
            len(out_inner) - len(inner)):
        refuse(node, "a constant with more dimensions than each row's tensor", constant.shape,
               f"at most {len(inner) + 1} dimensions")
    width = int(np.prod(out_inner, dtype=np.int64))
    value = block.value
    if width != block.width:
        positions = np.broadcast_to(np.arange(block.width).reshape(inner), out_inner).ravel()
        (value,) = state.add(Select(n_features=block.width, indices=tuple(int(i) for i in positions)),
                             [value], node, ":broadcast")
    operand = np.ascontiguousarray(np.broadcast_to(constant.reshape(constant_inner), out_inner)
                                   .reshape(-1), dtype=np.float32)
    op_name = node.op_type.lower()
    if constant_index == 0 and op_name in ("sub", "div"):
        if op_name == "div":
            refuse(node, "a constant divided by a block", node.input[0], "a block divided by a constant")
        (value,) = state.add(ColumnOps(name="Neg", n_features=width, ops=("mul",),
                                       operands=(np.full(width, -1, np.float32),),
                                       cast_operand=(False,)), [value], node, ":neg")
        op_name = "add"
    (value,) = state.add(ColumnOps(name=node.op_type, n_features=width, ops=(op_name,),
                                   operands=(operand,), cast_operand=(False,)), [value], node)
    out = _features_class()(value, np.float32, width)
    if len(out_inner) > 1:
        out.inner = out_inner
    state.values[node.output[0]] = ("features", out)


def labels_beside_features(state, outputs):
    """A classifier's labels and a float block computed from its scores as the graph's
    two outputs: that block becomes the classifier's probabilities, beside its labels'
    index (skl2onnx's one-vs-rest SVC graph: per-class scores from the pairwise ones;
    its naive Bayes graphs: ``exp(jll - logsumexp(jll))`` beside the labels of the
    first largest ``jll``). A clustering's index (KMeans: ArgMin) beside a float block
    becomes labels 0..k-1 and ``transform``. Other outputs are returned as they are."""
    indices = [p for role, p in outputs if role == "index"]
    blocks = [p for role, p in outputs if role in ("features", "zipmap")
              and isinstance(p, _features_class())]
    if len(outputs) == 2 and len(indices) == 1 and len(blocks) == 1:
        clusters = _clusters_beside_features(state, indices[0], blocks[0], outputs)
        if clusters is not outputs:
            return clusters
    if any(role == "index" for role, _ in outputs):
        refuse(_OutputNode("ArgMin"), "an ArgMin output beside", [role for role, _ in outputs],
               "a float block of one column per index (KMeans: labels and distances)")
    labels = [p for role, p in outputs if role == "labels"]
    if len(outputs) != 2 or len(labels) != 1 or len(blocks) != 1:
        return outputs
    result, block = labels[0], blocks[0]
    if block.dtype != np.float32 or block.width != len(result.labels):
        return outputs
    from . import _Result

    node = result.node
    if getattr(result, "decided_by_argmax", False):
        # the labels: the first largest column of the block ArgMax read (a NaN never
        # wins), which need not be the largest probability once rounded
        (index,) = state.builder.add(OnnxReduce(function="argmax", groups=1,
                                                size=result.proba_width),
                                     [result.transformed], name=f"{node.name or node.op_type}:label")
    else:
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


def _clusters_beside_features(state, index, block, outputs):
    if block.dtype != np.float32 or block.width != index.classes or \
            len(inner_shape(block)) != 1:
        return outputs
    from . import _Result

    (transformed,) = state.builder.add(Concat(widths=(block.width, 1)), [block.value, index.value],
                                       name="clusters")
    labels = np.arange(block.width, dtype=np.int64)
    combined = _Result(_OutputNode("ArgMin"), block.value, transformed, labels, block.width)
    combined.second_method = "transform"  # the distances are no probabilities
    combined.model = combined.node
    state.results.append(combined)
    return [("labels", combined) if role == "index" else ("probabilities", combined)
            for role, _ in outputs]


class _OutputNode:
    """Stands for the node behind a result the graph assembles from several nodes."""

    domain = ""

    def __init__(self, op_type):
        self.op_type, self.name = op_type, op_type
