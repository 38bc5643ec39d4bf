"""``backend="auto"``: the installed backend the benchmark ranked fastest.

The routing table (``woodstar/lowering/routing_table.json``) also ranks the backends
(``backends``: each backend's routed route timed on the same models, per thread count
and batch); the first installed one in the entry nearest the call's threads at 10k
rows wins."""

import math

from ..lowering.routing import DEFAULT_ROWS, load_table
from .registry import all_backends

__all__ = ["choose_backend"]


def choose_backend(requested: str, n_threads=None, device="cpu", table=None, available=None) -> str:
    """The backend for ``backend="auto"`` (any other name is returned as given).

    The table's ``backends`` ranking (written by the benchmark report from each
    backend's routed route on the same models) for the nearest thread count at the
    default batch; the first installed backend in it wins. No evidence for the device
    (e.g. CUDA), or nothing installed from the ranking: "torch". ``available`` (a
    name -> bool callable) is for tests; by default the backends' own probes."""
    if not (isinstance(requested, str) and requested.lower() == "auto"):
        return requested
    if table is None:
        table = load_table()
    entries = [e for e in ((table or {}).get("backends") or {}).get("entries", [])
               if e.get("device") == device]
    if not entries:
        return "torch"
    if n_threads is None:
        import torch

        n_threads = torch.get_num_threads()
    threads = min({e["threads"] for e in entries}, key=lambda t: (abs(t - n_threads), t))
    entries = [e for e in entries if e["threads"] == threads]
    entry = min(entries, key=lambda e: (abs(math.log(e["batch"]) - math.log(DEFAULT_ROWS)), e["batch"]))
    if available is None:
        backends = all_backends()
        available = lambda name: name in backends and backends[name].is_available()[0]  # noqa: E731
    return next((name for name in entry["ranking"] if available(name)), "torch")
