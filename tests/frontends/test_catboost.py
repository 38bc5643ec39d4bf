"""CatBoost frontend: the IR reference and every route against CatBoost itself."""

import numpy as np
import pytest

cb = pytest.importorskip("catboost")

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter, NotFittedError  # noqa: E402
from woodstar.frontends.catboost import from_catboost, ir_from_json, _export_json  # noqa: E402
from woodstar.lowering import strategy_names  # noqa: E402

from ._gbdt import check, check_reference, config  # noqa: E402
from .._parity import make_test_inputs  # noqa: E402

N_FEATURES = 5
CASES = {
    "Logloss": (cb.CatBoostClassifier, {}),
    "CrossEntropy": (cb.CatBoostClassifier, {}),
    "MultiClass": (cb.CatBoostClassifier, {}),
    "RMSE": (cb.CatBoostRegressor, {}),
    "MAE": (cb.CatBoostRegressor, {}),
    "Quantile:alpha=0.8": (cb.CatBoostRegressor, {}),
    "MultiRMSE": (cb.CatBoostRegressor, {}),
    "Poisson": (cb.CatBoostRegressor, {}),
    "Tweedie:variance_power=1.5": (cb.CatBoostRegressor, {}),
    "YetiRank": (cb.CatBoostRanker, {}),
    "nan_mode_Max": (cb.CatBoostRegressor, dict(nan_mode="Max")),
}
STRATEGIES = strategy_names()


def _fit(case, rng, n=300, **extra):
    cls, params = CASES[case]
    X = rng.normal(size=(n, N_FEATURES))
    X[:, 3] = np.round(X[:, 3], 1)
    X[rng.random(X.shape) < 0.08] = np.nan
    signal = np.nan_to_num(X[:, 1]) + 0.5 * np.nan_to_num(X[:, 2]) * (np.nan_to_num(X[:, 3]) > 0)
    noisy = signal + 0.3 * rng.normal(size=n)
    loss = case if not case.startswith("nan_mode") else "RMSE"
    fit = {}
    if loss in ("Logloss",):
        y = np.where(noisy > 0, "yes", "no")
    elif loss == "CrossEntropy":
        y = (noisy > 0).astype(int)
    elif loss == "MultiClass":
        y = np.digitize(noisy, [-0.5, 0.5])
    elif loss.startswith(("Poisson", "Tweedie")):
        y = rng.poisson(np.exp(0.5 * np.clip(noisy, -3, 3))).astype(float)
    elif loss == "MultiRMSE":
        y = np.stack([noisy, -noisy + rng.normal(size=n)], axis=1)
    elif loss == "YetiRank":
        y = np.digitize(noisy, [-1.0, 0.0, 1.0])
        fit["group_id"] = np.repeat(np.arange(n // 50), 50)
    else:
        y = noisy
    model = cls(iterations=4, depth=3, verbose=0, loss_function=loss, thread_count=1,
                allow_writing_files=False, random_seed=int(rng.integers(1 << 30)),
                **{**params, **extra})
    return model.fit(X, y, **fit)


def _expected(model, X):
    if isinstance(model, cb.CatBoostRanker):  # its predict is the raw score
        return {"predict": model.predict(X), "decision_function": model.predict(X)}
    out = {"predict": model.predict(X),  # (n, 1) labels for MultiClass, as CatBoost gives
           "decision_function": model.predict(X, prediction_type="RawFormulaVal")}
    if isinstance(model, cb.CatBoostClassifier):
        out["predict_proba"] = model.predict_proba(X)
    return out


def _inputs(model_ir, rng, nan=True):
    return make_test_inputs(model_ir.ensemble, rng, n_random=150, n_edge=100, nan=nan)


@pytest.mark.parametrize("case", sorted(CASES))
def test_reference_matches_catboost(case, rng):
    model = _fit(case, rng)
    model_ir = from_catboost(model)
    X = _inputs(model_ir, rng)
    expected = _expected(model, X)
    transformed = expected.get("predict_proba", expected["predict"])
    check_reference(model_ir, X, expected["decision_function"], transformed, what=case)


@pytest.mark.parametrize("case", sorted(CASES))
def test_every_loss_converts(case, backend, precision, rng):
    strategy = STRATEGIES[sorted(CASES).index(case) % len(STRATEGIES)]
    model = _fit(case, rng)
    converted = woodstar.convert(model, backend, extra_config=config(strategy, precision))
    X = _inputs(converted.ir, rng)
    check(converted, X, _expected(model, X), precision, what=case)


@pytest.mark.parametrize("case", ["Logloss", "MultiClass"])
def test_every_strategy(case, strategy, backend, precision, rng):
    model = _fit(case, rng)
    converted = woodstar.convert(model, backend, extra_config=config(strategy, precision))
    X = _inputs(converted.ir, rng)
    check(converted, X, _expected(model, X), precision, what=case)


def test_scale_and_bias(backend, rng):
    model = _fit("RMSE", rng)
    model.set_scale_and_bias(0.75, 1.5)
    converted = woodstar.convert(model, backend)
    X = _inputs(converted.ir, rng)
    check(converted, X, _expected(model, X), "float32")


def test_nan_mode_forbidden_compares_nan_as_is(backend, rng):
    """Trained without NaN (Forbidden): CatBoost still predicts NaN, as 'not greater'."""
    X = rng.normal(size=(200, N_FEATURES))
    model = cb.CatBoostRegressor(iterations=3, depth=2, verbose=0, nan_mode="Forbidden",
                                 allow_writing_files=False).fit(X, X[:, 0])
    converted = woodstar.convert(model, backend)
    Xt = _inputs(converted.ir, rng)
    assert np.isnan(Xt).any()
    check(converted, Xt, _expected(model, Xt), "float32")


def test_pandas_feature_names(backend, rng):
    pd = pytest.importorskip("pandas")
    X = rng.normal(size=(200, N_FEATURES))
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(N_FEATURES)])
    model = cb.CatBoostRegressor(iterations=3, depth=2, verbose=0,
                                 allow_writing_files=False).fit(frame, X[:, 0] - X[:, 1])
    converted = woodstar.convert(model, backend)
    assert converted.ir.head.feature_names == tuple(frame.columns)
    test = pd.DataFrame(_inputs(converted.ir, rng), columns=frame.columns)
    check(converted, test[frame.columns[::-1]], _expected(model, test), "float32")


def test_categorical_features_are_refused(rng):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"a": rng.normal(size=100), "c": rng.choice(["x", "y"], 100)})
    model = cb.CatBoostRegressor(iterations=2, depth=2, verbose=0, allow_writing_files=False)
    model.fit(frame, rng.normal(size=100), cat_features=["c"])
    with pytest.raises(MissingConverter, match=r"Cannot convert CatBoostRegressor: categorical "
                                                r"features is not supported \(got '1 feature\(s\)'\); "
                                                r"supported: numerical features only \(CatBoost "
                                                r"predicts from its categorical statistics "
                                                r"\(CTRs\); .* own hashes of the category strings"):
        from_catboost(model)


@pytest.mark.parametrize("what, reason", [
    ("text_features", r"CatBoost's text processing"),
    ("embedding_features", r"CatBoost's embedding estimators"),
], ids=["text", "embedding"])
def test_text_and_embedding_features_are_refused_with_the_reason(what, reason, rng):
    model_json = _export_json(_fit("RMSE", rng))
    model_json["features_info"][what] = [{"feature_index": 0}]
    with pytest.raises(MissingConverter, match=rf"{what.replace('_', ' ')} is not supported "
                                                rf"\(got '1 feature\(s\)'\); supported: "
                                                rf"numerical features only \({reason}"):
        ir_from_json(model_json, "CatBoostRegressor", "regressor")


def test_unsupported_loss_is_named(rng):
    model = _fit("RMSE", rng)
    model_json = _export_json(model)
    model_json["model_info"]["params"]["loss_function"]["type"] = "SurvivalAft"
    with pytest.raises(MissingConverter, match=r"loss_function is not supported "
                                                r"\(got 'SurvivalAft'\)"):
        ir_from_json(model_json, "CatBoostRegressor", "regressor")


def test_model_without_trees_is_refused(rng):
    model_json = _export_json(_fit("RMSE", rng))
    model_json["oblivious_trees"] = []
    with pytest.raises(MissingConverter, match=r"a model with is not supported \(got 'no trees'\)"):
        ir_from_json(model_json, "CatBoostRegressor", "regressor")


def test_non_symmetric_trees_are_refused(rng):
    model = _fit("RMSE", rng, grow_policy="Depthwise")
    with pytest.raises(MissingConverter, match=r"grow_policy is not supported"):
        from_catboost(model)


def test_unfitted_model_is_refused():
    with pytest.raises(NotFittedError, match="Cannot convert CatBoostClassifier: the model is not"):
        woodstar.convert(cb.CatBoostClassifier())


def test_export_writes_nothing_in_the_working_directory(rng, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    from_catboost(_fit("RMSE", rng))
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("case", ["MultiClass", "Logloss", "Poisson"])
def test_generic_catboost_from_a_model_file_predicts_raw_values(case, rng, tmp_path):
    """``catboost.CatBoost`` (what loading a .cbm gives) predicts raw formula values
    whatever the loss; the converted model does the same."""
    model = _fit(case, rng)
    model.save_model(str(tmp_path / "model.cbm"))
    loaded = cb.CatBoost()
    loaded.load_model(str(tmp_path / "model.cbm"))
    X = _inputs(from_catboost(loaded), rng)
    converted = woodstar.convert(loaded, "torch")
    assert not hasattr(converted, "predict_proba")
    np.testing.assert_allclose(converted.predict(X), loaded.predict(X), rtol=1e-12, atol=1e-12)
