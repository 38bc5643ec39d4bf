"""scikit-learn's label transformers: LabelEncoder and LabelBinarizer, alone.

Their ``transform`` takes a 1-D array of labels (numbers or strings). The converted
model reads it as its one input column (``Head.input_1d``): string labels are coded at
the input edge by the schema's vocabulary, numbers are read as they are.

* LabelEncoder: an ``ordinal`` op writes each class's index; the edge refuses labels
  not in ``classes_`` with scikit-learn's own error (``InputColumn.allowed``), after
  casting the labels to ``classes_``'s dtype as scikit-learn does (so a longer string
  is cut to the classes' width, a float to an integer). The result is int64.
* LabelBinarizer: one ``ordinal`` op per output column writes ``pos_label`` for its
  class and ``neg_label`` for anything else (unseen labels give all-``neg_label``
  rows). scikit-learn's ``label_binarize`` returns one column when the labels it is
  given hold at most two distinct values and it has one or two classes
  (``Head.binary_labels_block``), and refuses NaN and non-integer floats
  (``Head.labels_target_check``). ``sparse_output`` is returned dense. The result is
  int64, or the labels' own signed integer dtype (int32 labels give int32), as there.
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, GraphBuilder, Head, ModelIR, OrdinalEncode, SchemaBuilder, Select
from ...ir.graph import STRING
from .._sklearn import check_fitted, sklearn_versions
from ..registry import register_frontend
from ..sklearn_compose import transformer

__all__ = []


def _classes(model, owner):
    check_fitted(model, "classes_")
    classes = np.asarray(model.classes_)
    if classes.ndim != 1:
        raise MissingConverter(unsupported_message(
            owner, "classes of shape", classes.shape, "1-D classes"))
    if classes.dtype.kind in "biuf":
        return classes, classes.astype(np.float64), None
    values = classes.tolist()
    if not all(isinstance(v, str) for v in values):
        raise MissingConverter(unsupported_message(
            owner, "labels that are neither numbers nor strings", values[:3],
            "numbers or strings"))
    schema = SchemaBuilder(["y"], [STRING])
    codes = np.asarray([schema.code(0, v) for v in values], dtype=np.float64)
    return classes, codes, schema


def _model_ir(model, schema, op_list, **head_fields):
    schema = schema or SchemaBuilder(["y"])
    builder = GraphBuilder(schema.value_type)
    value = INPUT
    for i, op in enumerate(op_list):
        (value,) = builder.add(op, [value], f"{type(model).__name__}:{i}")
    graph = builder.build(value, value)
    head = Head(estimator=type(model).__name__, task="transform", n_features=1,
                methods=("transform",), library_versions=sklearn_versions(), input_1d=True,
                allows_nan=True, allows_inf=True, **head_fields)
    return ModelIR(head=head, graph=graph, schema=schema.build()).validate()


@register_frontend("sklearn", "LabelEncoder")
def _label_encoder(model, options):
    owner = "LabelEncoder"
    classes, codes, schema = _classes(model, owner)
    schema = schema or SchemaBuilder(["y"])
    has_nan = bool(np.isnan(codes).any())
    schema.set(0, allowed=codes[~np.isnan(codes)], allowed_missing=has_nan, check_owner=owner)
    op = OrdinalEncode(n_features=1, categories=(codes,),
                       outputs=(np.arange(len(codes), dtype=np.float64),),
                       unknown=(np.nan,), dtype="float64")
    return _model_ir(model, schema, [op], input_1d_dtype=classes.dtype.str,
                     transform_dtype="int64", squeeze_output=True)


@register_frontend("sklearn", "LabelBinarizer")
def _label_binarizer(model, options):
    owner = "LabelBinarizer"
    check_fitted(model, "classes_")
    if str(getattr(model, "y_type_", "")).startswith("multilabel"):
        raise MissingConverter(unsupported_message(
            owner, "a binarizer fitted on multilabel targets", model.y_type_,
            "binary or multiclass labels"))
    classes, codes, schema = _classes(model, owner)
    # pos_label == 0 (scikit-learn's pos_switch) gives 0 for the class, neg_label else
    neg, pos = int(model.neg_label), int(model.pos_label)
    n = len(codes)
    # One output column per class; with one class, a second column that is always
    # neg_label (what a "binary" target gets then).
    n_outputs = max(n, 2)
    outputs = []
    for j in range(n_outputs):
        outputs.append(np.where(np.arange(n) == j, pos, neg).astype(np.float64))
    replicate = Select(1, (0,) * n_outputs)
    op = OrdinalEncode(n_features=n_outputs, categories=(codes,) * n_outputs,
                       outputs=tuple(outputs), unknown=(float(neg),) * n_outputs,
                       dtype="float64")
    binary = (1, 2) if n <= 2 else ()
    blocks = (("transform", 0, n),)
    return _model_ir(model, schema, [replicate, op], labels_target_check=True,
                     binary_labels_block=binary, blocks=blocks, transform_dtype="labels_int",
                     squeeze_output=False)


@transformer("LabelEncoder", "LabelBinarizer")
def _label_step(model, composer, value):
    raise MissingConverter(unsupported_message(
        type(model).__name__, "a label transformer as a step of a pipeline",
        "1-D labels", "LabelEncoder and LabelBinarizer alone (transform of 1-D labels)"))
