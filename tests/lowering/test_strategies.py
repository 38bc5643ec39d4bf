"""Each strategy == the IR's NumPy reference, on hand-built edge trees and random ones."""

import numpy as np
import pytest
import torch

from woodstar.exceptions import MissingConverter
from woodstar.ir import LE, LT
from woodstar.ir.builder import EnsembleBuilder, bitset_words
from woodstar.ir.reference import predict
from woodstar.lowering import choose_strategy, get_strategy, lower_tree_ensemble


def random_tree(rng, n_features, max_depth, leaf_width, categorical=False, branch_probability=0.8):
    """A random unbalanced tree in pre-order (children after parents); a node above
    max_depth splits with branch_probability (1.0: a complete tree)."""
    feature, threshold, left, right, default_left, values, categories = [], [], [], [], [], [], {}

    def grow(depth):
        node = len(feature)
        feature.append(-1), threshold.append(0.0), left.append(-1), right.append(-1)
        default_left.append(bool(rng.integers(0, 2)))
        values.append(rng.normal(size=leaf_width))
        if depth < max_depth and rng.random() < branch_probability:
            feature[node] = int(rng.integers(0, n_features))
            threshold[node] = float(np.round(rng.normal(), 1))  # ties with rounded inputs
            if categorical and rng.random() < 0.3:
                categories[node] = bitset_words(rng.choice(40, size=rng.integers(1, 6), replace=False))
            left[node] = grow(depth + 1)
            right[node] = grow(depth + 1)
        return node

    grow(0)
    return dict(feature=feature, threshold=threshold, left=left, right=right,
                default_left=default_left, leaf_value=values, categories=categories)


def random_ensemble(rng, n_trees=7, n_features=4, max_depth=5, leaf_width=1, n_outputs=1, **fields):
    categorical = fields.pop("categorical", False)
    builder = EnsembleBuilder(leaf_width)
    for t in range(n_trees):
        tree = random_tree(rng, n_features, max_depth, leaf_width, categorical)
        builder.add_tree(**tree, comparison=rng.integers(0, 2, len(tree["feature"])),
                         output_start=t % (n_outputs - leaf_width + 1))
    return builder.build(n_features=n_features, n_outputs=n_outputs,
                         base_score=rng.normal(size=n_outputs), **fields)


def inputs(rng, n_features, n=300):
    X = np.round(rng.normal(size=(n, n_features)), 1)  # many values equal to thresholds
    X[rng.random(X.shape) < 0.1] = np.nan
    X[rng.random(X.shape) < 0.03] = np.inf
    X[rng.random(X.shape) < 0.03] = -np.inf
    cat = rng.random(X.shape) < 0.3
    X[cat] = rng.choice([0, 1, 3, 7, 39, 40, 100, -1, -0.5, 2.5], size=cat.sum())
    return X


def run(ens, strategy, precision, X):
    module = lower_tree_ensemble(ens, get_strategy(strategy), precision)
    with torch.inference_mode():
        raw, transformed = module(torch.from_numpy(X.astype(precision)))
    return raw.numpy(), transformed.numpy()


CASES = {
    "stump-sum": dict(max_depth=1),
    "deep-unbalanced": dict(max_depth=9),
    "mean-sigmoid": dict(aggregation="mean", post_transform="sigmoid"),
    "softmax-3-outputs": dict(n_outputs=3, post_transform="softmax"),
    "vector-leaves": dict(leaf_width=2, n_outputs=2, post_transform="exp", post_transform_scale=0.1),
    "vector-leaves-in-blocks": dict(leaf_width=2, n_outputs=3),
    "forest-classifier": dict(aggregation="mean", leaf_width=3, n_outputs=3),
    "binary-sigmoid": dict(post_transform="sigmoid_binary", post_transform_scale=2.0),
    "isolation": dict(aggregation="mean", post_transform="isolation_forest", post_transform_scale=0.3),
    "categorical-exact": dict(categorical=True, categorical_rule="exact"),
    "categorical-truncate": dict(categorical=True, categorical_rule="truncate"),
    "categorical-nonnegative": dict(categorical=True, categorical_rule="nonnegative", input_precision="float64"),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_strategy_matches_reference(case, strategy, precision, rng):
    ens = random_ensemble(rng, **CASES[case])
    X = inputs(rng, ens.n_features)
    if precision == "float32" or ens.input_precision == "float32":
        X = X.astype(np.float32).astype(np.float64)  # the input the route is exact for
    raw_ref, transformed_ref = predict(ens, X)
    raw, transformed = run(ens, strategy, precision, X)
    # Comparisons are exact on both routes and trees are summed in the reference's
    # order, so raw scores agree to the bit; the transforms are torch's, not NumPy's.
    np.testing.assert_array_equal(raw, raw_ref)
    np.testing.assert_allclose(transformed, transformed_ref, rtol=1e-12, atol=1e-12)


def test_single_leaf_trees(strategy):
    builder = EnsembleBuilder(1)
    for value in (1.5, -2.0):
        builder.add_tree(feature=[-1], threshold=[0], left=[-1], right=[-1], leaf_value=[value])
    ens = builder.build(n_features=3, n_outputs=1)
    raw, _ = run(ens, strategy, "float32", np.array([[np.nan, 1, 2], [0, 0, 0]]))
    np.testing.assert_array_equal(raw[:, 0], [-0.5, -0.5])


def test_routing_by_depth_and_memory():
    rng = np.random.default_rng(0)
    shallow = random_ensemble(rng, max_depth=2)
    deep = random_ensemble(rng, max_depth=14)
    budget = 512 * 2**20
    no_table = dict(table={})  # the depth rule; the measured table is tested in test_routing
    assert choose_strategy(shallow, None, "float32", budget, "m", **no_table).name == "gemm"
    assert choose_strategy(deep, None, "float32", budget, "m", **no_table).name == "tree_trav"
    assert choose_strategy(shallow, "tree_trav", "float32", budget, "m").name == "tree_trav"
    # A tiny budget: GEMM refuses, the router falls back instead of failing.
    assert choose_strategy(shallow, None, "float32", 100, "m", **no_table).name != "gemm"
    with pytest.raises(MissingConverter, match=r"tree_implementation 'gemm' cannot hold this model"):
        choose_strategy(shallow, "gemm", "float32", 100, "m")
    with pytest.raises(MissingConverter, match=r"tree_implementation is not supported \(got 'quick'\)"):
        choose_strategy(shallow, "quick", "float32", budget, "m")
