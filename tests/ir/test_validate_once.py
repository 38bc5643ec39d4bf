"""TreeEnsemble.validate runs its checks once per instance, checks all trees at once,
and still refuses every broken ensemble with the message of the tree-by-tree walk."""

import numpy as np
import pytest

from woodstar._calibrate import random_forest
from woodstar.exceptions import InvalidModelError
from woodstar.ir import tree_ensemble
from woodstar.ir.builder import EnsembleBuilder, bitset_words
from woodstar.ir.tree_ensemble import TreeEnsemble


def _categorical_forest(rng):
    builder = EnsembleBuilder(1)
    for _ in range(6):
        builder.add_tree(feature=[0, 1, 2, 0, 0], threshold=[0.5, -1.0, 0.0, 0.0, 0.0],
                         left=[1, 3, -1, -1, -1], right=[2, 4, -1, -1, -1],
                         leaf_value=rng.normal(size=5),
                         categories={1: bitset_words(rng.integers(0, 40, size=3))})
    return builder.build(n_features=3, n_outputs=1)


def _tree_by_tree_error(ens):
    """The message of the plain walk over every tree (None: every tree passes)."""
    try:
        for t in range(ens.n_trees):
            ens._validate_tree(t)
    except InvalidModelError as error:
        return str(error)
    return None


# (field, values a corruption draws from): children, features, thresholds, comparison
# codes, leaves, categorical bitsets, each able to break one rule or several.
CORRUPTIONS = {
    "left": lambda rng, n: rng.integers(-2, n + 3),
    "right": lambda rng, n: rng.integers(-2, n + 3),
    "feature": lambda rng, n: rng.integers(-2, 40),
    "threshold": lambda rng, n: rng.choice([np.nan, np.inf, 0.0]),
    "comparison": lambda rng, n: rng.integers(0, 4),
    "leaf_value": lambda rng, n: rng.choice([np.nan, np.inf, -np.inf, 1.0]),
    "cat_bitset_start": lambda rng, n: rng.integers(-3, 30),
    "cat_bitset_size": lambda rng, n: rng.integers(0, 30),
}


@pytest.mark.parametrize("seed", range(300))
def test_all_trees_at_once_refuses_what_the_walk_refuses_with_its_message(seed):
    rng = np.random.default_rng(seed)
    ens = random_forest(depth=4, n_trees=7, n_features=30, seed=seed) if seed % 3 \
        else _categorical_forest(rng)
    arrays = {}
    for _ in range(int(rng.integers(1, 4))):
        field = str(rng.choice(list(CORRUPTIONS)))
        array = arrays.get(field, getattr(ens, field)).copy()
        node = int(rng.integers(ens.n_nodes))
        array[node] = CORRUPTIONS[field](rng, ens.n_nodes)
        arrays[field] = array
    broken = ens.replace(**arrays)
    expected = _tree_by_tree_error(broken)
    if expected is None:
        assert broken.validate() is broken
    else:
        with pytest.raises(InvalidModelError) as error:
            broken.validate()
        assert str(error.value) == expected


def test_a_success_is_remembered_per_instance(monkeypatch):
    ens = random_forest(depth=3, n_trees=4, seed=1)
    calls = []
    original = TreeEnsemble._validate
    monkeypatch.setattr(TreeEnsemble, "_validate", lambda self: calls.append(1) or original(self))
    assert ens.validate() is ens and ens.validate() is ens
    assert calls == []  # the builder validated it already
    again = ens.replace(post_transform="sigmoid")
    again.validate()
    again.validate()
    assert calls == [1]


def test_a_failure_is_not_remembered():
    ens = random_forest(depth=3, n_trees=4, seed=2)
    left = ens.left.copy()
    left[0] = 0
    broken = ens.replace(left=left)
    for _ in range(2):
        with pytest.raises(InvalidModelError, match="must come after their parent"):
            broken.validate()
    assert broken not in tree_ensemble._VALIDATED


def test_a_saved_ensemble_is_validated_when_loaded():
    ens = random_forest(depth=3, n_trees=4, seed=3)
    meta, arrays = ens.to_saved()
    arrays = dict(arrays, feature=arrays["feature"].copy())
    arrays["feature"][0] = 99
    loaded = TreeEnsemble.from_saved(meta, arrays)
    with pytest.raises(InvalidModelError, match="feature 99 is outside"):
        loaded.validate()


def test_views_of_a_callers_buffer_are_copied():
    """A remembered success must not outlive a change to the caller's buffer."""
    ens = random_forest(depth=3, n_trees=4, seed=4)
    buffer = np.concatenate([ens.threshold, [7.0]])
    view = buffer[:-1]
    kept = ens.replace(threshold=view).validate()
    buffer[:] = np.nan
    assert not np.isnan(kept.threshold).any()
    assert kept.threshold.base is None and not kept.threshold.flags.writeable


@pytest.mark.parametrize("seed", range(20))
def test_depths_of_a_validated_ensemble_match_the_walk(seed):
    ens = random_forest(depth=1 + seed % 7, n_trees=9, seed=seed)
    fresh = ens.replace()  # not validated: the node-by-node walk
    assert fresh not in tree_ensemble._VALIDATED
    np.testing.assert_array_equal(ens.tree_depths(), fresh.tree_depths())
    assert ens.tree_depths().dtype == fresh.tree_depths().dtype


def test_an_unpickled_ensemble_with_writeable_arrays_is_checked_every_time():
    import pickle

    ens = pickle.loads(pickle.dumps(random_forest(depth=3, n_trees=4, seed=5)))
    assert ens.validate() is ens
    if ens.feature.flags.writeable:  # NumPy gives unpickled arrays back writeable
        assert ens not in tree_ensemble._VALIDATED
        ens.feature[0] = 99
        with pytest.raises(InvalidModelError, match="feature 99 is outside"):
            ens.validate()


def test_views_of_frozen_arrays_are_not_copied_again():
    ens = random_forest(depth=3, n_trees=4, seed=6)
    again = ens.replace(post_transform="sigmoid")
    assert again.leaf_value.base is ens.leaf_value.base  # the (n, 1) view of one array
    assert again.threshold is ens.threshold
