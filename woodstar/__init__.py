"""Woodstar compiles trained traditional ML models into fast, exact tensor programs."""

import importlib

from . import constants, exceptions

__version__ = "0.1.0"

__all__ = ["convert", "convert_batch", "load", "constants", "exceptions", "__version__"]

_CONVERT_NAMES = ("convert", "convert_batch", "load")


def __getattr__(name):
    # Loaded on first use: they import torch and every frontend, which ``import
    # woodstar`` and the command line's ``--help`` do not need (docs/benchmarks.md,
    # "One row and start-up").
    if name in _CONVERT_NAMES:
        from . import _convert

        return getattr(_convert, name)
    if not name.startswith("__"):
        try:  # a subpackage reached as an attribute (``woodstar.backends``)
            return importlib.import_module(f"{__name__}.{name}")
        except ModuleNotFoundError as error:
            if error.name != f"{__name__}.{name}":
                raise
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_CONVERT_NAMES))
