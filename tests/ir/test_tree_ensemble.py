"""The IR: validation names the tree and node at fault; passes are exact."""

import numpy as np
import pytest

from woodstar.exceptions import InvalidModelError
from woodstar.ir import LE, LT
from woodstar.ir.builder import EnsembleBuilder, bitset_words
from woodstar.ir.passes import le_thresholds
from woodstar.ir.reference import predict_raw


def stump(threshold=0.5, comparison=LE, default_left=False):
    builder = EnsembleBuilder(1)
    builder.add_tree(feature=[0, -1, -1], threshold=[threshold, 0, 0], left=[1, -1, -1],
                     right=[2, -1, -1], leaf_value=[0.0, 10.0, 20.0], comparison=comparison,
                     default_left=[default_left, False, False])
    return builder


def test_stump_reference_semantics():
    ens = stump(0.5).build(n_features=1, n_outputs=1)
    X = np.array([[0.5], [0.6], [np.nan], [-np.inf], [np.inf]])
    np.testing.assert_array_equal(predict_raw(ens, X)[:, 0], [10, 20, 20, 10, 20])
    ens = stump(0.5, comparison=LT, default_left=True).build(n_features=1, n_outputs=1)
    np.testing.assert_array_equal(predict_raw(ens, X)[:, 0], [20, 20, 10, 10, 20])


def test_categorical_rules():
    builder = EnsembleBuilder(1)
    builder.add_tree(feature=[0, -1, -1], threshold=[0, 0, 0], left=[1, -1, -1], right=[2, -1, -1],
                     leaf_value=[0.0, 1.0, 2.0], categories={0: bitset_words([0, 3, 40])})
    X = np.array([[0.0], [3.0], [3.5], [40.0], [-0.5], [2.0], [1e9], [np.nan]])
    exact = builder.build(n_features=1, n_outputs=1, categorical_rule="exact")
    np.testing.assert_array_equal(predict_raw(exact, X)[:, 0], [1, 1, 2, 1, 2, 2, 2, 2])
    truncate = exact.replace(categorical_rule="truncate")
    np.testing.assert_array_equal(predict_raw(truncate, X)[:, 0], [1, 1, 1, 1, 1, 2, 2, 2])
    nonnegative = exact.replace(categorical_rule="nonnegative")
    np.testing.assert_array_equal(predict_raw(nonnegative, X)[:, 0], [1, 1, 1, 1, 2, 2, 2, 2])


@pytest.mark.parametrize("change, message", [
    (dict(left=np.array([1, -1, 5])), r"tree 0, node 2: left child 5 and right child -1 must both be set"),
    (dict(left=np.array([1, -1, -1]), right=np.array([7, -1, -1])), r"tree 0, node 0: child 7 >= n_nodes 3"),
    (dict(feature=np.array([4, -1, -1])), r"tree 0, node 0: feature 4 is outside 0..0"),
    (dict(threshold=np.array([np.nan, 0, 0])), r"tree 0, node 0: threshold is NaN"),
    (dict(leaf_value=np.array([[0.0], [np.inf], [1.0]])), r"tree 0, node 1: leaf value is not finite"),
    (dict(aggregation="median"), r"aggregation 'median' not in"),
    (dict(post_transform="tanh"), r"post_transform 'tanh' not in"),
    (dict(base_score=np.zeros(2)), r"base_score has shape \(2,\), expected \(1,\)"),
    (dict(tree_output_start=np.array([1])), r"tree 0 writes outputs 1..1 beyond n_outputs=1"),
])
def test_validate_names_the_fault(change, message):
    ens = stump().build(n_features=1, n_outputs=1)
    with pytest.raises(InvalidModelError, match=message):
        ens.replace(**change).validate()


def test_children_must_follow_parents_and_have_one_parent():
    builder = EnsembleBuilder(1)
    with pytest.raises(InvalidModelError, match=r"tree 0, node 1: children \(1, 2\) must come after"):
        builder.add_tree(feature=[0, 0, -1], threshold=[0, 0, 0], left=[1, 1, -1], right=[2, 2, -1],
                         leaf_value=[0, 0, 0])
        builder.build(n_features=1, n_outputs=1)


def test_equals_and_repr():
    a = stump().build(n_features=1, n_outputs=1)
    b = stump().build(n_features=1, n_outputs=1)
    assert a.equals(b) and not a.equals(stump(0.25).build(n_features=1, n_outputs=1))
    assert "n_trees=1" in repr(a) and "max_depth=1" in repr(a)


@pytest.mark.parametrize("comparison", [LE, LT])
def test_le_thresholds_keep_every_float32_branch(comparison):
    """For float64 thresholds t and float32 inputs x, ``x <= t32`` must equal the
    source's double comparison, on the neighbours of t where rounding bites."""
    rng = np.random.default_rng(0)
    t64 = np.concatenate([rng.normal(size=500) * 10.0 ** rng.integers(-30, 30, 500),
                          np.float32(rng.normal(size=200)).astype(np.float64),  # exactly float32
                          [0.0, -0.0, 1e300, -1e300, 3.4028235e38, 1e-45]])
    ens = stump().build(n_features=1, n_outputs=1)
    n = len(t64)
    many = ens.replace(
        feature=np.zeros(n), threshold=t64, comparison=np.full(n, comparison), left=np.full(n, 1),
        right=np.full(n, 2), default_left=np.zeros(n), is_categorical=np.zeros(n),
        cat_bitset_start=np.zeros(n), cat_bitset_size=np.zeros(n), leaf_value=np.zeros((n, 1)))
    t32 = le_thresholds(many, np.float32)
    assert t32.dtype == np.float32
    with np.errstate(over="ignore"):
        near = np.float32(t64)
    for step in range(-2, 3):
        x = near
        for _ in range(abs(step)):
            x = np.nextafter(x, np.float32(np.inf if step > 0 else -np.inf))
        source = x.astype(np.float64) <= t64 if comparison == LE else x.astype(np.float64) < t64
        np.testing.assert_array_equal(x <= t32, source)
