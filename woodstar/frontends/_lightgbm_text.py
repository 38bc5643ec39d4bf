"""LightGBM's text model format (``Booster.model_to_string()``) -> the trees as arrays.

The text is what LightGBM saves and loads its own models from, and it is read here
about ten times faster than ``dump_model()``'s JSON is produced and decoded (a large
model's conversion spent most of its time there; docs/benchmarks.md has the figures).
Its numbers round-trip: LightGBM writes every double with 17 significant digits, and
Python's float parsing rounds correctly, so each threshold and leaf value is the
double LightGBM predicts with.

A tree block holds, per internal node, ``split_feature``, ``threshold``,
``decision_type`` (bit 0: categorical; bit 1: default left; bits 2-3: missing type
None, Zero or NaN) and ``left_child``/``right_child`` (a child ``c < 0`` is leaf
``~c``); per leaf, ``leaf_value``; for categorical splits, ``threshold`` indexes
``cat_boundaries``, which delimit the node's bitset words in ``cat_threshold``; linear
trees add ``leaf_const``, ``num_features``, ``leaf_features`` and ``leaf_coeff``.
"""

from dataclasses import dataclass

import numpy as np

from ..exceptions import InvalidModelError

__all__ = ["LightGBMTree", "MISSING_TYPES", "read_model_text"]

MISSING_TYPES = ("None", "Zero", "NaN")  # decision_type bits 2-3
_CATEGORICAL_BIT, _DEFAULT_LEFT_BIT = 1, 2


@dataclass
class LightGBMTree:
    """One tree in LightGBM's own node numbering: internal nodes ``0 .. num_leaves - 2``
    (the root is 0), children ``c < 0`` meaning leaf ``~c``. ``threshold`` is NaN at
    categorical nodes, whose listed categories are in ``categories``; ``missing_type``
    indexes MISSING_TYPES (-1: a value LightGBM does not define); ``linear`` maps a leaf
    to ``(const, features, coefficients)`` for linear trees, else is None."""

    num_leaves: int
    split_feature: np.ndarray
    threshold: np.ndarray
    is_categorical: np.ndarray
    categories: dict
    default_left: np.ndarray
    missing_type: np.ndarray
    left_child: np.ndarray
    right_child: np.ndarray
    leaf_value: np.ndarray
    linear: dict = None


def _floats(text):
    # NumPy's text parser rounds correctly (as float() does) and is faster than a split.
    return np.fromstring(text, dtype=np.float64, sep=" ")


def _ints(text):
    return np.fromstring(text, dtype=np.int64, sep=" ")


def _bitset_categories(words):
    """The categories whose bits are set in uint32 ``words`` (bit c of word c // 32)."""
    bits = np.unpackbits(np.asarray(words, dtype="<u4").view(np.uint8), bitorder="little")
    return np.flatnonzero(bits)


def _linear_leaves(fields, num_leaves):
    const = _floats(fields["leaf_const"])
    counts = _ints(fields["num_features"])
    features, coefs = _ints(fields.get("leaf_features", "")), _floats(fields.get("leaf_coeff", ""))
    ends = np.cumsum(counts)
    return {leaf: (const[leaf], features[end - count:end], coefs[end - count:end])
            for leaf, (count, end) in enumerate(zip(counts, ends))}


def _tree(block):
    fields = dict(line.split("=", 1) for line in block.splitlines() if "=" in line)
    num_leaves = int(fields["num_leaves"])
    decision = _ints(fields["decision_type"])
    is_categorical = (decision & _CATEGORICAL_BIT) != 0
    missing = (decision >> 2) & 3
    threshold = _floats(fields["threshold"])
    categories = {}
    if is_categorical.any():
        boundaries = _ints(fields["cat_boundaries"])
        words = _ints(fields["cat_threshold"]).astype(np.uint32)
        for node in np.flatnonzero(is_categorical):
            k = int(threshold[node])
            categories[int(node)] = _bitset_categories(words[boundaries[k]:boundaries[k + 1]])
        threshold[is_categorical] = np.nan
    linear = None
    if fields.get("is_linear", "0").strip() == "1":
        linear = _linear_leaves(fields, num_leaves)
    tree = LightGBMTree(
        num_leaves=num_leaves, split_feature=_ints(fields["split_feature"]), threshold=threshold,
        is_categorical=is_categorical, categories=categories,
        default_left=(decision & _DEFAULT_LEFT_BIT) != 0,
        missing_type=np.where(missing < len(MISSING_TYPES), missing, -1),
        left_child=_ints(fields["left_child"]), right_child=_ints(fields["right_child"]),
        leaf_value=_floats(fields["leaf_value"]), linear=linear)
    sizes = {len(tree.split_feature), len(threshold), len(decision), len(tree.left_child),
             len(tree.right_child), len(tree.leaf_value) - 1}
    if sizes != {num_leaves - 1}:
        number = block.split("\n", 1)[0].replace("Tree=", "")
        raise InvalidModelError(f"LightGBM model text: tree {number} has arrays of lengths "
                                f"{sorted(sizes)} for {num_leaves} leaves")
    return tree


def read_model_text(text):
    """``(header, trees)``: the header's ``key=value`` lines as a dict of strings (a bare
    key such as ``average_output`` maps to ""), and the trees in order."""
    head, _, body = text.partition("\nTree=")
    header = {}
    for line in head.splitlines():
        key, _, value = line.partition("=")
        header[key.strip()] = value
    body = body.split("\nend of trees", 1)[0]
    blocks = ("Tree=" + body).split("\nTree=") if body else []
    return header, [_tree(block) for block in blocks]
