"""The ``onnx`` backend's export of a bare tree ensemble as ONNX-ML's ``TreeEnsemble``
operator (``ai.onnx.ml`` opset 5), instead of the Torch tensor program.

Taken when the model's whole graph is one tree ensemble reading the input and the
ONNX-ML kernel is exact for it (``OnnxMlTrees.supports``: no categorical splits,
missing-value ranges or linear leaves), on CPU, with no ``onnx_target_opset`` (the
operator needs opset-5 ONNX-ML, ONNX Runtime 1.20 or later) and no
``tree_implementation`` named by the user (naming one asks for the tensor program).

The graph, all in float64 after the input:

    input (N, F) [-> Cast float32, for a float64 program of a model that compares
    float32] -> Cast -> TreeEnsemble (the program dtype's thresholds; base score folded
    into the first tree) -> float64 sums of the trees (``_trees_graph``) -> the lowered
    module's own finishing steps (mean, base score, post-transform), exported by
    torch's exporter -> raw, transformed.

Why it is exact: the thresholds are the route's ``x <= t`` thresholds of the
program's dtype (``node_thresholds``); the kernel adds each row's float64 leaves in
order from 0 when it runs on one thread, and leaf vectors are added in tree order. With
more intra-op threads ONNX Runtime may split a row's trees between threads and add the
parts (a different order of float64 additions, so the last bits of near ties can
move). The runner therefore gives its session one intra-op thread and runs row blocks
concurrently instead (``RowBlocks``); a user running the file in ONNX Runtime should
set ``intra_op_num_threads = 1`` for the source library's bits.

Every built model is run once on a check batch: its raw output must equal the eager
module's bit for bit, else the tensor program is exported instead.
"""

import numpy as np
import torch
from torch import nn

from ..lowering.post_transforms import PostTransform

__all__ = ["EXPORTER_NAME", "tree_ensemble_of", "is_tree_ensemble_model", "tree_ensemble_export"]

EXPORTER_NAME = "ai.onnx.ml"
SUMS_NAME = "woodstar_tree_sums"


def tree_ensemble_of(module, options, device):
    """The ensemble the ONNX-ML export can take for this lowered module, or None."""
    from ..lowering.core_ops import TreesNode
    from ..runtimes import onnx_ml

    if torch.device(device).type != "cpu" or options.onnx_target_opset is not None \
            or options.tree_implementation is not None or not onnx_ml.available():
        return None
    if len(module.parts) != 1 or module.reads != ((0,),) or not isinstance(module.parts[0], TreesNode):
        return None
    if (module.raw_index, module.transformed_index) != (1, 2):
        return None
    ens = module.parts[0].ensemble
    return ens if onnx_ml.OnnxMlTrees.supports(ens) else None


def is_tree_ensemble_model(model) -> bool:
    """Whether an ONNX model (a loaded artifact) is this export: its sums come from
    ``TreeEnsemble`` and its session must keep one intra-op thread."""
    return any(n.op_type == "TreeEnsemble" and n.domain == "ai.onnx.ml" for n in model.graph.node)


class _Finish(nn.Module):
    """The lowered trees' steps after the sums of the trees, as the strategies take them
    (``sum_outputs``: divide for a mean, add the base score) and the post-transform."""

    def __init__(self, ens):
        super().__init__()
        from ..ir.passes import fold_base_score

        folded = fold_base_score(ens)
        self.mean = ens.aggregation == "mean"
        self.n_trees = int(ens.n_trees)
        self.register_buffer("base_score", torch.from_numpy(np.asarray(folded.base_score, np.float64)))
        self.post_transform = PostTransform(ens.post_transform, ens.post_transform_scale)
        # What export_onnx reads of a lowered module.
        self.n_features = int(ens.n_outputs)
        self.input_dtype = torch.float64
        self.dtype_name = "float64"

    def forward(self, sums):
        raw = sums / self.n_trees if self.mean else sums
        raw = raw + self.base_score
        return raw, self.post_transform(raw)


def _trees_graph(ens, dtype, input_name, opset):
    """A model ``input_name`` (N, F) of ``dtype`` -> ``SUMS_NAME`` (N, n_outputs)
    float64: the trees' sums in tree order, base score folded in. Two forms, as the
    torch backend's ONNX-ML route (runtimes/onnx_ml.py):

    * leaf sums: the kernel adds float64 leaves itself (input widened to float64);
    * leaf indices (vector leaves in one output block: forest classifiers): the kernel
      returns each tree's leaf id, each tree walked once; ``Gather`` reads the leaf
      vectors as (trees, N, width) and ``ReduceSum`` over the first axis adds them
      tree after tree (checked bit for bit at export)."""
    from onnx import TensorProto, helper, numpy_helper

    from ..ir.passes import fold_base_score
    from ..runtimes import onnx_ml

    folded = fold_base_score(ens)
    leaf_indices = onnx_ml._sums_leaf_indices(folded, dtype)
    if leaf_indices:
        model = onnx_ml.leaf_index_model(folded, dtype)
        kernel_type = TensorProto.DOUBLE if dtype == "float64" else TensorProto.FLOAT
    else:
        model = onnx_ml.tree_ensemble_model(folded, dtype)
        kernel_type = TensorProto.DOUBLE
    elem = TensorProto.DOUBLE if dtype == "float64" else TensorProto.FLOAT
    nodes, initializers, previous = [], [], input_name
    if dtype == "float64" and ens.input_precision == "float32":
        nodes.append(helper.make_node("Cast", [previous], ["woodstar_rows_float32"],
                                      to=TensorProto.FLOAT, name="woodstar_round_to_float32"))
        previous = "woodstar_rows_float32"
    nodes.append(helper.make_node("Cast", [previous], ["X"], to=kernel_type,
                                  name="woodstar_rows_for_kernel"))
    trees = model.graph.node[0]
    trees.name = "woodstar_trees"
    nodes.append(trees)
    if leaf_indices:
        table = np.ascontiguousarray(folded.leaf_value, dtype=np.float64)
        initializers.append(numpy_helper.from_array(table, "woodstar_leaf_values"))
        nodes += [
            helper.make_node("Transpose", ["Y"], ["woodstar_leaf_ids_by_tree"], perm=[1, 0],
                             name="woodstar_trees_first"),
            helper.make_node("Cast", ["woodstar_leaf_ids_by_tree"], ["woodstar_leaf_ids"],
                             to=TensorProto.INT64, name="woodstar_leaf_ids_as_int"),
            helper.make_node("Gather", ["woodstar_leaf_values", "woodstar_leaf_ids"],
                             ["woodstar_leaf_vectors"], axis=0, name="woodstar_leaf_vectors"),
            helper.make_node("ReduceSum", ["woodstar_leaf_vectors", "woodstar_tree_axis"],
                             [SUMS_NAME], keepdims=0, name="woodstar_add_trees_in_order"),
        ]
        initializers.append(numpy_helper.from_array(np.array([0], np.int64), "woodstar_tree_axis"))
    else:
        trees.output[0] = SUMS_NAME
    graph = helper.make_graph(
        nodes, "woodstar_trees",
        [helper.make_tensor_value_info(input_name, elem, [None, int(ens.n_features)])],
        [helper.make_tensor_value_info(SUMS_NAME, TensorProto.DOUBLE, [None, int(ens.n_outputs)])],
        initializer=initializers)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset),
                                                   helper.make_opsetid("ai.onnx.ml", 5)])


def tree_ensemble_export(module, ens, options, export_tensor_program):
    """The ONNX model (``onnx.ModelProto``) of a lowered bare tree ensemble through the
    ``TreeEnsemble`` operator. ``export_tensor_program(module, options)`` is the
    backend's own exporter, used for the finishing steps."""
    import onnx
    from onnx import compose

    dtype = module.dtype_name
    finish, _ = export_tensor_program(_Finish(ens).to("cpu"), _finish_options(options))
    opsets = {o.domain: o.version for o in finish.opset_import}
    input_name = (options.input_names or ("input_0",))[0]
    trees = _trees_graph(ens, dtype, input_name, opsets.get("", 18))
    trees.ir_version = finish.ir_version
    finish = compose.add_prefix(finish, "woodstar_finish_")
    finish_input = finish.graph.input[0].name
    model = compose.merge_models(trees, finish, io_map=[(SUMS_NAME, finish_input)],
                                 name=options.onnx_model_name or "woodstar")
    outputs = list(options.output_names or ("raw", "transformed"))
    _rename_outputs(model, outputs)
    onnx.checker.check_model(model)
    return model


def _finish_options(options):
    """The options with the default input and output names (renamed after merging)."""
    import dataclasses

    return dataclasses.replace(options, input_names=None, output_names=None)


def _rename_outputs(model, names):
    """Rename the graph's two outputs (and every reference to them) to ``names``."""
    old = [o.name for o in model.graph.output]
    mapping = dict(zip(old, names))
    for node in model.graph.node:
        for i, name in enumerate(node.output):
            if name in mapping:
                node.output[i] = mapping[name]
        for i, name in enumerate(node.input):
            if name in mapping:
                node.input[i] = mapping[name]
    for output in model.graph.output:
        output.name = mapping[output.name]
