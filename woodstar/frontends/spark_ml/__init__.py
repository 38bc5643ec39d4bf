"""Fitted Spark ML (``pyspark.ml``) models -> one graph.

A ``PipelineModel`` of transformers ending in a predictor, a bare predictor, or
transformers alone (``transform`` then gives the last stage's output columns side by
side) is converted. pyspark is never imported here: the models handed to ``convert``
bring it.

Input: a pandas DataFrame (or an array, by position) holding the columns Spark's
``transform`` reads, before any stage writes them (the raw columns before
VectorAssembler and StringIndexerModel), in the order the stages first read them. A
bare predictor reads its ``featuresCol`` vector as ``numFeatures`` columns named
``features[0]``, ``features[1]``, .... StringIndexerModel's input columns are string
columns (None or NaN is Spark's null); numbers are widened to float64 first (op
``spark_float64``), as Spark computes every stage in double. Columns that no stage
reads are not part of the input: pass ``X[converted.feature_names_in_]``.

Output, per row, as Spark's ``transform`` writes it:

* ``predict``: the ``prediction`` column (a classifier's class index as a float);
* ``predict_proba``: the ``probability`` vector;
* ``decision_function``: the ``rawPrediction`` vector;
* ``transform`` (transformers only): the last stage's output column(s), a vector's
  entries as columns.

Exactness: trees (decision trees, random forests) and the transformers give Spark's
numbers to the bit. Two things in Spark cannot be repeated bit for bit off the JVM,
and are bounded by the tests instead: Spark's dot products (linear models and the
weighted sum of GBT trees) run in the JVM's vectorised BLAS, whose summation order
depends on the CPU's vector width; and its probabilities call the JVM's ``Math.exp``,
which differs from the C library's ``exp`` by one unit in the last place for some
arguments. See docs/supported.md.
"""

from ...exceptions import MissingConverter, NotFittedError, unsupported_message
from ...ir import FLOAT, Head, ModelIR
from ..registry import register_frontend
from ._columns import Columns, param
from ._predictors import PREDICTORS, convert_predictor, n_features
from ._stages import STAGES, stage_io

__all__ = ["SPARK_CLASSES", "convert_spark"]

SPARK_CLASSES = ("PipelineModel",) + tuple(STAGES) + PREDICTORS


def _versions():
    import pyspark

    return (("pyspark", pyspark.__version__),)


def _stages(model):
    name = type(model).__name__
    if name != "PipelineModel":
        return [model]
    stages = []
    for stage in model.stages:  # nested pipelines run their stages in order
        stages.extend(_stages(stage))
    return stages


def _split(model):
    """(transformers, predictor or None) of a pipeline."""
    stages = _stages(model)
    if not stages:
        raise MissingConverter(unsupported_message(
            type(model).__name__, "a pipeline without stages", [], "one stage or more"))
    predictor = stages[-1] if type(stages[-1]).__name__ in PREDICTORS else None
    transformers = stages[:-1] if predictor is not None else stages
    for stage in transformers:
        if type(stage).__name__ in PREDICTORS:
            raise MissingConverter(unsupported_message(
                type(model).__name__, "a predictor before the last stage",
                type(stage).__name__, "one predictor, last"))
        stage_io(stage)  # refuses unknown stages by name
    return transformers, predictor


def _input_columns(transformers, predictor):
    """(names, kinds, groups): the schema columns and, per Spark input column, the
    schema columns it is made of."""
    written, names, kinds, groups = set(), [], [], {}

    def read(column, kind, width=1):
        if column in written or column in groups:
            if column in groups and kind != FLOAT:
                for i in groups[column]:
                    kinds[i] = kind
            return
        if width == 1:
            groups[column] = [len(names)]
            names.append(column)
            kinds.append(kind)
        else:
            groups[column] = list(range(len(names), len(names) + width))
            names.extend(f"{column}[{i}]" for i in range(width))
            kinds.extend([kind] * width)

    for stage in transformers:
        reads, writes = stage_io(stage)
        for column, kind in reads:
            read(column, kind)
        written.update(writes)
    if predictor is not None:
        read(param(predictor, "featuresCol"), FLOAT, n_features(predictor))
    return names, kinds, groups


def convert_spark(model, options=None) -> ModelIR:
    name = type(model).__name__
    transformers, predictor = _split(model)
    if predictor is not None and getattr(predictor, "_java_obj", None) is None:
        raise NotFittedError(f"Cannot convert {name}: {type(predictor).__name__} holds no "
                             f"fitted Spark model.")
    names, kinds, groups = _input_columns(transformers, predictor)
    vector_inputs = [c for c, cols in groups.items() if len(cols) > 1]
    if transformers and vector_inputs:
        raise MissingConverter(unsupported_message(
            name, "a vector column as pipeline input", vector_inputs,
            "numeric and string columns (assemble them with a VectorAssembler stage)"))
    columns = Columns(names, kinds)
    columns.bind_inputs(groups)
    for stage in transformers:
        STAGES[type(stage).__name__].convert(stage, columns)
    if predictor is None:  # transformers only: transform gives the last stage's output
        outputs = stage_io(transformers[-1])[1]
        value = columns.gather([columns.ref(c, name) for c in outputs], "output")
        raw, transformed, fields = value, value, dict(task="transform", methods=("transform",))
    else:
        raw, transformed, fields = _predict(columns, predictor)
    graph, schema = columns.build(raw, transformed)
    head = Head(estimator=name, n_features=len(names), feature_names=tuple(names),
                library_versions=_versions(), **fields)
    return ModelIR(head=head, graph=graph, schema=schema).validate()


def _predict(columns, predictor):
    features_name = param(predictor, "featuresCol")
    owner = type(predictor).__name__
    features = columns.gather([columns.ref(features_name, owner)], "features")
    width = columns.graph.type_of(features).width
    if width != n_features(predictor):
        raise MissingConverter(unsupported_message(
            owner, f"a features vector of {width} columns", features_name,
            f"{n_features(predictor)} columns, as fitted"))
    return convert_predictor(predictor, columns, features)


register_frontend("pyspark", *SPARK_CLASSES)(convert_spark)


# ---------------------------------------------------------------- docs/supported.md
def spark_methods(name):
    """What a converted Spark ML class offers, for docs/supported.md."""
    from ._predictors import CLASSIFIERS

    if name == "PipelineModel":
        return ("its last stage's: a predictor's methods, or transform (the last "
                "transformer's output)")
    if name in CLASSIFIERS:
        return "predict (prediction), predict_proba (probability), decision_function (rawPrediction)"
    if name in PREDICTORS:
        return "predict (prediction)"
    return "transform (its output columns; in a PipelineModel, a stage)"


def supported_notes():
    """The Spark ML section of docs/supported.md."""
    return [
        "", "## Spark ML input", "",
        "`woodstar.convert(pipeline_model, backend)` takes a fitted `pyspark.ml` "
        "`PipelineModel` (or one of the classes above alone); `woodstar convert DIR` takes "
        "a directory written by its `save`. The converted model reads a pandas DataFrame "
        "of the columns Spark's `transform` reads before any stage writes them (the raw "
        "columns before VectorAssembler and StringIndexerModel; strings for "
        "StringIndexerModel's, numbers otherwise, widened to float64 as Spark computes); "
        "columns no stage reads are not part of it (`X[converted.feature_names_in_]`). A "
        "bare predictor reads its features vector as columns `features[0]`, "
        "`features[1]`, ....",
        "",
        "| Spark column | woodstar method |", "|---|---|",
        "| `prediction` | `predict` (a classifier's class index, as a float) |",
        "| `probability` | `predict_proba` |",
        "| `rawPrediction` | `decision_function` |",
        "| the last transformer's output | `transform` (a vector's entries as columns) |",
        "",
        "Trees, forests and the transformers give Spark's numbers to the bit (categorical "
        "splits included). Linear models and GBT margins are within the dot-product "
        "bound `2 (n + 1) eps sum |terms|` of Spark's: the JVM's vectorised BLAS sums in "
        "an order set by the CPU's vector width. Probabilities built with `exp` (logistic "
        "regression, GBT) are within two ulps of 1.0 of what Spark gives for the same raw "
        "scores: the JVM's `Math.exp` differs from the C library's by an ulp for some "
        "arguments. Refused, with the reason: `handleInvalid=\"skip\"` (drops rows), "
        "a Bucketizer with finite outer splits (Spark raises outside them), "
        "OneHotEncoderModel with `handleInvalid=\"keep\"` on a raw input column (Spark "
        "truncates fractional codes), vector columns as pipeline input, tree models "
        "without a JVM object (Spark Connect), and any stage not listed.",
    ]
