"""``backend="auto"``: the installed backend the benchmark ranked fastest.

The routing table (``woodstar/lowering/routing_table.json``) also ranks the backends
(``backends``: each backend's routed route timed on the same models, per thread count
and batch). For the entry nearest the call's threads:

* with a batch size (``n_rows``), the entry nearest it (log scale) decides;
* without one, the entries nearest 1, 10 000 and 100 000 rows decide together: a
  backend's score is the geometric mean, over those entries that rank it, of its
  ``mean_ratio_to_fastest`` (its place in the ranking, 1 for the first, where an
  entry has no ratios). A backend an entry does not rank is not penalised there:
  missing evidence is not slowness. So a backend that wins at 10k rows but is many
  times slower on single rows no longer wins by the 10k entry alone.

The first installed backend by that order wins; no evidence, or none installed:
"torch"."""

import math

from ..lowering.routing import DEFAULT_ROWS, load_table
from .registry import all_backends

__all__ = ["choose_backend", "backend_order", "EVIDENCE_ROWS"]

EVIDENCE_ROWS = (1, DEFAULT_ROWS, 100_000)


def _nearest(entries, rows):
    return min(entries, key=lambda e: (abs(math.log(e["batch"]) - math.log(rows)), e["batch"]))


def _cost(entry, name):
    """The backend's ratio to the fastest in this entry (its 1-based place without
    ratios), or None when the entry does not rank it."""
    if name not in entry["ranking"]:
        return None
    ratio = (entry.get("mean_ratio_to_fastest") or {}).get(name)
    return float(ratio) if ratio else float(entry["ranking"].index(name) + 1)


def backend_order(entries, n_rows=None):
    """Backend names, fastest first, from the entries of one thread count."""
    if n_rows is not None:
        return list(_nearest(entries, max(1, int(n_rows)))["ranking"])
    chosen = []
    for rows in EVIDENCE_ROWS:
        entry = _nearest(entries, rows)
        if entry not in chosen:
            chosen.append(entry)
    names = []
    for entry in chosen:
        names += [n for n in entry["ranking"] if n not in names]
    score = {}
    for name in names:
        costs = [c for c in (_cost(e, name) for e in chosen) if c is not None]
        score[name] = math.exp(sum(math.log(max(c, 1e-12)) for c in costs) / len(costs))
    return sorted(names, key=lambda n: (score[n], names.index(n)))


def choose_backend(requested: str, n_threads=None, device="cpu", table=None, available=None,
                   n_rows=None) -> str:
    """The backend for ``backend="auto"`` (any other name is returned as given).

    ``n_rows``: the batch size the model will be called with, when known (see the
    module docstring). ``available`` (a name -> bool callable) is for tests; by
    default the backends' own probes."""
    if not (isinstance(requested, str) and requested.lower() == "auto"):
        return requested
    if table is None:
        table = load_table()
    entries = [e for e in ((table or {}).get("backends") or {}).get("entries", [])
               if e.get("device") == device and e.get("ranking")]
    if not entries:
        return "torch"
    if n_threads is None:
        import torch

        n_threads = torch.get_num_threads()
    threads = min({e["threads"] for e in entries}, key=lambda t: (abs(t - n_threads), t))
    entries = [e for e in entries if e["threads"] == threads]
    if available is None:
        backends = all_backends()
        available = lambda name: name in backends and backends[name].is_available()[0]  # noqa: E731
    return next((name for name in backend_order(entries, n_rows) if available(name)), "torch")
