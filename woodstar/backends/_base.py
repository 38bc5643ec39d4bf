"""What every backend shares: the runner protocol and device handling.

A backend is a class registered with ``register_backend`` that has ``name``,
``aliases``, ``is_available() -> (bool, reason)``, ``compile(module, example,
options, device) -> runner`` and, for ``save``/``load``, ``artifact_name`` (``None``
when the artifact is rebuilt from the IR), ``save_artifact(runner) -> bytes`` and
``load_artifact(module, data, options, device) -> runner``.

A runner takes a C-contiguous NumPy batch of the program's dtype and returns
``(raw, transformed)`` as NumPy arrays; it has ``module`` (the lowered
``LoweredModel``), ``model`` (the backend's own object) and ``to(device)``.
"""

import numpy as np
import torch

__all__ = ["Runner", "to_numpy", "cuda_index"]


def to_numpy(t):
    if isinstance(t, np.ndarray):
        return t
    return t.detach().cpu().numpy()


def cuda_index(device) -> int:
    device = torch.device(device)
    return device.index if device.index is not None else 0


class Runner:
    """Base for runners: keeps the lowered module, options and device."""

    # The program runs tensor ops over the whole batch, so its temporaries grow with
    # the batch (the container then runs a model with trees in cache-sized parts on
    # the CPU: plan.program_rows_per_batch). False for a kernel that walks row by row.
    runs_tensor_ops = True
    # How many parts ``run_parts`` runs at once (1: one after another).
    parallel_parts = 1

    def __init__(self, module, options, device):
        self.module = module
        self.options = options
        self.device = torch.device(device)

    def run_parts(self, batches):
        """``(raw, transformed)`` of each batch, in order."""
        return [self(batch) for batch in batches]

    @property
    def model(self):
        return self.module

    def __call__(self, X: np.ndarray):
        raise NotImplementedError

    def to(self, device):
        raise NotImplementedError


def refuse_unsupported_parts(module, backend: str):
    """Raise ``MissingConverter`` at convert time for a lowered op that says (in its
    ``refused_by`` dict) why ``backend`` cannot take it, before any export starts."""
    from ..exceptions import MissingConverter

    for part in module.modules():
        reason = getattr(part, "refused_by", {}).get(backend)
        if reason:
            raise MissingConverter(reason)
