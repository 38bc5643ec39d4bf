"""Scoring on Spark: woodstar's UDF against the native model in a hand-written pandas UDF.

    .venv/bin/python benchmarks/spark_udf.py [--rows 2000000] [--trees 300] [--depth 8]
        [--master local[2]] [--partitions 8] [--repeat 2]

A RandomForestClassifier (``--trees`` trees of depth ``--depth``, fitted on 20 000
rows of 10 features) scores ``--rows`` rows that Spark generated and cached, in
``--partitions`` partitions; ``predict_proba`` as an array column, written to Spark's
``noop`` sink so every row is computed. Reported: rows/s of each (best of
``--repeat`` warm runs), and the fixed cost per task: a job of 8 one-row partitions,
first run (each Python worker loads the model) and warm, divided by the tasks each of
the master's slots ran. Both UDFs' answers are compared on a sample before timing.
"""

import argparse
import json
import os
import sys
import time

import numpy as np

N_FEATURES = 10


def _session(master, partitions):
    from pyspark.sql import SparkSession

    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    spark = (SparkSession.builder.master(master).appName("woodstar spark_udf benchmark")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(partitions))
             .config("spark.driver.memory", "3g").getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    return spark


def _rows(spark, n, partitions):
    from pyspark.sql import functions as F

    columns = [F.randn(seed=i).alias(f"f{i}") for i in range(N_FEATURES)]
    df = spark.range(0, n, numPartitions=partitions).select("id", *columns).cache()
    df.count()
    return df


def _native_udf(model):
    import pandas as pd
    from pyspark.sql.functions import pandas_udf

    names = [f"f{i}" for i in range(N_FEATURES)]

    @pandas_udf("array<double>")
    def native(*columns: pd.Series) -> pd.Series:
        proba = model.predict_proba(pd.DataFrame(dict(zip(names, columns))))
        return pd.Series(list(proba))

    return native


def _timed(df, column):
    start = time.perf_counter()
    df.select(column.alias("p")).write.format("noop").mode("overwrite").save()
    return time.perf_counter() - start


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--trees", type=int, default=300)
    parser.add_argument("--depth", type=int, default=8)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--partitions", type=int, default=8)
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--json", help="also write the figures here (benchmarks/results/"
                                       "spark_udf.json feeds docs/benchmarks.md)")
    args = parser.parse_args(argv)

    import pandas as pd
    from pyspark.sql import functions as F
    from sklearn.ensemble import RandomForestClassifier

    import woodstar
    import woodstar.spark as ws

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(20_000, N_FEATURES)), columns=[f"f{i}" for i in range(N_FEATURES)])
    y = (X["f0"] + X["f1"] * X["f2"] + 0.5 * rng.normal(size=len(X)) > 0).astype(int)
    model = RandomForestClassifier(n_estimators=args.trees, max_depth=args.depth, n_jobs=1,
                                   random_state=0).fit(X, y)
    model.n_jobs = 1
    converted = woodstar.convert(model, "torch")

    spark = _session(args.master, args.partitions)
    slots = spark.sparkContext.defaultParallelism
    features = [F.col(f"f{i}") for i in range(N_FEATURES)]
    udfs = {"woodstar": ws.predict_udf(converted, method="predict_proba"),
            "native": _native_udf(model)}

    sample = _rows(spark, 2000, 2)
    got = {name: np.stack(sample.select(udf(*features).alias("p")).toPandas()["p"])
           for name, udf in udfs.items()}
    np.testing.assert_allclose(got["woodstar"], got["native"], rtol=0, atol=1e-12)

    tiny = spark.range(0, 8, numPartitions=8).select("id", *[F.lit(0.5).alias(f"f{i}")
                                                           for i in range(N_FEATURES)]).cache()
    tiny.count()
    import datetime
    import platform

    import pyspark

    results = {"rows": args.rows, "trees": args.trees, "depth": args.depth,
               "master": args.master, "partitions": args.partitions, "slots": slots,
               "repeat": args.repeat, "spark": pyspark.__version__,
               "date": datetime.date.today().isoformat(),
               "machine": f"{platform.machine()}, {os.cpu_count()} logical CPUs",
               "command": " ".join([".venv/bin/python benchmarks/spark_udf.py", *(argv or sys.argv[1:])])}
    for name, udf in udfs.items():  # fresh UDFs: the first job loads the model in each worker
        fresh = ws.predict_udf(converted, method="predict_proba", spark=spark) \
            if name == "woodstar" else _native_udf(model)
        waves = 8 / slots
        first = _timed(tiny, fresh(*features)) / waves
        warm = min(_timed(tiny, fresh(*features)) for _ in range(3)) / waves
        results[f"{name}_task_first_ms"] = round(first * 1e3, 1)
        results[f"{name}_task_warm_ms"] = round(warm * 1e3, 1)

    df = _rows(spark, args.rows, args.partitions)
    for name, udf in udfs.items():
        _timed(tiny, udf(*features))  # every worker warm (a limit() would end its worker)
        seconds = min(_timed(df, udf(*features)) for _ in range(args.repeat))
        results[f"{name}_seconds"] = round(seconds, 2)
        results[f"{name}_rows_per_s"] = round(args.rows / seconds)
    results["speedup"] = round(results["native_seconds"] / results["woodstar_seconds"], 2)
    spark.stop()
    print(json.dumps(results, indent=1))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
