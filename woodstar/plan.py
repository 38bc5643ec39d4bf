"""The execution plan: which code runs a call, in which precision, in how many rows at
a time. Pure functions of (IR, backend, device, options, the input); the container
carries the plan out.

Routes (``ROUTES``):

* ``"program"``: the backend's own compiled program (Torch eager, TorchScript, ONNX
  Runtime, TVM, torch.compile) — always the route off the CPU and on every backend
  but ``torch``;
* ``"numpy"``: the graph in NumPy, for models without trees, at every size (the
  source's own expressions, so its answer to the bit: docs/benchmarks.md, "Linear
  models and pipelines");
* a tree runtime (``"c-walk"``, ``"onnx-ml"``, ``"numpy-walk"``): the graph in NumPy
  with its trees walked by that runtime; the first available one that takes every
  ensemble of the model, on the ``torch`` backend on the CPU (docs/benchmarks.md,
  "CPU routes").

``extra_config["cpu_route"]`` forces one ("auto" by default); a route that cannot take
the model is refused at convert time with the reason.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np

from .exceptions import MissingConverter, unsupported_message
from .ir import ModelIR
from .lowering import routing
from .lowering.routing import small_batch_rows
from .runtimes import TREE_RUNTIMES, tree_runtime

__all__ = ["ROUTES", "RouteChoice", "choose_routes", "precision_for", "rows_per_batch",
           "program_rows_per_batch", "takes_cache_sized_parts", "part_count",
           "cpu_bytes_per_row", "needs_whole_call"]

ROUTES = ("program", "numpy") + tuple(r.name for r in TREE_RUNTIMES)
EVERY_SIZE = sys.maxsize


@dataclass(frozen=True)
class RouteChoice:
    """``route`` runs calls of up to ``cpu_rows`` rows (``single_row`` those of one
    row); larger calls run the backend's program."""

    route: str
    single_row: str
    cpu_rows: int

    def for_rows(self, n_rows: int) -> str:
        if n_rows > self.cpu_rows:
            return "program"
        return self.single_row if n_rows == 1 else self.route


PROGRAM_ONLY = RouteChoice("program", "program", 0)


def _refuse(owner, route, why):
    raise MissingConverter(unsupported_message(
        owner, "cpu_route", route, f"{why}; available here: 'auto', 'program' or a route "
                                   f"that takes the model"))


def _tree_route(ir: ModelIR, forced):
    """The first available tree runtime that takes every ensemble (or the forced one)."""
    ensembles = [n.op for n in ir.graph.nodes_of("trees")]
    owner = ir.head.estimator
    if forced is not None:
        runtime = tree_runtime(forced)
        available, reason = runtime.availability()
        if not available:
            _refuse(owner, forced, f"it is not available here ({reason})")
        if not all(runtime.supports(e) for e in ensembles):
            _refuse(owner, forced, "it does not take this model's trees")
        return runtime
    for runtime in TREE_RUNTIMES:
        if all(runtime.supports(e) for e in ensembles) and runtime.availability()[0]:
            return runtime
    return None


def choose_routes(ir: ModelIR, backend: str, device_type: str, options) -> RouteChoice:
    """Which route runs each call size. Everything but the input is known at convert
    time, so the container asks once."""
    forced = options.cpu_route
    if forced == "program" or backend != "torch" or device_type != "cpu":
        if forced not in (None, "program") and backend != "torch":
            _refuse(ir.head.estimator, forced,
                    f"CPU routes run on the 'torch' backend (this one is {backend!r}, which "
                    f"runs its own program)")
        if forced not in (None, "program"):
            _refuse(ir.head.estimator, forced, f"CPU routes run on the CPU (device {device_type!r})")
        return PROGRAM_ONLY
    if options.tvm_pad_input and options.batch_size is not None and forced is None:
        return PROGRAM_ONLY  # every call at one padded shape was asked for: the program's
    ensembles = [n.op for n in ir.graph.nodes_of("trees")]
    if not ensembles:
        if forced not in (None, "numpy"):
            _refuse(ir.head.estimator, forced, "a model without trees runs 'numpy' or 'program'")
        rows = options.small_batch_rows if options.small_batch_rows is not None else EVERY_SIZE
        return RouteChoice("numpy", "numpy", rows)
    if forced == "numpy":
        _refuse(ir.head.estimator, forced, "a model with trees runs a tree runtime or 'program'")
    runtime = _tree_route(ir, forced)
    if runtime is None:
        return PROGRAM_ONLY
    single = runtime.name
    walk = tree_runtime("numpy-walk")
    if forced is None and runtime.name == "onnx-ml" \
            and any(e.leaf_width > 1 for e in ensembles) and all(walk.supports(e) for e in ensembles):
        # Forest classifiers' ONNX-ML route reads leaf indices back into NumPy; one row
        # does not amortise that step, the NumPy walk is faster there
        # (docs/benchmarks.md, "CPU routes").
        single = walk.name
    if options.small_batch_rows is not None:
        rows = options.small_batch_rows
    elif forced is not None or runtime.every_batch:
        rows = EVERY_SIZE if forced is not None or options.tree_implementation is None else 0
    else:
        rows = 0 if options.tree_implementation is not None else \
            min(small_batch_rows(e, "numpy") for e in ensembles)
    return RouteChoice(runtime.name, single, rows)


# ------------------------------------------------------------------ precision
def precision_for(ir: ModelIR, options, X) -> str:
    """The program's input precision for ``X``: the source's float dtype for models
    that follow it (scalers, linear models, encoders); for trees reading the input,
    float64 when asked, or when the input holds values float32 cannot represent and
    the trees compare in float64 (HistGradientBoosting, LightGBM)."""
    if ir.follows_input_dtype:  # tree_op_precision_dtype concerns tree models alone
        return source_float_dtype(X, ir.head.estimator)
    if options.precision is not None:
        return options.precision
    if ir.input_precision != "float64":
        return "float32"
    if _has(X, "dtypes") and not hasattr(X, "dtype"):  # a DataFrame
        exact = all(_exact_in_float32(d) for d in _distinct_dtypes(X))
    else:
        dtype = getattr(X, "dtype", None)
        exact = dtype is not None and _exact_in_float32(dtype)
    return "float32" if exact else "float64"


def source_float_dtype(X, estimator) -> str:
    """The float dtype scikit-learn's scalers and linear models compute in for ``X``:
    float32 stays float32 (a DataFrame when all its numeric columns are), anything
    else becomes float64. float16 is refused: the scalers would round to half."""
    dtype = getattr(X, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype != np.float16:  # NumPy arrays: the fast path
        return "float32" if dtype == np.float32 else "float64"
    if _has(X, "dtypes") and dtype is None:  # a DataFrame
        kinds = {str(d) for d in _distinct_dtypes(X) if getattr(d, "kind", "O") in "biuf"}
        if "float16" in kinds:
            raise ValueError(f"{estimator} does not take float16 input here; "
                             f"pass float32 or float64 (got a float16 column).")
        return "float32" if kinds == {"float32"} else "float64"
    name = str(getattr(X, "dtype", "")).replace("torch.", "")
    if name == "float16":
        raise ValueError(f"{estimator} does not take float16 input here: scikit-learn "
                         f"would compute in half precision; pass float32 or float64.")
    return "float32" if name == "float32" else "float64"


def _has(X, name) -> bool:
    """``hasattr``, asking the class first: a DataFrame's ``dtypes`` property would
    build a Series (tens of microseconds) only to say that it exists."""
    return hasattr(type(X), name) or hasattr(X, name)


def _distinct_dtypes(frame):
    """The distinct dtypes of a DataFrame's columns. ``frame.dtypes`` builds a Series
    (tens of microseconds, most of a one-row call); pandas' block manager lists them
    without one, where it has that method."""
    try:
        dtypes = frame._mgr.get_dtypes()
    except AttributeError:
        dtypes = frame.dtypes
    try:
        return set(dtypes)
    except TypeError:  # an unhashable dtype
        return list(dtypes)


def _exact_in_float32(dtype) -> bool:
    """Every value of ``dtype`` is a float32 value (so rounding to float32 is a no-op)."""
    categories = getattr(dtype, "categories", None)  # pandas category: its values' dtype
    try:
        dtype = np.dtype(dtype if categories is None else categories.dtype)
    except TypeError:  # pandas extension dtypes (nullable Int64, ...): values may not fit
        return False
    return dtype.kind == "b" or (dtype.kind in "iuf" and dtype.itemsize <= (4 if dtype.kind == "f" else 2))


# ------------------------------------------------------------------ batching
def cpu_bytes_per_row(ir: ModelIR) -> int:
    """An upper bound on a CPU route's bytes per row: every value of the graph alive
    at once in float64, twice (a temporary per op)."""
    widths = sum(t.width for t in ir.graph.types.values())
    outputs = sum(n.op.n_outputs for n in ir.graph.nodes_of("trees"))
    return 16 * (widths + outputs) + 8


def needs_whole_call(ir: ModelIR) -> bool:
    """Whether a row's answer depends on the other rows of the call (an op with
    ``whole_call``, e.g. NMF's transform, which solves over all of them): such a call
    is never split into batches, whatever ``batch_size`` or the memory budget say."""
    return any(getattr(node.op, "whole_call", False) for node in ir.graph.nodes)


def rows_per_batch(options, bytes_per_row: int) -> int:
    """``batch_size`` when given, else the rows whose temporaries fit the budget."""
    if options.batch_size is not None:
        return options.batch_size
    return max(1, options.memory_budget_bytes // max(1, bytes_per_row))


def takes_cache_sized_parts(ir: ModelIR, options, device_type: str,
                            runs_tensor_ops: bool = True) -> bool:
    """Whether the program route runs this model in cache-sized parts: a model with
    trees, run by tensor ops (not ONNX Runtime's tree kernel) on the CPU, with no
    ``batch_size`` asked for."""
    return (options.batch_size is None and device_type == "cpu" and runs_tensor_ops
            and bool(ir.graph.nodes_of("trees")))


def program_rows_per_batch(options, bytes_per_row: int, cache_sized: bool) -> int:
    """The program route's rows per call: ``batch_size`` when given; else the memory
    budget's rows, and no more than fit the cache when ``cache_sized`` (the answer of
    ``takes_cache_sized_parts``)."""
    rows = rows_per_batch(options, bytes_per_row)
    if cache_sized:
        rows = min(rows, routing.cache_part_rows(bytes_per_row))
    return rows


def part_count(n_rows: int, rows_per_part: int, side_by_side: int = 1) -> int:
    """How many parts a call of ``n_rows`` runs in: enough for ``rows_per_part``, and
    where ``side_by_side`` threads run parts concurrently, one per thread as long as
    each keeps ``routing.CACHE_PART_MIN_ROWS`` rows."""
    parts = -(-n_rows // rows_per_part)
    if side_by_side > 1:
        parts = max(parts, min(side_by_side, n_rows // routing.CACHE_PART_MIN_ROWS))
    return max(1, parts)
