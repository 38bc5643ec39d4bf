"""Apache TVM (Relax): ``torch.export`` -> ``from_exported_program`` -> ``tvm.compile``
-> ``relax.VirtualMachine``.

* The batch dimension is a symbolic ``torch.export.Dim`` without an upper bound, so
  one compiled library serves every batch size.
* On the CPU the tree walks are exported as one operator each
  (``woodstar::perfect_tree_walk``, ``woodstar::node_tree_walk``) and compiled as
  kernels of ours (``tvm_tree_walk.py``): Relax's default CPU pipeline schedules nothing and fuses no
  gathers, so the walk's tensor ops would each make a pass over memory. CUDA keeps the
  tensor ops, which TVM's GPU pipeline schedules.
* ``tvm_max_fuse_depth``: the most operators Relax's ``FuseOps`` puts into one fused
  kernel (PassContext config ``relax.FuseOps.max_depth``; TVM's default is 256).
  Smaller values give more, smaller kernels and shorter compile times.
* ``tvm_pad_prediction_inputs``: with a batch size (``batch_size`` or
  ``convert_batch``), a short last batch is padded with zero rows to the full batch
  size and the padding's outputs are dropped, as Hummingbird's TVM backend does. The
  compiled program takes any batch size, so this is needed only to run every call at
  one shape (steady timings).
* Threads: TVM keeps one CPU thread pool per calling thread, started at that thread's
  first parallel loop with ``TVM_NUM_THREADS`` workers; TVM has no per-call setting and
  no way to read the current one back. ``config_threadpool`` chooses how many of a
  pool's workers a call uses, never more than it started with. So before the first
  TVM compile in a process that names ``n_threads``, woodstar sets ``TVM_NUM_THREADS``
  to the larger of ``n_threads`` and the logical CPUs (every later pool can then take
  any size up to them), and before a compile or call it gives the calling thread's
  pool the model's ``n_threads`` wherever that pool last had another. Without
  ``n_threads`` nothing is set (TVM's default: half the logical CPUs on x86). A pool
  started by other TVM code keeps its workers. The torch setting is not touched.
* ``config_threadpool`` binds the calling thread to one core, and every thread the
  caller starts afterwards (Torch's and OpenMP's pools included) would inherit that
  single core; the calling thread gets its CPU set back right after it.
* TVM's C++ logger writes warnings for the user of TVM's own operators
  (``Fast mode segfaults when there are out-of-bounds indices``, ``Scope Saving:``)
  straight to the process's stderr file descriptor during the compile; woodstar
  builds those operators with in-range indices, so the descriptor is redirected to a
  temporary file around the compile and those lines are dropped; any other line is
  written back to stderr afterwards.
* The saved artifact is the compiled shared library (``export_library``); loading it
  loads native code, so load TVM models only from files you trust, like any library.

tvm is imported only inside these functions.
"""

import contextlib
import importlib.util
import math
import os
import re
import sys
import tempfile
import threading
import warnings

import numpy as np
import torch

from ..lowering.trees._common import TreeStrategyBase
from ..lowering.trees.walk_op import whole_walk_op
from ._base import Runner, cuda_index, refuse_unsupported_parts
from .tvm_tree_walk import CONVERTERS as WALK_CONVERTERS, lifted_tensors
from .registry import register_backend

__all__ = ["TvmBackend"]

INSTALL = ("pip install 'woodstar[tvm]' (tested with apache-tvm==0.27.0.post1 and "
           "apache-tvm-ffi==0.1.14.post0)")


def _target(device):
    import tvm

    if torch.device(device).type == "cuda":
        return tvm.target.Target("cuda"), tvm.cuda(cuda_index(device))
    return tvm.target.Target("llvm"), tvm.cpu(0)


WHOLE_WALK_ON_CPU = True
"""False compiles the walk's tensor ops on the CPU too (the A/B's ``tvm+ops`` candidate)."""


def _make_tvm_friendly(program):
    """Rewrite the few ATen calls TVM 0.27's frontend cannot take into equivalent ones:

    * ``full(+-inf)``, ``full(nan)``: its legalisation rejects a non-finite fill value
      -> ``+-log(full(0))``, ``log(full(0)) - log(full(0))``;
    * ``exp2(x)``: not translated -> ``pow(2, x)``;
    * ``index_put(data, [rows], values)`` on a 2-D ``data`` (``index_copy`` of whole rows):
      TVM wants one index per dimension -> ``[rows[:, None], arange(n_columns)[None, :]]``.
    """
    aten = torch.ops.aten
    graph = program.graph_module.graph
    changed = False
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        replacement = None
        if node.target is aten.full.default and isinstance(node.args[1], float) \
                and not math.isfinite(node.args[1]):
            with graph.inserting_before(node):
                zero = graph.call_function(aten.full.default, (node.args[0], 0.0), dict(node.kwargs))
                minus_inf = graph.call_function(aten.log.default, (zero,))
                if math.isnan(node.args[1]):  # -inf - -inf
                    replacement = graph.call_function(aten.sub.Tensor, (minus_inf, minus_inf))
                elif node.args[1] > 0:
                    replacement = graph.call_function(aten.neg.default, (minus_inf,))
                else:
                    replacement = minus_inf
        elif node.target is aten.exp2.default:
            with graph.inserting_before(node):
                replacement = graph.call_function(aten.pow.Scalar, (2.0, node.args[0]))
        elif node.target is aten.index_put.default and len(node.args[1]) == 1 \
                and node.args[1][0] is not None and node.args[0].meta["val"].dim() == 2 \
                and node.args[1][0].meta["val"].dim() == 1:
            data, (rows,), values = node.args[:3]
            accumulate = node.args[3] if len(node.args) > 3 else False
            with graph.inserting_before(node):
                rows_2d = graph.call_function(aten.unsqueeze.default, (rows, 1))
                n_columns = graph.call_function(aten.sym_size.int, (data, 1))
                columns = graph.call_function(aten.arange.default, (n_columns,),
                                              {"dtype": torch.int64})
                columns_2d = graph.call_function(aten.unsqueeze.default, (columns, 0))
                replacement = graph.call_function(
                    aten.index_put.default, (data, [rows_2d, columns_2d], values, accumulate))
        if replacement is None:
            continue
        replacement.meta = dict(node.meta)
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        changed = True
    if changed:
        graph.lint()
        program.graph_module.recompile()
    return program


def _matmul_keeping_dtype(node, importer):
    """TVM's translation of ``bmm``/``mm``/``matmul`` hard-codes a float32 result, which
    would silently round a float64 program; translate them with the inputs' dtype."""
    from tvm import relax

    lhs, rhs = importer.env[node.args[0]], importer.env[node.args[1]]
    return importer.block_builder.emit(relax.op.linear_algebra.matmul(lhs, rhs))


_CUSTOM_OPS = {name: _matmul_keeping_dtype for name in ("bmm.default", "mm.default", "matmul.default")}


# Lines of TVM's C++ logger that say nothing to woodstar's user (see the docstring).
_TVM_NOISE = re.compile(r"Fast mode segfaults when|Scope Saving:|"
                        r"^\[\d\d:\d\d:\d\d\] \S+:\d+: Warning: ")


@contextlib.contextmanager
def _filtered_native_stderr():
    """Redirect file descriptor 2 (where C++ code writes) to a temporary file for the
    block, then write back the lines that are not TVM's known noise."""
    fd = 2

    def flush():
        if sys.stderr is not None:
            sys.stderr.flush()

    flush()
    saved = os.dup(fd)
    with tempfile.TemporaryFile(mode="w+b") as capture:
        os.dup2(capture.fileno(), fd)
        try:
            yield
        finally:
            flush()
            os.dup2(saved, fd)
            os.close(saved)
            capture.seek(0)
            text = capture.read().decode("utf-8", "replace")
            kept = [line for line in text.splitlines(keepends=True) if not _TVM_NOISE.search(line)]
            if kept:
                os.write(fd, "".join(kept).encode("utf-8"))


def compile_tvm(module, options, device):
    _configure_threads(options.n_threads)  # the compile may start TVM's pool
    with _filtered_native_stderr():
        return _compile_tvm(module, options, device)


def _compile_tvm(module, options, device):
    refuse_unsupported_parts(module, "tvm")
    import tvm
    from tvm import relax
    from tvm.relax.frontend.torch import from_exported_program

    module = module.to("cpu")
    example = torch.zeros((2, module.n_features), dtype=module.input_dtype)
    on_cpu = torch.device(device).type == "cpu" and WHOLE_WALK_ON_CPU
    # On the CPU the tree walks are kernels of ours (tvm_tree_walk.py); CUDA keeps the
    # tensor ops, which TVM's GPU pipeline schedules itself.
    walk_op = whole_walk_op() if on_cpu else contextlib.nullcontext()
    convert_map = {**_CUSTOM_OPS, **WALK_CONVERTERS} if on_cpu else _CUSTOM_OPS
    with warnings.catch_warnings(), walk_op:
        warnings.simplefilter("ignore")
        program = torch.export.export(module, (example,),
                                      dynamic_shapes=({0: torch.export.Dim("batch")},))
        program = program.run_decompositions()
        program = _make_tvm_friendly(program)
        with lifted_tensors(program):
            ir_module = from_exported_program(program, keep_params_as_input=False,
                                              custom_convert_map=convert_map)
    target, _ = _target(device)
    config = {}
    if options.tvm_max_fuse_depth is not None:
        config["relax.FuseOps.max_depth"] = options.tvm_max_fuse_depth
    with tvm.transform.PassContext(opt_level=3, config=config):
        return tvm.compile(ir_module, target=target)


_POOL = {"started": False}
_CALLER_POOL = threading.local()  # ``threads``: the size this thread's pool last got


def _configure_threads(n_threads):
    """Give the calling thread's TVM pool ``n_threads`` workers before woodstar's compile
    or call. The first call in a process, before any pool starts (a compile's constant
    folding or a call starts one), sets how many workers every pool starts with; a pool
    started with fewer workers than ``config_threadpool`` asks for keeps using the ones
    it has (a second size then ran no faster than the first: benchmarks/notes.md)."""
    if not _POOL["started"]:
        _POOL["started"] = True
        if n_threads is not None:
            os.environ["TVM_NUM_THREADS"] = str(max(n_threads, _logical_cpus()))
    if n_threads is not None and getattr(_CALLER_POOL, "threads", None) != n_threads:
        import tvm

        cpus = _caller_cpus()
        try:
            tvm.get_global_func("runtime.config_threadpool")(0, n_threads)
        finally:
            _restore_caller_cpus(cpus)  # it binds the caller to one core
        _CALLER_POOL.threads = n_threads


TVM_ALIGNMENT = 64  # bytes: TVM takes a DLPack tensor's data only at this alignment


def _aligned(X):
    """``X`` (C-contiguous) where its data is aligned as TVM requires, else a copy that is."""
    if X.flags.c_contiguous and X.ctypes.data % TVM_ALIGNMENT == 0:
        return X
    buffer = np.empty(X.nbytes + TVM_ALIGNMENT, np.uint8)
    start = -buffer.ctypes.data % TVM_ALIGNMENT
    aligned = buffer[start:start + X.nbytes].view(X.dtype).reshape(X.shape)
    aligned[...] = X
    return aligned


def _logical_cpus():
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def _caller_cpus():
    """The calling thread's CPU set, where the platform has one (Linux)."""
    return os.sched_getaffinity(0) if hasattr(os, "sched_getaffinity") else None


def _restore_caller_cpus(cpus):
    if cpus is not None and os.sched_getaffinity(0) != cpus:
        os.sched_setaffinity(0, cpus)


def _walks_in_kernels(module, device) -> bool:
    """Whether every tree part compiles to a walk kernel: then the program's temporaries
    do not grow with rows x trees, and a large call needs no cache-sized parts."""
    strategies = [m for m in module.modules() if isinstance(m, TreeStrategyBase)]
    return (torch.device(device).type == "cpu" and WHOLE_WALK_ON_CPU and bool(strategies)
            and all(s.exports_whole_walk for s in strategies))


class TvmRunner(Runner):
    def __init__(self, module, options, device, executable=None):
        super().__init__(module, options, device)
        from tvm import relax

        self.runs_tensor_ops = not _walks_in_kernels(module, device)

        self.executable = executable if executable is not None else compile_tvm(module, options, device)
        _, self._tvm_device = _target(device)
        self.vm = relax.VirtualMachine(self.executable, self._tvm_device)
        self._main = self.vm["main"]
        self._on_cpu = self.device.type == "cpu"

    @property
    def model(self):
        return self.executable

    def __call__(self, X):
        import tvm

        _configure_threads(self.options.n_threads)
        if not self._on_cpu or not X.size:  # (NumPy gives an empty array any address)
            raw, transformed = self._main(tvm.runtime.tensor(X, device=self._tvm_device))
            return raw.numpy(), transformed.numpy()
        # On the CPU the rows and the results change hands through DLPack, without
        # tvm.runtime.tensor's and .numpy()'s Python (most of a small call's time) or
        # their copies; the results' NumPy arrays keep the TVM tensors alive.
        raw, transformed = self._main(tvm.runtime.from_dlpack(_aligned(X)))
        return np.from_dlpack(raw), np.from_dlpack(transformed)

    def to(self, device):
        return TvmRunner(self.module, self.options, device)


@register_backend
class TvmBackend:
    name = "tvm"
    aliases = ()
    artifact_name = "model.so"
    devices = ("cpu", "cuda")

    @staticmethod
    def is_available():
        if importlib.util.find_spec("tvm") is None:
            return False, f"apache-tvm is not installed: {INSTALL}"
        try:
            from tvm.relax.frontend.torch import from_exported_program  # noqa: F401
        except Exception as error:  # noqa: BLE001  (a broken install says why)
            return False, f"tvm does not import ({type(error).__name__}: {error}): {INSTALL}"
        return True, ""

    @staticmethod
    def details():
        """For ``woodstar backends``: version and which targets this build has (read
        from the build, without touching a GPU)."""
        import tvm

        return {"tvm": tvm.__version__,
                "targets": {t: bool(tvm.runtime.enabled(t)) for t in ("llvm", "cuda")}}

    @staticmethod
    def library_versions():
        import tvm

        return {"tvm": tvm.__version__}

    @staticmethod
    def compile(module, example, options, device):
        return TvmRunner(module, options, device)

    @staticmethod
    def save_artifact(runner):
        with tempfile.TemporaryDirectory(prefix="woodstar-tvm-") as directory:
            path = os.path.join(directory, "model.so")
            runner.executable.export_library(path)
            with open(path, "rb") as f:
                return f.read()

    @staticmethod
    def load_artifact(module, data, options, device):
        import tvm

        with tempfile.TemporaryDirectory(prefix="woodstar-tvm-") as directory:
            path = os.path.join(directory, "model.so")
            with open(path, "wb") as f:
                f.write(data)
            executable = tvm.runtime.load_module(path)
        return TvmRunner(module, options, device, executable=executable)
