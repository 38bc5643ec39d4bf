"""IR semantics added for the gradient-boosting frontends, held on hand-built trees:
reference predictor == every strategy, in both precisions.

* ``missing_in_range`` / ``missing_range``: a value in the range follows the node's
  default side (LightGBM missing_type=Zero, XGBoost missing=-999);
* ``softplus`` post-transform (LightGBM cross_entropy_lambda).
"""

import numpy as np
import pytest
import torch

from woodstar.exceptions import InvalidModelError
from woodstar.ir import reference
from woodstar.ir.builder import EnsembleBuilder, bitset_words
from woodstar.ir.tree_ensemble import LE, LT

from .test_strategies import run

ZERO = float(np.float32(1e-35))


def _random_tree(rng, n_features, depth, categorical=False):
    """A random unbalanced tree, breadth-first, with thresholds at -ZERO, 0, ZERO."""
    feature, threshold, left, right, default_left, flags, categories = [], [], [], [], [], [], {}
    queue = [0]
    nodes = [0]
    while queue:
        node = queue.pop(0)
        d = nodes[node]
        split = d < depth and (d == 0 or rng.random() < 0.8)
        feature.append(int(rng.integers(0, n_features)))
        threshold.append(float(rng.choice([-ZERO, 0.0, ZERO, -999.0, 1.5, -0.5,
                                           np.nextafter(ZERO, 1.0)])))
        default_left.append(bool(rng.random() < 0.5))
        flags.append(bool(rng.random() < 0.7))
        if split:
            left.append(len(nodes))
            right.append(len(nodes) + 1)
            nodes += [d + 1, d + 1]
            queue += [len(nodes) - 2, len(nodes) - 1]
            if categorical and rng.random() < 0.3:
                categories[node] = bitset_words(rng.choice(5, size=2, replace=False))
        else:
            left.append(-1)
            right.append(-1)
    return dict(feature=feature, threshold=threshold, left=left, right=right,
                default_left=default_left, missing_in_range=flags, categories=categories,
                leaf_value=rng.normal(size=len(nodes)))


def _ensemble(rng, missing_range, comparison, categorical, n_trees=4, n_features=3):
    builder = EnsembleBuilder(1)
    for t in range(n_trees):
        tree = _random_tree(rng, n_features, depth=4, categorical=categorical)
        builder.add_tree(comparison=comparison, output_start=t % 2, **tree)
    return builder.build(n_features=n_features, n_outputs=2, missing_range=missing_range,
                         categorical_rule="truncate", input_precision="float64")


def _inputs(rng, n_features, n=400):
    values = np.array([np.nan, 0.0, -0.0, ZERO, -ZERO, np.nextafter(ZERO, 1.0),
                       np.nextafter(-ZERO, -1.0), 1e-36, -1e-36, -999.0, np.nextafter(-999.0, 0),
                       np.inf, -np.inf, 1.5, -0.5, 2.0, 3.0, 1.0])
    X = rng.choice(values, size=(n, n_features))
    mix = rng.random(X.shape) < 0.2
    X[mix] = rng.normal(size=int(mix.sum()))
    return X


@pytest.mark.parametrize("missing_range", [(-ZERO, ZERO), (-999.0, -999.0), (-1e-36, 1e-36)])
@pytest.mark.parametrize("comparison", [LE, LT])
@pytest.mark.parametrize("categorical", [False, True])
def test_missing_range_reference_equals_strategy(strategy, precision, rng, missing_range,
                                                 comparison, categorical):
    ens = _ensemble(rng, missing_range, comparison, categorical)
    assert ens.has_missing_range
    X = _inputs(rng, ens.n_features)
    if precision == "float32":
        X = X.astype(np.float32).astype(np.float64)
    expected, _ = reference.predict(ens, X)
    raw, _ = run(ens, strategy, precision, X)
    np.testing.assert_array_equal(raw, expected)  # exact branches, sums in order


def test_missing_range_reference_routes_range_to_default():
    builder = EnsembleBuilder(1)
    builder.add_tree(feature=[0, -1, -1], threshold=[-1.0, 0, 0], left=[1, -1, -1],
                     right=[2, -1, -1], default_left=[True, False, False],
                     missing_in_range=[True, False, False], leaf_value=[0.0, 1.0, 2.0])
    ens = builder.build(n_features=1, n_outputs=1, missing_range=(-ZERO, ZERO))
    X = np.array([[0.0], [ZERO], [np.nextafter(ZERO, 1)], [np.nan], [-2.0]])
    raw = reference.predict_raw(ens, X.astype(np.float64))[:, 0]
    # float32 input precision: nextafter(ZERO) in float64 rounds to ZERO in float32.
    np.testing.assert_array_equal(raw, [1.0, 1.0, 1.0, 1.0, 1.0])
    ens64 = ens.replace(input_precision="float64")
    np.testing.assert_array_equal(reference.predict_raw(ens64, X)[:, 0], [1.0, 1.0, 2.0, 1.0, 1.0])


def test_missing_range_must_be_an_interval():
    builder = EnsembleBuilder(1)
    builder.add_tree(feature=[0, -1, -1], threshold=[0.0, 0, 0], left=[1, -1, -1],
                     right=[2, -1, -1], missing_in_range=True, leaf_value=[0.0, 1.0, 2.0])
    with pytest.raises(InvalidModelError, match="missing_range .* is not an interval"):
        builder.build(n_features=1, n_outputs=1, missing_range=(1.0, -1.0))
    with pytest.raises(InvalidModelError, match="missing_range has shape"):
        builder.build(n_features=1, n_outputs=1, missing_range=(1.0, 2.0, 3.0))
    ens = builder.build(n_features=1, n_outputs=1, missing_range=(-1.0, 1.0))
    with pytest.raises(InvalidModelError, match="missing_in_range has 2 entries"):
        ens.replace(missing_in_range=np.zeros(2, bool)).validate()


def test_softplus_post_transform(strategy, precision):
    builder = EnsembleBuilder(1)
    builder.add_tree(feature=[0, -1, -1], threshold=[0.0, 0, 0], left=[1, -1, -1],
                     right=[2, -1, -1], leaf_value=[0.0, -40.0, 3.0])
    ens = builder.build(n_features=1, n_outputs=1, post_transform="softplus")
    X = np.array([[-1.0], [1.0]])
    _, expected = reference.predict(ens, X)
    np.testing.assert_allclose(expected[:, 0], np.log1p(np.exp([-40.0, 3.0])), rtol=1e-15)
    _, got = run(ens, strategy, precision, X)
    np.testing.assert_allclose(got, expected, rtol=1e-12)  # float64 transforms on both routes


@pytest.mark.parametrize("transform", ["identity_binary", "step", "step_binary", "argmax"])
def test_xgboost_output_transforms(transform, precision):
    """Reference definitions and torch modules agree, incl. ties (argmax: first)."""
    from woodstar.ir.transforms import apply_post_transform
    from woodstar.lowering.post_transforms import PostTransform

    raw = np.array([[-1.0, 2.0, 2.0], [0.0, 0.0, -3.0], [0.75, -0.125, 0.5], [2.0**-100, 5.0, 4.0]])
    if transform != "argmax":
        raw = raw[:, :1]
    expected = {
        "identity_binary": np.hstack([1 - raw, raw]),
        "step": (raw > 0).astype(float),
        "step_binary": np.hstack([1 - (raw > 0), (raw > 0)]).astype(float),
        "argmax": np.array([[1.0], [0.0], [0.0], [1.0]]),
    }[transform]
    np.testing.assert_array_equal(apply_post_transform(transform, raw), expected)
    got = PostTransform(transform)(torch.from_numpy(raw.astype(precision))).numpy()
    np.testing.assert_array_equal(got, expected)


def _linear_ensemble(rng, linear_missing, n_features=4, n_trees=3, single_leaf=False):
    builder = EnsembleBuilder(1)
    for t in range(n_trees):
        if single_leaf:
            tree = dict(feature=[-1], threshold=[0.0], left=[-1], right=[-1],
                        leaf_value=[rng.normal()])
        else:
            tree = _random_tree(rng, n_features, depth=3)
            tree.pop("missing_in_range")
            tree.pop("categories")
        leaves = np.flatnonzero(np.asarray(tree["left"]) < 0)
        linear = {}
        for leaf in leaves:
            if single_leaf or rng.random() < 0.7:
                k = int(rng.integers(0, n_features + 1))
                features = np.concatenate([[-1], rng.choice(n_features, size=k, replace=False)])
                linear[int(leaf)] = (features, rng.normal(size=len(features)))
        builder.add_tree(linear=linear, output_start=t % 2, **tree)
    return builder.build(n_features=n_features, n_outputs=2, linear_missing=linear_missing,
                         input_precision="float64")


@pytest.mark.parametrize("linear_missing", ["leaf_value", "skip"])
@pytest.mark.parametrize("single_leaf", [False, True], ids=["trees", "single_leaf"])
def test_linear_leaves_reference_equals_strategy(strategy, precision, rng, linear_missing,
                                                 single_leaf):
    ens = _linear_ensemble(rng, linear_missing, single_leaf=single_leaf)
    assert ens.has_linear_leaves
    X = rng.normal(size=(300, ens.n_features))
    X[rng.random(X.shape) < 0.15] = np.nan
    X[rng.random(X.shape) < 0.03] = np.inf
    if precision == "float32":
        X = X.astype(np.float32).astype(np.float64)
    expected, _ = reference.predict(ens, X)
    raw, _ = run(ens, strategy, precision, X)
    np.testing.assert_array_equal(raw, expected)  # exact branches, sums in order


def test_linear_leaves_reference_semantics():
    builder = EnsembleBuilder(1)
    builder.add_tree(feature=[0, -1, -1], threshold=[0.0, 0, 0], left=[1, -1, -1],
                     right=[2, -1, -1], leaf_value=[0.0, 10.0, 20.0],
                     linear={1: ([-1, 1], [0.5, 2.0])})
    X = np.array([[-1.0, 3.0], [-1.0, np.nan], [1.0, 3.0]])
    ens = builder.build(n_features=2, n_outputs=1)
    np.testing.assert_array_equal(reference.predict_raw(ens, X)[:, 0], [6.5, 10.0, 20.0])
    skip = ens.replace(linear_missing="skip")
    np.testing.assert_array_equal(reference.predict_raw(skip, X)[:, 0], [6.5, 0.5, 20.0])


def test_linear_leaves_validation():
    builder = EnsembleBuilder(1)
    builder.add_tree(feature=[0, -1, -1], threshold=[0.0, 0, 0], left=[1, -1, -1],
                     right=[2, -1, -1], leaf_value=[0.0, 1.0, 2.0], linear={1: ([-1, 5], [1.0, 1.0])})
    with pytest.raises(InvalidModelError, match=r"linear features must lie in -1\.\.1"):
        builder.build(n_features=2, n_outputs=1)
    ens = builder.build(n_features=6, n_outputs=1)
    with pytest.raises(InvalidModelError, match="linear_missing 'drop' not in"):
        ens.replace(linear_missing="drop").validate()
    with pytest.raises(InvalidModelError, match="node 0 has linear terms 0..2 but is not a leaf"):
        ens.replace(linear_size=np.array([2, 0, 0]), linear_start=np.array([0, 0, 0])).validate()
    with pytest.raises(InvalidModelError, match="a linear coefficient is not finite"):
        ens.replace(linear_coef=np.array([1.0, np.inf])).validate()
    with pytest.raises(InvalidModelError, match="2 linear features for 1 coefficients"):
        ens.replace(linear_coef=np.array([1.0])).validate()
