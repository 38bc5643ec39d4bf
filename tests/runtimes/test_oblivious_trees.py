"""The compiled walk's oblivious-tree walk (``oblivious_trees`` in c_walk.c: perfect
trees whose every level tests one feature against one threshold and sends NaN one way,
CatBoost's symmetric trees, take their leaf from the bits of their level comparisons)
against the IR's reference, the node walk and the complete-tree walk, to the bit, in
each SIMD form the CPU has: NaN sent either way per level, values on thresholds and one
float32 step away, +-inf, depths 0 to 8, vector leaves, float32 sums, partial vectors
and blocks, calls of fewer than 8 rows (a plain loop over trees and rows when every
tree is oblivious), threads; and which trees are recognised as oblivious."""

import numpy as np
import pytest

from woodstar.ir.builder import EnsembleBuilder
from woodstar.ir.reference import predict
from woodstar.runtimes import c_walk

pytestmark = pytest.mark.skipif(not c_walk.available(), reason=str(c_walk.unavailable_reason()))

THRESHOLDS = np.round(np.linspace(-1.5, 1.5, 31), 1)


def _perfect_tree(rng, depth, n_features, width, levels_agree=True):
    """A perfect tree of ``depth``; with ``levels_agree`` each level has one split (an
    oblivious tree), else one node of its last level tests another threshold."""
    n_internal = 2 ** depth - 1
    n = n_internal + 2 ** depth
    feature = np.full(n, -1)
    threshold = np.zeros(n)
    default_left = np.zeros(n, bool)
    comparison = np.zeros(n, np.int64)
    left, right = np.full(n, -1), np.full(n, -1)
    for level in range(depth):
        nodes = np.arange(2 ** level - 1, 2 ** (level + 1) - 1)
        feature[nodes] = rng.integers(n_features)
        threshold[nodes] = rng.choice(THRESHOLDS)
        default_left[nodes] = rng.random() < 0.5
        comparison[nodes] = rng.integers(0, 2)  # LE or LT, the same on the whole level
        left[nodes], right[nodes] = 2 * nodes + 1, 2 * nodes + 2
    if not levels_agree:
        threshold[n_internal - 1] += 0.25
    leaf_value = np.zeros((n, width))
    leaf_value[n_internal:] = rng.normal(size=(2 ** depth, width))
    return dict(feature=feature, threshold=threshold, left=left, right=right,
                default_left=default_left, leaf_value=leaf_value, comparison=comparison)


def _ensemble(rng, n_trees=60, n_features=7, width=1, n_outputs=1, depths=(0, 8),
              disagreeing=(), sum32=False, **fields):
    builder = EnsembleBuilder(width)
    for t in range(n_trees):
        depth = int(rng.integers(depths[0], depths[1] + 1))
        if t in disagreeing:
            depth = max(depth, 2)
        builder.add_tree(**_perfect_tree(rng, depth, n_features, width, t not in disagreeing),
                         output_start=t % (n_outputs - width + 1))
    ens = builder.build(n_features=n_features, n_outputs=n_outputs,
                        base_score=rng.normal(size=n_outputs), **fields)
    if sum32:  # XGBoost-style float32 sums: float32 leaves and base score
        ens = ens.replace(sum_precision="float32", input_precision="float32",
                          leaf_value=ens.leaf_value.astype(np.float32).astype(np.float64),
                          base_score=ens.base_score.astype(np.float32).astype(np.float64))
    return ens


def _rows(rng, n_features, n, nan=True):
    X = rng.choice(THRESHOLDS, size=(n, n_features)).astype(np.float32)  # on thresholds
    step = rng.random(X.shape) < 0.2  # and one float32 step away, either side
    X[step] = np.nextafter(X[step], np.where(rng.random(step.sum()) < 0.5, -np.inf, np.inf)
                           .astype(np.float32))
    X[rng.random(X.shape) < 0.03] = np.inf
    X[rng.random(X.shape) < 0.03] = -np.inf
    if nan:
        X[rng.random(X.shape) < 0.1] = np.nan
    return X


CASES = {
    "one-output": dict(),
    "shallow": dict(depths=(0, 4)),
    "softmax-3-outputs": dict(n_outputs=3, post_transform="softmax"),
    "vector-leaves": dict(width=2, n_outputs=2),
    "mean": dict(aggregation="mean", post_transform="sigmoid"),
    "float32-sums": dict(sum32=True),
}


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [1, 2, 7, 8, 15, 16, 17, 40, 64, 65, 203])
@pytest.mark.parametrize("case", sorted(CASES))
def test_oblivious_walk_matches_the_reference_and_the_other_walks(case, rows, threads, rng,
                                                                  monkeypatch, simd_form):
    ens = _ensemble(rng, **CASES[case])
    X = _rows(rng, ens.n_features, rows)
    walk = c_walk.CTreeWalk(ens, "float32", n_threads=threads)
    walk.parallel_min_steps = 1  # threads from the first row
    assert (walk.ob_nan_right >= 0).all()  # every tree of these is oblivious
    raw, transformed = walk(X)
    raw_ref, transformed_ref = predict(ens, X.astype(np.float64))
    np.testing.assert_array_equal(raw, raw_ref)
    if not CASES[case].get("sum32"):  # float32 links: XGBoost's, tested elsewhere
        np.testing.assert_array_equal(transformed, transformed_ref)
    monkeypatch.setattr(c_walk, "OBLIVIOUS_TREES", False)  # the complete-tree and node walks
    complete = c_walk.CTreeWalk(ens, "float32", n_threads=threads)
    assert complete.ob_nan_right is None
    np.testing.assert_array_equal(complete(X)[0], raw)
    monkeypatch.setattr(c_walk, "COMPLETE_TREE_MAX_DEPTH", -1)
    np.testing.assert_array_equal(c_walk.CTreeWalk(ens, "float32")(X)[0], raw)


def test_only_trees_whose_levels_agree_are_oblivious(rng, simd_form):
    disagreeing = {3, 10, 11, 40}
    ens = _ensemble(rng, depths=(2, 8), disagreeing=disagreeing)
    walk = c_walk.CTreeWalk(ens, "float32")
    marked = set(np.flatnonzero(walk.ob_nan_right >= 0).tolist())
    assert marked == set(range(ens.n_trees)) - disagreeing
    # each level's NaN side is recorded, bit l for level l
    first = np.asarray(ens.tree_offsets[:-1])
    for t in sorted(marked)[:5]:
        depth = int(walk.depths[t])
        expected = sum((not ens.default_left[first[t] + 2 ** level - 1]) << level
                       for level in range(depth))
        assert walk.ob_nan_right[t] == expected
    assert not walk._model.ob_all  # few rows: the node lanes, not the oblivious loop
    X = _rows(rng, ens.n_features, 300)
    for rows in (1, 3, 300):
        np.testing.assert_array_equal(walk(X[:rows])[0],
                                      predict(ens, X[:rows].astype(np.float64))[0])


def test_trees_past_the_copies_depth_and_the_float64_route_are_not_oblivious(rng):
    ens = _ensemble(rng, n_trees=4, depths=(9, 9))
    assert c_walk.CTreeWalk(ens, "float32").ob_nan_right is None  # no complete copies
    ens = _ensemble(rng, n_trees=4)
    assert c_walk.CTreeWalk(ens, "float64").ob_nan_right is None
    X = _rows(rng, ens.n_features, 100)
    np.testing.assert_array_equal(c_walk.CTreeWalk(ens, "float64")(X.astype(np.float64))[0],
                                  predict(ens, X.astype(np.float64))[0])


def test_catboost_symmetric_trees_take_the_oblivious_walk_and_keep_catboost_answers(rng):
    catboost = pytest.importorskip("catboost")
    import woodstar
    from woodstar.frontends.catboost import from_catboost

    X = rng.normal(size=(2000, 6)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] ** 2 - X[:, 2] > 0.5).astype(int)
    X[rng.random(X.shape) < 0.1] = np.nan
    for nan_mode in ("Min", "Max"):
        model = catboost.CatBoostClassifier(iterations=40, depth=5, verbose=0, random_seed=0,
                                            nan_mode=nan_mode, allow_writing_files=False)
        model.fit(X, y)
        walk = c_walk.CTreeWalk(from_catboost(model).ensemble, "float32")
        if walk.ct_start is not None:  # a CPU with a SIMD walk
            assert (walk.ob_nan_right >= 0).all()
            assert set(walk.ob_nan_right.tolist()) == ({0} if nan_mode == "Min" else {31})
        converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "c-walk"})
        Xt = rng.normal(size=(501, 6)).astype(np.float32)
        Xt[rng.random(Xt.shape) < 0.1] = np.nan
        Xt[:5] = X[:5]
        np.testing.assert_array_equal(converted.predict_proba(Xt), model.predict_proba(Xt))


def test_oblivious_levels_count_less_toward_splitting_rows_over_threads(rng, monkeypatch):
    ens = _ensemble(rng, n_trees=200, depths=(6, 6))
    walk = c_walk.CTreeWalk(ens, "float32", n_threads=2)
    if walk.ob_nan_right is None:
        pytest.skip("this CPU has no SIMD walk, so no oblivious walk")
    monkeypatch.setattr(c_walk, "OBLIVIOUS_TREES", False)
    node_walk = c_walk.CTreeWalk(ens, "float32", n_threads=2)
    rows = walk.parallel_min_steps // node_walk.steps_per_row + 1  # the node walk splits
    assert rows * walk.steps_per_row < walk.parallel_min_steps
    X = _rows(rng, ens.n_features, rows)
    np.testing.assert_array_equal(walk(X)[0], node_walk(X)[0])
    assert (walk.last_threads, node_walk.last_threads) == (1, 2)
