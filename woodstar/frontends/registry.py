"""The registry of frontends, keyed by (top-level package, class name).

Keys are strings, so registering a frontend never imports its library: woodstar
imports without LightGBM, and scikit-learn's private module paths may move freely.
"""

from ..exceptions import MissingConverter, unsupported_message

__all__ = ["register_frontend", "find_frontend", "supported_models"]

_FRONTENDS = {}


def _key(cls):
    return (cls.__module__.split(".")[0], cls.__name__)


def register_frontend(package, *class_names):
    """Decorator: ``fn(model, options) -> ModelIR`` handles these classes."""

    def decorate(fn):
        if not callable(fn):
            raise TypeError("a frontend must be callable as fn(model, options)")
        for name in class_names:
            key = (package, name)
            if key in _FRONTENDS and _FRONTENDS[key] is not fn:
                raise ValueError(f"a frontend for {package}.{name} is already registered")
            _FRONTENDS[key] = fn
        return fn

    return decorate


def find_frontend(model):
    for cls in type(model).__mro__:
        fn = _FRONTENDS.get(_key(cls))
        if fn is not None:
            return fn
    name = type(model).__name__
    raise MissingConverter(unsupported_message(
        name, "this model type", f"{type(model).__module__}.{name}",
        f"the {len(_FRONTENDS)} classes listed in docs/supported.md "
        f"(woodstar.frontends.supported_models())"))


def supported_models():
    return tuple(sorted(_FRONTENDS))
