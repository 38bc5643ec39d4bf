"""The benchmark harness in smoke form: a tiny forest, two batch sizes, one thread."""

import json

import pytest

pytest.importorskip("sklearn")

from benchmarks import harness, models, report  # noqa: E402
from benchmarks.candidates import as_proba  # noqa: E402


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    spec = models.ModelSpec("tiny_rf", "sklearn", "RandomForest, 5 trees, depth 3",
                            params=(("kind", "rf"), ("n_estimators", 5), ("max_depth", 3)))
    monkeypatch.setitem(models.MODEL_SPECS, "tiny_rf", spec)
    monkeypatch.setattr(models, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(models, "N_TRAIN", 500)
    return spec


def test_smoke_run_checks_times_and_reports(tiny, tmp_path, monkeypatch):
    out = tmp_path / "results.json"
    results = harness.run_benchmark(
        ["tiny_rf"], batches=(1, 20), threads=(1,), repeats=2, min_time_s=0.0,
        max_call_s=5.0, check_rows=50, peers=(), out_path=out, progress=False)
    assert json.loads(out.read_text())["meta"]["batches"] == [1, 20]
    builds = {b["candidate"]: b for b in results["builds"]}
    assert builds["native[sklearn]"]["status"] == "ok"
    from woodstar.lowering import strategy_names
    for s in strategy_names():  # every registered strategy is a route, checked before timing
        b = builds[f"woodstar[{s}/torch]"]
        assert b["status"] == "ok" and b["max_abs_diff"] <= harness.ATOL
    timed = {(c["candidate"], c["batch"]) for c in results["cells"] if c["status"] == "ok"}
    assert ("woodstar[auto/torch]", 20) in timed and ("native[sklearn]", 1) in timed
    cell = next(c for c in results["cells"] if c["status"] == "ok")
    assert len(cell["times_s"]) == 2 and cell["median_s"] > 0

    paths = report.write_all(results, results_path=out, out_dir=tmp_path / "docs")
    text = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "## Method" in text and "tiny_rf" in text and "## Rejected candidates" in text
    table = json.loads((tmp_path / "docs" / "routing_table.json").read_text())
    assert {e["batch"] for e in table["entries"]} == {1, 20}
    assert len(paths) >= 2


def test_wrong_answers_are_never_timed(tiny, monkeypatch):
    from benchmarks import candidates

    real = candidates._woodstar_candidates

    def broken(spec, model, *selection):
        out = real(spec, model, *selection)
        for cand in out:
            build = cand.build

            def wrong(threads, build=build):
                b = build(threads)
                fn = b.fn
                b.fn = lambda X: fn(X) * 0.5
                return b
            cand.build = wrong
        return out

    monkeypatch.setattr(candidates, "_woodstar_candidates", broken)
    results = harness.run_benchmark(
        ["tiny_rf"], batches=(5,), threads=(1,), repeats=1, min_time_s=0.0, max_call_s=5.0,
        check_rows=30, peers=(), progress=False)
    assert all(b["status"] == "wrong" for b in results["builds"] if b["kind"] == "woodstar")
    assert not any(c["kind"] == "woodstar" for c in results["cells"])


def test_as_proba_shapes():
    import numpy as np

    assert as_proba(np.array([0.25, 1.0]), 2).tolist() == [[0.75, 0.25], [0.0, 1.0]]
    assert as_proba(np.ones((3, 1, 4)), 4).shape == (3, 4)


def test_cli_parses_bench_options():
    from woodstar.cli import build_parser

    args = build_parser().parse_args(["bench", "--quick", "--threads", "1,2", "--report"])
    assert args.quick and args.threads == (1, 2) and args.report
    args = build_parser().parse_args(["bench", "--backends", "torch,onnx", "--routed-only"])
    assert args.backends == ("torch", "onnx") and args.routed_only


def test_routed_only_times_one_route_per_chosen_backend(tiny):
    results = harness.run_benchmark(
        ["tiny_rf"], batches=(3,), threads=(1,), repeats=1, min_time_s=0.0, max_call_s=5.0,
        check_rows=30, peers=(), progress=False, backends=("torch",), routed_only=True)
    woodstar_builds = [b["candidate"] for b in results["builds"] if b["kind"] == "woodstar"]
    assert woodstar_builds == ["woodstar[auto/torch]"]
    assert results["meta"]["backends"] == ["torch"] and results["meta"]["routed_only"]


def test_a_model_without_trees_is_timed_once_per_backend_and_reported(monkeypatch, tmp_path):
    """The scaler + logistic pipeline: no forced tree strategies (it has no trees), its
    routed candidate checked and timed, and the report describes it without tree fields."""
    monkeypatch.setattr(models, "CACHE_DIR", tmp_path / "cache")
    monkeypatch.setattr(models, "N_TRAIN", 300)
    out = tmp_path / "results.json"
    results = harness.run_benchmark(
        ["scaler_logreg"], batches=(4,), threads=(1,), repeats=1, min_time_s=0.0,
        max_call_s=5.0, check_rows=40, peers=(), out_path=out, progress=False,
        backends=("torch",))
    builds = {b["candidate"]: b for b in results["builds"] if b["kind"] == "woodstar"}
    assert list(builds) == ["woodstar[auto/torch]"]
    assert builds["woodstar[auto/torch]"]["status"] == "ok"
    assert results["models"]["scaler_logreg"]["trees"] is False
    report.write_all(results, results_path=out, out_dir=tmp_path / "docs")
    text = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "no trees (no tree strategies)" in text
