"""A/B of TorchScript's profiling executor on CPU: the torch.jit backend's calls with
the executor's optimised plans (PyTorch's default) against its plain plan
(``torch.jit.optimized_execution(False)``, what the backend runs on CPU).

Two measures, both through the public path (``predict_proba`` / ``predict`` from NumPy):

* warm calls, interleaved in a shuffled order in one process, for a forest, XGBoost and
  a scaler + logistic regression at 1, 1,000 and 10,000 rows (1 and 2 threads);
* the first calls of a large program: an ONNX-ML linear classifier over 1,500 features,
  whose program holds one exact float32 step per feature (tens of thousands of ops).
  Each executor is timed in a fresh process: convert, then the first three one-row
  calls and the first two-row call.

Usage: PYTHONPATH=. python -m benchmarks.ab_jit_executor [--rounds 5] [--threads 1,2]
Writes benchmarks/results/jit_executor.json.
"""

import argparse
import json
import statistics
import subprocess
import sys
import time
import types
from pathlib import Path

import numpy as np

OUT = Path(__file__).parent / "results" / "jit_executor.json"
REPEATS = {1: 200, 1000: 20, 10_000: 4}


def _with_executor(container, optimized):
    """``container`` whose TorchScript runners call the executor as asked."""
    import torch
    from woodstar.backends.torch_backend import TorchRunner

    for runner in container._programs.values():
        def run_tensor(self, x, _optimized=optimized):
            with torch.jit.optimized_execution(_optimized):
                return TorchRunner.run_tensor(self, x)
        runner.run_tensor = types.MethodType(run_tensor, runner)
    return container


def _warm_models():
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    from benchmarks.models import MODEL_SPECS, load_model, test_rows

    models = {}
    for name in ("rf_100x8", "xgb_500x8"):
        spec = MODEL_SPECS[name]
        models[name] = (load_model(spec), test_rows(spec, 10_000))
    X = test_rows(MODEL_SPECS["rf_100x8"], 10_000)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    models["scaler_logreg"] = (make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y), X)
    return models


def warm_calls(rounds, threads):
    import random

    import woodstar

    results = []
    for name, (model, X) in _warm_models().items():
        for t in threads:
            pair = {opt: _with_executor(woodstar.convert(model, "torch.jit",
                                                         extra_config={"n_threads": t}), opt)
                    for opt in (True, False)}
            # the two plans give the same bits; the program is XGBoost's to float32
            # rounding (it sums in double), the others' to the bit
            got = [c.predict_proba(X[:1000]) for c in pair.values()]
            np.testing.assert_array_equal(got[0], got[1])
            np.testing.assert_allclose(got[0], model.predict_proba(X[:1000]), rtol=1e-6, atol=1e-6)
            for rows, repeats in REPEATS.items():
                Xr = np.ascontiguousarray(X[:rows])
                for container in pair.values():
                    for _ in range(3):
                        container.predict_proba(Xr)
                per_round = {True: [], False: []}
                for _ in range(rounds):
                    for opt in random.sample([True, False], 2):
                        start = time.perf_counter()
                        for _ in range(repeats):
                            pair[opt].predict_proba(Xr)
                        per_round[opt].append(1e3 * (time.perf_counter() - start) / repeats)
                ratios = [b / a for a, b in zip(per_round[True], per_round[False])]
                row = {"model": name, "threads": t, "rows": rows,
                       "optimized_ms": statistics.median(per_round[True]),
                       "plain_ms": statistics.median(per_round[False]),
                       "plain_over_optimized": [statistics.median(ratios), min(ratios), max(ratios)]}
                print(f"{name:14s} t={t} rows={rows:6d} optimized {row['optimized_ms']:.3f} ms "
                      f"plain {row['plain_ms']:.3f} ms ratio {row['plain_over_optimized'][0]:.2f} "
                      f"[{min(ratios):.2f}-{max(ratios):.2f}]", flush=True)
                results.append(row)
    return results


def _wide_graph(n_features):
    from onnx import TensorProto, helper

    rng = np.random.default_rng(0)
    node = helper.make_node(
        "LinearClassifier", ["X"], ["label", "probabilities"], domain="ai.onnx.ml",
        coefficients=rng.normal(size=3 * n_features).astype(np.float32).tolist(),
        intercepts=rng.normal(size=3).astype(np.float32).tolist(),
        post_transform="LOGISTIC", classlabels_ints=[0, 1, 2])
    graph = helper.make_graph(
        [node], "wide", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("label", TensorProto.INT64, [None]),
         helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, None])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", 1)])


def first_calls_child(optimized, n_features):
    """In a fresh process: seconds to convert, then each of the first calls."""
    import onnxruntime

    import woodstar

    graph = _wide_graph(n_features)
    X = np.random.default_rng(1).normal(size=(2, n_features)).astype(np.float32)
    start = time.perf_counter()
    container = _with_executor(woodstar.convert(graph, "torch.jit"), optimized)
    seconds = {"convert": time.perf_counter() - start}
    session = onnxruntime.InferenceSession(graph.SerializeToString(),
                                           providers=["CPUExecutionProvider"])
    for label, rows in (("1 row, 1st", X[:1]), ("1 row, 2nd", X[:1]), ("1 row, 3rd", X[:1]),
                        ("2 rows, 1st", X)):
        start = time.perf_counter()
        got = container.predict_proba(rows)
        seconds[label] = time.perf_counter() - start
        np.testing.assert_array_equal(got, session.run(None, {"X": rows})[1])
    print(json.dumps(seconds))


def first_calls(n_features, rounds):
    rows = []
    for r in range(rounds):
        for optimized in ((True, False) if r % 2 == 0 else (False, True)):
            out = subprocess.run(
                [sys.executable, "-m", "benchmarks.ab_jit_executor", "--first-calls-child",
                 str(int(optimized)), "--features", str(n_features)],
                check=True, capture_output=True, text=True).stdout
            seconds = json.loads(out.strip().splitlines()[-1])
            print(f"{n_features} features, {'optimized' if optimized else 'plain'}: "
                  + ", ".join(f"{k} {v:.2f} s" for k, v in seconds.items()), flush=True)
            rows.append({"features": n_features, "optimized": optimized, "seconds": seconds})
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--features", type=int, default=1500)
    parser.add_argument("--first-call-rounds", type=int, default=2)
    parser.add_argument("--first-calls-child", type=int, choices=(0, 1), help=argparse.SUPPRESS)
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    if args.first_calls_child is not None:
        return first_calls_child(bool(args.first_calls_child), args.features)
    threads = [int(t) for t in args.threads.split(",")]
    first = first_calls(args.features, args.first_call_rounds)
    warm = warm_calls(args.rounds, threads)
    Path(args.out).write_text(json.dumps({
        "date": time.strftime("%Y-%m-%d"), "warm": warm, "first_calls": first}, indent=1))
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
