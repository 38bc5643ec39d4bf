"""torch.compile: the lowered module compiled by Inductor.

* No recompile per batch size: the batch dimension is marked dynamic on every call,
  and batches of one row are padded to two (a size-1 dimension would otherwise be
  specialised and compiled a second time).
* Converted models share a code object to compile only with models of the same
  structure, so many models in one process never reach dynamo's per-function
  recompile limit (past it dynamo silently falls back to eager), while same-shaped
  models reuse one compiled graph.
* Threads: Inductor's CPU kernels fix their OpenMP thread count when they are
  generated, from ``torch.get_num_threads()``; compilation and every call run under
  ``n_threads`` (the global setting is restored afterwards).
* The model is compiled at convert time (one warm-up call), so errors surface there.
* There is no portable artifact: ``save`` stores the IR, and ``load`` compiles again.
* On the CPU the tree walks are one operator each with a C kernel
  (``runtimes/walk_ops.py``), opaque to Inductor, which compiles the steps around them:
  Inductor's own loops pass over (rows x trees) arrays level by level (docs/benchmarks.md,
  "torch.compile: the walk as one native operator", has the comparison). Such a program
  has no rows x trees temporaries, so large calls are not split into cache-sized parts.
  Without a C compiler, on CUDA, and for categorical splits or linear leaves, the walks
  stay tensor ops.
"""

import itertools
import os
import shutil
import subprocess
import sys
import tempfile
import types

import torch

from ..runtimes import walk_ops
from ._base import Runner, refuse_unsupported_parts, to_numpy
from ._threads import torch_threads
from ._walk_kernels import mark_walks_in_kernels
from .registry import register_backend

__all__ = ["TorchCompileBackend"]

_COUNTER = itertools.count()
_CODE_BY_STRUCTURE = {}
def _structure(module):
    """What a compiled graph depends on besides tensor values: the strategy, buffer
    shapes and dtypes, and the modules' plain attributes (depth, counts, flags)."""
    parts = [type(p).__name__ for p in module.parts]
    parts += [(name, tuple(b.shape), str(b.dtype)) for name, b in module.named_buffers()]
    for name, sub in module.named_modules():
        for key, value in sorted(vars(sub).items()):
            if not key.startswith("_") and isinstance(value, (bool, int, float, str, tuple)):
                parts.append((name, key, value))
    return repr(parts)


def _own_forward(module):
    """``module``'s forward behind a function whose code object is shared only by
    models of the same structure. Dynamo caches compiled graphs per code object and,
    past ``recompile_limit`` (8) entries, silently runs new ones eagerly; with one code
    object per structure, same-shaped models reuse a graph (buffers are graph inputs)
    and differently shaped ones never crowd each other out."""

    def forward(x):
        return module(x)

    key = _structure(module)
    code = _CODE_BY_STRUCTURE.get(key)
    if code is None:
        code = forward.__code__.replace(co_name=f"woodstar_forward_{next(_COUNTER)}")
        _CODE_BY_STRUCTURE[key] = code
    return types.FunctionType(code, forward.__globals__, code.co_name, None, forward.__closure__)


class CompiledRunner(Runner):
    def __init__(self, module, options, device):
        super().__init__(module.to(device), options, device)
        self.runs_tensor_ops = not mark_walks_in_kernels(self.module, device)
        self._compiled = torch.compile(_own_forward(self.module), backend="inductor",
                                       fullgraph=True, dynamic=None)
        example = torch.zeros((2, module.n_features), dtype=module.input_dtype)
        self.run_tensor(example)  # compile now

    @property
    def model(self):
        return self._compiled

    def run_tensor(self, x):
        n = x.shape[0]
        if n == 1:
            x = torch.cat([x, x])
        x = x.to(self.device)
        torch._dynamo.mark_dynamic(x, 0)
        with torch_threads(self.options.n_threads), torch.inference_mode():
            raw, transformed = self._compiled(x)
        return raw[:n], transformed[:n]

    def __call__(self, X):
        raw, transformed = self.run_tensor(torch.from_numpy(X))
        return to_numpy(raw), to_numpy(transformed)

    def to(self, device):
        return CompiledRunner(self.module, self.options, device)


def _inductor_cxx():
    """The compiler name in Inductor's ``config.cpp.cxx``. Importing Inductor takes
    seconds, so unless it is loaded already (its config may have been changed) this is
    its default, read the same way: ``$CXX``, else clang++ on macOS and g++ elsewhere."""
    config = sys.modules.get("torch._inductor.config")
    if config is None:
        return os.environ.get("CXX", "clang++" if sys.platform == "darwin" else "g++")
    try:
        return config.cpp.cxx[-1] if isinstance(config.cpp.cxx, tuple) else config.cpp.cxx
    except Exception:  # noqa: BLE001  (an internal moved: fall back to the usual name)
        return "g++"


def c_compiler():
    """The C++ compiler Inductor would use, or None."""
    cxx = _inductor_cxx()
    for name in (cxx, "g++", "c++", "clang++"):
        if name and shutil.which(name):
            return shutil.which(name)
    return None


def compiler_works(compiler, timeout=60):
    """Compile and link a two-line C++ program in a temporary folder: (ok, error)."""
    with tempfile.TemporaryDirectory(prefix="woodstar-cc-") as directory:
        source = os.path.join(directory, "probe.cpp")
        with open(source, "w") as f:
            f.write("#include <cmath>\nint main() { return std::isnan(0.0) ? 1 : 0; }\n")
        try:
            result = subprocess.run([compiler, source, "-o", os.path.join(directory, "probe")],
                                    capture_output=True, text=True, timeout=timeout)
        except (OSError, subprocess.TimeoutExpired) as error:
            return False, f"{type(error).__name__}: {error}"
        if result.returncode != 0:
            return False, (result.stderr or result.stdout).strip()[-500:]
        return True, None


@register_backend
class TorchCompileBackend:
    name = "torch.compile"
    aliases = ("inductor",)
    artifact_name = None  # compiled again from the IR on load
    devices = ("cpu", "cuda")

    @staticmethod
    def is_available():
        if not hasattr(torch, "compile"):
            return False, f"torch {torch.__version__} has no torch.compile: pip install 'torch>=2.2'"
        if c_compiler() is None:
            return False, ("Inductor needs a C++ compiler on PATH (g++ or clang++): "
                           "install one, e.g. apt-get install g++")
        return True, ""

    @staticmethod
    def details():
        compiler = c_compiler()
        works, error = compiler_works(compiler) if compiler else (False, "no compiler")
        return {"c_compiler": compiler, "c_compiler_works": works, "c_compiler_error": error,
                "tree_walk_kernels": walk_ops.available(),
                "tree_walk_kernels_error": walk_ops.unavailable_reason()}

    @staticmethod
    def compile(module, example, options, device):
        refuse_unsupported_parts(module, "torch.compile")
        return CompiledRunner(module, options, device)

    @staticmethod
    def load_artifact(module, data, options, device):
        return CompiledRunner(module, options, device)
