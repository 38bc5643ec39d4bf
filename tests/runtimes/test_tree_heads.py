"""The compiled walk's tree heads (``tree_heads`` in c_walk.c: on a CPU with AVX-512 or
AVX2, a clean row block walks the first HEAD_LEVELS levels of each tree deeper than
the complete-tree copies take through a complete copy of those levels, 8 or 16 rows per
vector, and the node walk goes on from the node each row reached). Against the IR's
reference and the walk without heads, to the bit, in each SIMD form the CPU has: leaves
above the head's last level, trees too shallow for a head beside deep ones, vector
leaves, float32 sums, partial vectors and blocks, blocks with NaN, rows on two threads,
and LightGBM's leaf-wise trees against LightGBM itself."""

import numpy as np
import pytest

from woodstar.ir.builder import EnsembleBuilder
from woodstar.ir.reference import predict
from woodstar.runtimes import c_walk

from tests.lowering.test_strategies import inputs, random_tree

pytestmark = pytest.mark.skipif(not c_walk.available(), reason=str(c_walk.unavailable_reason()))

CASES = {
    "one-output": dict(),
    "softmax-3-outputs": dict(n_outputs=3, post_transform="softmax"),
    "vector-leaves": dict(leaf_width=2, n_outputs=2),
    "float32-sums": dict(sum32=True),
}


def _deep_ensemble(rng, case):
    fields = dict(CASES[case])
    sum32 = fields.pop("sum32", False)
    # every third tree at most 6 deep, the others up to 12: trees above and below the
    # copies' limit (8) in every ensemble, leaves at every level
    ens = _mixed_depths(rng, n_trees=24, n_features=6, **fields)
    if sum32:  # XGBoost's float32 sums: its leaves and base score are float32 values
        ens = ens.replace(sum_precision="float32", input_precision="float32",
                          leaf_value=ens.leaf_value.astype(np.float32).astype(np.float64),
                          base_score=ens.base_score.astype(np.float32).astype(np.float64))
    return ens


def _mixed_depths(rng, n_trees, n_features, leaf_width=1, n_outputs=1, **fields):
    builder = EnsembleBuilder(leaf_width)
    for t in range(n_trees):
        if t == 0:  # a complete tree of depth 10: deep, and 2 047 nodes
            tree = random_tree(rng, n_features, 10, leaf_width, branch_probability=1.0)
        elif t == 1:  # depth 12 on a narrow path: deep, and few nodes
            tree = _narrow_tree(rng, n_features, 12, leaf_width)
        else:
            tree = random_tree(rng, n_features, 6 if t % 3 == 2 else 12, leaf_width)
        builder.add_tree(**tree, comparison=rng.integers(0, 2, len(tree["feature"])),
                         output_start=t % (n_outputs - leaf_width + 1))
    return builder.build(n_features=n_features, n_outputs=n_outputs,
                         base_score=rng.normal(size=n_outputs), **fields)


def _narrow_tree(rng, n_features, depth, leaf_width):
    """A tree `depth` levels deep whose every split has a leaf on one side (the side drawn
    at random): 2 * depth + 1 nodes, parents before children."""
    n = 2 * depth + 1
    feature, threshold = [-1] * n, [0.0] * n
    left, right = [-1] * n, [-1] * n
    for level in range(depth):
        split, leaf, on = 2 * level, 2 * level + 1, 2 * level + 2  # node, its leaf, the path
        feature[split] = int(rng.integers(0, n_features))
        threshold[split] = float(np.round(rng.normal(), 1))  # ties with rounded inputs
        left[split], right[split] = (leaf, on) if rng.integers(0, 2) else (on, leaf)
    return dict(feature=feature, threshold=threshold, left=left, right=right,
                default_left=[bool(b) for b in rng.integers(0, 2, n)],
                leaf_value=[rng.normal(size=leaf_width) for _ in range(n)], categories={})


def _clean_rows(rng, ens, n):
    X = inputs(rng, ens.n_features, n=n)  # many values on thresholds, and +-inf
    X[np.isnan(X)] = -0.1
    return X.astype(np.float32)


def _walk(ens, monkeypatch, head_levels, threads=1):
    monkeypatch.setattr(c_walk, "HEAD_LEVELS", head_levels)
    walk = c_walk.CTreeWalk(ens, "float32", n_threads=threads)
    walk.parallel_min_steps = 1  # threads from the first row
    return walk


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [16, 40, 64, 65, 203])
@pytest.mark.parametrize("case", list(CASES))
def test_heads_match_the_reference_and_the_walk_without_heads(case, rows, threads, rng,
                                                              monkeypatch, simd_form):
    ens = _deep_ensemble(rng, case)
    X = _clean_rows(rng, ens, rows)
    walk = _walk(ens, monkeypatch, c_walk.HEAD_LEVELS, threads)
    deep = walk.depths > max(c_walk.COMPLETE_TREE_MAX_DEPTH, c_walk.HEAD_LEVELS)
    assert deep.any() and (~deep).any()
    np.testing.assert_array_equal(walk.hd_start >= 0, deep)
    raw, transformed = walk(X)
    raw_ref, transformed_ref = predict(ens, X.astype(np.float64))
    np.testing.assert_array_equal(raw, raw_ref)
    if case != "float32-sums":  # float32 links: XGBoost's, tested in test_c_walk_exact.py
        np.testing.assert_array_equal(transformed, transformed_ref)
    without = _walk(ens, monkeypatch, 0, threads)
    assert without.hd_start is None
    np.testing.assert_array_equal(without(X)[0], raw)


@pytest.mark.parametrize("head_levels", [1, 3, 5, 6, 8])
def test_every_head_size_gives_the_same_sums(head_levels, rng, monkeypatch, simd_form):
    """Heads whose levels sit in one register, in two (AVX2's 16 nodes), in AVX-512's
    register pairs, or are gathered from the level's table (AVX2 beyond 16 nodes)."""
    ens = _deep_ensemble(rng, "one-output")
    X = _clean_rows(rng, ens, 150)
    walk = _walk(ens, monkeypatch, head_levels)
    assert (walk.hd_start >= 0).any()
    np.testing.assert_array_equal(walk(X)[0], predict(ens, X.astype(np.float64))[0])


def test_a_head_leads_each_row_to_the_node_it_reached(rng, monkeypatch):
    """Each entry is the node a row arrives at after HEAD_LEVELS steps from the root, or
    the leaf it stopped at above them."""
    ens = _deep_ensemble(rng, "one-output")
    walk = _walk(ens, monkeypatch, 5)
    if walk.hd_start is None:
        pytest.skip("this CPU has no SIMD walk: no heads are made")
    nodes, levels = walk.nodes, 5
    for tree in np.flatnonzero(walk.hd_start >= 0):
        start = walk.hd_start[tree]
        checked = 0
        for position in range(1 << levels):
            node, reachable = walk.roots[tree], True
            for bit in reversed(range(levels)):  # the position's bits: right turns, top first
                right_turn = (position >> bit) & 1
                if nodes["right"][node] == node + 1:  # a leaf: rows pass on to the left
                    reachable &= not right_turn
                    continue
                node = nodes["right"][node] - (1 - right_turn)
            if reachable:
                assert walk.hd_entry[start + position] == node, (tree, position)
                checked += 1
        assert checked >= levels + 1  # a path of leaves at most, each one slot


def test_a_block_with_nan_walks_from_the_root(rng, monkeypatch):
    ens = _deep_ensemble(rng, "softmax-3-outputs")
    X = _clean_rows(rng, ens, 200)
    X[70, 1] = np.nan  # the second block keeps the node walk's missing test
    X[150:, 3] = np.nan  # and so does the third
    walk = _walk(ens, monkeypatch, c_walk.HEAD_LEVELS)
    np.testing.assert_array_equal(walk(X)[0], predict(ens, X.astype(np.float64))[0])


def test_the_float64_route_takes_no_heads(rng, monkeypatch):
    ens = _deep_ensemble(rng, "one-output")
    assert _walk(ens, monkeypatch, c_walk.HEAD_LEVELS).hd_start is not None or not c_walk.simd_walk()
    assert c_walk.CTreeWalk(ens, "float64").hd_start is None


def test_lightgbm_leaf_wise_trees_match_lightgbm(rng, simd_form):
    lightgbm = pytest.importorskip("lightgbm")
    import woodstar

    X = rng.normal(size=(3000, 8)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int) + (X[:, 3] > 0.5)
    model = lightgbm.LGBMClassifier(n_estimators=15, num_leaves=80, min_child_samples=5,
                                    verbose=-1).fit(X, y)
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "c-walk"})
    X_test = np.round(rng.normal(size=(500, 8)), 1).astype(np.float32)
    X_test[300:310, 2] = np.nan  # one block with NaN, the others clean
    got = converted.predict_proba(X_test)
    np.testing.assert_array_equal(got, model.predict_proba(X_test))


def test_the_kernel_takes_the_heads_in_whole_blocks_only(rng, monkeypatch, simd_form):
    """Entries pointed back at each tree's root make the heads' rows walk too few levels:
    the sums change where the kernel reads the heads (a whole block of 64 clean rows,
    and a whole block with NaN through its widened copy) and nowhere else (a call of 63
    rows, a call's last block)."""
    ens = _deep_ensemble(rng, "one-output")
    walk = _walk(ens, monkeypatch, c_walk.HEAD_LEVELS)
    X = _clean_rows(rng, ens, 64 + 63)
    X_nan = X[:64].copy()
    X_nan[5, 0] = np.nan
    for tree in np.flatnonzero(walk.hd_start >= 0):
        start = walk.hd_start[tree]
        walk.hd_entry[start:start + (1 << c_walk.HEAD_LEVELS)] = walk.roots[tree]
    raw, expected = walk(X)[0], predict(ens, X.astype(np.float64))[0]
    assert not np.array_equal(raw[:64], expected[:64])
    np.testing.assert_array_equal(raw[64:], expected[64:])
    np.testing.assert_array_equal(walk(X[:63])[0], expected[:63])
    assert not np.array_equal(walk(X_nan)[0], predict(ens, X_nan.astype(np.float64))[0])


@pytest.mark.parametrize("threads", [1, 2])
def test_clean_blocks_under_sixteen_rows_match_the_reference(rng, monkeypatch, threads):
    """Deep trees' clean blocks of 16 rows or more step over the node arrays; smaller
    ones (calls of 8-15 rows, a call's last block) over the arrays in trees of at most
    DEEP_SMALL_TREE_NODES (512) nodes, over the node records in larger trees. Every size
    between, a last block of each size, and the walk with no arrays give the same bits."""
    ens = _deep_ensemble(rng, "vector-leaves")
    with_arrays = _walk(ens, monkeypatch, c_walk.HEAD_LEVELS, threads)
    assert with_arrays.na_feature is not None
    deep_sizes = np.diff(with_arrays.roots)[with_arrays.depths > c_walk.COMPLETE_TREE_MAX_DEPTH]
    assert (deep_sizes <= 512).any() and (deep_sizes > 512).any()  # both kinds of deep tree
    monkeypatch.setattr(c_walk.CTreeWalk, "_node_arrays", _no_node_arrays)
    without_arrays = _walk(ens, monkeypatch, c_walk.HEAD_LEVELS, threads)
    for rows in [*range(8, 18), 64 + 9, 64 + 15, 64 + 16]:
        X = _clean_rows(rng, ens, rows)
        raw = with_arrays(X)[0]
        np.testing.assert_array_equal(raw, predict(ens, X.astype(np.float64))[0],
                                      err_msg=f"{rows} rows")
        np.testing.assert_array_equal(without_arrays(X)[0], raw, err_msg=f"{rows} rows")


def _no_node_arrays(walk, dtype):
    walk.na_feature = None
    return None, None, None
