"""A/B of the compiled tree walk against oneDAL (daal4py's model builders) on boosted
trees, and of kernel candidates against the shipped kernel.

Every candidate is timed on the public path, ``predict_proba`` of float32 NumPy rows,
interleaved in a shuffled order within one process; answers are checked first (the
compiled walk exactly against XGBoost and LightGBM); oneDAL's rows
off by more than 1e-5 are counted in ``wrong_answers`` (it sums in its own order and
compares LightGBM's double thresholds in float32), and it is timed all the same. ``--candidate FILE.c`` adds a kernel built from another
source with the same entry points (``candidate`` in the results), so a change to
``c_walk.c`` is judged against the shipped one from the same run; ``--candidate`` given
several times times them all in the same interleaved rounds (``candidate:<name>``).

Usage: PYTHONPATH=. python -m benchmarks.ab_kernel [--threads 1,2] [--rows 1,1000,100000]
       [--candidate path/to/c_walk.c --candidate-name "what it changes"] [--rounds 3]
       [--node-walk-candidate]  (the shipped kernel without its SIMD walks)
       [--complete-walk-candidate]  (... without its oblivious-tree walk)
       [--define FEW_ROWS_SIMD=0]  (... with one of its switches set otherwise)
       [--setting HEAD_LEVELS=5]  (... converting with a constant of c_walk.py set otherwise)
       [--no-peers]  (no oneDAL or CatBoost in the rounds)
       [--missing 0.01]  (that share of the rows' values NaN)
       [--warm]  (each candidate's calls of a round in a row, its model in cache)
       [--simd avx2]  (every kernel walks with AVX2 at most)
CatBoost models (catboost_500x6) are also timed against CatBoost's own predictor
(``native``).
Writes benchmarks/results/kernel_onedal.json: per cell, each round's medians and the
ratios to the shipped kernel (``ratio_to_c_walk``: > 1 means slower than it).
"""

import argparse
import statistics
import tempfile
from pathlib import Path

import numpy as np
import torch

import woodstar
from woodstar.runtimes import c_walk
from benchmarks._ab import consecutive_mean_ms, interleaved_median_ms, write_results
from benchmarks.candidates import NotAvailable, _native, _onedal, as_proba
from benchmarks.models import MODEL_SPECS, ModelSpec, load_model, test_rows

OUT = Path(__file__).parent / "results" / "kernel_onedal.json"
SPECS = {
    "xgb_300x8": ModelSpec("xgb_300x8", "xgboost", "XGBoost, 300 trees, depth 8",
                           params=(("n_estimators", 300), ("max_depth", 8))),
    "lgbm_300x255": ModelSpec("lgbm_300x255", "lightgbm", "LightGBM, 300 trees, 255 leaves",
                              params=(("n_estimators", 300), ("num_leaves", 255))),
    # the grid's scikit-learn trees (no oneDAL peer: its model builders take boosters)
    "rf_100x8": MODEL_SPECS["rf_100x8"],
    "gbdt_100x3": MODEL_SPECS["gbdt_100x3"],
}
REPEATS = {1: 300, 1000: 40, 100_000: 5}


def _repeats(rows):
    """Calls per timing: enough for a small call to rise above the clock's noise."""
    return REPEATS.get(rows) or (300 if rows <= 100 else 20)


def _with_kernel(source, make):
    """``make()`` while the compiled walk is built from ``source`` (another library)."""
    saved_state, saved_source = dict(c_walk._state), c_walk.SOURCE
    try:
        c_walk._state.clear()
        c_walk.SOURCE = Path(source)
        if not c_walk.available():
            raise RuntimeError(c_walk.unavailable_reason())
        return make()
    finally:
        c_walk._state.clear()
        c_walk._state.update(saved_state)
        c_walk.SOURCE = saved_source


_SIMD = {"form": "avx512"}  # the widest SIMD form each kernel may take (--simd)


def _woodstar(model, threads, X):
    c_walk.limit_simd_walk(_SIMD["form"])  # the kernel loaded now: the shipped one or a candidate's
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "c-walk",
                                                               "n_threads": threads})
    converted.predict_proba(X[:2])  # builds the route now, with the kernel loaded now
    return converted


def _with_setting(setting, make):
    """``make()`` while c_walk.py's constant ``name`` is ``value`` (``setting``: "NAME=VALUE")."""
    name, _, value = setting.partition("=")
    saved = getattr(c_walk, name)
    try:
        if isinstance(saved, bool):  # bool("False") would be True
            if value not in ("True", "False"):
                raise SystemExit(f"--setting {name} takes True or False, not {value!r}")
            setattr(c_walk, name, value == "True")
        else:
            setattr(c_walk, name, type(saved)(value))
        return make()
    finally:
        setattr(c_walk, name, saved)


def measure(names, threads_list, rows_list, rounds, candidate=None, out=None, candidates=None,
            settings=(), peers=True, missing=0.0, warm=False):
    """``candidate``: one other kernel source (key "candidate"); ``candidates``: several,
    as {name: source} (keys "candidate:<name>"); ``settings``: the shipped kernel with a
    constant of c_walk.py changed, as "NAME=VALUE" (keys "setting:NAME=VALUE");
    ``missing``: the share of the rows' values made NaN (seeded), for models that take
    missing values; ``warm``: each candidate's calls of a round one after another
    (``consecutive_mean_ms``), not one call each in turn."""
    timed = consecutive_mean_ms if warm else interleaved_median_ms
    results = []
    for name in names:
        spec = SPECS.get(name) or MODEL_SPECS[name]  # any model of benchmarks/models.py
        model = load_model(spec)
        if "n_jobs" in model.get_params():  # a forest's threads add its trees in any order
            model.set_params(n_jobs=1)      # the serial order, which woodstar gives
        X_all = test_rows(spec, max(rows_list))
        if missing:
            X_all = X_all.copy()
            X_all[np.random.default_rng(0).random(X_all.shape) < missing] = np.nan
        for threads in threads_list:
            torch.set_num_threads(threads)
            fns = {"c-walk": _woodstar(model, threads, X_all).predict_proba}
            sources = {"candidate": candidate} if candidate else {}
            sources.update({f"candidate:{k}": v for k, v in (candidates or {}).items()})
            for key, source in sources.items():
                fns[key] = _with_kernel(
                    source, lambda: _woodstar(model, threads, X_all)).predict_proba
            for setting in settings:
                fns[f"setting:{setting}"] = _with_setting(
                    setting, lambda: _woodstar(model, threads, X_all)).predict_proba
            try:
                if peers:
                    fns["onedal"] = _onedal(spec, model).build(threads).fn
            except NotAvailable as error:
                print(f"onedal: {error}")
            if peers and spec.library == "catboost":  # its own predictor: the peer to beat there
                fns["native"] = _native(spec, model).build(threads).fn
            for rows in rows_list:
                X = X_all[:rows]
                expected = model.predict_proba(X)
                wrong = {}
                for key, fn in fns.items():
                    got = as_proba(fn(X), spec.n_classes)
                    if key == "onedal":  # a peer's wrong rows are recorded, not hidden
                        off = np.abs(got - expected) > 1e-5 * (1 + np.abs(expected))
                        if off.any():
                            wrong[key] = {"rows": int(off.any(axis=1).sum()),
                                          "max_abs_diff": float(np.abs(got - expected).max())}
                    else:
                        np.testing.assert_array_equal(got, expected, err_msg=key)
                    fn(X)
                per_round = [timed(fns, X, _repeats(rows)) for _ in range(rounds)]
                ratios = {k: [r[k] / r["c-walk"] for r in per_round] for k in fns if k != "c-walk"}
                row = {"model": name, "threads": threads, "rows": rows, "missing": missing,
                       "warm": warm,
                       "repeats": _repeats(rows), "rounds": rounds,
                       "median_ms": {k: statistics.median(r[k] for r in per_round) for k in fns},
                       "round_ms": per_round, "wrong_answers": wrong,
                       "ratio_to_c_walk": {k: {"median": statistics.median(v), "min": min(v),
                                               "max": max(v)} for k, v in ratios.items()}}
                results.append(row)
                cells = "  ".join(f"{k} {v:.3f}ms" for k, v in row["median_ms"].items())
                spread = "  ".join(f"{k}/c-walk {v['median']:.2f} [{v['min']:.2f}-{v['max']:.2f}]"
                                   for k, v in row["ratio_to_c_walk"].items())
                print(f"{name:13s} t={threads} rows={rows:6d}  {cells}  {spread}  {wrong or ''}",
                      flush=True)
                if out is not None:  # after every cell: an interrupted run keeps its cells
                    write_results(out, results, keep_earlier=True)
    return results


def _node_walk_only_source():
    """c_walk.c with its CPU check answering "none": no complete-tree copies are made
    and every row takes the node walk (the kernel on a CPU without AVX2)."""
    path = Path(tempfile.mkdtemp()) / "c_walk_node_walk_only.c"
    path.write_text("#define SIMD_START 0  /* SIMD_NONE: cpu_simd.h */\n"
                    + c_walk.SOURCE.read_text())
    return path


def _defined_source(name, value):
    """c_walk.c with ``#define NAME`` set to ``value`` (a switch such as OBLIVIOUS_WALK)."""
    text = c_walk.SOURCE.read_text()
    lines = [line for line in text.splitlines() if line.startswith(f"#define {name} ")]
    if len(lines) != 1:
        raise SystemExit(f"{c_walk.SOURCE} has no single '#define {name}'")
    old = lines[0].split("/*")[0].rstrip()
    path = Path(tempfile.mkdtemp()) / f"c_walk_{name}_{value}.c"
    path.write_text(text.replace(old, f"#define {name} {value}", 1))
    return path


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=["xgb_300x8", "lgbm_300x255"])
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rows", default="1,1000,100000")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--candidate", action="append", default=[],
                        help="another c_walk.c to time (may be given several times)")
    parser.add_argument("--candidate-name", action="append", default=[],
                        help="what each candidate changes (recorded with each row)")
    parser.add_argument("--node-walk-candidate", action="store_true",
                        help="add the shipped kernel with its SIMD walks turned off")
    parser.add_argument("--complete-walk-candidate", action="store_true",
                        help="add the shipped kernel with its oblivious-tree walk turned off")
    parser.add_argument("--define", action="append", default=[], metavar="NAME=VALUE",
                        help="add the shipped kernel with one #define changed (repeatable: "
                             "one candidate each)")
    parser.add_argument("--setting", action="append", default=[], metavar="NAME=VALUE",
                        help="add the shipped kernel converting with a constant of c_walk.py "
                             "set otherwise (repeatable: one candidate each)")
    parser.add_argument("--missing", type=float, default=0.0,
                        help="the share of the rows' values made NaN (default 0)")
    parser.add_argument("--no-peers", action="store_true",
                        help="time woodstar's kernels only: oneDAL's pool threads, busy "
                             "after its calls, slow the next thread split in the rounds")
    parser.add_argument("--warm", action="store_true",
                        help="call each candidate repeatedly in a row within a round (its "
                             "model stays in cache) instead of one call each in turn")
    parser.add_argument("--simd", choices=["avx512", "avx2"], default="avx512",
                        help="the widest SIMD form every kernel may walk with (avx2: "
                             "time an AVX2 machine's path on an AVX-512 one)")
    parser.add_argument("--out", default=str(OUT))
    args = parser.parse_args(argv)
    _SIMD["form"] = args.simd
    if args.node_walk_candidate:
        args.candidate.append(str(_node_walk_only_source()))
        args.candidate_name.append("the node walk only (no SIMD complete-tree walk)")
    if args.complete_walk_candidate:
        args.candidate.append(str(_defined_source("OBLIVIOUS_WALK", 0)))
        args.candidate_name.append("oblivious trees on the complete-tree walk")
    for definition in args.define:
        name, _, value = definition.partition("=")
        args.candidate.append(str(_defined_source(name, value)))
        args.candidate_name.append(f"#define {name} {value}")
    names = [args.candidate_name[i] if i < len(args.candidate_name) else Path(c).stem
             for i, c in enumerate(args.candidate)]
    one = args.candidate[0] if len(args.candidate) == 1 else None
    several = dict(zip(names, args.candidate)) if len(args.candidate) > 1 else None
    results = measure(args.models, [int(t) for t in args.threads.split(",")],
                      [int(r) for r in args.rows.split(",")], args.rounds, one,
                      Path(args.out), several, args.setting, not args.no_peers, args.missing,
                      args.warm)
    for row in results:
        if one:
            row["candidate"] = names[0]
        elif several:
            row["candidates"] = names
    write_results(Path(args.out), results, keep_earlier=True, simd_limit=args.simd)


if __name__ == "__main__":
    main()
