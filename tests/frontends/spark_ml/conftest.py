"""One real local Spark session per test module, as tests/spark/conftest.py starts it;
the tests skip, with the reason, without pyspark or Java."""

import pytest

from tests.spark.conftest import spark_missing


@pytest.fixture(scope="module")
def spark():
    reason = spark_missing()
    if reason is not None:
        pytest.skip(reason)
    import os
    import sys
    import warnings

    from pyspark.sql import SparkSession

    os.environ["PYSPARK_PYTHON"] = sys.executable
    warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)
    session = (SparkSession.builder.master("local[1]").appName("woodstar-spark-ml-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "1")
               .config("spark.default.parallelism", "1")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()
