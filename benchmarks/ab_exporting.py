"""A/B of the exporting backends (onnx, torch.jit, torch.compile, tvm) and their
candidate programs against the torch backend's default, on the public path
(``converted.predict_proba`` from float32 NumPy).

Every candidate's answer is checked against the native model first (a wrong answer
is never timed). Then, per (model, threads, rows), ``--repeats`` rounds: each round
calls every candidate once, in a shuffled order, so all share the machine's load of
the moment. Each candidate's time is reported as the median and the spread (25th and
75th percentiles) over the rounds, and as a ratio to the ``torch`` candidate of the
same round (median and spread of the per-round ratios: the figure that survives a
busy machine).

Candidates (``--candidates``, comma-separated):
  torch                    the torch backend, default routes (the baseline)
  onnx                     the onnx backend's default export (TreeEnsemble where exact)
  onnx/program             the onnx backend's tensor program (routing's strategy)
  onnx/<strategy>          the tensor program with that strategy
  torch.jit, torch.jit/<strategy>, torch.compile, torch.compile/<strategy>
  torch.jit+freeze[/<strategy>]  the trace frozen and passed to optimize_for_inference
  tvm, tvm/<strategy>, tvm+fuse<N> (tvm_max_fuse_depth N), tvm+native (LLVM's ``mcpu`` set to this CPU),
                           tvm+ops (the tree walk as tensor ops, not one kernel),
                           torch.compile+ops (the same: Inductor's loops, not the C kernel),
                           torch.jit+ops (the same: the traced tensor ops, not the C kernel),
                           onnx+leafids (TreeEnsemble giving each tree's leaf id in float32,
                           the leaves gathered and added in tree order, for scalar leaves too),
                           tvm+parts (the walk kernel, run in cache-sized parts),
                           torch.jit+scalar, torch.compile+scalar (the walk operators' C
                           kernel without its SIMD walk of perfect trees), torch.jit+avx2,
                           torch.compile+avx2 (with its AVX2 form at most),
                           torch.jit+steps, torch.compile+steps (every tree of the node walk
                           takes the deepest tree's steps), torch.jit+vectors,
                           torch.compile+vectors (every tree adds its whole leaf vector),
                           tvm+steps (the node walk's kernel with neither),
                           tvm+block<N> (the walk kernel with N rows in lockstep)

A candidate whose call is projected (from its median at the previous batch) to take
over 15 s is not timed at the next batch; the projection is recorded.

Usage: PYTHONPATH=. python -m benchmarks.ab_exporting [models] [--threads 1,2]
       [--rows 1,1000,100000] [--repeats 7] [--candidates torch,onnx,onnx/program]
       [--out FILE]
Writes, cell by cell (merging with earlier cells), benchmarks/results/exporting_backends.json.
``--markdown`` prints that file as the tables of docs/benchmarks.md, "Exporting
backends"; ``--routing-entries torch.jit`` prints routing-table entries from a
backend's per-strategy cells.
"""

import argparse
import json
import statistics
import time
from pathlib import Path

import numpy as np
import torch

import woodstar
from benchmarks._ab import interleaved_ms, write_results
from benchmarks.candidates import as_proba
from benchmarks.models import MODEL_SPECS, ModelSpec, load_model, test_rows

OUT = Path(__file__).parent / "results" / "exporting_backends.json"
STRATEGIES = ("gemm", "tree_trav", "perf_tree_trav")
SPECS = {
    "rf_100x8": MODEL_SPECS["rf_100x8"],
    "gbdt_100x3": MODEL_SPECS["gbdt_100x3"],
    "xgb_300x8": ModelSpec("xgb_300x8", "xgboost", "XGBoost, 300 trees, depth 8",
                           params=(("n_estimators", 300), ("max_depth", 8))),
    "lgbm_300x255": ModelSpec("lgbm_300x255", "lightgbm", "LightGBM, 300 trees, 255 leaves",
                              params=(("n_estimators", 300), ("num_leaves", 255))),
    # Multiclass trees of depth <= 8: the perfect-tree walk with several outputs.
    "xgb_multi10": ModelSpec("xgb_multi10", "xgboost", "XGBoost multiclass (10 classes), 100 rounds, depth 6",
                             n_classes=10, params=(("n_estimators", 100), ("max_depth", 6))),
}
DEFAULT_CANDIDATES = "torch,onnx,onnx/program"


def _spec(name):
    """A model of SPECS, or any of benchmarks/models.py (e.g. the routing sweep's)."""
    return SPECS.get(name) or MODEL_SPECS[name]


class Refused(Exception):
    """A candidate that cannot be built for this model (the reason is recorded)."""


def build(name, model, threads):
    """``(callable X -> proba, details)`` for candidate ``name``."""
    backend, _, variant = name.partition("/")
    config = {"n_threads": threads}
    flags = backend.split("+")
    backend = flags.pop(0)
    block = None
    for flag in flags:
        if flag.startswith("fuse"):
            config["tvm_max_fuse_depth"] = int(flag[4:])
        elif flag.startswith("block"):
            block = int(flag[5:])
    if variant in STRATEGIES:
        config["tree_implementation"] = variant
    elif variant == "program":
        # The routing table's strategy for this backend, named: the tensor program.
        probe = woodstar.convert(model, "torch", extra_config={**config, "small_batch_rows": 0,
                                                                "cpu_route": "program"})
        config["tree_implementation"] = probe.strategy
    try:
        start = time.perf_counter()
        if block is not None:  # the walk kernel with another row block
            from woodstar.backends import tvm_tree_walk
            default, tvm_tree_walk.ROW_BLOCK = tvm_tree_walk.ROW_BLOCK, block
            try:
                converted = woodstar.convert(model, backend, extra_config=config)
            finally:
                tvm_tree_walk.ROW_BLOCK = default
        elif backend == "tvm" and "steps" in flags:  # the node walk's kernel without its tables
            from woodstar.backends import tvm_tree_walk
            tvm_tree_walk.WALK_TABLES = False
            try:
                converted = woodstar.convert(model, backend, extra_config=config)
            finally:
                tvm_tree_walk.WALK_TABLES = True
        elif "ops" in flags:  # the walk as tensor ops, not one kernel
            from woodstar.backends import _walk_kernels, tvm_backend
            tvm_backend.WHOLE_WALK_ON_CPU = _walk_kernels.WALK_KERNELS_ON_CPU = False
            try:
                converted = woodstar.convert(model, backend, extra_config=config)
            finally:
                tvm_backend.WHOLE_WALK_ON_CPU = _walk_kernels.WALK_KERNELS_ON_CPU = True
        elif "leafids" in flags:  # ONNX-ML: leaf ids for every ensemble, not leaf sums
            from woodstar.runtimes import onnx_ml
            original = onnx_ml._sums_leaf_indices
            onnx_ml._sums_leaf_indices = lambda ens, dtype: ens.single_output_block and (
                dtype == "float64" or ens.n_nodes < onnx_ml.FLOAT32_EXACT_INTEGERS)
            try:
                converted = woodstar.convert(model, backend, extra_config=config)
            finally:
                onnx_ml._sums_leaf_indices = original
        elif "native" in flags:
            from woodstar.backends import tvm_backend
            original = tvm_backend._target
            tvm_backend._target = _native_target(original)
            try:
                converted = woodstar.convert(model, backend, extra_config=config)
            finally:
                tvm_backend._target = original
        else:
            converted = woodstar.convert(model, backend, extra_config=config)
        if "parts" in flags:  # cache-sized parts although the walk is one kernel
            converted._programs["float32"].runs_tensor_ops = True
        if "freeze" in flags:  # TorchScript: frozen, then optimize_for_inference
            program = converted._program("float32")
            program._model = torch.jit.optimize_for_inference(torch.jit.freeze(program._model))
        converted.predict_proba(np.zeros((2, converted.n_features_in_), np.float32))
        seconds = time.perf_counter() - start
    except Exception as error:  # noqa: BLE001  (recorded as a refused cell)
        raise Refused(f"{type(error).__name__}: {str(error)[:300]}") from None
    program = converted._programs.get("float32")
    predict = converted.predict_proba
    if "scalar" in flags or "avx2" in flags:  # the operators' SIMD walk narrowed, around each call
        predict = _with_operator_simd(predict, "avx2" if "avx2" in flags else None)
    if backend != "tvm" and ("steps" in flags or "vectors" in flags):  # tables off, around each call
        predict = _with_walk_tables(predict, "steps" not in flags, "vectors" not in flags)
    details = {"convert_s": round(seconds, 2),
               "strategy": getattr(getattr(program, "module", None), "strategy", None),
               "exporter": getattr(program, "exporter", None), "route": converted.route}
    return predict, details


def _with_operator_simd(predict, form):
    from woodstar.runtimes import walk_ops

    def call(X):
        widest = walk_ops.simd_walk()
        walk_ops.limit_simd_walk(form)
        try:
            return predict(X)
        finally:
            walk_ops.limit_simd_walk(widest)
    return call


def _with_walk_tables(predict, per_tree_depths, one_column_adds):
    from woodstar.runtimes import walk_ops

    def call(X):
        shipped = walk_ops.per_tree_depths, walk_ops.one_column_adds
        walk_ops.use_tables(per_tree_depths, one_column_adds)
        try:
            return predict(X)
        finally:
            walk_ops.use_tables(*shipped)
    return call


def _native_target(original):
    def target(device):
        import tvm

        if torch.device(device).type == "cpu":
            cpu = tvm.target.codegen.llvm_get_system_cpu()
            return tvm.target.Target({"kind": "llvm", "mcpu": cpu}), tvm.cpu(0)
        return original(device)
    return target


def _quantiles(values):
    q = statistics.quantiles(values, n=4) if len(values) > 1 else [values[0]] * 3
    return [round(v, 4) for v in (q[0], statistics.median(values), q[2])]


def time_rounds(fns, X, repeats, baseline="torch"):
    times = interleaved_ms(fns, repeats, X)
    cells = {}
    for key, ms in times.items():
        cell = {"ms_q25_median_q75": _quantiles(ms)}
        if baseline in times and key != baseline:
            ratios = [a / b for a, b in zip(ms, times[baseline])]
            cell["ratio_to_torch_q25_median_q75"] = _quantiles(ratios)
        cells[key] = cell
    return cells


def measure(models, threads_list, rows_list, repeats, candidates, max_repeat_seconds=40.0,
            max_call_seconds=15.0, write=False, out=OUT):
    results = []
    for name in models:
        spec = _spec(name)
        model = load_model(spec)
        depth = _max_depth(model)
        for threads in threads_list:
            torch.set_num_threads(threads)
            fns, details, refused = {}, {}, {}
            for candidate in candidates:
                try:
                    fns[candidate], details[candidate] = build(candidate, model, threads)
                except Refused as error:
                    refused[candidate] = str(error)
                    print(f"  {name} t={threads} {candidate}: refused: {error}", flush=True)
            last = {}  # candidate -> (rows, median seconds) at the last batch measured
            for rows in rows_list:
                X = test_rows(spec, rows)
                expected = as_proba(model.predict_proba(X), spec.n_classes)
                # XGBoost sums in float32 (woodstar in float64): within float32 rounding.
                tol = 1e-5 if spec.library == "xgboost" else 1e-12
                live, wrong, skipped = {}, {}, {}
                for key, fn in fns.items():
                    if key in last:  # linear in rows: skip a call projected too long
                        projected = last[key][1] * rows / last[key][0]
                        if projected > max_call_seconds:
                            skipped[key] = f"projected {projected:.0f} s per call"
                            continue
                    start = time.perf_counter()
                    got = as_proba(fn(X), spec.n_classes)
                    first = time.perf_counter() - start
                    if not np.allclose(got, expected, rtol=tol, atol=tol):
                        wrong[key] = float(np.max(np.abs(got - expected)))
                        continue
                    # One untimed warm-up call; very slow cells get fewer rounds.
                    live[key] = (fn, first)
                reps = max(2, min(repeats, int(max_repeat_seconds /
                                               max(sum(f for _, f in live.values()), 1e-9))))
                cells = time_rounds({k: fn for k, (fn, _) in live.items()}, X, reps)
                for key, cell in cells.items():  # the median, not the first call (warm-up)
                    last[key] = (rows, cell["ms_q25_median_q75"][1] / 1e3)
                row = {"model": name, "max_depth": depth, "threads": threads, "rows": rows,
                       "repeats": reps,
                       "cells": cells, "details": details, "refused": refused, "wrong": wrong,
                       "skipped": skipped}
                results.append(row)
                _print(row)
                if write:  # cell by cell: a long run stopped early keeps what it measured
                    write_results(out, _merge([row], out))
    return results


def _print(row):
    parts = []
    for key, cell in row["cells"].items():
        ms = cell["ms_q25_median_q75"][1]
        ratio = cell.get("ratio_to_torch_q25_median_q75")
        parts.append(f"{key} {ms:.3f}ms" + (f" (x{ratio[1]:.2f})" if ratio else ""))
    print(f"{row['model']:13s} t={row['threads']} rows={row['rows']:6d} n={row['repeats']}  "
          + "  ".join(parts) + (f"  WRONG {row['wrong']}" if row["wrong"] else "")
          + (f"  skipped {row['skipped']}" if row["skipped"] else ""), flush=True)


def _merge(results, path=OUT):
    """Earlier cells of the results file stay unless measured again (same model,
    threads, rows and candidate)."""
    if not path.exists():
        return results
    earlier = json.loads(path.read_text()).get("results", [])
    index = {(r["model"], r["threads"], r["rows"]): r for r in earlier}
    for row in results:
        key = (row["model"], row["threads"], row["rows"])
        if key in index:
            old = index[key]
            for field in ("cells", "details", "refused", "wrong", "skipped"):
                old.setdefault(field, {}).update(row[field])
            old["repeats"] = row["repeats"]
        else:
            index[key] = row
    return sorted(index.values(), key=lambda r: (r["model"], r["threads"], r["rows"]))


def _ratio_text(ratio):
    if not ratio:
        return ""
    if ratio[0] is None:  # cells recovered from a run's log: medians only
        return f"{ratio[1]:.2f}"
    return f"{ratio[1]:.2f} [{ratio[0]:.2f}, {ratio[2]:.2f}]"


def markdown(path=OUT):
    """The thread x batch matrix of every measured cell as Markdown tables, one per
    model: median ms per call, the per-round ratio to ``torch`` (median, and the 25th
    to 75th percentile in brackets), and the cells not timed with the reason."""
    rows = json.loads(Path(path).read_text())["results"]
    lines = []
    for model in sorted({r["model"] for r in rows}):
        lines += [f"**{model}** ({_spec(model).description})", "",
                  "| candidate | threads | rows | median ms | ratio to torch [q25, q75] |",
                  "|---|---|---|---|---|"]
        for r in sorted((r for r in rows if r["model"] == model),
                        key=lambda r: (r["threads"], r["rows"])):
            for key, cell in sorted(r["cells"].items(), key=lambda kv: kv[1]["ms_q25_median_q75"][1]):
                ratio = cell.get("ratio_to_torch_q25_median_q75")
                text = "1 (baseline)" if key == "torch" else _ratio_text(ratio)
                lines.append(f"| {key} | {r['threads']} | {r['rows']} | "
                             f"{cell['ms_q25_median_q75'][1]:.3f} | {text} |")
            for key, why in {**r.get("skipped", {}), **r.get("refused", {})}.items():
                lines.append(f"| {key} | {r['threads']} | {r['rows']} | not timed | {why} |")
            for key, diff in r.get("wrong", {}).items():
                lines.append(f"| {key} | {r['threads']} | {r['rows']} | wrong answer | max diff {diff:.3g} |")
        lines.append("")
    return "\n".join(lines)


def _max_depth(model):
    converted = woodstar.convert(model, "torch")
    return int(np.max(converted.ir.ensemble.tree_depths()))


def routing_entries_for(backend, path=OUT):
    """Routing-table entries (woodstar/lowering/_routing_evidence.py's format) for
    ``backend`` from its per-strategy cells ("<backend>/<strategy>")."""
    from woodstar.lowering._routing_evidence import routing_entries

    rows = json.loads(Path(path).read_text())["results"]
    depths = {r["model"]: r["max_depth"] for r in rows if "max_depth" in r}
    models = {name: {"max_depth": depths.get(name) or _max_depth(load_model(_spec(name)))}
              for name in sorted({r["model"] for r in rows})}
    cells = []
    for r in rows:
        for key, cell in r["cells"].items():
            name, _, strategy = key.partition("/")
            if name == backend and strategy in STRATEGIES:
                q25, median, q75 = cell["ms_q25_median_q75"]
                cells.append({"model": r["model"], "threads": r["threads"], "batch": r["rows"],
                              "kind": "woodstar", "backend": backend, "strategy": strategy,
                              "status": "ok", "median_s": median / 1e3,
                              "mad_s": (q75 - q25) / 2e3})
    return routing_entries({"models": models, "cells": cells}, backend=backend)


def main(argv=None):
    parser = argparse.ArgumentParser()
    parser.add_argument("models", nargs="*", default=list(SPECS))
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--rows", default="1,1000,100000")
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--candidates", default=DEFAULT_CANDIDATES)
    parser.add_argument("--no-write", action="store_true")
    parser.add_argument("--out", type=Path, default=OUT, help="the results file")
    parser.add_argument("--markdown", action="store_true",
                        help="print the results file as Markdown tables and exit")
    parser.add_argument("--routing-entries", metavar="BACKEND",
                        help="print the routing entries of BACKEND's strategy cells and exit")
    args = parser.parse_args(argv)
    if args.markdown:
        print(markdown())
        return
    if args.routing_entries:
        print(json.dumps(routing_entries_for(args.routing_entries), indent=1))
        return
    measure(args.models, [int(t) for t in args.threads.split(",")],
            [int(r) for r in args.rows.split(",")], args.repeats, args.candidates.split(","),
            write=not args.no_write, out=args.out)


if __name__ == "__main__":
    main()
