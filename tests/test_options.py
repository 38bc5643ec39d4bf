"""extra_config is validated once, never mutated, and unknown keys are errors."""

import pytest

from woodstar import constants
from woodstar._options import parse_options
from woodstar.exceptions import ConstantError


def test_hummingbird_key_strings():
    assert constants.N_THREADS == "n_threads"
    assert constants.BATCH_SIZE == "batch_size"
    assert constants.TREE_IMPLEMENTATION == "tree_implementation"
    assert constants.TREE_OP_PRECISION_DTYPE == "tree_op_precision_dtype"
    assert constants.ONNX_TARGET_OPSET == "onnx_target_opset"
    assert constants.ONNX_OUTPUT_MODEL_NAME == "onnx_model_name"
    assert constants.TVM_MAX_FUSE_DEPTH == "tvm_max_fuse_depth"
    assert constants.TVM_PAD_INPUT == "tvm_pad_prediction_inputs"
    assert constants.INPUT_NAMES == "input_names"
    assert constants.OUTPUT_NAMES == "output_names"
    assert constants.CONTAINER == "container"


def test_parse_reads_without_mutating():
    config = {"n_threads": 2, "batch_size": 10, "tree_implementation": "gemm",
              "tree_op_precision_dtype": "float64"}
    before = dict(config)
    options = parse_options(config)
    assert config == before
    assert (options.n_threads, options.batch_size, options.tree_implementation, options.precision) == (
        2, 10, "gemm", "float64")
    with pytest.raises(Exception):
        options.n_threads = 3  # frozen


def test_unknown_key_names_the_known_ones():
    with pytest.raises(ConstantError, match=r"Unknown extra_config key\(s\) 'n_thread'; known keys: n_threads"):
        parse_options({"n_thread": 2})


@pytest.mark.parametrize("config, message", [
    ({"n_threads": 0}, r"extra_config\['n_threads'\] must be a positive integer \(got 0\)"),
    ({"batch_size": "10"}, r"extra_config\['batch_size'\] must be a positive integer"),
    ({"tree_implementation": "fast"}, r"'tree_implementation'\] is not supported \(got 'fast'\); "
                                      r"supported: gemm, perf_tree_trav, tree_trav"),
    ({"tree_op_precision_dtype": "float16"}, r"supported: float32, float64"),
    ({"input_names": "x"}, r"must be a list of strings"),
])
def test_bad_values_are_named(config, message):
    with pytest.raises(ConstantError, match=message):
        parse_options(config)


def test_torch_dtype_is_accepted_for_precision():
    torch = pytest.importorskip("torch")
    assert parse_options({"tree_op_precision_dtype": torch.float64}).precision == "float64"
    assert parse_options({"tree_op_precision_dtype": "torch.float32"}).precision == "float32"
