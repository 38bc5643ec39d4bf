"""Backends: turn a lowered module into something that runs. Each backend module
imports its own library only inside the functions that use it."""

from . import torch_backend  # noqa: F401  (registers "torch" / "pytorch")
from .registry import all_backends, backend_names, get_backend, register_backend

__all__ = ["get_backend", "backend_names", "all_backends", "register_backend"]
