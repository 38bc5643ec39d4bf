"""Woodstar's exceptions.

The names match Hummingbird's so that code catching them keeps working after the
import is changed. Every message about an unsupported thing follows one template,
built by :func:`unsupported_message`.
"""

__all__ = [
    "WoodstarError",
    "MissingConverter",
    "MissingBackend",
    "ConstantError",
    "InvalidModelError",
    "CorruptedFileError",
    "NotFittedError",
    "VersionMismatchWarning",
    "CalibrationWarning",
    "unsupported_message",
]


class WoodstarError(Exception):
    """Base class of every error woodstar raises on purpose."""


class MissingConverter(WoodstarError, RuntimeError):
    """The model, one of its parameters, or a requested strategy is not supported."""


class MissingBackend(WoodstarError, RuntimeError):
    """The backend is unknown, or its optional dependency is not installed."""


class ConstantError(WoodstarError, TypeError):
    """An ``extra_config`` key or value is not valid."""


class InvalidModelError(WoodstarError, ValueError):
    """The model's intermediate representation is inconsistent (a frontend bug)."""


class CorruptedFileError(WoodstarError, ValueError):
    """A saved woodstar file is truncated, tampered with, or not a woodstar file."""


def unsupported_message(owner, what, value, choices):
    """The one template for 'this is not supported' messages."""
    if not isinstance(choices, str):
        choices = ", ".join(str(c) for c in choices)
    return f"Cannot convert {owner}: {what} is not supported (got {value!r}); supported: {choices}."


class NotFittedError(WoodstarError, ValueError):
    """The model handed to ``convert`` has not been fitted."""


class VersionMismatchWarning(UserWarning):
    """A saved model was written with other library versions than the ones loading it."""


class CalibrationWarning(UserWarning):
    """A calibrated routing table was found but not used (corrupted, or measured on
    another CPU, core count or woodstar version); the shipped table is used instead."""
