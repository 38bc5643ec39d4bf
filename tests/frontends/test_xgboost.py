"""XGBoost frontend: the IR reference and every route against XGBoost itself."""

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter, NotFittedError  # noqa: E402
from woodstar.frontends.xgboost import OBJECTIVES, from_xgboost, ir_from_json  # noqa: E402
from woodstar.lowering import strategy_names  # noqa: E402
from woodstar.runtimes import c_walk  # noqa: E402

from ._gbdt import CAT, N_FEATURES, check, check_reference, config, train_data  # noqa: E402
from .._parity import make_test_inputs  # noqa: E402

# XGBoost sums margins and applies its links in float32: every route is held to
# float32 rounding of XGBoost's own outputs (relative to their scale).
TOL = 1e-6
FEATURE_TYPES = ["c"] + ["q"] * (N_FEATURES - 1)


def _train_data(rng, n=300, categorical=True):
    return train_data(rng, n, categorical=categorical)


def _labels(objective, signal, rng):
    noisy = signal + 0.3 * rng.normal(size=len(signal))
    if objective.startswith("binary:") or objective == "rank:map":
        return (noisy > 0).astype(int)
    if objective.startswith("multi:"):
        return np.digitize(noisy, [-0.5, 0.5])
    if objective in ("count:poisson", "reg:tweedie"):
        return rng.poisson(np.exp(0.5 * np.clip(noisy, -3, 3))).astype(float)
    if objective in ("reg:gamma", "reg:squaredlogerror"):
        return np.exp(0.5 * np.clip(noisy, -3, 3)) + 0.1
    if objective == "reg:logistic":
        return 1.0 / (1.0 + np.exp(-noisy))
    if objective.startswith("rank:"):
        return np.digitize(noisy, [-1.0, 0.0, 1.0])
    return noisy


def _fit(objective, rng, categorical=True, n_estimators=4, cls=None, **params):
    X, signal = _train_data(rng, categorical=categorical)
    y = _labels(objective, signal, rng)
    common = dict(n_estimators=n_estimators, max_depth=3, objective=objective,
                  tree_method="hist", max_cat_to_onehot=3, n_jobs=1)
    common.update(params)
    if params.get("booster") == "gblinear":
        for key in ("max_depth", "tree_method", "max_cat_to_onehot"):
            common.pop(key)
    if categorical:
        common.update(enable_categorical=True, feature_types=FEATURE_TYPES)
    fit_params = {}
    if objective == "reg:quantileerror":
        common["quantile_alpha"] = np.array([0.2, 0.5, 0.9])
    if cls is None:
        if objective.startswith(("binary:", "multi:")):
            cls = xgb.XGBClassifier
        elif objective.startswith("rank:"):
            cls = xgb.XGBRanker
            fit_params["qid"] = np.repeat(np.arange(len(y) // 50), 50)
        else:
            cls = xgb.XGBRegressor
    return cls(**common).fit(X, y, **fit_params)


def _inputs(model_ir, rng, categorical=True):
    X = make_test_inputs(model_ir.ensemble, rng, n_random=150, n_edge=100)
    if categorical:
        X[:, CAT] = rng.choice([-3.0, -1.0, -0.5, 0.0, 0.7, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0,
                                8.0, 9.0, 40.0, 1e10, np.nan, np.inf, -np.inf, 4.5], len(X))
    return X


def _expected(model, X):
    out = {"predict": model.predict(X), "decision_function": model.predict(X, output_margin=True)}
    if hasattr(model, "predict_proba"):
        out["predict_proba"] = model.predict_proba(X)
    return out


def _reference_expected(model, X):
    transformed = model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
    return model.predict(X, output_margin=True), transformed


ALL_OBJECTIVES = sorted(OBJECTIVES)
STRATEGIES = strategy_names()


# ------------------------------------------------------------------ frontend level
@pytest.mark.parametrize("objective", ALL_OBJECTIVES)
def test_reference_matches_xgboost(objective, rng):
    model = _fit(objective, rng)
    model_ir = from_xgboost(model)
    X = _inputs(model_ir, rng)
    check_reference(model_ir, X, *_reference_expected(model, X), tol=TOL, what=objective)


VARIANTS = {
    "dart": dict(booster="dart", rate_drop=0.5, skip_drop=0.0),
    "onehot": dict(max_cat_to_onehot=64),
    "missing": dict(missing=-999.0),
    "rf": dict(cls="rf"),
}


@pytest.mark.parametrize("variant", sorted(VARIANTS))
@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob", "reg:squarederror"])
def test_reference_variants(objective, variant, rng):
    params = dict(VARIANTS[variant])
    if params.pop("cls", None):
        params["cls"] = xgb.XGBRFClassifier if objective != "reg:squarederror" else xgb.XGBRFRegressor
    model = _fit(objective, rng, **params)
    model_ir = from_xgboost(model)
    X = _inputs(model_ir, rng)
    if variant == "missing":
        X[rng.random(X.shape) < 0.1] = -999.0
    check_reference(model_ir, X, *_reference_expected(model, X), tol=TOL, what=variant)


@pytest.mark.parametrize("strategy_name", ["one_output_per_tree", "multi_output_tree"])
def test_multi_output_regression(strategy_name, backend, rng):
    X, signal = _train_data(rng, categorical=False)
    Y = np.stack([signal, -2 * signal + rng.normal(size=len(signal)), signal ** 2], axis=1)
    model = xgb.XGBRegressor(n_estimators=4, max_depth=3, tree_method="hist",
                             multi_strategy=strategy_name).fit(X, Y)
    converted = woodstar.convert(model, backend)
    if strategy_name == "multi_output_tree":
        assert converted.ir.ensemble.leaf_width == 3
    Xt = _inputs(converted.ir, rng, categorical=False)
    check(converted, Xt, _expected(model, Xt), "float32", tol=TOL)
    check_reference(converted.ir, Xt, *_reference_expected(model, Xt), tol=TOL)


# --------------------------------------------------------------------- parity
@pytest.mark.parametrize("objective", ALL_OBJECTIVES)
def test_every_objective_converts(objective, backend, precision, rng):
    strategy = STRATEGIES[ALL_OBJECTIVES.index(objective) % len(STRATEGIES)]
    model = _fit(objective, rng)
    converted = woodstar.convert(model, backend, extra_config=config(strategy, precision))
    X = _inputs(converted.ir, rng)
    check(converted, X, _expected(model, X), precision, tol=TOL, what=objective)


@pytest.mark.parametrize("case", [
    ("binary:logistic", dict()),
    ("multi:softprob", dict(booster="dart", rate_drop=0.5, skip_drop=0.0)),
    ("reg:squarederror", dict(missing=-999.0, max_cat_to_onehot=64)),
], ids=["binary", "multiclass-dart", "missing-onehot"])
def test_every_strategy(case, strategy, backend, precision, rng):
    objective, params = case
    model = _fit(objective, rng, **params)
    converted = woodstar.convert(model, backend, extra_config=config(strategy, precision))
    assert converted.ir.ensemble.has_categorical  # the categorical path is exercised
    X = _inputs(converted.ir, rng)
    if "missing" in params:
        assert converted.ir.ensemble.has_missing_range
        X[rng.random(X.shape) < 0.1] = -999.0
    check(converted, X, _expected(model, X), precision, tol=TOL, what=objective)


def test_best_iteration_after_early_stopping(backend, rng):
    X, signal = _train_data(rng, categorical=False)
    y = signal + rng.normal(size=len(signal))
    model = xgb.XGBRegressor(n_estimators=200, learning_rate=0.5, max_depth=3,
                             early_stopping_rounds=3)
    model.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])], verbose=False)
    assert 0 < model.best_iteration + 1 < 200
    converted = woodstar.convert(model, backend)
    assert converted.ir.ensemble.n_trees == model.best_iteration + 1
    Xt = _inputs(converted.ir, rng, categorical=False)
    check(converted, Xt, _expected(model, Xt), "float32", tol=TOL)


def test_iteration_range_by_slicing_the_booster(backend, rng):
    """A user's iteration_range: convert the sliced booster, booster[a:b]."""
    model = _fit("multi:softprob", rng, n_estimators=6)
    booster = model.get_booster()
    converted = woodstar.convert(booster[1:4], backend)
    assert converted.ir.ensemble.n_trees == 3 * 3
    X = _inputs(converted.ir, rng)
    X[np.isinf(X)] = np.nan
    dmatrix = xgb.DMatrix(X, feature_types=FEATURE_TYPES, enable_categorical=True)
    check(converted, X, {"predict": booster.predict(dmatrix, iteration_range=(1, 4)),
                         "decision_function": booster.predict(dmatrix, output_margin=True,
                                                              iteration_range=(1, 4))},
          "float32", tol=TOL)


@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softmax", "binary:hinge",
                                       "reg:squarederror"])
def test_raw_booster(objective, backend, rng):
    model = _fit(objective, rng)
    booster = model.get_booster()
    converted = woodstar.convert(booster, backend)
    X = _inputs(converted.ir, rng)
    X[np.isinf(X)] = np.nan  # a DMatrix refuses infinities (inplace_predict takes them)
    dmatrix = xgb.DMatrix(X, feature_types=FEATURE_TYPES, enable_categorical=True)
    check(converted, X, {"predict": booster.predict(dmatrix),
                         "decision_function": booster.predict(dmatrix, output_margin=True)},
          "float32", tol=TOL)


def test_pandas_with_feature_names_and_categories(backend, rng):
    pd = pytest.importorskip("pandas")
    X, signal = _train_data(rng, categorical=True)
    values = np.array([10, 20, 30, 40, 50, 60, 70, 80])  # category values are not codes
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(N_FEATURES)])
    codes = np.nan_to_num(X[:, CAT], nan=0).astype(int)
    frame["f0"] = pd.Categorical(np.where(np.isnan(X[:, CAT]), np.nan, values[codes]),
                                 categories=values)
    model = xgb.XGBClassifier(n_estimators=4, max_depth=3, enable_categorical=True,
                              tree_method="hist", max_cat_to_onehot=3).fit(frame, signal > 0)
    converted = woodstar.convert(model, backend)
    assert converted.ir.head.feature_names == tuple(frame.columns)
    test = pd.DataFrame(_inputs(converted.ir, rng, categorical=False), columns=frame.columns)
    picked = rng.choice(len(values) + 1, len(test))
    test["f0"] = pd.Categorical(np.where(picked == len(values), np.nan,
                                         values[np.minimum(picked, len(values) - 1)]),
                                categories=values)
    check(converted, test, _expected(model, test), "float32", tol=TOL, what="pandas")


def _category_model(pd, rng, categories, n=400):
    """A classifier fitted on a DataFrame whose column "f0" is a pandas category column
    with ``categories`` (NaN included), and that DataFrame."""
    X, signal = _train_data(rng, n, categorical=True)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(N_FEATURES)])
    codes = np.nan_to_num(X[:, CAT], nan=0).astype(int) % len(categories)
    picked = np.asarray(categories, dtype=object)[codes]
    frame["f0"] = pd.Categorical(np.where(np.isnan(X[:, CAT]), None, picked), categories=categories)
    model = xgb.XGBClassifier(n_estimators=6, max_depth=3, enable_categorical=True,
                              tree_method="hist", max_cat_to_onehot=3, n_jobs=1)
    return model.fit(frame, np.isin(codes, [1, 2]) + 0.3 * signal > 0.5), frame


def _category_frame(pd, converted, rng, columns, categories, n_missing=1):
    """Fresh rows with "f0" drawn from ``categories`` (in that order as the pandas
    categories) and missing values."""
    test = pd.DataFrame(_inputs(converted.ir, rng, categorical=False), columns=columns)
    picked = rng.choice(len(categories) + n_missing, len(test))
    values = np.asarray(categories, dtype=object)[np.minimum(picked, len(categories) - 1)]
    test["f0"] = pd.Categorical(np.where(picked >= len(categories), None, values),
                                categories=categories)
    return test


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("backend", ["torch", "torch.jit"])
def test_array_input_is_read_as_codes(backend, rng):
    """A model fitted on categories that are not 0..k-1: XGBoost reads a NumPy array as
    category codes, not values, and so does the converted model."""
    pd = pytest.importorskip("pandas")
    model, frame = _category_model(pd, rng, [1, 2, 3, 7, 12, 40])
    converted = woodstar.convert(model, backend)
    X = _inputs(converted.ir, rng)  # codes 0..9, negative, fractions, NaN, inf
    assert np.isin(X[:, CAT], [7.0, 3.0]).any()  # codes whose values are categories too
    check(converted, X, _expected(model, X), "float32", tol=TOL, what="codes")


@pytest.mark.parametrize("backend", ["torch", "torch.jit"])
@pytest.mark.parametrize("categories", [[1, 2, 3, 7, 12, 40], ["b", "a", "zz", "c", "q", ""]],
                         ids=["integers", "strings"])
def test_dataframe_categories_are_recoded_by_value(categories, backend, rng):
    """A DataFrame is re-coded to the training categories by value: categories in
    another order or a subset of them, missing values, columns in another order."""
    pd = pytest.importorskip("pandas")
    model, frame = _category_model(pd, rng, categories)
    converted = woodstar.convert(model, backend)
    column = converted.ir.schema.columns[CAT]
    assert column.kind == "category" and column.category_values == tuple(categories)
    same = _category_frame(pd, converted, rng, frame.columns, categories)
    check(converted, same, _expected(model, same), "float32", tol=TOL, what="training categories")
    test = _category_frame(pd, converted, rng, frame.columns, categories[::-1][:4], n_missing=2)
    check(converted, test, _expected(model, test), "float32", tol=TOL, what="other order")
    reordered = test[frame.columns[::-1]]  # XGBoost refuses it; woodstar matches by name
    check(converted, reordered, _expected(model, test), "float32", tol=TOL,
          what="reordered columns")
    booster = model.get_booster()
    raw = woodstar.convert(booster, backend)
    test = test.replace([np.inf, -np.inf], np.nan)  # a DMatrix refuses infinities
    check(raw, test, {"predict": booster.predict(xgb.DMatrix(test, enable_categorical=True))},
          "float32", tol=TOL, what="Booster")


@pytest.mark.parametrize("categories", [[1, 2, 3, 7], ["b", "a", "zz", "c"]],
                         ids=["integers", "strings"])
def test_unseen_category_is_refused_as_xgboost_refuses_it(categories, rng):
    pd = pytest.importorskip("pandas")
    model, frame = _category_model(pd, rng, categories)
    converted = woodstar.convert(model, "torch")
    beyond = [100] if isinstance(categories[0], int) else ["zzz"]  # after every training one
    test = _category_frame(pd, converted, rng, frame.columns, categories + beyond)
    with pytest.raises(ValueError, match="not in the training set"):
        model.predict(test)
    with pytest.raises(ValueError):
        converted.predict(test)


# --------------------------------------------------------------------- errors
def test_unsupported_objective_is_named(rng):
    model = _fit("reg:squarederror", rng, categorical=False)
    import json

    model_json = json.loads(bytes(model.get_booster().save_raw("json")).decode())
    model_json["learner"]["objective"]["name"] = "survival:cox"
    with pytest.raises(MissingConverter, match=r"Cannot convert XGBRegressor: objective is not "
                                                r"supported \(got 'survival:cox'\); supported: "):
        ir_from_json(model_json, "XGBRegressor", "regressor")


@pytest.mark.parametrize("objective", ["reg:squarederror", "binary:logistic", "multi:softprob",
                                       "count:poisson"])
def test_gblinear(objective, strategy, backend, rng):
    model = _fit(objective, rng, categorical=False, booster="gblinear", n_estimators=5)
    model_ir = from_xgboost(model)
    assert model_ir.ensemble.has_linear_leaves
    X = _inputs(model_ir, rng, categorical=False)
    X[np.isinf(X)] = np.nan
    X = np.clip(X, -5, 5)  # keep float32 cancellation in XGBoost's sum small
    check_reference(model_ir, X, *_reference_expected(model, X), tol=TOL, what="gblinear")
    converted = woodstar.convert(model, backend, extra_config={"tree_implementation": strategy})
    check(converted, X, _expected(model, X), "float32", tol=TOL, what="gblinear")


def test_gblinear_with_non_nan_missing_is_refused(rng):
    model = _fit("reg:squarederror", rng, categorical=False, booster="gblinear", missing=-1.0)
    with pytest.raises(MissingConverter, match=r"missing with booster='gblinear' is not supported"):
        from_xgboost(model)


@pytest.mark.parametrize("edit, message", [
    (lambda m: m["learner"]["gradient_booster"]["model"].update(trees=[], tree_info=[],
                                                                iteration_indptr=[0]),
     r"a model with is not supported \(got 'no trees'\)"),
    (lambda m: m["learner"]["gradient_booster"]["model"]["cats"].update(
        enc=[{"offsets": [0, 1, 2], "values": [97, -61, -87]}]),
     r"categorical feature 0 with non-ASCII string categories is not supported "
     r"\(got b'a\\xc3\\xa9'\); supported: ASCII string categories"),
    (lambda m: m["learner"]["gradient_booster"]["model"]["cats"].update(
        enc=[{"type": 10, "values": [0.5, 2.0]}]),
     r"categorical feature 0 with categories is not supported \(got \[0.5, 2.0\]\); "
     r"supported: integer or string categories"),
], ids=["no-trees", "non-ascii-categories", "float-categories"])
def test_json_errors_are_named(edit, message, rng):
    import json

    model = _fit("reg:squarederror", rng)
    model_json = json.loads(bytes(model.get_booster().save_raw("json")).decode())
    edit(model_json)
    with pytest.raises(MissingConverter, match=message):
        ir_from_json(model_json, "XGBRegressor", "regressor")


def test_unknown_booster_is_named(rng):
    import json

    model = _fit("reg:squarederror", rng, categorical=False)
    model_json = json.loads(bytes(model.get_booster().save_raw("json")).decode())
    model_json["learner"]["gradient_booster"]["name"] = "gbfancy"
    with pytest.raises(MissingConverter, match=r"booster is not supported \(got 'gbfancy'\); "
                                                r"supported: gbtree, dart, gblinear"):
        ir_from_json(model_json, "XGBRegressor", "regressor")


def test_unfitted_model_is_refused():
    with pytest.raises(NotFittedError, match="Cannot convert XGBClassifier: the model is not fitted"):
        woodstar.convert(xgb.XGBClassifier())


# ------------------------------------------- the compiled walk: XGBoost to the bit
# XGBoost starts a row at its float32 base margin, adds float32 leaves in float32 and
# applies float32 links (libm's expf); the compiled walk does the same arithmetic, so
# its answers equal XGBoost's exactly, not within rounding.
needs_c_walk = pytest.mark.skipif(not c_walk.available(), reason=str(c_walk.unavailable_reason()))
EXACT_OBJECTIVES = [o for o in ALL_OBJECTIVES if o != "multi:softmax"]


def _c_walk(model, precision="float32", **extra):
    converted = woodstar.convert(model, "torch", extra_config={
        "cpu_route": "c-walk", "tree_op_precision_dtype": precision, **extra})
    assert converted.ir.ensemble.sum_precision == "float32"
    return converted


def _check_exact(converted, X, expected, what=""):
    for method, values in expected.items():
        got = np.asarray(getattr(converted, method)(X))
        np.testing.assert_array_equal(got.reshape(np.shape(values)), values,
                                      err_msg=f"{what}.{method}")


@needs_c_walk
@pytest.mark.parametrize("precision", ["float32", "float64"])
@pytest.mark.parametrize("objective", EXACT_OBJECTIVES)
def test_c_walk_equals_xgboost(objective, precision, rng):
    model = _fit(objective, rng, n_estimators=25, max_depth=5)
    converted = _c_walk(model, precision)
    X = _inputs(converted.ir, rng)
    _check_exact(converted, X, _expected(model, X), objective)


@needs_c_walk
def test_c_walk_multi_softmax_labels_and_margins_are_exact(rng):
    """XGBClassifier(objective="multi:softmax").predict_proba is scipy's softmax of the
    float32 margins (NumPy's float32 exp), not XGBoost's own link: labels and margins are
    exact, those probabilities within float32 rounding."""
    model = _fit("multi:softmax", rng, n_estimators=25, max_depth=5)
    converted = _c_walk(model)
    X = _inputs(converted.ir, rng)
    expected = _expected(model, X)
    proba = expected.pop("predict_proba")
    _check_exact(converted, X, expected, "multi:softmax")
    np.testing.assert_allclose(converted.predict_proba(X), proba, rtol=TOL, atol=TOL)


C_WALK_VARIANTS = {
    "dart": dict(booster="dart", rate_drop=0.4, skip_drop=0.0),
    "dart-no-drop": dict(booster="dart", rate_drop=0.0, skip_drop=0.0),
    "rf": dict(num_parallel_tree=3),
    "base-score": dict(base_score=0.3),
    "missing": dict(missing=-999.0),
    "onehot": dict(max_cat_to_onehot=64),
    "numeric": dict(categorical=False),
}


@needs_c_walk
@pytest.mark.parametrize("variant", sorted(C_WALK_VARIANTS))
@pytest.mark.parametrize("objective", ["binary:logistic", "multi:softprob", "reg:squarederror",
                                       "count:poisson"])
def test_c_walk_variants_equal_xgboost(objective, variant, rng):
    params = dict(C_WALK_VARIANTS[variant])
    if objective == "binary:logistic" and variant == "base-score":
        params["base_score"] = 1e-9  # below XGBoost's bound: it clamps to 1e-6
    model = _fit(objective, rng, n_estimators=20, max_depth=5, **params)
    converted = _c_walk(model)
    X = _inputs(converted.ir, rng, categorical=params.get("categorical", True))
    if variant == "missing":
        X[rng.random(X.shape) < 0.1] = -999.0
    _check_exact(converted, X, _expected(model, X), variant)
    _check_exact(converted, X[:1], _expected(model, X[:1]), f"{variant} one row")


@needs_c_walk
@pytest.mark.parametrize("variant", ["gbtree", "dart"])
def test_c_walk_raw_booster_equals_xgboost(variant, rng):
    """A Booster's predict(DMatrix) weighs DART trees as leaf * w (the sklearn wrapper's
    inplace_predict as (base + leaf - base) * w): each conversion matches its own."""
    params = C_WALK_VARIANTS["dart"] if variant == "dart" else {}
    booster = _fit("multi:softprob", rng, n_estimators=20, **params).get_booster()
    converted = _c_walk(booster)
    X = _inputs(converted.ir, rng)
    X[np.isinf(X)] = np.nan  # a DMatrix refuses infinities
    dmatrix = xgb.DMatrix(X, feature_types=FEATURE_TYPES, enable_categorical=True)
    _check_exact(converted, X, {"predict": booster.predict(dmatrix),
                                "decision_function": booster.predict(dmatrix, output_margin=True)})


@needs_c_walk
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_c_walk_vector_leaves_equal_xgboost(precision, rng):
    X, signal = _train_data(rng, categorical=False)
    Y = np.stack([signal, -2 * signal + rng.normal(size=len(signal)), signal ** 2], axis=1)
    model = xgb.XGBRegressor(n_estimators=20, max_depth=4, tree_method="hist",
                             multi_strategy="multi_output_tree").fit(X, Y)
    converted = _c_walk(model, precision)
    assert converted.ir.ensemble.leaf_width == 3
    Xt = _inputs(converted.ir, rng, categorical=False)
    _check_exact(converted, Xt, _expected(model, Xt), "multi_output_tree")


@needs_c_walk
def test_c_walk_threads_and_batches_keep_xgboost_exact(rng):
    model = _fit("multi:softprob", rng, n_estimators=40, max_depth=6)
    converted = _c_walk(model, n_threads=2)
    X = np.vstack([_inputs(converted.ir, rng)] * 40)  # enough steps to split rows
    _check_exact(converted, X, _expected(model, X), "threads")


@needs_c_walk
def test_c_walk_dataframe_categories_equal_xgboost(rng):
    pd = pytest.importorskip("pandas")
    categories = ["b", "a", "zz", "c", "q", ""]
    model, frame = _category_model(pd, rng, categories)
    converted = _c_walk(model)
    test = _category_frame(pd, converted, rng, frame.columns, categories[::-1][:4], n_missing=2)
    _check_exact(converted, test, _expected(model, test), "categories")
