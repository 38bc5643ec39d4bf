"""skl2onnx's MultiOutputRegressor and MultiOutputClassifier graphs: one model node
per output. A regressor's values are each ``Reshape``d to (-1, 1) and ``Concat``enated
into the (n, n_outputs) matrix (plain features from there on). A classifier's labels
are each ``Reshape``d to a column and ``Concat``enated into an (n, n_outputs) label
matrix, and its probabilities go into a ``SequenceConstruct`` (ONNX Runtime returns a
list of per-output matrices). The container gives what scikit-learn gives:
``predict`` the label matrix, ``predict_proba`` the list of probability matrices.
The transformed output holds every output's probabilities side by side, then one
label index column per output (``Head.blocks``)."""

import numpy as np

from ...ir import Concat, Head, Select
from ...ir.families.onnx_math import OnnxReduce
from ._attributes import attributes, refuse
from .plain_ops import _block, _transformed_width

__all__ = ["reshaping_outputs", "concatenating_labels", "handle_sequence_construct",
           "multi_output_head", "label_index", "MULTI_OUTPUT_ROLES"]

MULTI_OUTPUT_ROLES = ("label_column", "label_matrix", "proba_sequence")


def _shape(node, state):
    shape = state.constants.get(node.input[1]) if len(node.input) > 1 else None
    return None if shape is None else [int(d) for d in np.asarray(shape).reshape(-1)]


def reshaping_outputs(handler):
    """``handler`` (the package's Reshape) with a model's values or labels reshaped to
    columns first: values to (-1, width) become features, labels to (-1, 1) a label
    column."""
    def handle(node, state):
        role, payload = state.values.get(node.input[0], ("", None)) if node.input else ("", None)
        if role == "values" and len(_shape(node, state) or ()) == 2:
            block = _block(state, node, 0)
            if _shape(node, state) != [-1, block.width]:
                refuse(node, "a reshape of a model's values to", _shape(node, state),
                       f"[-1, {block.width}]")
            state.values[node.output[0]] = ("features", block)
            return None
        if role == "labels" and _shape(node, state) == [-1, 1]:
            state.values[node.output[0]] = ("label_column", [payload])
            return None
        return handler(node, state)

    handle.__doc__ = handler.__doc__
    return handle


def concatenating_labels(handler):
    """``handler`` (the package's Concat) with label columns side by side first."""
    def handle(node, state):
        roles = [state.values.get(name, ("",))[0] for name in node.input]
        if not roles or "label_column" not in roles and "label_matrix" not in roles:
            return handler(node, state)
        if attributes(node).get("axis") not in (1, -1):
            refuse(node, "a Concat of label columns on axis", attributes(node).get("axis"),
                   "1 (side by side)")
        results = []
        for i in range(len(node.input)):
            results.extend(state.read(node, i, ("label_column", "label_matrix"))[1])
        state.values[node.output[0]] = ("label_matrix", results)
        return None

    handle.__doc__ = handler.__doc__
    return handle


def handle_sequence_construct(node, state):
    """SequenceConstruct of classifiers' probabilities (or of float blocks computed as
    a naive Bayes graph computes them, beside labels an ArgMax gave): a list of
    matrices."""
    items = []
    for i in range(len(node.input)):
        role, payload = state.read(node, i, ("probabilities", "features"))
        if role == "features" and (payload.dtype != np.float32 or
                                   getattr(payload, "one_dimensional", False)):
            refuse(node, "a sequence item of dtype", str(payload.dtype), "a float matrix")
        items.append(payload)
    state.values[node.output[0]] = ("proba_sequence", items)


def label_index(state, result, node_name):
    """One column: the index of ``result``'s label among its classes."""
    if getattr(result, "decided_by_argmax", False):
        op = OnnxReduce(function="argmax", groups=1, size=result.proba_width)
        (index,) = state.builder.add(op, [result.transformed], name=f"{node_name}:label")
        return index
    total = _transformed_width(state, result)
    (index,) = state.builder.add(Select(n_features=total, indices=(result.proba_width,)),
                                 [result.transformed], name=f"{node_name}:label")
    return index


def multi_output_head(state, outputs, output_names, **head):
    """(Head, transformed) of a multi-output classifier's graph: a label matrix and the
    sequence of the same models' probabilities."""
    roles = [role for role, _ in outputs]
    if roles != ["label_matrix", "proba_sequence"] or \
            len(outputs[0][1]) != len(outputs[1][1]) or \
            not all(_pairs(r, p) for r, p in zip(outputs[0][1], outputs[1][1])):
        refuse(_Outputs(), "outputs holding", list(zip(output_names, roles)),
               "a Concat of each classifier's label column, then a SequenceConstruct of "
               "the same classifiers' probabilities, in one order")
    results = outputs[0][1]
    probas, indices = [], []
    for i, (result, item) in enumerate(zip(results, outputs[1][1])):
        node = f"{result.node.name or result.node.op_type}"
        if item is not result:  # a float block beside labels an ArgMax gave
            probas.append(item.value)
        elif _transformed_width(state, result) == result.proba_width:
            probas.append(result.transformed)
        else:
            (proba,) = state.builder.add(Select(n_features=_transformed_width(state, result),
                                                indices=tuple(range(result.proba_width))),
                                         [result.transformed], name=f"{node}:proba{i}")
            probas.append(proba)
        indices.append(label_index(state, result, f"{node}:{i}"))
    widths = tuple(r.proba_width for r in results)
    (transformed,) = state.builder.add(Concat(widths=widths + (1,) * len(results)),
                                       probas + indices, name="multi_output:scores")
    total = sum(widths)
    head = Head(task="classification", methods=("predict", "predict_proba"),
                classes=tuple(r.labels for r in results),
                blocks=(("proba", 0, total), ("label_index", total, total + len(results))),
                **head)
    return head, transformed


def _pairs(result, item):
    """Whether a sequence item holds the probabilities of the classifier ``result``:
    its own, or a float block of one column per class beside labels an ArgMax gave."""
    if item is result:
        return True
    return getattr(result, "decided_by_argmax", False) and not hasattr(item, "labels") \
        and item.width == len(result.labels)


class _Outputs:
    op_type, domain, name = "outputs", "", "graph outputs"
