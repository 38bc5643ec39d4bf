"""``woodstar predict SAVED --input IN.parquet --output OUT.parquet --spark MASTER``.

Scores a Parquet file or dataset (a folder of part files) through Spark. The output is
what Spark writes: a folder of Parquet part files, which read back in name order (as
pandas, pyarrow and Spark read a folder) give the input's rows in the input's order:
rows are ordered by (input file, row within the file) before they are scored.
``--keep`` copies input columns (ids) next to the scores. Spark's console progress
bar shows the stages unless ``--quiet``. Bad input (a missing column, a non-numeric
one, a model file that fails its integrity check) is reported before any task runs.
"""

import os
import sys
import warnings

__all__ = ["run"]

_FILE, _ROW, _OUT = "__woodstar_file", "__woodstar_row", "__woodstar_scores"


def _fail(message):
    print(f"woodstar predict: {message}", file=sys.stderr)
    return 1


def _session(master, quiet):
    """(session, whether this call started it). A local master runs its Python workers
    with this interpreter, which has woodstar; a cluster's PYSPARK_PYTHON is its own."""
    from pyspark.sql import SparkSession

    if master.startswith("local"):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    active = SparkSession.getActiveSession()
    if active is not None:
        return active, False
    spark = (SparkSession.builder.master(master).appName("woodstar predict")
             .config("spark.ui.showConsoleProgress", "false" if quiet else "true")
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark, True


def _read(spark, path):
    """The Parquet input; a local one's schema is read here from its first file's footer
    (pyarrow), so that no Spark job runs before the input is checked."""
    reader = spark.read
    if os.path.exists(path):
        try:
            import pyarrow.dataset
            from pyspark.sql.pandas.types import from_arrow_schema

            reader = reader.schema(from_arrow_schema(pyarrow.dataset.dataset(path, format="parquet").schema))
        except Exception:  # noqa: BLE001  (a type Spark's converter lacks: Spark infers it)
            reader = spark.read
    return reader.parquet(path)


def _score(args, spark):
    from pyspark.sql import functions as F

    from ._udf import _feature_columns, _make_udf, _model_bytes

    keep = [c for value in (args.keep or []) for c in value.split(",") if c]
    try:
        data, container = _model_bytes(args.saved)
    except (OSError, ValueError) as error:
        return _fail(str(error))
    df = _read(spark, args.input)
    missing = [c for c in keep if c not in df.columns]
    if missing:
        return _fail(f"--keep names column(s) {missing} that {args.input} does not have; "
                     f"it has {df.columns}")
    names = getattr(container, "feature_names_in_", None)
    candidates = df if names is not None else df.drop(*keep)
    try:
        features = _feature_columns(candidates, container, None)
        udf = _make_udf(spark, data, container, args.method, "columns", None, args.device or "cpu")
    except ValueError as error:
        return _fail(str(error))
    if len(udf.returnType.fields) == 1:  # one value per row: a plain column
        udf = _make_udf(spark, data, container, args.method, "label", None, args.device or "cpu")
        outputs = [F.col(_OUT).alias(args.method)]
    else:
        outputs = [F.col(f"{_OUT}.`{f.name}`").alias(f.name) for f in udf.returnType.fields]
    quoted = {c: F.col("`" + c.replace("`", "``") + "`") for c in {*keep, *features}}
    ordered = (df.select(*quoted.values(), F.col("_metadata.file_path").alias(_FILE),
                         F.col("_metadata.row_index").alias(_ROW))
               .orderBy(_FILE, _ROW))
    scored = ordered.select(*[quoted[c] for c in keep], udf(*[quoted[c] for c in features]).alias(_OUT))
    scored.select(*[quoted[c] for c in keep], *outputs).write.mode("errorifexists").parquet(args.output)
    rows = spark.read.parquet(args.output).count()
    print(f"wrote {rows} rows of {args.method} to {args.output} (Spark, {spark.sparkContext.master})",
          file=sys.stderr)
    return 0


def run(args):
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return _fail('--spark needs pyspark: pip install "woodstar[spark]"')
    if not args.input.rstrip("/").lower().endswith(".parquet") and not os.path.isdir(args.input):
        return _fail(f"--spark reads Parquet: --input must be a .parquet file or a folder of "
                     f"them (got {args.input})")
    if not args.output.rstrip("/").lower().endswith(".parquet"):
        return _fail(f"--spark writes Parquet: --output must end in .parquet (got {args.output})")
    if os.path.exists(args.output):
        return _fail(f"--output {args.output} exists; Spark writes a new folder there")
    if not os.path.exists(args.input) and "://" not in args.input:
        return _fail(f"--input {args.input} does not exist")
    # pyspark warns on every pandas conversion that pandas 3 is not fully supported yet;
    # the scores are checked against in-process ones in tests/spark.
    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas",
                            category=FutureWarning)
    spark, started = _session(args.spark, args.quiet)
    if started:  # rows per Arrow batch handed to the model
        spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", str(args.batch_rows))
    try:
        return _score(args, spark)
    finally:
        if started:
            spark.stop()
