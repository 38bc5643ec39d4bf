"""The Torch eager backend: the lowered module itself, run without autograd."""

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

    @property
    def model(self):
        return self._model

    def run_tensor(self, x: torch.Tensor):
        with torch_threads(self.options.n_threads), torch.inference_mode():
            return self._model(x.to(self.device, non_blocking=True))

    def __call__(self, X):
        raw, transformed = self.run_tensor(torch.from_numpy(X))
        return to_numpy(raw), to_numpy(transformed)

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
