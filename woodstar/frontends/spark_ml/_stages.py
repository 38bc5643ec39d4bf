"""Spark ML transformers (pipeline stages before the predictor), one function each.

Every stage says which columns it reads (with the kind an input column must have)
and writes (``STAGES[name].io``), and adds its ops (``STAGES[name].convert``). Each
converter repeats Spark's own arithmetic in float64:

* VectorAssembler: the columns side by side (-0.0 becomes 0.0: Spark keeps the
  non-zero entries); ``handleInvalid="error"`` refuses NaN in its input columns at the
  edge, as Spark raises;
* StandardScalerModel: ``(x - mean) * (1 / std)`` (0 for a zero std), or one of the
  two halves;
* MinMaxScalerModel: ``(x - originalMin) * ((max - min) / range) + min``; a constant
  column gives ``0.5 * (max - min) + min`` for every value but NaN;
* MaxAbsScalerModel: ``x * (1 / maxAbs)`` (1 for a zero maxAbs);
* ImputerModel: ``missingValue`` (NaN, or a number) takes the column's surrogate;
* StringIndexerModel: the label's index in ``labelsArray``; unseen and missing labels
  raise (``error``, at the edge) or take ``len(labels)`` (``keep``);
* OneHotEncoderModel: a block of 0/1 per column (``dropLast``, ``handleInvalid``);
* Bucketizer: the bucket, by Spark's search (op ``spark_bucketize``).

``handleInvalid="skip"`` drops rows, which a fixed-shape program cannot do: refused.
"""

from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import FLOAT, STRING, ColumnOps, OneHotEncode, OrdinalEncode
from ...ir.families.spark_ops import SparkBucketize
from ._columns import param

__all__ = ["STAGES", "Stage", "stage_io"]


@dataclass(frozen=True)
class Stage:
    io: Callable  # stage -> ([(column, kind)], [column])
    convert: Callable  # (stage, Columns) -> None


STAGES = {}


def _stage(name, io):
    def decorate(fn):
        STAGES[name] = Stage(io, fn)
        return fn
    return decorate


def _refuse_skip(stage):
    if param(stage, "handleInvalid") == "skip":
        raise MissingConverter(unsupported_message(
            type(stage).__name__, 'handleInvalid="skip" (it drops rows; a converted model '
            'returns one result per input row)', "skip", ["error", "keep"]))


def _single_or_multi(stage):
    """(input columns, output columns) of a stage with inputCol(s)/outputCol(s)."""
    if stage.isSet("inputCols") or (not stage.isSet("inputCol") and param(stage, "inputCols")):
        return list(param(stage, "inputCols")), list(param(stage, "outputCols"))
    return [param(stage, "inputCol")], [param(stage, "outputCol")]


def _io(kind):
    def io(stage):
        inputs, outputs = _single_or_multi(stage)
        return [(c, kind) for c in inputs], outputs
    return io


def stage_io(stage):
    name = type(stage).__name__
    entry = STAGES.get(name)
    if entry is None:
        raise MissingConverter(unsupported_message(
            name, "this pipeline stage", name, sorted(STAGES)))
    return entry.io(stage)


def _scalar_refs(columns, stage, names):
    refs = [columns.ref(n, type(stage).__name__) for n in names]
    for name, ref in zip(names, refs):
        if ref.width != 1:
            raise MissingConverter(unsupported_message(
                type(stage).__name__, "a vector input column", name, "numeric columns"))
    return refs


def _forbid_missing(columns, ref, owner):
    """Spark raises on NaN in this column: the edge does too, where it is an input."""
    if ref.input_column >= 0:
        columns.schema.set(ref.input_column, allowed_missing=False, check_owner=owner)


# ---------------------------------------------------------------- VectorAssembler
@_stage("VectorAssembler", lambda s: ([(c, FLOAT) for c in param(s, "inputCols")],
                                      [param(s, "outputCol")]))
def _vector_assembler(stage, columns):
    _refuse_skip(stage)
    names = list(param(stage, "inputCols"))
    refs = [columns.ref(n, "VectorAssembler") for n in names]
    if param(stage, "handleInvalid") == "error":
        for ref in refs:
            _forbid_missing(columns, ref, "VectorAssembler")
    value = columns.gather(refs, "VectorAssembler")
    # Spark stores the non-zero entries (x != 0.0), so -0.0 comes out as 0.0: + 0.0 does that
    width = columns.graph.type_of(value).width
    (value,) = columns.add(ColumnOps(name="VectorAssembler", n_features=width, ops=("add",),
                                     operands=(np.zeros(width),), cast_operand=(False,)),
                           [value], "VectorAssembler:zeros")
    columns.write(param(stage, "outputCol"), value)


# ---------------------------------------------------------------- scalers (vectors)
def _vector_io(stage):
    return [(param(stage, "inputCol"), FLOAT)], [param(stage, "outputCol")]


def _scale(stage, columns, ops, operands):
    name = type(stage).__name__
    ref = columns.ref(param(stage, "inputCol"), name)
    operands = tuple(np.asarray(o, dtype=np.float64) for o in operands)
    width = operands[0].shape[-1] if operands else ref.width
    if ref.width != width or ref.input_column >= 0:
        raise MissingConverter(unsupported_message(
            name, f"an input of {ref.width} column(s)", param(stage, "inputCol"),
            f"the {width}-entry vector a VectorAssembler stage before it writes"))
    value = columns.gather([ref], name)
    if ops:
        (value,) = columns.add(ColumnOps(name=name, n_features=ref.width, ops=tuple(ops),
                                         operands=operands, cast_operand=(False,) * len(ops)),
                               [value], name)
    columns.write(param(stage, "outputCol"), value)


def _array(vector):
    return np.asarray(vector.toArray(), dtype=np.float64)


@_stage("StandardScalerModel", _vector_io)
def _standard_scaler(stage, columns):
    ops, operands = [], []
    if param(stage, "withMean"):
        ops.append("sub")
        operands.append(_array(stage.mean))
    if param(stage, "withStd"):
        std = _array(stage.std)
        with np.errstate(divide="ignore"):
            ops.append("mul")
            operands.append(np.where(std == 0, 0.0, 1.0 / np.where(std == 0, 1.0, std)))
    _scale(stage, columns, ops, operands)


@_stage("MinMaxScalerModel", _vector_io)
def _min_max_scaler(stage, columns):
    low, high = float(param(stage, "min")), float(param(stage, "max"))
    scale = high - low
    lo, hi = _array(stage.originalMin), _array(stage.originalMax)
    span = hi - lo
    factor = np.where(span != 0, scale / np.where(span != 0, span, 1.0), 0.0)
    constant = factor == 0
    # a constant column: every non-NaN value -> +inf -> 0.5 * scale + min (NaN stays NaN)
    operands = [np.where(constant, 0.0, lo), np.where(constant, 1.0, factor),
                np.where(constant, -0.0, low), np.where(constant, np.inf, -np.inf),
                np.where(constant, 0.5 * scale + low, np.inf)]
    _scale(stage, columns, ["sub", "mul", "add", "maximum", "minimum"], operands)


@_stage("MaxAbsScalerModel", _vector_io)
def _max_abs_scaler(stage, columns):
    max_abs = _array(stage.maxAbs)
    _scale(stage, columns, ["mul"], [np.where(max_abs == 0, 1.0,
                                              1.0 / np.where(max_abs == 0, 1.0, max_abs))])


# ---------------------------------------------------------------- ImputerModel
@_stage("ImputerModel", _io(FLOAT))
def _imputer(stage, columns):
    inputs, outputs = _single_or_multi(stage)
    refs = _scalar_refs(columns, stage, inputs)
    row = stage.surrogateDF.collect()[0]
    surrogate = np.asarray([float(row[c]) for c in inputs])
    missing = float(param(stage, "missingValue"))
    value = columns.gather(refs, "ImputerModel")
    if np.isnan(missing):
        op = ColumnOps(name="ImputerModel", n_features=len(refs), ops=("fill_nan",),
                       operands=(surrogate,), cast_operand=(False,))
    else:
        op = ColumnOps(name="ImputerModel", n_features=len(refs), ops=("fill_value",),
                       operands=(np.stack([np.full(len(refs), missing), surrogate]),),
                       cast_operand=(False,))
    (value,) = columns.add(op, [value], "ImputerModel")
    for j, name in enumerate(outputs):
        columns.write(name, value, [j])


# ---------------------------------------------------------------- StringIndexerModel
@_stage("StringIndexerModel", _io(STRING))
def _string_indexer(stage, columns):
    _refuse_skip(stage)
    inputs, outputs = _single_or_multi(stage)
    refs = _scalar_refs(columns, stage, inputs)
    keep = param(stage, "handleInvalid") == "keep"
    labels_array = [list(labels) for labels in stage.labelsArray]
    categories, indices, unknown = [], [], []
    for ref, labels in zip(refs, labels_array):
        codes = np.asarray([columns.code(ref, label, "StringIndexerModel") for label in labels])
        categories.append(codes)
        indices.append(np.arange(len(labels), dtype=np.float64))
        unknown.append(float(len(labels)) if keep else np.nan)
        if not keep:  # Spark raises on unseen labels and on nulls
            columns.schema.set(ref.input_column, allowed=codes, allowed_missing=False,
                               check_owner="StringIndexerModel")
    op = OrdinalEncode(n_features=len(refs), categories=tuple(categories),
                       outputs=tuple(indices), unknown=tuple(unknown))
    (value,) = columns.add(op, [columns.gather(refs, "StringIndexerModel")], "StringIndexerModel")
    for j, name in enumerate(outputs):
        columns.write(name, value, [j])


# ---------------------------------------------------------------- OneHotEncoderModel
@_stage("OneHotEncoderModel", _io(FLOAT))
def _one_hot(stage, columns):
    _refuse_skip(stage)
    name = "OneHotEncoderModel"
    inputs, outputs = _single_or_multi(stage)
    refs = _scalar_refs(columns, stage, inputs)
    keep = param(stage, "handleInvalid") == "keep"
    drop_last = bool(param(stage, "dropLast"))
    sizes = [int(s) for s in stage.categorySizes]
    categories, positions, unknown, blocks, start = [], [], [], [], 0
    for ref, size in zip(refs, sizes):
        width = size - 1 if drop_last and not keep else size + 1 if keep and not drop_last else size
        categories.append(np.arange(size, dtype=np.float64))
        positions.append(np.asarray([start + k if k < width else -1 for k in range(size)]))
        unknown.append(start + size if keep and size < width else -1)
        if ref.input_column >= 0:
            if keep:  # Spark truncates a fractional code; the table matches whole codes only
                raise MissingConverter(unsupported_message(
                    name, 'handleInvalid="keep" on an input column (Spark truncates '
                    'fractional codes, which the encoder table cannot)', inputs,
                    'handleInvalid="error", or codes from a StringIndexerModel'))
            columns.schema.set(ref.input_column, allowed=np.arange(size, dtype=np.float64),
                               allowed_missing=False, check_owner=name)
        blocks.append(range(start, start + width))
        start += width
    op = OneHotEncode(n_features=len(refs), n_outputs=start, categories=tuple(categories),
                      outputs=tuple(positions), unknown=tuple(unknown))
    (value,) = columns.add(op, [columns.gather(refs, name)], name)
    for column, block in zip(outputs, blocks):
        columns.write(column, value, block)


# ---------------------------------------------------------------- Bucketizer
@_stage("Bucketizer", _io(FLOAT))
def _bucketizer(stage, columns):
    _refuse_skip(stage)
    inputs, outputs = _single_or_multi(stage)
    refs = _scalar_refs(columns, stage, inputs)
    if stage.isSet("splitsArray"):
        splits = [np.asarray(s, dtype=np.float64) for s in param(stage, "splitsArray")]
    else:
        splits = [np.asarray(param(stage, "splits"), dtype=np.float64)]
    for s in splits:
        if np.isfinite(s[0]) or np.isfinite(s[-1]):
            raise MissingConverter(unsupported_message(
                "Bucketizer", "finite outer splits (Spark raises on values outside them, "
                "which the converted model cannot check)", [float(s[0]), float(s[-1])],
                "splits from -inf to inf"))
    keep = param(stage, "handleInvalid") == "keep"
    if not keep:
        for ref in refs:
            _forbid_missing(columns, ref, "Bucketizer")
    op = SparkBucketize(n_features=len(refs), splits=tuple(splits),
                        keep_nan=(keep,) * len(refs))
    (value,) = columns.add(op, [columns.gather(refs, "Bucketizer")], "Bucketizer")
    for j, name in enumerate(outputs):
        columns.write(name, value, [j])
