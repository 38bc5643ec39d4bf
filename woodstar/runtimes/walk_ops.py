"""CPU kernels in C (``walk_ops.c``) for the tree-walk operators of
``lowering/trees/walk_op.py``, so that a program compiled by torch.compile calls one
native walk per tree part instead of Inductor's loops over (rows x trees) arrays.

The kernels take the operators' own arguments (the strategies' arrays) and return what
their tensor bodies return, bit for bit: the same comparisons in the input's dtype, the
leaves added in float64 tree after tree. They are registered as the operators' CPU
implementation by ``register_cpu_kernels()``, once the library has built; other devices
keep the tensor bodies. Threads: ``torch.get_num_threads()`` at the call (the runner
sets it from ``n_threads``), and none below 64 rows per thread. On a CPU with AVX-512 or
AVX2, perfect trees of depth 8 or less walk 16 or 8 float32 rows per vector
(``simd_walk()`` says which; ``limit_simd_walk`` narrows it, for tests and benchmarks).
The kernels also read tables derived from the operators' arguments (``walk_tables.py``:
the node walk's per-tree depths, the trees' one leaf column), built once per model and
kept while its tensors live unchanged.

Where a C++ compiler and Torch's headers are there, the kernels reach the dispatcher
through a small Torch operator library (``walk_ops_torch.cpp``, built on first use like
the C library and given its kernels' addresses), so a TorchScript trace or a
torch.compile program calls them with no Python in between; backends hand it a model's
tables when they prepare the model (``hand_tables``). Elsewhere, or with
``WOODSTAR_WALK_OPS_IN_TORCH=0``, the Python functions below are the operators' CPU
kernels (through ctypes), with the same arguments, checks and sums.
"""

import ctypes
import os
import sys
import threading
import weakref
from pathlib import Path

import torch

from ..lowering.trees.walk_op import node_tree_walk, perfect_tree_walk
from ._native import NativeLibrary, build, find_cxx_compiler, simd_code, simd_name
from .walk_tables import NodeTables, node_tables as build_node_tables, perfect_tree_columns

__all__ = ["available", "unavailable_reason", "register_cpu_kernels", "perfect_walk", "node_walk",
           "simd_walk", "limit_simd_walk", "kernels_in_torch", "hand_tables", "use_tables"]


class _WalkSpec(ctypes.Structure):  # ``walk_spec`` in walk_ops.c
    _fields_ = [("wide", ctypes.c_void_p), ("n_cols", ctypes.c_int64),
                ("columns", ctypes.c_void_p), ("thresholds", ctypes.c_void_p),
                ("leaves", ctypes.c_void_p), ("width", ctypes.c_int64),
                ("n_trees", ctypes.c_int64), ("steps", ctypes.c_int64),
                ("roots", ctypes.c_void_p), ("rights", ctypes.c_void_p),
                ("depths", ctypes.c_void_p), ("tree_columns", ctypes.c_void_p)]


def _setup(lib):
    lib.woodstar_walk_spec_size.restype = ctypes.c_int64
    if lib.woodstar_walk_spec_size() != ctypes.sizeof(_WalkSpec):
        raise RuntimeError("the C structure differs from the Python side")
    for name in ("woodstar_perfect_walk", "woodstar_node_walk"):
        fn = getattr(lib, name)
        fn.restype = ctypes.c_int64
        fn.argtypes = [ctypes.POINTER(_WalkSpec), ctypes.c_int64, ctypes.c_int64,
                       ctypes.c_void_p, ctypes.c_int64]
    lib.woodstar_walk_ops_simd.restype = ctypes.c_int64
    lib.woodstar_walk_ops_limit_simd.restype = ctypes.c_int64
    lib.woodstar_walk_ops_limit_simd.argtypes = [ctypes.c_int64]


_LIBRARY = NativeLibrary(Path(__file__).with_name("walk_ops.c"),
                         ("-O3", "-std=c99", "-fPIC", "-shared", "-pthread"), _setup,
                         "the tree-walk operators' C kernels")
_REGISTER_LOCK = threading.Lock()
_registered = False
_TORCH_SOURCE = Path(__file__).with_name("walk_ops_torch.cpp")
_in_torch = None  # whether walk_ops_torch.cpp's kernels serve the operators (once registered)
torch_library_reason = None  # why they do not, where they do not


def simd_walk():
    """The instruction set perfect trees of depth 8 or less walk with: "avx512" (16 rows
    per vector), "avx2" (8), or None (also where the library does not build)."""
    lib = _LIBRARY.load()
    return None if lib is None else simd_name(lib.woodstar_walk_ops_simd())


def limit_simd_walk(name):
    """Walk with at most ``name`` ("avx512", "avx2" or None) from now on, in this process
    (for tests and A/B timing: the forms give the same sums); returns the form taken."""
    lib = _LIBRARY.load()
    if lib is None:
        return None
    return simd_name(lib.woodstar_walk_ops_limit_simd(simd_code(name)))


def available() -> bool:
    return _LIBRARY.load() is not None


def unavailable_reason():
    _LIBRARY.load()
    return _LIBRARY.reason


def _checked(tensor, dtype, name):
    if tensor.dtype != dtype or tensor.device.type != "cpu":
        raise TypeError(f"tree-walk kernel: {name} must be a CPU {dtype} tensor, "
                        f"got {tensor.dtype} on {tensor.device}")
    return tensor.contiguous()


def _call(function, wide, thresholds, leaf_table, spec_fields):
    """Run ``function`` over ``wide``; the tensors named in ``spec_fields`` are kept
    alive by the caller's frame for the call's length."""
    if wide.dtype not in (torch.float32, torch.float64):
        raise TypeError(f"tree-walk kernel: the input must be float32 or float64, got {wide.dtype}")
    wide = _checked(wide, wide.dtype, "the input")
    thresholds = _checked(thresholds, wide.dtype, "thresholds")
    leaf_table = _checked(leaf_table, torch.float64, "the leaf table")
    out = torch.empty((wide.shape[0], leaf_table.shape[1]), dtype=torch.float64)
    if wide.shape[0] == 0:
        return out
    spec = _WalkSpec(wide=wide.data_ptr(), n_cols=wide.shape[1], thresholds=thresholds.data_ptr(),
                     leaves=leaf_table.data_ptr(), width=leaf_table.shape[1], **spec_fields)
    function(ctypes.byref(spec), int(wide.dtype == torch.float64), wide.shape[0],
             out.data_ptr(), torch.get_num_threads())
    return out


class _TablesCache:
    """What the kernels read besides the operators' arguments (``walk_tables.py``), per
    set of those arguments. An entry lives as long as its tensors do (the operators'
    arguments are the strategy's buffers, the same objects call after call) and is
    rebuilt if one of them changed in place or the settings differ."""

    def __init__(self):
        self._entries = {}
        self._lock = threading.Lock()
        self.builds = 0  # tables built in this process, for tests

    def get(self, arrays, settings, build):
        key = id(arrays[0])
        versions = tuple(a._version for a in arrays)
        with self._lock:
            entry = self._entries.get(key)
        if entry is not None:
            refs, seen_versions, seen_settings, tables = entry
            if (all(r() is a for r, a in zip(refs, arrays)) and seen_versions == versions
                    and seen_settings == settings):
                return tables
        tables = build(*(a.numpy() for a in arrays))
        refs = tuple(weakref.ref(a) for a in arrays)
        with self._lock:
            self.builds += 1
            self._entries[key] = (refs, versions, settings, tables)
        weakref.finalize(arrays[0], self._drop, key, refs[0])
        return tables

    def _drop(self, key, ref):
        with self._lock:
            entry = self._entries.get(key)
            if entry is not None and entry[0][0] is ref:
                del self._entries[key]


_TABLES = _TablesCache()
per_tree_depths = True  # False: every tree takes the deepest tree's steps (A/B timing)
one_column_adds = True  # False: every tree adds its whole leaf vector (A/B timing)


def perfect_walk(wide, level_columns, level_thresholds, leaf_table, n_trees, depth):
    """``woodstar::perfect_tree_walk`` in C (arguments as the operator's)."""
    columns = _checked(level_columns, torch.int32, "level columns")
    leaf_table = _checked(leaf_table, torch.float64, "the leaf table")
    trees_columns = perfect_tables(leaf_table, n_trees, depth)
    return _call(_LIBRARY.load().woodstar_perfect_walk, wide, level_thresholds, leaf_table,
                 {"columns": columns.data_ptr(), "n_trees": n_trees, "steps": depth,
                  "tree_columns": _address(trees_columns if one_column_adds else None)})


def perfect_tables(leaf_table, n_trees, depth):
    """The perfect walk's one leaf column per tree (None for one output), built on first
    use."""
    return _TABLES.get((leaf_table,), (n_trees, depth),
                       lambda table: perfect_tree_columns(n_trees, depth, table))


def node_tables(roots, rights, leaf_table) -> NodeTables:
    """The node walk's tables for these arguments, built on first use."""
    return _TABLES.get((roots, rights, leaf_table), (), build_node_tables)


def node_walk(wide, roots, columns, thresholds, rights, leaf_table, steps):
    """``woodstar::node_tree_walk`` in C (arguments as the operator's)."""
    roots = _checked(roots, torch.int64, "roots")
    columns = _checked(columns, torch.int32, "columns")
    rights = _checked(rights, torch.int32, "rights")
    leaf_table = _checked(leaf_table, torch.float64, "the leaf table")
    tables = node_tables(roots, rights, leaf_table)
    return _call(_LIBRARY.load().woodstar_node_walk, wide, thresholds, leaf_table,
                 {"columns": columns.data_ptr(), "roots": roots.data_ptr(),
                  "rights": rights.data_ptr(), "n_trees": roots.shape[0], "steps": steps,
                  "depths": tables.depths.ctypes.data if per_tree_depths else None,
                  "tree_columns": _address(tables.columns if one_column_adds else None)})


def _address(array):
    return None if array is None else array.ctypes.data


def _torch_library_flags():
    from torch.utils.cpp_extension import include_paths

    torch_lib = Path(torch.__file__).with_name("lib")
    flags = ("-O2", "-std=c++20", "-fPIC", "-shared", "-w",
             f"-D_GLIBCXX_USE_CXX11_ABI={int(torch._C._GLIBCXX_USE_CXX11_ABI)}",
             f"-DWOODSTAR_TORCH_VERSION={torch.__version__}",  # part of the cache key
             *(f"-I{path}" for path in include_paths()))
    libraries = (f"-L{torch_lib}", f"-Wl,-rpath,{torch_lib}", "-lc10", "-ltorch_cpu", "-ltorch")
    return flags, libraries


def _entry_point(function) -> int:
    return ctypes.cast(function, ctypes.c_void_p).value


def _load_torch_library():
    """Build and load ``walk_ops_torch.cpp`` and bind it to the C library's kernels;
    the reason (a string) where it cannot be."""
    if os.environ.get("WOODSTAR_WALK_OPS_IN_TORCH", "1") == "0":
        return "switched off (WOODSTAR_WALK_OPS_IN_TORCH=0)"
    if sys.platform not in ("linux", "darwin"):
        return "built on Linux and macOS only"
    compiler = find_cxx_compiler()
    if compiler is None:
        return "no C++ compiler found (set CXX, or install g++)"
    try:
        flags, libraries = _torch_library_flags()
        torch.ops.load_library(str(build(_TORCH_SOURCE, flags, compiler, libraries)))
        lib = _LIBRARY.load()
        torch.ops.woodstar_walk_ops.bind(_entry_point(lib.woodstar_perfect_walk),
                                         _entry_point(lib.woodstar_node_walk),
                                         ctypes.sizeof(_WalkSpec))
        torch.ops.woodstar_walk_ops.use_tables(per_tree_depths, one_column_adds)
    except Exception as error:  # noqa: BLE001  (any failure: the Python kernels)
        return f"the walk operators' Torch library could not be built: {type(error).__name__}: {error}"
    return None


def register_cpu_kernels() -> bool:
    """Make the C kernels the operators' CPU implementation (once per process): through
    the Torch operator library where it builds, else through the Python kernels above;
    False, and nothing registered, where the C library cannot be built."""
    global _registered, _in_torch, torch_library_reason
    with _REGISTER_LOCK:
        if not _registered:
            if not available():
                return False
            torch_library_reason = _load_torch_library()
            _in_torch = torch_library_reason is None
            if not _in_torch:
                perfect_tree_walk.register_kernel("cpu")(perfect_walk)
                node_tree_walk.register_kernel("cpu")(node_walk)
            _registered = True
    return True


def kernels_in_torch() -> bool:
    """Whether the operators' CPU kernels are the Torch operator library's (no Python per
    call); None before ``register_cpu_kernels``."""
    return _in_torch


def hand_tables(kind, *arguments):
    """Build the tables the kernel reads for one operator's arguments (``"perfect"``:
    leaf_table, n_trees, depth; ``"node"``: roots, rights, leaf_table) and hand them to
    the Torch operator library, which finds them by those tensors at each call. Nothing
    to do for the Python kernels, which build them on their first call."""
    if not _in_torch:
        return
    if kind == "perfect":
        leaf_table, n_trees, depth = arguments
        torch.ops.woodstar_walk_ops.set_tables([leaf_table], [n_trees, depth], None,
                                               _as_tensor(perfect_tables(*arguments)))
    else:
        roots, rights, leaf_table = arguments
        tables = node_tables(roots, rights, leaf_table)
        torch.ops.woodstar_walk_ops.set_tables([roots, rights, leaf_table], [],
                                               _as_tensor(tables.depths),
                                               _as_tensor(tables.columns))


def _as_tensor(array):
    return None if array is None else torch.from_numpy(array)


def use_tables(depths: bool, columns: bool):
    """Whether the kernels read the per-tree depths and the trees' one leaf column (A/B
    timing: without them the sums are the same)."""
    global per_tree_depths, one_column_adds
    per_tree_depths, one_column_adds = bool(depths), bool(columns)
    if _in_torch:
        torch.ops.woodstar_walk_ops.use_tables(per_tree_depths, one_column_adds)
