"""``k_neighbors`` on the CPU route with scikit-learn's choice among tied rows.

Where several training rows lie at the k-th distance, scikit-learn keeps the ones its
search leaves in a fixed-size max-heap, and returns them in the order its final sort
leaves them (which the regressor's mean and the distance weights' sums follow). Each
search is replayed here, in C (woodstar/runtimes/knn_heap.c): the same heap pushes in
the same order, the same merge of heaps, the same sort (scikit-learn 1.9).

Brute force (``ArgKmin``), over the reduced distances the op computes (Minkowski's
``|d|**p`` and ``**(1/p)`` with libm's ``pow`` in C, as scikit-learn's). The push
order depends on the call (``ArgKmin``'s "auto" strategy):

* "parallel on X", candidates in training-index order: when the call has more rows
  than the training set, or more than ``4 * 256 * threads`` rows; always for a
  ``KNeighborsClassifier`` with uniform weights and a non-euclidean metric, whose
  ``predict``/``predict_proba`` force it (``ArgKminClassMode``) for C-ordered float64
  NumPy input (other input takes ``kneighbors``' "auto" in scikit-learn; the set of
  neighbours, all a uniform vote reads, differs only where "parallel on Y" applies);
* "parallel on Y" otherwise: the training rows in chunks of 256, shared statically
  among ``min(threads, chunks)`` threads, each filling its own heap, then merged.

``threads`` is ``sklearn_openmp_threads()``: scikit-learn's
``_openmp_effective_n_threads()`` as the calling process would see it (see there),
never woodstar's ``n_threads`` option, which only splits the rows among threads here
and so changes no answer. scikit-learn's settings (``sklearn.set_config``:
``pairwise_dist_chunk_size`` 256, ``pairwise_dist_parallel_strategy`` "auto",
``working_memory`` 1024 MiB, ``enable_cython_pairwise_dist``) are taken at their defaults.
Each row is decided alone, so rows are handed out in blocks freely; but a call split
into batches (``batch_size``) is decided batch by batch, as scikit-learn would decide
a call of that many rows.

The cosine metric's brute-force search is not ``ArgKmin`` in scikit-learn, nor is
any metric's for query rows that are not float64 (``ArgKmin`` takes only rows of the
training set's dtype): it computes the distance matrix (``pairwise_distances``, in
``working_memory`` chunks) and partitions each row with NumPy (``argpartition``, then
``argsort`` of the k kept); the same steps run here for cosine and for float32 rows.
Integer rows take that path in scikit-learn too, but reach this op already widened to
float64, where they take ``ArgKmin``'s: among rows tied at the k-th distance, integer
queries of a brute-force model can keep other rows than scikit-learn.

KD tree and ball tree: the tree's depth-first query (``TreeQuery``) over the fitted
tree's arrays, which the op holds. Searches saved without their kind or tree, and a
missing C compiler: the op's reference (the lower training index among tied rows;
woodstar/ir/families/neighbors.py).
"""

from __future__ import annotations

import ctypes
import math
import os
import sys
from pathlib import Path

import numpy as np

from .._native import NativeLibrary
from .._row_blocks import RowBlocks
from ..numpy_graph import register_cpu_op

__all__ = ["TreeQuery", "argkmin", "argkmin_threads_on_y", "libm_pow", "minkowski_rdist",
           "simultaneous_sort", "sklearn_openmp_threads", "unavailable_reason"]

CHUNK_SIZE = 256  # scikit-learn's pairwise_dist_chunk_size default
_BLOCK_ELEMENTS = 1 << 22  # query rows x training rows of distances held at once
_FLAGS = ("-O2", "-std=c99", "-fPIC", "-shared", "-ffp-contract=off", "-fno-fast-math")


def _setup(lib):
    lib.woodstar_knn_argkmin.restype = ctypes.c_int64
    lib.woodstar_knn_argkmin.argtypes = [ctypes.c_void_p] + [ctypes.c_int64] * 5 + [
        ctypes.c_void_p, ctypes.c_void_p]
    lib.woodstar_knn_tree_query.restype = None
    lib.woodstar_knn_tree_query.argtypes = (
        [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p, ctypes.c_int64] + [ctypes.c_void_p] * 4
        + [ctypes.c_int64] * 3 + [ctypes.c_double, ctypes.c_int64, ctypes.c_void_p,
                                  ctypes.c_void_p])
    lib.woodstar_knn_rdist.restype = None
    lib.woodstar_knn_rdist.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_void_p] + [
        ctypes.c_int64] * 3 + [ctypes.c_double, ctypes.c_void_p]
    lib.woodstar_libm_pow.restype = None
    lib.woodstar_libm_pow.argtypes = [ctypes.c_void_p, ctypes.c_int64, ctypes.c_double,
                                      ctypes.c_void_p]
    lib.woodstar_simultaneous_sort.restype = None
    lib.woodstar_simultaneous_sort.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64]


_LIBRARY = NativeLibrary(Path(__file__).parent.parent / "knn_heap.c", _FLAGS, _setup,
                         "scikit-learn's nearest-neighbour heap")


def unavailable_reason():
    return None if _LIBRARY.load() is not None else _LIBRARY.reason


# ------------------------------------------------------------ thread count
_CPU_COUNT = []


def _logical_cpus_like_loky() -> int:
    """loky's ``cpu_count`` without joblib: the CPUs, the affinity mask, the cgroup
    quota and ``LOKY_MAX_CPU_COUNT``, the least of them (logical CPUs: telling
    physical cores apart needs joblib's probes)."""
    total = os.cpu_count() or 1
    affinity = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else total
    cgroup = total
    try:
        quota, period = "max", None
        if os.path.exists("/sys/fs/cgroup/cpu.max"):  # cgroup v2, else v1
            parts = Path("/sys/fs/cgroup/cpu.max").read_text().split()
            if len(parts) == 2:
                quota, period = parts
        elif os.path.exists("/sys/fs/cgroup/cpu/cpu.cfs_quota_us"):
            quota = Path("/sys/fs/cgroup/cpu/cpu.cfs_quota_us").read_text().strip()
            period = Path("/sys/fs/cgroup/cpu/cpu.cfs_period_us").read_text().strip()
        if quota != "max" and int(quota) > 0 and int(period) > 0:
            cgroup = math.ceil(int(quota) / int(period))
    except (OSError, ValueError):
        pass
    user = min(affinity, cgroup, int(os.environ.get("LOKY_MAX_CPU_COUNT", total)))
    return max(min(total, user), 1)


def _physical_cpu_count() -> int:
    """``joblib.cpu_count(only_physical_cores=True)``, what scikit-learn reads (cached
    by both, once per process)."""
    if not _CPU_COUNT:
        try:
            from joblib import cpu_count
        except ImportError:
            _CPU_COUNT.append(_logical_cpus_like_loky())
        else:
            _CPU_COUNT.append(int(cpu_count(only_physical_cores=True)))
    return _CPU_COUNT[0]


def _omp_default_threads() -> int:
    """libgomp's ``omp_get_max_threads()`` without ``OMP_NUM_THREADS``: the CPUs of the
    process's affinity mask."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


_OPENMP_HELPERS = "sklearn.utils._openmp_helpers"


def _omp_max_threads() -> int:
    """``omp_get_max_threads()`` as libgomp starts: ``OMP_NUM_THREADS`` (its first
    value), else the CPUs of the affinity mask."""
    configured = os.environ.get("OMP_NUM_THREADS")
    if configured:
        try:
            value = int(configured.split(",")[0].strip())
        except ValueError:
            value = 0
        if value > 0:
            return value
    return _omp_default_threads()


def sklearn_openmp_threads() -> int:
    """The thread count scikit-learn's ``_openmp_effective_n_threads()`` gives in this
    process. Where scikit-learn's helper is loaded, its own answer (which follows
    threadpoolctl's limits on its OpenMP runtime). Otherwise, as its runtime would
    start: with ``OMP_NUM_THREADS`` set, that value (it may exceed the CPUs); else the
    least of the affinity mask's CPUs and joblib's physical core count."""
    helpers = sys.modules.get(_OPENMP_HELPERS)
    if helpers is not None:
        return int(helpers._openmp_effective_n_threads())
    if os.environ.get("OMP_NUM_THREADS"):
        return _omp_max_threads()
    return min(_omp_max_threads(), _physical_cpu_count())


def argkmin_threads_on_y(n_queries: int, n_train: int, threads: int) -> int:
    """``ArgKmin``'s "auto" strategy for a call of ``n_queries`` rows: 0 for "parallel
    on X", else the thread count of "parallel on Y"."""
    if n_train < n_queries or 4 * CHUNK_SIZE * threads < n_queries:
        return 0
    return threads


# ------------------------------------------------------------ the replay
def argkmin(rdist: np.ndarray, k: int, threads_on_y: int):
    """(reduced distances, training indices), (n, k) each, as ``ArgKmin`` keeps and
    orders them for the rows of ``rdist`` (``threads_on_y``: 0 for "parallel on X")."""
    lib = _LIBRARY.load()
    rdist = np.ascontiguousarray(rdist, dtype=np.float64)
    n, m = rdist.shape
    values = np.empty((n, k), dtype=np.float64)
    indices = np.empty((n, k), dtype=np.int64)
    if lib.woodstar_knn_argkmin(rdist.ctypes.data, n, m, k, CHUNK_SIZE, int(threads_on_y),
                                values.ctypes.data, indices.ctypes.data) != 0:
        raise MemoryError("nearest-neighbour heap: no scratch space")
    return values, indices


def simultaneous_sort(values: np.ndarray, indices: np.ndarray):
    """scikit-learn's ``simultaneous_sort`` (in place, on copies): for tests."""
    lib = _LIBRARY.load()
    values = np.array(values, dtype=np.float64)
    indices = np.array(indices, dtype=np.int64)
    lib.woodstar_simultaneous_sort(values.ctypes.data, indices.ctypes.data, len(values))
    return values, indices


_METRIC_CODES = {"euclidean": 0, "manhattan": 1, "chebyshev": 2, "minkowski": 3}
# the exponent scikit-learn's DistanceMetric holds as ``p`` (the KD tree's bounds use it)
_METRIC_P = {"euclidean": 2.0, "manhattan": 1.0, "chebyshev": float("inf")}


class TreeQuery:
    """The fitted tree's depth-first query (``KDTree.query`` / ``BallTree.query``):
    ``query(X)`` gives (reduced distances, training indices), (n, k) each."""

    def __init__(self, op):
        self.op = op
        self.fit_X = np.ascontiguousarray(op.fit_X, dtype=np.float64)
        self.arrays = [np.ascontiguousarray(a) for a in (op.tree_index, op.tree_nodes,
                                                           op.tree_radius, op.tree_bounds)]
        self.kind = 0 if op.search == "kd_tree" else 1
        self.metric = _METRIC_CODES[op.metric]
        self.p = _METRIC_P.get(op.metric, float(op.p))

    def __call__(self, X):
        lib, op = _LIBRARY.load(), self.op
        X = np.ascontiguousarray(X, dtype=np.float64)
        k = op.n_neighbors
        values = np.empty((len(X), k), dtype=np.float64)
        indices = np.empty((len(X), k), dtype=np.int64)
        index, nodes, radius, bounds = self.arrays
        lib.woodstar_knn_tree_query(
            X.ctypes.data, len(X), self.fit_X.ctypes.data, op.n_features, index.ctypes.data,
            nodes.ctypes.data, radius.ctypes.data, bounds.ctypes.data, len(nodes), self.kind,
            self.metric, self.p, k, values.ctypes.data, indices.ctypes.data)
        return values, indices


def minkowski_rdist(X, fit_X, p):
    """``sum |x - t|**p`` with libm's ``pow``, feature after feature, as scikit-learn's
    MinkowskiDistance.rdist (NumPy's power may differ in the last bits)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    out = np.empty((len(X), len(fit_X)), dtype=np.float64)
    _LIBRARY.load().woodstar_knn_rdist(X.ctypes.data, len(X), fit_X.ctypes.data, len(fit_X),
                                       X.shape[1], _METRIC_CODES["minkowski"], float(p),
                                       out.ctypes.data)
    return out


def libm_pow(x, exponent):
    x = np.ascontiguousarray(x, dtype=np.float64)
    out = np.empty_like(x)
    _LIBRARY.load().woodstar_libm_pow(x.ctypes.data, x.size, float(exponent), out.ctypes.data)
    return out


def _cosine_select(rdist: np.ndarray, k: int):
    """scikit-learn's ``_kneighbors_reduce_func``: argpartition, then argsort of the k
    (cosine's search, and every metric's for rows that are not float64)."""
    rows = np.arange(rdist.shape[0])[:, None]
    index = np.argpartition(rdist, k - 1, axis=1)[:, :k]
    index = index[rows, np.argsort(rdist[rows, index])]
    return rdist[rows, index], index


WORKING_MEMORY_MIB = 1024  # scikit-learn's working_memory default


def _pairwise_chunk(op, X, fit_X, fit_norms):
    """The distance matrix scikit-learn's ``pairwise_distances`` gives for rows that
    are not float64 (no ``ArgKmin`` then): squared ``euclidean_distances`` in float64
    (``(-2 x.t + |x|^2) + |t|^2``, NumPy's row norms), SciPy's ``cdist`` for the others
    (Minkowski: the distance itself, ``(sum |d|**p)**(1/p)`` with libm's ``pow``)."""
    X = np.ascontiguousarray(X, dtype=np.float64)
    if op.formula == "cosine":
        return op.reduced(X)
    if op.metric == "euclidean":
        D = -2 * (X @ fit_X.T)
        D += np.einsum("ij,ij->i", X, X)[:, None]
        D += fit_norms[None, :]
        return np.maximum(D, 0, out=D)
    if op.metric == "minkowski":
        return libm_pow(minkowski_rdist(X, fit_X, op.p), 1.0 / op.p)
    return op.reduced(X)


def pairwise_select(op, X, fit_X, fit_norms):
    """(distances, indices) as ``kneighbors``' fallback for rows that are not float64:
    ``pairwise_distances_chunked`` (``working_memory`` chunks of rows), then
    ``_kneighbors_reduce_func``'s argpartition and argsort of the k kept."""
    k, m = op.n_neighbors, op.n_train
    step = max(1, min(len(X), int(WORKING_MEMORY_MIB * 2**20 // (8 * m))))
    dists, found = [], []
    for start in range(0, len(X), step):
        D = _pairwise_chunk(op, X[start:start + step], fit_X, fit_norms)
        values, index = _cosine_select(D, k)
        dists.append(np.sqrt(values) if op.metric == "euclidean" and op.formula != "cosine"
                     else values)
        found.append(index)
    return np.concatenate(dists), np.concatenate(found)


def forced_parallel_on_x(op) -> bool:
    """``KNeighborsClassifier`` with uniform weights searches with ``ArgKminClassMode``
    on "parallel on X" for every metric but euclidean (which it leaves to ArgKmin)."""
    return op.mode == "classifier" and op.weights == "uniform" and op.formula == "direct"


def _tree_route(op, context):
    query = TreeQuery(op)
    k = op.n_neighbors
    # a query visits a few leaves: blocks of rows worth a thread's hand-off
    blocks = RowBlocks(context.n_threads, min_rows=256)

    def run(X):
        if len(X) == 0:
            return tuple(op.reference([X]))
        packed = blocks.run(lambda rows: np.hstack(query(rows)), X)
        chosen, index = packed[:, :k], packed[:, k:].astype(np.int64)
        return tuple(op.predict_from(index, op.distances(chosen)))

    return run


@register_cpu_op("k_neighbors")
def _k_neighbors(op, context):
    if _LIBRARY.load() is None or op.search not in ("brute", "kd_tree", "ball_tree"):
        return lambda X: tuple(op.reference([X]))
    if op.search != "brute":
        if op.tree_index is None:
            return lambda X: tuple(op.reference([X]))
        return _tree_route(op, context)
    k, m = op.n_neighbors, op.n_train
    blocks = RowBlocks(context.n_threads, min_rows=max(2, _BLOCK_ELEMENTS // (8 * m + 1)))
    step = max(1, _BLOCK_ELEMENTS // m)
    minkowski = op.formula == "direct" and op.metric == "minkowski"
    fit_X = np.ascontiguousarray(op.fit_X, dtype=np.float64)

    def distances(chosen):
        # ArgKmin's compute_exact_distances: _rdist_to_dist(max(d, 0)) in C
        if minkowski:
            return libm_pow(np.maximum(chosen, 0.0), 1.0 / op.p)
        return op.distances(np.maximum(chosen, 0.0))

    def block(X, threads_on_y):
        chosen, index = [], []
        for start in range(0, len(X), step):
            rows = X[start:start + step]
            rdist = minkowski_rdist(rows, fit_X, op.p) if minkowski else op.reduced(rows)
            if op.formula == "cosine":
                values, found = _cosine_select(rdist, k)
            else:
                values, found = argkmin(rdist, k, threads_on_y)
            chosen.append(values)
            index.append(found)
        return np.concatenate(chosen), np.concatenate(index)

    fit_norms = np.einsum("ij,ij->i", fit_X, fit_X)

    def run(X):
        if len(X) == 0:
            return tuple(op.reference([X]))
        if X.dtype != np.float64:
            # float32 rows: scikit-learn's brute force computes the distance matrix
            # (its ArgKmin takes only rows of the training set's dtype)
            return tuple(op.predict_from(*pairwise_select(op, X, fit_X, fit_norms)[::-1]))
        X = np.ascontiguousarray(X, dtype=np.float64)
        threads_on_y = 0 if forced_parallel_on_x(op) else argkmin_threads_on_y(
            len(X), m, sklearn_openmp_threads())
        packed = blocks.run(lambda rows: np.hstack(block(rows, threads_on_y)), X)
        chosen, index = packed[:, :k], packed[:, k:].astype(np.int64)
        return tuple(op.predict_from(index, distances(chosen)))

    return run
