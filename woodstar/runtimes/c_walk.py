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
XGBoost's to the bit (the other routes sum in double). LightGBM's links (its softmax,
exp and softplus in double with the C library's exp) run in C too. The build is cached
under ``$WOODSTAR_CACHE_DIR`` (default ``~/.cache/woodstar``), keyed by the source's
hash and the compiler command; without a compiler, or if the build fails, ``available``
says why and the container uses the next route.

Small NumPy batches skip the Python path altogether: ``SmallBatchEntry`` makes the
input check, the walk, the mean, the base score and the link in one native call
(``woodstar_predict``), with the same answers and, through the full path, the same errors.
"""

import ctypes
import sys
import threading
import weakref
from pathlib import Path

import numpy as np

from ..ir.transforms import apply_post_transform, transformed_width
from ..ir.tree_ensemble import TreeEnsemble
from ._cpu_route import CpuRoute
from ._row_blocks import RowBlocks
from ._native import build, find_compiler, simd_code, simd_name
from ..lowering.trees._common import missing_range_bounds, node_thresholds
from ..lowering.trees._layout import sibling_adjacent_layout

__all__ = ["CTreeWalk", "SmallBatchEntry", "available", "limit_simd_walk", "simd_walk",
           "unavailable_reason"]

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
                ("cat_rule", ctypes.c_int64), ("ct_start", ctypes.c_void_p),
                ("ct_feature", ctypes.c_void_p), ("ct_threshold", ctypes.c_void_p),
                ("ct_leaf", ctypes.c_void_p), ("ob_nan_right", ctypes.c_void_p),
                ("ob_column", ctypes.c_void_p), ("ob_threshold", ctypes.c_void_p),
                ("ob_features", ctypes.c_void_p), ("ob_n_features", ctypes.c_int64),
                ("ob_all", ctypes.c_int64), ("hd_start", ctypes.c_void_p),
                ("hd_feature", ctypes.c_void_p), ("hd_threshold", ctypes.c_void_p),
                ("hd_entry", ctypes.c_void_p), ("hd_levels", ctypes.c_int64),
                ("na_feature", ctypes.c_void_p), ("na_right", ctypes.c_void_p),
                ("na_threshold", ctypes.c_void_p), ("wc_node", ctypes.c_void_p),
                ("wc_complete", ctypes.c_void_p), ("wc_head", ctypes.c_void_p)]


class _PredictSpec(ctypes.Structure):  # ``predict_spec`` in c_walk.c
    _fields_ = [("m", ctypes.c_void_p), ("rows_f64", ctypes.c_int64),
                ("check", ctypes.c_int64), ("limit", ctypes.c_double),
                ("mean_trees", ctypes.c_int64), ("base", ctypes.c_void_p),
                ("post", ctypes.c_int64), ("scale", ctypes.c_double),
                ("width", ctypes.c_int64), ("float_m", ctypes.c_void_p),
                ("float_min_rows", ctypes.c_int64), ("round_offset", ctypes.c_void_p),
                ("round_log2size", ctypes.c_void_p), ("round_tables", ctypes.c_void_p)]


_state = {}  # "lib" or "reason", once per process
_lock = threading.Lock()  # one build at a time (threads share the pid in the temp name)


_compiler = find_compiler


def _build(compiler: str) -> Path:
    return build(SOURCE, FLAGS, compiler)


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
                  + NODE_DTYPES["float64"].itemsize * 1000 + ctypes.sizeof(_Model)
                  + ctypes.sizeof(_PredictSpec) * 1000000000)
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
    lib.woodstar_predict.restype = ctypes.c_int64
    lib.woodstar_predict.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64,
                                     ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p]
    lib.woodstar_libm_link.restype = None
    lib.woodstar_libm_link.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                       ctypes.c_int64, ctypes.c_double, ctypes.c_void_p]
    lib.woodstar_simd_walk.restype = ctypes.c_int64
    lib.woodstar_limit_simd_walk.restype = ctypes.c_int64
    lib.woodstar_limit_simd_walk.argtypes = [ctypes.c_int64]
    lib.woodstar_round_rows.restype = ctypes.c_int64
    lib.woodstar_round_rows.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_int64,
                                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p,
                                        ctypes.c_void_p, ctypes.c_void_p]
    lib.woodstar_round_table.restype = None
    lib.woodstar_round_table.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p,
                                         ctypes.c_int64]
    lib.woodstar_xgb_link.restype = None
    lib.woodstar_xgb_link.argtypes = [ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64,
                                      ctypes.c_int64, ctypes.c_void_p]
    _state["lib"] = lib
    return lib


def available() -> bool:
    """Whether the kernel is built (building it on the first call, about a second)."""
    return _load() is not None


def simd_walk():
    """The instruction set this CPU walks the complete-tree copies with: "avx512",
    "avx2", or None (the row groups and lanes of the node walk take every row)."""
    lib = _load()
    return None if lib is None else simd_name(lib.woodstar_simd_walk())


def limit_simd_walk(name):
    """Walk with at most ``name`` ("avx512", "avx2" or None) from now on, in this
    process (for tests and A/B timing: the forms give the same answers); returns the
    form taken, which is narrower where the CPU lacks the one asked for."""
    lib = _load()
    if lib is None:
        return None
    return simd_name(lib.woodstar_limit_simd_walk(simd_code(name)))


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


# Trees up to this depth (GROUP_MAX_DEPTH in c_walk.c) get a complete-tree copy for the
# kernel's SIMD walk (AVX2 or AVX-512) of row blocks without NaN; 0 turns the copies off.
COMPLETE_TREE_MAX_DEPTH = 8
# Deeper trees walk their first HEAD_LEVELS levels from a complete copy the same way
# (``tree_heads`` in c_walk.c) and the rest node by node; 0 turns the heads off. Seven
# levels did best of 3 to 10 on LightGBM's leaf-wise trees and deep forests, with
# AVX-512 and with AVX2 (benchmarks/notes.md, "Deep trees: heads walked as vectors").
HEAD_LEVELS = 7
# Oblivious trees among them (CatBoost's) walk by their levels' comparison bits
# (``oblivious_trees`` in c_walk.c); False leaves them to the complete-tree walk.
OBLIVIOUS_TREES = True
OBLIVIOUS_LEVELS = 8  # OBLIVIOUS_LEVELS in c_walk.c
# An oblivious level counts as this many node steps toward ``parallel_min_steps``: their
# walk split over two threads began to pay from about 256 rows of 500 depth-6 trees,
# against about 73 for the same steps of the node walk (benchmarks/notes.md).
OBLIVIOUS_STEP_COST = 0.25
# Calls of fewer node steps than this stay on one thread (``CTreeWalk``). A step's cost
# now differs by walk (vectors, leaf width, heads), so no one count suits every model;
# 400 000 was measured and rejected (benchmarks/notes.md, "The thread split: 400 000
# steps measured and rejected").
PARALLEL_MIN_STEPS = 220_000
# Float64 rows of a model that compares in float64 (LightGBM's) walk the float route
# from this many rows, all but the rows whose rounding could change a comparison
# (``_FloatRowsFirst``; in the small-batch entry's C call too); None leaves them all to
# the double route. Fewer rows walk trees side by side, as fast on either route
# (benchmarks/notes.md, "Float64 rows on the float route in small calls").
FLOAT_ROWS_FIRST_MIN_ROWS = 8
ROUND_ROWS_PARALLEL_MIN_ROWS = 2048


class _FloatRowsFirst:
    """The float route for float64 rows of a model that compares in float64.

    A value's comparison ``x <= t`` can differ from its float32 rounding's only where
    the threshold ``t`` lies between the two, and then ``t`` rounds to the same float.
    ``woodstar_round_rows`` (c_walk.c) rounds the rows and marks each row holding a value
    that is not a float and whose rounding is some threshold's of its feature. The float
    walk takes every row; the marked ones are walked again by the double route and
    overwrite theirs. Both walks add the same float64 leaves in tree order, so the sums
    are the double route's bits. Taken for models without categorical splits or
    missing-value ranges whose float walk has the SIMD copies (the speed it is for)."""

    def __init__(self, ens: TreeEnsemble, n_threads: int):
        self.walk = _float_walk(ens, n_threads)
        self.min_rows = FLOAT_ROWS_FIRST_MIN_ROWS
        # The rounding pass on the walk's threads from this many rows (ctypes lets go of
        # the GIL): about a tenth of a call's time on one thread.
        self.blocks = RowBlocks(n_threads, ROUND_ROWS_PARALLEL_MIN_ROWS)
        thresholds = node_thresholds(ens, "float64")
        internal = ens.left >= 0
        per_feature = [np.unique(thresholds[internal & (ens.feature == f)].astype(np.float32))
                       for f in range(ens.n_features)]
        # Per feature, a table of at least twice its roundings' count (``round_rows``).
        self.log2size = np.array([max(1, int(2 * len(v)).bit_length()) for v in per_feature],
                                 np.int64)
        sizes = np.left_shift(1, self.log2size)
        self.offset = np.ascontiguousarray(np.concatenate([[0], np.cumsum(sizes)[:-1]]),
                                           dtype=np.int64)
        self.tables = np.empty(int(sizes.sum()), np.uint32)
        lib = _load()
        for f, values in enumerate(per_feature):
            values = np.ascontiguousarray(values, dtype=np.float32)
            lib.woodstar_round_table(_address(values), len(values),
                                     _address(self.tables[self.offset[f]:]), int(self.log2size[f]))
        self.last_marked = 0

    @classmethod
    def build(cls, ens: TreeEnsemble, dtype: str, n_threads: int):
        """The split for this route, or None where it does not apply."""
        if (FLOAT_ROWS_FIRST_MIN_ROWS is None or dtype != "float64"
                or ens.input_precision != "float64" or ens.sum_precision == "float32"
                or ens.has_categorical or ens.has_missing_range or ens.n_features >= 1 << 24
                or simd_walk() is None):
            return None
        return cls(ens, n_threads)

    def sums(self, X: np.ndarray, double_sums) -> np.ndarray:
        """The trees' sums of float64 rows ``X`` (C-contiguous), as the double route's."""
        x32 = np.empty(X.shape, np.float32)
        marked = np.empty(len(X), np.uint8)
        lib = _load()

        def round_rows(start, stop):
            return lib.woodstar_round_rows(
                _address(X[start:stop]), stop - start, X.shape[1], _address(self.offset),
                _address(self.log2size), _address(self.tables), _address(x32[start:stop]),
                _address(marked[start:stop]))

        self.last_marked = sum(self.blocks.run_ranges(round_rows, len(X)))
        out = self.walk._walk_sums(x32)
        if self.last_marked:
            rows = np.flatnonzero(marked)
            out[rows] = double_sums(np.ascontiguousarray(X[rows]))
        return out


# The float walks built, by the ensemble they were built from and their thread count:
# the float64 route's float walk (``_FloatRowsFirst``) is the container's float32 route
# where one exists (built at convert time), not a second copy of the same tables.
_FLOAT_WALKS = weakref.WeakValueDictionary()


def _float_walk(ens: TreeEnsemble, n_threads: int) -> "CTreeWalk":
    walk = _FLOAT_WALKS.get((id(ens), n_threads))
    if walk is None or walk.source() is not ens:  # none, or one of a dead ensemble's id
        walk = CTreeWalk(ens, "float32", n_threads)
    return walk


def _complete_levels(ens: TreeEnsemble, levels: np.ndarray, node_threshold: np.ndarray):
    """The top ``levels[t]`` levels of each tree ``t`` as a complete tree (none where
    ``levels[t] < 0``), 2^levels slots each, tree after tree: per slot an internal node's
    feature, threshold and default side, level by level (slot ``i``'s children at
    ``2i + 1`` and ``2i + 2``; a leaf above the last level passes rows on to its left
    child, feature 0 against +inf); and at slot ``start + p`` of ``reached``, the IR node
    a row arrives at in position ``p`` of the last level (-1 in other slots).

    Returns ``(start, feature, threshold, default_left, reached)``; the tables run 32
    slots past the last tree, as the kernel loads 16 or 32 slots from a level's first."""
    levels = np.asarray(levels, np.int64)
    takes = levels >= 0
    sizes = np.where(takes, 1 << np.maximum(levels, 0), 0)
    start = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    total = int(sizes.sum()) + 32
    feature = np.zeros(total, np.int32)
    threshold = np.full(total, np.inf, np.float32)
    default_left = np.ones(total, bool)
    reached = np.full(total, -1, np.int64)
    offsets = np.asarray(ens.tree_offsets[:-1], np.int64)
    # Every tree level by level at once: (tree, IR node, slot in its complete tree).
    tree = np.flatnonzero(takes)
    node, slot, level = offsets[tree], np.zeros(len(tree), np.int64), 0
    while len(tree):
        last = level == levels[tree]
        reached[start[tree[last]] + slot[last] - ((1 << levels[tree[last]]) - 1)] = node[last]
        tree, node, slot = tree[~last], node[~last], slot[~last]
        internal = ens.left[node] >= 0
        here = start[tree] + slot
        feature[here[internal]] = ens.feature[node[internal]]
        threshold[here[internal]] = node_threshold[node[internal]]
        default_left[here[internal]] = ens.default_left[node[internal]]
        base = offsets[tree]
        left = np.where(internal, base + ens.left[node], node)  # a leaf passes left
        tree, node, slot = (np.concatenate([tree, tree[internal]]),
                            np.concatenate([left, base[internal] + ens.right[node[internal]]]),
                            np.concatenate([2 * slot + 1, 2 * slot[internal] + 2]))
        level += 1
    return start, feature, threshold, default_left, reached


class CTreeWalk(CpuRoute):
    """Callable ``X (n, n_features) of dtype -> (raw, transformed)``, float64.

    With ``n_threads`` > 1, calls of at least ``parallel_min_steps`` node steps (rows x
    the trees' summed depths) split their rows over that many threads inside the kernel.
    Each row stays on one thread, so the answer does not depend on the thread count;
    ``last_threads`` says how many ran. Threads are made per call, which costs about
    a small batch's walk, so splitting starts at the step count where it was measured
    to pay (PARALLEL_MIN_STEPS)."""

    @staticmethod
    def supports(ens: TreeEnsemble) -> bool:
        return not ens.has_linear_leaves

    def __init__(self, ens: TreeEnsemble, dtype: str, n_threads: int = 1):
        lib = _load()
        if lib is None:
            raise RuntimeError(unavailable_reason())
        source = ens
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
        # One entry past the last tree, the node count: the kernel reads a tree's size.
        self.roots = np.ascontiguousarray(np.append(roots, len(order)), dtype=np.int32)
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
                             CATEGORICAL_RULES[ens.categorical_rule],
                             *self._complete_trees(ens, dtype), *self._oblivious_trees(ens),
                             *self._tree_heads(ens, dtype, order), *self._node_arrays(dtype),
                             *self._widened_columns())
        self._model_address = ctypes.addressof(self._model)
        depths = self.depths.astype(np.float64)
        if self.ob_nan_right is not None:  # a level without a node lookup costs less
            depths[self.ob_nan_right >= 0] *= OBLIVIOUS_STEP_COST
        self.steps_per_row = max(1, int(depths.sum()))
        self.parallel_min_steps = PARALLEL_MIN_STEPS
        self.n_threads = max(1, int(n_threads))
        self.last_threads = 0
        self.source = weakref.ref(source)
        if dtype == "float32":
            _FLOAT_WALKS[(id(source), self.n_threads)] = self
        self.float_rows = _FloatRowsFirst.build(source, dtype, self.n_threads)

    def _walks_copies(self, ens: TreeEnsemble, dtype: str) -> bool:
        """Whether the kernel's SIMD walk takes complete copies (whole trees or heads)
        of this ensemble: float32 rows on a CPU with AVX2 or AVX-512, with no missing
        range or categorical split (those keep the node walk's missing test), and row
        offsets of a block that fit int32."""
        return (dtype == "float32" and not ens.has_categorical and not ens.has_missing_range
                and self.n_features < 1 << 24 and simd_walk() is not None)

    def _complete_trees(self, ens: TreeEnsemble, dtype: str):
        """The complete-tree copies the kernel's SIMD walk reads (``complete_trees``
        in c_walk.c): for the float route's trees of depth <= COMPLETE_TREE_MAX_DEPTH,
        2^depth slots each, internal nodes level by level (node ``i``'s children at
        ``2i + 1`` and ``2i + 2``; a leaf above the last level passes rows on to its
        left child, feature 0 against +inf) and the last level's leaves. Returns the
        structure's four pointers (all 0 when no tree takes a copy)."""
        depths = self.depths.astype(np.int64)
        takes = depths <= COMPLETE_TREE_MAX_DEPTH
        if not takes.any() or not self._walks_copies(ens, dtype):
            self.ct_start = None
            return 0, 0, 0, 0
        start, feature, threshold, default_left, reached = _complete_levels(
            ens, np.where(takes, depths, -1), node_thresholds(ens, dtype))
        leaf_value = np.asarray(ens.leaf_value, np.float64).reshape(ens.n_nodes, -1)
        leaf = np.zeros((len(feature), self.width), self.sum_dtype)
        slots = np.flatnonzero(reached >= 0)
        leaf[slots] = leaf_value[reached[slots]]
        self.ct_start = np.ascontiguousarray(np.where(takes, start, -1), dtype=np.int32)
        self.ct_feature, self.ct_threshold, self.ct_leaf = feature, threshold, leaf
        self.ct_default_left = default_left
        return (_address(self.ct_start), _address(feature), _address(threshold),
                _address(leaf))

    def _node_arrays(self, dtype: str):
        """The float route's nodes as three arrays (``node_arrays`` in c_walk.c), which
        deep trees' steps read; None where no tree is deeper than the complete-tree
        copies, and on the double route."""
        if dtype != "float32" or not (self.depths > COMPLETE_TREE_MAX_DEPTH).any():
            self.na_feature = None
            return None, None, None
        self.na_feature = np.ascontiguousarray(self.nodes["feature"])
        self.na_right = np.ascontiguousarray(self.nodes["right"])
        self.na_threshold = np.ascontiguousarray(self.nodes["threshold"])
        return _address(self.na_feature), _address(self.na_right), _address(self.na_threshold)

    def _widened_columns(self):
        """The column each table reads in a block widened to [x, x with NaN as -inf]
        (``widened_columns`` in c_walk.c): its feature, in the second half where missing
        values go left (every leaf, and every slot that passes rows on, does). None for
        a table the model does not have."""
        def widened(feature, goes_left):
            return np.ascontiguousarray(feature + np.where(goes_left, self.n_features, 0),
                                        dtype=np.int32)

        self.wc_node = self.wc_complete = self.wc_head = None
        if self.na_feature is not None:
            self.wc_node = widened(self.nodes["feature"],
                                   (self.nodes["flags"] & DEFAULT_LEFT) != 0)
        if self.ct_start is not None:
            self.wc_complete = widened(self.ct_feature, self.ct_default_left)
        if self.hd_start is not None:
            self.wc_head = widened(self.hd_feature, self.hd_default_left)
        return tuple(None if a is None else _address(a)
                     for a in (self.wc_node, self.wc_complete, self.wc_head))

    def _tree_heads(self, ens: TreeEnsemble, dtype: str, order: np.ndarray):
        """The heads of the trees deeper than the complete-tree copies take
        (``tree_heads`` in c_walk.c): each one's top HEAD_LEVELS levels as a complete
        tree, and per position of the last of them the kernel's index of the node a row
        has reached there. Returns the structure's five fields (all 0 when no tree takes
        a head)."""
        depths = self.depths.astype(np.int64)
        takes = (depths > max(COMPLETE_TREE_MAX_DEPTH, HEAD_LEVELS)) & (HEAD_LEVELS > 0)
        if not takes.any() or not self._walks_copies(ens, dtype):
            self.hd_start = None
            return 0, 0, 0, 0, 0
        start, feature, threshold, default_left, reached = _complete_levels(
            ens, np.where(takes, HEAD_LEVELS, -1), node_thresholds(ens, dtype))
        self.hd_default_left = default_left
        kernel_index = np.empty(len(order), np.int64)
        kernel_index[order] = np.arange(len(order))
        entry = np.where(reached >= 0, kernel_index[np.maximum(reached, 0)], 0)
        self.hd_start = np.ascontiguousarray(np.where(takes, start, -1), dtype=np.int32)
        self.hd_feature, self.hd_threshold = feature, threshold
        self.hd_entry = np.ascontiguousarray(entry, dtype=np.int32)
        return (_address(self.hd_start), _address(feature), _address(threshold),
                _address(self.hd_entry), HEAD_LEVELS)

    def _oblivious_trees(self, ens: TreeEnsemble):
        """The oblivious trees among the complete-tree copies (``oblivious_trees`` in
        c_walk.c): perfect trees whose every level tests one feature against one
        threshold and sends NaN one way, as CatBoost's symmetric trees do. Returns the
        structure's six fields (all 0 when there are none, or when OBLIVIOUS_TREES is
        off)."""
        self.ob_nan_right = None
        if self.ct_start is None or not OBLIVIOUS_TREES:
            return 0, 0, 0, 0, 0, 0
        depths = self.depths.astype(np.int64)
        sizes = np.diff(np.asarray(ens.tree_offsets, np.int64))
        perfect = (self.ct_start >= 0) & (sizes == (1 << (depths + 1)) - 1)
        nan_right = np.full(self.n_trees, -1, np.int32)
        level_feature = np.zeros((self.n_trees, OBLIVIOUS_LEVELS), np.int32)
        level_threshold = np.zeros((self.n_trees, OBLIVIOUS_LEVELS), np.float32)
        for depth in np.unique(depths[perfect]):
            trees = np.flatnonzero(perfect & (depths == depth))
            first = (1 << np.arange(depth)) - 1  # each level's first slot
            slots = self.ct_start[trees, None] + np.arange((1 << depth) - 1)
            same = np.ones(len(trees), bool)
            for table in (self.ct_feature, self.ct_threshold, self.ct_default_left):
                values = table[slots]
                for level, start in enumerate(first):
                    part = values[:, start:2 * start + 1]
                    same &= (part == part[:, :1]).all(axis=1)
            trees, firsts = trees[same], slots[same][:, first]
            level_feature[trees, :depth] = self.ct_feature[firsts]
            level_threshold[trees, :depth] = self.ct_threshold[firsts]
            right = ~self.ct_default_left[firsts]
            nan_right[trees] = (right << np.arange(depth)).sum(axis=1, dtype=np.int32)
        oblivious = nan_right >= 0
        if not oblivious.any():
            return 0, 0, 0, 0, 0, 0
        used = oblivious[:, None] & (np.arange(OBLIVIOUS_LEVELS) < self.depths[:, None])
        features, column = np.unique(level_feature[used], return_inverse=True)
        level_column = np.zeros_like(level_feature)
        level_column[used] = column
        self.ob_nan_right = nan_right
        self.ob_column = np.ascontiguousarray(level_column)
        self.ob_threshold = np.ascontiguousarray(level_threshold)
        self.ob_features = np.ascontiguousarray(features, dtype=np.int32)
        return (_address(self.ob_nan_right), _address(self.ob_column),
                _address(self.ob_threshold), _address(self.ob_features), len(features),
                int(oblivious.all()))

    def _tree_sums(self, X: np.ndarray) -> np.ndarray:
        if X.ndim != 2 or X.shape[1] != self.n_features:  # the kernel would read past it
            raise ValueError(f"expected (n, {self.n_features}) rows, got shape {X.shape}")
        if self.float_rows is not None and len(X) >= self.float_rows.min_rows:
            sums = self.float_rows.sums(X, self._walk_sums)
            self.last_threads = self.float_rows.walk.last_threads
            return sums
        return self._walk_sums(X)

    def _walk_sums(self, X: np.ndarray) -> np.ndarray:
        out = np.zeros((len(X), self.n_outputs), self.sum_dtype)
        if len(X):
            parallel = len(X) * self.steps_per_row >= self.parallel_min_steps
            self.last_threads = self._kernel(self._model_address, _address(X), len(X),
                                             _address(out), self.n_threads if parallel else 1)
        return out

    def __call__(self, X: np.ndarray):
        if not self.sum32:
            if self.post_transform in _LIBM_LINKS:  # in C: the C library's exp, fast
                raw = self.raw(X)
                return raw, _libm_link(_LIBM_LINKS[self.post_transform], raw,
                                       self.post_transform_scale)
            return super().__call__(X)
        raw = self.raw(X)  # float32 margins, as XGBoost's predictor leaves them
        if self.post_transform_scale != 1.0 or self.post_transform not in _XGB_TRANSFORMS:
            raw = raw.astype(np.float64)  # not one of XGBoost's: the IR's own transform
            return raw, apply_post_transform(self.post_transform, raw, self.post_transform_scale)
        return raw.astype(np.float64), _xgb_transform(self.post_transform, raw).astype(np.float64)


# The IR's links in the C library's double arithmetic (LightGBM's): woodstar_libm_link
# gives ir/transforms.py's answers to the bit, without a Python call per value.
_LIBM_LINKS = {"softmax_libm": 0, "exp_libm": 1, "softplus": 2}


def _libm_link(kind: int, raw: np.ndarray, scale: float) -> np.ndarray:
    raw = np.ascontiguousarray(raw, dtype=np.float64)
    out = np.empty_like(raw)
    if raw.size:
        _load().woodstar_libm_link(kind, _address(raw), raw.shape[0], raw.shape[1], float(scale),
                                   _address(out))
    return out


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


# POST_* and XGB_* in c_walk.c: the links woodstar_predict applies itself (bit for bit
# those of CpuRoute.__call__ and CTreeWalk.__call__); any other is applied in NumPy.
_POST_CODES = {"identity": 1, "sigmoid": 2, "sigmoid_binary": 3, "identity_binary": 4,
               **{name: 8 + kind for name, kind in _LIBM_LINKS.items()}}  # POST_LIBM + k
_POST_XGB = 16
_XGB_POST_CODES = {"sigmoid": 0, "softmax": 1, "exp": 2, "identity": 3, "sigmoid_binary": 4,
                   "identity_binary": 5}
_CHECK_NAN, _CHECK_RANGE = 1, 2
_MAX = {"float32": float(np.finfo(np.float32).max), "float64": float(np.finfo(np.float64).max)}


class SmallBatchEntry:
    """A compiled walk's small batches in one native call: the input's finiteness check
    (as ``_input.feature_matrix_function`` makes it), the walk, the mean, the base score
    and the link, with the answers of ``walk(X)`` to the bit.

    ``entry(X)`` takes a C-contiguous array of the walk's dtype (or float64 rows for a
    float32 walk, rounded in C as NumPy's astype rounds them), ``n_features`` wide, of
    1 to ``max_rows`` rows, and returns ``(raw, transformed)`` as float64; it returns
    None for anything else, and for rows the check refuses, so that the caller's full
    path handles them (and words its errors) as before. ``max_rows`` stays below the
    size at which the walk would split rows over threads."""

    def __init__(self, walk: CTreeWalk, max_rows: int, refuse_nan: bool, refuse_inf: bool,
                 source_precision: str):
        if walk.round_to_float32:
            raise ValueError("a float64 walk of a float32 model rounds its rows first")
        self._walk = walk
        self.dtype = walk.dtype
        self._float64 = np.dtype(np.float64)
        self._rounds_rows = self.dtype == np.float32  # float64 rows: rounded in C
        self.n_features = walk.n_features
        rows_by_threads = walk.parallel_min_steps // walk.steps_per_row \
            if walk.n_threads > 1 else max_rows
        self.max_rows = max(0, min(int(max_rows), rows_by_threads, 255))
        self.n_outputs = walk.n_outputs
        if walk.sum32:
            if walk.mean:
                raise ValueError("a float32 sum is never a mean")
            xgb = walk.post_transform_scale == 1.0 and walk.post_transform in _XGB_POST_CODES
            post = _POST_XGB + _XGB_POST_CODES[walk.post_transform] if xgb else 0
        else:
            post = _POST_CODES.get(walk.post_transform, 0)
        self._numpy_link = post == 0  # the raw scores from C, the link from NumPy
        self.width = self.n_outputs if self._numpy_link else transformed_width(
            walk.post_transform, self.n_outputs)
        self._base = np.ascontiguousarray(walk.base_score, dtype=np.float64)
        check = (_CHECK_NAN if refuse_nan else 0) | (_CHECK_RANGE if refuse_inf else 0)
        self._spec = _PredictSpec(walk._model_address, int(walk.dtype == np.float64), check,
                                  _MAX[str(np.dtype(source_precision))],
                                  walk.n_trees if walk.mean else 0,
                                  _address(self._base) if walk.add_base else None,
                                  post, float(walk.post_transform_scale), self.width)
        float_rows = walk.float_rows  # double rows through the float walk first, in C
        if float_rows is not None:
            self._spec.float_m = float_rows.walk._model_address
            self._spec.float_min_rows = float_rows.min_rows
            self._spec.round_offset = _address(float_rows.offset)
            self._spec.round_log2size = _address(float_rows.log2size)
            self._spec.round_tables = _address(float_rows.tables)
        self._spec_address = ctypes.addressof(self._spec)
        self._predict = _load().woodstar_predict
        self._cells = self.n_outputs + (0 if self._numpy_link else self.width)

    def __call__(self, X: np.ndarray):
        n = X.shape[0]
        dtype = X.dtype
        if not (0 < n <= self.max_rows and X.shape[1] == self.n_features
                and (dtype == self.dtype or dtype == self._float64 and self._rounds_rows)
                and X.flags.c_contiguous):
            return None
        # One allocation for both results (each a contiguous block of it).
        out = np.empty(n * self._cells)
        split = n * self.n_outputs
        address = _address(out)
        if self._predict(self._spec_address, _address(X), dtype == self._float64, n, address,
                         address + 8 * split) != -1:
            return None
        raw = out[:split].reshape(n, self.n_outputs)
        if self._numpy_link:
            return self._walk_link(raw)
        return raw, out[split:].reshape(n, self.width)

    def _walk_link(self, raw):
        """The link CTreeWalk.__call__ would apply to these raw scores."""
        walk = self._walk
        if walk.sum32 and walk.post_transform_scale == 1.0 \
                and walk.post_transform in _XGB_TRANSFORMS:
            z = raw.astype(np.float32)  # the float32 margins, exactly
            return raw, _xgb_transform(walk.post_transform, z).astype(np.float64)
        return raw, apply_post_transform(walk.post_transform, raw, walk.post_transform_scale)
