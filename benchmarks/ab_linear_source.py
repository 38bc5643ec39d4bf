"""A/B of the linear models' native entry built from ``linear_entry.c`` at a commit
against the working tree's, on the public path (``predict_proba`` of NumPy rows).

Both entries serve the same converted model in one process: the baseline's library is
built from the commit's source and its entry swapped into the container for its turns,
the two alternating in a shuffled order each round. Every answer is checked against
scikit-learn's bit for bit before it counts. The models are bare LogisticRegressions
(no step before the product) fitted on float64 and float32 rows, 28 and 200 features.

Usage: PYTHONPATH=. python -m benchmarks.ab_linear_source [--commit HEAD] [--threads 1]
       [--rows 1,10,100,1000,10000,100000] [--rounds 9] [--out FILE]
Writes benchmarks/results/linear_entry_source.json by default.
"""

import argparse
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

import woodstar
from benchmarks._ab import write_results
from woodstar.runtimes import linear_entry as entry_module
from woodstar.runtimes._native import NativeLibrary

ROOT = Path(__file__).resolve().parent.parent
SOURCES = ("woodstar/runtimes/linear_entry.c", "woodstar/runtimes/cpu_simd.h")
OUT = Path(__file__).parent / "results" / "linear_entry_source.json"


def _baseline_library(commit, folder):
    for source in SOURCES:
        text = subprocess.run(["git", "show", f"{commit}:{source}"], cwd=ROOT, check=True,
                              capture_output=True, text=True).stdout
        (Path(folder) / Path(source).name).write_text(text)
    lib = NativeLibrary(Path(folder) / "linear_entry.c", entry_module._FLAGS,
                        entry_module._setup, f"linear_entry.c at {commit}").load()
    if lib is None:
        raise SystemExit(f"the baseline does not build at {commit}")
    return lib


def _entries(converted, precision, baseline_lib):
    current = converted._small_batch[precision]
    steps, linear = entry_module._chain_parts(converted.ir)
    check = current._spec.check
    baseline = entry_module.LinearNativeEntry(
        baseline_lib, entry_module.numpy_blas(), steps, linear, precision,
        bool(check & 1), bool(check & 2), converted.ir.input_precision)
    baseline.max_rows = current.max_rows
    baseline.rows_in_place = False  # older sources take every call through their buffers
    return baseline, current


def _time(converted, precision, entry, X, expected, n_features):
    converted._small_batch[precision] = entry
    repeats = max(3, min(2000, int(2e6 // (len(X) * n_features))))
    start = time.perf_counter()
    for _ in range(repeats):
        answer = converted.predict_proba(X)
    elapsed = (time.perf_counter() - start) / repeats
    if not np.array_equal(answer, expected):
        raise SystemExit("an entry's answer differs from scikit-learn's")
    return elapsed * 1e3


def measure(commit, threads, rows_list, rounds):
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    results = []
    with tempfile.TemporaryDirectory() as folder:
        baseline_lib = _baseline_library(commit, folder)
        for n_features in (28, 200):
            X = rng.normal(size=(5000, n_features))
            y = (X[:, 0] + rng.normal(size=5000) > 0).astype(int)
            for dtype in (np.float64, np.float32):
                precision = np.dtype(dtype).name
                model = LogisticRegression(max_iter=500).fit(X.astype(dtype), y)
                converted = woodstar.convert(model, "torch", extra_config={"n_threads": threads})
                converted.predict_proba(X[:2].astype(dtype))
                baseline, current = _entries(converted, precision, baseline_lib)
                for rows in rows_list:
                    rows_X = rng.normal(size=(rows, n_features)).astype(dtype)
                    expected = model.predict_proba(rows_X)
                    times, ratios = {"baseline": [], "current": []}, []
                    for _ in range(rounds):
                        order = [("baseline", baseline), ("current", current)]
                        random.shuffle(order)
                        got = {name: _time(converted, precision, entry, rows_X, expected,
                                           n_features) for name, entry in order}
                        for name, ms in got.items():
                            times[name].append(ms)
                        ratios.append(got["current"] / got["baseline"])
                    q1, _, q3 = statistics.quantiles(ratios, n=4)
                    row = {"model": f"LogisticRegression, {n_features} features",
                           "dtype": precision, "rows": rows, "threads": threads,
                           "baseline_commit": commit, "rows_in_place": current.rows_in_place,
                           "median_ms": {k: statistics.median(v) for k, v in times.items()},
                           "ratio_current_to_baseline": {"median": statistics.median(ratios),
                                                         "q1": q1, "q3": q3}}
                    results.append(row)
                    print(f"{row['model']:36} {precision} t={threads} rows={rows:>6}  "
                          f"baseline {row['median_ms']['baseline']:.4f} ms  current "
                          f"{row['median_ms']['current']:.4f} ms  ratio "
                          f"{statistics.median(ratios):.2f} [{q1:.2f}-{q3:.2f}]", flush=True)
    return results


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--rows", default="1,10,100,1000,10000,100000")
    parser.add_argument("--rounds", type=int, default=9)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args()
    results = measure(args.commit, args.threads, [int(r) for r in args.rows.split(",")],
                      args.rounds)
    write_results(Path(args.out), results)


if __name__ == "__main__":
    main()
