"""Every registered tree strategy against scikit-learn on edge rows (thresholds, NaN,
+-inf), in both precisions: binary and multiclass forests, boosting (one tree per class
per round), regression, anomaly scores, categorical splits and unbalanced deep trees."""

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")

from sklearn import ensemble  # noqa: E402

import woodstar  # noqa: E402
from tests._parity import TOLERANCE, assert_parity, make_test_inputs  # noqa: E402


def _data(rng, n=300, f=6, classes=2):
    X = rng.normal(size=(n, f))
    y = (X[:, 0] + X[:, 1] ** 2 > 0.5).astype(int) if classes == 2 else rng.integers(0, classes, n)
    return X, y


def _models(rng):
    X, y = _data(rng)
    X3, y3 = _data(rng, classes=3)
    Xc = X.copy()
    Xc[:, 2] = rng.integers(0, 5, len(X))
    Xn = X.copy()
    Xn[rng.random(X.shape) < 0.1] = np.nan
    return {
        "rf_binary": (ensemble.RandomForestClassifier(n_estimators=7, max_depth=6, random_state=0), X, y),
        "rf_deep_unbalanced": (ensemble.ExtraTreesClassifier(n_estimators=3, max_depth=12, random_state=0), X, y),
        "gb_multiclass": (ensemble.GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=0), X3, y3),
        "gb_regressor": (ensemble.GradientBoostingRegressor(n_estimators=5, max_depth=2, random_state=0), X, X[:, 0]),
        "rf_regressor_stump": (ensemble.RandomForestRegressor(n_estimators=3, max_depth=1, random_state=0), X, X[:, 1]),
        "hgb_nan_categorical": (ensemble.HistGradientBoostingClassifier(
            max_iter=5, categorical_features=[2], random_state=0), np.where(np.isnan(Xn), Xn, Xc), y),
        "isolation_forest": (ensemble.IsolationForest(n_estimators=5, random_state=0), X, None),
    }


# scikit-learn 1.9's HistGradientBoosting rejects +-inf although woodstar's head allows it
# (reported; the frontend is not this test's subject).
INF_REJECTED = {"hgb_nan_categorical"}

MODEL_NAMES = ["rf_binary", "rf_deep_unbalanced", "gb_multiclass", "gb_regressor",
               "rf_regressor_stump", "hgb_nan_categorical", "isolation_forest"]


@pytest.mark.parametrize("name", MODEL_NAMES)
def test_strategy_parity(name, strategy, precision, rng):
    model, X, y = _models(rng)[name]
    model.fit(X, y) if y is not None else model.fit(X)
    converted = woodstar.convert(model, extra_config={
        "tree_implementation": strategy, "tree_op_precision_dtype": precision})
    ens = converted.ir.ensemble
    head = converted.ir.head
    Xt = make_test_inputs(ens, rng, n_random=100, n_edge=60, base=X,
                          nan=bool(head.allows_nan), inf=bool(head.allows_inf) and name not in INF_REJECTED)
    if precision == "float32":
        Xt = Xt.astype(np.float32)
    assert assert_parity(converted, model, Xt, precision) >= 1
    # The same answers for one row alone as within a batch (per-call buffers).
    tol = TOLERANCE[precision]
    np.testing.assert_allclose(converted._run(Xt[:1])[1], converted._run(Xt)[1][:1],
                               rtol=tol, atol=tol)


@pytest.mark.parametrize("name", ["rf_binary", "gb_multiclass", "isolation_forest"])
def test_perf_tree_trav_tiny_batch_path_equals_walk(name, rng):
    """The all-nodes path for tiny batches and the level walk give identical scores."""
    model, X, y = _models(rng)[name]
    model.fit(X, y) if y is not None else model.fit(X)
    converted = woodstar.convert(model, extra_config={"tree_implementation": "perf_tree_trav"})
    trees = converted._program("float32").module.trees
    Xt = make_test_inputs(converted.ir.ensemble, rng, n_random=20, n_edge=10, base=X,
                          nan=bool(converted.ir.head.allows_nan), inf=False).astype(np.float32)
    trees.dense_max_elements = 1 << 62
    dense = converted._run(Xt)
    trees.dense_max_elements = 0
    walk = converted._run(Xt)
    np.testing.assert_array_equal(dense[0], walk[0])
    assert assert_parity(converted, model, Xt) >= 1


@pytest.mark.parametrize("name", ["rf_binary", "gb_multiclass"])
def test_traced_module_is_batch_size_independent(name, strategy, rng):
    """What the exporters see (trace at one row, run at many) computes the same scores:
    the eager-only paths (buffers, tiny-batch branch) never leak into a trace."""
    import torch

    model, X, y = _models(rng)[name]
    model.fit(X, y)
    converted = woodstar.convert(model, extra_config={"tree_implementation": strategy})
    module = converted._program("float32").module
    Xt = torch.from_numpy(make_test_inputs(converted.ir.ensemble, rng, n_random=40, n_edge=10,
                                           base=X, nan=False, inf=False).astype(np.float32))
    with torch.inference_mode():
        traced = torch.jit.trace(module, Xt[:1], check_trace=False)
        np.testing.assert_allclose(traced(Xt)[1].numpy(), module(Xt)[1].numpy(),
                                   rtol=1e-12, atol=1e-12)


def test_layout_walks_every_tree_breadth_first_with_siblings_adjacent(rng):
    """The level-at-a-time layout of a whole forest equals each tree's own
    breadth-first order (every right child right after its left sibling), stump
    trees and uneven depths included."""
    from woodstar.lowering.trees import _layout

    X, y = _data(rng, n=400)
    forest = ensemble.ExtraTreesRegressor(n_estimators=12, max_depth=None, min_samples_leaf=1,
                                          random_state=0).fit(X, y + rng.normal(size=len(y)))
    stumpy = ensemble.GradientBoostingRegressor(n_estimators=5, max_depth=1).fit(X, y)
    for model in (forest, stumpy):
        ens = [n.op for n in woodstar.convert(model, "torch").ir.graph.nodes if n.kind == "trees"][0]
        expected = np.concatenate([
            _layout.tree_nodes(ens, t)[0] + _layout.sibling_adjacent_order(*_layout.tree_nodes(ens, t)[1:])
            for t in range(ens.n_trees)])
        order, rights, roots, _ = _layout.sibling_adjacent_layout(ens)
        np.testing.assert_array_equal(order, expected)
        internal = ens.left[order] >= 0
        # the walk's step: a node's left child sits just before its right child
        np.testing.assert_array_equal(order[rights[internal] - 1], ens.tree_offsets[
            np.searchsorted(ens.tree_offsets, order[internal], side="right") - 1] + ens.left[order[internal]])


@pytest.mark.parametrize("strategy_name", ["tree_trav", "perf_tree_trav"])
def test_torchscript_traces_the_op_by_op_walk(strategy_name, rng):
    """A TorchScript trace records the walk of int32 ``index_select`` steps and one
    ``embedding_bag`` (no advanced indexing, which runs slower op by op), and gives the
    eager walk's answers to the bit, NaN and infinities included."""
    import torch

    model, X, y = _models(rng)["gb_multiclass"]
    model.fit(X, y)
    converted = woodstar.convert(model, extra_config={"tree_implementation": strategy_name})
    module = converted._program("float32").module
    Xt = make_test_inputs(converted.ir.ensemble, rng, n_random=60, n_edge=20, base=X,
                          nan=True, inf=True).astype(np.float32)
    Xt = torch.from_numpy(Xt)
    with torch.inference_mode():
        traced = torch.jit.trace(module, Xt[:2], check_trace=False)
        kinds = {node.kind() for node in traced.inlined_graph.nodes()}
        assert {"aten::index_select", "aten::embedding_bag"} <= kinds
        assert "aten::index" not in kinds
        for got, expected in zip(traced(Xt), module(Xt)):
            np.testing.assert_array_equal(got.numpy(), expected.numpy())
