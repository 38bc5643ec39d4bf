"""The Torch eager backend: the lowered module itself, run without autograd."""

import torch

from ._threads import torch_threads
from .registry import register_backend

__all__ = ["TorchBackend", "TorchRunner"]


class TorchRunner:
    """Runs a lowered module on one device; input and output are torch tensors."""

    def __init__(self, module, options, device):
        self.module = module.to(device)
        self.options = options
        self.device = torch.device(device)

    @property
    def model(self):
        return self.module

    def __call__(self, x: torch.Tensor):
        with torch_threads(self.options.n_threads), torch.inference_mode():
            return self.module(x.to(self.device, non_blocking=True))

    def to(self, device):
        return TorchRunner(self.module, self.options, device)


@register_backend
class TorchBackend:
    name = "torch"
    aliases = ("pytorch",)

    @staticmethod
    def is_available():
        return True, ""

    @staticmethod
    def compile(module, example, options, device):
        return TorchRunner(module, options, device)
