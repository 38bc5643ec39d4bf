"""The model matrix: every registered frontend class x every backend x the torch
backend's CPU route and its Torch program, against the source library's own answers
on fresh rows (NaN included where the source takes it). Fitted models are cached per
session; the slow backends are sampled by tests/conftest.py (one policy, stated
there). A class registered without a case here, or without a test module that
declares it in ``COVERS_MODELS``, fails ``test_every_registered_model_has_a_case``."""

import functools
import re
import zlib
from pathlib import Path

import numpy as np
import pytest

pytest.importorskip("sklearn")

import woodstar  # noqa: E402
from woodstar.backends import all_backends  # noqa: E402
from woodstar.frontends import supported_models  # noqa: E402

from ._model_zoo import TOLERANCE, ZOO, fit, source_answer  # noqa: E402
from ._parity import compare_outputs  # noqa: E402
from .conftest import BASE_SEED  # noqa: E402

TESTS = Path(__file__).resolve().parent
METHODS = ("predict", "predict_proba", "decision_function", "score_samples", "transform")


def _declared_models():
    declared = set()
    for path in TESTS.rglob("test_*.py"):
        match = re.search(r"^COVERS_MODELS = \(([^)]*)\)", path.read_text(), re.MULTILINE)
        if match:
            declared |= set(re.findall(r"\"([A-Za-z0-9_]+)\"", match.group(1)))
    return declared


def test_every_registered_model_has_a_case():
    declared = _declared_models()
    missing = [f"{p}.{c}" for p, c in supported_models() if (p, c) not in ZOO and c not in declared]
    assert not missing, f"no matrix case or COVERS_MODELS entry for {missing}"


def _routes():
    params = []
    for name, cls in sorted(all_backends().items()):
        available, reason = cls.is_available()
        marks = () if available else (pytest.mark.skip(reason=f"backend {name}: {reason}"),)
        params.append(pytest.param(name, marks=marks, id=name))
        if name == "torch":
            params.append(pytest.param("torch/program", id="torch-program"))
    return params


@functools.lru_cache(maxsize=None)
def _fitted(key):
    rng = np.random.default_rng(BASE_SEED ^ zlib.crc32(repr(key).encode()))
    return fit(key, rng)


def _importable(package):
    try:
        __import__(package)
    except ImportError:
        return False
    return True


@pytest.mark.parametrize("backend", _routes())
@pytest.mark.parametrize("key", sorted(ZOO), ids=lambda k: f"{k[0]}.{k[1]}")
def test_model_matrix(key, backend):
    if not _importable(key[0]):
        pytest.skip(f"{key[0]} is not installed")
    model, X = _fitted(key)
    name, _, route = backend.partition("/")
    converted = woodstar.convert(model, name, extra_config={"cpu_route": route} if route else None)
    tolerance = TOLERANCE.get(key[0], 1e-12)
    checked = 0
    for method in METHODS:
        if not hasattr(model, method) or not hasattr(converted, method):
            continue
        try:
            expected = source_answer(model, method, X)
        except ValueError:  # the source refuses these rows (NaN): so must woodstar
            with pytest.raises(ValueError):
                getattr(converted, method)(X)
            checked += 1
            continue
        got = getattr(converted, method)(X)
        compare_outputs(got, expected, "float64", f"{key[1]}.{method}", tolerance)
        checked += 1
    assert checked, "no method compared"
