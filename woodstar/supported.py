"""Hummingbird's ``hummingbird.ml.supported`` names: ``backends``, every backend name
and alias usable here (its optional library installed) mapped to the backend's own
name, as Hummingbird's map does (``backends["pytorch"] == "torch"``); a name that is
not there is not usable here (``woodstar backends`` says why). Computed on first use,
so importing this module imports no optional library.
"""

__all__ = ["backends"]


def _backend_map():
    from .backends.registry import all_backends

    names = {}
    for name, cls in sorted(all_backends().items()):
        if cls.is_available()[0]:
            for alias in (cls.name, *cls.aliases):
                names[alias] = cls.name
    return names


def __getattr__(name):
    if name == "backends":
        value = _backend_map()
        globals()["backends"] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
