"""The compiled walk's thread split, measured per walk when it is made: the rule that
picks the split's first size from the timings, where the measured size lands, and the
answers on either side of it."""

import numpy as np
import pytest

from woodstar.runtimes import c_walk

from tests.lowering.test_strategies import inputs, random_ensemble

pytestmark = pytest.mark.skipif(not c_walk.available(), reason=str(c_walk.unavailable_reason()))

SIZES = [10, 20, 40, 80, 160]


@pytest.mark.parametrize("pays, rows", [
    ([True] * 5, 10),                            # pays everywhere: from the smallest
    ([False] * 5, 320),                          # nowhere: past the largest probe
    ([False, False, True, True, True], 40),
    ([True, False, True, True, True], 40),       # a paying size below a loss is noise
    ([True, True, True, True, False], 320),      # the largest did not pay
])
def test_the_split_starts_where_it_pays_at_that_size_and_every_larger_one(pays, rows):
    assert c_walk.first_paying_size(SIZES, pays) == rows


def _walk(rng, n_threads, depth=8):
    ens = random_ensemble(rng, n_trees=60, max_depth=depth, n_features=12)
    return ens, c_walk.CTreeWalk(ens, "float32", n_threads=n_threads)


def test_a_walk_of_several_threads_measures_where_its_split_starts(rng):
    ens, walk = _walk(rng, 2)
    rule = c_walk.PARALLEL_MIN_STEPS // walk.steps_per_row
    rows, remainder = divmod(walk.parallel_min_steps, walk.steps_per_row)
    assert remainder == 0
    smallest = max(4, int(rule * min(c_walk.SPLIT_PROBE_FACTORS)))
    assert smallest <= rows <= 2 * int(rule * max(c_walk.SPLIT_PROBE_FACTORS))
    X = inputs(rng, 12, max(rows + 1, 8)).astype(np.float32)
    one = c_walk.CTreeWalk(ens, "float32", n_threads=1)
    below, above = X[:rows - 1], X[:rows]
    np.testing.assert_array_equal(walk(below)[0], one(below)[0])
    assert walk.last_threads == 1
    np.testing.assert_array_equal(walk(above)[0], one(above)[0])
    assert walk.last_threads == 2


def test_one_thread_and_the_setting_off_keep_the_step_count(rng, monkeypatch):
    _, walk = _walk(rng, 1)
    assert walk.parallel_min_steps == c_walk.PARALLEL_MIN_STEPS
    monkeypatch.setattr(c_walk, "SPLIT_CALIBRATION", False)
    _, walk = _walk(rng, 2)
    assert walk.parallel_min_steps == c_walk.PARALLEL_MIN_STEPS


def test_the_probe_rows_reach_both_sides_of_the_splits(rng):
    _, walk = _walk(rng, 1)
    X = walk._probe_rows(512)
    internal = walk.nodes["threshold"] != np.inf
    feature = walk.nodes["feature"][internal]
    threshold = walk.nodes["threshold"][internal]
    left = (X[:, feature] <= threshold).mean(axis=0)
    assert X.dtype == walk.dtype and np.isfinite(X).all()
    assert 0.02 < left.mean() < 0.98  # not every row down one side of every node
