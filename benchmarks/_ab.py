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

__all__ = ["ab_arguments", "check_and_warm", "consecutive_mean_ms", "int_list",
           "interleaved_median_ms", "report_row", "write_results"]


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


def ab_arguments(doc, models, rows, rounds, output):
    """An argument parser with the options every A/B script takes (``--models``,
    ``--rows``, ``--rounds``, ``--output``) and these defaults; the script adds its own."""
    import argparse
    from pathlib import Path

    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--models", default=models, type=lambda text: text.split(","))
    parser.add_argument("--rows", default=rows, type=int_list)
    parser.add_argument("--rounds", type=int, default=rounds)
    parser.add_argument("--output", type=Path, default=output)
    return parser


def int_list(text):
    """"1,10,100" -> [1, 10, 100] (an option's value)."""
    return [int(part) for part in text.split(",")]


def write_results(path, results, keep_earlier=False, **about):
    """Write ``results`` (rows with model, threads and rows) with the machine and
    versions, and ``about`` (more such fields); with ``keep_earlier``, cells of an
    earlier file not measured again stay."""
    if keep_earlier and path.exists():
        measured = {(r["model"], r["threads"], r["rows"]) for r in results}
        earlier = json.loads(path.read_text()).get("results", [])
        results = [r for r in earlier if (r["model"], r["threads"], r["rows"]) not in measured] + results
        results.sort(key=lambda r: (r["model"], r["threads"], r["rows"]))
    path.write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "cpu": platform.processor() or platform.machine(),
        "torch": torch.__version__, "numpy": np.__version__, **about,
        "results": results}, indent=1))
    print(f"wrote {path}")
