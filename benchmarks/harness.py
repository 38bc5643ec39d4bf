"""The measurement loop: per model and thread count, build every candidate, check its
answers against the native library, then time all of them batch size by batch size,
interleaved, in a shuffled order per repeat. Median and MAD per cell; JSON out."""

import datetime
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

from woodstar._budget import Budget
from .candidates import NotAvailable, as_proba, candidates_for
from .models import MODEL_SPECS, load_model, test_rows

__all__ = ["run_benchmark", "FULL", "QUICK", "SMOKE"]

FULL = dict(batches=(1, 10, 100, 1_000, 10_000, 100_000), threads=(1, 2), repeats=5,
            min_time_s=0.05, max_call_s=3.0, check_rows=2_000)
QUICK = dict(batches=(1, 100, 10_000), threads=(1, 2), repeats=3, min_time_s=0.01,
             max_call_s=2.0, check_rows=1_000)
SMOKE = dict(batches=(1, 50), threads=(1,), repeats=2, min_time_s=0.0, max_call_s=1.0,
             check_rows=50)
QUICK_BUDGET_S = 300  # --quick: five minutes of measuring (models not yet cached train within it)
SMOKE_BUDGET_S = 120
ATOL = 1e-5  # float32 peers sum in float32; woodstar itself is held to 1e-6 by its tests


def _median_mad(values):
    med = statistics.median(values)
    return med, statistics.median([abs(v - med) for v in values])


def _peak_rss_delta(fn, X):
    """Peak resident memory above the level before the call, sampled every 0.5 ms
    (None when psutil is missing). Torch and the peers release the GIL while working."""
    try:
        import psutil
    except ImportError:
        return None
    proc = psutil.Process()
    base = proc.memory_info().rss
    peak = [base]
    done = threading.Event()

    def sample():
        while not done.is_set():
            peak[0] = max(peak[0], proc.memory_info().rss)
            time.sleep(0.0005)

    thread = threading.Thread(target=sample, daemon=True)
    thread.start()
    try:
        fn(X)
    finally:
        done.set()
        thread.join()
    peak[0] = max(peak[0], proc.memory_info().rss)
    return int(peak[0] - base)


def _versions():
    out = {"python": platform.python_version()}
    for name in ("woodstar", "torch", "numpy", "sklearn", "lightgbm", "xgboost", "onnxruntime",
                 "skl2onnx", "onnxmltools", "treelite", "tl2cgen", "lleaves"):
        try:
            module = __import__(name)
            out[name] = getattr(module, "__version__", "?")
        except Exception:
            out[name] = None
    return out


def _cpu():
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _git_commit():
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True,
                              text=True, cwd=Path(__file__).parent, check=True).stdout.strip()
    except Exception:
        return None


def run_benchmark(models, batches, threads, repeats, min_time_s, max_call_s, check_rows,
                  peers=None, woodstar_only_models=(), out_path=None, progress=True,
                  seed=0, log=print, backends=None, routed_only=False, budget_s=None):
    """Measure every candidate on every (model, threads, batch) cell; return the results
    dict (and write it to ``out_path`` as JSON). ``budget_s``: start no build or cell
    whose predicted time exceeds what is left of it (skipped cells record why)."""
    import torch

    if max(threads) > 1 and os.environ.get("OMP_WAIT_POLICY", "").lower() != "passive":
        log("note: OMP_WAIT_POLICY is not 'passive': OpenMP pools (torch, XGBoost, LightGBM) "
            "spin after each call and slow the next interleaved candidate at 2+ threads; "
            "the report's runs set it (docs/benchmarks.md, Reproduce)")
    rng = random.Random(seed)
    results = {
        "meta": {
            "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "cpu": _cpu(), "logical_cpus": os.cpu_count(), "versions": _versions(),
            "git_commit": _git_commit(), "command": " ".join(sys.argv),
            "batches": list(batches), "threads": list(threads), "repeats": repeats,
            "backends": None if backends is None else list(backends), "routed_only": routed_only,
            "min_time_s": min_time_s, "max_call_s": max_call_s, "atol": ATOL,
            "budget_s": budget_s,
            "env": {k: os.environ[k] for k in ("OPENBLAS_CORETYPE", "OMP_NUM_THREADS",
                                               "OMP_WAIT_POLICY") if k in os.environ},
        },
        "models": {}, "cells": [], "builds": [],
    }
    budget = Budget(budget_s, len(models) * len(threads) * len(batches), progress)
    say = budget.write if progress else (lambda *a: None)
    previous_threads = torch.get_num_threads()
    try:
        for model_name in models:
            spec = MODEL_SPECS[model_name]
            if not budget.fits(0.0) or (budget_s is not None and budget.left() < 0.05 * budget_s):
                reason = budget.skip_reason(f"{model_name}")
                say(f"{model_name}: skipped ({reason})")
                results["models"][model_name] = {"description": spec.description,
                                                 "skipped": reason}
                budget.tick(f"{model_name} skipped", len(threads) * len(batches))
                continue
            try:
                budget.tick(f"{model_name}: loading")
                model = load_model(spec, progress=say)
            except ImportError as error:
                say(f"{model_name}: skipped ({error})")
                results["models"][model_name] = {"description": spec.description,
                                                 "skipped": str(error)}
                budget.tick(f"{model_name} skipped", len(threads) * len(batches))
                continue
            X_all = test_rows(spec, max(max(batches), check_rows))
            X_check = X_all[:check_rows]
            reference = as_proba(model.predict_proba(X_check), spec.n_classes)
            info = {"description": spec.description, "library": spec.library,
                    "n_features": spec.n_features, "n_classes": spec.n_classes}
            info.update(_shape_of(model))
            results["models"][model_name] = info
            woodstar_only = model_name in woodstar_only_models
            for n_threads in threads:
                torch.set_num_threads(n_threads)
                built = []
                for cand in candidates_for(spec, model, peers=peers or (),
                                           woodstar_only=woodstar_only, backends=backends,
                                           routed_only=routed_only):
                    record = {"model": model_name, "threads": n_threads, "candidate": cand.name,
                              "kind": cand.kind, "strategy": cand.strategy,
                              "backend": cand.backend}
                    budget.tick(f"{model_name} t{n_threads}: building {cand.name}")
                    if not budget.fits(0.0):
                        record.update(status="skipped", reason=budget.skip_reason("build"))
                        results["builds"].append(record)
                        continue
                    try:
                        b = cand.build(n_threads)
                        got = as_proba(b.fn(X_check), spec.n_classes)
                        diff = float(np.max(np.abs(got - reference))) if got.shape == reference.shape \
                            else float("inf")
                        record.update(compile_s=b.compile_s, detail=b.detail, max_abs_diff=diff)
                        if diff <= ATOL:
                            record["status"] = "ok"
                            built.append((cand, b))
                        else:
                            record["status"] = "wrong"
                            say(f"{model_name} {cand.name}: WRONG, max |diff| {diff:.3g}")
                    except NotAvailable as why:
                        record.update(status="unavailable", reason=str(why))
                    except Exception as error:  # a crash is a result, not the end of the run
                        record.update(status="error", reason=f"{type(error).__name__}: {error}")
                    results["builds"].append(record)
                dropped, previous = {}, {}
                for batch in batches:
                    X = X_all[:batch]
                    active = []
                    budget.tick(f"{model_name} t{n_threads} b{batch}")
                    for cand, b in built:
                        last = previous.get(cand.name)
                        if cand.name not in dropped and budget_s is not None and last is not None:
                            # warm-up, check call and every repeat's calls (each >= min_time_s)
                            predicted = last[1] * batch / last[0]
                            cost = 2 * predicted + repeats * max(min_time_s, predicted)
                            if not budget.fits(cost):
                                results["cells"].append(_skip(
                                    model_name, n_threads, batch, cand,
                                    budget.skip_reason(f"batch {batch}", cost)))
                                continue
                        if not budget.fits(0.0):
                            results["cells"].append(_skip(model_name, n_threads, batch, cand,
                                                          budget.skip_reason(f"batch {batch}")))
                            continue
                        if cand.name not in dropped and last is not None \
                                and last[1] * batch / last[0] > 4 * max_call_s:
                            dropped[cand.name] = (
                                f"{last[1]:.2f} s at batch {last[0]} predicts "
                                f"{last[1] * batch / last[0]:.0f} s at batch {batch}: not timed")
                        if cand.name in dropped:
                            results["cells"].append(_skip(model_name, n_threads, batch, cand,
                                                          dropped[cand.name]))
                            continue
                        try:
                            start = time.perf_counter()
                            b.fn(X)  # warm-up, untimed
                            first = time.perf_counter() - start
                            b.fn(X)
                        except Exception as error:
                            dropped[cand.name] = f"failed: {type(error).__name__}: {error}"
                            results["cells"].append(_skip(model_name, n_threads, batch, cand,
                                                          dropped[cand.name]))
                            continue
                        if first > max_call_s:
                            dropped[cand.name] = (f"one call took {first:.1f} s at batch {batch} "
                                                  f"(> {max_call_s} s): not timed at larger batches")
                        inner = max(1, int(np.ceil(min_time_s / max(first, 1e-6))))
                        active.append([cand, b, min(inner, 1000), [], first])
                    while budget_s is not None and active:
                        # each repeat runs `inner` calls of every candidate; drop the
                        # costliest candidate until the repeats fit in what is left
                        costs = [repeats * e[2] * e[4] for e in active]
                        if budget.fits(sum(costs)):
                            break
                        worst = costs.index(max(costs))
                        cand = active.pop(worst)[0]
                        dropped.setdefault(cand.name, budget.skip_reason(
                            f"batch {batch} and larger", max(costs)))
                        results["cells"].append(_skip(model_name, n_threads, batch, cand,
                                                      dropped[cand.name]))
                    for _ in range(repeats):
                        rng.shuffle(active)
                        for entry in active:
                            cand, b, inner, times, _ = entry
                            start = time.perf_counter()
                            for _ in range(inner):
                                b.fn(X)
                            times.append((time.perf_counter() - start) / inner)
                    for cand, b, inner, times, _ in active:
                        med, mad = _median_mad(times)
                        previous[cand.name] = (batch, med)
                        peak = _peak_rss_delta(b.fn, X) if batch >= 1_000 else None
                        results["cells"].append({
                            "model": model_name, "threads": n_threads, "batch": batch,
                            "candidate": cand.name, "kind": cand.kind, "strategy": cand.strategy,
                            "backend": cand.backend, "status": "ok", "median_s": med,
                            "mad_s": mad, "inner": inner, "times_s": times,
                            "peak_rss_bytes": peak, "detail": b.detail})
                    budget.tick(f"{model_name} t{n_threads} b{batch}", 1)
            if out_path is not None:  # after each model: a stopped run keeps what it measured
                _write(results, out_path)
    finally:
        torch.set_num_threads(previous_threads)
        budget.close()
    results["meta"]["elapsed_s"] = round(budget.elapsed(), 1)
    if out_path is not None:
        _write(results, out_path)
    return results


def _write(results, out_path):
    Path(out_path).parent.mkdir(parents=True, exist_ok=True)
    Path(out_path).write_text(json.dumps(results, indent=1))


def _skip(model_name, n_threads, batch, cand, reason):
    return {"model": model_name, "threads": n_threads, "batch": batch, "candidate": cand.name,
            "kind": cand.kind, "strategy": cand.strategy, "backend": cand.backend,
            "status": "skipped", "reason": reason}


def _shape_of(model):
    """Trees, depth, leaves and features of the woodstar IR, when woodstar takes it."""
    try:
        from woodstar.frontends import find_frontend
        from woodstar._options import parse_options

        model_ir = find_frontend(model)(model, parse_options(None))
    except Exception as error:
        return {"woodstar_ir": None, "woodstar_reason": f"{type(error).__name__}: {error}"}
    ens = model_ir.ensemble
    if ens is None:  # a linear model or pipeline: no trees, no strategies to route
        return {"woodstar_ir": True, "trees": False, "estimator": model_ir.head.estimator,
                "ir_features": int(model_ir.head.n_features), "n_steps": len(model_ir.steps)}
    depths = ens.tree_depths()
    return {"woodstar_ir": True, "n_trees": int(ens.n_trees), "max_depth": int(depths.max()),
            "mean_depth": float(depths.mean()), "n_nodes": int(ens.n_nodes),
            "ir_features": int(ens.n_features), "leaf_width": int(ens.leaf_width)}
