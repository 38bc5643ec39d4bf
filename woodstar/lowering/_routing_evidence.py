"""Routing regions from measured cells: the one algorithm behind both the shipped
routing table (``benchmarks/report.py``) and a per-machine calibrated one
(``woodstar calibrate``), so the two are built the same way.

A cell is a dict with ``model``, ``threads``, ``batch``, ``kind`` ("woodstar"),
``backend``, ``strategy``, ``status`` ("ok"), ``median_s`` and ``mad_s``; a model is
described by its ``max_depth``. Plain Python: no torch, no source library.
"""

from collections import defaultdict

__all__ = ["MARGIN", "routing_entries"]

MARGIN = 0.10
"""A strategy within 10% of the fastest (or within the fastest's MAD, if larger) ties
with it: on a noisy 2-core machine, smaller differences are not evidence."""


def _tied(cands, best):
    """Strategies whose median is within the margin of the fastest one."""
    t_best, _, mad_best = best
    slack = max(MARGIN * t_best, mad_best)
    return {s for t, s, _ in cands if t <= t_best + slack}


def _region(group, alive, measured):
    """One depth region from its points: among the strategies tied at every point, the
    one with the least summed time (time relative to each point's fastest)."""
    score, points = defaultdict(float), defaultdict(int)
    for _, _, cands, _ in group:
        best = cands[0][0]
        for time_s, s, _ in cands:
            score[s] += time_s / best
            points[s] += 1
    pool = alive or {s for s in score}
    # A strategy timed at fewer of the region's points ranks after those timed at all of
    # them: its smaller sum is missing evidence, not speed (GEMM timed only on a shallow
    # model must not be the fallback for deep ones, where it is hundreds of times slower).
    ranking = sorted(score, key=lambda s: (s not in pool, -points[s], score[s], s))
    region = {"depth_min": group[0][0], "depth_max": group[-1][0], "strategy": ranking[0],
              "ranking": ranking, "evidence": [m for _, m, _, _ in group],
              "unanimous": bool(alive)}
    stamps = sorted({stamp for _, m, _, _ in group for stamp in measured.get(m, ())})
    if stamps:
        region["measured"] = stamps
    return region


def _stamp(cell):
    """'date, cpu' of the run that measured a cell (merged results carry it)."""
    where = cell.get("measured")
    if not where:
        return None
    return f"{where.get('date')}, {where.get('cpu')}"


def routing_entries(results, backend="torch", device="cpu"):
    """Depth regions per (threads, batch). The measured models are sorted by their
    deepest tree; walking up in depth, a region grows while one strategy stays tied
    with the fastest at every point in it (greedy: as few regions as possible). A
    boundary therefore sits only between two measured depths, each side backed by its
    points, and no region contains a point where another strategy is clearly faster.
    Past the deepest measured model the last region holds (``extrapolated_above``).
    Where cells carry ``measured`` (when and on which CPU), each region lists those
    of its evidence."""
    models = results["models"]
    timed = defaultdict(list)
    measured = defaultdict(lambda: defaultdict(set))
    for c in results["cells"]:
        if (c["status"] == "ok" and c["kind"] == "woodstar" and c["backend"] == backend
                and c["strategy"] != "auto" and "max_depth" in models.get(c["model"], {})):
            timed[(c["model"], c["threads"], c["batch"])].append(
                (c["median_s"], c["strategy"], c["mad_s"]))
            stamp = _stamp(c)
            if stamp:
                measured[(c["threads"], c["batch"])][c["model"]].add(stamp)
    entries = []
    for t in sorted({k[1] for k in timed}):
        for b in sorted({k[2] for k in timed if k[1] == t}):
            points = []
            for (m, tt, bb), cands in timed.items():
                if tt == t and bb == b and len(cands) >= 2:
                    cands = sorted(cands)
                    points.append((models[m]["max_depth"], m, cands, _tied(cands, cands[0])))
            if not points:
                continue
            points.sort(key=lambda p: (p[0], p[1]))
            regions, group, alive = [], [], None
            stamps = measured[(t, b)]
            # Points at one depth cannot be split by a depth threshold: they join or
            # leave a region together.
            for depth in sorted({p[0] for p in points}):
                level = [p for p in points if p[0] == depth]
                tied = set.intersection(*(p[3] for p in level))
                survivors = tied if alive is None else alive & tied
                if survivors or not group:
                    group += level
                    alive = survivors
                    continue
                regions.append(_region(group, alive, stamps))
                group, alive = level, tied
            regions.append(_region(group, alive, stamps))
            for lower in regions[:-1]:
                lower["depth_le"] = lower["depth_max"]
            regions[-1]["depth_le"] = None
            regions[-1]["extrapolated_above"] = regions[-1]["depth_max"]
            entries.append({"device": device, "backend": backend, "threads": t, "batch": b,
                            "regions": regions})
    return entries
