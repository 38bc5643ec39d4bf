"""``woodstar bench`` writes into its output folder only; the maintainer path merges
into the shipped evidence instead of replacing it; a time budget skips what cannot
fit and says so."""

import hashlib
import json
import time

import pytest

pytest.importorskip("sklearn")

from benchmarks import cli, harness, models, report  # noqa: E402
from benchmarks.candidates import Built, Candidate  # noqa: E402
from woodstar.cli import main  # noqa: E402

ROOT = report.ROOT


@pytest.fixture
def tiny(monkeypatch, tmp_path):
    spec = models.ModelSpec("tiny_rf", "sklearn", "RandomForest, 5 trees, depth 3",
                            params=(("kind", "rf"), ("n_estimators", 5), ("max_depth", 3)))
    monkeypatch.setitem(models.MODEL_SPECS, "tiny_rf", spec)
    monkeypatch.setattr(models, "CACHE_DIR", tmp_path / "model-cache")
    monkeypatch.setattr(models, "N_TRAIN", 500)
    return spec


def _snapshot():
    """SHA-256 of every file the package, the docs and the shipped results hold."""
    out = {}
    for folder in ("woodstar", "docs", "benchmarks"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                out[str(path.relative_to(ROOT))] = hashlib.sha256(path.read_bytes()).hexdigest()
    return out


def test_bench_writes_only_into_its_output_folder(tiny, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # a relative default would land here, not in the repo
    before = _snapshot()
    out = tmp_path / "bench-out"
    assert main(["bench", "--smoke", "--models", "tiny_rf", "--peers", "", "--out", str(out),
                 "--report", "--no-progress"]) == 0
    assert _snapshot() == before
    written = {str(p.relative_to(out)) for p in out.rglob("*") if p.is_file()}
    assert {"smoke.json", "benchmarks.md", "routing_table.json"} <= written
    assert all(w in {"smoke.json", "benchmarks.md", "routing_table.json"} or w.startswith("img/")
               for w in written), written
    assert set(p.name for p in tmp_path.iterdir()) == {"bench-out", "model-cache"}
    text = (out / "benchmarks.md").read_text()
    assert text.startswith("# Benchmarks (this machine)") and "## Summary" not in text
    results = json.loads((out / "smoke.json").read_text())
    assert results["meta"]["budget_s"] == harness.SMOKE_BUDGET_S
    assert json.loads((out / "routing_table.json").read_text())["kind"] == "bench"


def test_default_output_folder_is_relative_to_the_working_directory():
    args = cli.argparse.Namespace(out=None)
    assert (args.out or cli.DEFAULT_OUT) == cli.DEFAULT_OUT
    assert not cli.DEFAULT_OUT.is_absolute() and cli.DEFAULT_OUT.name == "woodstar-bench"


def _cell(model, batch, strategy, median, date):
    return {"model": model, "threads": 1, "batch": batch, "candidate": f"woodstar[{strategy}/torch]",
            "kind": "woodstar", "strategy": strategy, "backend": "torch", "status": "ok",
            "median_s": median, "mad_s": 0.0}


def _run(date, cpu, cells):
    meta = {"date": date, "cpu": cpu, "logical_cpus": 2, "command": "woodstar bench",
            "git_commit": "abc", "batches": sorted({c["batch"] for c in cells}), "threads": [1],
            "repeats": 3, "versions": {}, "min_time_s": 0, "max_call_s": 1, "atol": 1e-5}
    return {"meta": meta, "models": {"d4": {"description": "depth 4", "max_depth": 4}},
            "cells": cells, "builds": []}


def test_update_shipped_merges_new_cells_and_keeps_the_grid(tmp_path, monkeypatch):
    """The maintainer path: a new run replaces only the cells it measured; every other
    cell of the grid stays, and each cell says when and where it was measured."""
    results = tmp_path / "results"
    results.mkdir()
    old = _run("2026-01-01T00:00:00+00:00", "AMD EPYC",
               [_cell("d4", b, s, t, None) for b in (1, 100) for s, t in
                (("gemm", 1.0), ("tree_trav", 2.0))])
    new = _run("2026-02-01T00:00:00+00:00", "Intel Xeon",
               [_cell("d4", 100, s, t, None) for s, t in (("gemm", 3.0), ("tree_trav", 1.0))])
    (results / "old.json").write_text(json.dumps(old))
    (results / "new.json").write_text(json.dumps(new))
    (results / "shipped.json").write_text(json.dumps({"runs": ["old.json"]}))
    monkeypatch.setattr(cli, "RESULTS", results)
    monkeypatch.setattr(cli, "SHIPPED", results / "shipped.json")
    monkeypatch.setattr(report, "DOCS", tmp_path / "docs")
    monkeypatch.setattr(report, "TABLE", tmp_path / "table.json")
    monkeypatch.setattr(report, "NOTES", tmp_path / "notes.md")
    (tmp_path / "notes.md").write_text("## Summary (hand-written)\n\nKept analysis.\n")
    assert main(["bench", "--report-only", "--update-shipped", "--merge",
                 str(results / "new.json")]) == 0
    assert json.loads((results / "shipped.json").read_text())["runs"] == ["old.json", "new.json"]
    table = json.loads((tmp_path / "table.json").read_text())
    by_batch = {e["batch"]: e["regions"][0] for e in table["entries"] if e["backend"] == "torch"}
    assert by_batch[1]["strategy"] == "gemm"             # the old grid's cell, kept
    assert by_batch[1]["measured"] == ["2026-01-01T00:00:00+00:00, AMD EPYC"]
    assert by_batch[100]["strategy"] == "tree_trav"      # measured again: the new run wins
    assert by_batch[100]["measured"] == ["2026-02-01T00:00:00+00:00, Intel Xeon"]
    assert table["kind"] == "shipped" and table["machine"]["cpu"] == "AMD EPYC + Intel Xeon"
    text = (tmp_path / "docs" / "benchmarks.md").read_text()
    assert "Kept analysis." in text and "--update-shipped" in text


def test_update_shipped_refuses_smoke_runs_and_an_output_folder(tmp_path):
    with pytest.raises(SystemExit, match="does not take --smoke"):
        main(["bench", "--smoke", "--update-shipped"])
    with pytest.raises(SystemExit, match="takes --name, not --out"):
        main(["bench", "--quick", "--update-shipped", "--out", str(tmp_path)])


def test_cells_that_cannot_finish_in_the_budget_are_skipped_with_a_note(tiny, monkeypatch):
    """A candidate taking 50 ms per row: timed at 1 row, then predicted far past the
    budget at 60 rows and skipped there with the reason, while the others are timed."""
    real = harness.candidates_for

    def with_slow(spec, model, **kwargs):
        def build(threads):
            return Built(lambda X: (time.sleep(0.05 * len(X)), model.predict_proba(X))[1], 0.0)
        return real(spec, model, **kwargs) + [Candidate("slow", "peer", build)]

    monkeypatch.setattr(harness, "candidates_for", with_slow)
    start = time.monotonic()
    results = harness.run_benchmark(
        ["tiny_rf"], batches=(1, 60), threads=(1,), repeats=2, min_time_s=0.0, max_call_s=60.0,
        check_rows=1, peers=(), progress=False, backends=("torch",), routed_only=True,
        budget_s=4.0)
    assert time.monotonic() - start < 4.0 + 2.0
    cells = {(c["candidate"], c["batch"]): c for c in results["cells"]}
    assert cells[("slow", 1)]["status"] == "ok"
    assert cells[("slow", 60)]["status"] == "skipped"
    assert "budget" in cells[("slow", 60)]["reason"] and "predicted" in cells[("slow", 60)]["reason"]
    assert cells[("woodstar[auto/torch]", 60)]["status"] == "ok"
    assert results["meta"]["budget_s"] == 4.0 and results["meta"]["elapsed_s"] < 6.0


def test_a_spent_budget_skips_whole_models_with_the_reason(tiny):
    results = harness.run_benchmark(
        ["tiny_rf"], batches=(1,), threads=(1,), repeats=1, min_time_s=0.0, max_call_s=1.0,
        check_rows=10, peers=(), progress=False, budget_s=1e-9)
    assert "budget" in results["models"]["tiny_rf"]["skipped"] and not results["cells"]
