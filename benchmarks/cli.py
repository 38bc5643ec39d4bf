"""Command line of the benchmark suite, shared by ``woodstar bench`` and
``python -m benchmarks``."""

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
RESULTS = HERE / "results"

__all__ = ["add_arguments", "run", "main"]


def _csv(kind):
    return lambda text: tuple(kind(v) for v in text.split(",") if v)


def add_arguments(parser):
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--quick", action="store_true",
                      help="four models, batches 1/100/10k, 3 repeats, onnxruntime as the only extra peer")
    mode.add_argument("--smoke", action="store_true",
                      help="one tiny cell per candidate: checks the harness runs (seconds)")
    parser.add_argument("--models", type=_csv(str), help="comma-separated model names")
    parser.add_argument("--batches", type=_csv(int), help="comma-separated batch sizes")
    parser.add_argument("--threads", type=_csv(int), help="comma-separated thread counts")
    parser.add_argument("--repeats", type=int)
    parser.add_argument("--peers", type=_csv(str),
                        help="peers besides the native library (default: onnxruntime,tl2cgen,lleaves)")
    parser.add_argument("--backends", type=_csv(str),
                        help="woodstar backends to time (default: every installed one)")
    parser.add_argument("--routed-only", action="store_true",
                        help="time each backend's routed route only, not every forced strategy")
    parser.add_argument("--routing-sweep", action="store_true",
                        help="also time woodstar's strategies on forests of depth 2..14 (routing evidence)")
    parser.add_argument("--out", type=Path, help="results JSON (default benchmarks/results/<mode>.json)")
    parser.add_argument("--report", action="store_true",
                        help="write docs/benchmarks.md, plots and the routing table from the results")
    parser.add_argument("--report-only", action="store_true",
                        help="do not measure: only rebuild the report from --out")
    parser.add_argument("--merge", type=Path, action="append", default=[],
                        help="more results JSON to report together with --out (e.g. a routing sweep)")
    parser.add_argument("--no-progress", action="store_true")


def run(args):
    from . import harness
    from .models import MODEL_SPECS, QUICK_MODELS, SWEEP_MODELS

    mode = "smoke" if args.smoke else "quick" if args.quick else "full"
    out = args.out or RESULTS / f"{mode}.json"
    if not args.report_only:
        settings = dict({"smoke": harness.SMOKE, "quick": harness.QUICK, "full": harness.FULL}[mode])
        for key in ("batches", "threads", "repeats"):
            if getattr(args, key):
                settings[key] = getattr(args, key)
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
        peers = args.peers if args.peers is not None else (
            ("onnxruntime",) if mode != "full" else ("onnxruntime", "tl2cgen", "lleaves"))
        harness.run_benchmark(models, peers=peers, woodstar_only_models=sweep, out_path=out,
                              progress=not args.no_progress, backends=args.backends,
                              routed_only=args.routed_only, **settings)
        print(f"results: {out}")
    if args.report or args.report_only:
        from . import report

        results = report.merge([json.loads(Path(p).read_text()) for p in [out, *args.merge]])
        paths = report.write_all(results, results_path=[out, *args.merge])
        for path in paths:
            print(f"wrote {path}")
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__)
    add_arguments(parser)
    return run(parser.parse_args(argv))
