"""``woodstar bench``: the benchmark suite (it lives in the source tree's
``benchmarks/`` package, next to ``woodstar/``; run it from a checkout)."""

import importlib
import sys
from pathlib import Path


def _benchmarks():
    try:
        return importlib.import_module("benchmarks.cli")
    except ImportError:
        root = Path(__file__).resolve().parents[2]
        if not (root / "benchmarks" / "cli.py").exists():
            return None
        sys.path.insert(0, str(root))
        return importlib.import_module("benchmarks.cli")


def register(subparsers):
    parser = subparsers.add_parser(
        "bench", help="time every route end to end against the native library and peers")
    module = _benchmarks()
    if module is not None:
        module.add_arguments(parser)
    parser.set_defaults(handler=run)


def run(args):
    module = _benchmarks()
    if module is None:
        print("woodstar bench needs the benchmarks/ folder of a woodstar source checkout.")
        return 1
    return module.run(args)
