"""What ``extra_config["conversion_cache"]`` saves: ``convert(model, backend)`` then one
call, in a fresh process each time, three ways: without the cache (``off``), with an
empty cache folder (``miss``: converted, then saved there) and with the folder the miss
filled (``hit``: loaded). Every process checks its answers against the source's first.
Rounds run the (model, backend, way) cells in a shuffled order; a round's hit reads the
folder its own miss wrote. Reported per cell: the median seconds of the conversion and
first call inside the process, and of the whole process (interpreter, imports,
training data load included), over the rounds.

Usage: PYTHONPATH=. python -m benchmarks.ab_conversion_cache [--rounds 3]
       [--models rf_100x8,xgb_500x8] [--backends tvm,onnx,torch.jit]
       [--output benchmarks/results/conversion_cache.json]
"""

import argparse
import json
import os
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
WAYS = ("off", "miss", "hit")


def child(model_name, backend, folder):
    import numpy as np

    import woodstar
    from benchmarks.models import MODEL_SPECS, load_model, test_rows

    spec = MODEL_SPECS[model_name]
    model = load_model(spec)
    if "n_jobs" in model.get_params():  # a forest's threads add its trees in any order
        model.set_params(n_jobs=1)
    X = test_rows(spec, 200)
    config = {"conversion_cache": folder} if folder != "-" else {}
    start = time.perf_counter()
    converted = woodstar.convert(model, backend, extra_config=config)
    converted.predict_proba(X[:1])
    seconds = time.perf_counter() - start
    got, expected = converted.predict_proba(X), model.predict_proba(X)
    tolerance = 1e-5 if spec.library == "xgboost" else 0.0  # the tensor programs' float64 sums
    np.testing.assert_allclose(got, expected, rtol=0, atol=tolerance)
    print(json.dumps({"convert_s": seconds}))


def _run(model_name, backend, folder):
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-m", "benchmarks.ab_conversion_cache", "--child",
                           model_name, backend, folder], cwd=ROOT, capture_output=True,
                          text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})
    wall = time.perf_counter() - start
    if done.returncode:
        raise RuntimeError(f"{model_name} {backend}: {done.stderr[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    return {"convert_s": result["convert_s"], "process_s": wall}


def measure(models, backends, rounds):
    runs = {}
    for round_index in range(rounds):
        folders = {(m, b): tempfile.mkdtemp(prefix="woodstar-cache-ab-") for m in models for b in backends}
        cells = [(m, b) for m in models for b in backends]
        random.shuffle(cells)
        for model_name, backend in cells:
            order = ["off", "miss"]
            random.shuffle(order)  # off and miss in either order; the hit after the miss
            order.insert(order.index("miss") + 1, "hit")
            for way in order:
                folder = "-" if way == "off" else folders[(model_name, backend)]
                result = _run(model_name, backend, folder)
                runs.setdefault(f"{model_name} {backend} {way}", []).append(result)
                print(f"round {round_index + 1} {model_name:10s} {backend:9s} {way:4s} "
                      f"convert {result['convert_s']:.2f}s process {result['process_s']:.2f}s",
                      flush=True)
    return runs


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--models", default="rf_100x8,xgb_500x8")
    parser.add_argument("--backends", default="tvm,onnx,torch.jit")
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/conversion_cache.json"))
    parser.add_argument("--child", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(*args.child)
        return
    runs = measure(args.models.split(","), args.backends.split(","), args.rounds)
    summary = {key: {field: statistics.median(r[field] for r in results)
                     for field in ("convert_s", "process_s")} for key, results in runs.items()}
    Path(args.output).write_text(json.dumps({
        "meta": {"date": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "machine": platform.machine(), "python": platform.python_version(),
                 "command": "python -m benchmarks.ab_conversion_cache " + " ".join(argv or sys.argv[1:]),
                 "rounds": args.rounds},
        "median": summary, "runs": runs}, indent=1) + "\n")
    for key, cell in sorted(summary.items()):
        print(f"{key:32s} convert {cell['convert_s']:.2f}s  process {cell['process_s']:.2f}s")


if __name__ == "__main__":
    main()
