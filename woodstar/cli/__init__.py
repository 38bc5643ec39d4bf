"""The ``woodstar`` command line. Each subcommand is one module in this package that
defines ``register(subparsers)``; modules are discovered, so adding a command is
adding a file."""

import argparse
import importlib
import pkgutil
import sys

__all__ = ["main", "build_parser"]


def build_parser():
    parser = argparse.ArgumentParser(
        prog="woodstar", description="Compile trained ML models into fast, exact tensor programs.")
    from .. import __version__

    parser.add_argument("--version", action="version", version=f"woodstar {__version__}")
    subparsers = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(__path__), key=lambda m: m.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{__name__}.{info.name}")
        module.register(subparsers)
    return parser


def main(argv=None):
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "handler", None):
        parser.print_help()
        return 2
    try:
        return args.handler(args) or 0
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
