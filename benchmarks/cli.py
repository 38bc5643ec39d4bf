"""Command line of the benchmark suite, shared by ``woodstar bench`` and
``python -m benchmarks``.

A run writes its results JSON, report, plots and the routing table its evidence
gives into one output folder (``--out``, default ``./woodstar-bench``), never into
the package or the repository's docs. Only ``--update-shipped`` (maintainers, in a
source checkout) touches the shipped files: the run's results are added to
``benchmarks/results/`` and to the list of runs behind the shipped report
(``benchmarks/results/shipped.json``), and ``docs/benchmarks.md``, ``docs/img/`` and
``woodstar/lowering/routing_table.json`` are regenerated from all of those runs
merged (a cell measured again replaces the older measurement; the others are kept;
each cell records when and on which CPU it was measured)."""

import argparse
import datetime
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"
SHIPPED = RESULTS / "shipped.json"
DEFAULT_OUT = Path("woodstar-bench")

__all__ = ["add_arguments", "run", "main", "shipped_runs"]


def _csv(kind):
    return lambda text: tuple(kind(v) for v in text.split(",") if v)


def add_arguments(parser):
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true",
                      help="four models, batches 1/100/10k, 3 repeats, torch backend, onnxruntime "
                           "as the only extra peer, within --budget (default 300 s)")
    mode.add_argument("--smoke", action="store_true",
                      help="one tiny cell per candidate: checks the harness runs (seconds)")
    parser.add_argument("--budget", type=float, metavar="SECONDS",
                        help="time budget: builds and cells that cannot finish in what is left "
                             "are skipped and noted in the results (default: 300 with --quick, "
                             "120 with --smoke, none otherwise)")
    parser.add_argument("--models", type=_csv(str), help="comma-separated model names")
    parser.add_argument("--batches", type=_csv(int), help="comma-separated batch sizes")
    parser.add_argument("--threads", type=_csv(int), help="comma-separated thread counts")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--peers", type=_csv(str),
                        help="peers besides the native library (default: onnxruntime,tl2cgen,lleaves)")
    parser.add_argument("--backends", type=_csv(str),
                        help="woodstar backends to time (default: torch with --quick/--smoke, "
                             "every installed one otherwise)")
    parser.add_argument("--routed-only", action="store_true",
                        help="time each backend's routed route only, not every forced strategy")
    parser.add_argument("--routing-sweep", action="store_true",
                        help="also time woodstar's strategies on forests of depth 2..14 (routing evidence)")
    parser.add_argument("--out", type=Path, metavar="DIR",
                        help=f"output folder for the results JSON, report, plots and routing "
                             f"table (default ./{DEFAULT_OUT})")
    parser.add_argument("--report", action="store_true",
                        help="also write the report, plots and routing table into the output folder")
    parser.add_argument("--report-only", action="store_true",
                        help="do not measure: report from --merge files (default: the output "
                             "folder's results)")
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="more results JSON to report together with this run's")
    parser.add_argument("--update-shipped", action="store_true",
                        help="maintainers: add this run to benchmarks/results and regenerate "
                             "docs/benchmarks.md, docs/img and the shipped routing table from "
                             "every shipped run merged")
    parser.add_argument("--name", help="with --update-shipped: the results file's name "
                                       "(benchmarks/results/NAME.json; default run-<date>)")
    parser.add_argument("--no-progress", action="store_true")


def _mode(args):
    return "smoke" if args.smoke else "quick" if args.quick else "full"


def _settings(args, harness, mode):
    settings = dict({"smoke": harness.SMOKE, "quick": harness.QUICK, "full": harness.FULL}[mode])
    for key in ("batches", "threads", "repeats"):
        if getattr(args, key):
            settings[key] = getattr(args, key)
    budget = args.budget if args.budget is not None else {
        "quick": harness.QUICK_BUDGET_S, "smoke": harness.SMOKE_BUDGET_S}.get(mode)
    if budget is not None and budget <= 0:
        raise SystemExit(f"--budget must be positive seconds (got {budget})")
    settings["budget_s"] = budget
    return settings


def _models(args, mode):
    from .models import MODEL_SPECS, QUICK_MODELS, SWEEP_MODELS

    if args.models:
        models = args.models
    elif mode == "full":
        models = tuple(m for m in MODEL_SPECS if m not in SWEEP_MODELS)
    elif mode == "quick":
        models = QUICK_MODELS
    else:
        models = ("rf_100x8",)
    sweep = SWEEP_MODELS if args.routing_sweep else ()
    models = tuple(models) + tuple(m for m in sweep if m not in models)
    unknown = [m for m in models if m not in MODEL_SPECS]
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; known: {', '.join(MODEL_SPECS)}")
    return models, sweep


def shipped_runs():
    """The results files behind the shipped report, oldest first (later runs win)."""
    return [RESULTS / name for name in json.loads(SHIPPED.read_text())["runs"]]


def _add_shipped(paths):
    manifest = json.loads(SHIPPED.read_text())
    for path in paths:
        path = Path(path).resolve()
        if path.parent != RESULTS.resolve():
            raise SystemExit(f"--update-shipped merges results kept in {RESULTS} (got {path})")
        if path.name not in manifest["runs"]:
            manifest["runs"].append(path.name)
    SHIPPED.write_text(json.dumps(manifest, indent=1) + "\n")


def _shipped_out(args):
    if args.out is not None:
        raise SystemExit("--update-shipped writes benchmarks/results/NAME.json and the shipped "
                         "report; it takes --name, not --out")
    if args.smoke:
        raise SystemExit("--update-shipped does not take --smoke results into the shipped evidence")
    name = args.name or "run-" + datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dT%H%M%S")
    path = RESULTS / f"{name}.json"
    if path.exists():
        raise SystemExit(f"{path} exists; choose another --name")
    return path


def run(args):
    from . import harness

    mode = _mode(args)
    out_dir = args.out if args.out is not None else DEFAULT_OUT
    if args.update_shipped and not args.report_only:
        results_path = _shipped_out(args)
    else:
        results_path = out_dir / f"{mode}.json"
    measured = []
    if not args.report_only:
        settings = _settings(args, harness, mode)
        models, sweep = _models(args, mode)
        peers = args.peers if args.peers is not None else (
            ("onnxruntime",) if mode != "full" else ("onnxruntime", "tl2cgen", "lleaves"))
        backends = args.backends if args.backends is not None else (
            ("torch",) if mode != "full" else None)
        if settings["budget_s"] is not None:
            print(f"time budget: {settings['budget_s']:.0f} s (what does not fit is skipped "
                  "and noted in the results)")
        harness.run_benchmark(models, peers=peers, woodstar_only_models=sweep,
                              out_path=results_path, progress=not args.no_progress,
                              backends=backends, routed_only=args.routed_only, **settings)
        print(f"results: {results_path}")
        measured = [results_path]
    if args.update_shipped:
        from . import report

        _add_shipped(measured + list(args.merge))
        paths = shipped_runs()
        results = report.merge([json.loads(p.read_text()) for p in paths])
        written = report.write_all(results, results_path=paths, out_dir=report.DOCS,
                                   table_path=report.TABLE, shipped=True)
        for path in written:
            print(f"wrote {path}")
    elif args.report or args.report_only:
        from . import report

        paths = measured + list(args.merge)
        if not paths:
            paths = [results_path]
        if not all(Path(p).exists() for p in paths):
            raise SystemExit(f"no results to report: {', '.join(str(p) for p in paths if not Path(p).exists())}")
        results = report.merge([json.loads(Path(p).read_text()) for p in paths])
        for path in report.write_all(results, results_path=paths, out_dir=out_dir):
            print(f"wrote {path}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
