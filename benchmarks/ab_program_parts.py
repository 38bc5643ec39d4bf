"""A/B of how a tree model's tensor program takes a large call on the CPU: whole, or in
parts of a given row count run one after another (with the options' intra-op threads,
or with one), or side by side (one part per thread, one intra-op thread each).

The programs are called directly (``converted._programs[...]``), so the container's own
choice of parts does not interfere: ``program`` is the torch backend's eager program,
``torch.jit`` its trace. Answers are checked against the torch backend's default first.
Rounds are interleaved (every candidate once per round, shuffled order); reported: the
median ms and the median per-round ratio to the torch backend's default.

Usage: PYTHONPATH=. python -m benchmarks.ab_program_parts [models] [--threads 1,2]
       [--rows 100000] [--parts 512,1024,2048,4096,8192,16384] [--repeats 5]
       [--side-by-side] [--out FILE]
"""

import argparse
import statistics
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import torch

import woodstar
from benchmarks._ab import interleaved_ms, write_results
from benchmarks.ab_exporting import SPECS
from benchmarks.models import MODEL_SPECS, load_model, test_rows

OUT = Path(__file__).parent / "results" / "program_parts.json"


def _one_after_another(program, rows, threads):
    def run(X):
        with torch.inference_mode():
            return np.concatenate([program(X[i:i + rows], threads=threads)[1]
                                   for i in range(0, len(X), rows)])
    return run


def _side_by_side(program, rows, threads, pool):
    def run(X):
        parts = [X[i:i + rows] for i in range(0, len(X), rows)]
        shares = [parts[w::threads] for w in range(threads)]
        pending = [pool.submit(lambda s=s: [program(p, threads=1)[1] for p in s])
                   for s in shares[1:]]
        done = [[program(p, threads=1)[1] for p in shares[0]]] + [f.result() for f in pending]
        out = [None] * len(parts)
        for w, share in enumerate(done):
            out[w::threads] = share
        return np.concatenate(out)
    return run


def candidates(model, threads, part_sizes, side_by_side, pool):
    config = {"n_threads": threads}
    fns = {"torch": woodstar.convert(model, "torch", extra_config=config).predict_proba}
    programs = {
        "program": woodstar.convert(model, "torch", extra_config={
            **config, "cpu_route": "program", "small_batch_rows": 0})._programs["float32"],
        "torch.jit": woodstar.convert(model, "torch.jit", extra_config=config)._programs["float32"],
    }
    for name, program in programs.items():
        fns[f"{name}/whole"] = lambda X, p=program: p(X)[1]
        for rows in part_sizes:
            fns[f"{name}/{rows}"] = _one_after_another(program, rows, None)
            if threads > 1:
                fns[f"{name}/{rows}/one-thread"] = _one_after_another(program, rows, 1)
                if side_by_side:
                    fns[f"{name}/{rows}/side-by-side"] = _side_by_side(program, rows, threads, pool)
    return fns


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=["rf_100x8", "xgb_300x8"])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--parts", default="512,1024,2048,4096,8192,16384")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--side-by-side", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args(argv)
    part_sizes = [int(p) for p in args.parts.split(",")]
    results = []
    for name in args.models:
        spec = SPECS.get(name) or MODEL_SPECS[name]
        model = load_model(spec)
        X = test_rows(spec, args.rows)
        for threads in [int(t) for t in args.threads.split(",")]:
            pool = ThreadPoolExecutor(max(1, threads - 1))
            fns = candidates(model, threads, part_sizes, args.side_by_side, pool)
            expected = fns["torch"](X[:5000])
            for key, fn in fns.items():
                got = np.asarray(fn(X[:5000])).reshape(expected.shape)
                np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-6, err_msg=key)
            times = interleaved_ms(fns, args.repeats, X)
            base = times["torch"]
            cells = {k: {"ms_median": round(statistics.median(v), 4),
                         "ratio_to_torch_median": round(statistics.median(
                             [a / b for a, b in zip(v, base)]), 3)}
                     for k, v in times.items()}
            results.append({"model": name, "threads": threads, "rows": args.rows,
                            "repeats": args.repeats, "cells": cells})
            for key, cell in cells.items():
                print(f"{name:12s} t={threads} rows={args.rows} {key:32s} "
                      f"{cell['ms_median']:10.2f} ms  x{cell['ratio_to_torch_median']:.2f}",
                      flush=True)
            pool.shutdown()
    write_results(args.out, results, keep_earlier=True)


if __name__ == "__main__":
    main()
