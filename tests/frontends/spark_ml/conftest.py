"""One real local Spark session per test module (tests/spark/conftest.py starts it);
the tests skip, with the reason, without pyspark or Java."""

import pytest

from tests.spark.conftest import local_session


@pytest.fixture(scope="module")
def spark():
    session = local_session(1, "woodstar-spark-ml-tests")
    yield session
    session.stop()
