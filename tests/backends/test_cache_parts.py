"""Tree programs on the CPU run a large call in cache-sized parts of equal size, and
with several threads run the parts side by side, one intra-op thread each; the
answers are those of one whole call."""

import threading

import numpy as np
import pytest
import torch

import woodstar
from woodstar import plan
from woodstar.backends import _walk_kernels
from woodstar.lowering import routing

from ._helpers import inputs_for

# The torch backend's CPU route (the compiled walk) is not a program: ask for it.
PROGRAM_BACKENDS = {"torch": {"cpu_route": "program"}, "torch.jit": {}}


@pytest.fixture(autouse=True)
def _tensor_op_walks(monkeypatch):
    """torch.jit's trace with the walk kernels runs a large call whole
    (test_torchscript_tree_walk.py); the tensor-op trace it runs where the kernels do
    not build is the one that takes parts."""
    monkeypatch.setattr(_walk_kernels, "WALK_KERNELS_ON_CPU", False)


@pytest.fixture
def small_parts(monkeypatch):
    """Parts of the smallest size (``CACHE_PART_MIN_ROWS``) for any model."""
    monkeypatch.setattr(routing, "CACHE_PART_BYTES", 1)
    return routing.CACHE_PART_MIN_ROWS


def _record_parts(program):
    sizes = []
    run_parts = program.run_parts

    def recording(batches):
        sizes.extend(len(b) for b in batches)
        return run_parts(batches)

    program.run_parts = recording
    return sizes


def test_part_count_fills_the_threads_and_the_cache():
    assert plan.part_count(100_000, 3_000) == 34
    assert plan.part_count(3_000, 3_000) == 1
    assert plan.part_count(1_000, 3_000, side_by_side=2) == 2  # one part per thread
    assert plan.part_count(300, 3_000, side_by_side=2) == 1  # halves would be too small
    assert plan.part_count(10_000, 3_000, side_by_side=8) == 8


@pytest.mark.parametrize("backend", sorted(PROGRAM_BACKENDS))
def test_a_large_call_runs_in_equal_cache_sized_parts(backend, sk_models, rng, small_parts):
    model, X = sk_models["rf"]
    config = {"n_threads": 1, **PROGRAM_BACKENDS[backend]}
    converted = woodstar.convert(model, backend, extra_config=config)
    rows = inputs_for(model, X, rng, n=3 * small_parts + 40).astype(np.float32)
    program = converted._programs["float32"]
    sizes = _record_parts(program)
    got = converted.predict_proba(rows)
    # equal parts within a row, none over the cache size: never a 40-row remainder
    assert sum(sizes) == len(rows) and len(sizes) == 4
    assert max(sizes) - min(sizes) <= 1 and max(sizes) <= small_parts
    _, whole = program(np.ascontiguousarray(rows))
    np.testing.assert_array_equal(got, whole)
    np.testing.assert_allclose(got, model.predict_proba(rows), rtol=1e-6, atol=1e-7)


def test_the_cache_parts_need_trees_and_tensor_ops(sk_models, small_parts):
    from sklearn.linear_model import LogisticRegression

    model, X = sk_models["rf"]
    linear = LogisticRegression().fit(X, (X[:, 0] > 0).astype(int))
    for source, backend, parted in [(model, "torch.jit", True), (linear, "torch.jit", False),
                                    (model, "onnx", False)]:  # onnx: ONNX Runtime's tree kernel
        converted = woodstar.convert(source, backend)
        step = converted._rows_per_batch("program", "float32")
        assert (step == small_parts) is parted, (source, backend, step)
    forced = woodstar.convert(model, "torch.jit", extra_config={"batch_size": 1000})
    assert forced._rows_per_batch("program", "float32") == 1000  # the user's batch_size wins


@pytest.mark.parametrize("backend", sorted(PROGRAM_BACKENDS))
def test_parts_run_side_by_side_one_intra_op_thread_each(backend, sk_models, rng, small_parts):
    model, X = sk_models["gb"]
    config = PROGRAM_BACKENDS[backend]
    converted = woodstar.convert(model, backend, extra_config={"n_threads": 2, **config})
    one_thread = woodstar.convert(model, backend, extra_config={"n_threads": 1, **config})
    program = converted._programs["float32"]
    seen = []
    traced = program._model

    def recording(x):
        seen.append((threading.current_thread().name, torch.get_num_threads()))
        return traced(x)

    program._model = recording
    before = torch.get_num_threads()
    for n in (2 * small_parts, 5 * small_parts + 3):
        seen.clear()
        rows = inputs_for(model, X, rng, n=n).astype(np.float32)
        np.testing.assert_array_equal(converted.predict_proba(rows),
                                      one_thread.predict_proba(rows))
        assert len({name for name, _ in seen}) == 2, seen  # two threads took parts
        assert {threads for _, threads in seen} == {1}, seen
    assert torch.get_num_threads() == before  # the caller's setting is restored


def test_the_torchscript_archive_runs_the_same_parts(sk_models, rng, small_parts):
    """The saved archive, opened by torch.jit.load alone, splits a large call into the
    container's parts (a scripted loop around the trace) with the same answers; woodstar
    itself reads the trace back out of it."""
    import io

    from woodstar.backends.torchscript_backend import TorchScriptBackend

    model, X = sk_models["rf"]
    converted = woodstar.convert(model, "torch.jit", extra_config={"n_threads": 1})
    runner = converted._programs["float32"]
    archive = torch.jit.load(io.BytesIO(TorchScriptBackend.save_artifact(runner)))
    assert archive.original_name == "RowParts"
    assert archive.rows == converted._rows_per_batch("program", "float32") == small_parts
    rows = torch.from_numpy(inputs_for(model, X, rng, n=3 * small_parts + 40).astype(np.float32))
    with torch.inference_mode():
        for got, expected in zip(archive(rows), runner.module(rows)):
            np.testing.assert_array_equal(got.numpy(), expected.numpy())
    from sklearn.linear_model import Ridge

    ridge = woodstar.convert(Ridge().fit(X, X[:, 0]), "torch.jit")
    bare = TorchScriptBackend.save_artifact(next(iter(ridge._programs.values())))
    assert torch.jit.load(io.BytesIO(bare)).original_name != "RowParts"  # no trees: the trace
