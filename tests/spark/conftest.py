"""A real local Spark session per test module (``local[2]``, UI off, two shuffle
partitions). The Spark tests are skipped, with the reason, when pyspark or a Java
runtime is missing; the executor tests that need neither still run."""

import os
import shutil
import sys
import warnings

import pytest


def spark_missing():
    """Why Spark cannot start here, or None."""
    try:
        import pyspark  # noqa: F401
    except ImportError:
        return 'pyspark is not installed (pip install "woodstar[spark]")'
    java_home = os.environ.get("JAVA_HOME")
    if shutil.which("java") is None and not (java_home and os.path.exists(
            os.path.join(java_home, "bin", "java"))):
        return "no Java runtime (java on PATH or JAVA_HOME): Spark needs Java 17 or later"
    return None


def local_session(cores, app_name):
    """A local Spark session with ``cores`` worker threads (UI off, as many shuffle
    partitions as cores), or a skip with the reason Spark cannot start here."""
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    from pyspark.sql import SparkSession

    # The Python workers must import woodstar: this interpreter has it.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)
    session = (SparkSession.builder.master(f"local[{cores}]").appName(app_name)
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", str(cores))
               .config("spark.default.parallelism", str(cores))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    return session


@pytest.fixture(scope="module")
def spark():
    session = local_session(2, "woodstar-tests")
    yield session
    session.stop()
