"""The compiled walk's groups of rows in registers (GROUP_ROWS in c_walk.c: clean row
blocks of one-output trees up to depth 8 walk 8 rows at a time) against the IR's
reference to the bit: full groups, a block's leftover rows after its groups, blocks
with a NaN (no groups), deeper trees beside shallow ones, float64 and float32 sums, and
rows split over threads."""

import numpy as np
import pytest

from woodstar.ir.reference import predict
from woodstar.runtimes import c_walk

from tests.lowering.test_strategies import CASES, inputs, random_ensemble

pytestmark = pytest.mark.skipif(not c_walk.available(), reason=str(c_walk.unavailable_reason()))


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("rows", [7, 8, 13, 203])  # 203: blocks of 64, then 11 = 8 + 3
@pytest.mark.parametrize("case, sum32", [("deep-unbalanced", False), ("softmax-3-outputs", False),
                                         ("binary-sigmoid", True), ("softmax-3-outputs", True)])
def test_groups_match_the_reference(case, sum32, rows, threads, precision, rng):
    ens = random_ensemble(rng, n_trees=30, **CASES[case])
    if sum32:  # XGBoost's float32 sums: its leaves and base score are float32 values
        ens = ens.replace(sum_precision="float32", input_precision="float32",
                          leaf_value=ens.leaf_value.astype(np.float32).astype(np.float64),
                          base_score=ens.base_score.astype(np.float32).astype(np.float64))
    X = inputs(rng, ens.n_features, n=rows)
    X[np.isnan(X)] = 0.25
    if rows > 64:
        X[70, 1] = np.nan  # the second block keeps the missing test, and no groups
    if precision == "float32" or sum32:
        X = X.astype(np.float32).astype(np.float64)
    walk = c_walk.CTreeWalk(ens, precision, n_threads=threads)
    walk.parallel_min_steps = 1  # threads from the first row
    raw, transformed = walk(X.astype(precision))
    raw_ref, transformed_ref = predict(ens, X)
    np.testing.assert_array_equal(raw, raw_ref)
    if not sum32:  # float32 links: XGBoost's, tested in test_c_walk_exact.py
        np.testing.assert_array_equal(transformed, transformed_ref)
