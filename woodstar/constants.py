"""Keys accepted in ``extra_config``; the strings are Hummingbird's, so existing
configuration dictionaries keep their meaning.

Every name of Hummingbird's ``hummingbird.ml.constants`` is here (and the older
``N_FEATURES``, ``ONNX_INITIAL_TYPES``, ``ONNX_INPUT_NAMES``, ``ONNX_OUTPUT_NAMES``),
plus ``POST_TRANSFORM`` and its values from Hummingbird's operator converters. Keys
that do nothing here (``IGNORED_KEYS``) are accepted with a one-line warning saying
why; any other unknown key is a ``ConstantError``.
"""

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
    "ONNX_RUNTIME_THREADS",
    "REMAINDER_SIZE",
    "MAX_STRING_LENGTH",
    "N_FEATURES",
    "ONNX_INITIAL_TYPES",
    "ONNX_INPUT_NAMES",
    "ONNX_OUTPUT_NAMES",
    "POST_TRANSFORM",
    "CONVERSION_CACHE",
    "SIGMOID",
    "SOFTMAX",
    "TWEEDIE",
    "POST_TRANSFORMS",
    "KNOWN_KEYS",
    "IGNORED_KEYS",
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

ONNX_INPUT_NAMES = "onnx_input_names"
"""Hummingbird's earlier name of ``input_names``; read as it."""

ONNX_OUTPUT_NAMES = "onnx_output_names"
"""Hummingbird's earlier name of ``output_names``; read as it."""

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
route that cannot take the model is refused at convert time, and so is any route but
"program" on another backend or off the CPU."""

ONNX_RUNTIME_THREADS = "onnx_runtime_threads"
"""Woodstar's own key, for ONNX-ML graphs: the intra-op thread count of the ONNX Runtime
session whose answers the converted model gives (default 1). ONNX Runtime's tree
ensembles split a call's trees over its threads (from 51 rows; one row of a classifier
or multi-target regressor from 81 trees) and add the parts, which changes the last bit
of a float32 sum: a session with its default thread count (the machine's cores) gives
the answers of this key set to that count."""

REMAINDER_SIZE = "remainder_size"
"""Hummingbird's size of the short last batch; ``convert_batch`` takes it as an
argument. In ``convert``'s ``extra_config`` it has no effect (ignored, with a warning):
every woodstar backend takes any batch size."""

MAX_STRING_LENGTH = "max_string_length"
"""Hummingbird's longest string feature. No effect here (ignored, with a warning):
string columns are encoded to vocabulary indices at the input edge, of any length."""

N_FEATURES = "n_features"
"""Hummingbird's (earlier) input width. No effect here: the width is the model's."""

ONNX_INITIAL_TYPES = "onnx_initial_types"
"""Hummingbird's (earlier) ONNX input types. No effect here: input types follow the
model and the input's dtype."""

POST_TRANSFORM = "post_transform"
"""Hummingbird's post-transform of a classifier's scores. ``None`` makes
``predict_proba`` return the raw scores (the margin: one column for a binary
classifier, one per class otherwise; ``predict`` keeps the source's labels and
``predict_log_proba`` is dropped). ``SIGMOID``, ``SOFTMAX``, ``TWEEDIE``: accepted when
they name the model's own post-transform (no change), refused otherwise."""

CONVERSION_CACHE = "conversion_cache"
"""Woodstar's own key: a folder (or True: ``$WOODSTAR_CACHE_DIR/conversions``, by default
``~/.cache/woodstar/conversions``) where ``convert`` keeps what the ``onnx``,
``torch.jit`` and ``tvm`` backends compiled, saved in woodstar's format and keyed by the
model's IR, the backend, the device, the other options, the libraries' versions,
woodstar's own code and the CPU. Converting the same model the same way again, in any
process, loads it from there instead of compiling it (woodstar/_conversion_cache.py).
Off by default; ``torch`` and ``torch.compile`` keep nothing there (they build from the
IR on load; torch.compile has Inductor's own cache)."""

SIGMOID = "LOGISTIC"
SOFTMAX = "SOFTMAX"
TWEEDIE = "TWEEDIE"
POST_TRANSFORMS = (None, SIGMOID, SOFTMAX, TWEEDIE)
"""The values of ``post_transform``, Hummingbird's."""

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
    ONNX_RUNTIME_THREADS,
    ONNX_INPUT_NAMES,
    ONNX_OUTPUT_NAMES,
    POST_TRANSFORM,
    CONVERSION_CACHE,
)

IGNORED_KEYS = {
    REMAINDER_SIZE: "every woodstar backend takes any batch size (convert_batch takes "
                    "remainder_size as an argument)",
    MAX_STRING_LENGTH: "string columns are encoded to vocabulary indices at the input "
                       "edge, whatever their length",
    N_FEATURES: "the input width is the model's own",
    ONNX_INITIAL_TYPES: "input types follow the model and the input's dtype",
}
"""Hummingbird's keys that have no effect here -> why (the warning's text)."""
