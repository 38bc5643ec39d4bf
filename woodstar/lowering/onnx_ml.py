"""The IR as one ONNX-ML ``TreeEnsemble`` node (``ai.onnx.ml`` opset 5), run by ONNX
Runtime's C++ tree kernel: the route for small batches where onnxruntime is installed.

Exact for the same reasons as the other routes:

* the kernel compares in the input's type; it is given float64 input and float64
  thresholds that are ``le_thresholds`` of the route's dtype, so ``x <= t`` takes the
  branch the float32 (or float64) program takes, and NaN follows
  ``nodes_missing_value_tracks_true`` (the true branch is the left child);
* leaves are float64 and the kernel adds trees in order per target on one thread,
  starting from 0 (several threads only ever split the rows, see ``OnnxMlTrees``); the base score is folded into each output's first tree
  (``fold_base_score``), a mean is divided and a post-transform applied here, in NumPy,
  by the IR's own definitions.

The opset-5 operator gives each leaf one target, so a tree with vector leaves is
written once per output column (each column still sees its trees in order). Not taken
(``supports``): categorical splits, missing-value ranges and linear leaves.
onnx and onnxruntime are imported only here, when the route is built.
"""

import importlib.util

import numpy as np

from ..ir.passes import fold_base_score
from ..ir.transforms import apply_post_transform
from ..ir.tree_ensemble import TreeEnsemble
from .trees._common import node_thresholds

__all__ = ["OnnxMlTrees", "tree_ensemble_model", "available"]

BRANCH_LEQ = 0
AGGREGATE_SUM = 1


def available() -> bool:
    """Whether onnx and onnxruntime are installed (found, not imported: a convert to
    the torch backend should not pay for importing them before the first small call)."""
    return all(importlib.util.find_spec(name) is not None for name in ("onnx", "onnxruntime"))


def _tree_arrays(ens: TreeEnsemble, t: int, thresholds: np.ndarray):
    """One tree as opset-5 node and leaf lists (local ids), root id first."""
    start, stop = int(ens.tree_offsets[t]), int(ens.tree_offsets[t + 1])
    left, right = ens.left[start:stop], ens.right[start:stop]
    internal = np.flatnonzero(left >= 0)
    leaves = np.flatnonzero(left < 0)
    node_id = {int(n): i for i, n in enumerate(internal)}
    leaf_id = {int(n): i for i, n in enumerate(leaves)}

    def target(child):
        child = int(child)
        return (leaf_id[child], 1) if left[child] < 0 else (node_id[child], 0)

    nodes = []
    for n in internal:
        true_id, true_leaf = target(left[n])
        false_id, false_leaf = target(right[n])
        nodes.append((int(ens.feature[start + n]), float(thresholds[start + n]),
                      bool(ens.default_left[start + n]), true_id, true_leaf, false_id, false_leaf))
    if not nodes:  # a single leaf: a split whose both sides are that leaf
        nodes.append((0, 0.0, False, 0, 1, 0, 1))
    return nodes, start + leaves


def tree_ensemble_model(ens: TreeEnsemble, dtype: str):
    """An ``onnx.ModelProto``: ``X`` (N, n_features) float64 -> ``raw`` (N, n_outputs)
    float64, the trees' sum before any mean, base score or transform."""
    from onnx import TensorProto, helper, numpy_helper

    thresholds = node_thresholds(ens, dtype).astype(np.float64)
    arrays = {k: [] for k in ("featureids", "splits", "tracks_true", "true_ids", "true_leafs",
                              "false_ids", "false_leafs", "leaf_targets", "leaf_weights", "roots")}
    for t in range(ens.n_trees):
        nodes, leaf_nodes = _tree_arrays(ens, t, thresholds)
        for k in range(ens.leaf_width):  # one copy per output column of the tree
            node_base, leaf_base = len(arrays["featureids"]), len(arrays["leaf_weights"])
            arrays["roots"].append(node_base)
            for feature, split, tracks, t_id, t_leaf, f_id, f_leaf in nodes:
                arrays["featureids"].append(feature)
                arrays["splits"].append(split)
                arrays["tracks_true"].append(int(tracks))
                arrays["true_ids"].append(t_id + (leaf_base if t_leaf else node_base))
                arrays["true_leafs"].append(t_leaf)
                arrays["false_ids"].append(f_id + (leaf_base if f_leaf else node_base))
                arrays["false_leafs"].append(f_leaf)
            arrays["leaf_targets"] += [int(ens.tree_output_start[t]) + k] * len(leaf_nodes)
            arrays["leaf_weights"] += list(ens.leaf_value[leaf_nodes, k])
    node = helper.make_node(
        "TreeEnsemble", ["X"], ["raw"], domain="ai.onnx.ml",
        aggregate_function=AGGREGATE_SUM, post_transform=0, n_targets=int(ens.n_outputs),
        tree_roots=arrays["roots"],
        nodes_featureids=arrays["featureids"],
        nodes_splits=numpy_helper.from_array(np.asarray(arrays["splits"], np.float64), "splits"),
        nodes_modes=numpy_helper.from_array(
            np.full(len(arrays["splits"]), BRANCH_LEQ, np.uint8), "modes"),
        nodes_missing_value_tracks_true=arrays["tracks_true"],
        nodes_truenodeids=arrays["true_ids"], nodes_trueleafs=arrays["true_leafs"],
        nodes_falsenodeids=arrays["false_ids"], nodes_falseleafs=arrays["false_leafs"],
        leaf_targetids=arrays["leaf_targets"],
        leaf_weights=numpy_helper.from_array(np.asarray(arrays["leaf_weights"], np.float64),
                                             "leaf_weights"))
    graph = helper.make_graph(
        [node], "woodstar_trees",
        [helper.make_tensor_value_info("X", TensorProto.DOUBLE, [None, int(ens.n_features)])],
        [helper.make_tensor_value_info("raw", TensorProto.DOUBLE, [None, int(ens.n_outputs)])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                    helper.make_opsetid("ai.onnx.ml", 5)])
    model.ir_version = 10
    return model


class OnnxMlTrees:
    """Callable ``X (n, n_features) of dtype -> (raw, transformed)``, float64.

    The session has one intra-op thread: more would split the trees of a row and add
    the parts out of order. With ``n_threads`` > 1, a batch of at least
    ``parallel_min_rows`` rows is cut into that many row blocks run concurrently on the
    same session (ONNX Runtime releases the GIL), so every row still adds its trees in
    order."""

    # Measured at 2 threads (1.2-2x faster from 1024 rows on GBDT depth 3, XGBoost
    # 500x8, LightGBM 500x256 and 10-class; at 256 rows the depth-3 GBDT lost 0.51 ->
    # 0.62 ms to the thread hand-off): docs/benchmarks.md, "Small batches".
    parallel_min_rows = 1024

    @staticmethod
    def supports(ens: TreeEnsemble) -> bool:
        return not (ens.has_categorical or ens.has_linear_leaves or ens.has_missing_range)

    def __init__(self, ens: TreeEnsemble, dtype: str, n_threads: int = 1):
        import onnxruntime as ort

        if not self.supports(ens):
            raise ValueError("the ONNX-ML route does not take categorical splits, missing "
                             "ranges or linear leaves")
        ens = fold_base_score(ens)
        self.round_to_float32 = dtype == "float64" and ens.input_precision == "float32"
        self.mean = ens.aggregation == "mean"
        self.n_trees = ens.n_trees
        self.base_score = ens.base_score.copy()
        self.add_base = bool(np.any(self.base_score))
        self.post_transform = ens.post_transform
        self.post_transform_scale = ens.post_transform_scale
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(
            tree_ensemble_model(ens, dtype).SerializeToString(), options,
            providers=["CPUExecutionProvider"])
        self.n_threads = max(1, int(n_threads))
        self._pool = None

    def _run(self, X: np.ndarray) -> np.ndarray:
        return self.session.run(None, {"X": X})[0]

    def raw(self, X: np.ndarray) -> np.ndarray:
        if self.round_to_float32:
            X = X.astype(np.float32)
        X = np.ascontiguousarray(X, dtype=np.float64)
        if self.n_threads > 1 and len(X) >= self.parallel_min_rows:
            if self._pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._pool = ThreadPoolExecutor(self.n_threads, thread_name_prefix="woodstar-ort")
            blocks = np.array_split(X, self.n_threads)
            raw = np.concatenate(list(self._pool.map(self._run, blocks)))
        else:
            raw = self._run(X)
        if self.mean:
            raw = raw / self.n_trees
        return raw + self.base_score if self.add_base else raw

    def __call__(self, X: np.ndarray):
        raw = self.raw(X)
        return raw, apply_post_transform(self.post_transform, raw, self.post_transform_scale)
