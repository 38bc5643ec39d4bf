"""TorchScript: the lowered module traced with ``torch.jit.trace``.

The lowered modules have no data-dependent Python control flow (loops run a fixed
number of levels), so a trace is exact, and batch sizes are read with ``size()`` ops:
one trace serves every batch size. The saved artifact is an ordinary TorchScript
archive that ``torch.jit.load`` opens without woodstar.
"""

import io
import warnings

import torch

from ._base import refuse_unsupported_parts
from ._threads import torch_threads
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
    def __init__(self, module, options, device, traced=None):
        device = torch.device(device)
        if traced is None:
            with torch_threads(options.n_threads):
                traced = trace(module, _example(module), device)
        super().__init__(module, options, device, model=traced)

    def run_tensor(self, x: torch.Tensor):
        if self.device.type != "cpu":
            return super().run_tensor(x)
        # On CPU the profiling executor's specialised plans run no faster than its
        # plain one (docs/benchmarks.md, "torch.jit: the profiling executor"), and
        # building them takes seconds to minutes on a program of tens of thousands of
        # ops (exact float32 sums over a wide input), on the first calls of each shape.
        with torch.jit.optimized_execution(False):
            return super().run_tensor(x)

    def to(self, device):
        return TorchScriptRunner(self.module, self.options, device)


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
        torch.jit.save(runner.model, buffer)
        return buffer.getvalue()

    @staticmethod
    def load_artifact(module, data, options, device):
        # TorchScript archives are read by TorchScript's own restricted C++ unpickler,
        # which resolves only TorchScript types, never Python globals.
        device = torch.device(device)
        traced = torch.jit.load(io.BytesIO(data), map_location=device)
        if not _same_as_eager(traced, module, device):
            # A trace keeps the device it was made on in its constants (tensors created
            # inside forward): a model saved on another device is traced again here.
            traced = None
        return TorchScriptRunner(module, options, device, traced=traced)


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
