"""``ai.onnx.ml`` opset-5 ``TreeEnsemble`` -> the same ops as the older tree operators.

ONNX Runtime reads this operator by rewriting it into the opset-3 node lists (one tree
per ``tree_roots`` entry, in that order; every leaf one weight for one target) and
running the opset-3 kernel, so it is translated here into the node rows ``trees.py``
writes, with three differences:

* thresholds, leaf weights and members are tensors of the input's type: a double
  input is compared with double thresholds (no float32 rounding), and its scores are
  double sums returned as double;
* ``BRANCH_MEMBER`` becomes a categorical split of the ``trees`` op (a NaN following
  ``nodes_missing_value_tracks_true``). The kernel has two readings: a small set (fewer
  than 31 members, all in 0..30) holds ``x`` when it equals a member (the IR's "exact"
  rule); any other set holds ``x`` when ``x`` truncated to an integer is a member
  ("truncate": -0.5 is in a set holding 0). The rule is one per ensemble, so a graph
  mixing both kinds of set is refused. ONNX Runtime refuses members that are not
  whole numbers; woodstar also refuses negative ones and ones beyond ``_MAX_MEMBER``
  (the bitset would be that long);
* there are no base values, so a target no leaf writes is simply 0;
* ``post_transform`` numbers are read as ONNX Runtime reads them: 1 is LOGISTIC and
  2 SOFTMAX, the reverse of the operator's documentation.

A float input is summed and post-transformed by ``onnx_tree_scores`` (float32, as the
kernel does). A double input is summed by the ``trees`` op itself (float64, tree after
tree from 0, "mean" dividing by the number of trees), which is the kernel's double
arithmetic; its post-transforms would run in double and are not repeated, so only
``NONE`` is read there. ``MIN``/``MAX`` aggregation is read for a float input (see
``extreme_tree_scores``); ``PROBIT`` is refused.
"""

import dataclasses

import numpy as np

from ...ir.builder import EnsembleBuilder, bitset_words
from ...ir.families.onnx_ops import OnnxTreeScores
from ...ir.tree_ensemble import LE
from ._attributes import attributes, refuse
from .trees import (_MAX_DEPTH, _MAX_GROWTH, _Tree, _TreeWriter, check_whole_trees,
                    trees_with_targets)

__all__ = ["tree_ensemble5_ops", "handle_tree_ensemble5", "MODES5"]

MODES5 = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ",
          "BRANCH_MEMBER")
AGGREGATES5 = ("AVERAGE", "SUM", "MIN", "MAX")
# post_transform by number as ONNX Runtime reads it: its own enum, where 1 is LOGISTIC
# and 2 SOFTMAX (the operator's documentation lists them the other way round)
POST_TRANSFORMS5 = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
_MAX_MEMBER = 65535


def _member_sets(node, modes, values):
    """One tuple of members per BRANCH_MEMBER node, in node order (NaN-separated)."""
    groups, current = [], []
    for v in values:
        if np.isnan(v):
            groups.append(current)
            current = []
        else:
            current.append(v)
    if current:
        groups.append(current)
    n_member = sum(m == "BRANCH_MEMBER" for m in modes)
    if len(groups) < n_member:
        refuse(node, "membership_values holding sets for", len(groups),
               f"{n_member} sets (one per BRANCH_MEMBER node, separated by NaN)")
    sets = iter(groups)
    out = []
    for mode in modes:
        if mode != "BRANCH_MEMBER":
            out.append(())
            continue
        members = next(sets)
        if not members:
            refuse(node, "an empty membership set", "[]", "one member or more")
        for v in members:
            if not (np.isfinite(v) and float(v) == int(v) and 0 <= v <= _MAX_MEMBER):
                refuse(node, "a BRANCH_MEMBER member (a categorical split holds whole "
                       "numbers from 0; ONNX Runtime refuses fractions)", float(v),
                       f"whole numbers 0..{_MAX_MEMBER}")
        out.append(tuple(int(v) for v in members))
    return out


def _categorical_rule(node, sets):
    """The IR rule the ensemble's member sets are read by (see the module docstring)."""
    small = {len(m) < 31 and max(m) <= 30 for m in sets if m}
    if len(small) > 1:
        refuse(node, "BRANCH_MEMBER sets of both kinds (fewer than 31 members in 0..30: "
               "exact equality; others: the truncated value's membership)", "both",
               "sets of one kind per graph")
    return "truncate" if small == {False} else "exact"


class _MemberWriter(_TreeWriter):
    """``_TreeWriter`` that also writes BRANCH_MEMBER rows as categorical splits."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.categories = {}

    def write(self, node_id, depth=0):
        row = self.tree.rows[self.tree.by_id[node_id]]
        if row[0] != "BRANCH_MEMBER":
            return super().write(node_id, depth)
        _, feature, members, true_id, false_id, tracks = row
        if depth > _MAX_DEPTH:
            refuse(self.node, f"tree {self.tree_id} deeper than", _MAX_DEPTH, "a tree (no cycle)")
        i = self._split(feature, 0.0, LE, tracks)
        self.categories[i] = bitset_words(members)
        return self._children(i, lambda: self.write(true_id, depth + 1),
                              lambda: self.write(false_id, depth + 1))


def _tensor(node, a, name, dtype, length):
    value = a.get(name)
    if value is None:
        refuse(node, f"a missing {name}", None, f"a tensor of {length} values")
    value = np.asarray(value).reshape(-1)
    if value.dtype != dtype:
        refuse(node, f"{name} of dtype", str(value.dtype), f"{np.dtype(dtype)} (the input's type)")
    if length is not None and len(value) != length:
        refuse(node, f"{name} of length", len(value), length)
    return value


def _trees(node, a, dtype, n_features):
    """(tree index -> _Tree, weights) in ``trees.py``'s row format: interior node ``i``
    is ``("node", i)``, leaf ``j`` is ``("leaf", j)``; each tree holds the rows its
    root reaches."""
    featureids = a.get("nodes_featureids", np.zeros(0, np.int64))
    n = len(featureids)
    raw_modes = _tensor(node, a, "nodes_modes", np.uint8, n)
    if np.any(raw_modes >= len(MODES5)):
        refuse(node, "node mode", int(raw_modes.max()), dict(enumerate(MODES5)))
    modes = [MODES5[m] for m in raw_modes]
    splits = _tensor(node, a, "nodes_splits", dtype, n)
    members = _member_sets(node, modes, _tensor(node, a, "membership_values", dtype, None)
                           if "membership_values" in a else np.zeros(0, dtype))
    lists = {}
    for name in ("nodes_truenodeids", "nodes_trueleafs", "nodes_falsenodeids", "nodes_falseleafs"):
        lists[name] = a.get(name, np.zeros(0, np.int64))
        if len(lists[name]) != n:
            refuse(node, f"{name} of length", len(lists[name]), n)
    tracks = a.get("nodes_missing_value_tracks_true", np.zeros(n, np.int64))
    if len(tracks) not in (0, n):
        refuse(node, "nodes_missing_value_tracks_true of length", len(tracks), f"0 or {n}")
    tracks = tracks if len(tracks) else np.zeros(n, np.int64)
    targets = a.get("leaf_targetids", np.zeros(0, np.int64))
    leaf_weights = _tensor(node, a, "leaf_weights", dtype, len(targets))
    if len(featureids) and (featureids.min() < 0 or featureids.max() >= n_features):
        refuse(node, "a feature index beyond the input's columns", int(featureids.max()),
               f"0..{n_features - 1}")

    def child(i, side):
        index = int(lists[f"nodes_{side}nodeids"][i])
        if lists[f"nodes_{side}leafs"][i]:
            if not 0 <= index < len(targets):
                refuse(node, f"node {i}: a {side} leaf index", index, f"0..{len(targets) - 1}")
            return ("leaf", index)
        if not 0 <= index < n:
            refuse(node, f"node {i}: a {side} node index", index, f"0..{n - 1}")
        return ("node", index)

    trees, weights = {}, {}
    roots = a.get("tree_roots", np.zeros(0, np.int64))
    for t, root in enumerate(int(r) for r in roots):
        if not 0 <= root < n:
            refuse(node, f"tree {t}: a root index", root, f"0..{n - 1}")
        tree = trees[t] = _Tree()
        is_leaf = (lists["nodes_trueleafs"][root] and lists["nodes_falseleafs"][root]
                   and lists["nodes_truenodeids"][root] == lists["nodes_falsenodeids"][root])
        pending = [("leaf", int(lists["nodes_truenodeids"][root])) if is_leaf else ("node", root)]
        if is_leaf:
            child(root, "true")  # checks the index
        while pending:
            key = pending.pop()
            if key in tree.by_id:
                continue
            tree.by_id[key] = len(tree.rows)
            tree.ids.append(key)
            kind, i = key
            if kind == "leaf":
                tree.rows.append(("LEAF", 0, 0.0, 0, 0, False))
                weights[(t, key)] = [(int(targets[i]), leaf_weights[i])]
                continue
            true, false = child(i, "true"), child(i, "false")
            threshold = members[i] if modes[i] == "BRANCH_MEMBER" else splits[i]
            tree.rows.append((modes[i], int(featureids[i]), threshold, true, false,
                              bool(tracks[i] == 1)))
            pending.extend((false, true))
        # the writer starts from the first listed row: the root
    return trees, weights, _categorical_rule(node, members)


def tree_ensemble5_ops(node, input_dtype, n_features):
    """(trees op, onnx_tree_scores op or None, n_targets) for one TreeEnsemble node;
    with None, the trees op's own sums are the answer (double input)."""
    a = attributes(node)
    dtype = np.float32 if input_dtype == np.float32 else np.float64
    aggregate = a.get("aggregate_function", 1)
    post = a.get("post_transform", 0)
    if aggregate not in range(len(AGGREGATES5)):
        refuse(node, "aggregate_function", aggregate, dict(enumerate(AGGREGATES5)))
    aggregate = AGGREGATES5[aggregate]
    if dtype == np.float64 and aggregate in ("MIN", "MAX"):
        refuse(node, "aggregate_function on a double input (the trees op sums a double "
               "input itself; MIN and MAX are mirrored for float)", aggregate,
               {0: "AVERAGE", 1: "SUM"})
    if post not in range(len(POST_TRANSFORMS5)):
        refuse(node, "post_transform", post, dict(enumerate(POST_TRANSFORMS5)))
    post = POST_TRANSFORMS5[post]
    if dtype == np.float64 and post != "NONE":
        refuse(node, "post_transform on a double input (ONNX Runtime transforms in double, "
               "which woodstar does not repeat)", post, "NONE")
    n_targets = int(a.get("n_targets", 0))
    if n_targets < 1:
        refuse(node, "n_targets", n_targets, "one or more")
    trees, weights, rule = _trees(node, a, dtype, n_features)
    if not trees:
        refuse(node, "a tree ensemble without trees (tree_roots is empty)", 0, "one tree or more")
    per_tree = trees_with_targets(node, trees, weights, n_targets)
    if dtype == np.float64:  # every tree writes the output columns themselves
        per_tree = [(i, tree, w, list(range(n_targets))) for i, tree, w, _ in per_tree]
    if aggregate in ("MIN", "MAX"):
        check_whole_trees(node, per_tree)
    width = max(len(p[3]) for p in per_tree)
    builder = EnsembleBuilder(width)
    column_target = []
    for t, (tree_id, tree, leaf_weights, targets) in enumerate(per_tree):
        writer = _MemberWriter(node, tree_id, tree, leaf_weights, targets,
                               limit=_MAX_GROWTH * len(tree.rows) + 64)
        writer.write(tree.ids[0])
        arrays = writer.arrays()
        pad = width - len(targets)
        leaf_value = np.pad(arrays.pop("leaf_value"), ((0, 0), (0, pad)))
        start = 0 if dtype == np.float64 else t * width
        builder.add_tree(leaf_value=leaf_value, output_start=start,
                         categories=writer.categories, **arrays)
        column_target.extend(list(targets) + [-1] * pad)
    precision = "float32" if dtype == np.float32 else "float64"
    if dtype == np.float64:
        ensemble = builder.build(n_features=n_features, n_outputs=n_targets,
                                 aggregation="mean" if aggregate == "AVERAGE" else "sum",
                                 input_precision=precision, categorical_rule=rule)
        return ensemble, None, n_targets
    ensemble = builder.build(n_features=n_features, n_outputs=len(per_tree) * width,
                             aggregation="sum", input_precision=precision,
                             categorical_rule=rule)
    # no base values: a target without a score is 0 whether or not it is flagged
    scores = OnnxTreeScores(
        n_trees=len(per_tree), width=width, n_targets=n_targets,
        column_target=np.asarray(column_target, np.int64),
        base_values=np.zeros(0, np.float32), has_score=np.ones(n_targets, bool),
        role="regressor", accumulate="float32",
        aggregation=aggregate.lower(), post_transform=post)
    return ensemble, scores, n_targets


def handle_tree_ensemble5(node, state):
    """The ``HANDLERS`` entry: a regressor's values, (n, n_targets), or a classifier's
    scores, which plain operators after it (Add, Softmax, Sigmoid, ArgMax and a label
    lookup) turn into probabilities and labels (see ``plain_ops.py``)."""
    _, features = state.read(node, 0, ("features",))
    ensemble, scores, n_targets = tree_ensemble5_ops(node, features.dtype.type, features.width)
    if scores is None:
        raw, transformed = state.add(ensemble, [features.value], node)
    else:
        (per_tree, _) = state.add(ensemble, [features.value], node, ":trees")
        scores = dataclasses.replace(scores, ort_threads=state.ort_threads)
        raw, transformed = state.add(scores, [per_tree], node)
    state.result(node, raw, transformed, None, n_targets)
    # a classifier's graph reads these values on (Softmax, ArgMax): in the input's type
    state.results[-1].values_dtype = np.float32 if scores is not None else np.float64
