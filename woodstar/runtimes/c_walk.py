"""The compiled tree walk: ``c_walk.c``, built once per machine with the system's C
compiler and loaded with ctypes; the torch backend's CPU route where a compiler is there.

Why a kernel of our own: ONNX Runtime's tree operator gives each leaf one target, so
forest classifiers had to hand leaf indices back to NumPy, and every call pays the
session's overhead; the Torch program pays per-operator dispatch. This kernel walks
each tree once per row, adds the leaf vectors itself, and takes float32 rows as they
come (docs/benchmarks.md, "CPU routes", has the measurements that chose it).

Exact for the same reasons as the other routes (see c_walk.c); categorical splits are
walked too. Ensembles that sum in float32 (XGBoost's, ``sum_precision="float32"``) get
float32 sums and XGBoost's float32 links here, so margins and probabilities are
XGBoost's to the bit (the other routes sum in double). The build is cached
under ``$WOODSTAR_CACHE_DIR`` (default ``~/.cache/woodstar``), keyed by the source's
hash and the compiler command; without a compiler, or if the build fails, ``available``
says why and the container uses the next route.
"""

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

import numpy as np

from ..ir.transforms import apply_post_transform
from ..ir.tree_ensemble import TreeEnsemble
from ._cpu_route import CpuRoute
from ..lowering.trees._common import missing_range_bounds, node_thresholds
from ..lowering.trees._layout import sibling_adjacent_layout

__all__ = ["CTreeWalk", "available", "unavailable_reason"]

SOURCE = Path(__file__).with_name("c_walk.c")
FLAGS = ("-O3", "-std=c99", "-fPIC", "-shared", "-pthread")
DEFAULT_LEFT, MISSING_IN_RANGE, CATEGORICAL = 1, 2, 4
CATEGORICAL_RULES = {"truncate": 0, "nonnegative": 1, "exact": 2}  # RULE_* in c_walk.c
NODE_DTYPES = {  # must match node32 / node64 in c_walk.c (checked on load)
    "float32": np.dtype([("feature", "<i4"), ("right", "<i4"), ("flags", "<i4"),
                         ("threshold", "<f4")]),
    "float64": np.dtype([("threshold", "<f8"), ("feature", "<i4"), ("right", "<i4"),
                         ("flags", "<i4"), ("unused", "<i4")]),
}


class _Model(ctypes.Structure):  # ``model`` in c_walk.c
    _fields_ = [("nodes", ctypes.c_void_p), ("roots", ctypes.c_void_p),
                ("depths", ctypes.c_void_p), ("out_start", ctypes.c_void_p),
                ("leaf_value", ctypes.c_void_p), ("n_trees", ctypes.c_int64),
                ("width", ctypes.c_int64), ("n_cols", ctypes.c_int64),
                ("n_out", ctypes.c_int64), ("has_range", ctypes.c_int64),
                ("sum32", ctypes.c_int64),
                ("range_lo", ctypes.c_double), ("range_hi", ctypes.c_double),
                ("cat_start", ctypes.c_void_p), ("cat_size", ctypes.c_void_p),
                ("cat_bits", ctypes.c_void_p), ("has_categorical", ctypes.c_int64),
                ("cat_rule", ctypes.c_int64)]


_state = {}  # "lib" or "reason", once per process
_lock = threading.Lock()  # one build at a time (threads share the pid in the temp name)


def _cache_dir() -> Path:
    configured = os.environ.get("WOODSTAR_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "woodstar"


def _compiler():
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def _build(compiler: str) -> Path:
    source = SOURCE.read_bytes()
    key = hashlib.sha256(source + " ".join((compiler, *FLAGS)).encode()).hexdigest()[:16]
    name = f"c_walk-{platform.machine()}-{key}.so"
    for directory in (_cache_dir(), Path(tempfile.gettempdir()) / f"woodstar-{os.getuid()}"):
        target = directory / name
        if target.exists():
            return target
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if not os.access(directory, os.W_OK):
            continue
        partial = directory / f"{name}.{os.getpid()}.tmp"
        result = subprocess.run([compiler, *FLAGS, str(SOURCE), "-o", str(partial), "-lm"],
                                capture_output=True, text=True, timeout=120)
        if result.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"{compiler} failed: {result.stderr.strip()[:500]}")
        os.replace(partial, target)  # atomic: a concurrent build is never half-read
        return target
    raise RuntimeError(f"no writable cache directory ({_cache_dir()} or the temp dir)")


def _load():
    if "lib" in _state or "reason" in _state:
        return _state.get("lib")
    with _lock:
        if "lib" not in _state and "reason" not in _state:
            _load_once()
    return _state.get("lib")


def _load_once():
    if sys.platform == "win32":
        _state["reason"] = "the compiled walk is built on Linux and macOS only"
        return None
    compiler = _compiler()
    if compiler is None:
        _state["reason"] = "no C compiler found (set CC, or install gcc)"
        return None
    try:
        lib = ctypes.CDLL(str(_build(compiler)))
        layout = (NODE_DTYPES["float32"].itemsize * 1000000
                  + NODE_DTYPES["float64"].itemsize * 1000 + ctypes.sizeof(_Model))
        lib.woodstar_layout.restype = ctypes.c_int64
        if lib.woodstar_layout() != layout:
            raise RuntimeError("the C structures differ from the Python side")
    except Exception as error:  # noqa: BLE001  (any failure: a reason, and the next route)
        _state["reason"] = f"the compiled walk could not be built: {type(error).__name__}: {error}"
        return None
    for name in ("woodstar_walk_f32", "woodstar_walk_f64"):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int64
        fn.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                       ctypes.c_int64]
    lib.woodstar_xgb_link.restype = None
    lib.woodstar_xgb_link.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_void_p]
    _state["lib"] = lib
    return lib


def available() -> bool:
    """Whether the kernel is built (building it on the first call, about a second)."""
    return _load() is not None


def unavailable_reason():
    _load()
    return _state.get("reason")


def _address(array: np.ndarray) -> int:
    """The data pointer of a C-contiguous array: through the buffer protocol when the
    array is writable (0.7 us; ``array.ctypes.data`` costs 1.6-2 us, a one-row call's
    kernel 10 us), else through ``array.ctypes``."""
    try:
        return ctypes.addressof(ctypes.c_char.from_buffer(array))
    except (TypeError, ValueError, BufferError):  # read-only or empty
        return array.ctypes.data


class CTreeWalk(CpuRoute):
    """Callable ``X (n, n_features) of dtype -> (raw, transformed)``, float64.

    With ``n_threads`` > 1, calls of at least ``parallel_min_steps`` node steps (rows x
    the trees' summed depths) split their rows over that many threads inside the kernel.
    Each row stays on one thread, so the answer does not depend on the thread count;
    ``last_threads`` says how many ran. Threads are made per call, which costs about
    a small batch's walk, so splitting starts at the step count where it was measured
    to pay (docs/benchmarks.md, "CPU routes"; the figures are in benchmarks/notes.md)."""

    parallel_min_steps = 220_000

    @staticmethod
    def supports(ens: TreeEnsemble) -> bool:
        return not ens.has_linear_leaves

    def __init__(self, ens: TreeEnsemble, dtype: str, n_threads: int = 1):
        lib = _load()
        if lib is None:
            raise RuntimeError(unavailable_reason())
        if not self.supports(ens):
            raise ValueError("the compiled walk does not take linear leaves")
        if ens.sum_precision == "float32":  # float32 base score and leaves (the IR's meaning)
            ens = ens.replace(base_score=ens.base_score.astype(np.float32).astype(np.float64),
                              leaf_value=ens.leaf_value.astype(np.float32).astype(np.float64))
        ens = self._prepare(ens, dtype)
        self._kernel = lib.woodstar_walk_f32 if dtype == "float32" else lib.woodstar_walk_f64
        order, rights, roots, _ = sibling_adjacent_layout(ens)
        nodes = np.zeros(len(order), NODE_DTYPES[dtype])
        is_leaf = ens.left[order] < 0
        # A leaf tests feature 0 against +inf, default left: it always steps to itself.
        nodes["feature"] = np.where(is_leaf, 0, ens.feature[order])
        nodes["right"] = rights
        nodes["threshold"] = np.where(is_leaf, np.inf, node_thresholds(ens, dtype)[order])
        nodes["flags"] = np.where(is_leaf, DEFAULT_LEFT, ens.default_left[order] * DEFAULT_LEFT
                                  + ens.missing_in_range[order] * MISSING_IN_RANGE
                                  + ens.is_categorical[order] * CATEGORICAL)
        self.nodes = nodes
        self.roots = np.ascontiguousarray(roots, dtype=np.int32)
        self.depths = np.ascontiguousarray(ens.tree_depths(), dtype=np.int32)
        self.out_start = np.ascontiguousarray(ens.tree_output_start, dtype=np.int32)
        # XGBoost's models sum in float32 (leaves are float32 values; the folded base
        # score's float64 addition rounds to float32 as XGBoost's first += does).
        self.sum32 = ens.sum_precision == "float32" and ens.aggregation == "sum"
        self.sum_dtype = np.dtype(np.float32 if self.sum32 else np.float64)
        self.leaf_value = np.ascontiguousarray(ens.leaf_value[order], dtype=self.sum_dtype)
        self.range = missing_range_bounds(ens, dtype) if ens.has_missing_range else (0.0, -1.0)
        self.n_features, self.n_outputs = int(ens.n_features), int(ens.n_outputs)
        self.width = int(ens.leaf_width)
        categorical = ens.is_categorical[order] & ~is_leaf
        self.cat_start = np.ascontiguousarray(np.where(categorical, ens.cat_bitset_start[order], 0),
                                              dtype=np.int32)
        self.cat_size = np.ascontiguousarray(np.where(categorical, ens.cat_bitset_size[order], 0),
                                             dtype=np.int32)
        self.cat_bits = np.ascontiguousarray(ens.cat_bitsets, dtype=np.uint32)
        if not len(self.cat_bits):
            self.cat_bits = np.zeros(1, np.uint32)  # a pointer the kernel never reads
        # The structure points into the arrays above, which live as long as self.
        self._model = _Model(_address(self.nodes), _address(self.roots), _address(self.depths),
                             _address(self.out_start), _address(self.leaf_value), self.n_trees,
                             self.width, self.n_features, self.n_outputs,
                             int(ens.has_missing_range), int(self.sum32), *self.range,
                             _address(self.cat_start), _address(self.cat_size),
                             _address(self.cat_bits), int(categorical.any()),
                             CATEGORICAL_RULES[ens.categorical_rule])
        self._model_address = ctypes.addressof(self._model)
        self.steps_per_row = max(1, int(self.depths.sum()))
        self.n_threads = max(1, int(n_threads))
        self.last_threads = 0

    def _tree_sums(self, X: np.ndarray) -> np.ndarray:
        if X.ndim != 2 or X.shape[1] != self.n_features:  # the kernel would read past it
            raise ValueError(f"expected (n, {self.n_features}) rows, got shape {X.shape}")
        out = np.zeros((len(X), self.n_outputs), self.sum_dtype)
        if len(X):
            parallel = len(X) * self.steps_per_row >= self.parallel_min_steps
            self.last_threads = self._kernel(self._model_address, _address(X), len(X),
                                             _address(out), self.n_threads if parallel else 1)
        return out

    def __call__(self, X: np.ndarray):
        if not self.sum32:
            return super().__call__(X)
        raw = self.raw(X)  # float32 margins, as XGBoost's predictor leaves them
        if self.post_transform_scale != 1.0 or self.post_transform not in _XGB_TRANSFORMS:
            raw = raw.astype(np.float64)  # not one of XGBoost's: the IR's own transform
            return raw, apply_post_transform(self.post_transform, raw, self.post_transform_scale)
        return raw.astype(np.float64), _xgb_transform(self.post_transform, raw).astype(np.float64)


# XGBoost's float32 post-transforms: the links run in C (woodstar_xgb_link, libm's expf
# as XGBoost's own build calls it); the rest is float32 NumPy, as its Python wrapper.
_XGB_LINKS = {"sigmoid": 0, "sigmoid_binary": 0, "softmax": 1, "exp": 2}
_XGB_TRANSFORMS = (*_XGB_LINKS, "identity_binary", "step_binary", "step", "argmax", "identity")


def _xgb_link(kind: int, z: np.ndarray) -> np.ndarray:
    z = np.ascontiguousarray(z, dtype=np.float32)
    out = np.empty_like(z)
    if z.size:
        _load().woodstar_xgb_link(kind, _address(z), z.shape[0], z.shape[1], _address(out))
    return out


def _xgb_transform(name: str, raw: np.ndarray) -> np.ndarray:
    """XGBoost's prediction from float32 margins, in float32."""
    if name in ("sigmoid", "softmax", "exp"):
        return _xgb_link(_XGB_LINKS[name], raw)
    if name in ("sigmoid_binary", "identity_binary", "step_binary"):
        # XGBClassifier.predict_proba: (1 - p, p) with p float32, 1 - p in float32.
        p = _xgb_link(0, raw[:, :1]) if name == "sigmoid_binary" else raw[:, :1]
        if name == "step_binary":
            p = (p > 0).astype(np.float32)
        return np.concatenate([np.float32(1.0) - p, p], axis=1)
    if name == "step":
        return (raw > 0).astype(np.float32)
    if name == "argmax":
        return np.argmax(raw, axis=1).astype(np.float32).reshape(-1, 1)
    if name == "identity":
        return raw
    raise ValueError(f"post_transform {name!r} has no float32 form")
