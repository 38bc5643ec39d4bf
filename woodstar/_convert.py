"""``woodstar.convert``: frontend -> IR -> lowering -> backend -> container."""

import numpy as np
import torch

from . import constants as C
from ._options import parse_options
from .backends import get_backend
from .container import make_container
from .exceptions import ConstantError
from .frontends import find_frontend
from .backends.ranking import choose_backend

__all__ = ["convert", "convert_batch", "load"]


def convert(model, backend="torch", test_input=None, device="cpu", extra_config=None):
    """Compile a fitted model into a tensor program with the estimator's own methods.

    ``backend``: "torch"/"pytorch" (eager), "torch.jit"/"torchscript" (traced),
    "torch.compile" (Inductor), "onnx" (ONNX Runtime), "tvm" (Apache TVM Relax), or
    "auto": the installed backend the benchmark ranked fastest for this thread count
    (``container.backend`` says which; compiling backends take seconds to convert).
    ``test_input``: an example batch. Hummingbird needs one for its exported backends;
    woodstar makes its own example from the model's feature count, so here it is
    optional and only checked: it is run once, and a shape or dtype problem surfaces
    at convert time. ``device``: "cpu", "cuda" or "cuda:N". ``extra_config``: keys
    from ``woodstar.constants``; an unknown key is an error. With
    ``extra_config["container"] = False`` the backend's own model is returned
    (``torch.nn.Module``, ``torch.jit.ScriptModule``, ``onnx.ModelProto``, ...).
    Neither ``model`` nor ``extra_config`` is modified.
    """
    options = parse_options(extra_config)
    return _convert(model, backend, test_input, device, options)


def _convert(model, backend, test_input, device, options):
    if isinstance(backend, str) and backend.lower() == "auto":
        n_threads = options.n_threads or torch.get_num_threads()
        backend = choose_backend("auto", n_threads, str(device).split(":")[0])
    backend_cls = get_backend(backend)
    model_ir = find_frontend(model)(model, options)
    container = make_container(model_ir, backend_cls, options, device)
    if test_input is not None:
        # Run it once: a shape or dtype problem surfaces here, with the input's error.
        container._run(test_input if not isinstance(test_input, list) else np.asarray(test_input))
    if not options.container:
        return container.model
    return container


def convert_batch(model, backend, test_input, remainder_size=0, device="cpu", extra_config=None):
    """Hummingbird's ``convert_batch``: a container that scores inputs in batches of
    ``len(test_input)`` rows.

    Hummingbird compiles fixed-shape models here: one for full batches and, when
    ``remainder_size`` > 0, one for the last short batch of that many rows. Every
    woodstar backend takes any batch size, so one program serves both; the rows are
    still split into ``len(test_input)``-row batches (with
    ``tvm_pad_prediction_inputs`` a short last batch is padded to full size, as
    Hummingbird's TVM does). ``remainder_size`` is checked as Hummingbird checks it
    (0 <= remainder_size < batch size) and kept as ``container.remainder_size``.
    """
    options = parse_options(extra_config)
    if test_input is None or not hasattr(test_input, "shape") or len(test_input.shape) != 2:
        raise ConstantError("convert_batch needs test_input: a 2-D array whose rows are one batch.")
    batch_size = int(test_input.shape[0])
    if batch_size < 1:
        raise ConstantError("convert_batch needs a test_input with at least one row.")
    if isinstance(remainder_size, bool) or not isinstance(remainder_size, (int, np.integer)) \
            or not 0 <= remainder_size < batch_size:
        raise ConstantError(
            f"remainder_size must be an integer in [0, {batch_size}) for batches of "
            f"{batch_size} rows (got {remainder_size!r}).")
    if options.batch_size is not None and options.batch_size != batch_size:
        raise ConstantError(
            f"extra_config[{C.BATCH_SIZE!r}]={options.batch_size} disagrees with "
            f"len(test_input)={batch_size}; convert_batch takes the batch size from test_input.")
    options = options.replace(batch_size=batch_size)
    container = _convert(model, backend, test_input, device, options)
    if options.container:
        container.remainder_size = int(remainder_size)
    return container


def load(path, device=None):
    """Read a model written by ``container.save(path)``: the container, ready to run.
    ``device``: where to run it; by default where it was saved from, or the CPU when
    that device is not here. Nothing is unpickled; a damaged file raises
    ``CorruptedFileError``."""
    from ._saving import load_parts

    ir, backend_cls, options, device, programs = load_parts(path, device)
    return make_container(ir, backend_cls, options, device, programs=programs)
