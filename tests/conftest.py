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


# TVM's pool threads spin after each call by default; in a test worker they would take
# the CPU the other pytest-xdist worker is using. They sleep instead (answers do not
# depend on it).
os.environ.setdefault("TVM_THREAD_POOL_SPIN_COUNT", "0")

# Fresh random data on every run; WOODSTAR_TEST_SEED=<n> replays a run. Set in the
# environment before pytest-xdist starts its workers, so they all share it.
os.environ.setdefault("WOODSTAR_TEST_SEED", str(random.SystemRandom().randrange(2**31)))
BASE_SEED = int(os.environ["WOODSTAR_TEST_SEED"])


def pytest_report_header(config):
    return f"woodstar test seed: WOODSTAR_TEST_SEED={BASE_SEED}"


@pytest.fixture
def rng(request):
    return np.random.default_rng(BASE_SEED ^ zlib.crc32(request.node.nodeid.encode()))


# How much of the parity matrix each backend runs. Torch eager and TorchScript run all
# of it. The backends that compile (seconds per model) run every parity case with one
# (strategy, precision) pair picked from the case's id, so all pairs are covered
# across cases, and the frontend suites' cases only one in N (N below), picked the
# same way; their own suite (tests/backends) runs whole. The full matrix would take
# hours on CI's 2 cores; WOODSTAR_FULL_MATRIX=1 runs it anyway.
FULL_MATRIX_BACKENDS = ("torch", "torch.jit")
FRONTEND_CASE_SAMPLING = {"onnx": 6, "tvm": 8, "torch.compile": 12}
_PRECISIONS = ("float32", "float64")


def _case_key(item, params):
    dropped = {params.get("strategy"), params.get("precision"), params.get("backend")}
    case = [t for t in item.callspec.id.split("-") if t not in dropped]
    return zlib.crc32(f"{item.originalname}|{'-'.join(case)}".encode())


def _chosen_pair(item, params):
    strategies = strategy_names() if "strategy" in params else (None,)
    precisions = _PRECISIONS if "precision" in params else (None,)
    pairs = [(s, p) for s in strategies for p in precisions]
    return pairs[_case_key(item, params) % len(pairs)]


def _keep(item):
    callspec = getattr(item, "callspec", None)
    params = callspec.params if callspec else {}
    backend = params.get("backend")
    if backend is None or backend in FULL_MATRIX_BACKENDS:
        return True
    if {"strategy", "precision"} & set(params):
        if (params.get("strategy"), params.get("precision")) != _chosen_pair(item, params):
            return False
    every = FRONTEND_CASE_SAMPLING.get(backend)
    if every and any(d in item.nodeid.split("::")[0] for d in ("frontends", "families", "model_matrix")):
        return (_case_key(item, params) // 7) % every == 0
    return True


def pytest_collection_modifyitems(config, items):
    if os.environ.get("WOODSTAR_FULL_MATRIX") == "1":
        return
    keep = [item for item in items if _keep(item)]
    if len(keep) < len(items):
        kept = set(map(id, keep))
        config.hook.pytest_deselected(items=[item for item in items if id(item) not in kept])
        items[:] = keep
