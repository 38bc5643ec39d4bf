"""torch.jit on the CPU: the trace the container runs calls each tree walk as one
operator with a C kernel (``runtimes/walk_ops.py``), while ``model``, ``container=False``
and the saved archive hold a trace of tensor ops only, which ``torch.jit.load`` runs in
a process that never imported woodstar. The kernel trace's raw sums are the tensor
program's to the bit and its answers the source's. (Two threads, categorical parts and
the kernels switched off: test_compile_tree_walk.py, for both backends.)"""

import subprocess
import sys
import zipfile

import numpy as np
import pytest
import torch

import woodstar
from woodstar.backends import _walk_kernels
from woodstar.lowering.trees._common import TreeStrategyBase

from .._parity import compare_outputs, edge_rows
from .._walk_models import (OPERATOR_OF, STRATEGIES, assert_sums_and_answers, forest_classifier,
                            lightgbm_multiclass_nan, needs_walk_kernels, raw_sums,
                            xgboost_missing_range)

SIZES = (1, 17, 203)
_needs_kernels = pytest.fixture(autouse=True)(needs_walk_kernels)


def _graph_operators(script_module):
    return {node.kind() for node in script_module.inlined_graph.nodes()
            if node.kind().startswith("woodstar::")}


def _running_trace(converted):
    return converted._programs["float32"]._model


def _operators_called(converted, rows):
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as profile:
        converted.predict(rows)
    return {event.name for event in profile.events() if event.name.startswith("woodstar::")}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("make", [lightgbm_multiclass_nan, xgboost_missing_range],
                         ids=["lightgbm_multiclass_nan", "xgboost_missing_range"])
def test_the_running_trace_calls_the_kernel(rng, strategy, make):
    model, X = make(rng)
    ensemble = woodstar.convert(model, "torch").ir.graph.nodes_of("trees")[0].op
    X_test = edge_rows(ensemble, max(SIZES), rng, base=X)
    converted = woodstar.convert(model, "torch.jit", extra_config={"tree_implementation": strategy})
    assert _graph_operators(_running_trace(converted)) == {OPERATOR_OF[strategy]}
    assert converted._programs["float32"].runs_tensor_ops is False  # whole calls, no parts
    assert _operators_called(converted, X_test[:5].astype(np.float32)) == {OPERATOR_OF[strategy]}
    if make is xgboost_missing_range:  # the programs sum in float64, XGBoost in float32
        assert_sums_and_answers(converted, model, strategy, X_test.astype(np.float32), SIZES,
                                methods=("predict",), tolerance=1e-6)
    else:
        assert_sums_and_answers(converted, model, strategy, X_test, SIZES)
    # the walk flags are the trace's only: the module itself is left as it was
    module = converted._programs["float32"].module
    assert not any(m.walk_as_operator for m in module.modules() if isinstance(m, TreeStrategyBase))


def test_model_and_container_false_are_tensor_ops_only(rng):
    model, X = forest_classifier(rng)
    converted = woodstar.convert(model, "torch.jit")
    bare = woodstar.convert(model, "torch.jit", extra_config={"container": False})
    ensemble = woodstar.convert(model, "torch").ir.graph.nodes_of("trees")[0].op
    rows = torch.from_numpy(edge_rows(ensemble, 50, rng, base=X, nan=False, inf=False)
                            .astype(np.float32))
    for script_module in (converted.model, bare):
        assert isinstance(script_module, torch.jit.ScriptModule)
        assert _graph_operators(script_module) == set()
        with torch.inference_mode():
            _, proba = script_module(rows)
        np.testing.assert_array_equal(proba.numpy(), converted.predict_proba(rows.numpy()))


def test_the_saved_archive_runs_without_woodstar(rng, tmp_path):
    model, X = xgboost_missing_range(rng)  # a regressor: its raw output is the sums
    converted = woodstar.convert(model, "torch.jit", extra_config={"n_threads": 1})
    path = tmp_path / "forest.zip"
    converted.save(path)
    with zipfile.ZipFile(path) as archive:
        (tmp_path / "model.pt").write_bytes(archive.read("artifacts/float32/model.pt"))
    rows = X[:300].astype(np.float32)
    rows[::5, 1] = np.nan
    rows[::7, 0] = np.inf
    np.save(tmp_path / "rows.npy", rows)
    script = ("import sys, numpy as np, torch\n"
              "archive = torch.jit.load(sys.argv[1])\n"
              "raw, proba = archive(torch.from_numpy(np.load(sys.argv[2])))\n"
              "np.save(sys.argv[3], raw.numpy())\n"
              "np.save(sys.argv[4], proba.numpy())\n"
              "assert not any(m.startswith('woodstar') for m in sys.modules)\n")
    subprocess.run([sys.executable, "-c", script, str(tmp_path / "model.pt"), str(tmp_path / "rows.npy"),
                    str(tmp_path / "raw.npy"), str(tmp_path / "proba.npy")],
                   check=True, cwd=tmp_path, capture_output=True)
    with torch.inference_mode():  # the archive's tensor ops give the kernel trace's sums
        expected_raw = _running_trace(converted)(torch.from_numpy(rows))[0].numpy()
    np.testing.assert_array_equal(np.load(tmp_path / "raw.npy"), expected_raw)
    compare_outputs(np.load(tmp_path / "proba.npy")[:, 0], model.predict(rows), "float32", "predict",
                    tolerance=1e-6)  # the programs sum in float64, XGBoost in float32
    loaded = woodstar.load(path)  # woodstar traces its kernel walk again
    assert _graph_operators(_running_trace(loaded)) == {OPERATOR_OF[loaded.strategy]}
    assert _graph_operators(loaded.model) == set()
    np.testing.assert_array_equal(raw_sums(loaded, rows), raw_sums(converted, rows))


def test_without_the_kernels_one_trace_serves_both(rng, monkeypatch):
    monkeypatch.setattr(_walk_kernels, "WALK_KERNELS_ON_CPU", False)
    model, X = forest_classifier(rng)
    converted = woodstar.convert(model, "torch.jit")
    assert _graph_operators(_running_trace(converted)) == set()
    assert converted.model is _running_trace(converted)
