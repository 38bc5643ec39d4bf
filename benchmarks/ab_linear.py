"""A/B for models without trees (linear models and pipelines of scalers): each way
woodstar can run them against the peers, on the public path (``predict_proba`` from
float32 NumPy), interleaved in a shuffled order, answers checked against the native
model first.

Woodstar candidates: the torch backend's NumPy route (its default on CPU), the Torch
program (``small_batch_rows=0``), and the TorchScript and ONNX Runtime backends (the
whole pipeline exported). Peers: the native model and ONNX Runtime through skl2onnx.

Usage: PYTHONPATH=. python -m benchmarks.ab_linear [models] [--threads 1,2]
Writes benchmarks/results/linear.json (read by the report).
"""

import argparse
from pathlib import Path

import torch

import woodstar
from benchmarks._ab import check_and_warm, interleaved_median_ms, report_row, write_results
from benchmarks.candidates import NotAvailable, _native, _onnxruntime, as_proba
from benchmarks.models import MODEL_SPECS, load_model, test_rows

ROWS = (1, 10, 100, 1000, 10000, 100000)
OUT = Path(__file__).parent / "results" / "linear.json"
WOODSTAR = {"numpy-route": ("torch", {}), "torch-program": ("torch", {"small_batch_rows": 0}),
            "torchscript": ("torch.jit", {}), "onnx": ("onnx", {})}


def _candidates(spec, model, threads):
    fns = {}
    for key, (backend, config) in WOODSTAR.items():
        try:
            converted = woodstar.convert(model, backend, extra_config={"n_threads": threads, **config})
        except Exception as error:  # noqa: BLE001  (a missing backend is reported, not fatal)
            print(f"  {key}: not available ({type(error).__name__}: {error})")
            continue
        fns[key] = converted.predict_proba
    for make in (_native, _onnxruntime):
        candidate = make(spec, model)
        try:
            fns[candidate.name] = candidate.build(threads).fn
        except NotAvailable as error:
            print(f"  {candidate.name}: not available ({error})")
    return fns


def measure(names, threads_list, repeats, rows_list=ROWS):
    results = []
    for name in names:
        spec = MODEL_SPECS[name]
        model = load_model(spec)
        for threads in threads_list:
            torch.set_num_threads(threads)
            fns = _candidates(spec, model, threads)
            for rows in rows_list:
                X = test_rows(spec, rows)
                expected = as_proba(model.predict_proba(X), spec.n_classes)
                # The peers compute in float32.
                check_and_warm(fns, X, expected, as_proba, spec.n_classes,
                               lambda key: 1e-12 if key in WOODSTAR else 1e-5)
                rounds = repeats if rows < 10000 else max(5, repeats // 4)
                row = {"model": name, "threads": threads, "rows": rows, "repeats": rounds,
                       "median_ms": interleaved_median_ms(fns, X, rounds)}
                results.append(row)
                report_row(row, digits=4)
    return results


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=["scaler_logreg"])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--repeats", type=int, default=60)
    parser.add_argument("--rows", default=",".join(map(str, ROWS)))
    args = parser.parse_args(argv)
    threads = [int(t) for t in args.threads.split(",")]
    rows = [int(r) for r in args.rows.split(",")]
    results = measure(args.models, threads, args.repeats, rows)
    write_results(OUT, results)


if __name__ == "__main__":
    main()
