"""Routing from the measured table: loading, lookup, batch-size routes, the user's
choice winning, memory refusals falling back, and the fallback rule without a table."""

import json

import numpy as np
import pytest

from woodstar.backends import ranking
from woodstar.backends.ranking import choose_backend
from woodstar.lowering import routing
from woodstar.lowering.registry import strategy_names

pytest.importorskip("sklearn")


def _region(depth_le, strategy, ranking):
    return {"depth_le": depth_le, "strategy": strategy, "ranking": ranking, "evidence": ["m"],
            "unanimous": True}


TABLE = {"version": 1, "entries": [
    {"device": "cpu", "backend": "torch", "threads": 1, "batch": 1, "regions": [
        _region(None, "tree_trav", ["tree_trav", "perf_tree_trav", "gemm"])]},
    {"device": "cpu", "backend": "torch", "threads": 1, "batch": 10_000, "regions": [
        _region(3, "gemm", ["gemm", "perf_tree_trav", "tree_trav"]),
        _region(None, "perf_tree_trav", ["perf_tree_trav", "tree_trav", "gemm"])]},
    {"device": "cpu", "backend": "torch", "threads": 2, "batch": 10_000, "regions": [
        _region(None, "tree_trav", ["tree_trav", "perf_tree_trav", "gemm"])]},
]}


@pytest.fixture
def forest(rng):
    from sklearn.ensemble import RandomForestClassifier

    X = rng.normal(size=(300, 5))
    y = (X[:, 0] * X[:, 1] + np.sin(3 * X[:, 2]) > 0).astype(int)
    return RandomForestClassifier(n_estimators=4, max_depth=6, random_state=0).fit(X, y), X


def test_lookup_nearest_threads_batch_and_depth_region():
    assert routing.lookup(TABLE, 2, 20_000, 1)[0] == "gemm"
    assert routing.lookup(TABLE, 8, 20_000, 1)[0] == "perf_tree_trav"
    assert routing.lookup(TABLE, 8, 3, 1)[0] == "tree_trav"          # nearer 1 than 10k (log)
    assert routing.lookup(TABLE, 8, 10_000, 4)[0] == "tree_trav"     # nearest thread count: 2
    assert routing.lookup(TABLE, 8, 10_000, 1, device="cuda") is None
    assert routing.lookup(TABLE, 8, 10_000, 1, backend="onnx")[0] == "perf_tree_trav"  # torch's


def test_container_takes_the_tables_choice_for_its_threads(forest, monkeypatch):
    import woodstar

    monkeypatch.setattr(routing, "load_table", lambda path=None: TABLE)
    model, X = forest
    one_thread = woodstar.convert(model, extra_config={"n_threads": 1})
    assert one_thread.strategy == "perf_tree_trav"  # the 10k-row entry, 1 thread, depth 6
    two_threads = woodstar.convert(model, extra_config={"n_threads": 2})
    assert two_threads.strategy == "tree_trav"
    for converted in (one_thread, two_threads):
        np.testing.assert_allclose(converted.predict_proba(X), model.predict_proba(X), atol=1e-12)


def test_user_choice_always_wins(forest, monkeypatch):
    import woodstar

    monkeypatch.setattr(routing, "load_table", lambda path=None: TABLE)
    converted = woodstar.convert(forest[0], extra_config={"tree_implementation": "gemm"})
    assert converted.strategy == "gemm"


def test_refused_choice_falls_back_in_measured_order(forest):
    import woodstar

    ens = woodstar.convert(forest[0]).ir.ensemble
    table = {"entries": [{"device": "cpu", "backend": "torch", "threads": 1, "batch": 100,
                          "regions": [_region(None, "gemm", ["gemm", "perf_tree_trav", "tree_trav"])]}]}
    tiny_budget = 64  # gemm and perf_tree_trav refuse; tree_trav never does
    chosen = routing.choose_strategy(ens, None, "float32", tiny_budget, "RF", 100, 1, table=table)
    assert chosen.name == "tree_trav"


def test_no_table_falls_back_to_the_depth_rule(forest):
    import woodstar

    ens = woodstar.convert(forest[0]).ir.ensemble
    chosen = routing.choose_strategy(ens, None, "float32", 2**29, "RF", 100, 1, table={})
    depth = int(ens.tree_depths().max())
    assert chosen.name == ("gemm" if depth <= routing.GEMM_MAX_DEPTH else "perf_tree_trav")


def test_shipped_table_is_well_formed():
    table = routing.load_table()
    if table is None:
        pytest.skip("no routing table shipped")
    names = set(strategy_names())
    for entry in table["entries"]:
        assert {"device", "backend", "threads", "batch", "regions"} <= set(entry)
        bounds = [r["depth_le"] for r in entry["regions"]]
        assert bounds[-1] is None and all(b is not None for b in bounds[:-1])
        assert bounds[:-1] == sorted(bounds[:-1])
        for region in entry["regions"]:
            assert region["strategy"] in names and region["evidence"]


def test_table_file_round_trips(tmp_path):
    path = tmp_path / "table.json"
    path.write_text(json.dumps(TABLE))
    assert routing.load_table(path)["entries"][0]["batch"] == 1
    assert routing.load_table(tmp_path / "missing.json") is None


# ------------------------------------------------------------------ backend="auto"
BACKEND_TABLE = {"backends": {"entries": [
    {"device": "cpu", "threads": 1, "batch": 10_000, "ranking": ["tvm", "onnx", "torch"]},
    {"device": "cpu", "threads": 1, "batch": 1, "ranking": ["onnx", "torch"]},
    {"device": "cpu", "threads": 2, "batch": 10_000, "ranking": ["torch.compile", "torch"]},
]}}


def test_auto_takes_the_first_installed_backend_of_the_nearest_entry():
    everything = lambda name: True  # noqa: E731
    assert choose_backend("auto", 1, table=BACKEND_TABLE, available=everything) == "tvm"
    assert choose_backend("AUTO", 3, table=BACKEND_TABLE, available=everything) == "torch.compile"
    no_tvm = lambda name: name != "tvm"  # noqa: E731
    assert choose_backend("auto", 1, table=BACKEND_TABLE, available=no_tvm) == "onnx"
    nothing = lambda name: False  # noqa: E731
    assert choose_backend("auto", 1, table=BACKEND_TABLE, available=nothing) == "torch"


def test_auto_without_evidence_is_torch():
    assert choose_backend("auto", 1, table=BACKEND_TABLE, device="cuda") == "torch"
    assert choose_backend("auto", 1, table={}) == "torch"
    assert choose_backend("onnx", 1, table=BACKEND_TABLE) == "onnx"  # a name is kept


def test_convert_auto_builds_the_chosen_backend(forest, monkeypatch, rng):
    import woodstar

    model, X = forest
    monkeypatch.setattr(ranking, "load_table", lambda path=None: {
        "backends": {"entries": [{"device": "cpu", "threads": 1, "batch": 10_000,
                                  "ranking": ["no-such-backend", "torch.jit", "torch"]}]}})
    converted = woodstar.convert(model, "auto", extra_config={"n_threads": 1})
    assert converted.backend == "torch.jit"
    rows = X[rng.integers(0, len(X), 50)].astype(np.float32)
    np.testing.assert_array_equal(converted.predict_proba(rows), model.predict_proba(rows))


def test_shipped_table_ranks_backends():
    table = routing.load_table()
    entries = table["backends"]["entries"]
    assert entries and all(e["ranking"] and e["device"] == "cpu" for e in entries)
    assert choose_backend("auto", 1, table=table) in set(entries[0]["ranking"]) | {"torch"}


# ------------------------------------------------------------------ calibrated tables
def _calibrated(strategy, **machine_changes):
    from woodstar import calibration

    regions = [_region(None, strategy, [strategy, *[s for s in strategy_names() if s != strategy]])]
    return {"version": 1, "kind": "calibrated", "made": "2026-12-01T00:00:00+00:00",
            "machine": {**calibration.machine(), **machine_changes},
            "entries": [{"device": "cpu", "backend": "torch", "threads": t, "batch": b,
                         "regions": regions} for t in (1, 2) for b in (1, 10_000)]}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


def test_a_calibrated_table_changes_the_route(forest, cache):
    import woodstar
    from woodstar import calibration

    model, X = forest
    ens = woodstar.convert(model).ir.ensemble
    shipped = routing.choose_strategy(ens, None, "float32", 2**29, "RF", 10_000, 1,
                                      table=routing.load_table(routing.TABLE_PATH)).name
    other = next(s for s in ("tree_trav", "perf_tree_trav", "gemm") if s != shipped)
    path = calibration.write_table(_calibrated(other))
    assert path.parent.parent == cache and path.exists()
    assert routing.load_table()["kind"] == "calibrated"
    chosen = routing.choose_strategy(ens, None, "float32", 2**29, "RF", 10_000, 1)
    assert chosen.name == other != shipped
    converted = woodstar.convert(model, extra_config={"n_threads": 1})
    assert converted.strategy == other
    np.testing.assert_allclose(converted.predict_proba(X), model.predict_proba(X), atol=1e-12)
    assert calibration.table_in_use()["kind"] == "calibrated"


@pytest.mark.parametrize("change, match", [
    ({"cpu": "Some Other CPU 9000"}, "cpu 'Some Other CPU 9000'"),
    ({"logical_cpus": 512}, "logical_cpus 512"),
    ({"woodstar": "0.0.1"}, "woodstar '0.0.1'"),
])
def test_a_table_for_another_machine_is_ignored_with_a_warning(forest, cache, change, match):
    from woodstar import calibration
    from woodstar.exceptions import CalibrationWarning

    path = calibration.calibrated_path()
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_calibrated("gemm", **change)))
    with pytest.warns(CalibrationWarning, match=match):
        table = routing.load_table()
    assert table == routing.load_table(routing.TABLE_PATH)   # the shipped one
    use = calibration.table_in_use()
    assert use["kind"] == "shipped" and match in use["ignored"]


@pytest.mark.parametrize("content, match", [
    ("{not json", "cannot be read"),
    (json.dumps([1, 2]), "not a JSON object"),
    (None, "names no registered strategy"),
])
def test_a_corrupted_table_is_ignored_with_a_warning(cache, content, match):
    from woodstar import calibration
    from woodstar.exceptions import CalibrationWarning

    if content is None:
        table = _calibrated("gemm")
        table["entries"][0]["regions"][0]["strategy"] = "no_such_strategy"
        content = json.dumps(table)
    path = calibration.calibrated_path()
    path.parent.mkdir(parents=True)
    path.write_text(content)
    with pytest.warns(CalibrationWarning, match=match) as caught:
        assert routing.load_table()["kind"] == "shipped"
    assert str(path) in str(caught[0].message)


def test_write_table_refuses_an_invalid_table(cache):
    from woodstar import calibration
    from woodstar.exceptions import WoodstarError

    table = _calibrated("gemm")
    table["entries"][0]["regions"].insert(0, _region(9, "gemm", ["gemm"]))
    table["entries"][0]["regions"].insert(0, _region(12, "gemm", ["gemm"]))
    with pytest.raises(WoodstarError, match=r"entry 0: depth bounds \[12, 9, None\] must increase"):
        calibration.write_table(table)
    assert not calibration.calibrated_path().exists()


def test_without_a_calibrated_table_the_shipped_one_is_read(cache, recwarn):
    from woodstar import calibration

    assert routing.load_table() is routing.load_table(routing.TABLE_PATH)
    use = calibration.table_in_use()
    assert use["kind"] == "shipped" and use["cpu"] == "AMD EPYC" and use["ignored"] is None
    assert not [w for w in recwarn if "calibrated" in str(w.message)]


def test_shipped_table_records_its_machine():
    table = routing.load_table(routing.TABLE_PATH)
    assert table["kind"] == "shipped"
    assert table["machine"]["cpu"] and table["machine"]["logical_cpus"] == 2


def test_a_fallback_needs_evidence_at_every_point_of_its_region():
    """GEMM timed on the shallow model only: its small summed time is missing
    evidence, so it ranks after the strategies timed at every depth of the region."""
    from woodstar.lowering._routing_evidence import routing_entries

    def cell(model, strategy, median):
        return {"model": model, "threads": 1, "batch": 1000, "kind": "woodstar",
                "backend": "torch.compile", "strategy": strategy, "status": "ok",
                "median_s": median, "mad_s": 0.0}

    results = {"models": {"d3": {"max_depth": 3}, "d8": {"max_depth": 8}},
               "cells": [cell("d3", "perf_tree_trav", 1.0), cell("d3", "tree_trav", 1.3),
                         cell("d3", "gemm", 1.2), cell("d8", "perf_tree_trav", 2.0),
                         cell("d8", "tree_trav", 2.6)]}
    (entry,) = routing_entries(results, backend="torch.compile")
    (region,) = entry["regions"]
    assert region["ranking"] == ["perf_tree_trav", "tree_trav", "gemm"]



@pytest.mark.parametrize("order", [("a8", "b8"), ("b8", "a8")])
def test_a_depth_where_models_disagree_is_not_swallowed_by_the_region_below(order):
    """Two depth-8 models: the perfect-tree walk ties on one and is clearly slower on the
    other. The shallow models' region ends below depth 8 whichever is named first (the
    depth's points join or leave a region together), so no region holds a point where
    another strategy is clearly faster."""
    from woodstar.lowering._routing_evidence import routing_entries

    def cell(model, strategy, median):
        return {"model": model, "threads": 1, "batch": 1000, "kind": "woodstar",
                "backend": "torch.jit", "strategy": strategy, "status": "ok",
                "median_s": median, "mad_s": 0.0}

    tie, slower = order
    results = {"models": {"d3": {"max_depth": 3}, "d5": {"max_depth": 5},
                          tie: {"max_depth": 8}, slower: {"max_depth": 8}},
               "cells": [cell("d3", "perf_tree_trav", 1.0), cell("d3", "tree_trav", 2.0),
                         cell("d5", "perf_tree_trav", 1.0), cell("d5", "tree_trav", 1.5),
                         cell(tie, "perf_tree_trav", 1.05), cell(tie, "tree_trav", 1.0),
                         cell(slower, "perf_tree_trav", 1.2), cell(slower, "tree_trav", 1.0)]}
    (entry,) = routing_entries(results, backend="torch.jit")
    shallow, deep = entry["regions"]
    assert (shallow["depth_le"], shallow["strategy"], shallow["unanimous"]) == (5, "perf_tree_trav", True)
    assert (deep["depth_le"], deep["strategy"], deep["unanimous"]) == (None, "tree_trav", True)
    assert sorted(deep["evidence"]) == sorted(order)


def test_a_backend_with_its_own_entries_reads_them_not_torchs():
    own = {"device": "cpu", "backend": "torch.jit", "threads": 1, "batch": 1000, "regions": [
        _region(None, "tree_trav", ["tree_trav", "perf_tree_trav"])]}
    table = {**TABLE, "entries": TABLE["entries"] + [own]}
    assert routing.lookup(table, 8, 10_000, 1)[0] == "perf_tree_trav"  # torch's region
    assert routing.lookup(table, 8, 10_000, 1, backend="torch.jit")[0] == "tree_trav"
    assert routing.lookup(table, 8, 10_000, 1, backend="tvm")[0] == "perf_tree_trav"  # none: torch's
