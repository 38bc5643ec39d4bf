"""The Torch eager backend: the lowered module itself, run without autograd."""

from concurrent.futures import ThreadPoolExecutor

import torch

from ._base import Runner, to_numpy
from ._threads import torch_threads
from .registry import register_backend

__all__ = ["TorchBackend", "TorchRunner"]


class TorchRunner(Runner):
    """Runs a ``torch.nn.Module``-like callable on one device under the options'
    thread setting (restored afterwards)."""

    def __init__(self, module, options, device, model=None):
        device = torch.device(device)
        super().__init__(module.to(device), options, device)
        self._model = self.module if model is None else model
        self._pool = None

    @property
    def model(self):
        return self._model

    def run_tensor(self, x: torch.Tensor, threads=None):
        """The program on ``x`` under ``threads`` intra-op threads (the options' by
        default)."""
        with torch_threads(threads or self.options.n_threads), torch.inference_mode():
            return self._model(x.to(self.device, non_blocking=True))

    def __call__(self, X, threads=None):
        raw, transformed = self.run_tensor(torch.from_numpy(X), threads)
        return to_numpy(raw), to_numpy(transformed)

    @property
    def parallel_parts(self):
        if self.device.type != "cpu":
            return 1
        return self.options.n_threads or torch.get_num_threads()

    def run_parts(self, batches):
        """On the CPU with several threads the parts run side by side, one intra-op
        thread each: a tree walk's ops are too short to share between threads, the
        hand-off costs more than it saves (docs/benchmarks.md, "Exporting backends:
        cache-sized batches"). A row's answer does not depend on the thread count."""
        threads = self.parallel_parts
        if threads < 2 or len(batches) < 2:
            return super().run_parts(batches)
        if self._pool is None:
            self._pool = ThreadPoolExecutor(threads - 1, thread_name_prefix="woodstar-parts")
        workers = min(threads, len(batches))

        def run_share(share):
            return [self(batch, threads=1) for batch in share]

        pending = [self._pool.submit(run_share, batches[w::workers]) for w in range(1, workers)]
        shares = [run_share(batches[0::workers])] + [p.result() for p in pending]
        results = [None] * len(batches)
        for w, share in enumerate(shares):
            results[w::workers] = share
        return results

    def to(self, device):
        return TorchRunner(self.module, self.options, device)


@register_backend
class TorchBackend:
    name = "torch"
    aliases = ("pytorch",)
    artifact_name = None  # rebuilt from the IR on load
    devices = ("cpu", "cuda")

    @staticmethod
    def is_available():
        return True, ""

    @staticmethod
    def compile(module, example, options, device):
        return TorchRunner(module, options, device)

    @staticmethod
    def load_artifact(module, data, options, device):
        return TorchRunner(module, options, device)
