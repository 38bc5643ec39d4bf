"""Spark ML tree models -> TreeEnsemble, read node by node from the JVM (py4j).

Spark's node test: a continuous split sends ``x <= threshold`` left, so NaN goes
right; a categorical split sends ``x`` left when it is one of the split's left
categories (exact doubles), every other value (NaN, fractions, unseen codes) right,
which is the IR's "exact" categorical rule. Trees compare the float64 value.
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import LE
from ...ir.builder import EnsembleBuilder, bitset_words

__all__ = ["read_tree", "add_trees", "tree_models"]


def _simple_name(java_obj):
    return java_obj.getClass().getSimpleName()


def read_tree(root, leaf_value, owner):
    """Flat arrays of one tree (preorder, children after parents). ``leaf_value(node)``
    gives a leaf's output vector."""
    feature, threshold, left, right, leaves, categories = [], [], [], [], [], {}

    def visit(node):
        i = len(feature)
        feature.append(-1)
        threshold.append(0.0)
        left.append(-1)
        right.append(-1)
        leaves.append(None)
        if _simple_name(node) == "InternalNode":
            split = node.split()
            feature[i] = int(split.featureIndex())
            kind = _simple_name(split)
            if kind == "ContinuousSplit":
                threshold[i] = float(split.threshold())
            elif kind == "CategoricalSplit":
                values = [float(v) for v in split.leftCategories()]
                if any(v < 0 or v != int(v) for v in values):
                    raise MissingConverter(unsupported_message(
                        owner, "categorical split categories", values[:5],
                        "non-negative integer category codes"))
                categories[i] = bitset_words([int(v) for v in values])
            else:
                raise MissingConverter(unsupported_message(
                    owner, "split type", kind, "ContinuousSplit, CategoricalSplit"))
            left[i] = visit(node.leftChild())
            right[i] = visit(node.rightChild())
        else:
            leaves[i] = leaf_value(node)
        return i

    visit(root)
    width = len(next(v for v in leaves if v is not None))
    leaf_values = np.asarray([v if v is not None else np.zeros(width) for v in leaves],
                             dtype=np.float64)
    return dict(feature=np.asarray(feature), threshold=np.asarray(threshold),
                left=np.asarray(left), right=np.asarray(right), leaf_value=leaf_values,
                categories=categories)


def tree_models(model):
    """The DecisionTree models of a tree model (itself for a single tree), as JVM objects."""
    java = getattr(model, "_java_obj", None)
    if java is None:  # Spark Connect models hold no JVM object to read the nodes from
        raise MissingConverter(unsupported_message(
            type(model).__name__, "a tree model without a JVM object (Spark Connect)",
            type(model).__module__, "models fitted in a classic (py4j) Spark session"))
    if _simple_name(java).startswith("DecisionTree"):
        return [java]
    return list(java.trees())


def add_trees(model, leaf_value, width, owner):
    """An EnsembleBuilder holding every tree of ``model``."""
    builder = EnsembleBuilder(width)
    start_tree = getattr(leaf_value, "start_tree", None)  # per-tree state (GBT weights)
    for tree in tree_models(model):
        if start_tree is not None:
            start_tree()
        arrays = read_tree(tree.rootNode(), leaf_value, owner)
        categories = arrays.pop("categories")
        builder.add_tree(**arrays, comparison=LE, categories=categories)
    return builder
