"""ONNX: the lowered module exported to an ONNX model and run by ONNX Runtime.

A bare tree ensemble that ONNX-ML's ``TreeEnsemble`` operator computes exactly is
exported as that operator (onnx_tree_export.py: faster at every measured batch size,
docs/benchmarks.md, "Exporting backends"); everything else as the tensor program:

Export uses torch's default exporter (``torch.onnx.export(..., dynamo=True)``, built on
``torch.export``) with a dynamic batch dimension, in memory: nothing is written to the
working directory. Every exported model is run once by ONNX Runtime on a check batch
and compared with the eager module. If the default exporter fails or its model
differs, the TorchScript-based exporter (``dynamo=False``) is tried (and checked the
same way) before giving up; ``exporter`` on the runner says which one produced the
model. (With torch 2.13 the TorchScript exporter cannot export ``trunc``, used by
categorical splits, and gave wrong answers for HistGradientBoosting in a trial: the
check is what keeps such a model from being returned.)

Opset: the default exporter writes opset 18; a lower ``onnx_target_opset`` is reached with
ONNX's version converter, which has adapters down to opset 13 for every operator the
lowered models use (below that it lacks some, e.g. ``Identity`` from 16, ``Shape`` from
15): a target below ``MIN_TARGET_OPSET`` is refused at once with a ConstantError.

Threads: ONNX Runtime's setting is per session (``SessionOptions.intra_op_num_threads``),
so ``n_threads`` never changes anything process-wide.

onnx, onnxruntime and onnxscript are imported only inside these functions.
"""

import contextlib
import importlib.util
import io
import logging
import warnings

import numpy as np
import torch

from ..exceptions import ConstantError, MissingBackend
from ..runtimes._row_blocks import RowBlocks
from ._base import Runner, cuda_index, refuse_unsupported_parts
from .onnx_tree_export import (EXPORTER_NAME as TREE_ENSEMBLE_EXPORTER, is_tree_ensemble_model,
                               tree_ensemble_export, tree_ensemble_of)
from .registry import register_backend

__all__ = ["OnnxBackend", "export_onnx", "MIN_TARGET_OPSET"]

MIN_TARGET_OPSET = 13

INSTALL = "pip install 'woodstar[onnx]' (onnx, onnxruntime, onnxscript)"
DEFAULT_INPUT_NAMES = ("input_0",)
DEFAULT_OUTPUT_NAMES = ("raw", "transformed")


def _missing():
    return [name for name in ("onnx", "onnxruntime", "onnxscript")
            if importlib.util.find_spec(name) is None]


@contextlib.contextmanager
def _quiet_exporter():
    """The exporter logs about optional torchvision ops and warns about deprecations
    that are not the user's business; silence them for the duration of the export."""
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "torch._export",
                                               "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels):
            lg.setLevel(level)


def _names(options):
    inputs = options.input_names or DEFAULT_INPUT_NAMES
    outputs = options.output_names or DEFAULT_OUTPUT_NAMES
    if len(inputs) != 1:
        raise MissingBackend(
            f"Backend 'onnx': input_names needs exactly 1 name for a tree model (got {list(inputs)}).")
    if len(outputs) != 2:
        raise MissingBackend(
            f"Backend 'onnx': output_names needs 2 names (raw scores, transformed scores) "
            f"(got {list(outputs)}).")
    return list(inputs), list(outputs)


def _first_lines(error, limit=400):
    """Exporter errors can carry a whole graph dump: keep the start."""
    text = str(error).strip()
    return text if len(text) <= limit else text[:limit] + " ..."


def _check_batch(module):
    """Rows that exercise NaN routing and more than one batch size's worth of rows."""
    rng = np.random.default_rng(0)
    X = rng.normal(scale=2.0, size=(7, module.n_features))
    X[rng.random(X.shape) < 0.2] = np.nan
    X[:, :1] = np.round(X[:, :1])  # integral values: valid category codes, too
    return X.astype(np.dtype(module.dtype_name))


def _check_run(model, module):
    """The eager module's outputs and ONNX Runtime's (one intra-op thread: the order of
    the sums the runner keeps) on the check batch."""
    import onnxruntime as ort

    X = _check_batch(module)
    with torch.inference_mode():
        expected = [t.numpy() for t in module(torch.from_numpy(X))]
    session_options = ort.SessionOptions()
    session_options.intra_op_num_threads = 1
    session = ort.InferenceSession(model.SerializeToString(), sess_options=session_options,
                                   providers=["CPUExecutionProvider"])
    return session.run(None, {session.get_inputs()[0].name: X}), expected


def _verify(model, module):
    """None when ONNX Runtime reproduces the eager module on a check batch, else why not."""
    got, expected = _check_run(model, module)
    tol = 1e-5 if module.dtype_name == "float32" else 1e-10
    for name, a, b in zip(("raw", "transformed"), got, expected):
        if a.shape != b.shape or not np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True):
            return f"its {name} output differs from Torch eager on a check batch"
    return None


def _opset(model):
    return {o.domain: o.version for o in model.opset_import}.get("", None)


def _checked(name, model, module, target, errors):
    """``model`` at the target opset (converted when the exporter chose another one),
    with boolean Where widened and checked against eager; None (and the reason in
    ``errors``) when it cannot be had."""
    import onnx

    if target is not None and _opset(model) != target:
        try:
            model = onnx.version_converter.convert_version(model, target)
        except Exception as error:  # noqa: BLE001  (the converter raises many kinds)
            errors.append(f"{name}: wrote opset {_opset(model)}; converting it to opset "
                          f"{target} failed ({type(error).__name__}: {_first_lines(error, 200)})")
            return None
    model = _widen_bool_where(model)
    problem = _verify(model, module)
    if problem:
        errors.append(f"{name}: {problem}")
        return None
    return model


def _verify_raw_bits(model, module):
    """None when ONNX Runtime's raw scores equal the eager module's bit for bit on the
    check batch (both add the trees in order in float64), else why not."""
    got, expected = _check_run(model, module)
    if got[0].shape != expected[0].shape or not np.array_equal(got[0], expected[0], equal_nan=True):
        return "its raw output is not the eager module's bit for bit on a check batch"
    return None


def _tree_ensemble_export(module, options, device, errors):
    """The ``TreeEnsemble`` export (onnx_tree_export.py) where it applies and passes
    both checks; None otherwise (the reason in ``errors``)."""
    ens = tree_ensemble_of(module, options, device) if hasattr(module, "parts") else None
    if ens is None:
        return None
    try:
        model = tree_ensemble_export(module, ens, options, export_onnx)
    except Exception as error:  # noqa: BLE001  (any failure: export the tensor program)
        errors.append(f"{TREE_ENSEMBLE_EXPORTER}: {type(error).__name__}: {_first_lines(error)}")
        return None
    problem = _verify(model, module) or _verify_raw_bits(model, module)
    if problem:
        errors.append(f"{TREE_ENSEMBLE_EXPORTER}: {problem}")
        return None
    return model


def export_onnx(module, options, device="cpu"):
    """The ``onnx.ModelProto`` of ``module`` (CPU export; the batch dimension is
    dynamic) and the name of the exporter that produced it: ONNX-ML's ``TreeEnsemble``
    for a bare tree ensemble it takes exactly (onnx_tree_export.py), else torch's
    exporters of the tensor program."""
    import onnx

    input_names, output_names = _names(options)
    module = module.to("cpu")
    example = torch.zeros((2, module.n_features), dtype=module.input_dtype)
    target = options.onnx_target_opset
    if target is not None and target < MIN_TARGET_OPSET:
        raise ConstantError(
            f"extra_config['onnx_target_opset'] must be at least {MIN_TARGET_OPSET} for the "
            f"onnx backend (got {target}): ONNX's version converter cannot bring the "
            f"exported model (opset 18) below opset {MIN_TARGET_OPSET}.")
    refuse_unsupported_parts(module, "onnx")
    errors = []
    with _quiet_exporter():
        model = _tree_ensemble_export(module, options, device, errors)
    if model is not None:
        return model, TREE_ENSEMBLE_EXPORTER
    with _quiet_exporter():
        try:
            program = torch.onnx.export(
                module, (example,), dynamo=True, input_names=input_names,
                output_names=output_names, opset_version=target,
                dynamic_shapes=({0: torch.export.Dim("batch")},), external_data=False,
                verbose=False, report=False, verify=False, optimize=True)
            model = _checked("dynamo exporter", program.model_proto, module, target, errors)
            exporter = "dynamo"
        except Exception as error:  # noqa: BLE001  (any exporter failure: try the other one)
            errors.append(f"dynamo exporter: {type(error).__name__}: {_first_lines(error)}")
        if model is None:
            try:
                buffer = io.BytesIO()
                torch.onnx.export(
                    module, (example,), buffer, dynamo=False, input_names=input_names,
                    output_names=output_names, opset_version=target or 17,
                    dynamic_axes={name: {0: "batch"} for name in input_names + output_names})
                model = _checked("TorchScript exporter", onnx.load_from_string(buffer.getvalue()),
                                 module, target, errors)
                exporter = "torchscript"
            except Exception as error:  # noqa: BLE001
                errors.append(f"TorchScript exporter: {type(error).__name__}: {_first_lines(error)}")
    if model is None:
        raise MissingBackend("Backend 'onnx' could not export the model: " + " | ".join(errors))
    model.graph.name = options.onnx_model_name or "woodstar"
    return model, exporter


def _elem_types(model):
    import onnx

    inferred = onnx.shape_inference.infer_shapes(model)
    graph = inferred.graph
    types = {t.name: t.data_type for t in graph.initializer}
    for value in (*graph.input, *graph.output, *graph.value_info):
        types[value.name] = value.type.tensor_type.elem_type
    return types


def _widen_bool_where(model):
    """ONNX Runtime has no CPU kernel for ``Where`` on booleans (the lowered modules
    select between two decisions with it): compute those in uint8 and cast back.
    Same values, every runtime; the model is changed in place."""
    import onnx
    from onnx import TensorProto, helper

    if not any(n.op_type == "Where" for n in model.graph.node):
        return model
    types = _elem_types(model)
    nodes = []
    for i, node in enumerate(model.graph.node):
        if node.op_type != "Where" or types.get(node.output[0]) != TensorProto.BOOL:
            nodes.append(node)
            continue
        condition, x, y = node.input
        out = node.output[0]
        prefix = f"woodstar_bool_where_{i}"
        nodes.append(helper.make_node("Cast", [x], [f"{prefix}_x"], to=TensorProto.UINT8,
                                      name=f"{prefix}_cast_x"))
        nodes.append(helper.make_node("Cast", [y], [f"{prefix}_y"], to=TensorProto.UINT8,
                                      name=f"{prefix}_cast_y"))
        nodes.append(helper.make_node("Where", [condition, f"{prefix}_x", f"{prefix}_y"],
                                      [f"{prefix}_out"], name=f"{prefix}_where"))
        nodes.append(helper.make_node("Cast", [f"{prefix}_out"], [out], to=TensorProto.BOOL,
                                      name=f"{prefix}_cast_out"))
    del model.graph.node[:]
    model.graph.node.extend(nodes)
    onnx.checker.check_model(model)
    return model


def _session(model_bytes, options, device, one_thread=False):
    import onnxruntime as ort

    session_options = ort.SessionOptions()
    session_options.log_severity_level = 3
    if one_thread:  # the TreeEnsemble export: rows split between threads, never trees
        session_options.intra_op_num_threads = 1
        session_options.inter_op_num_threads = 1
    elif options.n_threads is not None:
        session_options.intra_op_num_threads = options.n_threads
        session_options.inter_op_num_threads = 1
    if torch.device(device).type == "cuda":
        if "CUDAExecutionProvider" not in ort.get_available_providers():
            raise MissingBackend(
                "Backend 'onnx' on CUDA needs ONNX Runtime's CUDA provider; this onnxruntime "
                f"has {ort.get_available_providers()}: pip install onnxruntime-gpu")
        providers = [("CUDAExecutionProvider", {"device_id": cuda_index(device)}),
                     "CPUExecutionProvider"]
    else:
        providers = ["CPUExecutionProvider"]
    return ort.InferenceSession(model_bytes, sess_options=session_options, providers=providers)


class OnnxRunner(Runner):
    """``exporter``: "ai.onnx.ml" (TreeEnsemble), "dynamo" or "torchscript" (the tensor
    program), "loaded" (from a saved file)."""

    # Batches smaller than this run the TreeEnsemble export on one thread: the torch
    # backend's ONNX-ML route, the same kernel, lost to the thread hand-off below it.
    parallel_min_rows = 1024

    def __init__(self, module, options, device, model=None, exporter="loaded"):
        super().__init__(module, options, device)
        if model is None:
            model, exporter = export_onnx(module, options, device)
        self.exporter = exporter
        self._model = model
        self._bytes = model.SerializeToString()
        tree_ensemble = is_tree_ensemble_model(model)
        self.runs_tensor_ops = not tree_ensemble
        self.session = _session(self._bytes, options, device, one_thread=tree_ensemble)
        self._input_name = self.session.get_inputs()[0].name
        threads = (options.n_threads or torch.get_num_threads()) if tree_ensemble else 1
        self.blocks = RowBlocks(threads, self.parallel_min_rows)

    @property
    def model(self):
        return self._model

    def _run(self, X):
        return self.session.run(None, {self._input_name: X})

    def __call__(self, X):
        if self.blocks.n_threads == 1 or len(X) < self.blocks.min_rows:
            raw, transformed = self._run(X)
            return np.asarray(raw), np.asarray(transformed)
        # Row blocks concurrently; each block's two outputs side by side, then split.
        width = None

        def run_block(block):
            nonlocal width
            raw, transformed = self._run(block)
            width = raw.shape[1]
            return np.concatenate([raw, transformed], axis=1)

        both = self.blocks.run(run_block, X)
        return np.ascontiguousarray(both[:, :width]), np.ascontiguousarray(both[:, width:])

    def to(self, device):
        if torch.device(device).type != "cpu" and is_tree_ensemble_model(self._model):
            return OnnxRunner(self.module, self.options, device)  # the tensor program
        return OnnxRunner(self.module, self.options, device, self._model, self.exporter)


@register_backend
class OnnxBackend:
    name = "onnx"
    aliases = ()
    artifact_name = "model.onnx"
    devices = ("cpu", "cuda")

    @staticmethod
    def is_available():
        missing = _missing()
        if missing:
            return False, f"{', '.join(missing)} not installed: {INSTALL}"
        return True, ""

    @staticmethod
    def details():
        """For ``woodstar backends``: versions and ONNX Runtime's providers (onnxscript's
        version from its package metadata: importing it takes about a second)."""
        from importlib.metadata import PackageNotFoundError, version

        import onnx
        import onnxruntime as ort

        try:
            onnxscript_version = version("onnxscript")
        except PackageNotFoundError:  # installed without metadata
            import onnxscript

            onnxscript_version = onnxscript.__version__
        return {"onnx": onnx.__version__, "onnxruntime": ort.__version__,
                "onnxscript": onnxscript_version,
                "providers": list(ort.get_available_providers())}

    @staticmethod
    def library_versions():
        import onnx
        import onnxruntime

        return {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__}

    @staticmethod
    def compile(module, example, options, device):
        return OnnxRunner(module, options, device)

    @staticmethod
    def save_artifact(runner):
        return runner._bytes

    @staticmethod
    def load_artifact(module, data, options, device):
        import onnx

        return OnnxRunner(module, options, device, model=onnx.load_from_string(data))
