"""Backends: turn a lowered module into something that runs. Each backend module
imports its own library only inside the functions that use it."""

from . import (  # noqa: F401  (each registers itself)
    compile_backend, onnx_backend, torch_backend, torchscript_backend, tvm_backend,
)
from .registry import all_backends, backend_names, get_backend, register_backend

__all__ = ["get_backend", "backend_names", "all_backends", "register_backend"]
