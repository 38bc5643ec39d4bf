"""CPU runtimes: the code that runs a model on the CPU beside the backends' programs.

Tree runtimes walk one tree ensemble (``TREE_RUNTIMES``, best first: the compiled walk,
ONNX Runtime's tree kernel, the NumPy walk); ``NumpyGraph`` runs a whole graph in
NumPy, each node by its op's CPU implementation, handing tree nodes to one tree
runtime. Each runtime says whether it takes an ensemble, whether it can run here (and
why not), and up to how many rows it is worth running (``docs/benchmarks.md``, "CPU
routes"); the execution plan (``woodstar/plan.py``) chooses among them.
"""

from dataclasses import dataclass
from typing import Callable, Tuple

from ..ir.tree_ensemble import TreeEnsemble
from . import c_walk, onnx_ml
from .numpy_graph import NumpyGraph, register_cpu_op, cpu_op_kinds
from .numpy_walk import NumpyTreeWalk
from . import families  # noqa: E402,F401  (registers the NumPy ops of runtimes/families/)

__all__ = ["TreeRuntime", "TREE_RUNTIMES", "tree_runtime", "tree_runtime_names", "NumpyGraph",
           "register_cpu_op", "cpu_op_kinds"]


@dataclass(frozen=True)
class TreeRuntime:
    name: str
    supports: Callable[[TreeEnsemble], bool]
    availability: Callable[[], Tuple[bool, str]]
    build: Callable[[TreeEnsemble, str, int], object]  # (ensemble, dtype, n_threads)
    every_batch: bool  # worth running at every batch size (else up to a row limit)


def _c_walk_availability():
    return (True, "") if c_walk.available() else (False, c_walk.unavailable_reason() or "")


def _onnx_ml_availability():
    return (True, "") if onnx_ml.available() else (False, "onnxruntime is not installed")


def _onnx_ml_supports(ens):
    # Ensembles whose trees it would walk more than once (vector leaves in several
    # blocks) are left to the other runtimes.
    return onnx_ml.OnnxMlTrees.supports(ens) and onnx_ml.walks_each_tree_once(ens)


TREE_RUNTIMES = (
    TreeRuntime("c-walk", c_walk.CTreeWalk.supports, _c_walk_availability,
                lambda ens, dtype, threads: c_walk.CTreeWalk(ens, dtype, n_threads=threads), True),
    TreeRuntime("onnx-ml", _onnx_ml_supports, _onnx_ml_availability,
                lambda ens, dtype, threads: onnx_ml.OnnxMlTrees(ens, dtype, n_threads=threads), True),
    TreeRuntime("numpy-walk", NumpyTreeWalk.supports, lambda: (True, ""),
                lambda ens, dtype, threads: NumpyTreeWalk(ens, dtype), False),
)


def tree_runtime_names():
    return tuple(r.name for r in TREE_RUNTIMES)


def tree_runtime(name: str) -> TreeRuntime:
    for runtime in TREE_RUNTIMES:
        if runtime.name == name:
            return runtime
    raise KeyError(name)
