"""A/B of the CPU routes (the compiled walk, ONNX Runtime's tree kernel from the IR,
the NumPy walk) against the Torch program, on the public path (``converted.predict_proba`` from
float32 NumPy), interleaved in a shuffled order, answers checked against the native
model first. Also times the native model
and, where installed, ONNX Runtime through skl2onnx/onnxmltools at the same rows.

Usage: PYTHONPATH=. python -m benchmarks.ab_small_batches [models] [--threads 1,2]
Writes benchmarks/results/small_batches.json (read by the report).
"""

import argparse
from pathlib import Path

import torch

import woodstar
from woodstar.runtimes import onnx_ml
from benchmarks._ab import check_and_warm, interleaved_median_ms, report_row, write_results
from benchmarks.candidates import NotAvailable, _native, _onnxruntime, as_proba
from benchmarks.models import MODEL_SPECS, load_model, test_rows

ROWS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 1024)
OUT = Path(__file__).parent / "results" / "small_batches.json"


def _peers(spec, model, threads):
    """The harness's own peer builders (same conversions and thread settings)."""
    peers = {}
    for make in (_native, _onnxruntime):
        candidate = make(spec, model)
        try:
            peers[candidate.name] = candidate.build(threads).fn
        except NotAvailable:
            pass
    return peers


def measure(names, threads_list, repeats, rows_list=ROWS, skip=()):
    results = []
    for name in names:
        spec = MODEL_SPECS[name]
        model = load_model(spec)
        for threads in threads_list:
            torch.set_num_threads(threads)
            routes = {}
            for route in ("c-walk", "onnx-ml", "numpy-walk"):
                routes[route] = woodstar.convert(model, "torch", extra_config={
                    "n_threads": threads, "small_batch_rows": max(rows_list)})
            routes["torch"] = woodstar.convert(model, "torch", extra_config={
                "n_threads": threads, "small_batch_rows": 0})
            # The container's own choice is the first route that takes the model; the
            # others are forced, for every row count (single rows included).
            for route, name_in_container in (("onnx-ml", "onnx-ml"), ("numpy-walk", "numpy")):
                routes[route]._cpu_route = routes[route]._single_row_route = name_in_container
            if routes["c-walk"]._cpu_route != "c-walk":
                del routes["c-walk"]  # no C compiler, or a model it does not take
            if not (onnx_ml.available() and onnx_ml.OnnxMlTrees.supports(routes["torch"].ir.ensemble)):
                del routes["onnx-ml"]
            for route in skip:
                routes.pop(route, None)
            fns = {k: c.predict_proba for k, c in routes.items()}
            fns.update(_peers(spec, model, threads))
            strategy = routes["torch"].strategy
            for rows in rows_list:
                X = test_rows(spec, rows)
                expected = as_proba(model.predict_proba(X), spec.n_classes)
                # XGBoost sums in float32 (woodstar in float64); peers convert to float32.
                check_and_warm(fns, X, expected, as_proba, spec.n_classes,
                               lambda key: 1e-12 if key in routes and spec.library != "xgboost"
                               else 1e-5)
                row = {"model": name, "threads": threads, "rows": rows, "repeats": repeats,
                       "n_nodes": int(routes["torch"].ir.ensemble.n_nodes), "torch_strategy": strategy,
                       "median_ms": interleaved_median_ms(fns, X, repeats)}
                results.append(row)
                report_row(row)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=["rf_100x8", "gbdt_100x3", "lgbm_multi10",
                                                       "rf_50x20", "xgb_500x8", "lgbm_500x256",
                                                       "rf_wide500"])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=40)
    parser.add_argument("--rows", default=",".join(map(str, ROWS)))
    parser.add_argument("--skip", default="", help="routes not to time, e.g. numpy-walk")
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    rows = [int(r) for r in args.rows.split(",")]
    results = measure(args.models, threads, args.repeats, rows, [s for s in args.skip.split(",") if s])
    write_results(OUT, results, keep_earlier=True)


if __name__ == "__main__":
    main()
