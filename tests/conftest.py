"""Shared fixtures: every registered strategy and every available backend.

Registering a strategy or a backend puts it under the whole parity suite: tests that
take the ``strategy`` or ``backend`` fixture run once per registered one, and a
backend whose optional dependency is missing is skipped with its reason.
"""

import os
import random
import zlib

import numpy as np
import pytest

from woodstar.backends import all_backends
from woodstar.lowering import strategy_names


def _backend_params():
    params = []
    for name, cls in sorted(all_backends().items()):
        available, reason = cls.is_available()
        marks = () if available else (pytest.mark.skip(reason=f"backend {name}: {reason}"),)
        params.append(pytest.param(name, marks=marks, id=name))
    return params


@pytest.fixture(params=strategy_names())
def strategy(request):
    return request.param


@pytest.fixture(params=_backend_params())
def backend(request):
    return request.param


@pytest.fixture(params=["float32", "float64"])
def precision(request):
    return request.param


# Fresh random data on every run; WOODSTAR_TEST_SEED=<n> replays a run. Set in the
# environment before pytest-xdist starts its workers, so they all share it.
os.environ.setdefault("WOODSTAR_TEST_SEED", str(random.SystemRandom().randrange(2**31)))
BASE_SEED = int(os.environ["WOODSTAR_TEST_SEED"])


def pytest_report_header(config):
    return f"woodstar test seed: WOODSTAR_TEST_SEED={BASE_SEED}"


@pytest.fixture
def rng(request):
    return np.random.default_rng(BASE_SEED ^ zlib.crc32(request.node.nodeid.encode()))
