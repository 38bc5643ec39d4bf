"""The IR as one ONNX-ML ``TreeEnsemble`` node (``ai.onnx.ml`` opset 5), run by ONNX
Runtime's C++ tree kernel: the torch backend's CPU route where onnxruntime is installed.

Exact for the same reasons as the other routes:

* the kernel compares in the input's type; its thresholds are ``le_thresholds`` of the
  route's dtype, so ``x <= t`` takes the branch the float32 (or float64) program takes,
  and NaN follows ``nodes_missing_value_tracks_true`` (the true branch is the left child);
* trees are added in order from 0 on one thread (several threads only ever split the
  rows, see ``OnnxMlTrees``); the base score is folded into each output's first tree
  (``fold_base_score``), a mean is divided and a post-transform applied here, in NumPy,
  by the IR's own definitions.

Two ways to use the kernel, by leaf width:

* **leaf sums** (one value per leaf: boosting, regression forests): the kernel adds the
  float64 leaves itself; its output is the raw score (``tree_ensemble_model``);
* **leaf indices** (vector leaves in one block: forest classifiers). Opset 5 gives each
  leaf one target, so summing there would walk each tree once per class. Instead every
  tree is its own target and its leaves' weights are their node ids, so the kernel walks
  each tree once and returns the leaf each row reached (``leaf_index_model``; ids are
  integers, exact in float32 below 2**24); NumPy then gathers the leaf vectors and adds
  them tree after tree. Vector leaves spread over several output blocks keep the
  per-column copies.

Not taken (``supports``): categorical splits, missing-value ranges and linear leaves.
onnx and onnxruntime are imported only here, when the route is built.
"""

import importlib.util

import numpy as np

from ..ir.tree_ensemble import TreeEnsemble
from ._cpu_route import CpuRoute
from ._row_blocks import RowBlocks
from ..lowering.trees._common import node_thresholds

__all__ = ["OnnxMlTrees", "tree_ensemble_model", "leaf_index_model", "available",
           "walks_each_tree_once"]

BRANCH_LEQ = 0
AGGREGATE_SUM = 1
FLOAT32_EXACT_INTEGERS = 2 ** 24
# Rows per session run: per-row cost was flat from 4096 to 16384 rows (GBDT depth 3,
# XGBoost 500x8, LightGBM 500x256 and 10-class), so larger batches go in chunks of the
# largest measured size and the session's buffers stay bounded.
CHUNK_ROWS = 16_384
# Rows per NumPy gather in the leaf-index mode: the (trees, rows, width) block of leaf
# vectors stays about this size, in cache, before it is added up.
GATHER_BYTES = 2 ** 21


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


class _NodeLists:
    """The opset-5 attribute lists, filled one tree (copy) at a time."""

    def __init__(self):
        self.lists = {k: [] for k in ("featureids", "splits", "tracks_true", "true_ids",
                                      "true_leafs", "false_ids", "false_leafs",
                                      "leaf_targets", "leaf_weights", "roots")}

    def add_tree(self, nodes, leaf_targets, leaf_weights):
        a = self.lists
        node_base, leaf_base = len(a["featureids"]), len(a["leaf_weights"])
        a["roots"].append(node_base)
        for feature, split, tracks, t_id, t_leaf, f_id, f_leaf in nodes:
            a["featureids"].append(feature)
            a["splits"].append(split)
            a["tracks_true"].append(int(tracks))
            a["true_ids"].append(t_id + (leaf_base if t_leaf else node_base))
            a["true_leafs"].append(t_leaf)
            a["false_ids"].append(f_id + (leaf_base if f_leaf else node_base))
            a["false_leafs"].append(f_leaf)
        a["leaf_targets"] += leaf_targets
        a["leaf_weights"] += leaf_weights

    def model(self, n_targets: int, n_features: int, value_type):
        """One TreeEnsemble node, ``X`` (N, n_features) -> ``Y`` (N, n_targets), both,
        the splits and the leaf weights of ``value_type`` (np.float32 or np.float64)."""
        from onnx import TensorProto, helper, numpy_helper

        a = self.lists
        node = helper.make_node(
            "TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml",
            aggregate_function=AGGREGATE_SUM, post_transform=0, n_targets=n_targets,
            tree_roots=a["roots"], nodes_featureids=a["featureids"],
            nodes_splits=numpy_helper.from_array(np.asarray(a["splits"], value_type), "splits"),
            nodes_modes=numpy_helper.from_array(
                np.full(len(a["splits"]), BRANCH_LEQ, np.uint8), "modes"),
            nodes_missing_value_tracks_true=a["tracks_true"],
            nodes_truenodeids=a["true_ids"], nodes_trueleafs=a["true_leafs"],
            nodes_falsenodeids=a["false_ids"], nodes_falseleafs=a["false_leafs"],
            leaf_targetids=a["leaf_targets"],
            leaf_weights=numpy_helper.from_array(np.asarray(a["leaf_weights"], value_type),
                                                 "leaf_weights"))
        elem = TensorProto.DOUBLE if value_type == np.float64 else TensorProto.FLOAT
        graph = helper.make_graph(
            [node], "woodstar_trees",
            [helper.make_tensor_value_info("X", elem, [None, n_features])],
            [helper.make_tensor_value_info("Y", elem, [None, n_targets])])
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                        helper.make_opsetid("ai.onnx.ml", 5)])
        model.ir_version = 10
        return model


def tree_ensemble_model(ens: TreeEnsemble, dtype: str):
    """An ``onnx.ModelProto``: ``X`` (N, n_features) float64 -> ``Y`` (N, n_outputs)
    float64, the trees' sum before any mean, base score or transform. A tree with
    vector leaves is written once per output column."""
    thresholds = node_thresholds(ens, dtype).astype(np.float64)
    lists = _NodeLists()
    for t in range(ens.n_trees):
        nodes, leaf_nodes = _tree_arrays(ens, t, thresholds)
        for k in range(ens.leaf_width):
            column = int(ens.tree_output_start[t]) + k
            lists.add_tree(nodes, [column] * len(leaf_nodes), list(ens.leaf_value[leaf_nodes, k]))
    return lists.model(int(ens.n_outputs), int(ens.n_features), np.float64)


def leaf_index_model(ens: TreeEnsemble, dtype: str):
    """An ``onnx.ModelProto``: ``X`` (N, n_features) of ``dtype`` -> ``Y`` (N, n_trees),
    the node id (into the IR's arrays) of the leaf each row reaches in each tree."""
    thresholds = node_thresholds(ens, dtype)
    lists = _NodeLists()
    for t in range(ens.n_trees):
        nodes, leaf_nodes = _tree_arrays(ens, t, thresholds)
        lists.add_tree(nodes, [t] * len(leaf_nodes), [float(n) for n in leaf_nodes])
    return lists.model(int(ens.n_trees), int(ens.n_features), np.dtype(dtype).type)


def _sums_leaf_indices(ens: TreeEnsemble, dtype: str) -> bool:
    """Whether the route reads leaf indices (vector leaves in one block) or leaf sums."""
    exact_ids = dtype == "float64" or ens.n_nodes < FLOAT32_EXACT_INTEGERS
    return ens.leaf_width > 1 and ens.single_output_block and exact_ids


def walks_each_tree_once(ens: TreeEnsemble) -> bool:
    """Whether the kernel walks each tree once per row (not once per output column),
    which is where the benchmark found this route faster than the others."""
    return ens.leaf_width == 1 or ens.single_output_block


class OnnxMlTrees(CpuRoute):
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
        ens = self._prepare(ens, dtype)
        self.leaf_indices = _sums_leaf_indices(ens, dtype)
        if self.leaf_indices:
            model = leaf_index_model(ens, dtype)
            self.input_dtype = np.dtype(dtype)
            self.leaf_table = np.ascontiguousarray(ens.leaf_value, dtype=np.float64)
            self.gather_rows = max(1, GATHER_BYTES // (8 * ens.n_trees * ens.leaf_width))
        else:
            model = tree_ensemble_model(ens, dtype)
            self.input_dtype = np.dtype(np.float64)
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1
        options.inter_op_num_threads = 1
        self.session = ort.InferenceSession(model.SerializeToString(), options,
                                            providers=["CPUExecutionProvider"])
        self.blocks = RowBlocks(n_threads, self.parallel_min_rows)

    @property
    def n_threads(self) -> int:
        return self.blocks.n_threads

    def _run(self, X: np.ndarray) -> np.ndarray:
        out = self.session.run(None, {"X": X})[0]
        return self._add_leaves(out) if self.leaf_indices else out

    def _add_leaves(self, leaf_ids: np.ndarray) -> np.ndarray:
        """(rows, trees) leaf node ids -> (rows, width) sums of their vectors, in tree
        order: ``np.add.reduce`` over the first, slowest axis adds one (rows, width)
        slice after another (NumPy pairs terms only along the fast axis)."""
        ids = leaf_ids.T.astype(np.intp)
        if ids.shape[1] <= self.gather_rows:
            return np.add.reduce(self.leaf_table.take(ids, axis=0), axis=0)
        out = np.empty((ids.shape[1], self.leaf_table.shape[1]), np.float64)
        for start in range(0, ids.shape[1], self.gather_rows):
            block = ids[:, start:start + self.gather_rows]
            np.add.reduce(self.leaf_table.take(block, axis=0), axis=0,
                          out=out[start:start + self.gather_rows])
        return out

    def _tree_sums(self, X: np.ndarray) -> np.ndarray:
        X = np.ascontiguousarray(X, dtype=self.input_dtype)
        if len(X) <= CHUNK_ROWS:
            return self.blocks.run(self._run, X)
        return np.concatenate([self.blocks.run(self._run, X[i:i + CHUNK_ROWS])
                               for i in range(0, len(X), CHUNK_ROWS)])
