"""The registry of backends, by name and alias (Hummingbird's names included)."""

from ..exceptions import MissingBackend

__all__ = ["register_backend", "get_backend", "backend_names", "all_backends"]

_BACKENDS = {}
_ALIASES = {}


def register_backend(cls):
    """Class decorator. A backend has ``name``, ``aliases``, ``is_available()``,
    ``compile(module, example, options, device)``, ``devices``, and for save/load
    ``artifact_name``, ``load_artifact(...)`` and, when it has an artifact,
    ``save_artifact(runner)`` (see ``backends/_base.py``)."""
    required = ["name", "aliases", "is_available", "compile", "devices", "artifact_name",
                "load_artifact"]
    if getattr(cls, "artifact_name", None) is not None:
        required.append("save_artifact")
    for attribute in required:
        if not hasattr(cls, attribute):
            raise TypeError(f"backend {cls.__name__} needs `{attribute}`")
    for alias in (cls.name, *cls.aliases):  # check every name before registering any
        if alias in _ALIASES and _ALIASES[alias] is not cls:
            raise ValueError(f"a backend named {alias!r} is already registered")
    for alias in (cls.name, *cls.aliases):
        _ALIASES[alias] = cls
    _BACKENDS[cls.name] = cls
    return cls


def get_backend(name):
    """The backend class for a name or alias; raises MissingBackend when unknown or
    when its optional dependency is missing (the message says what to install)."""
    key = name.lower() if isinstance(name, str) else name
    cls = _ALIASES.get(key)
    if cls is None:
        raise MissingBackend(
            f"Unknown backend {name!r}; available backends: {', '.join(backend_names())}.")
    available, reason = cls.is_available()
    if not available:
        raise MissingBackend(f"Backend {name!r} is not available here: {reason}")
    return cls


def backend_names():
    return tuple(sorted(_ALIASES))


def all_backends():
    return dict(_BACKENDS)
