"""``woodstar.convert``: frontend -> IR -> lowering -> backend -> container."""

import numpy as np

from ._options import parse_options
from .backends import get_backend
from .container import make_container
from .frontends import find_frontend

__all__ = ["convert"]


def convert(model, backend="torch", test_input=None, device="cpu", extra_config=None):
    """Compile a fitted model into a tensor program with the estimator's own methods.

    ``backend``: "torch"/"pytorch" (more in later releases). ``test_input``: an example
    batch; its feature count is checked. ``extra_config``: keys from
    ``woodstar.constants``; an unknown key is an error. Neither ``model`` nor
    ``extra_config`` is modified.
    """
    options = parse_options(extra_config)
    backend_cls = get_backend(backend)
    model_ir = find_frontend(model)(model, options)
    container = make_container(model_ir, backend_cls, options, device)
    if test_input is not None:
        # Run it once: a shape or dtype problem surfaces here, with the input's error.
        container._run(test_input if not isinstance(test_input, list) else np.asarray(test_input))
    if not options.container:
        return container.model
    return container
