"""The tree-walk operators' C kernels (``runtimes/walk_ops.c``) return what the
operators' tensor bodies return, bit for bit: rows on the thresholds and one float32 step
away, NaN, +-inf, a missing range, several outputs, float32 and float64, batches shorter
than, equal to and just past the row block, and one or two threads; perfect
trees of depth <= 8 with and without the AVX-512 and AVX2 walks."""

import numpy as np
import pytest
import torch

import woodstar
from woodstar.lowering.trees.perfect_tree_traversal import PerfectTreeTraversalTrees
from woodstar.lowering.trees.tree_traversal import TreeTraversalTrees
from woodstar.lowering.trees.walk_op import node_walk_sums, perfect_walk_sums
from woodstar.runtimes import walk_ops

from .._parity import edge_rows
from .._walk_models import (
    forest_classifier, gradient_boosting_depth3, gradient_boosting_multiclass_depth5,
    lightgbm_multiclass_nan, xgboost_missing_range,
)

SIZES = (1, 15, 16, 17, 203, 1000)


@pytest.fixture(autouse=True)
def _needs_kernels():
    if not walk_ops.available():
        pytest.skip(walk_ops.unavailable_reason())


def _ensemble(model):
    return woodstar.convert(model, "torch").ir.graph.nodes_of("trees")[0].op


MODELS = {"forest": forest_classifier, "xgboost_missing_range": xgboost_missing_range,
          "lightgbm_multiclass": lightgbm_multiclass_nan,
          "gradient_boosting_depth3": gradient_boosting_depth3,
          "gradient_boosting_multiclass_depth5": gradient_boosting_multiclass_depth5}


def _both_walks(ensemble, dtype, x):
    """((tensor body, kernel) sums) of the perfect-tree walk and of the node walk."""
    perfect = PerfectTreeTraversalTrees(ensemble, dtype)
    nodes = TreeTraversalTrees(ensemble, dtype)
    wide, wide_nodes = perfect.widen(x), nodes.widen(x)
    perfect_args = (perfect.level_columns, perfect.level_thresholds, perfect.leaf_table,
                    perfect.n_trees, perfect.depth)
    node_args = (nodes.roots, nodes.columns32, nodes.thresholds, nodes.rights32,
                 nodes.leaf_table, nodes.max_depth)
    return ((perfect_walk_sums(wide, *perfect_args), walk_ops.perfect_walk(wide, *perfect_args)),
            (node_walk_sums(wide_nodes, *node_args), walk_ops.node_walk(wide_nodes, *node_args)))


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_kernels_equal_the_tensor_bodies(rng, name, dtype):
    model, X = MODELS[name](rng)
    ensemble = _ensemble(model)
    rows = edge_rows(ensemble, max(SIZES), rng, base=X)
    if name == "xgboost_missing_range":
        rows[rng.random(rows.shape) < 0.1] = -1.0
    x_all = torch.from_numpy(rows.astype(dtype))
    threads = torch.get_num_threads()
    try:
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            for n in SIZES:
                for body, kernel in _both_walks(ensemble, dtype, x_all[:n]):
                    assert kernel.dtype == torch.float64 and kernel.shape == body.shape
                    # Bits, signs of zero included.
                    np.testing.assert_array_equal(kernel.numpy().view(np.int64),
                                                  body.numpy().view(np.int64),
                                                  err_msg=f"{n} rows, {n_threads} threads")
    finally:
        torch.set_num_threads(threads)


def _forest_depth8(rng):
    """Levels of 32, 64 and 128 nodes: the SIMD walk's pairs of registers."""
    from sklearn.ensemble import RandomForestRegressor

    X = rng.normal(size=(3000, 6))
    y = X[:, 0] + np.sin(3 * X[:, 1]) + 0.3 * rng.normal(size=3000)
    return RandomForestRegressor(n_estimators=5, max_depth=8, random_state=0).fit(X, y), X


SIMD_MODELS = {**MODELS, "forest_depth8": _forest_depth8}


@pytest.fixture
def simd_form(request):
    """The SIMD walk ``request.param`` for the test's length (skipped where the CPU lacks
    it), then the widest again."""
    widest = walk_ops.simd_walk()
    if walk_ops.limit_simd_walk(request.param) != request.param:
        walk_ops.limit_simd_walk(widest)
        pytest.skip(f"this CPU has no {request.param}")
    yield request.param
    walk_ops.limit_simd_walk(widest)


@pytest.mark.parametrize("simd_form", ["avx512", "avx2"], indirect=True)
@pytest.mark.parametrize("name", ["gradient_boosting_depth3", "gradient_boosting_multiclass_depth5",
                                  "lightgbm_multiclass", "forest", "forest_depth8"])
def test_perfect_trees_give_the_same_bits_with_and_without_simd(rng, name, simd_form):
    """Blocks of 64 float32 rows of trees of depth <= 8 take the SIMD walk (AVX-512 or
    AVX2), the rest the scalar one: sums equal the scalar walk's and the tensor body's,
    at sizes around the block, with NaN and +-inf, on one and two threads."""
    model, X = SIMD_MODELS[name](rng)
    walk = PerfectTreeTraversalTrees(_ensemble(model), "float32")
    assert walk.depth <= 8
    if name == "forest_depth8":
        assert walk.depth == 8
    args = (walk.level_columns, walk.level_thresholds, walk.leaf_table, walk.n_trees, walk.depth)
    rows = edge_rows(_ensemble(model), 1000, rng, base=X)
    threads = torch.get_num_threads()
    try:
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            for n in (63, 64, 65, 130, 1000):
                wide = walk.widen(torch.from_numpy(rows[:n].astype(np.float32)))
                simd = walk_ops.perfect_walk(wide, *args)
                walk_ops.limit_simd_walk(None)
                try:
                    scalar = walk_ops.perfect_walk(wide, *args)
                finally:
                    walk_ops.limit_simd_walk(simd_form)
                body = perfect_walk_sums(wide, *args)
                for other in (scalar, body):
                    np.testing.assert_array_equal(simd.numpy().view(np.int64), other.numpy().view(np.int64),
                                                  err_msg=f"{n} rows, {n_threads} threads")
    finally:
        torch.set_num_threads(threads)


def test_rows_split_over_threads_give_the_same_bits(rng):
    model, X = forest_classifier(rng)
    ensemble = _ensemble(model)
    x = torch.from_numpy(edge_rows(ensemble, 5000, rng, base=X, nan=False).astype(np.float32))
    threads = torch.get_num_threads()
    try:
        torch.set_num_threads(1)
        one = [kernel for _, kernel in _both_walks(ensemble, "float32", x)]
        torch.set_num_threads(3)  # more threads than CPUs: uneven ranges, same sums
        three = [kernel for _, kernel in _both_walks(ensemble, "float32", x)]
    finally:
        torch.set_num_threads(threads)
    for a, b in zip(one, three):
        assert torch.equal(a, b)


def test_empty_batch_and_wrong_dtypes(rng):
    model, _ = forest_classifier(rng)
    walk = PerfectTreeTraversalTrees(_ensemble(model), "float32")
    args = (walk.level_columns, walk.level_thresholds, walk.leaf_table, walk.n_trees, walk.depth)
    empty = walk_ops.perfect_walk(walk.widen(torch.zeros((0, model.n_features_in_))), *args)
    assert empty.shape == (0, walk.leaf_table.shape[1])
    wide = walk.widen(torch.zeros((3, model.n_features_in_)))
    with pytest.raises(TypeError, match="the input must be float32 or float64"):
        walk_ops.perfect_walk(wide.to(torch.float16), *args)
    with pytest.raises(TypeError, match="thresholds must be a CPU torch.float64 tensor, got torch.float32"):
        walk_ops.perfect_walk(wide.double(), *args)
    with pytest.raises(TypeError, match="level columns must be a CPU torch.int32"):
        walk_ops.perfect_walk(wide, walk.level_columns.long(), *args[1:])
