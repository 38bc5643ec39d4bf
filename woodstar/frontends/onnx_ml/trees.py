"""``ai.onnx.ml`` TreeEnsembleRegressor / TreeEnsembleClassifier -> a ``trees`` op
that writes each tree's leaf into its own columns, then ``onnx_tree_scores``, which
adds and finalizes them as ONNX Runtime does (see ``woodstar/ir/families/onnx_ops.py``).

Node modes map onto the IR's ``x <= t`` / ``x < t`` tests (the IR's left child is the
side the test sends a number to; ``default_left`` the side a NaN takes):

* BRANCH_LEQ / BRANCH_LT: left = true branch, ``<=`` / ``<``; NaN takes the true
  branch only where ``nodes_missing_value_tracks_true`` is set;
* BRANCH_GT / BRANCH_GTE: ``x > t`` is ``not x <= t``, ``x >= t`` is ``not x < t``:
  left = false branch; a NaN takes the true branch only when it tracks true;
* BRANCH_EQ / BRANCH_NEQ: two tests, ``x < t`` then ``x <= t`` (equal exactly when the
  first fails and the second holds), the side both reach copied under each; a NaN is
  unequal to everything (EQ: false branch, NEQ: true branch) unless it tracks true.

ONNX Runtime compares the input in its own type (float32 thresholds for a float
input; the float32 threshold widened to float64 for a double input), so the IR reads
the input at that precision. The trees are taken in the order their ids first appear
in ``nodes_treeids``, each tree's root being its first listed node, as the kernel does.
"""

from collections import OrderedDict

import numpy as np

from ...ir.builder import EnsembleBuilder
from ...ir.families.onnx_ops import OnnxTreeScores, binary_writes_one_column
from ...ir.tree_ensemble import LE, LT
from ._attributes import attributes, refuse

__all__ = ["tree_ensemble_ops", "MODES"]

MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "LEAF")
POST_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
AGGREGATIONS = ("SUM", "AVERAGE", "MIN", "MAX")
_NOT_SUPPORTED = ("nodes_values_as_tensor", "target_weights_as_tensor", "class_weights_as_tensor",
                  "base_values_as_tensor")
# A tree with EQ/NEQ tests grows when a subtree is copied; beyond this many nodes per
# original node the model is refused rather than converted slowly.
_MAX_GROWTH = 8
_MAX_DEPTH = 1000


class _Tree:
    def __init__(self):
        self.rows = []  # node attribute rows, in list order
        self.ids = []  # their node ids
        self.by_id = {}


def _weights_prefix(is_classifier):
    return "class" if is_classifier else "target"


def _collect(node, a, is_classifier):
    for name in _NOT_SUPPORTED:
        if name in a:
            refuse(node, "attribute", name, "the float attributes (nodes_values, "
                   "target_weights/class_weights, base_values)")
    modes = a.get("nodes_modes", [])
    bad = sorted(set(modes) - set(MODES))
    if bad:
        refuse(node, "node mode", bad[0], MODES)
    n = len(modes)
    tracks = a.get("nodes_missing_value_tracks_true", np.zeros(n, np.int64))
    if len(tracks) < n:
        tracks = np.concatenate([tracks, np.zeros(n - len(tracks), np.int64)])
    trees = OrderedDict()
    for i in range(n):
        tree = trees.setdefault(int(a["nodes_treeids"][i]), _Tree())
        node_id = int(a["nodes_nodeids"][i])
        if node_id in tree.by_id:
            refuse(node, "a node id listed twice in one tree", node_id, "unique node ids")
        tree.by_id[node_id] = len(tree.rows)
        tree.ids.append(node_id)
        tree.rows.append((modes[i], int(a["nodes_featureids"][i]), np.float32(a["nodes_values"][i]),
                          int(a["nodes_truenodeids"][i]), int(a["nodes_falsenodeids"][i]),
                          bool(tracks[i] == 1)))
    prefix = _weights_prefix(is_classifier)
    weights = {}  # (tree, node) -> [(target, weight)] in attribute order
    for t, nd, k, w in zip(a.get(f"{prefix}_treeids", []), a.get(f"{prefix}_nodeids", []),
                           a.get(f"{prefix}_ids", []), a.get(f"{prefix}_weights", [])):
        weights.setdefault((int(t), int(nd)), []).append((int(k), np.float32(w)))
    return trees, weights


def _tree_targets(node, tree_id, tree, weights):
    """The targets this tree's leaves write, and each leaf's weights by target."""
    leaf_weights = {}
    for node_id, row in zip(tree.ids, tree.rows):
        if row[0] != "LEAF":
            continue  # the kernel ignores weights on a branch node
        entries = weights.get((tree_id, node_id))
        if not entries:
            refuse(node, f"leaf {node_id} of tree {tree_id} without a weight", "none",
                   "one weight per leaf and target")
        by_target = {}
        for k, w in entries:
            if k in by_target:
                refuse(node, f"leaf {node_id} of tree {tree_id} with two weights for target",
                       k, "one weight per leaf and target")
            by_target[k] = w
        leaf_weights[node_id] = by_target
    return leaf_weights


class _TreeWriter:
    """One ONNX tree as IR arrays in depth-first order (children after parents)."""

    def __init__(self, node, tree_id, tree, leaf_weights, targets, limit):
        self.node, self.tree_id, self.tree = node, tree_id, tree
        self.leaf_weights, self.targets = leaf_weights, targets
        self.limit = limit
        self.feature, self.threshold, self.comparison = [], [], []
        self.left, self.right, self.default_left, self.leaf_value = [], [], [], []

    def _new(self):
        if len(self.feature) >= self.limit:
            refuse(self.node, f"tree {self.tree_id} with equality tests copying subtrees "
                   f"beyond {self.limit} nodes", len(self.feature), "smaller trees")
        for column in (self.feature, self.threshold, self.comparison, self.left, self.right,
                       self.default_left):
            column.append(0)
        self.leaf_value.append(np.zeros(len(self.targets)))
        return len(self.feature) - 1

    def _split(self, feature, threshold, comparison, default_left):
        i = self._new()
        self.feature[i], self.threshold[i] = feature, float(threshold)
        self.comparison[i], self.default_left[i] = comparison, default_left
        return i

    def _children(self, i, left_fn, right_fn):
        self.left[i] = left_fn()
        self.right[i] = right_fn()
        return i

    def write(self, node_id, depth=0):
        if depth > _MAX_DEPTH:
            refuse(self.node, f"tree {self.tree_id} deeper than", _MAX_DEPTH, "a tree (no cycle)")
        if node_id not in self.tree.by_id:
            refuse(self.node, f"tree {self.tree_id}: a child id no node has", node_id,
                   "ids listed in nodes_nodeids")
        mode, feature, t, true_id, false_id, tracks = self.tree.rows[self.tree.by_id[node_id]]
        if mode == "LEAF":
            i = self._new()
            self.left[i] = self.right[i] = -1
            weights = self.leaf_weights[node_id]
            self.leaf_value[i] = np.array([weights.get(k, 0.0) for k in self.targets], dtype=np.float64)
            return i
        true = lambda: self.write(true_id, depth + 1)  # noqa: E731
        false = lambda: self.write(false_id, depth + 1)  # noqa: E731
        if mode in ("BRANCH_LEQ", "BRANCH_LT"):
            i = self._split(feature, t, LE if mode == "BRANCH_LEQ" else LT, tracks)
            return self._children(i, true, false)
        if mode in ("BRANCH_GT", "BRANCH_GTE"):
            i = self._split(feature, t, LE if mode == "BRANCH_GT" else LT, not tracks)
            return self._children(i, false, true)
        if mode == "BRANCH_EQ":
            # x < t: unequal (false); else x <= t: equal (true), else false. A NaN goes
            # to the false copy, or on to the second test (and the true side) if it tracks.
            i = self._split(feature, t, LT, not tracks)
            return self._children(i, false, lambda: self._children(
                self._split(feature, t, LE, True), true, false))
        # BRANCH_NEQ: x < t: unequal (true); else x <= t: equal (false), else true. A NaN
        # is unequal: the true side either way.
        i = self._split(feature, t, LT, True)
        return self._children(i, true, lambda: self._children(
            self._split(feature, t, LE, True), false, true))

    def arrays(self):
        return dict(feature=np.asarray(self.feature, np.int64),
                    threshold=np.asarray(self.threshold, np.float64),
                    comparison=np.asarray(self.comparison, np.uint8),
                    left=np.asarray(self.left, np.int64), right=np.asarray(self.right, np.int64),
                    default_left=np.asarray(self.default_left, bool),
                    leaf_value=np.stack(self.leaf_value))


def trees_with_targets(node, trees, weights, n_targets):
    """``(tree_id, tree, leaf_weights, targets)`` per tree, in the node's order:
    ``targets`` the sorted target ids its leaves write (each within ``n_targets``)."""
    per_tree = []
    for tree_id, tree in trees.items():
        leaf_weights = _tree_targets(node, tree_id, tree, weights)
        targets = sorted({k for w in leaf_weights.values() for k in w})
        if any(k < 0 or k >= n_targets for k in targets):
            refuse(node, f"tree {tree_id} writes target", targets, f"0..{n_targets - 1}")
        per_tree.append((tree_id, tree, leaf_weights, targets))
    return per_tree


def check_whole_trees(node, per_tree):
    """MIN and MAX compare each tree's weight for a target with the score so far: a tree
    whose leaves write a target on some rows only would leave that row's comparison
    to the kernel's ``has_score`` flag, which the per-tree columns do not carry."""
    for tree_id, _, leaf_weights, targets in per_tree:
        for k in targets:
            if not all(k in w for w in leaf_weights.values()):
                refuse(node, f"MIN/MAX aggregation with tree {tree_id} weighting target {k} on "
                       "some leaves only", k, "trees that weight a target on all their leaves "
                       "or on none")


def tree_ensemble_ops(node, input_dtype, n_features):
    """(trees op, onnx_tree_scores op, class labels or None) for one tree node."""
    a = attributes(node)
    is_classifier = node.op_type == "TreeEnsembleClassifier"
    post = a.get("post_transform", "NONE")
    if post not in POST_TRANSFORMS:
        refuse(node, "post_transform", post, POST_TRANSFORMS)
    aggregation = a.get("aggregate_function", "SUM")
    if aggregation not in AGGREGATIONS:
        refuse(node, "aggregate_function", aggregation, AGGREGATIONS)
    labels = None
    if is_classifier:
        ints, strings = a.get("classlabels_int64s"), a.get("classlabels_strings")
        labels = np.asarray(strings, dtype=object).astype(str) if strings else np.asarray(ints, np.int64)
        n_targets = len(labels)
        if n_targets < 2:
            refuse(node, "number of class labels", n_targets, "two or more")
    else:
        n_targets = int(a.get("n_targets", 0))
        if n_targets < 1:
            refuse(node, "n_targets", n_targets, "one or more")
    trees, weights = _collect(node, a, is_classifier)
    if not trees:
        refuse(node, "a tree ensemble without trees", 0, "one tree or more")
    if max((r[1] for tree in trees.values() for r in tree.rows if r[0] != "LEAF"),
           default=0) >= n_features:
        refuse(node, "a feature index beyond the input's columns", n_features, "indices below it")
    per_tree = trees_with_targets(node, trees, weights, n_targets)
    if aggregation in ("MIN", "MAX"):
        check_whole_trees(node, per_tree)
    width = max(len(p[3]) for p in per_tree)
    builder = EnsembleBuilder(width)
    column_target = []
    always = np.zeros(n_targets, bool)  # some tree writes it on every row
    ever = np.zeros(n_targets, bool)
    for t, (tree_id, tree, leaf_weights, targets) in enumerate(per_tree):
        writer = _TreeWriter(node, tree_id, tree, leaf_weights, targets,
                             limit=_MAX_GROWTH * len(tree.rows) + 64)
        writer.write(tree.ids[0])  # the kernel's root: the tree's first listed node
        arrays = writer.arrays()
        pad = width - len(targets)
        leaf_value = np.pad(arrays.pop("leaf_value"), ((0, 0), (0, pad)))
        builder.add_tree(leaf_value=leaf_value, output_start=t * width, **arrays)
        column_target.extend(list(targets) + [-1] * pad)
        for k in targets:
            ever[k] = True
            if all(k in w for w in leaf_weights.values()):
                always[k] = True
    if np.any(ever & ~always):
        k = int(np.argmax(ever & ~always))
        refuse(node, f"target {k} weighted on some leaves only (whether it has a score "
               "would depend on the row)", k, "targets written by every leaf of some tree, "
               "or by none")
    precision = "float32" if input_dtype == np.float32 else "float64"
    ensemble = builder.build(n_features=n_features, n_outputs=len(per_tree) * width,
                             aggregation="sum", input_precision=precision)
    base = a.get("base_values", np.zeros(0, np.float32))
    class_weights = a.get(f"{_weights_prefix(is_classifier)}_weights", np.zeros(0, np.float32))
    distinct = {int(k) for k in a.get(f"{_weights_prefix(is_classifier)}_ids", [])}
    binary_case = is_classifier and n_targets == 2 and len(distinct) == 1
    if len(base) not in (0, 1, n_targets) or (is_classifier and n_targets > 2 and len(base) not in (0, n_targets)):
        refuse(node, "number of base_values", len(base), f"0, 1 or {n_targets}")
    if is_classifier and n_targets == 2:
        if binary_writes_one_column(len(base), always, binary_case, post):
            refuse(node, "a two-class ensemble for which ONNX Runtime writes one probability "
                   "column of two (the other is left unset)", post, "other post_transforms")
        if not binary_case and labels.dtype.kind == "i" and list(labels) != [0, 1]:
            refuse(node, "two class labels other than [0, 1] whose weights name both classes "
                   "(ONNX Runtime then returns the literal labels 0 and 1)", list(labels), "[0, 1]")
    acc = "float32" if input_dtype == np.float32 else "float64"
    scores = OnnxTreeScores(
        n_trees=len(per_tree), width=width, n_targets=n_targets,
        column_target=np.asarray(column_target, np.int64),
        base_values=np.asarray(base, np.float32).astype(acc), has_score=always,
        role="classifier" if is_classifier else "regressor", accumulate=acc,
        aggregation="sum" if is_classifier else aggregation.lower(),
        post_transform=post, binary_case=bool(binary_case),
        weights_all_positive=bool(np.all(class_weights >= 0)))
    return ensemble, scores, labels
