"""TorchScript: the lowered module traced with ``torch.jit.trace``.

The lowered modules have no data-dependent Python control flow (loops run a fixed
number of levels), so a trace is exact, and batch sizes are read with ``size()`` ops:
one trace serves every batch size.

Two traces of a tree model on the CPU: the one the container runs calls the walk
operators' C kernels (``backends/_walk_kernels.py``) for the tree walks, as
torch.compile's program does; the one it saves, and returns as ``model``, holds
tensor ops only, so the archive is an ordinary TorchScript archive that
``torch.jit.load`` opens without woodstar. That archive wraps the trace in
``RowParts``, so that a user of the archive alone keeps the cache-sized parts a
tensor-op walk needs (``lowering.routing.cache_part_rows``).
"""

import io
import warnings
from typing import List, Tuple

import torch

from ..lowering.routing import cache_part_rows
from ._base import refuse_unsupported_parts
from ._threads import torch_threads
from ._walk_kernels import any_walk_as_operator, walks_in_kernels
from .registry import register_backend
from .torch_backend import TorchRunner

__all__ = ["TorchScriptBackend", "trace"]


def trace(module, example, device):
    module = module.to(device)
    example = example.to(device)
    with warnings.catch_warnings(), torch.no_grad():
        warnings.simplefilter("ignore", torch.jit.TracerWarning)
        traced = torch.jit.trace(module, (example,), check_trace=False)
    return traced.eval()


class TorchScriptRunner(TorchRunner):
    """Runs a trace of the lowered module. On the CPU, where the walk operators' C
    kernels build, the trace it runs calls them for the tree walks (as torch.compile's
    program does); ``model``, what ``save`` writes and what ``container=False`` returns,
    is a trace of tensor ops only, which ``torch.jit.load`` runs without woodstar.
    ``portable``: such a trace already made (read from a saved archive)."""

    def __init__(self, module, options, device, portable=None):
        device = torch.device(device)
        module = module.to(device)
        example = _example(module)
        with torch_threads(options.n_threads):
            with walks_in_kernels(module, device) as every_walk:
                fast = _frozen(trace(module, example, device)) \
                    if any_walk_as_operator(module) else None
            if fast is None:  # the walks stay tensor ops: one trace serves both
                fast = portable = portable if portable is not None else trace(module, example, device)
        super().__init__(module, options, device, model=fast)
        # A program whose every walk is one kernel call has no rows x trees temporaries:
        # large calls run whole, the kernel splits rows between threads itself.
        self.runs_tensor_ops = not every_walk
        self._portable = portable

    @property
    def model(self):
        """The trace of tensor ops only (made on first use where the running trace
        calls the walk kernels)."""
        if self._portable is None:
            with torch_threads(self.options.n_threads):
                self._portable = trace(self.module, _example(self.module), self.device)
        return self._portable

    def run_tensor(self, x: torch.Tensor, threads=None):
        if self.device.type != "cpu":
            return super().run_tensor(x, threads)
        with torch_threads(threads or self.options.n_threads):
            return self._run_on_cpu(x)

    def __call__(self, X, threads=None):
        if self.device.type != "cpu":
            return super().__call__(X, threads)
        n_threads = threads or self.options.n_threads
        if n_threads is not None and n_threads != torch.get_num_threads():
            with torch_threads(n_threads):
                raw, transformed = self._run_on_cpu(torch.from_numpy(X))
        else:
            raw, transformed = self._run_on_cpu(torch.from_numpy(X))
        raw_values = raw.numpy()  # inference tensors on the CPU: no copy, no detach
        return raw_values, raw_values if transformed is raw else transformed.numpy()

    def _run_on_cpu(self, x):
        # On CPU the profiling executor's specialised plans run no faster than its
        # plain one (docs/benchmarks.md, "torch.jit: the profiling executor"), and
        # building them takes seconds to minutes on a program of tens of thousands of
        # ops (exact float32 sums over a wide input), on the first calls of each shape.
        # The flag (thread-local) and inference mode are set directly: context managers
        # written as generators cost a few microseconds each, a sizeable share of a
        # one-row call.
        optimize = torch._C._get_graph_executor_optimize()
        torch._C._set_graph_executor_optimize(False)
        try:
            with torch._C._InferenceMode(True):
                return self._model(x)
        finally:
            torch._C._set_graph_executor_optimize(optimize)

    def to(self, device):
        return TorchScriptRunner(self.module, self.options, device)


def _frozen(traced):
    """The running trace with its submodules inlined and its buffers as constants (the
    same tensors, so the walk kernels still find their tables): fewer interpreter steps
    per call. Only freezing itself, none of ``torch.jit.freeze``'s numeric rewrites."""
    return torch.jit.freeze(traced, optimize_numerics=False)


class RowParts(torch.nn.Module):
    """The trace behind a scripted loop that runs a call of more than ``rows`` rows in
    parts of equal size (within a row), as the container does."""

    def __init__(self, program, rows: int):
        super().__init__()
        self.program = program
        self.rows = rows

    def forward(self, x: torch.Tensor) -> Tuple[torch.Tensor, torch.Tensor]:
        n = x.size(0)
        if n <= self.rows:
            return self.program(x)
        parts = (n + self.rows - 1) // self.rows
        raw: List[torch.Tensor] = []
        transformed: List[torch.Tensor] = []
        for i in range(parts):
            part_raw, part_transformed = self.program(x[i * n // parts:(i + 1) * n // parts])
            raw.append(part_raw)
            transformed.append(part_transformed)
        return torch.cat(raw), torch.cat(transformed)


def _archive_program(runner):
    """What the archive holds: the trace, wrapped in ``RowParts`` for a tree model on
    the CPU."""
    if runner.device.type != "cpu" or not getattr(runner.module, "has_trees", False):
        return runner.model
    rows = cache_part_rows(runner.module.estimate_bytes(1))
    return torch.jit.script(RowParts(runner.model, rows))


def _trace_in(archive):
    """The trace inside a loaded archive (a ``RowParts`` one, or a bare trace): the
    container runs its own parts."""
    if getattr(archive, "original_name", None) == "RowParts":
        return archive.program
    return archive


def _example(module):
    return torch.zeros((2, module.n_features), dtype=module.input_dtype)


@register_backend
class TorchScriptBackend:
    name = "torch.jit"
    aliases = ("torchscript", "jit")
    artifact_name = "model.pt"
    devices = ("cpu", "cuda")

    @staticmethod
    def is_available():
        return True, ""

    @staticmethod
    def compile(module, example, options, device):
        refuse_unsupported_parts(module, "torch.jit")
        return TorchScriptRunner(module, options, device)

    @staticmethod
    def save_artifact(runner):
        buffer = io.BytesIO()
        torch.jit.save(_archive_program(runner), buffer)
        return buffer.getvalue()

    @staticmethod
    def load_artifact(module, data, options, device):
        # TorchScript archives are read by TorchScript's own restricted C++ unpickler,
        # which resolves only TorchScript types, never Python globals.
        device = torch.device(device)
        traced = _trace_in(torch.jit.load(io.BytesIO(data), map_location=device))
        if not _same_as_eager(traced, module, device):
            # A trace keeps the device it was made on in its constants (tensors created
            # inside forward): a model saved on another device is traced again here.
            traced = None
        return TorchScriptRunner(module, options, device, portable=traced)


def _same_as_eager(traced, module, device):
    example = torch.zeros((3, module.n_features), dtype=module.input_dtype)
    example[1] = float("nan")
    example[2] = torch.arange(module.n_features, dtype=example.dtype)
    example = example.to(device)
    try:
        with torch.inference_mode():
            got = traced(example)
            expected = module.to(device)(example)
    except RuntimeError:
        return False
    return all(torch.equal(a, b) for a, b in zip(got, expected))
