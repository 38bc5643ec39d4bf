"""A/B of float64 rows on a model that compares in float64 (LightGBM's): the compiled
walk's float route for every row whose float32 rounding compares the same
(``_FloatRowsFirst`` in c_walk.py) against the double route for every row.

The public path, ``predict_proba`` of float64 NumPy rows (the benchmark's rows, each
value moved by about 1e-9 of itself so that none is a float32 value), one model
converted with each setting; the float64 route is built by a first call while the
setting holds. Answers are checked equal to the source library's first. Then
``--rounds`` rounds, each timing every candidate's calls in a row (the model in cache)
in a shuffled order; reported: median ms per call and the median per-round ratio. One
candidate per ``--min-rows`` value (FLOAT_ROWS_FIRST_MIN_ROWS: the calls of that many
rows or more take the split, in the small-batch entry's C call up to 255 rows and on
the full path above). On two threads or more another candidate rounds the rows on
the calling thread only (with the first ``--min-rows`` value).

Usage: PYTHONPATH=. python -m benchmarks.ab_float64_rows [--models lgbm_500x256,...]
       [--rows 256,1000,10000,100000] [--threads 1,2] [--rounds 3] [--min-rows 256,64]
       [--output benchmarks/results/float64_rows.json]
"""

import random
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import woodstar
from benchmarks._ab import ab_arguments, int_list, write_results
from benchmarks.ab_kernel import SPECS
from benchmarks.models import MODEL_SPECS, load_model, test_rows
from woodstar.runtimes import c_walk

OUT = Path(__file__).parent / "results" / "float64_rows.json"


def _rows(spec, n, rng):
    return test_rows(spec, n).astype(np.float64) * (1 + 1e-9 * rng.standard_normal((n, spec.n_features)))


def _converted(model, spec, threads, min_rows, round_on_threads=True):
    """The model converted with FLOAT_ROWS_FIRST_MIN_ROWS = min_rows (None: off)."""
    saved = c_walk.FLOAT_ROWS_FIRST_MIN_ROWS, c_walk.ROUND_ROWS_PARALLEL_MIN_ROWS
    c_walk.FLOAT_ROWS_FIRST_MIN_ROWS = min_rows
    c_walk.ROUND_ROWS_PARALLEL_MIN_ROWS = saved[1] if round_on_threads else 1 << 62
    try:
        start = time.perf_counter()
        converted = woodstar.convert(model, extra_config={"n_threads": threads})
        converted.predict_proba(_rows(spec, 300, np.random.default_rng(1)))  # the float64 route
        return converted, time.perf_counter() - start
    finally:
        c_walk.FLOAT_ROWS_FIRST_MIN_ROWS, c_walk.ROUND_ROWS_PARALLEL_MIN_ROWS = saved


def measure(models, rows_list, threads_list, rounds, min_rows_list, frame=False):
    results = []
    for name in models:
        spec = SPECS.get(name) or MODEL_SPECS[name]
        model = load_model(spec)
        for threads in threads_list:
            torch.set_num_threads(threads)
            fns, first_s = {}, {}
            for min_rows in [None, *min_rows_list]:
                key = "double route" if min_rows is None else f"from {min_rows} rows"
                converted, first_s[key] = _converted(model, spec, threads, min_rows)
                fns[key] = converted.predict_proba
            if threads > 1:  # the rounding pass on the calling thread only
                one, _ = _converted(model, spec, threads, min_rows_list[0], round_on_threads=False)
                fns["rounding on one thread"] = one.predict_proba
            rng = np.random.default_rng(0)
            for rows in rows_list:
                X = _rows(spec, rows, rng)
                if frame:  # a DataFrame: the full path, not the small-batch entry
                    import pandas as pd
                    X = pd.DataFrame(X, columns=[f"f{i}" for i in range(X.shape[1])])
                expected = model.predict_proba(X)
                for key, fn in fns.items():
                    np.testing.assert_array_equal(fn(X), expected, err_msg=key)
                calls = max(2, 20_000 // rows)
                times = {k: [] for k in fns}
                for _ in range(rounds):
                    for key in random.sample(list(fns), len(fns)):
                        start = time.perf_counter()
                        for _ in range(calls):
                            fns[key](X)
                        times[key].append(1e3 * (time.perf_counter() - start) / calls)
                ratios = {k: statistics.median(a / b for a, b in zip(v, times["double route"]))
                          for k, v in times.items()}
                row = {"model": name, "threads": threads, "rows": rows, "rounds": rounds,
                       "input": "DataFrame" if frame else "ndarray",
                       "median_ms": {k: statistics.median(v) for k, v in times.items()},
                       "ratio_to_double_route": ratios, "first_call_s": first_s}
                results.append(row)
                print(f"{name} t={threads} rows={rows}  "
                      + "  ".join(f"{k} {v:.4f} ms" for k, v in row["median_ms"].items())
                      + "  " + "  ".join(f"{k}/double {v:.3f}" for k, v in ratios.items()
                                         if k != "double route"), flush=True)
    return results


def main(argv=None):
    parser = ab_arguments(__doc__, "lgbm_500x256,lgbm_multi10,lgbm_300x255",
                          "256,1000,10000,100000", 3, OUT)
    parser.add_argument("--threads", default="1,2", type=int_list)
    parser.add_argument("--min-rows", default=str(c_walk.FLOAT_ROWS_FIRST_MIN_ROWS),
                        type=int_list)
    parser.add_argument("--frame", action="store_true",
                        help="the rows as a pandas DataFrame (the full path)")
    parser.add_argument("--simd", choices=["avx512", "avx2"], default="avx512",
                        help="the widest SIMD form the walk may take (avx2: an AVX2 "
                             "machine's path on an AVX-512 one)")
    args = parser.parse_args(argv)
    c_walk.limit_simd_walk(args.simd)
    results = measure(args.models, args.rows, args.threads, args.rounds, args.min_rows,
                      args.frame)
    write_results(args.output, results, simd_walk=c_walk.simd_walk(), simd_limit=args.simd)


if __name__ == "__main__":
    main()
