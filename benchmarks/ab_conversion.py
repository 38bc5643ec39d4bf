"""Interleaved A/B of ``convert(model, "torch")`` for three tree models: a baseline copy
of the package (the files in ``BASELINE_FILES`` as they are at a commit, every other
file as in the working tree, so only those files' changes are measured) against the
working tree, each in its own process, the two alternating in a shuffled order. Each
process converts every model ``--repeats`` times, the models in a shuffled order on
every repeat, and reports the median seconds per model.

With ``--backends-cli``: the wall time of ``python -m woodstar backends --json``, the
package with ``CLI_BASELINE_FILES`` as at the commit against the working tree, the two
alternating in a shuffled order; both reports must be equal.

Usage: PYTHONPATH=. python -m benchmarks.ab_conversion [--commit HEAD] [--rounds 4]
       [--repeats 5] [--output benchmarks/results/conversion_time.json]
       PYTHONPATH=. python -m benchmarks.ab_conversion --backends-cli [--rounds 5]
"""

import argparse
import json
import os
import pickle
import platform
import random
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from benchmarks._processes import baseline_tree, run_child

ROOT = Path(__file__).resolve().parents[1]
BASELINE_FILES = ("woodstar/ir/tree_ensemble.py", "woodstar/ir/graph.py",
                  "woodstar/ir/graph_builder.py", "woodstar/ir/builder.py",
                  "woodstar/frontends/xgboost.py", "woodstar/frontends/lightgbm.py",
                  "woodstar/frontends/sklearn_trees.py")
CLI_BASELINE_FILES = ("woodstar/cli/backends.py", "woodstar/backends/compile_backend.py",
                      "woodstar/backends/onnx_backend.py", "woodstar/backends/tvm_backend.py",
                      "woodstar/backends/torchscript_backend.py")
N_FEATURES = 28


def _train():
    import lightgbm
    import xgboost
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier

    X, y = make_classification(n_samples=5000, n_features=N_FEATURES, n_informative=10,
                               n_redundant=7, random_state=0)
    X = X.astype(np.float32)
    return {
        "xgb_300x8": xgboost.XGBClassifier(n_estimators=300, max_depth=8, n_jobs=1,
                                           random_state=0).fit(X, y),
        "lgbm_300x255": lightgbm.LGBMClassifier(n_estimators=300, num_leaves=255,
                                                min_child_samples=5, n_jobs=1, verbose=-1,
                                                random_state=0).fit(X, y),
        "rf_100x8": RandomForestClassifier(100, max_depth=8, random_state=0, n_jobs=1).fit(X, y),
    }, X


def child(models_path, repeats):
    """One process: median seconds of ``convert(model, "torch")`` per model, the models
    interleaved; each container's answers checked against the source's first."""
    import torch

    torch.set_num_threads(1)
    import woodstar

    models, X = pickle.load(open(models_path, "rb"))
    for name, model in models.items():  # check, and warm the imports and caches
        got = woodstar.convert(model, "torch").predict_proba(X[:500])
        np.testing.assert_array_equal(got, model.predict_proba(X[:500]), err_msg=name)
    times = {name: [] for name in models}
    for _ in range(repeats):
        order = list(models)
        random.shuffle(order)
        for name in order:
            start = time.perf_counter()
            woodstar.convert(models[name], "torch")
            times[name].append(time.perf_counter() - start)
    print(json.dumps({name: statistics.median(v) for name, v in times.items()}))


def backends_cli(commit, rounds):
    """Median wall seconds of ``woodstar backends --json`` before and after."""
    with tempfile.TemporaryDirectory() as tmp:
        roots = {"before": baseline_tree(commit, Path(tmp) / "before", CLI_BASELINE_FILES),
                 "after": ROOT}
        times, reports = {"before": [], "after": []}, {}
        for r in range(rounds):
            order = list(roots)
            random.shuffle(order)
            for key in order:
                env = dict(os.environ, PYTHONPATH=str(roots[key]))
                start = time.perf_counter()
                out = subprocess.run([sys.executable, "-m", "woodstar", "backends", "--json"],
                                     env=env, cwd=roots[key], capture_output=True, text=True,
                                     check=True)
                times[key].append(time.perf_counter() - start)
                reports[key] = json.loads(out.stdout)
            print(f"round {r + 1}: " + json.dumps({k: round(v[-1], 2) for k, v in times.items()}),
                  flush=True)
    for key, root in roots.items():  # the shipped routing table lies in each package
        table = reports[key]["routing_table"]
        table["path"] = table["path"].replace(str(root), "<package>")
    if reports["before"] != reports["after"]:
        raise AssertionError(f"the reports differ:\n{reports['before']}\n{reports['after']}")
    ratios = [a / b for a, b in zip(times["after"], times["before"])]
    return {"date": time.strftime("%Y-%m-%d"), "commit": commit, "rounds": rounds,
            "baseline_files": list(CLI_BASELINE_FILES),
            "load_average": [round(v, 1) for v in os.getloadavg()],
            "before_s": round(statistics.median(times["before"]), 2),
            "after_s": round(statistics.median(times["after"]), 2),
            "before_range_s": [round(min(times["before"]), 2), round(max(times["before"]), 2)],
            "after_range_s": [round(min(times["after"]), 2), round(max(times["after"]), 2)],
            "after_over_before": round(statistics.median(ratios), 3)}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--commit", default="HEAD")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--output", default=str(ROOT / "benchmarks/results/conversion_time.json"))
    parser.add_argument("--backends-cli", action="store_true",
                        help="time `woodstar backends --json` instead")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--models", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args.models, args.repeats)
    if args.backends_cli:
        row = backends_cli(args.commit, args.rounds)
        print(json.dumps(row))
        path = Path(args.output)
        data = json.loads(path.read_text()) if path.exists() else {}
        data["backends_cli"] = row
        path.write_text(json.dumps(data, indent=1) + "\n")
        return print(f"wrote backends_cli to {path}")

    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        models_path = tmp / "models.pkl"
        models_path.write_bytes(pickle.dumps(_train()))
        roots = {"before": baseline_tree(args.commit, tmp / "before", BASELINE_FILES), "after": ROOT}
        runs = {"before": [], "after": []}
        for r in range(args.rounds):
            order = list(roots)
            random.shuffle(order)
            for key in order:
                runs[key].append(run_child("benchmarks.ab_conversion", roots[key], models_path, args.repeats))
            print(f"round {r + 1}: " + json.dumps({k: v[-1] for k, v in runs.items()}),
                  flush=True)
    results = []
    for name in runs["after"][0]:
        before = [run[name] for run in runs["before"]]
        after = [run[name] for run in runs["after"]]
        ratios = [a / b for a, b in zip(after, before)]
        results.append({
            "model": name, "backend": "torch",
            "before_s": round(statistics.median(before), 4),
            "after_s": round(statistics.median(after), 4),
            "after_over_before": round(statistics.median(ratios), 3),
            "ratio_range": [round(min(ratios), 3), round(max(ratios), 3)]})
        print(json.dumps(results[-1]))
    import torch

    path = Path(args.output)
    earlier = json.loads(path.read_text()) if path.exists() else {}
    path.write_text(json.dumps({
        **({"backends_cli": earlier["backends_cli"]} if "backends_cli" in earlier else {}),
        "date": time.strftime("%Y-%m-%d"), "cpu": platform.processor() or platform.machine(),
        "load_average": [round(v, 1) for v in os.getloadavg()],
        "torch": torch.__version__, "numpy": np.__version__, "commit": args.commit,
        "rounds": args.rounds, "repeats": args.repeats,
        "baseline_files": list(BASELINE_FILES), "results": results}, indent=1) + "\n")
    print(f"wrote {args.output}")


if __name__ == "__main__":
    main()
