"""LightGBM frontend: the IR reference and every route against LightGBM itself."""

import os
import tempfile

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter, NotFittedError  # noqa: E402
from woodstar.frontends.lightgbm import OBJECTIVES, from_lightgbm  # noqa: E402
from woodstar.lowering import strategy_names  # noqa: E402

from ._gbdt import CAT, N_FEATURES, check, check_reference, config, train_data  # noqa: E402
from .._parity import make_test_inputs  # noqa: E402


def _train_data(rng, n=300, categorical=False, nan=True):
    return train_data(rng, n, categorical=categorical, nan=nan, zeros=True)


def _labels(objective, signal, rng):
    n = len(signal)
    noisy = signal + 0.3 * rng.normal(size=n)
    if objective == "binary":
        return np.where(noisy > 0, 7, 3)  # classes 3 and 7: labels are mapped back
    if objective in ("multiclass", "multiclassova"):
        return np.digitize(noisy, [-0.5, 0.5])
    if objective in ("poisson", "tweedie"):
        return rng.poisson(np.exp(0.5 * np.clip(noisy, -3, 3))).astype(float)
    if objective in ("gamma", "mape"):
        return np.exp(0.5 * np.clip(noisy, -3, 3)) + 0.1
    if objective in ("cross_entropy", "cross_entropy_lambda"):
        return 1.0 / (1.0 + np.exp(-noisy))
    if objective in ("lambdarank", "rank_xendcg"):
        return np.digitize(noisy, [-1.0, 0.0, 1.0])
    return noisy


def _fit(objective, rng, categorical=True, nan=True, n_estimators=4, **params):
    X, signal = _train_data(rng, categorical=categorical, nan=nan)
    y = _labels(objective, signal, rng)
    common = dict(n_estimators=n_estimators, num_leaves=7, min_child_samples=5,
                  verbose=-1, objective=objective, min_data_per_group=5, cat_smooth=1.0, n_jobs=1,
                  cat_l2=1.0, max_cat_to_onehot=2, **params)
    fit_params = dict(categorical_feature=[CAT] if categorical else "auto")
    if objective in ("binary", "multiclass", "multiclassova"):
        model = lgb.LGBMClassifier(**common)
    elif objective in ("lambdarank", "rank_xendcg"):
        model = lgb.LGBMRanker(**common)
        fit_params["group"] = [50] * (len(y) // 50)
    else:
        model = lgb.LGBMRegressor(**common)
    return model.fit(X, y, **fit_params), X


def _inputs(model_ir, rng, precision, categorical=True):
    X = make_test_inputs(model_ir.ensemble, rng, n_random=150, n_edge=100)
    X[rng.random(len(X)) < 0.1, 3] = rng.choice([0.0, -0.0, 1e-36, -1e-36, 1e-35, 2e-35])
    if categorical:
        X[:, CAT] = rng.choice([-3.0, -1.0, -0.5, 0.0, 0.7, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0,
                                8.0, 9.0, 40.0, 1e10, np.nan, np.inf, -np.inf, 4.5], len(X))
    if precision == "float32":
        # The float32 route rounds the input: feed values LightGBM sees the same way.
        X = X.astype(np.float32).astype(np.float64)
    return X


def _raw(model, X):
    """LightGBM's raw score; for boosting "rf" it is the sum over iterations while predict
    transforms the mean: woodstar's decision_function is that mean (documented)."""
    raw = model.predict(X, raw_score=True)
    if model.booster_.dump_model()["average_output"]:
        raw = raw / model.booster_.current_iteration()
    return raw


def _expected(model, X):
    if isinstance(model, lgb.LGBMClassifier):
        return {"predict": model.predict(X), "predict_proba": model.predict_proba(X),
                "decision_function": _raw(model, X)}
    return {"predict": model.predict(X), "decision_function": _raw(model, X)}


def _reference_expected(model, X):
    raw = _raw(model, X)
    transformed = model.predict_proba(X) if isinstance(model, lgb.LGBMClassifier) else model.predict(X)
    return raw, transformed


ALL_OBJECTIVES = sorted(OBJECTIVES)
STRATEGIES = strategy_names()


# ------------------------------------------------------------------ frontend level
@pytest.mark.parametrize("objective", ALL_OBJECTIVES)
def test_reference_matches_lightgbm(objective, rng):
    model, _ = _fit(objective, rng)
    model_ir = from_lightgbm(model)
    X = _inputs(model_ir, rng, "float64")
    check_reference(model_ir, X, *_reference_expected(model, X), what=objective)


@pytest.mark.parametrize("params", [
    dict(boosting_type="dart", drop_rate=0.5, skip_drop=0.0),
    dict(boosting_type="rf", bagging_fraction=0.7, bagging_freq=1),
    dict(data_sample_strategy="goss"),
    dict(use_missing=False),
    dict(zero_as_missing=True),
], ids=["dart", "rf", "goss", "use_missing_false", "zero_as_missing"])
@pytest.mark.parametrize("objective", ["binary", "multiclass", "regression"])
def test_reference_boosting_and_missing(objective, params, rng):
    model, _ = _fit(objective, rng, n_estimators=5, **params)
    model_ir = from_lightgbm(model)
    X = _inputs(model_ir, rng, "float64")
    check_reference(model_ir, X, *_reference_expected(model, X), what=f"{objective} {params}")


def test_zero_as_missing_uses_the_missing_range(rng):
    model, _ = _fit("regression", rng, zero_as_missing=True)
    ens = from_lightgbm(model).ensemble
    assert ens.has_missing_range  # otherwise the test below proves nothing new
    X = np.zeros((6, N_FEATURES))
    X[:, 3] = [0.0, 1e-36, -1e-35, np.float32(1e-35), 2e-35, np.nan]
    X[:, CAT] = 1
    check_reference(from_lightgbm(model), X, *_reference_expected(model, X))


def test_no_nan_in_training_means_nan_reads_zero(rng):
    model, _ = _fit("regression", rng, nan=False)
    dump = model.booster_.dump_model()
    assert "None" in str(dump["tree_info"])  # missing_type None: NaN is read as 0.0
    model_ir = from_lightgbm(model)
    X = _inputs(model_ir, rng, "float64")
    check_reference(model_ir, X, *_reference_expected(model, X))


# --------------------------------------------------------------------- parity
@pytest.mark.parametrize("objective", ALL_OBJECTIVES)
def test_every_objective_converts(objective, backend, precision, rng):
    """All objectives on one strategy each (rotating), both precisions."""
    strategy = STRATEGIES[ALL_OBJECTIVES.index(objective) % len(STRATEGIES)]
    model, _ = _fit(objective, rng)
    converted = woodstar.convert(model, backend, extra_config=config(strategy, precision))
    X = _inputs(converted.ir, rng, precision)
    check(converted, X, _expected(model, X), precision, what=objective)


@pytest.mark.parametrize("case", [
    ("binary", dict()),
    ("multiclass", dict(boosting_type="rf", bagging_fraction=0.7, bagging_freq=1)),
    ("regression", dict(zero_as_missing=True)),
    ("regression", dict(boosting_type="dart", drop_rate=0.5, skip_drop=0.0, use_missing=False)),
], ids=["binary", "multiclass-rf", "zero_as_missing", "dart-no-missing"])
def test_every_strategy(case, strategy, backend, precision, rng):
    objective, params = case
    model, _ = _fit(objective, rng, **params)
    converted = woodstar.convert(model, backend, extra_config=config(strategy, precision))
    assert converted.ir.ensemble.has_categorical  # the categorical path is exercised
    X = _inputs(converted.ir, rng, precision)
    check(converted, X, _expected(model, X), precision, what=f"{objective} {params}")


def test_float64_input_runs_the_float64_program(backend, rng):
    model, _ = _fit("regression", rng)
    converted = woodstar.convert(model, backend)
    X = _inputs(converted.ir, rng, "float64")  # thresholds exactly, not float32-rounded
    check(converted, X, _expected(model, X), "float64")


def test_best_iteration_after_early_stopping(backend, rng):
    X, signal = _train_data(rng, categorical=False)
    y = signal + rng.normal(size=len(signal))
    model = lgb.LGBMRegressor(n_estimators=200, learning_rate=0.5, num_leaves=7, verbose=-1)
    model.fit(X[:200], y[:200], eval_set=[(X[200:], y[200:])],
              callbacks=[lgb.early_stopping(3, verbose=False)])
    assert 0 < model.best_iteration_ < 200
    converted = woodstar.convert(model, backend)
    assert converted.ir.ensemble.n_trees == model.best_iteration_
    Xt = _inputs(converted.ir, rng, "float64", categorical=False)
    check(converted, Xt, _expected(model, Xt), "float64")


@pytest.mark.parametrize("objective", ["binary", "multiclass", "regression"])
def test_raw_booster_and_model_file(objective, backend, rng):
    model, _ = _fit(objective, rng)
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.txt")
        model.booster_.save_model(path, num_iteration=3)  # a user-fixed iteration count
        booster = lgb.Booster(model_file=path)
    converted = woodstar.convert(booster, backend)
    assert converted.ir.ensemble.n_trees == 3 * converted.ir.ensemble.n_outputs
    X = _inputs(converted.ir, rng, "float64")
    check(converted, X, {"predict": booster.predict(X),
                         "decision_function": booster.predict(X, raw_score=True)}, "float64")


def test_pandas_categorical_columns(backend, rng):
    pd = pytest.importorskip("pandas")
    X, signal = _train_data(rng, categorical=True)
    values = np.array([10, 20, 30, 40, 50, 60, 70, 80])  # category values are not codes
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(N_FEATURES)])
    codes = np.nan_to_num(X[:, CAT], nan=0).astype(int)
    frame["f0"] = pd.Categorical(np.where(np.isnan(X[:, CAT]), np.nan, values[codes]),
                                 categories=values)
    model = lgb.LGBMClassifier(n_estimators=4, num_leaves=7, min_child_samples=5, verbose=-1,
                               min_data_per_group=5, cat_smooth=1.0, max_cat_to_onehot=2)
    model.fit(frame, signal > 0)
    converted = woodstar.convert(model, backend)
    test = pd.DataFrame(_inputs(converted.ir, rng, "float64", categorical=False),
                        columns=frame.columns)
    unseen = np.array([10, 20, 30, 40, 50, 60, 70, 80, 90, 5])  # 90 and 5 never seen
    picked = rng.choice(len(unseen) + 1, len(test))
    test["f0"] = pd.Categorical(np.where(picked == len(unseen), np.nan,
                                         unseen[np.minimum(picked, len(unseen) - 1)]),
                                categories=unseen)
    check(converted, test, _expected(model, test), "float64", what="pandas categorical")


def _category_model(pd, rng, categories, n=400):
    """A classifier fitted on a DataFrame whose column "f0" is a pandas category column
    with ``categories`` (NaN included), and that DataFrame."""
    X, signal = _train_data(rng, n, categorical=True)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(N_FEATURES)])
    codes = np.nan_to_num(X[:, CAT], nan=0).astype(int) % len(categories)
    picked = np.asarray(categories, dtype=object)[codes]
    frame["f0"] = pd.Categorical(np.where(np.isnan(X[:, CAT]), None, picked), categories=categories)
    model = lgb.LGBMClassifier(n_estimators=6, num_leaves=7, min_child_samples=5, verbose=-1,
                               min_data_per_group=5, cat_smooth=1.0, max_cat_to_onehot=2,
                               n_jobs=1)
    return model.fit(frame, np.isin(codes, [1, 2]) + 0.3 * signal > 0.5), frame


def _category_frame(pd, converted, rng, columns, categories, n_missing=1):
    """Fresh rows with "f0" drawn from ``categories`` (in that order as the pandas
    categories) and missing values."""
    test = pd.DataFrame(_inputs(converted.ir, rng, "float64", categorical=False), columns=columns)
    picked = rng.choice(len(categories) + n_missing, len(test))
    values = np.asarray(categories, dtype=object)[np.minimum(picked, len(categories) - 1)]
    test["f0"] = pd.Categorical(np.where(picked >= len(categories), None, values),
                                categories=categories)
    return test


@pytest.mark.filterwarnings("ignore::UserWarning")
@pytest.mark.parametrize("backend", ["torch", "torch.jit"])
def test_array_input_is_read_as_codes(backend, rng):
    """A model fitted on categories that are not 0..k-1: LightGBM reads a NumPy array as
    category codes, not values, and so does the converted model."""
    pd = pytest.importorskip("pandas")
    model, frame = _category_model(pd, rng, [1, 2, 3, 7, 12, 40])
    converted = woodstar.convert(model, backend)
    X = _inputs(converted.ir, rng, "float64")  # codes 0..9, negative, fractions, NaN, inf
    assert np.isin(X[:, CAT], [7.0, 3.0]).any()  # codes whose values are categories too
    check(converted, X, _expected(model, X), "float64", what="codes")


@pytest.mark.parametrize("backend", ["torch", "torch.jit"])
@pytest.mark.parametrize("categories", [[1, 2, 3, 7, 12, 40], ["b", "a", "zz", "c", "q", ""]],
                         ids=["integers", "strings"])
def test_dataframe_categories_are_recoded_by_value(categories, backend, rng):
    """A DataFrame is re-coded to the training categories by value: categories in
    another order, values never seen in training and missing values."""
    pd = pytest.importorskip("pandas")
    model, frame = _category_model(pd, rng, categories)
    converted = woodstar.convert(model, backend)
    column = converted.ir.schema.columns[CAT]
    assert column.kind == "category" and column.category_values == tuple(categories)
    same = _category_frame(pd, converted, rng, frame.columns, categories)
    check(converted, same, _expected(model, same), "float64", what="training categories")
    unseen = ["new", "zzz"] if isinstance(categories[0], str) else [5, 100]
    other = list(categories[::-1])[:4] + unseen  # reordered, some missing, some unseen
    test = _category_frame(pd, converted, rng, frame.columns, other, n_missing=2)
    check(converted, test, _expected(model, test), "float64", what="other categories")
    reordered = test[frame.columns[::-1]]  # woodstar matches columns by name
    check(converted, reordered, _expected(model, test), "float64", what="reordered columns")


def test_string_categories_booster_from_model_file(backend, rng):
    pd = pytest.importorskip("pandas")
    model, frame = _category_model(pd, rng, ["x", "y", "z", "w"])
    with tempfile.TemporaryDirectory() as folder:
        path = os.path.join(folder, "model.txt")
        model.booster_.save_model(path)
        booster = lgb.Booster(model_file=path)
    converted = woodstar.convert(booster, backend)
    test = _category_frame(pd, converted, rng, frame.columns, ["w", "y", "v"])
    check(converted, test, {"predict": booster.predict(test),
                            "decision_function": booster.predict(test, raw_score=True)},
          "float64", what="Booster")


# --------------------------------------------------------------------- errors
def test_unsupported_objective_is_named(rng):
    model, _ = _fit("regression", rng)
    booster = model.booster_
    dump = booster.dump_model()
    from woodstar.frontends.lightgbm import ir_from_dump

    dump["objective"] = "custom"
    with pytest.raises(MissingConverter, match=r"Cannot convert LGBMRegressor: objective is not "
                                                r"supported \(got 'custom'\); supported: binary"):
        ir_from_dump(dump, "LGBMRegressor", "regressor")


@pytest.mark.parametrize("edit, message", [
    (lambda d: d.update(tree_info=[]), r"a model with is not supported \(got 'no trees'\)"),
    (lambda d: d["tree_info"][0]["tree_structure"].update(decision_type=">"),
     r"decision_type is not supported \(got '>'\); supported: '<=', '=='"),
    (lambda d: d["tree_info"][0]["tree_structure"].update(missing_type="Inf"),
     r"missing_type is not supported \(got 'Inf'\); supported: 'None', 'Zero', 'NaN'"),
    (lambda d: d.update(pandas_categorical=[[1, 2], [3, 4]]),
     r"a mix of pandas category columns and other categorical features is not supported "
     r"\(got '2 pandas category column\(s\) for 1 categorical feature\(s\)'\)"),
    (lambda d: d.update(pandas_categorical=[["a", None]]),
     r"pandas categorical feature 0 with categories is not supported \(got \['a', None\]\); "
     r"supported: categories that are strings or numbers"),
], ids=["no-trees", "decision_type", "missing_type", "category-mix", "odd-categories"])
def test_dump_errors_are_named(edit, message, rng):
    from woodstar.frontends.lightgbm import ir_from_dump

    model, _ = _fit("regression", rng, categorical=True)
    dump = model.booster_.dump_model()
    assert "split_index" in dump["tree_info"][0]["tree_structure"]
    edit(dump)
    with pytest.raises(MissingConverter, match=message):
        ir_from_dump(dump, "LGBMRegressor", "regressor")


def test_reg_sqrt_is_refused(rng):
    model, _ = _fit("regression", rng, reg_sqrt=True)
    with pytest.raises(MissingConverter, match=r"objective option is not supported "
                                                r"\(got 'regression sqrt \(reg_sqrt=True\)'\)"):
        from_lightgbm(model)


@pytest.mark.parametrize("objective", ["regression", "binary"])
def test_linear_tree(objective, strategy, backend, rng):
    model, _ = _fit(objective, rng, categorical=False, linear_tree=True)
    model_ir = from_lightgbm(model)
    assert (model_ir.ensemble.linear_feature >= 0).any()  # leaves with real slopes
    X = _inputs(model_ir, rng, "float64", categorical=False)
    X[rng.random(X.shape) < 0.03] = np.inf
    check_reference(model_ir, X, *_reference_expected(model, X), what="linear_tree")
    converted = woodstar.convert(model, backend, extra_config={"tree_implementation": strategy})
    check(converted, X, _expected(model, X), "float64", what="linear_tree")


def test_unfitted_model_is_refused():
    with pytest.raises(NotFittedError, match="Cannot convert LGBMRegressor: the model is not fitted"):
        woodstar.convert(lgb.LGBMRegressor())
