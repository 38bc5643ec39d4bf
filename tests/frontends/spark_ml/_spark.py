"""What the Spark ML tests share: frames in both worlds, Spark's own outputs, and the
bounds for what cannot match to the bit (see woodstar/frontends/spark_ml)."""

import numpy as np
import pandas as pd

EPS = np.finfo(np.float64).eps


def to_spark(spark, frame):
    """The pandas frame as a Spark DataFrame, row for row: float columns stay doubles
    (NaN stays NaN), object columns are strings (None is null)."""
    from pyspark.sql.types import DoubleType, StringType, StructField, StructType

    fields, columns = [], []
    for name in frame.columns:
        values = frame[name].to_numpy(dtype=object)
        if frame[name].dtype.kind == "f":
            fields.append(StructField(name, DoubleType()))
            columns.append([float(v) for v in values])
        else:
            fields.append(StructField(name, StringType()))
            columns.append([None if v is None or (isinstance(v, float) and np.isnan(v)) else v
                            for v in values])
    rows = list(zip(*columns))
    return spark.createDataFrame(rows, StructType(fields))


def spark_outputs(model, spark, frame, columns=("prediction", "probability", "rawPrediction")):
    """Spark's own transform of ``frame``: one array per output column."""
    out = model.transform(to_spark(spark, frame))
    present = [c for c in columns if c in out.columns]
    rows = out.select(*present).collect()
    result = {}
    for i, name in enumerate(present):
        values = [r[i] for r in rows]
        result[name] = (np.asarray([v.toArray() for v in values]) if hasattr(values[0], "toArray")
                        else np.asarray(values, dtype=np.float64))
    return result


def frame(rng, n, n_numeric=4, strings=(), nan=0.0, scale=None):
    """A pandas frame of ``n_numeric`` float columns x0.. and string columns."""
    data = {}
    for j in range(n_numeric):
        x = rng.normal(size=n) * (scale[j] if scale is not None else 1.0)
        if nan:
            x[rng.random(n) < nan] = np.nan
        data[f"x{j}"] = x
    for name, labels in strings:
        data[name] = pd.Series(list(rng.choice(np.asarray(labels, dtype=object), size=n)),
                               dtype=object)
    return pd.DataFrame(data)
