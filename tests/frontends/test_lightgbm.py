"""LightGBM frontend: the IR reference and every route against LightGBM itself."""

import dataclasses
import math
import os
import tempfile

import numpy as np
import pytest

lgb = pytest.importorskip("lightgbm")

import woodstar  # noqa: E402
from woodstar.exceptions import InvalidModelError, MissingConverter, NotFittedError  # noqa: E402
from woodstar.ir import reference  # noqa: E402
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


# ------------------------------------------------------ links, to the bit
# LightGBM's links compute in double with the C library's exp (its softmax with the
# maximum subtracted, summed left to right); NumPy's exp differs in the last bit for a
# few percent of arguments, so these are compared with assert_array_equal.
LINK_OBJECTIVES = ["multiclass", "multiclassova", "binary", "poisson", "gamma", "tweedie",
                   "cross_entropy", "cross_entropy_lambda"]
CPU_ROUTES = ["c-walk", "onnx-ml", "numpy-walk"]


def _link_rows(rng, n):
    X = rng.normal(size=(n, N_FEATURES)) * 2
    X[rng.random(X.shape) < 0.08] = np.nan
    X[rng.random(n) < 0.1, 3] = 0.0
    return X


def _answer(model, X, classifier):
    return model.predict_proba(X) if classifier else model.predict(X)


@pytest.mark.parametrize("route", CPU_ROUTES)
@pytest.mark.parametrize("objective", LINK_OBJECTIVES)
def test_links_are_lightgbms_to_the_bit(objective, route, rng):
    params = dict(sigmoid=0.7) if objective == "binary" else {}  # LightGBM's sigmoid scale
    model, _ = _fit(objective, rng, categorical=False, n_estimators=30, **params)
    try:
        converted = woodstar.convert(model, extra_config={"cpu_route": route})
    except MissingConverter:
        pytest.skip(f"route {route} is not available here")
    assert converted.route == route
    classifier = isinstance(model, lgb.LGBMClassifier)
    for n in (1, 2, 10_000):
        for dtype in (np.float64, np.float32):
            X = _link_rows(rng, n).astype(dtype)
            expected = _answer(model, X.astype(np.float64), classifier)
            np.testing.assert_array_equal(_answer(converted, X, classifier), expected,
                                          err_msg=f"{objective} {route} {n} rows {dtype}")
            np.testing.assert_array_equal(converted.decision_function(X),
                                          model.predict(X.astype(np.float64), raw_score=True))
    X = _link_rows(rng, 2000)
    expected = _answer(model, X, classifier)
    transformed = reference.predict(converted.ir.ensemble, X)[1]
    np.testing.assert_array_equal(transformed.reshape(expected.shape), expected,
                                  err_msg=f"{objective} reference")


def test_default_route_and_small_batches_take_lightgbms_softmax(rng):
    """The default CPU route (the compiled walk, whose one-call entry answers small
    batches) on many fresh rows, where NumPy's exp would differ on several."""
    model, _ = _fit("multiclass", rng, categorical=True, n_estimators=40)
    converted = woodstar.convert(model)
    assert converted.ir.ensemble.post_transform == "softmax_libm"
    X = _inputs(converted.ir, rng, "float64")
    X = np.concatenate([X, _link_rows(rng, 4000)])
    for start in range(0, 600, 3):  # batches of 3 rows: the small-batch entry
        np.testing.assert_array_equal(converted.predict_proba(X[start:start + 3]),
                                      model.predict_proba(X[start:start + 3]))
    np.testing.assert_array_equal(converted.predict_proba(X), model.predict_proba(X))
    # Where NumPy's exp is not the C library's (its AVX-512 form), these rows must tell
    # the two apart, or the test would prove nothing; elsewhere NumPy calls the C
    # library's exp itself, and the parity above is the whole test.
    probe = np.linspace(-700.0, 700.0, 20_001)
    if not np.array_equal(np.exp(probe), [math.exp(v) for v in probe]):
        raw = model.predict(X, raw_score=True)
        e = np.exp(raw - raw.max(axis=1, keepdims=True))
        assert (e / e.sum(axis=1, keepdims=True) != model.predict_proba(X)).any(), \
            "NumPy's softmax agrees with LightGBM on every row: the test proves nothing here"


# ------------------------------------------------------ the two readers
def _same_ir(a, b, what):
    for field in dataclasses.fields(a.ensemble):
        x, y = getattr(a.ensemble, field.name), getattr(b.ensemble, field.name)
        if isinstance(x, np.ndarray):
            assert x.dtype == y.dtype, f"{what}: {field.name} dtype"
            np.testing.assert_array_equal(x, y, err_msg=f"{what}: {field.name}")
        else:
            assert x == y, f"{what}: {field.name}"
    assert repr(a.schema) == repr(b.schema) and a.head.feature_names == b.head.feature_names, what


@pytest.mark.parametrize("case", [
    ("multiclass", dict()),
    ("binary", dict(zero_as_missing=True)),
    ("regression", dict(use_missing=False)),
    ("regression", dict(boosting_type="dart", drop_rate=0.5, skip_drop=0.0)),
    ("multiclass", dict(boosting_type="rf", bagging_fraction=0.7, bagging_freq=1)),
    ("regression", dict(linear_tree=True)),
    ("regression", dict(min_split_gain=1e9)),  # trees of one leaf
    ("lambdarank", dict()),
], ids=["multiclass", "zero_as_missing", "no-missing", "dart", "rf", "linear", "one-leaf",
        "ranker"])
def test_text_and_dump_readers_give_the_same_ir(case, rng):
    """The text format (what convert reads) and dump_model()'s JSON give identical IR
    arrays: thresholds, leaves, categorical bitsets, missing handling, linear leaves."""
    from woodstar.frontends.lightgbm import ir_from_dump, ir_from_text

    objective, params = case
    linear = params.get("linear_tree", False)
    model, _ = _fit(objective, rng, categorical=not linear, n_estimators=12, **params)
    booster = model.booster_
    kind = "classifier" if objective in ("binary", "multiclass") else "regressor"
    classes = model.classes_ if kind == "classifier" else None
    dumped = ir_from_dump(booster.dump_model(), "LGBMModel", kind, classes=classes)
    text = ir_from_text(booster.model_to_string(), "LGBMModel", kind, classes=classes)
    _same_ir(text, dumped, str(case))
    assert from_lightgbm(model).ensemble.n_trees == text.ensemble.n_trees
    if linear:
        assert (text.ensemble.linear_feature >= 0).any()
    if "min_split_gain" in params:
        assert len(text.ensemble.feature) == text.ensemble.n_trees


def test_text_with_an_undefined_missing_type_or_short_arrays_is_refused(rng):
    from woodstar.frontends.lightgbm import ir_from_text

    model, _ = _fit("regression", rng, categorical=False)
    lines = model.booster_.model_to_string().splitlines()
    first = next(i for i, line in enumerate(lines) if line.startswith("decision_type="))
    lines[first] = "decision_type=" + " ".join("14" for _ in lines[first][14:].split())
    with pytest.raises(MissingConverter, match=r"missing_type is not supported \(got 'a code "
                                                r"LightGBM does not define'\)"):
        ir_from_text("\n".join(lines), "LGBMRegressor", "regressor")
    lines = model.booster_.model_to_string().splitlines()
    second = [i for i, line in enumerate(lines) if line.startswith("threshold=")][1]
    lines[second] = lines[second].rsplit(" ", 1)[0]  # one threshold short
    with pytest.raises(InvalidModelError, match=r"LightGBM model text: tree 1 has arrays of "
                                                r"lengths \[\d+, \d+\] for \d+ leaves"):
        ir_from_text("\n".join(lines), "LGBMRegressor", "regressor")


def test_readers_agree_on_pandas_categories_and_unused_features(rng):
    """dump_model() leaves unused features out of feature_infos; both readers still
    find the pandas category column (here after an unused one) and its categories."""
    pd = pytest.importorskip("pandas")
    from woodstar.frontends.lightgbm import ir_from_dump, ir_from_text

    X, signal = _train_data(rng, categorical=True)
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(N_FEATURES)])
    frame["f1"] = 1.0  # constant: LightGBM marks it unused ("none")
    frame = frame[["f1", "f0", "f2", "f3", "f4"]]
    codes = np.nan_to_num(X[:, CAT], nan=0).astype(int)
    frame["f0"] = pd.Categorical(np.array(list("abcdefgh"), dtype=object)[codes])
    model = lgb.LGBMClassifier(n_estimators=4, num_leaves=7, min_child_samples=5, verbose=-1,
                               min_data_per_group=5, cat_smooth=1.0, max_cat_to_onehot=2)
    model.fit(frame, signal > 0)
    booster = model.booster_
    dump = booster.dump_model()
    assert "f1" not in dump["feature_infos"]
    dumped = ir_from_dump(dump, "LGBMClassifier", "classifier", classes=model.classes_)
    text = ir_from_text(booster.model_to_string(), "LGBMClassifier", "classifier",
                        classes=model.classes_, pandas_categorical=booster.pandas_categorical)
    _same_ir(text, dumped, "pandas")
    assert text.schema.columns[1].category_values == tuple("abcdefgh")
    converted = woodstar.convert(model)
    test = frame.iloc[:200]
    np.testing.assert_array_equal(converted.predict_proba(test), model.predict_proba(test))


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
