"""Measure this machine's routing cells (``woodstar calibrate``).

Forests of random trees, one per depth in ``DEPTHS`` (100 trees each, as the routing
sweep's forests; built directly as IR, so no training library is needed), are lowered
with every registered tree strategy and timed as the torch backend runs them on CPU:
NumPy rows in, the Torch program, NumPy scores out, in batches that keep a call's
intermediates under the memory budget. Per batch size and thread count the
strategies are interleaved in a shuffled order on every repeat; median and MAD per
cell. The depth regions are built by ``lowering/_routing_evidence.py``, the code that
builds the shipped table from the benchmark's results.

The run keeps to a time budget: cells go in order of batch size (smallest first, then
depth, then threads), each cell's time is predicted from the same forest and strategy
at the previous batch size, and a cell that would not finish in what is left is
skipped and recorded in the table (``skipped``). A strategy ``HOPELESS`` times slower
than the fastest one at the previous batch size is not timed at the larger one (it
cannot come within the routing margin there; ``not_timed`` says so), which keeps the
all-nodes ``gemm`` from spending the budget on deep forests at 10 000 rows. Unlike the benchmark, which times the
converted model end to end with its input checks, this times the lowered program
alone: the fixed per-call cost every strategy shares is left out.
"""

import os
import random
import statistics
import time

import numpy as np

__all__ = ["DEPTHS", "BATCHES", "N_TREES", "random_forest", "default_threads", "measure",
           "build_table"]

DEPTHS = (2, 3, 4, 5, 6, 8, 10, 12)
BATCHES = (1, 100, 10_000)
N_TREES = 100
N_FEATURES = 28
SPLIT_PROBABILITY = 0.85     # below the top levels, so deep trees are not all full
MEMORY_BUDGET = 256 * 2**20  # per model and per call's intermediates
HOPELESS = 5.0  # a strategy this many times the fastest at the previous batch is not timed again


def random_forest(depth: int, n_trees: int = N_TREES, n_features: int = N_FEATURES, seed: int = 0):
    """A validated TreeEnsemble of ``n_trees`` random trees whose deepest tree has
    depth ``depth`` (every tree's leftmost path reaches it; other nodes split with
    probability ``SPLIT_PROBABILITY`` below level 2), thresholds drawn from the
    standard normal the timed rows come from."""
    from .ir.builder import EnsembleBuilder

    rng = np.random.default_rng(seed)
    builder = EnsembleBuilder(leaf_width=1)
    for _ in range(n_trees):
        feature, threshold, left, right, level, leftmost = [], [], [], [], [0], [True]
        i = 0
        while i < len(level):
            split = level[i] < depth and (leftmost[i] or level[i] < 2
                                          or rng.random() < SPLIT_PROBABILITY)
            feature.append(int(rng.integers(n_features)) if split else 0)
            threshold.append(float(rng.normal()) if split else 0.0)
            if split:
                left.append(len(level))
                right.append(len(level) + 1)
                level += [level[i] + 1, level[i] + 1]
                leftmost += [leftmost[i], False]
            else:
                left.append(-1)
                right.append(-1)
            i += 1
        builder.add_tree(feature=feature, threshold=threshold, left=left, right=right,
                         leaf_value=rng.normal(size=len(level)))
    return builder.build(n_features=n_features, n_outputs=1)


def default_threads():
    """1, 2 and every logical CPU (the thread counts a call is routed by)."""
    n = os.cpu_count() or 1
    return tuple(sorted({1, min(2, n), n}))


def _program(ens, strategy_cls):
    """NumPy rows -> NumPy scores through the lowered Torch program, batched so one
    call's intermediates stay under the memory budget (as the container does)."""
    import torch

    from .lowering import lower_tree_ensemble

    module = lower_tree_ensemble(ens, strategy_cls, "float32")
    per_row = max(1, strategy_cls.estimate_bytes(ens, 1, "float32"))
    step = max(1, MEMORY_BUDGET // per_row)

    def run(X):
        with torch.inference_mode():
            parts = [module(torch.from_numpy(X[i:i + step]))[0].numpy()
                     for i in range(0, len(X), step)]
        return parts[0] if len(parts) == 1 else np.concatenate(parts)
    return run


def measure(budget, depths=DEPTHS, batches=BATCHES, threads=None, n_trees=N_TREES, repeats=3,
            min_time_s=0.005, seed=0):
    """Time every strategy on every (batch, threads, depth) cell within ``budget`` (a
    ``woodstar._budget.Budget``, which also shows the progress).
    Returns results in the benchmark's cell format, with what was skipped or refused."""
    import torch

    from .lowering import get_strategy, strategy_names

    threads = tuple(threads or default_threads())
    rng = random.Random(seed)
    X_all = np.random.default_rng(seed).standard_normal((max(batches), N_FEATURES)).astype(np.float32)
    forests, programs, refused = {}, {}, []
    models, cells, skipped, not_timed, hopeless = {}, [], [], [], set()
    previous = {}  # (threads, depth, strategy) -> (batch, median seconds)
    saved_threads = torch.get_num_threads()
    try:
        for batch in sorted(batches):
            X = X_all[:batch]
            for depth in depths:
                for t in threads:
                    torch.set_num_threads(t)
                    name = f"random_d{depth}"
                    where = f"{t} thread(s), {batch} rows, depth {depth}"
                    budget.tick(where)
                    if depth not in forests:
                        forests[depth] = random_forest(depth, n_trees, seed=seed + depth)
                        models[name] = {"description": f"{n_trees} random trees, depth {depth}",
                                        "max_depth": depth, "n_trees": n_trees}
                    ens = forests[depth]
                    active = []
                    for strategy in strategy_names():
                        cls = get_strategy(strategy)
                        key = (depth, strategy)
                        if key not in programs:
                            reason = cls.refusal(ens, "float32", MEMORY_BUDGET)
                            if reason:
                                programs[key] = None
                                refused.append(f"{strategy} at depth {depth}: {reason}")
                            else:
                                programs[key] = _program(ens, cls)
                        if programs[key] is None:
                            continue
                        if (t, depth, strategy) in hopeless:
                            continue
                        last = previous.get((t, depth, strategy))
                        fastest = min((v[1] for (tt, d, _), v in previous.items()
                                       if tt == t and d == depth and last and v[0] == last[0]),
                                      default=None)
                        if last is not None and last[1] > HOPELESS * fastest:
                            hopeless.add((t, depth, strategy))
                            not_timed.append(f"{strategy}, depth {depth}, {t} thread(s), from "
                                             f"{batch} rows: {last[1] / fastest:.0f}x the "
                                             f"fastest at {last[0]} rows")
                            continue
                        predicted = 0.0 if last is None else last[1] * batch / last[0]
                        cost = 2 * predicted + repeats * max(min_time_s, predicted)
                        if not budget.fits(cost):
                            skipped.append(f"{strategy}, depth {depth}, {t} thread(s), {batch} "
                                           f"rows: predicted {cost:.1f} s, {budget.left():.0f} s left")
                            continue
                        run = programs[key]
                        start = time.perf_counter()
                        run(X)  # warm-up, untimed
                        first = time.perf_counter() - start
                        inner = min(1000, max(1, int(np.ceil(min_time_s / max(first, 1e-6)))))
                        active.append([strategy, run, inner, []])
                    for _ in range(repeats):
                        rng.shuffle(active)
                        for strategy, run, inner, times in active:
                            start = time.perf_counter()
                            for _ in range(inner):
                                run(X)
                            times.append((time.perf_counter() - start) / inner)
                    for strategy, run, inner, times in active:
                        med = statistics.median(times)
                        mad = statistics.median([abs(v - med) for v in times])
                        previous[(t, depth, strategy)] = (batch, med)
                        cells.append({"model": name, "threads": t, "batch": batch,
                                      "candidate": f"woodstar[{strategy}/torch]", "kind": "woodstar",
                                      "strategy": strategy, "backend": "torch", "status": "ok",
                                      "median_s": med, "mad_s": mad, "times_s": times})
                    budget.tick(where, 1)
    finally:
        torch.set_num_threads(saved_threads)
    return {"models": models, "cells": cells, "skipped": skipped, "refused": refused,
            "not_timed": not_timed,
            "depths": list(depths), "batches": sorted(batches), "threads": list(threads),
            "repeats": repeats, "n_trees": n_trees}


def build_table(results, budget_s, elapsed_s, shipped=None):
    """A calibrated routing table (``woodstar.calibration`` validates and writes it):
    this machine's depth regions for the torch program, its provenance, and from the
    shipped table the other backends' own entries and the backend ranking for
    ``backend="auto"`` (calibration times the torch program's strategies only)."""
    from . import calibration
    from .lowering._routing_evidence import MARGIN, routing_entries

    shipped = shipped or {}
    return {
        "version": calibration.SCHEMA_VERSION,
        "kind": calibration.KIND,
        "about": ("Written by `woodstar calibrate` on this machine; read by "
                  "woodstar/lowering/routing.py instead of the shipped table while machine "
                  "and woodstar version match (woodstar/calibration.py). Same lookup and "
                  "regions as the shipped table; cells are the lowered Torch program on "
                  f"{results['n_trees']} random trees per depth."),
        "margin": MARGIN,
        "machine": calibration.machine(),
        "made": calibration.now(),
        "budget_s": budget_s,
        "elapsed_s": round(elapsed_s, 1),
        "measured": {k: results[k] for k in ("depths", "batches", "threads", "repeats", "n_trees")},
        "skipped": results["skipped"],
        "refused": results["refused"],
        "not_timed": results["not_timed"],
        "entries": routing_entries(results) + [
            e for e in shipped.get("entries", []) if e.get("backend") != "torch"],
        "backends": shipped.get("backends") or {"entries": []},
        "backends_from": "shipped table (calibration does not time backends)",
        "other_backends_from": "shipped table (entries of backends other than torch)",
    }
