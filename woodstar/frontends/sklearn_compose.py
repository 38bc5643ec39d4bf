"""scikit-learn composition: Pipeline, ColumnTransformer, FeatureUnion and the
transformers they hold, into one graph.

A ``Composer`` builds the graph and the input schema together. It remembers, for
every column of every value, which input column it carries unchanged (its
*origin*), so an encoder can ask the schema for a string's code in that column and
record the source's unknown-category check at the edge. Estimators at the end of a
pipeline come from their own frontends; their graphs are spliced in.

Transformers are registered in ``TRANSFORMERS`` (class name -> function ``(model,
composer, value) -> value``); encoders read their tables off the estimator's own
``transform`` on probe rows, so ``drop``, infrequent categories, ``min_frequency`` and
``max_categories`` come out as scikit-learn computes them.
"""

import warnings

import numpy as np

from ..exceptions import MissingConverter, unsupported_message
from ..ir import (INPUT, STRING, ColumnOps, Concat, GraphBuilder, MissingIndicator, ModelIR,
                  OneHotEncode, OrdinalEncode, SchemaBuilder, Select)
from ._sklearn import check_fitted, sklearn_head
from .registry import find_frontend, register_frontend
from .sklearn_pipeline import SCALERS, column_wise_ops, imputer_fill, imputer_ops

__all__ = ["TRANSFORMERS", "Composer", "transformer"]

TRANSFORMERS = {}
_UNSEEN = "\x00woodstar: a value not seen in fit"


def transformer(*names):
    def decorate(fn):
        for name in names:
            TRANSFORMERS[name] = fn
        return fn
    return decorate


def _is_passthrough(step):
    return step is None or (isinstance(step, str) and step == "passthrough")


class Composer:
    """The graph, the schema and each value's column origins, built together."""

    def __init__(self, names):
        self.schema = SchemaBuilder(names)
        self.graph = GraphBuilder(self.schema.value_type)
        # value -> per column: (input column, missing values filled since) or None
        self.origins = {INPUT: [(i, False) for i in range(len(names))]}
        self.sparse = {INPUT: False}

    def width(self, value):
        return len(self.origins[value])

    def add(self, op, inputs, name, origins=None, sparse=False):
        outputs = self.graph.add(op, inputs, name)
        for value in outputs:
            self.origins[value] = origins if origins is not None else [None] * \
                self.graph.type_of(value).width
            self.sparse[value] = sparse
        return outputs

    def select(self, value, indices, name="select"):
        indices = [int(i) for i in indices]
        if indices == list(range(self.width(value))):
            return value
        (out,) = self.add(Select(self.width(value), tuple(indices)), [value], name,
                          [self.origins[value][i] for i in indices])
        return out

    def mark_string(self, origin):
        column = origin[0]
        self.schema._kinds[column] = STRING
        self.schema._vocabularies.setdefault(column, [])

    def build(self, raw, transformed):
        self.graph.input_type = self.schema.value_type
        schema = self.schema.build()
        return self.graph.build(raw, transformed), schema

    def refuse_sparse(self, value, owner):
        if self.sparse[value]:
            raise MissingConverter(unsupported_message(
                owner, "a step after a sparse output", "sparse input",
                "encoders with sparse_output=False before it, or a linear model or trees after"))


def _convert_step(step, composer, value):
    name = type(step).__name__
    convert = TRANSFORMERS.get(name)
    if convert is None:
        raise MissingConverter(unsupported_message(
            name, "this transformer", name, ", ".join(sorted(TRANSFORMERS))))
    return convert(step, composer, value)


# ------------------------------------------------------------------ column-wise steps
@transformer(*SCALERS)
def _scaler(model, composer, value):
    composer.refuse_sparse(value, type(model).__name__)
    ops = column_wise_ops(model)
    (out,) = composer.add(ops, [value], type(model).__name__, composer.origins[value])
    return out


@transformer("SimpleImputer")
def _imputer(model, composer, value):
    name = "SimpleImputer"
    composer.refuse_sparse(value, name)
    check_fitted(model, "statistics_")
    origins = composer.origins[value]
    statistics = np.asarray(model.statistics_)
    strings = statistics.dtype.kind == "O" and any(isinstance(s, str) for s in statistics)
    if strings:
        codes = []
        for j, statistic in enumerate(statistics):
            if origins[j] is None:
                raise MissingConverter(unsupported_message(
                    name, "string statistics on computed columns", statistic, "input columns"))
            composer.mark_string(origins[j])
            codes.append(composer.schema.code(origins[j][0], statistic))
        fill, keep = np.asarray(codes, dtype=np.float64), np.ones(len(codes), dtype=bool)
    else:
        fill, keep = imputer_fill(model, numeric_missing=True)
    n = composer.width(value)
    ops = ColumnOps(name=name, n_features=n, ops=("fill_nan",), operands=(fill,),
                    cast_operand=(True,)) if strings else imputer_ops(model, fill)
    filled = [None if o is None else (o[0], True) for o in origins]
    (out,) = composer.add(ops, [value], name, filled)
    out = composer.select(out, np.flatnonzero(keep), "SimpleImputer:kept")
    if model.add_indicator:
        indicator = _indicator_op(model.indicator_, n)
        (flags,) = composer.add(indicator, [value], "SimpleImputer:indicator")
        widths = (composer.width(out), len(indicator.features))
        (out,) = composer.add(Concat(widths), [out, flags], "SimpleImputer:with_indicator",
                              composer.origins[out] + [None] * widths[1])
    return out


def _indicator_op(indicator, n_features):
    check_fitted(indicator, "features_")
    if indicator.sparse is True:
        raise MissingConverter(unsupported_message(
            "MissingIndicator", "sparse", True, "False or 'auto' on dense input"))
    if not (isinstance(indicator.missing_values, float) and np.isnan(indicator.missing_values)):
        raise MissingConverter(unsupported_message(
            "MissingIndicator", "missing_values", indicator.missing_values, "np.nan"))
    return MissingIndicator(n_features=n_features, features=tuple(indicator.features_))


@transformer("MissingIndicator")
def _missing_indicator(model, composer, value):
    op = _indicator_op(model, composer.width(value))
    if model.error_on_new and model.features == "missing-only":
        # scikit-learn refuses missing values in the columns that had none in fit
        for j in set(range(op.n_features)) - set(op.features):
            origin = composer.origins[value][j]
            if origin is None:
                raise MissingConverter(unsupported_message(
                    "MissingIndicator", "error_on_new on computed columns", True,
                    "error_on_new=False"))
            if not origin[1]:
                composer.schema.set(origin[0], allowed_missing=False,
                                    check_owner="MissingIndicator")
    (out,) = composer.add(op, [value], "MissingIndicator")
    return out


# ------------------------------------------------------------------ encoders
def _category_codes(composer, value, j, categories, owner):
    """The categories of column ``j`` of ``value`` as the numbers the graph sees."""
    categories = np.asarray(categories)
    if categories.dtype.kind in "biuf":
        return categories.astype(np.float64), False
    origin = composer.origins[value][j]
    if origin is None:
        raise MissingConverter(unsupported_message(
            owner, "string categories on a computed column", list(categories[:3]),
            "string categories on input columns"))
    composer.mark_string(origin)
    values = categories.tolist()
    nones = [v for v in values if v is None]
    nans = [v for v in values if isinstance(v, float) and np.isnan(v)]
    others = [v for v in values if v is not None and not (isinstance(v, float) and np.isnan(v))]
    if not all(isinstance(v, str) for v in others):
        raise MissingConverter(unsupported_message(
            owner, "object categories that are not strings", others[:3], "strings"))
    del nones, nans
    return np.asarray([composer.schema.code(origin[0], v) for v in values]), True


def _probe_frame(encoder, columns):
    """Rows holding each column's categories in turn (the last one repeated), as the
    encoder was fitted: a DataFrame where it had column names."""
    n_rows = max([len(c) for c in columns] + [1])
    data = []
    for c in columns:
        c = np.asarray(c)
        data.append(np.array([c[min(r, len(c) - 1)] for r in range(n_rows)], dtype=c.dtype)
                    if len(c) else np.zeros(n_rows))
    names = getattr(encoder, "feature_names_in_", None)
    if names is not None:
        import pandas as pd

        # object columns stay object (pandas would infer strings and turn None into NaN)
        return pd.DataFrame({name: pd.Series(column, dtype=column.dtype)
                             for name, column in zip(names, data)})
    if any(c.dtype.kind == "O" for c in data):
        frame = np.empty((n_rows, len(data)), dtype=object)
        for j, c in enumerate(data):
            frame[:, j] = c
        return frame
    return np.stack(data, axis=1) if data else np.zeros((n_rows, 0))


def _unseen_values(categories):
    unseen = []
    for c in categories:
        c = np.asarray(c)
        if c.dtype.kind in "biuf":
            finite = c[np.isfinite(c.astype(np.float64))] if len(c) else c
            unseen.append(np.asarray([(finite.max() + 1) if len(finite) else 0], dtype=c.dtype))
        else:
            unseen.append(np.asarray([_UNSEEN], dtype=object))
    return unseen


def _transform(encoder, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # unknown categories with drop: expected here
        out = encoder.transform(X)
    return out.toarray() if hasattr(out, "toarray") else np.asarray(out)


def _record_check(composer, value, encoder, codes, imputed_ok=True):
    """``handle_unknown="error"``: the edge refuses what the encoder refuses."""
    owner = type(encoder).__name__
    for j, column_codes in enumerate(codes):
        origin = composer.origins[value][j]
        if origin is None:
            raise MissingConverter(unsupported_message(
                owner, "handle_unknown='error' on a computed column", "error",
                "'ignore', 'infrequent_if_exist' or 'use_encoded_value'"))
        known = column_codes[~np.isnan(column_codes)]
        previous = composer.schema._extra[origin[0]].get("allowed")
        if previous is not None:
            known = np.intersect1d(known, previous)
        composer.schema.set(origin[0], allowed=known,
                            allowed_missing=bool(origin[1] or np.isnan(column_codes).any()),
                            check_owner=owner)


def _probe_encoder(encoder, composer, value):
    """The categories as the graph sees them, the encoder's output on them (row k holds
    each column's category k), and its output on values never seen (None where it
    refuses them: the edge then checks them)."""
    owner = type(encoder).__name__
    check_fitted(encoder, "categories_")
    composer.refuse_sparse(value, owner)
    codes = [_category_codes(composer, value, j, c, owner)[0]
             for j, c in enumerate(encoder.categories_)]
    seen = _transform(encoder, _probe_frame(encoder, encoder.categories_))
    if encoder.handle_unknown == "error":
        _record_check(composer, value, encoder, codes)
        return codes, seen, None
    unseen = _transform(encoder, _probe_frame(encoder, _unseen_values(encoder.categories_)))[0]
    return codes, seen, unseen


@transformer("OneHotEncoder")
def _one_hot(encoder, composer, value):
    codes, seen, unseen = _probe_encoder(encoder, composer, value)
    widths = list(encoder._n_features_outs)
    starts = np.concatenate([[0], np.cumsum(widths)]).astype(int)
    outputs = []
    for j, c in enumerate(codes):
        block = seen[:len(c), starts[j]:starts[j + 1]]
        hit = block.any(axis=1)
        outputs.append(np.where(hit, starts[j] + np.argmax(block, axis=1), -1))
    unknown = [-1] * len(codes)
    if unseen is not None:
        for j in range(len(codes)):
            block = unseen[starts[j]:starts[j + 1]]
            unknown[j] = int(starts[j] + np.argmax(block)) if block.any() else -1
    op = OneHotEncode(n_features=len(codes), n_outputs=int(starts[-1]), categories=codes,
                      outputs=outputs, unknown=unknown, dtype=np.dtype(encoder.dtype).name,
                      sparse=bool(encoder.sparse_output))
    (out,) = composer.add(op, [value], "OneHotEncoder", sparse=bool(encoder.sparse_output))
    return out


@transformer("OrdinalEncoder")
def _ordinal(encoder, composer, value):
    codes, seen, unseen = _probe_encoder(encoder, composer, value)
    outputs = [seen[:len(c), j] for j, c in enumerate(codes)]
    unknown = [np.nan] * len(codes) if unseen is None else unseen
    op = OrdinalEncode(n_features=len(codes), categories=codes, outputs=outputs,
                       unknown=tuple(unknown), dtype=np.dtype(encoder.dtype).name)
    (out,) = composer.add(op, [value], "OrdinalEncoder")
    return out


@transformer("FunctionTransformer")
def _function_transformer(model, composer, value):
    # ColumnTransformer stores remainder="passthrough" as FunctionTransformer(func=None),
    # the identity; any other function is refused, never taken as the identity.
    if model.func is not None:
        raise MissingConverter(unsupported_message(
            "FunctionTransformer", "func", getattr(model.func, "__name__", model.func), "None"))
    return value


# ------------------------------------------------------------------ composition
@transformer("Pipeline")
def _pipeline_steps(pipeline, composer, value):
    for _, step in pipeline.steps:
        if not _is_passthrough(step):
            value = _convert_step(step, composer, value)
    return value


@transformer("ColumnTransformer")
def _column_transformer(ct, composer, value):
    check_fitted(ct, "transformers_")
    indices_of = ct._transformer_to_input_indices  # every spelling of columns, resolved
    parts = []
    for name, step, _ in ct.transformers_:
        indices = list(indices_of.get(name, []))
        if (isinstance(step, str) and step == "drop") or not indices:
            continue
        part = composer.select(value, indices, f"{name}:columns")
        if not _is_passthrough(step):
            part = _convert_step(step, composer, part)
        parts.append(part)
    if len(parts) == 1 and not ct.sparse_output_:
        return parts[0] if not composer.sparse[parts[0]] else _densify(composer, parts[0])
    widths = tuple(composer.width(p) for p in parts)
    origins = [o for p in parts for o in composer.origins[p]]
    (out,) = composer.add(Concat(widths, sparse=bool(ct.sparse_output_)), parts,
                          "ColumnTransformer", origins, sparse=bool(ct.sparse_output_))
    return out


def _densify(composer, value):
    (out,) = composer.add(Concat((composer.width(value),)), [value], "dense",
                          composer.origins[value])
    return out


@transformer("FeatureUnion")
def _feature_union(union, composer, value):
    weights = union.transformer_weights or {}
    parts = []
    for name, step in union.transformer_list:
        if isinstance(step, str) and step == "drop":
            continue
        part = value if _is_passthrough(step) else _convert_step(step, composer, value)
        if name in weights:
            composer.refuse_sparse(part, "FeatureUnion")
            w = float(weights[name])
            n = composer.width(part)
            (part,) = composer.add(ColumnOps(name=f"weight {name}", n_features=n, ops=("mul",),
                                             operands=(np.full(n, w),), cast_operand=(True,)),
                                   [part], f"{name}:weight")
        parts.append(part)
    sparse = any(composer.sparse[p] for p in parts)
    widths = tuple(composer.width(p) for p in parts)
    (out,) = composer.add(Concat(widths, sparse=sparse), parts, "FeatureUnion", sparse=sparse)
    return out


# ------------------------------------------------------------------ frontends
_COMPOSITES = ("Pipeline", "ColumnTransformer", "FeatureUnion")


def _refuses_nan(steps):
    """Whether a NaN in the input reaches a step that refuses it (scikit-learn's
    ``allow_nan`` tag) before an imputer replaces it. Composites decide per branch."""
    for step in steps:
        name = type(step).__name__
        if name in _COMPOSITES:
            continue
        if not step.__sklearn_tags__().input_tags.allow_nan:
            return True
        if name == "SimpleImputer":  # it takes NaN, so it replaces it
            return False
    return False



def _input_names(model):
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        return [str(n) for n in names]
    return [str(i) for i in range(int(model.n_features_in_))]


@register_frontend("sklearn", *SCALERS, "SimpleImputer", "OneHotEncoder", "OrdinalEncoder",
                   "MissingIndicator", "ColumnTransformer", "FeatureUnion")
def _bare_transformer(model, options):
    check_fitted(model, "n_features_in_")
    composer = Composer(_input_names(model))
    out = _convert_step(model, composer, INPUT)
    if out == INPUT:  # nothing computed: still one node, so the graph has a program
        out = _densify(composer, out)
    graph, schema = composer.build(out, out)
    # The scalers take NaN (they ignore it when fitting), SimpleImputer replaces it;
    # none takes infinity. Encoders take what their categories say (checked at the edge).
    numeric_only = all(k != STRING for k in schema.value_type.kinds)
    head = sklearn_head(model, "transform", ("transform",),
                        allows_nan=not _refuses_nan([model]),
                        allows_inf=not (numeric_only and type(model).__name__ in SCALERS + ("SimpleImputer",)))
    return ModelIR(head=head, graph=graph, schema=schema).validate()


@register_frontend("sklearn", "Pipeline")
def _pipeline(model, options):
    steps = [s for _, s in model.steps if not _is_passthrough(s)]
    if not steps:
        raise MissingConverter(unsupported_message(
            "Pipeline", "a pipeline of only 'passthrough' steps", [n for n, _ in model.steps],
            "pipelines that end in a supported estimator or transformer"))
    *transformers, final = steps
    first = steps[0]
    check_fitted(first, "n_features_in_")
    composer = Composer(_input_names(first))
    value = INPUT
    for step in transformers:
        value = _convert_step(step, composer, value)
    names = [type(s).__name__ for s in steps]
    estimator = f"Pipeline({', '.join(names)})"
    nan_refused = _refuses_nan(transformers)
    if type(final).__name__ in TRANSFORMERS and not hasattr(final, "predict"):
        value = _convert_step(final, composer, value)
        if value == INPUT:
            value = _densify(composer, value)
        graph, schema = composer.build(value, value)
        head = sklearn_head(first, "transform", ("transform",), allows_inf=False) \
            .replace(estimator=estimator, allows_nan=not _refuses_nan(steps))
        return ModelIR(head=head, graph=graph, schema=schema).validate()
    final_ir = find_frontend(final)(final, options)
    if composer.width(value) != final_ir.head.n_features:
        raise MissingConverter(unsupported_message(
            estimator, "a final estimator reading another width than its input",
            composer.width(value), final_ir.head.n_features))
    raw, transformed = composer.graph.splice(final_ir.graph, value, prefix="")
    graph, schema = composer.build(raw, transformed)
    imputes = any("fill_nan" in n.op.ops for n in graph.nodes_of("column_ops"))
    computes = bool(transformers)
    head = final_ir.head.replace(
        estimator=estimator,
        n_features=len(schema.columns),
        feature_names=(tuple(first.feature_names_in_) if hasattr(first, "feature_names_in_")
                       else None),
        # A row is refused where any step refuses it; scalers refuse infinity. Steps
        # that compute new columns (encoders) decide NaN themselves.
        allows_inf=final_ir.head.allows_inf and not computes,
        allows_nan=not nan_refused and (
            final_ir.head.allows_nan or imputes or bool(schema.string_columns)
            or bool(graph.nodes_of("one_hot")) or bool(graph.nodes_of("ordinal"))),
    )
    return ModelIR(head=head, graph=graph, schema=schema).validate()
