"""The onnx backend's ``TreeEnsemble`` export (woodstar/backends/onnx_tree_export.py):
which models take it, their parity with the source library (float32 and float64
input, NaN, values on thresholds), the file as a plain ONNX model run by ONNX Runtime
alone, saving, threads, and the models that keep the tensor program."""

import importlib.util

import numpy as np
import pytest

import woodstar

from .._parity import edge_rows

pytestmark = pytest.mark.skipif(
    any(importlib.util.find_spec(m) is None for m in ("onnx", "onnxruntime", "onnxscript")),
    reason="onnx, onnxruntime or onnxscript not installed")

N_FEATURES = 6


def _data(rng, n=500):
    X = rng.normal(size=(n, N_FEATURES))
    y = (X[:, 0] + X[:, 1] > 0).astype(int) + (X[:, 2] > 0.8)
    return X, y


def _program(converted):
    return converted._programs["float32"]


def _rows(converted, X, rng, nan=True):
    """Fresh rows, rows on and next to thresholds, NaN where the source takes it."""
    fresh = X[rng.integers(0, len(X), 150)] + rng.normal(scale=0.3, size=(150, X.shape[1]))
    edges = edge_rows(converted.ir.ensemble, 100, rng, nan=nan, inf=False)
    return np.vstack([fresh, edges])


def _fit(kind, rng):
    X, y = _data(rng)
    if kind in ("rf", "rf_binary", "rf_regressor", "gb", "et"):
        from sklearn.ensemble import (ExtraTreesClassifier, GradientBoostingClassifier,
                                      RandomForestClassifier, RandomForestRegressor)
        model = {"rf": RandomForestClassifier(n_estimators=40, max_depth=7, random_state=0),
                 "rf_binary": RandomForestClassifier(n_estimators=30, random_state=0),
                 "et": ExtraTreesClassifier(n_estimators=20, max_depth=6, random_state=0),
                 "rf_regressor": RandomForestRegressor(n_estimators=30, max_depth=6, random_state=0),
                 "gb": GradientBoostingClassifier(n_estimators=15, max_depth=3, random_state=0)}[kind]
        target = {"rf_binary": y > 0, "rf_regressor": X[:, 0] + X[:, 3] ** 2}.get(kind, y)
        return model.fit(X, target), X
    Xn = X.copy()
    Xn[rng.random(Xn.shape) < 0.1] = np.nan
    if kind.startswith("lgbm"):
        lightgbm = pytest.importorskip("lightgbm")
        if kind == "lgbm_regressor":
            return lightgbm.LGBMRegressor(n_estimators=20, num_leaves=15, verbose=-1).fit(
                Xn, np.nan_to_num(X[:, 0]) * 3), Xn
        return lightgbm.LGBMClassifier(n_estimators=15, num_leaves=15, verbose=-1).fit(Xn, y), Xn
    xgboost = pytest.importorskip("xgboost")
    if kind == "xgb_binary":
        return xgboost.XGBClassifier(n_estimators=20, max_depth=4).fit(Xn, y > 0), Xn
    return xgboost.XGBClassifier(n_estimators=10, max_depth=4).fit(Xn, y), Xn


# Sums in float64 in the source's order: bit for bit (README, "Exactness"); transformed
# outputs (sigmoid, softmax) within 1e-12; XGBoost sums in float32.
PROBA_BITS = ("rf", "rf_binary", "et")


@pytest.mark.parametrize("kind", ["rf", "rf_binary", "et", "rf_regressor", "gb", "lgbm",
                                  "lgbm_regressor", "xgb", "xgb_binary"])
def test_tree_ensemble_export_matches_the_source(kind, rng):
    model, X = _fit(kind, rng)
    converted = woodstar.convert(model, "onnx")
    assert _program(converted).exporter == "ai.onnx.ml"
    ops = {(n.domain, n.op_type) for n in converted.model.graph.node}
    assert ("ai.onnx.ml", "TreeEnsemble") in ops
    rows = _rows(converted, X, rng, nan=not kind.startswith(("rf", "et", "gb")))
    tolerance = 1e-6 if kind.startswith("xgb") else 1e-12
    for X_in in (rows, rows.astype(np.float32)):
        if hasattr(model, "predict_proba"):
            np.testing.assert_array_equal(converted.predict(X_in), model.predict(X_in))
            got, expected = converted.predict_proba(X_in), model.predict_proba(X_in)
            if kind in PROBA_BITS:
                np.testing.assert_array_equal(got, expected)
            else:
                np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
        else:
            got, expected = converted.predict(X_in), model.predict(X_in)
            if kind == "rf_regressor":
                np.testing.assert_array_equal(got, expected)
            else:
                np.testing.assert_allclose(got, expected, rtol=tolerance, atol=tolerance)
    # One row and an odd size: the batch dimension is dynamic.
    for n in (1, 7):
        np.testing.assert_array_equal(converted.predict(rows[:n]), model.predict(rows[:n]))


def test_exported_file_is_a_plain_onnx_model(rng):
    """ONNX Runtime alone (one intra-op thread, as the docstring of the export says)
    runs the file and gives the converted model's raw and transformed scores."""
    import onnx
    import onnxruntime as ort

    model, X = _fit("rf", rng)
    converted = woodstar.convert(model, "onnx", extra_config={
        "input_names": ("features",), "output_names": ("scores", "probabilities")})
    onnx.checker.check_model(converted.model, full_check=True)
    assert {o.domain for o in converted.model.opset_import} <= {"", "ai.onnx.ml"}
    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    session = ort.InferenceSession(converted.model.SerializeToString(), options,
                                   providers=["CPUExecutionProvider"])
    assert [i.name for i in session.get_inputs()] == ["features"]
    assert [o.name for o in session.get_outputs()] == ["scores", "probabilities"]
    rows = _rows(converted, X, rng, nan=False).astype(np.float32)
    raw, probabilities = session.run(None, {"features": rows})
    np.testing.assert_array_equal(probabilities, model.predict_proba(rows))
    np.testing.assert_array_equal(raw, _program(converted)(rows)[0])


def test_row_blocks_on_two_threads_give_the_same_bits(rng):
    model, X = _fit("rf", rng)
    one = woodstar.convert(model, "onnx", extra_config={"n_threads": 1})
    two = woodstar.convert(model, "onnx", extra_config={"n_threads": 2})
    assert two._programs["float32"].session.get_session_options().intra_op_num_threads == 1
    rows = np.vstack([_rows(one, X, rng, nan=False)] * 12)  # past parallel_min_rows
    assert len(rows) >= two._programs["float32"].blocks.min_rows
    np.testing.assert_array_equal(two.predict_proba(rows), one.predict_proba(rows))
    np.testing.assert_array_equal(two.predict_proba(rows), model.predict_proba(rows))


def test_save_and_load_keep_the_tree_ensemble(rng, tmp_path):
    model, X = _fit("lgbm", rng)
    converted = woodstar.convert(model, "onnx", extra_config={"n_threads": 2})
    path = tmp_path / "model.zip"
    converted.save(path)
    loaded = woodstar.load(path)
    program = loaded._program("float32")
    assert any(n.op_type == "TreeEnsemble" for n in program.model.graph.node)
    assert program.session.get_session_options().intra_op_num_threads == 1
    rows = _rows(converted, X, rng).astype(np.float32)
    np.testing.assert_array_equal(loaded.predict_proba(rows), converted.predict_proba(rows))
    np.testing.assert_allclose(loaded.predict_proba(rows), model.predict_proba(rows),
                               rtol=1e-12, atol=1e-12)


def _keeps_tensor_program(converted):
    program = _program(converted)
    assert program.exporter in ("dynamo", "torchscript")
    assert not any(n.op_type == "TreeEnsemble" for n in program.model.graph.node)


@pytest.mark.parametrize("config", [{"tree_implementation": "tree_trav"},
                                    {"onnx_target_opset": 17}],
                         ids=["strategy-named", "opset-named"])
def test_named_strategy_or_opset_keeps_the_tensor_program(config, rng):
    model, X = _fit("gb", rng)
    converted = woodstar.convert(model, "onnx", extra_config=config)
    _keeps_tensor_program(converted)
    rows = _rows(converted, X, rng, nan=False)
    np.testing.assert_allclose(converted.predict_proba(rows), model.predict_proba(rows),
                               rtol=1e-12, atol=1e-12)


def test_models_the_kernel_cannot_take_keep_the_tensor_program(rng):
    """Missing-value ranges (LightGBM's zero_as_missing) and a pipeline (a scaler
    before the trees) are not bare ensembles the kernel computes exactly."""
    lightgbm = pytest.importorskip("lightgbm")
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X, y = _data(rng)
    X[rng.random(X.shape) < 0.2] = 0.0
    zero_missing = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=7, zero_as_missing=True,
                                           verbose=-1).fit(X, y)
    pipeline = make_pipeline(StandardScaler(),
                             RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0)).fit(X, y)
    for model in (zero_missing, pipeline):
        converted = woodstar.convert(model, "onnx")
        _keeps_tensor_program(converted)
        np.testing.assert_array_equal(converted.predict(X), model.predict(X))


def test_export_that_differs_in_the_last_bit_is_not_returned(rng, monkeypatch):
    from woodstar.backends import onnx_backend

    monkeypatch.setattr(onnx_backend, "_verify_raw_bits",
                        lambda model, module: "its raw output is not the eager module's")
    model, X = _fit("gb", rng)
    converted = woodstar.convert(model, "onnx")
    _keeps_tensor_program(converted)
