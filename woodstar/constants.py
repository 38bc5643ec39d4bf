"""Keys accepted in ``extra_config``; the strings are Hummingbird's, so existing
configuration dictionaries keep their meaning."""

__all__ = [
    "N_THREADS",
    "BATCH_SIZE",
    "TREE_IMPLEMENTATION",
    "TREE_OP_PRECISION_DTYPE",
    "ONNX_TARGET_OPSET",
    "ONNX_OUTPUT_MODEL_NAME",
    "TVM_MAX_FUSE_DEPTH",
    "TVM_PAD_INPUT",
    "INPUT_NAMES",
    "OUTPUT_NAMES",
    "CONTAINER",
    "MEMORY_BUDGET_BYTES",
    "SMALL_BATCH_ROWS",
    "CPU_ROUTE",
    "KNOWN_KEYS",
]

N_THREADS = "n_threads"
"""Number of intra-op threads the converted model uses."""

BATCH_SIZE = "batch_size"
"""Rows per batch; larger inputs are split by the container."""

TREE_IMPLEMENTATION = "tree_implementation"
"""Force a tree strategy: "gemm", "tree_trav" or "perf_tree_trav"."""

TREE_OP_PRECISION_DTYPE = "tree_op_precision_dtype"
"""Precision of tree comparisons and sums: "float32" or "float64". Models that compute in
their input's dtype (linear models, scalers, pipelines that start with one) ignore it:
their precision follows the input, as scikit-learn's does."""

ONNX_TARGET_OPSET = "onnx_target_opset"
ONNX_OUTPUT_MODEL_NAME = "onnx_model_name"
TVM_MAX_FUSE_DEPTH = "tvm_max_fuse_depth"
TVM_PAD_INPUT = "tvm_pad_prediction_inputs"
INPUT_NAMES = "input_names"
OUTPUT_NAMES = "output_names"

CONTAINER = "container"
"""False returns the raw backend model instead of the container."""

MEMORY_BUDGET_BYTES = "memory_budget_bytes"
"""Woodstar's own key: the most memory one batch's intermediates may take."""

SMALL_BATCH_ROWS = "small_batch_rows"
"""Woodstar's own key: on the torch backend on CPU, calls of at most this many rows run
the CPU route (compiled walk, ONNX-ML kernel or NumPy walk: same answers, less time)
instead of the Torch program; 0 turns it off. Default: every batch for the first two,
the measured crossover for the NumPy walk (lowering/routing.py)."""

CPU_ROUTE = "cpu_route"
"""Woodstar's own key: which code runs calls on the torch backend's CPU: "auto" (the
execution plan's choice), "program" (the Torch program), "numpy" (models without
trees), or a tree runtime: "c-walk", "onnx-ml", "numpy-walk" (woodstar/plan.py). A
route that cannot take the model is refused at convert time."""

KNOWN_KEYS = (
    N_THREADS,
    BATCH_SIZE,
    TREE_IMPLEMENTATION,
    TREE_OP_PRECISION_DTYPE,
    ONNX_TARGET_OPSET,
    ONNX_OUTPUT_MODEL_NAME,
    TVM_MAX_FUSE_DEPTH,
    TVM_PAD_INPUT,
    INPUT_NAMES,
    OUTPUT_NAMES,
    CONTAINER,
    MEMORY_BUDGET_BYTES,
    SMALL_BATCH_ROWS,
    CPU_ROUTE,
)
