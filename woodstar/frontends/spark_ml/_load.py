"""Read a directory written by a Spark ML model's ``save`` (the command line's
``woodstar convert``): its ``metadata/`` names the class, loaded in a local session."""

import glob
import json
import os

__all__ = ["is_spark_ml_directory", "load_spark_ml"]

_PACKAGES = ("org.apache.spark.ml.classification.", "org.apache.spark.ml.regression.",
             "org.apache.spark.ml.feature.", "org.apache.spark.ml.")


def _metadata_class(path):
    for part in sorted(glob.glob(os.path.join(path, "metadata", "part-*"))):
        with open(part, encoding="utf-8") as f:
            line = f.readline().strip()
        if line:
            return json.loads(line).get("class")
    return None


def is_spark_ml_directory(path):
    """Whether ``path`` is a saved Spark ML model (a ``metadata/`` part naming a class)."""
    if not os.path.isdir(os.path.join(path, "metadata")):
        return False
    try:
        return bool(_metadata_class(path))
    except (OSError, ValueError):
        return False


def load_spark_ml(path):
    """The saved model, loaded with its class's ``load`` in a local Spark session (the
    session stays up: the model's numbers are read from its JVM)."""
    java_class = _metadata_class(path)
    module_name, name = None, java_class.rsplit(".", 1)[-1]
    for package in _PACKAGES:
        if java_class.startswith(package):
            module_name = "pyspark.ml." + package[len("org.apache.spark.ml."):].rstrip(".")
            break
    if module_name is None:
        raise ValueError(f"{path}: {java_class} is not a Spark ML class")
    import importlib

    from pyspark.sql import SparkSession

    module = importlib.import_module(module_name.rstrip("."))
    cls = getattr(module, name, None)
    if cls is None:
        raise ValueError(f"{path}: pyspark has no class {name} in {module_name}")
    (SparkSession.builder.master("local[1]").appName("woodstar-convert")
     .config("spark.ui.enabled", "false").getOrCreate()).sparkContext.setLogLevel("ERROR")
    return cls.load(path)
