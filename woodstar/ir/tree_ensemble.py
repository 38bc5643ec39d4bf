"""The TreeEnsemble IR: one neutral form for every tree library.

Nodes of all trees are stored in flat arrays, tree after tree; ``tree_offsets[t]`` is
the index of tree ``t``'s root and children are *tree-local* indices. Each library's
quirks (learning rate, base score, ``<`` versus ``<=``, which side a categorical set
sends, where a NaN goes) are resolved by its frontend, so the meaning of a node is
always the same:

* numerical node ``n`` on feature ``f``: a NaN goes to the ``default_left`` side;
  otherwise ``x[f] <= threshold`` (``comparison == LE``) or ``x[f] < threshold``
  (``LT``) goes left. ``x`` is first rounded to ``input_precision``: scikit-learn's
  trees and XGBoost compare a float32 copy of the input, HistGradientBoosting and
  LightGBM compare the float64 value.
* categorical node: a NaN goes to the ``default_left`` side; a value that is a valid
  category ``c`` with bit ``c`` set in the node's bitset goes left; every other value
  (invalid, unlisted, beyond the bitset) goes right. What is a valid category is the
  ensemble's ``categorical_rule``: "truncate" (``c = trunc(x) >= 0``, LightGBM),
  "nonnegative" (``x >= 0``, ``c = trunc(x)``, XGBoost) or "exact" (``x`` must be a
  non-negative integer, scikit-learn's encoded categories).
* missing range: where ``missing_in_range[n]`` is set, a value ``v`` (rounded to
  ``input_precision``) with ``missing_range[0] <= v <= missing_range[1]`` is treated as
  missing at node ``n`` and follows ``default_left``, numerical or categorical node
  alike. LightGBM's ``missing_type=Zero`` (``|x| <= 1e-35f`` is missing) and XGBoost's
  ``missing=-999`` are such ranges. Default: no node uses it.
* linear leaves: a leaf with ``linear_size[n] > 0`` outputs, instead of its
  ``leaf_value``, ``sum_k linear_coef[k] * v_k`` over its terms
  ``k in linear_start[n] : linear_start[n] + linear_size[n]``, where ``v_k`` is
  ``x[linear_feature[k]]`` (rounded to ``input_precision``) or 1.0 when
  ``linear_feature[k] == -1`` (the intercept). A NaN ``v_k`` follows
  ``linear_missing``: "leaf_value" (the leaf outputs ``leaf_value`` instead, LightGBM
  ``linear_tree``) or "skip" (the term is left out, XGBoost gblinear). Only with
  ``leaf_width == 1``. Default: no linear leaves.
* a tree's leaf adds ``leaf_value[leaf]`` (a vector of ``leaf_width``) to the raw
  outputs ``tree_output_start[t] : tree_output_start[t] + leaf_width``.

* sum precision: "float64" (default) adds leaves in double; "float32" (XGBoost) starts
  each row at float32 ``base_score`` and adds each tree's (float32) leaf in float32, and
  the post-transform is XGBoost's float32 arithmetic. The compiled walk emulates it to
  the bit; other routes stay within float32 rounding of it.

Raw score = aggregation over trees ("sum" or "mean") + ``base_score``; the prediction
is ``post_transform(post_transform_scale * raw)``. The order of the float64 additions
is part of the meaning, because it decides near ties: "sum" starts at ``base_score``
and adds the trees in tree order (the libraries' own loops); "mean" adds the trees in
order from 0, divides by the number of trees, then adds ``base_score``.
"""

from __future__ import annotations

import dataclasses
import weakref
from dataclasses import dataclass

import numpy as np

from ..exceptions import InvalidModelError
from .graph import CATEGORY, FLOAT, Op, ValueType, register_op
from .transforms import transformed_width

__all__ = [
    "TreeEnsemble", "LE", "LT", "AGGREGATIONS", "POST_TRANSFORMS", "PRECISIONS", "CATEGORICAL_RULES",
    "LINEAR_MISSING",
]

LE = 0
LT = 1
AGGREGATIONS = ("sum", "mean")
POST_TRANSFORMS = (
    "identity",  # regression, raw margins
    "sigmoid",  # element-wise logistic (one-vs-all, reg:logistic)
    "sigmoid_binary",  # one logit -> two columns [1 - p, p]
    "softplus",  # log1p(exp(raw)), the C library's: LightGBM cross_entropy_lambda
    "identity_binary",  # one margin -> two columns [1 - raw, raw] (XGBoost binary:logitraw)
    "step",  # 1.0 where raw > 0 else 0.0 (XGBoost binary:hinge)
    "step_binary",  # one margin -> [1 - step, step]
    "argmax",  # index of the first largest raw score, one column (XGBoost multi:softmax)
    "softmax",  # multi-class probabilities (NumPy's exp, as scikit-learn)
    "softmax_libm",  # the same in double with the C library's exp, in LightGBM's order
    "exp",  # log-link regression (poisson, gamma, tweedie)
    "exp_libm",  # the same with the C library's exp (LightGBM)
    "isolation_forest",  # -2 ** (-raw / c): IsolationForest.score_samples
)
PRECISIONS = ("float32", "float64")
CATEGORICAL_RULES = ("truncate", "nonnegative", "exact")
LINEAR_MISSING = ("leaf_value", "skip")

_ARRAY_DTYPES = {
    "tree_offsets": np.int64,
    "tree_output_start": np.int64,
    "feature": np.int64,
    "threshold": np.float64,
    "comparison": np.uint8,
    "left": np.int64,
    "right": np.int64,
    "default_left": np.bool_,
    "is_categorical": np.bool_,
    "cat_bitset_start": np.int64,
    "cat_bitset_size": np.int64,
    "cat_bitsets": np.uint32,
    "leaf_value": np.float64,
    "base_score": np.float64,
    "missing_in_range": np.bool_,
    "missing_range": np.float64,
    "linear_start": np.int64,
    "linear_size": np.int64,
    "linear_feature": np.int64,
    "linear_coef": np.float64,
}
_NO_RANGE = (np.nan, np.nan)
# The ensembles whose validate() succeeded (weakly held: ops hash by identity).
_VALIDATED = weakref.WeakSet()


def _views_other_memory(value: np.ndarray) -> bool:
    """Whether ``value`` is a view of memory that stays writeable elsewhere (not a view
    of a frozen array that owns its data, as another ensemble's arrays are)."""
    root = value
    while isinstance(root.base, np.ndarray):
        root = root.base
    return root is not value and (root.base is not None or root.flags.writeable)


@register_op
@dataclass(frozen=True, eq=False)
class TreeEnsemble(Op):
    """A fitted tree ensemble as plain arrays (see the module docstring). As a graph
    op (kind ``trees``) it reads one value of ``n_features`` numeric columns and writes
    the raw scores and the transformed ones, both float64."""

    kind = "trees"

    n_features: int
    n_outputs: int
    tree_offsets: np.ndarray
    tree_output_start: np.ndarray
    feature: np.ndarray
    threshold: np.ndarray
    comparison: np.ndarray
    left: np.ndarray
    right: np.ndarray
    default_left: np.ndarray
    is_categorical: np.ndarray
    cat_bitset_start: np.ndarray
    cat_bitset_size: np.ndarray
    cat_bitsets: np.ndarray
    leaf_value: np.ndarray
    base_score: np.ndarray
    aggregation: str = "sum"
    post_transform: str = "identity"
    post_transform_scale: float = 1.0
    input_precision: str = "float32"
    categorical_rule: str = "exact"
    missing_in_range: np.ndarray = None  # per node; None: no node (all False)
    missing_range: np.ndarray = None  # (lo, hi); None: (nan, nan), no range
    linear_start: np.ndarray = None  # per node; None: zeros (no linear leaves)
    linear_size: np.ndarray = None  # per node; None: zeros
    linear_feature: np.ndarray = None  # per term; -1 is the intercept; None: empty
    linear_coef: np.ndarray = None  # per term; None: empty
    linear_missing: str = "leaf_value"
    sum_precision: str = "float64"  # "float32": XGBoost's float32 sums and links

    def __post_init__(self):
        if self.missing_in_range is None:
            object.__setattr__(self, "missing_in_range", np.zeros(len(self.feature), dtype=bool))
        if self.missing_range is None:
            object.__setattr__(self, "missing_range", np.asarray(_NO_RANGE))
        for name in ("linear_start", "linear_size"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(len(self.feature), dtype=np.int64))
        for name in ("linear_feature", "linear_coef"):
            if getattr(self, name) is None:
                object.__setattr__(self, name, np.zeros(0))
        for name, dtype in _ARRAY_DTYPES.items():
            value = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            if _views_other_memory(value):
                # That memory could change after validate(), whose success is
                # remembered: keep a copy. An array of its own is only frozen.
                value = value.copy()
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        if self.leaf_value.ndim == 1:
            leaf = self.leaf_value.reshape(-1, 1)
            leaf.flags.writeable = False
            object.__setattr__(self, "leaf_value", leaf)

    # ----------------------------------------------------------------- shape facts
    @property
    def n_trees(self) -> int:
        return len(self.tree_offsets) - 1

    @property
    def n_nodes(self) -> int:
        return len(self.feature)

    @property
    def leaf_width(self) -> int:
        return self.leaf_value.shape[1]

    @property
    def is_leaf(self) -> np.ndarray:
        return self.left < 0

    @property
    def single_output_block(self) -> bool:
        """Every tree's leaves hold all the outputs (the output block starts at 0), so a
        leaf vector adds to the whole output row as it is."""
        return bool(np.all(self.tree_output_start == 0)) and self.leaf_width == self.n_outputs

    @property
    def has_missing_range(self) -> bool:
        return bool(np.any(self.missing_in_range & (self.left >= 0)))

    @property
    def has_linear_leaves(self) -> bool:
        return bool(np.any(self.linear_size > 0))

    @property
    def has_categorical(self) -> bool:
        return bool(self.is_categorical.any())

    def tree_sizes(self) -> np.ndarray:
        return np.diff(self.tree_offsets)

    def tree_depths(self) -> np.ndarray:
        """Depth of each tree (a single leaf has depth 0)."""
        if self in _VALIDATED:  # children inside their tree, after their parent
            return self._validated_tree_depths()
        depths = np.zeros(self.n_trees, dtype=np.int64)
        for t in range(self.n_trees):
            start, stop = self.tree_offsets[t], self.tree_offsets[t + 1]
            left, right = self.left[start:stop], self.right[start:stop]
            node_depth = np.zeros(stop - start, dtype=np.int64)
            # Children always come after their parent after validate(); walk in order.
            for n in range(stop - start):
                if left[n] >= 0:
                    node_depth[left[n]] = node_depth[n] + 1
                    node_depth[right[n]] = node_depth[n] + 1
            depths[t] = node_depth.max(initial=0)
        return depths

    def _validated_tree_depths(self) -> np.ndarray:
        """``tree_depths`` one level at a time over all trees together."""
        start = np.repeat(self.tree_offsets[:-1], np.diff(self.tree_offsets))
        internal = self.left >= 0
        left, right = start + self.left, start + self.right
        node_depth = np.zeros(self.n_nodes, dtype=np.int64)
        level, depth = self.tree_offsets[:-1], 0
        while level.size:
            level = level[internal[level]]
            depth += 1
            level = np.concatenate([left[level], right[level]])
            node_depth[level] = depth
        return np.maximum.reduceat(node_depth, self.tree_offsets[:-1])

    def replace(self, **changes) -> "TreeEnsemble":
        return dataclasses.replace(self, **changes)

    # ------------------------------------------------------------------ comparison
    def equals(self, other: "TreeEnsemble") -> bool:
        if not isinstance(other, TreeEnsemble):
            return False
        for field in dataclasses.fields(self):
            a, b = getattr(self, field.name), getattr(other, field.name)
            if isinstance(a, np.ndarray):
                if a.shape != b.shape or not np.array_equal(a, b, equal_nan=a.dtype.kind == "f"):
                    return False
            elif a != b:
                return False
        return True

    def __repr__(self) -> str:
        depths = self.tree_depths() if self.n_trees else np.zeros(1)
        return (
            f"TreeEnsemble(n_trees={self.n_trees}, n_nodes={self.n_nodes}, "
            f"max_depth={int(depths.max())}, n_features={self.n_features}, "
            f"n_outputs={self.n_outputs}, leaf_width={self.leaf_width}, "
            f"aggregation={self.aggregation!r}, post_transform={self.post_transform!r}, "
            f"categorical={self.has_categorical}, input_precision={self.input_precision!r})"
        )

    # ------------------------------------------------------------------ validation
    def validate(self) -> "TreeEnsemble":
        """Check every invariant; the error names the tree and node at fault. A success
        is remembered on this instance while its arrays are read-only (the constructor
        freezes them and copies views of writeable memory), so the frontend, the builders
        and the graph checks share one validation; a new instance (``replace``,
        ``from_saved``, unpickling) is checked again."""
        if self in _VALIDATED:
            return self
        self._validate()
        if not any(getattr(self, name).flags.writeable for name in _ARRAY_DTYPES):
            _VALIDATED.add(self)
        return self

    def _validate(self) -> None:
        n_nodes = self.n_nodes
        for name in ("threshold", "comparison", "left", "right", "default_left",
                     "is_categorical", "cat_bitset_start", "cat_bitset_size", "missing_in_range",
                     "linear_start", "linear_size"):
            if len(getattr(self, name)) != n_nodes:
                raise InvalidModelError(
                    f"TreeEnsemble: {name} has {len(getattr(self, name))} entries, "
                    f"expected one per node ({n_nodes})")
        if self.leaf_value.shape[0] != n_nodes:
            raise InvalidModelError(
                f"TreeEnsemble: leaf_value has {self.leaf_value.shape[0]} rows, expected {n_nodes}")
        if self.n_trees < 1:
            raise InvalidModelError("TreeEnsemble: the ensemble has no trees")
        if self.tree_offsets[0] != 0 or self.tree_offsets[-1] != n_nodes:
            raise InvalidModelError(
                f"TreeEnsemble: tree_offsets must run from 0 to n_nodes={n_nodes}")
        if np.any(np.diff(self.tree_offsets) < 1):
            bad = int(np.argmax(np.diff(self.tree_offsets) < 1))
            raise InvalidModelError(f"TreeEnsemble: tree {bad} has no nodes")
        if len(self.tree_output_start) != self.n_trees:
            raise InvalidModelError("TreeEnsemble: tree_output_start needs one entry per tree")
        if self.aggregation not in AGGREGATIONS:
            raise InvalidModelError(f"TreeEnsemble: aggregation {self.aggregation!r} not in {AGGREGATIONS}")
        if self.post_transform not in POST_TRANSFORMS:
            raise InvalidModelError(
                f"TreeEnsemble: post_transform {self.post_transform!r} not in {POST_TRANSFORMS}")
        if self.input_precision not in PRECISIONS:
            raise InvalidModelError(
                f"TreeEnsemble: input_precision {self.input_precision!r} not in {PRECISIONS}")
        if self.sum_precision not in PRECISIONS:
            raise InvalidModelError(
                f"TreeEnsemble: sum_precision {self.sum_precision!r} not in {PRECISIONS}")
        if self.categorical_rule not in CATEGORICAL_RULES:
            raise InvalidModelError(
                f"TreeEnsemble: categorical_rule {self.categorical_rule!r} not in {CATEGORICAL_RULES}")
        if self.missing_range.shape != (2,):
            raise InvalidModelError(
                f"TreeEnsemble: missing_range has shape {self.missing_range.shape}, expected (2,)")
        if self.has_missing_range and not (self.missing_range[0] <= self.missing_range[1]):
            raise InvalidModelError(
                f"TreeEnsemble: nodes treat a range as missing but missing_range "
                f"{tuple(self.missing_range)} is not an interval lo <= hi")
        self._validate_linear()
        if self.base_score.shape != (self.n_outputs,):
            raise InvalidModelError(
                f"TreeEnsemble: base_score has shape {self.base_score.shape}, expected ({self.n_outputs},)")
        if np.any(self.tree_output_start < 0) or np.any(
                self.tree_output_start + self.leaf_width > self.n_outputs):
            t = int(np.argmax((self.tree_output_start < 0)
                              | (self.tree_output_start + self.leaf_width > self.n_outputs)))
            raise InvalidModelError(
                f"TreeEnsemble: tree {t} writes outputs {self.tree_output_start[t]}.."
                f"{self.tree_output_start[t] + self.leaf_width - 1} beyond n_outputs={self.n_outputs}")
        for t in self._suspect_trees():
            self._validate_tree(t)

    def _validate_linear(self) -> None:
        if self.linear_missing not in LINEAR_MISSING:
            raise InvalidModelError(
                f"TreeEnsemble: linear_missing {self.linear_missing!r} not in {LINEAR_MISSING}")
        if len(self.linear_feature) != len(self.linear_coef):
            raise InvalidModelError(
                f"TreeEnsemble: {len(self.linear_feature)} linear features for "
                f"{len(self.linear_coef)} coefficients")
        if not self.has_linear_leaves:
            return
        if self.leaf_width != 1:
            raise InvalidModelError("TreeEnsemble: linear leaves need leaf_width 1")
        linear = np.flatnonzero(self.linear_size > 0)
        bad = linear[(self.left[linear] >= 0) | (self.linear_start[linear] < 0)
                     | (self.linear_start[linear] + self.linear_size[linear] > len(self.linear_coef))]
        if len(bad):
            raise InvalidModelError(
                f"TreeEnsemble: node {int(bad[0])} has linear terms "
                f"{self.linear_start[bad[0]]}..{self.linear_start[bad[0]] + self.linear_size[bad[0]]} "
                f"but is not a leaf or lies outside the {len(self.linear_coef)} stored terms")
        if np.any((self.linear_feature < -1) | (self.linear_feature >= self.n_features)):
            raise InvalidModelError(
                f"TreeEnsemble: linear features must lie in -1..{self.n_features - 1}")
        if not np.all(np.isfinite(self.linear_coef)):
            raise InvalidModelError("TreeEnsemble: a linear coefficient is not finite")

    def _suspect_trees(self) -> np.ndarray:
        """The trees that break a rule of ``_validate_tree``, checked for all nodes at
        once; ``_validate_tree`` then words the error of the first one. Exactly its
        rules, so a tree it would refuse is always among these."""
        sizes = np.diff(self.tree_offsets)
        tree_of = np.repeat(np.arange(self.n_trees), sizes)
        start = self.tree_offsets[:-1][tree_of]
        size = sizes[tree_of]
        local = np.arange(self.n_nodes) - start
        left, right, feature = self.left, self.right, self.feature
        internal = left >= 0
        numerical = internal & ~self.is_categorical
        categorical = internal & self.is_categorical
        bit_stop = self.cat_bitset_start + self.cat_bitset_size
        bad = internal != (right >= 0)
        bad |= internal & ((left >= size) | (right >= size))
        bad |= internal & ((left <= local) | (right <= local))
        bad |= internal & ((feature < 0) | (feature >= self.n_features))
        bad |= numerical & np.isnan(self.threshold)
        bad |= numerical & (self.comparison > LT)
        bad |= ~internal & np.any(~np.isfinite(self.leaf_value), axis=1)
        bad |= categorical & ((self.cat_bitset_start < 0) | (bit_stop > len(self.cat_bitsets)))
        # Parents counted over the children that lie inside their tree (a tree with
        # another child is already suspect above).
        linked = internal & (right >= 0) & (left < size) & (right < size)
        parents = (np.bincount((start + left)[linked], minlength=self.n_nodes)
                   + np.bincount((start + right)[linked], minlength=self.n_nodes))
        bad |= parents != np.where(local == 0, 0, 1)
        return np.unique(tree_of[bad])

    def _validate_tree(self, t: int) -> None:
        start, stop = int(self.tree_offsets[t]), int(self.tree_offsets[t + 1])
        size = stop - start
        left, right = self.left[start:stop], self.right[start:stop]
        feature, threshold = self.feature[start:stop], self.threshold[start:stop]
        internal = left >= 0

        def fail(node, message):
            raise InvalidModelError(f"TreeEnsemble: tree {t}, node {node}: {message}")

        for n in np.flatnonzero(internal != (right >= 0)):
            fail(n, f"left child {left[n]} and right child {right[n]} must both be set or both be -1")
        for n in np.flatnonzero(internal & ((left >= size) | (right >= size))):
            fail(n, f"child {max(left[n], right[n])} >= n_nodes {size}")
        for n in np.flatnonzero(internal & ((left <= np.arange(size)) | (right <= np.arange(size)))):
            fail(n, f"children ({left[n]}, {right[n]}) must come after their parent")
        for n in np.flatnonzero(internal & ((feature < 0) | (feature >= self.n_features))):
            fail(n, f"feature {feature[n]} is outside 0..{self.n_features - 1}")
        numerical = internal & ~self.is_categorical[start:stop]
        for n in np.flatnonzero(numerical & np.isnan(threshold)):
            fail(n, "threshold is NaN")
        for n in np.flatnonzero(numerical & (self.comparison[start:stop] > LT)):
            fail(n, f"comparison code {self.comparison[start + n]} is neither LE (0) nor LT (1)")
        for n in np.flatnonzero(~internal & np.any(~np.isfinite(self.leaf_value[start:stop]), axis=1)):
            fail(n, "leaf value is not finite")
        categorical = internal & self.is_categorical[start:stop]
        bit_stop = self.cat_bitset_start[start:stop] + self.cat_bitset_size[start:stop]
        for n in np.flatnonzero(categorical & ((self.cat_bitset_start[start:stop] < 0)
                                               | (bit_stop > len(self.cat_bitsets)))):
            fail(n, f"categorical bitset {self.cat_bitset_start[start + n]}..{bit_stop[n]} "
                    f"is outside the {len(self.cat_bitsets)} stored words")
        # Every node must be reachable exactly once from the root.
        parents = np.zeros(size, dtype=np.int64)
        np.add.at(parents, left[internal], 1)
        np.add.at(parents, right[internal], 1)
        if parents[0] != 0:
            fail(0, "the root has a parent")
        for n in np.flatnonzero(parents[1:] != 1) + 1:
            fail(n, f"node has {parents[n]} parents, expected 1")


    # ---------------------------------------------------------------- graph op
    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_outputs),
                ValueType.floats(transformed_width(self.post_transform, self.n_outputs))]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)] * 2

    def reference(self, inputs):
        from .reference import predict

        return list(predict(self, inputs[0]))

    def to_saved(self):
        meta, arrays = {}, {}
        for field in dataclasses.fields(self):
            value = getattr(self, field.name)
            if field.name in _ARRAY_DTYPES:
                arrays[field.name] = value
            else:
                meta[field.name] = value.item() if isinstance(value, np.generic) else value
        return meta, arrays

    @classmethod
    def from_saved(cls, meta, arrays):
        if set(arrays) != set(_ARRAY_DTYPES):
            raise InvalidModelError(f"tree arrays {sorted(arrays)} are not the expected ones")
        for field, array in arrays.items():
            if array.dtype != np.dtype(_ARRAY_DTYPES[field]):
                raise InvalidModelError(f"tree array {field} has dtype {array.dtype}")
        return cls(**meta, **arrays)
