"""From a results JSON: a Markdown report (decision, method, tables, rejected
candidates), one PNG per model and a routing table, all written into one output
folder (``write_all``). Only the maintainer path (``woodstar bench --update-shipped``,
``benchmarks/cli.py``) points it at the shipped files: ``docs/benchmarks.md`` (with
the hand-written analysis of ``benchmarks/notes.md`` and the A/B sections),
``docs/img/`` and ``woodstar/lowering/routing_table.json``."""

import json
import math
from collections import defaultdict
from pathlib import Path

from woodstar.lowering._routing_evidence import MARGIN, routing_entries

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
TABLE = ROOT / "woodstar" / "lowering" / "routing_table.json"

__all__ = ["write_all", "routing_table", "backend_ranking", "winners", "merge", "MARGIN"]
NOTES = Path(__file__).resolve().parent / "notes.md"
SMALL_BATCHES = Path(__file__).resolve().parent / "results" / "small_batches.json"
LINEAR = Path(__file__).resolve().parent / "results" / "linear.json"
SPARK = Path(__file__).resolve().parent / "results" / "spark_udf.json"
# Per-strategy cells of the exporting backends (benchmarks/ab_exporting.py): their own
# routing entries, read instead of the torch program's by those backends.
EXPORTING_STRATEGIES = Path(__file__).resolve().parent / "results" / "exporting_strategies.json"
EXPORTING_BACKENDS = ("torch.jit", "torch.compile", "tvm")


def merge(runs):
    """Several runs as one results dict (the first run's method; batches and threads
    united; each run's own command and date kept under meta['runs']; where two runs
    measured the same cell, the later one in the list counts, and every cell says
    which run measured it: ``measured`` = its run's date, CPU and commit)."""
    if len(runs) == 1:
        return runs[0]
    out = {"meta": dict(runs[0]["meta"]), "models": {}, "cells": [], "builds": []}
    out["meta"]["batches"] = sorted({b for r in runs for b in r["meta"]["batches"]})
    out["meta"]["threads"] = sorted({t for r in runs for t in r["meta"]["threads"]})
    out["meta"]["runs"] = [{**{k: r["meta"][k] for k in ("date", "command", "git_commit", "batches",
                                                          "threads", "repeats")},
                            "cpu": r["meta"].get("cpu") or "unknown",
                            "logical_cpus": r["meta"].get("logical_cpus"),
                            "env": r["meta"].get("env") or {}} for r in runs]
    cells, builds = {}, {}
    for r in runs:  # a later run replaces an earlier one's measurement of the same cell
        out["models"].update(r["models"])
        where = {"date": r["meta"].get("date"), "cpu": r["meta"].get("cpu") or "unknown",
                 "git_commit": r["meta"].get("git_commit")}
        cells.update({(c["model"], c["threads"], c["batch"], c["candidate"]):
                      {**c, "measured": c.get("measured") or where} for c in r["cells"]})
        builds.update({(b["model"], b["threads"], b["candidate"]): b for b in r["builds"]})
    out["cells"], out["builds"] = list(cells.values()), list(builds.values())
    return out


def _ms(seconds):
    if seconds is None:
        return "–"
    ms = seconds * 1e3
    return f"{ms:.3g}" if ms < 100 else f"{ms:.0f}"


def _cells(results):
    """{(model, threads, batch): {candidate: cell}} for timed cells."""
    out = defaultdict(dict)
    for c in results["cells"]:
        if c["status"] == "ok":
            out[(c["model"], c["threads"], c["batch"])][c["candidate"]] = c
    return out


def winners(results, backend="torch"):
    """Per (model, threads, batch): woodstar strategies on ``backend`` ranked by median
    time (the router's own 'auto' choice excluded), fastest first."""
    out = {}
    for key, cands in _cells(results).items():
        ranked = sorted((c["median_s"], c["strategy"]) for c in cands.values()
                        if c["kind"] == "woodstar" and c["backend"] == backend
                        and c["strategy"] != "auto")
        if ranked:
            out[key] = ranked
    return out


def backend_ranking(results, device="cpu"):
    """For ``backend="auto"``: per (threads, batch), the backends ordered by the
    geometric mean, over the models measured on every backend there, of their routed
    route's time (``auto/<backend>``) over the fastest backend's; with the evidence
    and each backend's median conversion time (compiling backends pay it once)."""
    times = defaultdict(dict)
    for c in results["cells"]:
        if c["status"] == "ok" and c["kind"] == "woodstar" and c["strategy"] == "auto":
            times[(c["threads"], c["batch"])].setdefault(c["model"], {})[c["backend"]] = c["median_s"]
    compile_s = defaultdict(list)
    for b in results["builds"]:
        if b.get("status") == "ok" and b["candidate"].startswith("woodstar[auto/"):
            compile_s[b["candidate"][len("woodstar[auto/"):-1]].append(b.get("compile_s") or 0.0)
    entries = []
    for (t, batch), per_model in sorted(times.items()):
        compared = [set(v) for v in per_model.values() if len(v) >= 2]  # models timed on several
        backends = set.intersection(*compared) if compared else set()
        models = {m: v for m, v in per_model.items() if len(v) >= 2 and backends <= set(v)}
        if len(backends) < 2 or not models:
            continue
        score = {b: math.exp(sum(math.log(v[b] / min(v[x] for x in backends)) for v in models.values())
                             / len(models)) for b in backends}
        ranking = sorted(backends, key=lambda b: (score[b], b))
        entries.append({
            "device": device, "threads": t, "batch": batch, "ranking": ranking,
            "mean_ratio_to_fastest": {b: round(score[b], 3) for b in ranking},
            "evidence": [f"{m}: " + ", ".join(f"{b} {v[b] * 1e3:.3g} ms" for b in ranking)
                         for m, v in sorted(models.items())]})
    return {"entries": entries,
            "median_convert_s": {b: round(sorted(v)[len(v) // 2], 2) for b, v in sorted(compile_s.items())}}


def machine(results):
    """Where the results were measured: the CPU and its logical CPU count, from the
    runs' own records ("unknown" where a run did not record it; several CPUs are
    listed when merged runs came from different machines)."""
    runs = results["meta"].get("runs") or [results["meta"]]
    cpus = sorted({r.get("cpu") or "unknown" for r in runs})
    counts = sorted({r.get("logical_cpus") for r in runs if r.get("logical_cpus")})
    return {"cpu": cpus[0] if len(cpus) == 1 else " + ".join(cpus),
            "logical_cpus": counts[0] if len(counts) == 1 else (counts or None)}


def routing_table(results, backend="torch", device="cpu", exporting=False):
    """The routing table ``woodstar.lowering.routing`` reads: depth regions per
    (threads, batch), built by ``woodstar.lowering._routing_evidence`` (the same code
    as a calibrated table), plus the backend ranking for ``backend="auto"``; with
    ``exporting`` (the shipped table), the exporting backends' own entries too."""
    return {
        "version": 1,
        "about": ("Written by benchmarks/report.py from measured results; read by "
                  "woodstar/lowering/routing.py. For a model of max tree depth d, a call of "
                  "n rows and t threads: the entry with the nearest thread count and the "
                  "nearest batch (log scale), then the first region with depth_le >= d "
                  "(depth_le null: no upper bound). In a region the strategy is within "
                  f"{MARGIN:.0%} of the fastest at every measured point ('unanimous' false: "
                  "two models of the same depth disagreed). 'ranking' orders fallbacks when "
                  "a strategy refuses the model (memory). Backend is a key so that "
                  "backend='auto' can be routed from the same table."),
        "margin": MARGIN,
        "kind": "shipped",
        "machine": machine(results),
        "made": max(r["date"] for r in results["meta"].get("runs") or [results["meta"]]),
        "source": {"date": results["meta"]["date"], "cpu": results["meta"]["cpu"],
                   "git_commit": results["meta"].get("git_commit"),
                   "repeats": results["meta"]["repeats"]},
        "entries": routing_entries(results, backend, device)
        + (exporting_entries(device) if exporting else []),
        "backends": backend_ranking(results, device),
    }


def exporting_entries(device="cpu", path=EXPORTING_STRATEGIES):
    """The exporting backends' own routing entries, from their per-strategy cells."""
    if device != "cpu" or not Path(path).exists():
        return []
    from benchmarks.ab_exporting import routing_entries_for

    return [e for b in EXPORTING_BACKENDS for e in routing_entries_for(b, path)]


def _plot(results, model, threads, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = defaultdict(list)
    for c in results["cells"]:
        if c["status"] == "ok" and c["model"] == model and c["threads"] == threads:
            series[c["candidate"]].append((c["batch"], c["median_s"] / c["batch"]))
    if not series:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for name, pts in sorted(series.items()):
        pts.sort()
        style = "-" if name.startswith("woodstar") else "--"
        ax.plot([p[0] for p in pts], [p[1] * 1e6 for p in pts], style, marker="o", ms=3,
                label=name)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("batch size (rows)")
    ax.set_ylabel("time per row (µs), end to end")
    ax.set_title(f"{model}, {threads} thread(s)")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return True


def _small_batches_section(img_dir, path=SMALL_BATCHES):
    """Markdown (and a plot) from benchmarks/ab_small_batches.py's results, if any."""
    if not path.exists():
        return [], {}
    data = json.loads(path.read_text())
    rows = data["results"]
    lines = ["## CPU routes (compiled walk, ONNX-ML tree kernel, NumPy walk)", "",
             f"`benchmarks/ab_small_batches.py` ({data['date']}, {data['cpu']}, torch "
             f"{data['torch']}, NumPy {data['numpy']}, "
             f"{'/'.join(str(n) for n in sorted({r.get('repeats', 0) for r in rows}, reverse=True))} "
             "interleaved repeats (fewer for the largest batches), "
             "one call per timing, so caches are as cold as between real requests; median ms). "
             "`c-walk` (the compiled walk, `woodstar/runtimes/c_walk.c`), `onnx-ml` (the IR "
             "as one ONNX-ML TreeEnsemble node, ONNX Runtime, 1 thread), "
             "`numpy-walk` and `torch` are the same converted model on the torch backend with "
             "its CPU route forced (`c-walk` is the container's own choice); `onnxruntime` is "
             "the peer (skl2onnx / onnxmltools, float32). The limits the container uses are in "
             "`woodstar/lowering/routing.py`.", ""]
    routes = [k for k in ("c-walk", "onnx-ml", "numpy-walk", "torch")
              if any(k in r["median_ms"] for r in rows)]
    lines += ["| model | threads | rows | " + " | ".join(routes) + " | native | onnxruntime |",
              "|---|---|---|" + "---|" * (len(routes) + 2)]
    for r in rows:
        t = r["median_ms"]
        native = next((v for k, v in t.items() if k.startswith("native")), None)
        fastest = min(t.values())
        cells = [(f"**{t[k]:.3f}**" if t[k] == fastest else f"{t[k]:.3f}") if k in t else "–"
                 for k in routes]
        cells += [("–" if v is None else (f"**{v:.3f}**" if v == fastest else f"{v:.3f}"))
                  for v in (native, t.get("onnxruntime"))]
        lines.append(f"| {r['model']} | {r['threads']} | {r['rows']} | " + " | ".join(cells) + " |")
    lines.append("")
    plot = None
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return lines, {}
    fig, ax = plt.subplots(figsize=(7, 4.2))
    for model in sorted({r["model"] for r in rows}):
        pts = sorted((r["rows"], r["median_ms"]) for r in rows if r["model"] == model and r["threads"] == 1)
        color = None
        for route, style, marker in (("c-walk", "-", "o"), ("torch", "--", "x"),
                                     ("onnxruntime", ":", "s")):
            xy = [(p[0], p[1][route]) for p in pts if route in p[1]]
            if xy:
                line, = ax.plot([x for x, _ in xy], [y for _, y in xy], style, marker=marker, ms=3,
                                color=color, label=f"{model} {route}")
                color = line.get_color()
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("rows per call")
    ax.set_ylabel("ms per call, end to end")
    ax.set_title("1 thread: compiled walk (solid), Torch program (dashed), ONNX Runtime peer (dotted)",
                 fontsize=9)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=6, loc="best")
    fig.tight_layout()
    img_dir.mkdir(parents=True, exist_ok=True)
    fig.savefig(img_dir / "small_batches_t1.png", dpi=90)
    plt.close(fig)
    plot = "small_batches_t1.png"
    lines += [f"![small batches, 1 thread](img/{plot})", ""]
    return lines, {"small": plot}


def _linear_section(path=LINEAR):
    """Markdown from benchmarks/ab_linear.py's results (models without trees), if any."""
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    rows = data["results"]
    keys = []
    for r in rows:
        keys += [k for k in r["median_ms"] if k not in keys]
    lines = ["## Linear models and pipelines (NumPy route, Torch program, exported backends)", "",
             f"`benchmarks/ab_linear.py` ({data['date']}, {data['cpu']}, torch {data['torch']}, "
             f"NumPy {data['numpy']}; interleaved in a shuffled order, one call per timing; "
             "median ms). `numpy-route` is the torch backend's default on CPU (scikit-learn's own "
             "NumPy expressions), `torch-program` the same container with `small_batch_rows=0`, "
             "`torchscript` and `onnx` the whole pipeline exported; the peers are the native "
             "pipeline and ONNX Runtime through skl2onnx (float32).", "",
             "| model | threads | rows | " + " | ".join(keys) + " |",
             "|---|---|---|" + "---|" * len(keys)]
    for r in rows:
        t = r["median_ms"]
        fastest = min(t.values())
        cells = [("–" if k not in t else f"**{t[k]:.4f}**" if t[k] == fastest else f"{t[k]:.4f}")
                 for k in keys]
        lines.append(f"| {r['model']} | {r['threads']} | {r['rows']} | " + " | ".join(cells) + " |")
    return lines + [""]


def _spark_section(path=SPARK):
    """Markdown from benchmarks/spark_udf.py's results (scoring on Spark), if any."""
    if not path.exists():
        return []
    r = json.loads(path.read_text())
    return ["## Scoring on Spark", "",
            f"`benchmarks/spark_udf.py` ({r['date']}, {r['machine']}, Spark {r['spark']} "
            f"`{r['master']}`, {r['partitions']} partitions; `{r['command']}`). A "
            f"RandomForestClassifier of {r['trees']} trees of depth {r['depth']} scores "
            f"{r['rows']:,} cached rows of 10 features, `predict_proba` as an array column into "
            f"Spark's `noop` sink: woodstar's `predict_udf` against the same scikit-learn model "
            f"(`n_jobs=1`) in a hand-written pandas UDF; best of {r['repeat']} warm runs. "
            f"Fixed cost per task: a job of 8 one-row partitions divided by the tasks each "
            f"slot ran, the first time (each Python worker imports the library and loads the "
            f"model) and warm. The machine was shared with other jobs and noisy: read the "
            f"figures as orders of magnitude.", "",
            "| | woodstar UDF | native pandas UDF |", "|---|---|---|",
            f"| seconds for {r['rows']:,} rows | {r['woodstar_seconds']} | {r['native_seconds']} |",
            f"| rows/s | {r['woodstar_rows_per_s']:,} | {r['native_rows_per_s']:,} |",
            f"| fixed cost per task, first (ms) | {r['woodstar_task_first_ms']} | "
            f"{r['native_task_first_ms']} |",
            f"| fixed cost per task, warm (ms) | {r['woodstar_task_warm_ms']} | "
            f"{r['native_task_warm_ms']} |", ""]


def _families_section(path=None):
    """Markdown from benchmarks/families.py's results (one model per family), if any."""
    path = path or ROOT / "benchmarks" / "results" / "families.json"
    if not path.exists():
        return []
    data = json.loads(path.read_text())
    meta = data["meta"]
    lines = ["## Model families", "",
             f"`OMP_WAIT_POLICY=passive python -m benchmarks.families --out "
             f"benchmarks/results/families.json` ({meta['date']}, {meta['machine']}, "
             f"{meta['threads']} thread, woodstar {meta['woodstar']}). One representative model "
             f"per family, the public path (NumPy in, NumPy out) on woodstar's default route, "
             f"against the estimator itself and ONNX Runtime (skl2onnx, float32 input); best "
             f"per-call time of interleaved rounds, ms. Answers are checked first: the largest "
             f"absolute difference from the estimator is given per engine.", "",
             "| model (method) | route | rows | woodstar | native | ONNX Runtime | "
             "max diff woodstar | max diff ORT |", "|---|---|---|---|---|---|---|---|"]
    for row in data["results"]:
        for batch, cell in row["cells"].items():
            ort = cell.get("ms_onnxruntime")
            ort_text = f"{ort:.3f}" if ort is not None else f"— ({row['ort']})"
            diff_ort = cell.get("max_abs_diff_ort")
            lines.append(
                f"| {row['model']} ({row['method']}) | {row['route']} | {batch} | "
                f"{cell['ms_woodstar']:.3f} | {cell['ms_native']:.3f} | {ort_text} | "
                f"{cell['max_abs_diff_woodstar']:.1e} | "
                f"{'—' if diff_ort is None else f'{diff_ort:.1e}'} |")
    return lines + [""]


def _command(argv_text):
    """A recorded command line as the module invocation that reproduces it."""
    args = argv_text.split()[1:]
    if args and args[0] == "bench":
        return "python -m woodstar.cli " + " ".join(args)
    return "python -m benchmarks " + " ".join(args)


def _rel(path):
    path = Path(path).resolve()
    return path.relative_to(ROOT) if path.is_relative_to(ROOT) else path


def _fmt_ratio(x):
    return f"{x:.2f}×" if x < 10 else f"{x:.0f}×"


def markdown(results, table, plots, results_path, shipped=False, img_dir=None):
    """The report's text. ``shipped``: the maintainer's ``docs/benchmarks.md``, with
    the hand-written analysis (``benchmarks/notes.md``) and the A/B sections; else a
    report of this run alone, for the folder it was written to."""
    meta = results["meta"]
    cells = _cells(results)
    paths = results_path if isinstance(results_path, (list, tuple)) else [results_path]
    shown = ", ".join(f"`{_rel(p)}`" for p in paths)
    if shipped:
        lines = ["# Benchmarks", "",
                 f"Generated by `benchmarks/report.py` from {shown}; do not edit by hand "
                 "(the analysis comes from `benchmarks/notes.md`).", ""]
        if NOTES.exists():
            lines += [NOTES.read_text().strip(), ""]
        table_name = "`woodstar/lowering/routing_table.json`"
    else:
        lines = ["# Benchmarks (this machine)", "",
                 f"Generated by `woodstar bench` from {shown}. The report behind woodstar's "
                 "shipped routing table is `docs/benchmarks.md` in the source repository; this "
                 "one describes this run only.", ""]
        table_name = ("`routing_table.json` in this folder (what this run's evidence gives; "
                      "convert does not read it: `woodstar calibrate` writes the table it reads)")
    # ---------------------------------------------------------------- decision
    lines += ["## Decision", "",
              f"Routing table ({table_name}, CPU): for each backend, thread count and "
              "batch size, the fastest strategy by the deepest tree of the model. A boundary "
              "sits between two measured depths; past the deepest measured model the last "
              "region is an extrapolation. The torch rows are the eager program's evidence "
              "above; torch.jit, torch.compile and tvm have their own, from "
              "`benchmarks/ab_exporting.py` (`results/exporting_strategies.json`), where a "
              "large call runs in cache-sized parts of about 1 000-3 000 rows.", "",
              "| backend | threads | batch | regions (max depth → strategy; evidence) |",
              "|---|---|---|---|"]
    for e in table["entries"]:
        parts = []
        for r in e["regions"]:
            bound = f"≤{r['depth_le']}" if r["depth_le"] is not None else f"≥{r['depth_min']}"
            flag = "" if r["unanimous"] else " (not tied at every point)"
            parts.append(f"{bound} → **{r['strategy']}**{flag} ({', '.join(r['evidence'])})")
        lines.append(f"| {e['backend']} | {e['threads']} | {e['batch']} | {'; '.join(parts)} |")
    ranking = table.get("backends", {})
    if ranking.get("entries"):
        lines += ["", "`backend=\"auto\"` reads this ranking (routed route per backend, geometric "
                  "mean of time / fastest backend over the models measured on all of them; the "
                  "entry nearest the call's threads at 10k rows, first installed backend wins). "
                  "Median conversion seconds: " + ", ".join(
                      f"{b} {v}" for b, v in ranking.get("median_convert_s", {}).items()) + ".", "",
                  "| threads | batch | ranking (mean ratio to fastest) | evidence |", "|---|---|---|---|"]
        for e in ranking["entries"]:
            order = ", ".join(f"{b} ({e['mean_ratio_to_fastest'][b]:.2f})" for b in e["ranking"])
            lines.append(f"| {e['threads']} | {e['batch']} | {order} | {'; '.join(e['evidence'])} |")
    lines += ["", "Woodstar against the fastest peer, per model (best woodstar route / best "
              "peer, median time; below 1 means woodstar is faster):", ""]
    batches = meta["batches"]
    lines += ["| model | threads | " + " | ".join(str(b) for b in batches) + " |",
              "|---|---|" + "---|" * len(batches)]
    for model in results["models"]:
        for t in meta["threads"]:
            row = []
            for b in batches:
                cands = cells.get((model, t, b), {})
                ws = [c["median_s"] for c in cands.values() if c["kind"] == "woodstar"]
                peers = [(c["median_s"], n) for n, c in cands.items() if c["kind"] == "peer"]
                if ws and peers:
                    best_peer = min(peers)
                    row.append(f"{_fmt_ratio(min(ws) / best_peer[0])} vs {best_peer[1]}")
                else:
                    row.append("n/a" if not ws else "–")
            if any(r != "n/a" for r in row) or True:
                lines.append(f"| {model} | {t} | " + " | ".join(row) + " |")
    # ---------------------------------------------------------------- routing check
    checks = []
    for (m, t, b), cands in sorted(cells.items()):
        auto = next((c for c in cands.values() if c["kind"] == "woodstar"
                     and c["strategy"] == "auto" and c["backend"] == "torch"), None)
        rest = [(c["median_s"], c["strategy"]) for c in cands.values() if c["kind"] == "woodstar"
                and c["strategy"] != "auto" and c["backend"] == "torch"]
        if auto and rest:
            best = min(rest)
            checks.append(f"| {m} | {t} | {b} | {auto.get('detail') or '?'} | {best[1]} | "
                          f"{_fmt_ratio(auto['median_s'] / best[0])} |")
    if checks:
        lines += ["", "Routing check: the router's own choice (`auto`) against the fastest explicit "
                  "strategy in the same cell (ratio of median times; `auto` shows the container's "
                  "routes, `<=N:strategy` for calls of at most N rows, or its large-batch "
                  "program in runs older than that record). "
                  "Cells measured before the routing table existed used the old depth rule; "
                  "see each run's date under Method.", "",
                  "| model | threads | batch | auto (routes) | fastest explicit | auto / fastest |",
                  "|---|---|---|---|---|---|", *checks]
    if shipped:
        lines += ["", *_small_batches_section(img_dir)[0]]
        lines += _linear_section()
        lines += _spark_section()
        lines += _families_section()
    # ---------------------------------------------------------------- method
    v = meta["versions"]
    lines += ["", "## Method", "",
              f"- Date: {meta['date']}; git commit `{meta.get('git_commit')}`",
              f"- CPU: {meta['cpu']} ({meta['logical_cpus']} logical CPUs)",
              "- Versions: " + ", ".join(f"{k} {val}" for k, val in v.items() if val),
              f"- Threads: {meta['threads']} (a dimension of every cell: torch intra-op "
              "threads for woodstar, `n_jobs`/`num_threads`/`intra_op_num_threads`/`nthread` "
              "for the peers)",
              f"- Batch sizes: {batches}; repeats per cell: {meta['repeats']}; each repeat "
              f"times enough calls to last ≥ {meta['min_time_s'] * 1e3:.0f} ms; candidate order "
              "shuffled per repeat (interleaved); warm-up calls untimed; median and MAD reported.",
              "- End to end: float32 NumPy in, `predict_proba` NumPy out; conversion time "
              "reported separately (build table).",
              f"- Correctness gate: every candidate's probabilities are compared with the native "
              f"library's on {''}fresh rows before timing; above {meta['atol']:g} max abs "
              "difference it is marked wrong and never timed.",
              "- Memory: peak resident-set growth during one call (psutil, sampled every 0.5 ms), "
              "batches ≥ 1000.",
              f"- A candidate whose single call exceeds {meta['max_call_s']} s is not timed at larger "
              "batches (recorded as skipped).",
              f"- Environment: {meta.get('env') or '{}'}"]
    for r in meta.get("runs", []):
        lines.append(f"- Run {r['date']} (commit `{r['git_commit']}`): batches {r['batches']}, "
                     f"threads {r['threads']}, repeats {r['repeats']}: `{r['command']}`")
    lines.append("")
    runs = meta.get("runs") or [meta]
    lines += ["## Reproduce", "", "From the repository root (cached models are trained on first use):",
              "", "```", "# the runs behind this report, as recorded (runs before the output "
              "folder existed named their results file with --out)" if shipped
              else "# the run behind this report"]
    for r in runs:  # the pools' wait policy is part of how a run was made
        policy = (r.get("env") or {}).get("OMP_WAIT_POLICY")
        prefix = f"OMP_WAIT_POLICY={policy} " if policy else ""
        lines.append(f"{prefix}PYTHONPATH=. {_command(r['command'])}")
    if not shipped:
        lines += ["# this report, its plots and routing_table.json again, from the results",
                  "woodstar bench --report-only --out DIR " + " ".join(
                      f"--merge {_rel(p)}" for p in paths), "```", ""]
    else:
        lines += [
            "# this report, its plots and the routing table, from the results listed in "
            "benchmarks/results/shipped.json",
            "PYTHONPATH=. python -m woodstar.cli bench --report-only --update-shipped",
            "# maintainers: measure cells again and merge them into the shipped evidence (a new",
            "# results file is added to shipped.json; cells it does not measure are kept)",
            "OMP_WAIT_POLICY=passive PYTHONPATH=. python -m woodstar.cli bench --models rf_100x8 "
            "--batches 1,100 --update-shipped --name rf_rerun",
            "# the complete grid (batches 1..100k, threads 1 and 2, all peers, routing sweep; "
            "hours), into ./woodstar-bench",
            "PYTHONPATH=. python -m woodstar.cli bench --routing-sweep --report",
            "# a quick run within a time budget (300 s by default), into ./woodstar-bench",
            "PYTHONPATH=. python -m woodstar.cli bench --quick --report",
            "# this machine's own routing table, in the user's cache (see Calibration)",
            "PYTHONPATH=. python -m woodstar.cli calibrate",
            "# the tiny-batch A/B behind perf_tree_trav's all-nodes path",
            "PYTHONPATH=. python -m benchmarks.ab_tiny_batches rf_100x8 sweep_rf_d4",
            "# the CPU-route A/B (compiled walk, ONNX-ML, NumPy walk, Torch; about 40 minutes)",
            "PYTHONPATH=. python -m benchmarks.ab_small_batches --repeats 15 "
            "--rows 1,2,4,8,16,32,64,128,256",
            "PYTHONPATH=. python -m benchmarks.ab_small_batches --repeats 6 "
            "--rows 1024,4096,16384 --skip numpy-walk",
            "# the linear-model A/B (NumPy route, Torch program, TorchScript, ONNX; minutes)",
            "PYTHONPATH=. python -m benchmarks.ab_linear",
            "```", ""]
    # ---------------------------------------------------------------- per model
    lines += ["## Results per model", "",
              "Median milliseconds per call (± MAD); bold: fastest in the cell.", ""]
    builds = defaultdict(list)
    for b in results["builds"]:
        builds[b["model"]].append(b)
    for model, info in results["models"].items():
        lines += [f"### {model}: {info['description']}", ""]
        if info.get("skipped"):
            lines += [f"Skipped: {info['skipped']}", ""]
            continue
        if info.get("woodstar_ir") and info.get("trees") is False:
            lines += [f"IR: {info['estimator']}, {info['n_steps']} column-wise step(s), "
                      f"{info['ir_features']} features; no trees (no tree strategies).", ""]
        elif info.get("woodstar_ir"):
            lines += [f"IR: {info['n_trees']} trees, max depth {info['max_depth']} "
                      f"(mean {info['mean_depth']:.1f}), {info['n_nodes']} nodes, "
                      f"{info['ir_features']} features.", ""]
        else:
            lines += [f"Woodstar: not supported ({info.get('woodstar_reason', '')[:200]}).", ""]
        for t in meta["threads"]:
            names = sorted({n for (m, tt, _), cs in cells.items() if m == model and tt == t
                            for n in cs}, key=lambda n: (not n.startswith("native"), n))
            if not names:
                continue
            lines += [f"{t} thread(s):", "", "| candidate | " + " | ".join(map(str, batches)) + " |",
                      "|---|" + "---|" * len(batches)]
            for n in names:
                row = []
                for b in batches:
                    cs = cells.get((model, t, b), {})
                    c = cs.get(n)
                    if c is None:
                        row.append("–")
                        continue
                    text = f"{_ms(c['median_s'])} ±{_ms(c['mad_s'])}"
                    if c["median_s"] == min(x["median_s"] for x in cs.values()):
                        text = f"**{text}**"
                    row.append(text)
                lines.append(f"| {n} | " + " | ".join(row) + " |")
            lines.append("")
            if (model, t) in plots:
                lines += [f"![{model}, {t} thread(s)](img/{plots[(model, t)]})", ""]
        lines += ["Builds (conversion/compile time, answer check, peak memory at the largest batch):",
                  "", "| candidate | threads | status | compile s | max abs diff | note |",
                  "|---|---|---|---|---|---|"]
        for b in builds[model]:
            note = (b.get("reason") or b.get("detail") or "")[:160].replace("|", "/").replace("\n", " ")
            diff = b.get("max_abs_diff")
            lines.append(f"| {b['candidate']} | {b['threads']} | {b['status']} | "
                         f"{b.get('compile_s', 0) or 0:.3f} | "
                         f"{'–' if diff is None else f'{diff:.1e}'} | {note} |")
        peaks = [(c["candidate"], c["threads"], c["peak_rss_bytes"]) for c in results["cells"]
                 if c["model"] == model and c["status"] == "ok" and c["batch"] == max(batches)
                 and c.get("peak_rss_bytes") is not None]
        if peaks:
            lines += ["", f"Peak memory growth at batch {max(batches)}: " + ", ".join(
                f"{n} (t{t}) {p / 2**20:.0f} MiB" for n, t, p in peaks)]
        skipped = [c for c in results["cells"] if c["model"] == model and c["status"] == "skipped"]
        if skipped:
            seen = set()
            lines += ["", "Not timed:"]
            for c in skipped:
                if (c["candidate"], c["threads"]) not in seen:
                    seen.add((c["candidate"], c["threads"]))
                    lines.append(f"- {c['candidate']} (t{c['threads']}) from batch {c['batch']}: "
                                 f"{c['reason'][:200]}")
        lines.append("")
    # ---------------------------------------------------------------- rejected
    lines += ["## Rejected candidates", "",
              "Each woodstar strategy, where it is not the fastest woodstar route (torch backend): "
              "the cells it loses and by how much (its time / the winner's).", ""]
    ranked = winners(results)
    losses = defaultdict(list)
    for (m, t, b), order in sorted(ranked.items()):
        best = order[0][0]
        for time_s, s in order[1:]:
            losses[s].append((m, t, b, time_s / best, order[0][1]))
    for s in sorted(losses):
        big = [x for x in losses[s] if x[3] >= 1.1]
        lines.append(f"- **{s}** loses {len(big)} of {len(losses[s]) + sum(1 for o in ranked.values() if o[0][1] == s)} "
                     "cells by ≥10%: " + "; ".join(
                         f"{m} t{t} b{b} {_fmt_ratio(r)} (to {w})" for m, t, b, r, w in big[:40])
                     + (" …" if len(big) > 40 else ""))
    lines.append("")
    return "\n".join(lines)


def write_all(results, results_path, out_dir, table_path=None, shipped=False):
    """Write ``benchmarks.md``, its plots (``img/``) and the routing table into
    ``out_dir`` (the table at ``table_path`` when given); return the paths written.
    ``shipped``: the maintainer's report (see ``markdown``); ``benchmarks/cli.py``
    passes docs/ and the package's table only for ``--update-shipped``."""
    out_dir = Path(out_dir)
    img = out_dir / "img"
    img.mkdir(parents=True, exist_ok=True)
    plots = {}
    for model in results["models"]:
        for t in results["meta"]["threads"]:
            name = f"bench_{model}_t{t}.png"
            try:
                if _plot(results, model, t, img / name):
                    plots[(model, t)] = name
            except ImportError:
                break
    table = routing_table(results, exporting=shipped)
    if not shipped:
        table["kind"] = "bench"
    table_path = Path(table_path) if table_path is not None else out_dir / "routing_table.json"
    table_path.write_text(json.dumps(table, indent=1) + "\n")
    md = out_dir / "benchmarks.md"
    md.write_text(markdown(results, table, plots, results_path, shipped=shipped, img_dir=img))
    written = [md, table_path] + [img / p for p in plots.values()]
    if shipped and (img / "small_batches_t1.png").exists():
        written.append(img / "small_batches_t1.png")
    return written
