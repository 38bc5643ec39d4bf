"""The IR as one ONNX-ML TreeEnsemble node, run by ONNX Runtime: a valid model, single-
leaf trees, refusals, and the container's choice of it (its equality with the IR
reference on edge trees is in test_cpu_routes.py)."""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from woodstar.ir.builder import EnsembleBuilder  # noqa: E402
from woodstar.ir.reference import predict  # noqa: E402
from woodstar.runtimes.onnx_ml import (OnnxMlTrees, leaf_index_model,  # noqa: E402
                                       tree_ensemble_model, walks_each_tree_once)

from tests.lowering.test_gbdt_semantics import ZERO, _ensemble as missing_range_ensemble  # noqa: E402
from tests.lowering.test_strategies import CASES, inputs, random_ensemble  # noqa: E402

def test_single_leaf_trees_and_the_model_is_valid_onnx():
    import onnx

    builder = EnsembleBuilder(1)
    for value in (1.5, -2.0):
        builder.add_tree(feature=[-1], threshold=[0], left=[-1], right=[-1], leaf_value=[value])
    ens = builder.build(n_features=3, n_outputs=1, base_score=[0.25])
    onnx.checker.check_model(tree_ensemble_model(ens, "float32"))
    raw, _ = OnnxMlTrees(ens, "float32")(np.array([[np.nan, 1, 2], [0, 0, 0]], np.float32))
    np.testing.assert_array_equal(raw[:, 0], [0.25 + 1.5 - 2.0] * 2)


def test_models_it_cannot_hold_are_refused(rng):
    assert not OnnxMlTrees.supports(random_ensemble(rng, **CASES["categorical-exact"]))
    ranged = missing_range_ensemble(rng, (-ZERO, ZERO), comparison=0, categorical=False)
    assert not OnnxMlTrees.supports(ranged)
    with pytest.raises(ValueError, match="missing ranges"):
        OnnxMlTrees(ranged, "float64")


# ---------------------------------------------------------------- in the container
sklearn = pytest.importorskip("sklearn")
from sklearn import ensemble as sk_ensemble  # noqa: E402

import woodstar  # noqa: E402
from woodstar.runtimes import c_walk  # noqa: E402
from woodstar.runtimes import onnx_ml as onnx_ml_module  # noqa: E402


@pytest.fixture
def without_c_walk(monkeypatch):
    """The container's choices where no C compiler is there (the compiled walk first)."""
    monkeypatch.setattr(c_walk, "available", lambda: False)


def _data(rng, n=400):
    X = rng.normal(size=(n, 5))
    return X, X[:, 0] - 2 * X[:, 1] * X[:, 2] + rng.normal(scale=0.1, size=n)


def test_one_value_leaves_take_onnx_ml_at_every_size_in_chunks(without_c_walk, rng, monkeypatch):
    X, y = _data(rng)
    model = sk_ensemble.GradientBoostingRegressor(n_estimators=30, random_state=0).fit(X, y)
    converted = woodstar.convert(model, "torch")
    assert converted.route == "onnx-ml"
    X_test = rng.normal(scale=2, size=(300, 5)).astype(np.float32)
    np.testing.assert_array_equal(converted.predict(X_test[:1]), model.predict(X_test[:1]))
    whole = converted.predict(X_test)
    np.testing.assert_array_equal(whole, model.predict(X_test))  # a plain sum: to the bit
    monkeypatch.setattr(onnx_ml_module, "CHUNK_ROWS", 7)
    np.testing.assert_array_equal(converted.predict(X_test), whole)


def test_forest_classifiers_take_it_reading_leaf_indices(without_c_walk, rng):
    X, y = _data(rng)
    model = sk_ensemble.RandomForestClassifier(5, max_depth=4, random_state=0).fit(X, y > 0)
    converted = woodstar.convert(model, "torch")
    assert converted.route == "onnx-ml"
    assert woodstar.convert(model, "onnx").route == "program"
    # One row goes to the NumPy walk (faster there), two to ONNX Runtime; same answers.
    X_test = rng.normal(size=(2, 5)).astype(np.float32)
    for rows in (1, 2):
        np.testing.assert_array_equal(converted.predict_proba(X_test[:rows]),
                                      model.predict_proba(X_test[:rows]))
    assert set(converted._cpu_runners) == {("numpy-walk", "float32"), ("onnx-ml", "float32")}


def test_one_value_leaves_keep_onnx_ml_for_single_rows(without_c_walk, rng):
    X, y = _data(rng)
    model = sk_ensemble.GradientBoostingRegressor(n_estimators=5, random_state=0).fit(X, y)
    assert woodstar.convert(model, "torch")._routes.single_row == "onnx-ml"


def test_vector_leaves_in_several_blocks_are_left_to_the_walk(rng):
    # Each tree would be written once per column: slower than the NumPy walk.
    ens = random_ensemble(rng, leaf_width=2, n_outputs=3)
    assert not walks_each_tree_once(ens)
    assert walks_each_tree_once(random_ensemble(rng, leaf_width=2, n_outputs=2))
    assert walks_each_tree_once(random_ensemble(rng, n_outputs=3))


def test_leaf_indices_are_the_leaves_the_reference_reaches(rng):
    import onnxruntime as ort

    ens = random_ensemble(rng, leaf_width=3, n_outputs=3, aggregation="mean")
    X = inputs(rng, ens.n_features, n=200).astype(np.float32)
    session = ort.InferenceSession(leaf_index_model(ens, "float32").SerializeToString(),
                                   providers=["CPUExecutionProvider"])
    ids = session.run(None, {"X": X})[0].astype(np.intp)
    assert ids.shape == (200, ens.n_trees)
    assert np.all(ens.left[ids] < 0)  # every id is a leaf ...
    owner = np.searchsorted(ens.tree_offsets, ids, side="right") - 1
    np.testing.assert_array_equal(owner, np.broadcast_to(np.arange(ens.n_trees), ids.shape))
    one_tree_raw = [predict(_only_tree(ens, t), X.astype(np.float64))[0] for t in range(ens.n_trees)]
    for t in range(ens.n_trees):  # ... and its vector is the one tree t alone predicts
        np.testing.assert_array_equal(ens.leaf_value[ids[:, t]], one_tree_raw[t])


def _only_tree(ens, t):
    """The ensemble with every other tree's leaves zeroed, base 0, summed."""
    keep = np.zeros(ens.n_nodes, bool)
    keep[ens.tree_offsets[t]:ens.tree_offsets[t + 1]] = True
    return ens.replace(leaf_value=np.where(keep[:, None], ens.leaf_value, 0.0),
                       base_score=np.zeros_like(ens.base_score), aggregation="sum")


def test_leaf_vectors_are_added_in_tree_order_in_every_gather_block(rng):
    # Leaves whose sum depends on the order of the additions: 1 + 1e-16 + ... != ...
    ens = random_ensemble(rng, n_trees=40, leaf_width=2, n_outputs=2, aggregation="mean")
    ens = ens.replace(leaf_value=rng.choice([1.0, 1e-16, -1.0, 3e-17], size=ens.leaf_value.shape))
    X = inputs(rng, ens.n_features, n=500).astype(np.float32).astype(np.float64)
    route = OnnxMlTrees(ens, "float32")
    route.gather_rows = 7  # many blocks, the last one short
    np.testing.assert_array_equal(route(X.astype(np.float32))[0], predict(ens, X)[0])
    # The check can fail: the same leaves added in reverse tree order round differently.
    reverse = np.cumsum(ens.leaf_value[_leaf_ids(route, X)[:, ::-1]], axis=1)[:, -1]
    assert not np.array_equal(reverse / ens.n_trees, predict(ens, X)[0])


def _leaf_ids(route, X):
    return route.session.run(None, {"X": X.astype(np.float32)})[0].astype(np.intp)


def test_row_blocks_on_several_threads_give_the_same_bits(without_c_walk, rng):
    X, y = _data(rng)
    model = sk_ensemble.GradientBoostingRegressor(n_estimators=20, random_state=0).fit(X, y)
    converted = woodstar.convert(model, "torch", extra_config={"n_threads": 3})
    route = converted._cpu_runner("onnx-ml", "float32").program
    assert route.n_threads == 3
    X_test = rng.normal(scale=2, size=(301, 5)).astype(np.float32)
    route.blocks.min_rows = 10 ** 9
    serial = converted.predict(X_test)
    route.blocks.min_rows = 2
    np.testing.assert_array_equal(converted.predict(X_test), serial)
    np.testing.assert_array_equal(serial, model.predict(X_test))
