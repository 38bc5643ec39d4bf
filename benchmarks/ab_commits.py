"""End-to-end A/B of two commits of woodstar on one benchmark model: each commit is
exported (git archive) to a temporary folder and measured in its own subprocess,
alternating A/B in a shuffled order, so both see the same machine load.

Usage: PYTHONPATH=. python -m benchmarks.ab_commits BASE_COMMIT HEAD [model] [rows] [threads]
"""

import json
import random
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

CHILD = r"""
import json, sys, time, pickle
import numpy as np, torch
sys.path.insert(0, sys.argv[1]); sys.path.insert(1, sys.argv[2])
from benchmarks.models import MODEL_SPECS, load_model, test_rows
import woodstar
assert woodstar.__file__.startswith(sys.argv[1]), woodstar.__file__
spec = MODEL_SPECS[sys.argv[3]]; rows = int(sys.argv[4]); threads = int(sys.argv[5])
torch.set_num_threads(threads)
model = load_model(spec); X = test_rows(spec, rows)
start = time.perf_counter()
converted = woodstar.convert(model, extra_config={"n_threads": threads})
convert_s = time.perf_counter() - start
ref = model.predict_proba(X); got = converted.predict_proba(X)
times = []
for _ in range(5):
    t = time.perf_counter(); converted.predict_proba(X); times.append(time.perf_counter() - t)
print(json.dumps({"median_s": float(np.median(times)), "convert_s": convert_s,
                  "strategy": converted.strategy, "max_abs_diff": float(np.abs(ref - got).max())}))
"""


def main(base, head, model="rf_100x8", rows=10_000, threads=1, rounds=5):
    out = {}
    with tempfile.TemporaryDirectory() as tmp:
        trees = {}
        for commit in (base, head):
            folder = Path(tmp) / commit
            folder.mkdir()
            archive = subprocess.run(["git", "archive", commit, "woodstar"], cwd=ROOT,
                                     capture_output=True, check=True).stdout
            subprocess.run(["tar", "-x", "-C", str(folder)], input=archive, check=True)
            trees[commit] = folder
        results = {base: [], head: []}
        for _ in range(rounds):
            for commit in random.sample([base, head], 2):
                text = subprocess.run([sys.executable, "-c", CHILD, str(trees[commit]), str(ROOT),
                                       model, str(rows), str(threads)], capture_output=True,
                                      text=True, check=True).stdout
                results[commit].append(json.loads(text.strip().splitlines()[-1]))
        for commit, runs in results.items():
            med = statistics.median(r["median_s"] for r in runs)
            out[commit] = med
            print(f"{commit}: {model} {rows} rows {threads} thread(s): median {med * 1e3:.1f} ms "
                  f"(strategy {runs[0]['strategy']}, max |diff| {runs[0]['max_abs_diff']:.1e}, "
                  f"convert {statistics.median(r['convert_s'] for r in runs):.2f} s)")
    print(f"speed-up {out[base] / out[head]:.2f}x")


if __name__ == "__main__":
    a = sys.argv[1:]
    main(a[0], a[1], *(a[2:3] or ["rf_100x8"]), *[int(v) for v in a[3:5]])
