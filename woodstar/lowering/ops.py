"""The registry of op lowerings: op kind -> a function building the Torch module
for one node. A node module takes the node's input tensors and returns a tuple of its
output tensors, in the dtypes ``Op.output_dtypes`` gives."""

from ..exceptions import MissingConverter

__all__ = ["register_lowering", "get_lowering", "lowered_kinds"]

_LOWERINGS = {}


def register_lowering(kind):
    """Decorator: ``fn(op, input_dtypes, context) -> nn.Module`` lowers ops of ``kind``."""

    def decorate(fn):
        if kind in _LOWERINGS and _LOWERINGS[kind] is not fn:
            raise ValueError(f"a lowering for op kind {kind!r} is already registered")
        _LOWERINGS[kind] = fn
        return fn

    return decorate


def get_lowering(kind):
    try:
        return _LOWERINGS[kind]
    except KeyError:
        raise MissingConverter(f"Cannot convert the model: op kind {kind!r} has no Torch "
                               f"lowering; lowered kinds: {', '.join(lowered_kinds())}.") from None


def lowered_kinds():
    return tuple(sorted(_LOWERINGS))
