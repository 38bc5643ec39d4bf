"""Interleaved A/B of small calls (1, 10 and 100 rows, one thread) on the default CPU
route: a baseline copy of the package (the files in ``BASELINE_FILES`` as they are at a
commit, every other file as in the working tree, so only those files' changes are
measured) against the working tree, each in its own process, the two alternating in a
shuffled order. Every process also times ONNX Runtime on the same model (exported with
skl2onnx or onnxmltools) on the same rows, interleaved with woodstar's calls, as the
yardstick; ratios to it are read within one process, so the load on the machine cancels.

Answers are checked first: woodstar's against the source library's own (exactly), ONNX
Runtime's against it within float32 rounding.

Usage: PYTHONPATH=. python -m benchmarks.ab_one_row [--commit HEAD] [--rounds 6]
       [--output benchmarks/results/one_row.json]
       PYTHONPATH=. python -m benchmarks.ab_one_row --candidates
       PYTHONPATH=. python -m benchmarks.ab_one_row --conversion
       PYTHONPATH=. python -m benchmarks.ab_one_row --small-batch [--rounds 5]
           [--models scaler_logreg] [--small-batch-rows 64,100,128]
           [--simd-rows avx512|avx2|none] [--small-batch-output FILE]
"""

import argparse
import json
import os
import pickle
import random
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._processes import baseline_tree, run_child

ROOT = Path(__file__).resolve().parents[1]
BASELINE_FILES = ("woodstar/container.py", "woodstar/_input.py", "woodstar/_encode.py",
                  "woodstar/plan.py", "woodstar/runtimes/numpy_graph.py",
                  "woodstar/runtimes/_cpu_route.py")
ROWS = (1, 10, 100)
N_FEATURES = 28


# ---------------------------------------------------------------- models (parent)
def _data(n_rows, seed):
    from sklearn.datasets import make_classification

    X, y = make_classification(n_samples=n_rows, n_features=N_FEATURES, n_informative=10,
                               n_redundant=7, random_state=seed)
    return X.astype(np.float32), y


def _train():
    import lightgbm
    import xgboost
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _data(5000, seed=0)
    from sklearn.datasets import make_classification

    X10, y10 = make_classification(n_samples=5000, n_features=N_FEATURES, n_informative=10,
                                   n_redundant=7, n_classes=10, random_state=1)
    return {
        "rf_100x8": RandomForestClassifier(100, max_depth=8, random_state=0, n_jobs=1).fit(X, y),
        "scaler_logreg": make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y),
        "scaler_logreg_10": make_pipeline(StandardScaler(), LogisticRegression()).fit(
            X10.astype(np.float32), y10),
        "xgb_300x8": xgboost.XGBClassifier(n_estimators=300, max_depth=8, n_jobs=1,
                                           random_state=0).fit(X, y),
        "lgbm_100x31": lightgbm.LGBMClassifier(n_estimators=100, n_jobs=1, verbose=-1,
                                               random_state=0).fit(X, y),
    }


def _onnx_bytes(name, model):
    if name.startswith(("xgb", "lgbm")):
        import onnxmltools
        from onnxmltools.convert.common.data_types import FloatTensorType

        types = [("input", FloatTensorType([None, N_FEATURES]))]
        if name.startswith("xgb"):
            return onnxmltools.convert_xgboost(model, initial_types=types).SerializeToString()
        return onnxmltools.convert_lightgbm(model, initial_types=types,
                                            zipmap=False).SerializeToString()
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType

    types = [("input", FloatTensorType([None, N_FEATURES]))]

    return convert_sklearn(model, initial_types=types, options={"zipmap": False}
                           ).SerializeToString()


# ---------------------------------------------------------------- one process (child)
def _median_ms(fns, repeats):
    """{name: median ms of one call} over ``repeats`` rounds in a shuffled order. (Not
    ``_ab.interleaved_ms``: that module imports torch, which this child must not load
    before it measures woodstar's torch-free one-row path.)"""
    times = {k: [] for k in fns}
    for _ in range(repeats):
        order = list(fns)
        random.shuffle(order)
        for key in order:
            start = time.perf_counter()
            fns[key]()
            times[key].append(time.perf_counter() - start)
    return {k: 1e3 * statistics.median(v) for k, v in times.items()}


def _ort_session(data, threads=1):
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads, opts.inter_op_num_threads = threads, 1
    return ort.InferenceSession(data, opts, providers=["CPUExecutionProvider"])


def _ort_proba(session):
    outputs = [o.name for o in session.get_outputs()]
    name = "probabilities" if "probabilities" in outputs else outputs[-1]
    return lambda X: session.run([name], {"input": X})[0]


def child(models_path, repeats):
    import pandas as pd
    import torch

    torch.set_num_threads(1)
    import woodstar

    with open(models_path, "rb") as f:
        models, onnx_models = pickle.load(f)
    X_all, _ = _data(200, seed=12345)
    X_all[3, 5] = np.nan  # a missing value in the 10- and 100-row batches
    rows = []
    for name, model in models.items():
        converted = woodstar.convert(model)  # the default: torch backend, CPU route
        ort_run = _ort_proba(_ort_session(onnx_models[name]))
        nan_ok = not name.startswith("scaler_logreg")
        for n in ROWS:
            X = np.ascontiguousarray(X_all[5:5 + n] if n == 1 or not nan_ok else X_all[:n])
            cells = {"numpy": X}
            if n in (1, 100):
                cells["DataFrame"] = pd.DataFrame(X, columns=[f"f{i}" for i in range(N_FEATURES)])
            for kind, inp in cells.items():
                expected = model.predict_proba(X)
                np.testing.assert_array_equal(converted.predict_proba(inp), expected,
                                              err_msg=f"{name} {kind}")
                as_array = X if kind == "numpy" else None
                fns = {"woodstar": lambda inp=inp: converted.predict_proba(inp),
                       "onnxruntime": (lambda: ort_run(as_array)) if as_array is not None else
                       (lambda inp=inp: ort_run(inp.to_numpy(np.float32)))}
                ort_error = float(np.abs(ort_run(X) - expected).max())
                for fn in fns.values():
                    fn()
                medians = _median_ms(fns, repeats)
                rows.append({"model": name, "input": kind, "rows": n, "route": converted.route,
                             **{f"{k}_ms": v for k, v in medians.items()},
                             "onnxruntime_max_abs_error": ort_error})
    print(json.dumps(rows))


# ---------------------------------------------------------------- candidates
_DOT_C = """
#include <stdint.h>
void dot_rows(const double *x, const double *w, double b, int64_t n, int64_t k, double *out) {
    for (int64_t i = 0; i < n; i++) {
        double s = 0.0;
        for (int64_t j = 0; j < k; j++) s += x[i * k + j] * w[j];
        out[i] = s + b;
    }
}
"""


def candidates(repeats):
    """Two rejected-or-kept candidates, timed in this process against the default:
    (1) a compiled row-by-row dot product for a linear model's small batches against
    NumPy's BLAS call (``X @ w + b``); (2) how much of a tree model's one-row call a
    single native entry point (check + walk + link) could remove: the full call against
    the compiled walk's kernel alone, called with its arguments ready."""
    import ctypes

    import torch

    torch.set_num_threads(1)
    import woodstar

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        source, lib_path = Path(tmp) / "dot.c", Path(tmp) / "dot.so"
        source.write_text(_DOT_C)
        subprocess.run(["cc", "-O2", "-shared", "-fPIC", str(source), "-o", str(lib_path)],
                       check=True)
        lib = ctypes.CDLL(str(lib_path))
        lib.dot_rows.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_double,
                                 ctypes.c_int64, ctypes.c_int64, ctypes.c_void_p]
        w = np.random.default_rng(0).normal(size=N_FEATURES)
        for n in ROWS:
            X = np.random.default_rng(n).normal(size=(n, N_FEATURES))
            out = np.empty(n)

            def compiled(X=X, out=out, n=n):
                lib.dot_rows(X.ctypes.data, w.ctypes.data, 0.5, n, N_FEATURES, out.ctypes.data)
                return out

            medians = _median_ms({"blas": lambda X=X: X @ w + 0.5, "compiled": compiled}, repeats)
            rows.append({"candidate": "compiled dot product", "rows": n, **medians})
    X_all, y = _data(5000, seed=0)
    models = _train()
    for name in ("rf_100x8", "xgb_300x8", "lgbm_100x31"):
        converted = woodstar.convert(models[name])
        runner = converted._cpu_runner(converted.route, "float32")
        route = getattr(runner, "program", None)
        if converted.route != "c-walk" or not hasattr(route, "_kernel"):
            continue
        X = np.ascontiguousarray(X_all[:1])
        out = np.zeros((1, route.n_outputs))
        address = (route._model_address, X.ctypes.data, 1, out.ctypes.data, 1)
        medians = _median_ms({"predict_proba": lambda X=X: converted.predict_proba(X),
                              "kernel alone": lambda: route._kernel(*address)}, repeats)
        medians["removable_fraction"] = 1 - medians["kernel alone"] / medians["predict_proba"]
        rows.append({"candidate": "single native entry point", "model": name, "rows": 1,
                     **medians})
    for row in rows:
        print(json.dumps(row))
    return rows


# ---------------------------------------------------------------- small-batch entry
SMALL_BATCH_LIMIT = 255  # the entry's own ceiling (c_walk.SmallBatchEntry)
SMALL_BATCH_CELLS = [(1, np.float32), (1, np.float64), (10, np.float32), (64, np.float32),
                     (100, np.float32), (100, np.float64), (255, np.float32)]


def small_batch(repeats, rounds, names=None, cells=None, simd_rows="avx512", threads=1):
    """The one-call small-batch entries (the compiled walk's, c_walk.SmallBatchEntry; a
    linear model's, linear_entry.LinearNativeEntry) against
    the full Python path, in one process: the same converted model with the entry on
    and off (its cache entry set to False, as WOODSTAR_SMALL_BATCH_ROWS=0 would leave
    it), interleaved with ONNX Runtime, ``rounds`` times; ratios per round. The entry
    is allowed up to SMALL_BATCH_LIMIT rows here, to find where it stops paying; float64
    rows (rounded to float32 by the entry, by ``astype`` for ONNX Runtime) too. Cells of
    more rows time the linear entry's calls with NumPy's buffers (no ceiling then), each
    with fewer calls (``repeats`` x 255 / rows, at least 5). ``threads``: ONNX Runtime's
    and woodstar's (``n_threads``); NumPy's BLAS keeps its own."""
    import torch

    torch.set_num_threads(threads)
    import woodstar
    from woodstar import container
    from woodstar.runtimes import linear_entry

    container.SMALL_BATCH_ROWS = SMALL_BATCH_LIMIT
    cells = cells or SMALL_BATCH_CELLS
    most = max(n for n, _ in cells)
    if most <= SMALL_BATCH_LIMIT:  # to find where the linear entry's stack path stops paying
        linear_entry._MAX_ROWS = SMALL_BATCH_LIMIT
    print(f"linear entry rows prepared with: {linear_entry.limit_simd_rows(simd_rows)}")

    models = _train()
    X_all, _ = _data(max(300, most + 5), seed=12345)
    X_all[3, 5] = np.nan
    rows = []
    for name in names or ("rf_100x8", "xgb_300x8", "lgbm_100x31", "scaler_logreg"):
        model = models[name]
        config = {"n_threads": threads}
        on, off = (woodstar.convert(model, extra_config=config),
                   woodstar.convert(model, extra_config=config))
        off._small_batch = {"float32": False, "float64": False}
        ort_run = _ort_proba(_ort_session(_onnx_bytes(name, model), threads))
        for n, dtype in cells:
            X = np.ascontiguousarray(X_all[:n], dtype=dtype)
            if name.startswith("scaler_logreg"):  # refuses NaN: rows without it
                X = np.ascontiguousarray(X_all[5:5 + n], dtype=dtype)
            expected = model.predict_proba(X)
            for c in (on, off):
                np.testing.assert_array_equal(c.predict_proba(X), expected, err_msg=name)
            taken = any(entry and entry(X) is not None for entry in on._small_batch.values())
            fns = {"entry": lambda X=X: on.predict_proba(X),
                   "full path": lambda X=X: off.predict_proba(X),
                   "onnxruntime": lambda X=X: ort_run(X.astype(np.float32, copy=False))}
            calls = max(5, min(repeats, repeats * SMALL_BATCH_LIMIT // n))
            per_round = [_median_ms(fns, calls) for _ in range(rounds)]
            row = {"model": name, "input": np.dtype(dtype).name, "rows": n,
                   "threads": threads, "entry_taken": taken}
            for key in fns:
                row[f"{key}_ms"] = round(statistics.median(r[key] for r in per_round), 4)
            for a, b in (("entry", "full path"), ("entry", "onnxruntime"),
                         ("full path", "onnxruntime")):
                ratios = [r[a] / r[b] for r in per_round]
                row[f"{a}/{b}"] = round(statistics.median(ratios), 3)
                row[f"{a}/{b} range"] = _spread(ratios)
            rows.append(row)
            print(json.dumps(row), flush=True)
    return rows


# ---------------------------------------------------------------- conversion cost
def conversion(models_path=None):
    """Where ``convert`` spends its time: the frontend (model -> IR), the lowering (IR
    -> Torch module) and the backend's compile with its first call, for a 100-tree
    forest on torch.compile (twice in one process: the second finds dynamo's graph for
    the same structure) and a 300-tree XGBoost model on torch."""
    import torch

    torch.set_num_threads(1)
    from woodstar._options import parse_options
    from woodstar.backends import get_backend
    from woodstar.frontends import find_frontend
    from woodstar.lowering import lower_model
    from woodstar.container import make_container

    models = _train() if models_path is None else pickle.load(open(models_path, "rb"))[0]
    rows = []
    for name, backend in (("rf_100x8", "torch.compile"), ("rf_100x8", "torch.compile"),
                          ("xgb_300x8", "torch")):
        options = parse_options({"cpu_route": "program"} if backend == "torch" else None)
        times = {}
        start = time.perf_counter()
        ir = find_frontend(models[name])(models[name], options)
        times["frontend_s"] = time.perf_counter() - start
        start = time.perf_counter()
        container = make_container(ir, get_backend(backend), options, "cpu")
        times["lower_compile_first_call_s"] = time.perf_counter() - start
        start = time.perf_counter()
        lower_model(ir, container._strategy_chooser("float32"), "float32")
        times["lowering_alone_s"] = time.perf_counter() - start
        rows.append({"model": name, "backend": backend, "strategy": container.strategy,
                     **{k: round(v, 3) for k, v in times.items()}})
        print(json.dumps(rows[-1]), flush=True)
    return rows


# ---------------------------------------------------------------- parent
def _merge(path, key, rows):
    """Add ``rows`` under ``key`` of the results file (the A/B's cells stay)."""
    path = Path(path)
    data = json.loads(path.read_text()) if path.exists() else {}
    data[key] = {"date": time.strftime("%Y-%m-%d"), "rows": rows}
    path.write_text(json.dumps(data, indent=1) + "\n")
    print(f"wrote {key} to {path}")


def _spread(values):
    return [round(min(values), 4), round(max(values), 4)]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--repeats", type=int, default=300)
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/one_row.json"))
    parser.add_argument("--child", action="store_true")
    parser.add_argument("--models")
    parser.add_argument("--candidates", action="store_true",
                        help="time the candidates (compiled dot product, native entry point)")
    parser.add_argument("--small-batch", action="store_true",
                        help="time the small-batch native entry against the full path")
    parser.add_argument("--small-batch-rows",
                        help="with --small-batch: these row counts, float32 and float64 each")
    parser.add_argument("--simd-rows", default="avx512", choices=("avx512", "avx2", "none"),
                        help="with --small-batch: the widest form the linear entry may use")
    parser.add_argument("--threads", type=int, default=1,
                        help="with --small-batch: ONNX Runtime's and woodstar's threads")
    parser.add_argument("--small-batch-output",
                        default=str(ROOT / "benchmarks/results/one_row_native.json"))
    parser.add_argument("--conversion", action="store_true",
                        help="time convert's parts (frontend, lowering, compile)")
    args = parser.parse_args(argv)
    if args.child:
        return child(args.models, args.repeats)
    if args.small_batch:
        names = args.models.split(",") if args.models else None
        cells = ([(int(n), np.dtype(d).type) for n in args.small_batch_rows.split(",")
                  for d in ("float32", "float64")] if args.small_batch_rows else None)
        rows = small_batch(args.repeats * 3, args.rounds, names, cells,
                           None if args.simd_rows == "none" else args.simd_rows, args.threads)
        output = Path(args.small_batch_output)
        output.write_text(json.dumps({
            "date": time.strftime("%Y-%m-%d"), "threads": args.threads, "rounds": args.rounds,
            "entry_rows_allowed": SMALL_BATCH_LIMIT if cells is None or max(
                n for n, _ in cells) <= SMALL_BATCH_LIMIT else "any",
            "calls_per_cell_per_round": args.repeats * 3, "rows": rows}, indent=1) + "\n")
        return print(f"wrote {output}")
    if args.candidates or args.conversion:
        key = "candidates" if args.candidates else "conversion"
        rows = candidates(args.repeats * 10) if args.candidates else conversion(args.models)
        return _merge(args.output, key, rows)
    with tempfile.TemporaryDirectory(prefix="woodstar-ab-") as tmp:
        tmp = Path(tmp)
        models = _train()
        onnx_models = {k: _onnx_bytes(k, m) for k, m in models.items()}
        models_path = tmp / "models.pkl"
        with open(models_path, "wb") as f:
            pickle.dump((models, onnx_models), f)
        trees = {"baseline": baseline_tree(args.commit, tmp / "baseline", BASELINE_FILES),
                 "working tree": ROOT}
        runs = {k: [] for k in trees}
        for r in range(args.rounds):
            order = list(trees)
            random.shuffle(order)
            for key in order:
                runs[key].append(run_child("benchmarks.ab_one_row", trees[key], models_path, args.repeats))
            print(f"round {r + 1}/{args.rounds} done", flush=True)
    results = []
    for i, cell in enumerate(runs["working tree"][0]):
        new = [run[i]["woodstar_ms"] for run in runs["working tree"]]
        old = [run[i]["woodstar_ms"] for run in runs["baseline"]]
        ort_new = [run[i]["onnxruntime_ms"] for run in runs["working tree"]]
        ort_old = [run[i]["onnxruntime_ms"] for run in runs["baseline"]]
        # Ratios to ONNX Runtime within each process, then new/old per round.
        new_vs_ort = [a / b for a, b in zip(new, ort_new)]
        old_vs_ort = [a / b for a, b in zip(old, ort_old)]
        per_round = [a / b for a, b in zip(new, old)]
        row = {k: cell[k] for k in ("model", "input", "rows", "route")}
        row.update({
            "baseline_ms": round(statistics.median(old), 4), "baseline_ms_range": _spread(old),
            "new_ms": round(statistics.median(new), 4), "new_ms_range": _spread(new),
            "onnxruntime_ms": round(statistics.median(ort_new + ort_old), 4),
            "new_over_baseline": round(statistics.median(per_round), 3),
            "new_over_baseline_range": _spread(per_round),
            "baseline_over_onnxruntime": round(statistics.median(old_vs_ort), 3),
            "new_over_onnxruntime": round(statistics.median(new_vs_ort), 3),
            "new_over_onnxruntime_range": _spread(new_vs_ort),
            "onnxruntime_max_abs_error": cell["onnxruntime_max_abs_error"]})
        results.append(row)
        print(f"{row['model']:14s} {row['input']:9s} rows={row['rows']:3d}  baseline "
              f"{row['baseline_ms']:.4f}  new {row['new_ms']:.4f}  ort {row['onnxruntime_ms']:.4f} ms"
              f"  new/baseline {row['new_over_baseline']:.2f}  new/ort {row['new_over_onnxruntime']:.2f}"
              f" (baseline/ort {row['baseline_over_onnxruntime']:.2f})", flush=True)
    import platform

    import onnxruntime
    import torch

    Path(args.output).write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(), "threads": 1, "rounds": args.rounds,
        "calls_per_cell": args.repeats, "baseline": f"{args.commit} for {list(BASELINE_FILES)}",
        "torch": torch.__version__, "numpy": np.__version__,
        "onnxruntime": onnxruntime.__version__, "results": results}, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
