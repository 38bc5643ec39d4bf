"""``woodstar.convert``: frontend -> IR -> lowering -> backend -> container."""

import dataclasses
import os

import numpy as np
import torch

from . import constants as C
from ._options import parse_options
from .backends import get_backend
from .container import make_container
from .exceptions import ConstantError
from .frontends import find_frontend
from .backends.ranking import choose_backend

__all__ = ["convert", "convert_batch", "load", "convert_ir", "apply_post_transform_option"]


def convert(model, backend="torch", test_input=None, device="cpu", extra_config=None):
    """Compile a fitted model into a tensor program with the estimator's own methods.

    ``backend``: "torch"/"pytorch" (eager), "torch.jit"/"torchscript" (traced),
    "torch.compile" (Inductor), "onnx" (ONNX Runtime), "tvm" (Apache TVM Relax), or
    "auto": the installed backend the benchmark ranked fastest for this thread count
    (``container.backend`` says which; compiling backends take seconds to convert).
    ``test_input``: an example batch. Hummingbird needs one for its exported backends;
    woodstar makes its own example from the model's feature count, so here it is
    optional and only checked: it is run once, and a shape or dtype problem surfaces
    at convert time. An empty one (``[]``, as Hummingbird's callers pass) means none. ``device``: "cpu", "cuda" or "cuda:N". ``extra_config``: keys
    from ``woodstar.constants``; an unknown key is an error. With
    ``extra_config["container"] = False`` the backend's own model is returned
    (``torch.nn.Module``, ``torch.jit.ScriptModule``, ``onnx.ModelProto``, ...). With
    ``extra_config["conversion_cache"]`` (True or a folder), what the onnx, torch.jit
    and tvm backends compile is kept on disk and a repeated conversion loads it.
    Neither ``model`` nor ``extra_config`` is modified.
    """
    options = parse_options(extra_config)
    return _convert(model, backend, test_input, device, options)


def _is_empty(test_input):
    try:
        return len(test_input) == 0
    except TypeError:  # no length (a scalar, a generator): the input check will say
        return False


def _convert(model, backend, test_input, device, options, model_ir=None):
    """``model_ir``: the IR already made (e.g. by the command line from a model file);
    otherwise ``model``'s frontend makes it."""
    if isinstance(backend, str) and backend.lower() == "auto":
        n_threads = options.n_threads or torch.get_num_threads()
        backend = choose_backend("auto", n_threads, str(device).split(":")[0])
    backend_cls = get_backend(backend)
    if model_ir is None:
        model = _load_onnx_path(model)
        model_ir = find_frontend(model)(model, options)
    model_ir = apply_post_transform_option(model_ir, options.post_transform)
    if options.conversion_cache is not None:
        from ._conversion_cache import cached_conversion

        container, _ = cached_conversion(
            model_ir, backend_cls, options, device,
            lambda: make_container(model_ir, backend_cls, options, device))
    else:
        container = make_container(model_ir, backend_cls, options, device)
    if test_input is not None and _is_empty(test_input):
        test_input = None
    if test_input is not None:
        # Run it once: a shape or dtype problem surfaces here, with the input's error.
        container._run(test_input if not isinstance(test_input, list) else np.asarray(test_input))
    if not options.container:
        return container.model
    return container


def _load_onnx_path(model):
    """A path to a ``.onnx`` file is read with ``onnx.load`` (the ONNX-ML frontend)."""
    if isinstance(model, (str, os.PathLike)) and os.fspath(model).lower().endswith(".onnx"):
        import onnx

        return onnx.load(os.fspath(model))
    return model


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


def convert_ir(model_ir, backend="torch", test_input=None, device="cpu", extra_config=None):
    """``convert`` for an IR made elsewhere (the command line builds one from a model
    file, e.g. a LightGBM or XGBoost classifier's Booster)."""
    return _convert(None, backend, test_input, device, parse_options(extra_config), model_ir)


# Hummingbird's post_transform values -> the IR post-transforms they name.
_NAMED_POST_TRANSFORMS = {C.SIGMOID: ("sigmoid", "sigmoid_binary"),
                          C.SOFTMAX: ("softmax", "softmax_libm"),
                          C.TWEEDIE: ("exp", "exp_libm")}
# The probability transforms whose labels the raw scores decide alike: a one-column
# score is class 1 when > 0, several by their argmax.
_RAW_DECIDABLE = ("sigmoid", "sigmoid_binary", "softmax", "softmax_libm", "sigmoid_ovr",
                  "modified_huber_binary", "modified_huber")


def apply_post_transform_option(model_ir, choice):
    """``extra_config["post_transform"]`` applied to the IR (see constants.POST_TRANSFORM).

    ``"raw"`` (Hummingbird's ``None``): the final op keeps its raw scores, so
    ``predict_proba`` returns them; ``predict`` decides on the raw scores (``> 0`` for
    one column, the argmax for several), which gives the source's labels except where
    two probabilities tie only after rounding. A named transform must be the model's
    own, and changes nothing."""
    if choice is None:
        return model_ir
    final, head = model_ir.final, model_ir.head
    own = getattr(final, "post_transform", None)
    if choice != "raw":
        if own not in _NAMED_POST_TRANSFORMS[choice]:
            raise ConstantError(
                f"extra_config[{C.POST_TRANSFORM!r}]={choice!r} does not fit "
                f"{head.estimator}, whose post-transform is {own!r}; give None for raw "
                f"scores, or leave the key out.")
        return model_ir
    if own == "identity" and head.task == "classification":
        return model_ir  # its probabilities are its raw scores (e.g. a random forest)
    if head.task != "classification" or "predict_proba" not in head.methods \
            or head.is_multi_output_classifier or head.blocks or own not in _RAW_DECIDABLE:
        raise ConstantError(
            f"extra_config[{C.POST_TRANSFORM!r}]=None (raw scores) is not supported for "
            f"{head.estimator} (post-transform {own!r}); supported: single-output "
            f"classifiers with predict_proba whose probabilities are a sigmoid, softmax "
            f"or clipped scores of their raw scores.")
    graph = model_ir.graph
    nodes = []
    for node in graph.nodes:
        if node.op is final:
            changes = {"post_transform": "identity"}
            if hasattr(final, "post_transform_scale"):
                changes["post_transform_scale"] = 1.0
            node = dataclasses.replace(node, op=dataclasses.replace(final, **changes))
        nodes.append(node)
    graph = dataclasses.replace(graph, nodes=tuple(nodes), types=None)
    rule = head.decision_rule
    if rule == "argmax":
        rule = "raw_gt_zero" if final.n_outputs == 1 else "raw_argmax"
    head = head.replace(decision_rule=rule,
                        methods=tuple(m for m in head.methods if m != "predict_log_proba"))
    return dataclasses.replace(model_ir, head=head, graph=graph).validate()


def _looks_like_device(value):
    if isinstance(value, torch.device):
        return True
    return isinstance(value, str) and (value in ("cpu", "cuda") or value.startswith("cuda:"))


def load(location, digest=None, override_flag=False, device=None):
    """Read a model written by ``container.save(location)``: the container, ready to run.

    Hummingbird's signature: ``digest``, when given, must equal the saved model's
    digest (the SHA-256 of its ``manifest.json``, which lists every member's SHA-256;
    ``container.digest`` after ``save`` or ``load``), else ``CorruptedFileError``.
    ``override_flag`` is accepted for Hummingbird's callers; woodstar needs no digest to
    load safely (nothing is unpickled, every member is checked), so it changes nothing.
    A ``location`` without ``.zip`` that does not exist is read from ``location.zip``,
    where Hummingbird's ``save`` writes it. ``device``: where to run it; by default
    where it was saved from, or the CPU when that device is not here (a device given
    as the second argument, woodstar's earlier signature, is still read as one)."""
    from ._saving import read_saved

    if device is None and _looks_like_device(digest):
        digest, device = None, digest
    if isinstance(location, (str, os.PathLike)) and not os.path.exists(location) \
            and os.path.exists(os.fspath(location) + ".zip"):
        location = os.fspath(location) + ".zip"
    ir, backend_cls, options, device, programs, saved_digest = read_saved(location, device, digest)
    container = make_container(ir, backend_cls, options, device, programs=programs)
    container.digest = saved_digest
    return container
