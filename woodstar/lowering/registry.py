"""The registry of tree strategies, by name."""

from ..exceptions import MissingConverter, unsupported_message

__all__ = ["register_strategy", "get_strategy", "strategy_names"]

_STRATEGIES = {}


def register_strategy(cls):
    """Class decorator: make a strategy selectable by its ``name``. Refuses duplicates."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name:
        raise TypeError(f"strategy {cls.__name__} needs a non-empty string `name`")
    for method in ("estimate_bytes", "refusal"):
        if not callable(getattr(cls, method, None)):
            raise TypeError(f"strategy {cls.__name__} needs a `{method}` method")
    if name in _STRATEGIES and _STRATEGIES[name] is not cls:
        raise ValueError(f"a tree strategy named {name!r} is already registered")
    _STRATEGIES[name] = cls
    return cls


def get_strategy(name, owner="the model"):
    try:
        return _STRATEGIES[name]
    except KeyError:
        raise MissingConverter(
            unsupported_message(owner, "tree_implementation", name, strategy_names())) from None


def strategy_names():
    return tuple(sorted(_STRATEGIES))
