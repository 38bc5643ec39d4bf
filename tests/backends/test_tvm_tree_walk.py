"""TVM on the CPU compiles the tree walks as kernels of ours (``woodstar::perfect_tree_walk``
and ``woodstar::node_tree_walk`` -> ``backends/tvm_tree_walk.py``). Their sums are the
tensor program's to the bit (the torch backend's program, same strategy) and the
answers the source's, on rows with NaN, +-inf, values on the thresholds, batches shorter than,
equal to and just past the kernel's row block, and at one and two threads."""

import numpy as np
import pytest
import torch

import woodstar
from woodstar.backends import all_backends
from woodstar.backends import tvm_tree_walk
from woodstar.lowering.trees.walk_op import node_tree_walk, perfect_tree_walk, whole_walk_op

from .._parity import compare_outputs, edge_rows
from .._walk_models import (
    assert_sums_and_answers, forest_classifier, lightgbm_multiclass_nan, torch_program,
    xgboost_missing_range,
)

BLOCK = tvm_tree_walk.ROW_BLOCK
SIZES = (1, BLOCK - 1, BLOCK, BLOCK + 1, 203)
STRATEGIES = ("perf_tree_trav", "tree_trav")


@pytest.fixture(autouse=True)
def _needs_tvm():
    available, reason = all_backends()["tvm"].is_available()
    if not available:
        pytest.skip(reason)


@pytest.fixture
def kernels_built(monkeypatch):
    """The names of the walk kernels built while converting."""
    built = []
    for name in ("perfect_walk_kernel", "node_walk_kernel"):
        def spy(*args, _original=getattr(tvm_tree_walk, name), _name=name, **kwargs):
            built.append(_name)
            return _original(*args, **kwargs)
        monkeypatch.setattr(tvm_tree_walk, name, spy)
    return built


KERNEL_OF = {"perf_tree_trav": "perfect_walk_kernel", "tree_trav": "node_walk_kernel"}


def _edge_rows(model, rng, X_train, n=203, nan=True, inf=True):
    """Rows with values on the model's split thresholds and one float32 step either
    side, NaN and +-inf (where the source takes them)."""
    ensemble = next(node.op for node in woodstar.convert(model, "torch").ir.graph.nodes_of("trees"))
    return edge_rows(ensemble, n, rng, base=X_train, nan=nan, inf=inf)


def _check(model, X, method, kernels_built, strategy, tolerance=None, **config):
    converted = woodstar.convert(model, "tvm", extra_config={"tree_implementation": strategy, **config})
    assert kernels_built == [KERNEL_OF[strategy]], "the walk did not compile as one kernel"
    assert_sums_and_answers(converted, model, strategy, X, SIZES, (method,), tolerance, **config)
    return converted


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_forest_classifier_matches_program_and_source(rng, kernels_built, strategy):
    model, X = forest_classifier(rng)
    # scikit-learn's forests take neither infinity nor (unless fitted on it) NaN.
    X_test = _edge_rows(model, rng, X, nan=False, inf=False)
    converted = _check(model, X_test, "predict", kernels_built, strategy)
    compare_outputs(converted.predict_proba(X_test), model.predict_proba(X_test), "float32", "proba")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_multiclass_boosting_with_nan_matches_program(rng, kernels_built, strategy):
    model, X = lightgbm_multiclass_nan(rng)
    X_test = _edge_rows(model, rng, X)
    converted = woodstar.convert(model, "tvm", extra_config={"tree_implementation": strategy})
    assert kernels_built == [KERNEL_OF[strategy]]
    assert_sums_and_answers(converted, model, strategy, X_test, SIZES)


def test_node_walk_kernel_gets_the_models_depths_and_columns(rng, monkeypatch):
    """The exported arrays are constants: the node-walk kernel gets each tree's depth
    and its one leaf column (multiclass boosting) from them, as the C kernel does."""
    from woodstar.runtimes import walk_tables

    tables = []

    def spy(*args, _original=walk_tables.node_tables):
        tables.append(_original(*args))
        return tables[-1]
    monkeypatch.setattr(walk_tables, "node_tables", spy)
    model, X = lightgbm_multiclass_nan(rng)
    X_test = _edge_rows(model, rng, X)
    converted = woodstar.convert(model, "tvm", extra_config={"tree_implementation": "tree_trav"})
    assert len(tables) == 1
    ensemble = converted.ir.graph.nodes_of("trees")[0].op
    np.testing.assert_array_equal(tables[0].depths, ensemble.tree_depths())
    assert (tables[0].columns[1:] >= 0).all()
    assert_sums_and_answers(converted, model, "tree_trav", X_test, SIZES)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_missing_range_and_float64_rows(rng, kernels_built, strategy):
    """XGBoost's ``missing=-1`` widens the input to four blocks of columns; float64
    rows run the kernel as given (the program's own precision rule)."""
    model, X = xgboost_missing_range(rng)
    X_test = _edge_rows(model, rng, X)
    X_test[rng.random(X_test.shape) < 0.1] = -1.0
    # XGBoost adds in float32, the tensor programs in float64 (README, "Exactness").
    _check(model, X_test.astype(np.float32), "predict", kernels_built, strategy, tolerance=1e-6)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_two_threads_give_the_same_bits(rng, strategy):
    from sklearn.ensemble import GradientBoostingRegressor

    X = rng.normal(size=(400, 5))
    model = GradientBoostingRegressor(n_estimators=9, max_depth=3, random_state=0).fit(X, X[:, 0] ** 2)
    X_test = _edge_rows(model, rng, X, n=2000, nan=False, inf=False)
    config = {"tree_implementation": strategy}
    one = woodstar.convert(model, "tvm", extra_config={**config, "n_threads": 1}).predict(X_test)
    two = woodstar.convert(model, "tvm", extra_config={**config, "n_threads": 2}).predict(X_test)
    np.testing.assert_array_equal(one, two)
    compare_outputs(two, model.predict(X_test), "float32", "predict")


def test_saved_library_keeps_the_kernel(rng, tmp_path):
    from sklearn.ensemble import ExtraTreesRegressor

    X = rng.normal(size=(300, 4))
    model = ExtraTreesRegressor(n_estimators=5, max_depth=5, random_state=0).fit(X, X.sum(axis=1))
    converted = woodstar.convert(model, "tvm")
    converted.save(tmp_path / "model")
    loaded = woodstar.load(tmp_path / "model")
    X_test = rng.normal(size=(57, 4))
    np.testing.assert_array_equal(loaded.predict(X_test), converted.predict(X_test))
    compare_outputs(loaded.predict(X_test), model.predict(X_test), "float32", "predict")


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_walk_operator_only_inside_the_export_context(strategy):
    """Only the CPU build takes the kernel (its loops are CPU-parallel); checked
    without a GPU by the export alone: outside ``whole_walk_op`` the exported graph
    has no walk operator, inside it exactly one."""
    from sklearn.ensemble import RandomForestRegressor

    X = np.random.default_rng(0).normal(size=(100, 3))
    model = RandomForestRegressor(n_estimators=3, max_depth=3, random_state=0).fit(X, X[:, 0])
    module = torch_program(model, strategy)._programs["float32"].module
    example = torch.zeros((2, 3), dtype=torch.float32)
    dims = ({0: torch.export.Dim("batch")},)

    def walk_ops(program):
        return [n for n in program.graph.nodes
                if n.op == "call_function" and "tree_walk" in str(n.target)]

    assert walk_ops(torch.export.export(module, (example,), dynamic_shapes=dims)) == []
    with whole_walk_op():
        assert len(walk_ops(torch.export.export(module, (example,), dynamic_shapes=dims))) == 1


def test_operators_eager_bodies_match_the_strategies(rng):
    """The operators' own (eager) bodies, which run if anything calls them outside an
    export, are the strategies' walks."""
    from sklearn.ensemble import RandomForestRegressor

    X = rng.normal(size=(300, 4))
    model = RandomForestRegressor(n_estimators=6, max_depth=5, random_state=0).fit(X, X[:, 1])
    x = torch.from_numpy(_edge_rows(model, rng, X, n=50).astype(np.float32))
    module = torch_program(model, "perf_tree_trav")._programs["float32"].module
    perfect = next(m for m in module.modules() if hasattr(m, "level_columns"))
    module = torch_program(model, "tree_trav")._programs["float32"].module
    nodes = next(m for m in module.modules() if hasattr(m, "rights32"))
    with torch.no_grad():
        raw = perfect_tree_walk(perfect.widen(x), perfect.level_columns, perfect.level_thresholds,
                                perfect.leaf_table, perfect.n_trees, perfect.depth)
        expected = perfect._forward_functional(perfect.widen(x))
        torch.testing.assert_close(perfect.finish_sums(raw), expected, rtol=0, atol=0)
        raw = node_tree_walk(nodes.widen(x), nodes.roots, nodes.columns32, nodes.thresholds,
                             nodes.rights32, nodes.leaf_table, nodes.max_depth)
        expected = nodes._forward_functional(nodes.widen(x))
        torch.testing.assert_close(nodes.finish_sums(raw), expected, rtol=0, atol=0)


def test_kernels_take_whole_calls_tensor_ops_take_parts(rng, sk_models):
    """A program whose every walk is a kernel has no (rows x trees) temporaries, so a
    large call is not cut into cache-sized parts; a walk left as tensor ops (categorical
    splits) still is. Either way the answers are one call's."""
    from sklearn.ensemble import RandomForestRegressor

    from woodstar import plan

    X = rng.normal(size=(300, 4))
    forest = RandomForestRegressor(n_estimators=8, max_depth=6, random_state=0).fit(X, X[:, 0])
    hgb, X_cat = sk_models["hgb_cat_nan"]
    for model, rows, kernel in ((forest, X, True), (hgb, X_cat, False)):
        converted = woodstar.convert(model, "tvm", extra_config={"tree_implementation": "tree_trav"})
        program = converted._programs["float32"]
        assert program.runs_tensor_ops is not kernel
        cache_sized = plan.takes_cache_sized_parts(converted.ir, converted.options, "cpu",
                                                   program.runs_tensor_ops)
        assert cache_sized is not kernel
        many = rows[rng.integers(0, len(rows), 6000)]
        whole = woodstar.convert(model, "tvm", extra_config={"tree_implementation": "tree_trav",
                                                             "batch_size": len(many)})
        np.testing.assert_array_equal(converted.predict(many), whole.predict(many))


def test_rows_and_results_change_hands_without_copies_and_stay_intact(rng):
    """On the CPU the runner hands TVM the rows and takes its results through DLPack:
    rows at any address or layout give the source's answers (TVM takes only 64-byte
    aligned data, so others are copied to such), and a call's results, which are
    TVM's own buffers, are not overwritten by later calls."""
    from woodstar.backends.tvm_backend import TVM_ALIGNMENT, _aligned

    model, X = forest_classifier(rng)
    converted = woodstar.convert(model, "tvm")
    runner = converted._runner("program", "float32")
    rows = X[rng.integers(0, len(X), 40)].astype(np.float32)
    rows[rng.random(rows.shape) < 0.1] = np.nan
    first_raw, _ = runner(np.ascontiguousarray(rows[:7]))
    kept = first_raw.copy()
    for _ in range(20):
        runner(np.ascontiguousarray(rows[7:]))
    np.testing.assert_array_equal(first_raw, kept)

    store = np.empty(rows.size + 64, np.float32)
    base = -store.ctypes.data % TVM_ALIGNMENT // 4
    for offset in (0, 1):  # an aligned array is taken as it is, another one copied
        placed = store[base + offset:base + offset + rows.size].reshape(rows.shape)
        placed[...] = rows
        assert (_aligned(placed) is placed) == (offset == 0)
        np.testing.assert_array_equal(converted.predict_proba(placed), model.predict_proba(rows))
    fortran = np.asfortranarray(rows)
    assert _aligned(fortran).flags.c_contiguous
    np.testing.assert_array_equal(converted.predict_proba(fortran), model.predict_proba(rows))
    assert converted.predict_proba(rows[:0]).shape == (0, len(model.classes_))
