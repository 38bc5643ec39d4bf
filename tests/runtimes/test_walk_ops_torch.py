"""The walk operators' Torch operator library (``runtimes/walk_ops_torch.cpp``): the
operators called through the dispatcher reach the C kernels with no Python kernel in
between, give the tensor bodies' bits with and without the tables handed over, never
read tables of tensors that changed since, raise the Python kernels' errors, and a
process where the library is switched off falls back to the Python kernels with the
same answers."""

import os
import pickle
import subprocess
import sys
import textwrap

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
    forest_classifier, gradient_boosting_multiclass_depth5, lightgbm_multiclass_nan,
    xgboost_missing_range,
)

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELS = {"forest": forest_classifier, "xgboost_missing_range": xgboost_missing_range,
          "lightgbm_multiclass": lightgbm_multiclass_nan,
          "gradient_boosting_multiclass_depth5": gradient_boosting_multiclass_depth5}


@pytest.fixture(autouse=True)
def _needs_torch_library():
    if not walk_ops.register_cpu_kernels():
        pytest.skip(walk_ops.unavailable_reason())
    if not walk_ops.kernels_in_torch():
        pytest.skip(walk_ops.torch_library_reason)


def _ensemble(model):
    return woodstar.convert(model, "torch").ir.graph.nodes_of("trees")[0].op


def _bits(t):
    return t.numpy().view(np.int64)


def _hits():
    return torch.ops.woodstar_walk_ops.table_hits()


def _operators(ensemble, dtype):
    """(walk, the operator through the dispatcher, the tensor body, handing its tables
    over) for the perfect-tree walk and the node walk."""
    perfect = PerfectTreeTraversalTrees(ensemble, dtype)
    nodes = TreeTraversalTrees(ensemble, dtype)
    perfect_args = (perfect.level_columns, perfect.level_thresholds, perfect.leaf_table,
                    perfect.n_trees, perfect.depth)
    node_args = (nodes.roots, nodes.columns32, nodes.thresholds, nodes.rights32,
                 nodes.leaf_table, nodes.max_depth)
    return [
        (perfect, lambda w: torch.ops.woodstar.perfect_tree_walk(w, *perfect_args),
         lambda w: perfect_walk_sums(w, *perfect_args),
         lambda: walk_ops.hand_tables("perfect", perfect.leaf_table, perfect.n_trees, perfect.depth)),
        (nodes, lambda w: torch.ops.woodstar.node_tree_walk(w, *node_args),
         lambda w: node_walk_sums(w, *node_args),
         lambda: walk_ops.hand_tables("node", nodes.roots, nodes.rights32, nodes.leaf_table)),
    ]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_the_dispatched_kernels_give_the_tensor_bodies_bits(rng, name, dtype):
    model, X = MODELS[name](rng)
    ensemble = _ensemble(model)
    rows = edge_rows(ensemble, 300, rng, base=X)
    if name == "xgboost_missing_range":
        rows[rng.random(rows.shape) < 0.1] = -1.0
    x_all = torch.from_numpy(rows.astype(dtype))
    threads = torch.get_num_threads()
    try:
        for walk, operator, body, hand in _operators(ensemble, dtype):
            for tables in (False, True):
                if tables:
                    hand()
                for n_threads in (1, 2):
                    torch.set_num_threads(n_threads)
                    for n in (1, 17, 300):
                        wide = walk.widen(x_all[:n])
                        hits = _hits()
                        got = operator(wide)
                        assert _hits() == hits + tables  # found its tables once handed over
                        np.testing.assert_array_equal(
                            _bits(got), _bits(body(wide)),
                            err_msg=f"{type(walk).__name__}, {n} rows, tables {tables}")
    finally:
        torch.set_num_threads(threads)


def test_tables_of_changed_tensors_are_not_read(rng):
    """A leaf table changed in place after its tables were handed over (here so that
    the one-column adds would now miss a column) is walked without them."""
    model, X = lightgbm_multiclass_nan(rng)
    ensemble = _ensemble(model)
    walk, operator, body, hand = _operators(ensemble, "float32")[1]
    hand()
    wide = walk.widen(torch.from_numpy(edge_rows(ensemble, 50, rng, base=X).astype(np.float32)))
    hits = _hits()
    operator(wide)
    assert _hits() == hits + 1
    with torch.no_grad():
        walk.leaf_table.add_(0.25)  # every column of every leaf now non-zero
    got = operator(wide)
    assert _hits() == hits + 1
    np.testing.assert_array_equal(_bits(got), _bits(body(wide)))


def test_errors_are_the_python_kernels(rng):
    model, _ = forest_classifier(rng)
    walk = PerfectTreeTraversalTrees(_ensemble(model), "float32")
    args = (walk.level_columns, walk.level_thresholds, walk.leaf_table, walk.n_trees, walk.depth)
    op = torch.ops.woodstar.perfect_tree_walk
    empty = op(walk.widen(torch.zeros((0, model.n_features_in_))), *args)
    assert empty.shape == (0, walk.leaf_table.shape[1])
    wide = walk.widen(torch.zeros((3, model.n_features_in_)))
    with pytest.raises(TypeError, match="the input must be float32 or float64"):
        op(wide.to(torch.float16), *args)
    with pytest.raises(TypeError, match="thresholds must be a CPU torch.float64 tensor, got torch.float32"):
        op(wide.double(), *args)
    with pytest.raises(TypeError, match="level columns must be a CPU torch.int32"):
        op(wide, walk.level_columns.long(), *args[1:])


def test_without_the_library_the_python_kernels_give_the_same_answers(tmp_path):
    """``WOODSTAR_WALK_OPS_IN_TORCH=0``: the operators' CPU kernels are the Python ones,
    and a torch.jit container answers as the source model and as this process does."""
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, 5)).astype(np.float32)
    y = (X[:, 0] + X[:, 1] > 0).astype(int)
    model = RandomForestClassifier(n_estimators=7, max_depth=5, random_state=0).fit(X, y)
    X[rng.random(X.shape) < 0.05] = np.nan
    np.save(tmp_path / "x.npy", X)
    here = woodstar.convert(model, "torch.jit").predict_proba(X)
    np.testing.assert_array_equal(here, model.predict_proba(X))
    with open(tmp_path / "model.pkl", "wb") as f:
        pickle.dump(model, f)
    script = textwrap.dedent(f"""
        import pickle, numpy as np, woodstar
        from woodstar.runtimes import walk_ops
        model = pickle.load(open({str(tmp_path / 'model.pkl')!r}, "rb"))
        X = np.load({str(tmp_path / 'x.npy')!r})
        np.save({str(tmp_path / 'out.npy')!r}, woodstar.convert(model, "torch.jit").predict_proba(X))
        print(walk_ops.kernels_in_torch(), walk_ops.torch_library_reason)
    """)
    env = dict(os.environ, WOODSTAR_WALK_OPS_IN_TORCH="0", PYTHONPATH=ROOT)
    result = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "False switched off" in result.stdout
    np.testing.assert_array_equal(np.load(tmp_path / "out.npy"), here)
