"""torch.compile on the CPU calls each tree walk as one operator with a C kernel
(``runtimes/walk_ops.py``). Its raw sums are the tensor program's to the bit (the torch
backend's program, same strategy) and its answers the source's; the operator really
runs (the profiler sees it); parts it cannot take (categorical splits) keep the tensor
ops; and without the kernels, or with them switched off, the answers do not change.
The last three hold for torch.jit too, whose running trace calls the same kernels
(test_torchscript_tree_walk.py has its own checks)."""

import numpy as np
import pytest
import torch

import woodstar
from woodstar.backends import _walk_kernels, all_backends
from woodstar.lowering.trees._common import TreeStrategyBase
from woodstar.runtimes import walk_ops

from .._parity import compare_outputs, edge_rows
from .._walk_models import (OPERATOR_OF, STRATEGIES, assert_sums_and_answers,
                            lightgbm_multiclass_nan, needs_walk_kernels, raw_sums)

SIZES = (1, 17, 203)
_needs_kernels = pytest.fixture(autouse=True)(needs_walk_kernels)


@pytest.fixture(params=["torch.compile", "torch.jit"])
def kernel_backend(request):
    """A backend whose CPU program calls the walk kernels."""
    available, reason = all_backends()[request.param].is_available()
    if not available:
        pytest.skip(reason)
    return request.param


@pytest.fixture
def compile_backend_available():
    available, reason = all_backends()["torch.compile"].is_available()
    if not available:
        pytest.skip(reason)


def _strategies(converted):
    module = converted._programs["float32"].module
    return [m for m in module.modules() if isinstance(m, TreeStrategyBase)]


def _operators_called(converted, rows):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        converted.predict(rows)
    return {event.name for event in profile.events() if event.name.startswith("woodstar::")}


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_lightgbm_multiclass_with_nan(rng, strategy, compile_backend_available):
    model, X = lightgbm_multiclass_nan(rng)
    ensemble = woodstar.convert(model, "torch").ir.graph.nodes_of("trees")[0].op
    X_test = edge_rows(ensemble, max(SIZES), rng, base=X)
    converted = woodstar.convert(model, "torch.compile", extra_config={"tree_implementation": strategy})
    assert [s.walk_as_operator for s in _strategies(converted)] == [True]
    assert converted._programs["float32"].runs_tensor_ops is False  # whole calls, no parts
    assert _operators_called(converted, X_test[:5]) == {OPERATOR_OF[strategy]}
    assert_sums_and_answers(converted, model, strategy, X_test, SIZES)


def test_forest_float64_rows_and_two_threads(rng, kernel_backend):
    from sklearn.ensemble import RandomForestRegressor

    X = rng.normal(size=(400, 4))
    model = RandomForestRegressor(n_estimators=8, max_depth=6, random_state=0).fit(X, X[:, 0] - X[:, 2])
    ensemble = woodstar.convert(model, "torch").ir.graph.nodes_of("trees")[0].op
    X_test = edge_rows(ensemble, 3000, rng, base=X, nan=False, inf=False)
    config = {"tree_implementation": "perf_tree_trav", "tree_op_precision_dtype": "float64"}
    one = woodstar.convert(model, kernel_backend, extra_config={**config, "n_threads": 1})
    two = woodstar.convert(model, kernel_backend, extra_config={**config, "n_threads": 2})
    np.testing.assert_array_equal(one.predict(X_test), two.predict(X_test))
    compare_outputs(two.predict(X_test), model.predict(X_test), "float64", "predict")


def test_categorical_parts_keep_the_tensor_ops(sk_models, kernel_backend):
    model, X = sk_models["hgb_cat_nan"]
    converted = woodstar.convert(model, kernel_backend, extra_config={"tree_implementation": "tree_trav"})
    assert [s.walk_as_operator for s in _strategies(converted)] == [False]
    assert converted._programs["float32"].runs_tensor_ops is True
    assert _operators_called(converted, X[:5]) == set()
    compare_outputs(converted.predict_proba(X), model.predict_proba(X), "float32", "proba")


@pytest.mark.parametrize("switch", ["off", "no kernels"])
def test_without_the_kernels_the_walk_stays_tensor_ops(rng, monkeypatch, switch, kernel_backend):
    from sklearn.ensemble import GradientBoostingClassifier

    X = rng.normal(size=(300, 4))
    model = GradientBoostingClassifier(n_estimators=5, max_depth=3, random_state=0).fit(X, X[:, 0] > 0)
    with_kernel = woodstar.convert(model, kernel_backend, extra_config={"tree_implementation": "tree_trav"})
    if switch == "off":
        monkeypatch.setattr(_walk_kernels, "WALK_KERNELS_ON_CPU", False)
    else:  # a machine where the C kernels did not build
        monkeypatch.setattr(walk_ops, "register_cpu_kernels", lambda: False)
    without = woodstar.convert(model, kernel_backend, extra_config={"tree_implementation": "tree_trav"})
    assert [s.walk_as_operator for s in _strategies(without)] == [False]
    assert without._programs["float32"].runs_tensor_ops is True
    assert _operators_called(without, X[:5]) == set()
    X_test = rng.normal(size=(99, 4))
    np.testing.assert_array_equal(raw_sums(without, X_test), raw_sums(with_kernel, X_test))
    np.testing.assert_array_equal(without.predict(X_test), model.predict(X_test))
