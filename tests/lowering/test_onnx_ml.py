"""The IR as one ONNX-ML TreeEnsemble node, run by ONNX Runtime: a valid model, single-
leaf trees, refusals, and the container's choice of it (its equality with the IR
reference on edge trees is in test_cpu_routes.py)."""

import numpy as np
import pytest

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

from woodstar.ir.builder import EnsembleBuilder  # noqa: E402
from woodstar.lowering.onnx_ml import OnnxMlTrees, tree_ensemble_model  # noqa: E402

from .test_gbdt_semantics import ZERO, _ensemble as missing_range_ensemble  # noqa: E402
from .test_strategies import CASES, random_ensemble  # noqa: E402

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
from woodstar import container as container_module  # noqa: E402


def _data(rng, n=400):
    X = rng.normal(size=(n, 5))
    return X, X[:, 0] - 2 * X[:, 1] * X[:, 2] + rng.normal(scale=0.1, size=n)


def test_one_value_leaves_take_onnx_ml_at_every_size_in_chunks(rng, monkeypatch):
    X, y = _data(rng)
    model = sk_ensemble.GradientBoostingRegressor(n_estimators=30, random_state=0).fit(X, y)
    converted = woodstar.convert(model, "torch")
    assert converted._cpu_route == "onnx-ml"
    X_test = rng.normal(scale=2, size=(300, 5)).astype(np.float32)
    np.testing.assert_array_equal(converted.predict(X_test[:1]), model.predict(X_test[:1]))
    whole = converted.predict(X_test)
    np.testing.assert_array_equal(whole, model.predict(X_test))  # a plain sum: to the bit
    monkeypatch.setattr(container_module, "ONNX_ML_CHUNK_ROWS", 7)
    np.testing.assert_array_equal(converted.predict(X_test), whole)


def test_vector_leaves_take_the_numpy_walk(rng):
    X, y = _data(rng)
    model = sk_ensemble.RandomForestClassifier(5, max_depth=4, random_state=0).fit(X, y > 0)
    assert woodstar.convert(model, "torch")._cpu_route == "numpy"
    assert woodstar.convert(model, "onnx")._cpu_route is None


def test_row_blocks_on_several_threads_give_the_same_bits(rng):
    X, y = _data(rng)
    model = sk_ensemble.GradientBoostingRegressor(n_estimators=20, random_state=0).fit(X, y)
    converted = woodstar.convert(model, "torch", extra_config={"n_threads": 3})
    route = converted._cpu_program("float32")
    assert route.n_threads == 3
    X_test = rng.normal(scale=2, size=(301, 5)).astype(np.float32)
    route.parallel_min_rows = 10 ** 9
    serial = converted.predict(X_test)
    route.parallel_min_rows = 2
    np.testing.assert_array_equal(converted.predict(X_test), serial)
    np.testing.assert_array_equal(serial, model.predict(X_test))
