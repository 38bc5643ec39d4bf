"""Choose a tree strategy for a model (its depth, the device, backend, threads) from evidence.

The thresholds live in ``routing_table.json`` next to this module, written by the
benchmark suite (``benchmarks/report.py``; method and numbers in docs/benchmarks.md).
Per device, backend, thread count and measured batch size, the table splits the
models' deepest-tree depth into regions, each with the strategy that won every
measured model in it and the ranking used as fallbacks when a strategy refuses the
model (memory budget). A boundary sits only between two measured depths; beyond the
deepest measured model the last region holds, marked as an extrapolation.

Lookup: the entry with the nearest thread count, then the nearest measured batch size
(log scale), then the first region whose ``depth_le`` covers the model's depth. With
no table, or no entry for the device, the depth rule of Hummingbird is the fallback.
A user's explicit ``tree_implementation`` always wins.

The table also ranks the backends for ``backend="auto"`` (read by
``woodstar.backends.ranking``). Every backend reads the torch strategy entries when it
has none of its own.
"""

import functools
import json
import math
import sys
from pathlib import Path

import numpy as np

from ..exceptions import MissingConverter
from ..ir.tree_ensemble import TreeEnsemble
from .registry import get_strategy, strategy_names

__all__ = ["choose_strategy", "load_table", "lookup", "small_batch_rows", "cache_part_rows",
           "TABLE_PATH", "GEMM_MAX_DEPTH", "PERFECT_MAX_DEPTH", "SMALL_BATCH_STEPS"]

TABLE_PATH = Path(__file__).with_name("routing_table.json")
GEMM_MAX_DEPTH = 3        # fallback rule only (no table entry)
PERFECT_MAX_DEPTH = 10    # fallback rule only
DEFAULT_ROWS = 10_000     # the batch assumed when a caller does not say

# The NumPy walk (numpy_walk.py) costs about a microsecond per NumPy call and level,
# growing with rows x trees x depth, while a Torch program pays about 8 us per
# operator whatever the rows. benchmarks/ab_small_batches.py (1 and 2 threads, 1..128
# rows, six models) had the walk ahead everywhere except the 1000-tree depth-19
# LightGBM model from 16 rows (~300k steps: a tie at one thread, behind from 32 rows)
# and the 500-tree 256-leaf one at 64+ rows and one thread; the limit sits at that
# crossover (docs/benchmarks.md, "Small batches").
SMALL_BATCH_STEPS = 300_000   # rows x trees x depth
SMALL_BATCH_MAX_ROWS = 128    # the largest batch measured
# The compiled walk (c_walk.py) and ONNX Runtime's tree kernel (onnx_ml.py) beat the
# Torch program at every measured size, 1 to 16384 rows (docs/benchmarks.md, "CPU
# routes"): they take every batch.


# A tensor program walks trees one op at a time over (rows x trees) temporaries; once
# those outgrow the cache every op runs at memory speed. On the CPU a program with
# trees therefore takes parts whose estimated temporaries fit this many bytes: 2-4.6x
# faster at 100 000 rows on TorchScript, 1.1-1.7x on torch.compile and TVM, ONNX
# Runtime's tree kernel unchanged (docs/benchmarks.md, "Exporting backends:
# cache-sized batches").
CACHE_PART_BYTES = 8 << 20
CACHE_PART_MIN_ROWS = 256  # below this, per-op overheads outweigh the cache


def cache_part_rows(bytes_per_row: int) -> int:
    """The rows of one cache-sized part of a program that needs ``bytes_per_row``."""
    return max(CACHE_PART_MIN_ROWS, CACHE_PART_BYTES // max(1, bytes_per_row))


@functools.lru_cache(maxsize=4)
def _read(path: str):
    try:
        return json.loads(Path(path).read_text())
    except (OSError, ValueError):
        return None


def load_table(path=None):
    """The routing table (a dict), or None when the file is missing or unreadable.
    Without a path: this machine's calibrated table (``woodstar calibrate``) when one
    exists and is valid, else the shipped one; an unusable calibrated table is ignored
    with a ``CalibrationWarning`` (``woodstar.calibration``)."""
    if path is None:
        from ..calibration import calibrated_table

        table = calibrated_table()
        if table is not None:
            return table
    return _read(str(path or TABLE_PATH))


def _entries(table, device, backend):
    entries = [e for e in (table or {}).get("entries", []) if e.get("device") == device]
    own = [e for e in entries if e.get("backend") == backend]
    return own or [e for e in entries if e.get("backend") == "torch"]


def lookup(table, depth: int, n_rows: int, n_threads: int, device="cpu", backend="torch"):
    """Strategy names, best first, for this model depth and call; None without evidence."""
    entries = _entries(table, device, backend)
    if not entries:
        return None
    threads = min({e["threads"] for e in entries}, key=lambda t: (abs(t - n_threads), t))
    entries = [e for e in entries if e["threads"] == threads]
    rows = max(1, int(n_rows))
    entry = min(entries, key=lambda e: (abs(math.log(e["batch"]) - math.log(rows)), e["batch"]))
    for region in entry["regions"]:
        if region.get("depth_le") is None or depth <= region["depth_le"]:
            return [region["strategy"], *[s for s in region["ranking"] if s != region["strategy"]]]
    return None


def _depth_rule(depth):
    if depth <= GEMM_MAX_DEPTH:
        return ["gemm", "perf_tree_trav", "tree_trav"]
    if depth <= PERFECT_MAX_DEPTH:
        return ["perf_tree_trav", "tree_trav"]
    return ["tree_trav"]


def choose_strategy(ens: TreeEnsemble, requested, dtype: str, budget_bytes: int, owner: str,
                    n_rows=None, n_threads=None, device="cpu", backend="torch", table=None):
    """The strategy class to use; a user's explicit request always wins (or fails
    with the reason it cannot hold the model)."""
    if requested is not None:
        strategy = get_strategy(requested, owner)
        reason = strategy.refusal(ens, dtype, budget_bytes)
        if reason:
            raise MissingConverter(
                f"Cannot convert {owner}: tree_implementation {requested!r} cannot hold this "
                f"model ({reason}); use 'tree_trav' or raise extra_config['memory_budget_bytes'].")
        return strategy
    depth = int(np.max(ens.tree_depths()))
    if table is None:
        table = load_table()
    if n_threads is None:
        import torch

        n_threads = torch.get_num_threads()
    preferences = lookup(table, depth, n_rows or DEFAULT_ROWS, n_threads, device, backend)
    if preferences is None:
        preferences = _depth_rule(depth)
    registered = strategy_names()
    for name in [p for p in preferences if p in registered] + ["tree_trav"]:
        strategy = get_strategy(name, owner)
        if strategy.refusal(ens, dtype, budget_bytes) is None:
            return strategy
    return get_strategy("tree_trav", owner)


def small_batch_rows(ens: TreeEnsemble, route: str = "numpy") -> int:
    """Rows up to which the torch backend on CPU runs its CPU ``route``
    ("c-walk", "onnx-ml" or "numpy") for ``ens``."""
    if route in ("onnx-ml", "c-walk"):
        return sys.maxsize
    steps_per_row = ens.n_trees * max(1, int(np.max(ens.tree_depths())))
    return int(min(SMALL_BATCH_MAX_ROWS, SMALL_BATCH_STEPS // steps_per_row))
