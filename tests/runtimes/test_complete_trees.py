"""The compiled walk's complete-tree copies (``complete_trees`` in c_walk.c: on a CPU
with AVX-512 or AVX2, clean row blocks walk the float route's trees of depth <= 8
sixteen or eight rows per vector, reading each level's nodes from a table by the rows'
positions) against the IR's reference and against the node walk, to the bit, in each
form the CPU has: single-leaf trees, trees deeper than 8 beside shallow ones, vector
leaves, float32 sums, values on thresholds and +-inf, partial vectors and blocks, and
rows split over threads."""

import numpy as np
import pytest

from woodstar.ir.reference import predict
from woodstar.runtimes import c_walk

from tests.lowering.test_strategies import CASES, inputs, random_ensemble

pytestmark = pytest.mark.skipif(not c_walk.available(), reason=str(c_walk.unavailable_reason()))

CLEAN_CASES = ["stump-sum", "deep-unbalanced", "softmax-3-outputs", "vector-leaves",
               "vector-leaves-in-blocks", "forest-classifier", "binary-sigmoid"]


def _ensemble(rng, case, sum32):
    # depths 0 to 7 unless the case sets its own: both sides of AVX2_LEVELS_IN_REGISTERS
    ens = random_ensemble(rng, n_trees=40, n_features=6, **{"max_depth": 7, **CASES[case]})
    if sum32:  # XGBoost's float32 sums: its leaves and base score are float32 values
        ens = ens.replace(sum_precision="float32", input_precision="float32",
                          leaf_value=ens.leaf_value.astype(np.float32).astype(np.float64),
                          base_score=ens.base_score.astype(np.float32).astype(np.float64))
    return ens


def _clean_rows(rng, ens, n):
    X = inputs(rng, ens.n_features, n=n)  # many values on thresholds, and +-inf
    X[np.isnan(X)] = -0.1
    return X.astype(np.float32)


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [16, 40, 64, 65, 203])
@pytest.mark.parametrize("case, sum32", [(c, False) for c in CLEAN_CASES] + [("binary-sigmoid", True)])
def test_complete_trees_match_the_reference_and_the_node_walk(case, sum32, rows, threads, rng,
                                                              monkeypatch, simd_form):
    ens = _ensemble(rng, case, sum32)
    X = _clean_rows(rng, ens, rows)
    walk = c_walk.CTreeWalk(ens, "float32", n_threads=threads)
    walk.parallel_min_steps = 1  # threads from the first row
    if c_walk.simd_walk():  # elsewhere no copies are made
        assert c_walk.simd_walk() == simd_form
        assert (walk.ct_start >= 0).sum() == (walk.depths <= c_walk.COMPLETE_TREE_MAX_DEPTH).sum() > 0
    raw, transformed = walk(X)
    raw_ref, transformed_ref = predict(ens, X.astype(np.float64))
    np.testing.assert_array_equal(raw, raw_ref)
    if not sum32:  # float32 links: XGBoost's, tested in test_c_walk_exact.py
        np.testing.assert_array_equal(transformed, transformed_ref)
    monkeypatch.setattr(c_walk, "COMPLETE_TREE_MAX_DEPTH", -1)  # no copies: the node walk
    node_walk = c_walk.CTreeWalk(ens, "float32", n_threads=threads)
    assert node_walk.ct_start is None
    np.testing.assert_array_equal(node_walk(X)[0], raw)


def test_a_block_with_nan_and_the_float64_route_take_no_copies(rng):
    ens = _ensemble(rng, "stump-sum", False)
    X = _clean_rows(rng, ens, 130)
    X[100, 2] = np.nan  # the second block keeps the node walk's missing test
    raw, _ = c_walk.CTreeWalk(ens, "float32")(X)
    np.testing.assert_array_equal(raw, predict(ens, X.astype(np.float64))[0])
    assert c_walk.CTreeWalk(ens, "float64").ct_start is None


@pytest.mark.skipif(not __import__("os").path.exists("/proc/cpuinfo"), reason="reads /proc/cpuinfo")
def test_the_widest_simd_walk_the_cpu_has_is_taken():
    with open("/proc/cpuinfo") as info:
        flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    expected = "avx512" if "avx512f" in flags else "avx2" if "avx2" in flags else None
    assert c_walk.simd_walk() == expected


def test_the_walk_can_be_limited_to_a_narrower_form():
    widest = c_walk.simd_walk()
    try:
        assert c_walk.limit_simd_walk(None) is None and c_walk.simd_walk() is None
        assert c_walk.limit_simd_walk("avx512") == widest
    finally:
        c_walk.limit_simd_walk("avx512")


@pytest.mark.parametrize("rows", [1, 2, 3, 5, 7])
@pytest.mark.parametrize("case, sum32", [(c, False) for c in CLEAN_CASES] + [("binary-sigmoid", True)])
def test_few_rows_walk_the_copies_and_match_the_node_lanes(case, sum32, rows, rng, monkeypatch,
                                                           simd_form):
    """Below 8 rows, rows without NaN walk groups of trees that all have copies through
    the copies (trees deeper than 8 keep the node lanes: "deep-unbalanced" mixes both);
    a NaN anywhere sends the call to the node lanes. Sums are the reference's bits."""
    ens = _ensemble(rng, case, sum32)
    X = _clean_rows(rng, ens, rows)
    walk = c_walk.CTreeWalk(ens, "float32")
    raw_ref = predict(ens, X.astype(np.float64))[0]
    np.testing.assert_array_equal(walk(X)[0], raw_ref)
    X_nan = X.copy()
    X_nan[-1, 0] = np.nan
    np.testing.assert_array_equal(walk(X_nan)[0], predict(ens, X_nan.astype(np.float64))[0])
    monkeypatch.setattr(c_walk, "COMPLETE_TREE_MAX_DEPTH", -1)  # no copies: the node lanes
    np.testing.assert_array_equal(c_walk.CTreeWalk(ens, "float32")(X)[0], raw_ref)
