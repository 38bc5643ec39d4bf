"""Trees are added in order from the base score, on every strategy: the rounding of a
float64 sum depends on its order, and a near tie between classes is decided by it."""

import numpy as np
import pytest
import torch

from woodstar.ir.builder import EnsembleBuilder
from woodstar.ir.passes import fold_base_score
from woodstar.ir.reference import predict_raw
from woodstar.lowering.trees._common import sum_in_tree_order

from .test_strategies import run


def test_sum_in_tree_order_is_a_running_sum():
    # (((0 + 1e16) + 1) - 1e16) + 1 == 1; any other grouping gives 0 or 2.
    per_tree = torch.tensor([[[1e16], [1.0], [-1e16], [1.0]]], dtype=torch.float64)
    assert sum_in_tree_order(per_tree).item() == 1.0
    rng = np.random.default_rng(0)
    magnitudes = 10.0 ** rng.integers(-8, 8, size=(1, 300, 1))  # trees of very different scales
    values = torch.tensor(rng.normal(size=(64, 300, 3)) * magnitudes)
    expected = torch.zeros(64, 3, dtype=torch.float64)
    for t in range(values.shape[1]):
        expected = expected + values[:, t]
    assert torch.equal(sum_in_tree_order(values), expected)


def _stumps(values_per_tree, output_starts, n_outputs, base):
    """One-leaf trees: tree t adds values_per_tree[t] to output output_starts[t]."""
    builder = EnsembleBuilder(1)
    for value, start in zip(values_per_tree, output_starts):
        builder.add_tree(feature=[-1], threshold=[0.0], left=[-1], right=[-1], leaf_value=[value],
                         output_start=start)
    return builder.build(n_features=2, n_outputs=n_outputs, base_score=base)


def test_fold_base_score_moves_the_base_into_each_outputs_first_tree():
    ens = _stumps([0.1, 0.2, 0.3, 0.4, 0.5], [1, 0, 1, 0, 1], n_outputs=3, base=[1e16, 3.0, 5.0])
    folded = fold_base_score(ens)
    np.testing.assert_array_equal(folded.base_score, [0.0, 0.0, 5.0])  # output 2 has no tree
    np.testing.assert_array_equal(folded.leaf_value[:, 0], [3.0 + 0.1, 1e16 + 0.2, 0.3, 0.4, 0.5])
    X = np.zeros((2, 2))
    np.testing.assert_array_equal(predict_raw(folded, X), predict_raw(ens, X))
    mean = ens.replace(aggregation="mean")
    assert fold_base_score(mean) is mean  # a mean adds the base after dividing


@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_every_strategy_starts_from_the_base_score(strategy, precision):
    # base 1e16 then +1 +1: 1e16 in float64 (each +1 is lost); summing the trees first
    # and adding the base last would give 1e16 + 2.
    ens = _stumps([1.0, 1.0, 0.25, 0.25], [0, 0, 1, 1], n_outputs=2, base=[1e16, 1.0])
    raw, _ = run(ens, strategy, precision, np.zeros((3, 2)))
    np.testing.assert_array_equal(raw, predict_raw(ens, np.zeros((3, 2))))
    assert raw[0, 0] == 1e16
