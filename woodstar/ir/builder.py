"""Assemble a TreeEnsemble tree by tree; frontends use this instead of raw arrays."""

import numpy as np

from .tree_ensemble import LE, TreeEnsemble

__all__ = ["EnsembleBuilder", "bitset_words"]


def bitset_words(categories) -> np.ndarray:
    """uint32 words with bit c set for every category c (non-negative integers)."""
    categories = np.asarray(list(categories), dtype=np.int64)
    n_words = int(categories.max()) // 32 + 1 if len(categories) else 1
    words = np.zeros(n_words, dtype=np.uint32)
    np.bitwise_or.at(words, categories // 32, (np.uint32(1) << (categories % 32).astype(np.uint32)))
    return words


class EnsembleBuilder:
    """Collects trees (tree-local child indices, -1 for leaves) into one TreeEnsemble."""

    def __init__(self, leaf_width: int):
        self.leaf_width = leaf_width
        self._columns = {name: [] for name in (
            "feature", "threshold", "comparison", "left", "right", "default_left",
            "is_categorical", "cat_bitset_start", "cat_bitset_size", "leaf_value",
            "missing_in_range", "linear_start", "linear_size")}
        self._linear_feature, self._linear_coef, self._n_terms = [], [], 0
        self._sizes = []
        self._output_start = []
        self._bitsets = []
        self._n_words = 0

    def add_tree(self, *, feature, threshold, left, right, leaf_value, default_left=None,
                 comparison=LE, output_start=0, categories=None, missing_in_range=None,
                 linear=None):
        """Add one tree. ``categories`` maps a node to its uint32 bitset words (the
        categories that go left); ``comparison`` is LE, LT or a per-node array;
        ``missing_in_range`` flags the nodes that treat the ensemble's
        ``missing_range`` as missing (a bool or one per node); ``linear`` maps a leaf
        to its terms ``(features, coefficients)``, feature -1 being the intercept."""
        n = len(feature)
        left = np.asarray(left, dtype=np.int64)
        cols = self._columns
        cols["feature"].append(np.where(left >= 0, feature, -1))
        cols["threshold"].append(np.where(left >= 0, threshold, 0.0))
        cols["comparison"].append(np.broadcast_to(np.asarray(comparison, dtype=np.uint8), (n,)))
        cols["left"].append(left)
        cols["right"].append(np.asarray(right, dtype=np.int64))
        cols["default_left"].append(np.zeros(n, bool) if default_left is None
                                    else np.asarray(default_left, dtype=bool))
        is_categorical = np.zeros(n, dtype=bool)
        start = np.zeros(n, dtype=np.int64)
        size = np.zeros(n, dtype=np.int64)
        for node, words in (categories or {}).items():
            words = np.asarray(words, dtype=np.uint32)
            is_categorical[node] = True
            start[node], size[node] = self._n_words, len(words)
            self._bitsets.append(words)
            self._n_words += len(words)
        cols["is_categorical"].append(is_categorical)
        linear_start = np.zeros(n, dtype=np.int64)
        linear_size = np.zeros(n, dtype=np.int64)
        for node, (features, coefs) in (linear or {}).items():
            linear_start[node], linear_size[node] = self._n_terms, len(coefs)
            self._linear_feature.append(np.asarray(features, dtype=np.int64))
            self._linear_coef.append(np.asarray(coefs, dtype=np.float64))
            self._n_terms += len(coefs)
        cols["linear_start"].append(linear_start)
        cols["linear_size"].append(linear_size)
        cols["missing_in_range"].append(np.broadcast_to(
            np.asarray(False if missing_in_range is None else missing_in_range, dtype=bool), (n,)))
        cols["cat_bitset_start"].append(start)
        cols["cat_bitset_size"].append(size)
        cols["leaf_value"].append(np.asarray(leaf_value, dtype=np.float64).reshape(n, self.leaf_width))
        self._sizes.append(n)
        self._output_start.append(output_start)

    def build(self, *, n_features, n_outputs, base_score=None, **fields) -> TreeEnsemble:
        arrays = {name: np.concatenate(parts) for name, parts in self._columns.items()}
        ens = TreeEnsemble(
            n_features=int(n_features),
            n_outputs=int(n_outputs),
            tree_offsets=np.concatenate([[0], np.cumsum(self._sizes)]),
            tree_output_start=np.asarray(self._output_start),
            cat_bitsets=(np.concatenate(self._bitsets) if self._bitsets
                         else np.zeros(0, dtype=np.uint32)),
            base_score=(np.zeros(n_outputs) if base_score is None
                        else np.asarray(base_score, dtype=np.float64).reshape(n_outputs)),
            linear_feature=(np.concatenate(self._linear_feature) if self._linear_feature
                            else np.zeros(0, dtype=np.int64)),
            linear_coef=(np.concatenate(self._linear_coef) if self._linear_coef
                         else np.zeros(0)),
            **arrays,
            **fields,
        )
        return ens.validate()
