"""``extra_config`` validated once, in ``convert``, into an immutable Options."""

import dataclasses
import warnings
from dataclasses import dataclass
from typing import Optional, Tuple

from . import constants as C
from .exceptions import ConstantError

__all__ = ["Options", "parse_options", "DEFAULT_MEMORY_BUDGET"]

DEFAULT_MEMORY_BUDGET = 512 * 2**20
TREE_IMPLEMENTATIONS = ("gemm", "tree_trav", "perf_tree_trav")  # the built-in ones


def _tree_implementations():
    """Every registered strategy: registering one makes it selectable."""
    from .lowering.registry import strategy_names

    return tuple(sorted(set(TREE_IMPLEMENTATIONS) | set(strategy_names())))
PRECISIONS = ("float32", "float64")


@dataclass(frozen=True)
class Options:
    n_threads: Optional[int] = None
    batch_size: Optional[int] = None
    tree_implementation: Optional[str] = None
    precision: Optional[str] = None  # None: float32, float64 where input and source need it
    onnx_target_opset: Optional[int] = None
    onnx_model_name: Optional[str] = None
    tvm_max_fuse_depth: Optional[int] = None
    tvm_pad_input: bool = False
    input_names: Optional[Tuple[str, ...]] = None
    output_names: Optional[Tuple[str, ...]] = None
    container: bool = True
    memory_budget_bytes: int = DEFAULT_MEMORY_BUDGET
    small_batch_rows: Optional[int] = None  # None: the measured default; 0: off
    cpu_route: Optional[str] = None  # None: the plan's choice (woodstar/plan.py)
    onnx_runtime_threads: int = 1  # an ONNX-ML graph's answers: ONNX Runtime's at this count
    # Hummingbird's post_transform: None keeps the model's own; "raw": predict_proba
    # gives the raw scores; "LOGISTIC"/"SOFTMAX"/"TWEEDIE": must be the model's own.
    post_transform: Optional[str] = None
    conversion_cache: Optional[str] = None  # a folder: see constants.CONVERSION_CACHE

    def replace(self, **changes) -> "Options":
        return dataclasses.replace(self, **changes)


def _positive_int(key, value):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConstantError(f"extra_config[{key!r}] must be a positive integer (got {value!r}).")
    return value


def _choice(key, value, choices):
    if value not in choices:
        raise ConstantError(
            f"extra_config[{key!r}] is not supported (got {value!r}); supported: {', '.join(choices)}.")
    return value


def _names(key, value):
    if isinstance(value, str) or not all(isinstance(v, str) for v in value):
        raise ConstantError(f"extra_config[{key!r}] must be a list of strings (got {value!r}).")
    return tuple(value)


def parse_options(extra_config) -> Options:
    """Check every key and value; the caller's dict is read, never changed."""
    if extra_config is None:
        return Options()
    if not isinstance(extra_config, dict):
        raise ConstantError(f"extra_config must be a dict (got {type(extra_config).__name__}).")
    unknown = sorted(str(k) for k in extra_config
                     if k not in C.KNOWN_KEYS and k not in C.IGNORED_KEYS)
    if unknown:
        raise ConstantError(
            f"Unknown extra_config key(s) {', '.join(map(repr, unknown))}; "
            f"known keys: {', '.join((*C.KNOWN_KEYS, *C.IGNORED_KEYS))}.")
    for key, why in C.IGNORED_KEYS.items():
        if key in extra_config:
            warnings.warn(f"extra_config[{key!r}] has no effect in woodstar: {why}.",
                          UserWarning, stacklevel=3)
    cfg = extra_config
    fields = {}
    if cfg.get(C.N_THREADS) is not None:
        fields["n_threads"] = _positive_int(C.N_THREADS, cfg[C.N_THREADS])
    if cfg.get(C.BATCH_SIZE) is not None:
        fields["batch_size"] = _positive_int(C.BATCH_SIZE, cfg[C.BATCH_SIZE])
    if cfg.get(C.TREE_IMPLEMENTATION) is not None:
        fields["tree_implementation"] = _choice(
            C.TREE_IMPLEMENTATION, cfg[C.TREE_IMPLEMENTATION], _tree_implementations())
    if cfg.get(C.TREE_OP_PRECISION_DTYPE) is not None:
        value = cfg[C.TREE_OP_PRECISION_DTYPE]
        value = getattr(value, "__name__", None) or str(value).replace("torch.", "")
        fields["precision"] = _choice(C.TREE_OP_PRECISION_DTYPE, value, PRECISIONS)
    if cfg.get(C.ONNX_TARGET_OPSET) is not None:
        fields["onnx_target_opset"] = _positive_int(C.ONNX_TARGET_OPSET, cfg[C.ONNX_TARGET_OPSET])
    if cfg.get(C.ONNX_OUTPUT_MODEL_NAME) is not None:
        fields["onnx_model_name"] = str(cfg[C.ONNX_OUTPUT_MODEL_NAME])
    if cfg.get(C.TVM_MAX_FUSE_DEPTH) is not None:
        fields["tvm_max_fuse_depth"] = _positive_int(C.TVM_MAX_FUSE_DEPTH, cfg[C.TVM_MAX_FUSE_DEPTH])
    if C.TVM_PAD_INPUT in cfg:
        fields["tvm_pad_input"] = bool(cfg[C.TVM_PAD_INPUT])
    for key, old_key, field in ((C.INPUT_NAMES, C.ONNX_INPUT_NAMES, "input_names"),
                                (C.OUTPUT_NAMES, C.ONNX_OUTPUT_NAMES, "output_names")):
        if cfg.get(key) is not None and cfg.get(old_key) is not None:
            raise ConstantError(f"extra_config has both {key!r} and its earlier name "
                                f"{old_key!r}; give one.")
        for name in (key, old_key):
            if cfg.get(name) is not None:
                fields[field] = _names(name, cfg[name])
    if C.POST_TRANSFORM in cfg:
        value = cfg[C.POST_TRANSFORM]
        if value not in C.POST_TRANSFORMS:
            raise ConstantError(
                f"extra_config[{C.POST_TRANSFORM!r}] is not supported (got {value!r}); "
                f"supported: None (raw scores), "
                f"{', '.join(map(repr, C.POST_TRANSFORMS[1:]))}.")
        fields["post_transform"] = "raw" if value is None else value
    if C.CONTAINER in cfg:
        fields["container"] = bool(cfg[C.CONTAINER])
    if cfg.get(C.MEMORY_BUDGET_BYTES) is not None:
        fields["memory_budget_bytes"] = _positive_int(C.MEMORY_BUDGET_BYTES, cfg[C.MEMORY_BUDGET_BYTES])
    if cfg.get(C.SMALL_BATCH_ROWS) is not None:
        value = cfg[C.SMALL_BATCH_ROWS]
        fields["small_batch_rows"] = 0 if value == 0 else _positive_int(C.SMALL_BATCH_ROWS, value)
    if cfg.get(C.ONNX_RUNTIME_THREADS) is not None:
        fields["onnx_runtime_threads"] = _positive_int(C.ONNX_RUNTIME_THREADS,
                                                       cfg[C.ONNX_RUNTIME_THREADS])
    if cfg.get(C.CONVERSION_CACHE) not in (None, False):
        fields["conversion_cache"] = _folder(C.CONVERSION_CACHE, cfg[C.CONVERSION_CACHE])
    if cfg.get(C.CPU_ROUTE) not in (None, "auto"):
        fields["cpu_route"] = _choice(C.CPU_ROUTE, cfg[C.CPU_ROUTE], _cpu_routes())
    return Options(**fields)


def _folder(key, value):
    """True: the default conversion cache folder; a path: that folder (made when first
    written)."""
    import os

    if value is True:
        from ._conversion_cache import default_folder

        return str(default_folder())
    if isinstance(value, (str, os.PathLike)) and os.fspath(value):
        return os.path.abspath(os.path.expanduser(os.fspath(value)))
    raise ConstantError(f"extra_config[{key!r}] must be True or a folder's path (got {value!r}).")


def _cpu_routes():
    from .plan import ROUTES

    return ("auto",) + ROUTES
