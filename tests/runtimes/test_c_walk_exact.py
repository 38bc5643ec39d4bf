"""The compiled walk against the IR's reference to the bit, where the route-level tests
of test_cpu_routes.py do not reach: categorical splits under each categorical rule,
and ensembles that sum in float32 (XGBoost's arithmetic), at every row-count path of
the kernel (few rows, row blocks, a partial block) and with threads."""

import numpy as np
import pytest

from woodstar.ir.reference import predict, predict_raw
from woodstar.runtimes import c_walk

from tests.lowering.test_strategies import CASES, inputs, random_ensemble

pytestmark = pytest.mark.skipif(not c_walk.available(), reason=str(c_walk.unavailable_reason()))

CATEGORICAL_CASES = sorted(c for c in CASES if "categorical" in CASES[c])


def _rows(rng, ens, n, precision):
    X = inputs(rng, ens.n_features, n=n)
    if precision == "float32" or ens.input_precision == "float32":
        X = X.astype(np.float32).astype(np.float64)
    return X


@pytest.mark.parametrize("rows", [1, 5, 64, 300])
@pytest.mark.parametrize("case", CATEGORICAL_CASES)
def test_categorical_splits_match_the_reference(case, rows, precision, rng):
    ens = random_ensemble(rng, **CASES[case])
    assert ens.has_categorical and c_walk.CTreeWalk.supports(ens)
    X = _rows(rng, ens, rows, precision)
    X[rng.random(X.shape) < 0.05] = 1e10  # beyond every bitset
    raw_ref, transformed_ref = predict(ens, X)
    raw, transformed = c_walk.CTreeWalk(ens, precision)(X.astype(precision))
    np.testing.assert_array_equal(raw, raw_ref)
    np.testing.assert_array_equal(transformed, transformed_ref)


@pytest.mark.parametrize("rows", [1, 5, 300])
@pytest.mark.parametrize("case", ["deep-unbalanced", "softmax-3-outputs", "vector-leaves",
                                  "categorical-nonnegative"])
def test_float32_sums_match_the_reference(case, rows, precision, rng):
    """Leaves and base scores of float32 values added in float32: the raw scores equal
    the reference's float32 sums (and differ from double sums on some rows)."""
    fields = dict(CASES[case])
    fields["post_transform"] = "identity"
    ens = random_ensemble(rng, n_trees=40, **fields)
    leaf = ens.leaf_value.astype(np.float32).astype(np.float64) * 1e3  # large: rounding shows
    ens = ens.replace(leaf_value=leaf.astype(np.float32).astype(np.float64),
                      base_score=np.full(ens.n_outputs, 0.1, np.float32).astype(np.float64),
                      sum_precision="float32").validate()
    X = _rows(rng, ens, rows, precision)
    raw = c_walk.CTreeWalk(ens, precision).raw(X.astype(precision))
    assert raw.dtype == np.float32
    np.testing.assert_array_equal(raw, predict_raw(ens, X))
    if rows == 300:
        double = predict_raw(ens.replace(sum_precision="float64"), X)
        assert not np.array_equal(raw, double)  # the test sees a float64 sum


def test_float32_sums_do_not_depend_on_threads(rng):
    ens = random_ensemble(rng, n_trees=60, max_depth=8, n_outputs=3, post_transform="softmax")
    ens = ens.replace(sum_precision="float32")
    X = _rows(rng, ens, 3000, "float32").astype(np.float32)
    one = c_walk.CTreeWalk(ens, "float32")
    two = c_walk.CTreeWalk(ens, "float32", n_threads=2)
    two.parallel_min_steps = 1
    expected = one(X)
    got = two(X)
    assert two.last_threads == 2
    for a, b in zip(got, expected):
        np.testing.assert_array_equal(a, b)


def test_xgboost_links_are_float32_with_xgboost_bounds():
    """XGBoost's sigmoid bounds -x at 88.7 before expf (a very negative margin gives a
    tiny positive probability, not 0) and keeps NaN; its softmax divides by a float sum."""
    z = np.array([[-100.0], [-88.0], [0.0], [1e-8], [30.0], [np.nan]], dtype=np.float32)
    p = c_walk._xgb_transform("sigmoid", z)
    assert p.dtype == np.float32
    assert p[0, 0] == np.float32(1.0) / (np.exp(np.float32(88.7)) + np.float32(1.0))
    assert p[2, 0] == 0.5 and p[4, 0] == 1.0 and np.isnan(p[5, 0])
    binary = c_walk._xgb_transform("sigmoid_binary", z)
    np.testing.assert_array_equal(binary[:, 0], np.float32(1.0) - binary[:, 1])
    s = c_walk._xgb_transform("softmax", np.array([[1.0, 2.0, 3.0]], np.float32))
    e = np.exp(np.array([-2.0, -1.0, 0.0], np.float32))
    np.testing.assert_allclose(s[0], e / np.float32(e.astype(np.float64).sum()), rtol=1e-7)
    with pytest.raises(ValueError, match="no float32 form"):
        c_walk._xgb_transform("isolation_forest", z)


@pytest.mark.parametrize("case", ["deep-unbalanced", "softmax-3-outputs", "vector-leaves"])
def test_row_blocks_without_nan_take_the_plain_step(case, precision, rng):
    """A row block with no NaN walks without the missing test; blocks with one NaN keep
    it (the first block here is clean, the second has one NaN in its last row)."""
    ens = random_ensemble(rng, n_trees=20, **CASES[case])
    X = _rows(rng, ens, 200, precision)
    X[np.isnan(X)] = 0.5
    X[127, 0] = np.nan
    raw_ref, transformed_ref = predict(ens, X)
    raw, transformed = c_walk.CTreeWalk(ens, precision)(X.astype(precision))
    np.testing.assert_array_equal(raw, raw_ref)
    np.testing.assert_array_equal(transformed, transformed_ref)


def test_float32_sums_with_another_transform_use_the_irs_own(rng):
    """A float32-summing ensemble whose post-transform is not one of XGBoost's (or is
    scaled) keeps the IR's NumPy transform of its float32 sums."""
    ens = random_ensemble(rng, n_trees=10, **CASES["binary-sigmoid"])
    ens = ens.replace(sum_precision="float32")
    X = _rows(rng, ens, 50, "float32")
    raw_ref, transformed_ref = predict(ens, X)
    raw, transformed = c_walk.CTreeWalk(ens, "float32")(X.astype(np.float32))
    np.testing.assert_array_equal(raw, raw_ref)
    np.testing.assert_array_equal(transformed, transformed_ref)
