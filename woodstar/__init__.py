"""Woodstar compiles trained traditional ML models into fast, exact tensor programs."""

from . import constants, exceptions
from ._convert import convert, convert_batch, load

__version__ = "0.1.0"

__all__ = ["convert", "convert_batch", "load", "constants", "exceptions", "__version__"]
