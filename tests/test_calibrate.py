"""Measuring this machine's routing cells: the random forests, the budget, the table."""

import pytest

from woodstar import _calibrate, calibration
from woodstar._budget import Budget
from woodstar.lowering import routing
from woodstar.lowering.registry import strategy_names


@pytest.mark.parametrize("depth", [1, 4, 9])
def test_random_forest_has_the_asked_depth(depth):
    ens = _calibrate.random_forest(depth, n_trees=6, n_features=5, seed=depth)
    assert ens.n_trees == 6 and int(ens.tree_depths().max()) == depth
    assert ens.n_features == 5


def test_measure_times_every_strategy_and_builds_a_valid_table(tmp_path, monkeypatch):
    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path))
    results = _calibrate.measure(Budget(30, 4, progress=False), depths=(2, 6), batches=(1, 40),
                                 threads=(1,), n_trees=4, repeats=2)
    timed = {(c["model"], c["batch"], c["strategy"]) for c in results["cells"]}
    assert {("random_d2", 1, s) for s in strategy_names()} <= timed
    table = _calibrate.build_table(results, 30, 1.0, routing.load_table(routing.TABLE_PATH))
    assert calibration.validate_table(table) is None
    own = [e for e in table["entries"] if e["backend"] == "torch"]
    assert {(e["threads"], e["batch"]) for e in own} == {(1, 1), (1, 40)}
    assert table["backends"]["entries"]  # the shipped backend ranking, carried over
    shipped = routing.load_table(routing.TABLE_PATH)["entries"]
    others = [e for e in shipped if e["backend"] != "torch"]  # e.g. torch.compile's, carried over
    assert [e for e in table["entries"] if e["backend"] != "torch"] == others


def test_a_spent_budget_times_nothing_and_says_what_it_skipped():
    results = _calibrate.measure(Budget(1e-9, 2, progress=False), depths=(3,), batches=(1, 10),
                                 threads=(1,), n_trees=2, repeats=1)
    assert results["cells"] == []
    assert len(results["skipped"]) == 2 * len(strategy_names())
    assert all("left" in note for note in results["skipped"])


def test_a_strategy_far_behind_is_not_timed_at_larger_batches(monkeypatch):
    """The strategy 5x slower than the fastest at one batch is dropped at the next."""
    real = _calibrate._program

    def slow_gemm(ens, cls):
        run = real(ens, cls)
        if cls.name != "gemm":
            return run
        import time

        def slow(X):
            time.sleep(0.01)
            return run(X)
        return slow

    monkeypatch.setattr(_calibrate, "_program", slow_gemm)
    results = _calibrate.measure(Budget(30, 2, progress=False), depths=(2,), batches=(1, 20),
                                 threads=(1,), n_trees=2, repeats=2)
    timed = {(c["batch"], c["strategy"]) for c in results["cells"]}
    assert (1, "gemm") in timed and (20, "gemm") not in timed and (20, "tree_trav") in timed
    assert any(n.startswith("gemm, depth 2, 1 thread(s), from 20 rows") for n in results["not_timed"])
