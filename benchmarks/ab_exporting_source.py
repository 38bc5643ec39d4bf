"""Interleaved A/B of the exporting backends whose programs run in-process (torch.jit,
torch.compile, tvm) against a baseline copy of the package: the files in
``BASELINE_FILES`` as at a commit, every other file as in the working tree. Each copy
runs in its own processes (one thread), the two alternating in a shuffled order; each
process times the backends and, in the same rounds, the default route (``torch``) as
the yardstick, so ratios read within a process cancel the machine's load.

Answers are checked first: the default route's ``predict_proba`` equals the source
model's bit for bit, the exporting backends' within 1e-12 (their links take Torch's
``exp``; XGBoost's within 1e-6: their tensor programs sum its float32 leaves in
float64).

Usage: PYTHONPATH=. python -m benchmarks.ab_exporting_source [--commit HEAD]
       [--rounds 4] [--repeats 15] [--models rf_100x8,xgb_300x8] [--rows 1,1000]
       [--backends torch.jit,torch.compile,tvm] [--output FILE]
"""

import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchmarks._processes import ROOT, baseline_tree

BASELINE_FILES = ("woodstar/runtimes/walk_ops.py", "woodstar/runtimes/walk_ops.c",
                  "woodstar/runtimes/_native.py", "woodstar/backends/_walk_kernels.py",
                  "woodstar/backends/torchscript_backend.py",
                  "woodstar/backends/tvm_backend.py", "woodstar/lowering/trees/_common.py",
                  "woodstar/_input.py", "woodstar/container.py")


def child(models, rows_list, backends, repeats):
    import numpy as np
    import torch

    torch.set_num_threads(1)
    import woodstar
    from benchmarks.ab_exporting import _spec
    from benchmarks.models import load_model, test_rows

    out = []
    for name in models:
        spec = _spec(name)
        model = load_model(spec, progress=lambda *a: None)
        if name.startswith("rf"):  # a forest's threads add its trees in any order
            model.set_params(n_jobs=1)
        converted = {b: woodstar.convert(model, b, extra_config={"n_threads": 1})
                     for b in ("torch", *backends)}
        for n in rows_list:
            X = np.ascontiguousarray(test_rows(spec, n), dtype=np.float32)
            expected = model.predict_proba(X)
            for backend, c in converted.items():
                got = c.predict_proba(X)
                if backend == "torch":
                    np.testing.assert_array_equal(got, expected, err_msg=f"{name} {backend}")
                else:
                    # Torch's exp in the links (within 1e-12); the tensor programs sum
                    # XGBoost's float32 leaves in float64, XGBoost in float32.
                    np.testing.assert_allclose(got, expected, rtol=0,
                                               atol=1e-6 if name.startswith("xgb") else 1e-12)
            calls = max(1, int(2000 / n)) if n < 1000 else 1
            times = {b: [] for b in converted}
            for _ in range(repeats):
                order = list(converted)
                random.shuffle(order)
                for backend in order:
                    predict = converted[backend].predict_proba
                    start = time.perf_counter()
                    for _ in range(calls):
                        predict(X)
                    times[backend].append((time.perf_counter() - start) / calls)
            for backend in backends:
                ratios = [a / b for a, b in zip(times[backend], times["torch"])]
                out.append({"model": name, "rows": n, "backend": backend,
                            "ms": 1e3 * statistics.median(times[backend]),
                            "torch_ms": 1e3 * statistics.median(times["torch"]),
                            "ratio_to_torch": statistics.median(ratios)})
    print(json.dumps(out))


def _run(package_root, args):
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_root), str(ROOT)]),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-m", "benchmarks.ab_exporting_source", "--child",
                             "--models", args.models, "--rows", args.rows,
                             "--backends", args.backends, "--repeats", str(args.repeats)],
                            env=env, cwd=package_root, capture_output=True, text=True)
    if result.returncode:
        raise RuntimeError(f"the process timing {package_root} failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=15)
    parser.add_argument("--models", default="rf_100x8,xgb_300x8")
    parser.add_argument("--rows", default="1,1000")
    parser.add_argument("--backends", default="torch.jit,torch.compile,tvm")
    parser.add_argument("--output", type=Path,
                        default=ROOT / "benchmarks/results/exporting_torch_library.json")
    args = parser.parse_args(argv)
    models, backends = args.models.split(","), args.backends.split(",")
    rows_list = [int(r) for r in args.rows.split(",")]
    if args.child:
        child(models, rows_list, backends, args.repeats)
        return
    with tempfile.TemporaryDirectory() as tmp:
        trees = {"before": baseline_tree(args.commit, Path(tmp), BASELINE_FILES), "after": ROOT}
        runs = {"before": [], "after": []}
        for round_ in range(args.rounds):
            order = list(trees)
            random.shuffle(order)
            for which in order:
                runs[which].append(_run(trees[which], args))
                print(f"round {round_ + 1}: {which} done", file=sys.stderr)
    cells = []
    for i, cell in enumerate(runs["after"][0]):
        before = [r[i]["ratio_to_torch"] for r in runs["before"]]
        after = [r[i]["ratio_to_torch"] for r in runs["after"]]
        cells.append({key: cell[key] for key in ("model", "rows", "backend")}
                     | {"before_ms": statistics.median(r[i]["ms"] for r in runs["before"]),
                        "after_ms": statistics.median(r[i]["ms"] for r in runs["after"]),
                        "torch_ms": statistics.median(r[i]["torch_ms"] for r in runs["after"]),
                        "before_ratio_to_torch": statistics.median(before),
                        "after_ratio_to_torch": statistics.median(after),
                        "before_ratios": before, "after_ratios": after})
    for c in cells:
        print(f"{c['model']:>12} {c['rows']:>7} {c['backend']:>14}  before {c['before_ms']:.4f} ms"
              f" ({c['before_ratio_to_torch']:.2f}x torch)  after {c['after_ms']:.4f} ms"
              f" ({c['after_ratio_to_torch']:.2f}x)")
    args.output.write_text(json.dumps({"commit": args.commit, "baseline_files": BASELINE_FILES,
                                       "rounds": args.rounds, "repeats": args.repeats,
                                       "cells": cells}, indent=1) + "\n")


if __name__ == "__main__":
    main()
