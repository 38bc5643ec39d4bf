"""What the A/B scripts share: interleaved timing of several callables on one input,
and the results file they write (one call per timing, candidate order shuffled on
every repeat, so caches are as cold as between real requests)."""

import json
import platform
import random
import statistics
import time

import numpy as np
import torch

__all__ = ["check_and_warm", "consecutive_mean_ms", "interleaved_median_ms", "report_row",
           "write_results"]


def check_and_warm(fns, X, expected, as_proba, n_classes, tolerance):
    """Every candidate's answer against ``expected`` first (a wrong answer is never
    timed; ``tolerance(name)`` is its bound), then one untimed warm-up call."""
    for key, fn in fns.items():
        got = as_proba(fn(X), n_classes)
        tol = tolerance(key)
        np.testing.assert_allclose(got, expected, rtol=tol, atol=tol, err_msg=key)
        fn(X)


def report_row(row, digits=3):
    cells = "  ".join(f"{k} {v:.{digits}f}" for k, v in row["median_ms"].items())
    print(f"{row['model']:14s} t={row['threads']} rows={row['rows']:6d}  {cells}", flush=True)


def interleaved_ms(fns, repeats, *args):
    """{name: [ms of each call of fns[name](*args)]}: ``repeats`` rounds, each calling
    every candidate once in a shuffled order (round i of every list is one round)."""
    times = {k: [] for k in fns}
    for _ in range(repeats):
        order = list(fns)
        random.shuffle(order)
        for key in order:
            start = time.perf_counter()
            fns[key](*args)
            times[key].append(1e3 * (time.perf_counter() - start))
    return times


def interleaved_median_ms(fns, X, repeats):
    """{name: median ms of one call of fns[name](X)} over ``repeats`` shuffled rounds."""
    return {k: statistics.median(v) for k, v in interleaved_ms(fns, repeats, X).items()}


def consecutive_mean_ms(fns, X, calls):
    """{name: mean ms of one call of fns[name](X)}, each candidate called ``calls`` times
    in a row (its model's nodes stay in cache, as for a service calling one model), the
    candidates in a shuffled order."""
    times = {}
    for key in random.sample(list(fns), len(fns)):
        fn = fns[key]
        start = time.perf_counter()
        for _ in range(calls):
            fn(X)
        times[key] = 1e3 * (time.perf_counter() - start) / calls
    return times


def write_results(path, results, keep_earlier=False):
    """Write ``results`` (rows with model, threads and rows) with the machine and
    versions; with ``keep_earlier``, cells of an earlier file not measured again stay."""
    if keep_earlier and path.exists():
        measured = {(r["model"], r["threads"], r["rows"]) for r in results}
        earlier = json.loads(path.read_text()).get("results", [])
        results = [r for r in earlier if (r["model"], r["threads"], r["rows"]) not in measured] + results
        results.sort(key=lambda r: (r["model"], r["threads"], r["rows"]))
    path.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__, "numpy": np.__version__,
        "results": results}, indent=1))
    print(f"wrote {path}")
