"""The walk operators' C kernels with the tables they derive from their arguments
(``runtimes/walk_tables.py``): each tree of the node walk stops at its own depth, and a
tree of one output adds its one leaf column. The sums equal the operators' tensor
bodies and the kernels without the tables bit for bit, for trees of many depths, NaN,
+-inf, a missing range, several outputs and -0.0 leaves, in every SIMD form; the tables
are built once per model."""

import numpy as np
import pytest
import torch

import woodstar
from woodstar.lowering.trees.tree_traversal import TreeTraversalTrees
from woodstar.lowering.trees.walk_op import node_walk_sums
from woodstar.runtimes import walk_ops
from woodstar.runtimes.walk_tables import node_tables, tree_columns

from .._parity import edge_rows


@pytest.fixture(autouse=True)
def _needs_kernels():
    if not walk_ops.available():
        pytest.skip(walk_ops.unavailable_reason())


def _deep_forest(rng):
    """Leaf depths from a few to 14: trees of different depths."""
    from sklearn.ensemble import RandomForestRegressor

    X = rng.normal(size=(2000, 7))
    y = X[:, 0] * X[:, 1] + np.sin(4 * X[:, 2]) + 0.5 * rng.normal(size=2000)
    model = RandomForestRegressor(n_estimators=6, min_samples_leaf=3, max_samples=0.1,
                                  random_state=0).fit(X, y)
    return model, X


def _leaf_wise_multiclass(rng):
    """LightGBM's leaf-wise trees, three classes: deep and lopsided, several outputs."""
    import lightgbm

    X = rng.normal(size=(1500, 6))
    y = (X[:, 0] + 0.5 * X[:, 1] ** 2 > 0.3).astype(int) + (X[:, 2] > 0.8)
    X[rng.random(X.shape) < 0.05] = np.nan
    model = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=40, min_child_samples=3,
                                    verbose=-1).fit(X, y)
    return model, X


def _missing_range(rng):
    import xgboost

    X = rng.normal(size=(1500, 5))
    X[rng.random(X.shape) < 0.1] = -1.0
    y = X[:, 0] + np.cos(2 * X[:, 1])
    return xgboost.XGBRegressor(n_estimators=4, max_depth=10, missing=-1.0).fit(X, y), X


MODELS = {"deep_forest": _deep_forest, "leaf_wise_multiclass": _leaf_wise_multiclass,
          "missing_range": _missing_range}


def _walk(model, dtype="float32"):
    ensemble = woodstar.convert(model, "torch").ir.graph.nodes_of("trees")[0].op
    return ensemble, TreeTraversalTrees(ensemble, dtype)


def _args(walk):
    return (walk.roots, walk.columns32, walk.thresholds, walk.rights32, walk.leaf_table,
            walk.max_depth)


@pytest.fixture
def without_tables():
    """Runs ``kernel(*args)`` with the tables off: every tree the deepest tree's steps
    and its whole leaf vector, as the kernels did without them."""
    def run(kernel, *args):
        shipped = walk_ops.per_tree_depths, walk_ops.one_column_adds
        walk_ops.use_tables(False, False)
        try:
            return kernel(*args)
        finally:
            walk_ops.use_tables(*shipped)
    return run


def _bits(t):
    return t.numpy().view(np.int64)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_node_walk_with_tables_gives_the_tensor_bodys_bits(rng, name, without_tables):
    model, X = MODELS[name](rng)
    ensemble, walk = _walk(model)
    if name != "missing_range":  # XGBoost's depth-wise trees all reach max_depth
        assert len(set(ensemble.tree_depths())) > 1
    args = _args(walk)
    rows = edge_rows(ensemble, 1000, rng, base=X)
    if name == "missing_range":
        rows[rng.random(rows.shape) < 0.1] = -1.0
    threads = torch.get_num_threads()
    try:
        for n_threads in (1, 2):
            torch.set_num_threads(n_threads)
            for n in (1, 15, 16, 17, 130, 1000):
                wide = walk.widen(torch.from_numpy(rows[:n].astype(np.float32)))
                body = _bits(node_walk_sums(wide, *args))
                np.testing.assert_array_equal(_bits(walk_ops.node_walk(wide, *args)), body,
                                              err_msg=f"{n} rows, {n_threads} threads")
                np.testing.assert_array_equal(_bits(without_tables(walk_ops.node_walk, wide, *args)),
                                              body, err_msg=f"{n} rows, without the tables")
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize("name", sorted(MODELS))
def test_depths_are_the_irs_and_columns_the_trees_outputs(rng, name):
    model, _ = MODELS[name](rng)
    ensemble, walk = _walk(model)
    tables = node_tables(walk.roots.numpy(), walk.rights32.numpy(), walk.leaf_table.numpy())
    np.testing.assert_array_equal(tables.depths, ensemble.tree_depths())
    if ensemble.single_output_block:
        assert tables.columns is None or (tables.columns == -1).all()
    else:  # multiclass boosting: every tree but the first adds its class's column
        assert tables.columns[0] == -1
        np.testing.assert_array_equal(tables.columns[1:], ensemble.tree_output_start[1:])


@pytest.mark.parametrize("backend", ["torch.jit", "torch.compile"])
def test_a_converted_model_builds_its_tables_once(rng, backend):
    """Through the exporting backends' running programs the operator gets the same
    tensors call after call: the tables are built once (at conversion where the Torch
    operator library serves the operators, on the first call otherwise), every call
    finds them, and the answers are the source model's."""
    model, X = _deep_forest(rng)
    before = walk_ops._TABLES.builds
    converted = woodstar.convert(model, backend, extra_config={"tree_implementation": "tree_trav"})
    rows = X[rng.integers(0, len(X), 300)].astype(np.float32)
    converted.predict(rows)
    built = walk_ops._TABLES.builds
    assert built > before  # the operator's C kernel ran (a probe at conversion, or here)
    hits = _table_hits()
    for _ in range(3):
        np.testing.assert_array_equal(converted.predict(rows), model.predict(rows))
    assert walk_ops._TABLES.builds == built
    if walk_ops.kernels_in_torch():
        assert _table_hits() == hits + 3


def _table_hits():
    return torch.ops.woodstar_walk_ops.table_hits() if walk_ops.kernels_in_torch() else 0


def _running_sums(leaf_rows):
    """Each row's vectors added one after another from -0.0, as the tensor body does."""
    sums = np.full(leaf_rows.shape[2], -0.0)
    out = []
    for row in leaf_rows:
        s = sums.copy()
        for vector in row:
            s = s + vector
        out.append(s)
    return np.array(out)


def test_one_column_adds_give_the_whole_vectors_bits(rng):
    """Trees of one output each, some of whose leaves are -0.0: adding the named column
    alone, and the whole vector where the table says -1, gives the bits of adding every
    vector whole, zeros' signs included."""
    n_trees, width, leaves_per_tree = 9, 3, 4
    table = np.zeros((n_trees * leaves_per_tree, width))
    trees = np.repeat(np.arange(n_trees), leaves_per_tree)
    feeds = np.array([0, 1, 2, 0, 0, 1, 2, 2, 1])
    table[np.arange(len(table)), feeds[trees]] = rng.normal(size=len(table))
    table[trees < 3, :] = 0.0
    table[trees < 3, feeds[trees[trees < 3]]] = -0.0  # the first trees keep sums at -0.0
    table[(trees == 6) & (np.arange(len(table)) % 2 == 0), 0] = 1.5  # two outputs
    columns = tree_columns(n_trees, trees, table)
    assert columns[0] == -1  # every column -0.0 before it
    assert columns[1] == -1  # column 0 may still be -0.0 (tree 0's leaves are)
    assert columns[6] == -1  # fills two columns
    others = [2, 3, 4, 5, 7, 8]  # after tree 1 no column but its own can be -0.0
    assert (columns[others] == feeds[others]).all()
    for _ in range(20):
        leaf = rng.integers(0, leaves_per_tree, size=(30, n_trees)) + np.arange(n_trees) * leaves_per_tree
        whole = _running_sums(table[leaf])
        sums = np.full((30, width), -0.0)
        for t in range(n_trees):
            if columns[t] < 0:
                sums = sums + table[leaf[:, t]]
            else:
                sums[:, columns[t]] = sums[:, columns[t]] + table[leaf[:, t], columns[t]]
        np.testing.assert_array_equal(sums.view(np.int64), whole.view(np.int64))


@pytest.mark.parametrize("negative_zero_class", [False, True])
def test_kernels_with_negative_zero_leaves_keep_the_bodys_bits(rng, negative_zero_class):
    """A multiclass model, and the same with every leaf of the first class's trees -0.0
    (whose sums the other trees' +0.0 turn into +0.0): both walks' kernels, in every
    form, equal the tensor bodies bit for bit."""
    from woodstar.lowering.trees.perfect_tree_traversal import PerfectTreeTraversalTrees
    from woodstar.lowering.trees.walk_op import perfect_walk_sums

    model, X = _leaf_wise_multiclass(rng)
    ensemble, walk = _walk(model)
    perfect = PerfectTreeTraversalTrees(ensemble, "float32")
    rows = edge_rows(ensemble, 300, rng, base=X)
    for strategy in (walk, perfect):
        if negative_zero_class:
            first = strategy.leaf_table[:, 0]
            first[first != 0] = -0.0
        wide = strategy.widen(torch.from_numpy(rows.astype(np.float32)))
        if strategy is walk:
            args, body, kernel = _args(walk), node_walk_sums, walk_ops.node_walk
        else:
            args = (perfect.level_columns, perfect.level_thresholds, perfect.leaf_table,
                    perfect.n_trees, perfect.depth)
            body, kernel = perfect_walk_sums, walk_ops.perfect_walk
        expected = body(wide, *args)
        if negative_zero_class:
            assert (expected[:, 0] == 0).all() and not torch.signbit(expected[:, 0]).any()
        for form in ("avx512", "avx2", None):
            if walk_ops.limit_simd_walk(form) != form:
                continue
            try:
                np.testing.assert_array_equal(_bits(kernel(wide, *args)), _bits(expected),
                                              err_msg=f"{type(strategy).__name__}, {form}")
            finally:
                walk_ops.limit_simd_walk("avx512")
