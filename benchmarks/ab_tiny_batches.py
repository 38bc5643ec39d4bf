"""A/B of perf_tree_trav's tiny-batch path (every node test at once, one gather per
level) against its level walk, interleaved in a shuffled order, at 1/10/100 rows, one
thread, answers checked against the native model.

Usage: PYTHONPATH=. python -m benchmarks.ab_tiny_batches rf_100x8 sweep_rf_d4
"""

import random
import sys
import time

import numpy as np
import torch

import woodstar
from benchmarks.models import MODEL_SPECS, load_model, test_rows


def main(names, repeats=30):
    torch.set_num_threads(1)
    for name in names:
        spec = MODEL_SPECS[name]
        model = load_model(spec)
        converted = woodstar.convert(model, extra_config={
            "tree_implementation": "perf_tree_trav", "n_threads": 1})
        trees = converted._program("float32").module.trees
        default = trees.dense_max_elements
        nodes = trees.level_columns.shape[0]
        for n in (1, 10, 100):
            X = test_rows(spec, n)
            ref = model.predict_proba(X)
            times = {"all-nodes": [], "walk": []}
            for _ in range(repeats):
                order = list(times)
                random.shuffle(order)
                for k in order:
                    trees.dense_max_elements = 1 << 62 if k == "all-nodes" else 0
                    start = time.perf_counter()
                    out = converted.predict_proba(X)
                    times[k].append(time.perf_counter() - start)
                    assert np.abs(out - ref).max() < 1e-5
            med = {k: np.median(v) * 1e6 for k, v in times.items()}
            print(f"{name} rows={n} rows*nodes={n * nodes} all-nodes {med['all-nodes']:.0f} us, "
                  f"walk {med['walk']:.0f} us, ratio {med['all-nodes'] / med['walk']:.2f}; "
                  f"default takes {'all-nodes' if n * nodes <= default else 'walk'}")
        trees.dense_max_elements = default


if __name__ == "__main__":
    main(sys.argv[1:] or ["rf_100x8", "sweep_rf_d4"])
