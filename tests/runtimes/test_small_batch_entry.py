"""The compiled walk's small-batch entry (c_walk.SmallBatchEntry: check, walk, mean,
base score and link in one native call) gives the source library's answers and the
full path's error messages, on fresh rows with missing values where the model takes
them; batches it does not take (too many rows, other dtypes, DataFrames) go the full
path."""

import lightgbm
import numpy as np
import pytest
import xgboost
from sklearn.ensemble import (ExtraTreesClassifier, GradientBoostingClassifier,
                              GradientBoostingRegressor, RandomForestClassifier,
                              RandomForestRegressor)

import woodstar
from woodstar import container
from woodstar.runtimes import c_walk

pytestmark = pytest.mark.skipif(not c_walk.available(), reason="no C compiler")

N_FEATURES = 7
ROWS = (1, 2, 63, 64, 65, 255, 256)  # 255: the entry's ceiling


def _data(rng, n, nan):
    X = rng.normal(size=(n, N_FEATURES))
    if nan:
        X[rng.random(X.shape) < 0.1] = np.nan
    return X


def _fit(name, rng):
    X = _data(rng, 600, nan=False)
    y2 = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    y3 = np.digitize(X[:, 0] + 0.5 * X[:, 3], [-0.5, 0.5])
    yr = X[:, 0] * 2 + np.sin(X[:, 1])
    counts = rng.poisson(np.exp(0.3 * X[:, 0]))
    Xn = X.copy()
    Xn[rng.random(X.shape) < 0.1] = np.nan  # models that take NaN learn its routing
    Xz = X.copy()
    Xz[rng.random(X.shape) < 0.2] = 0.0  # LightGBM's zero_as_missing: a missing range
    models = {
        "rf_classifier": lambda: (RandomForestClassifier(15, max_depth=6, random_state=0)
                                  .fit(Xn, y2), True),
        "rf_regressor": lambda: (RandomForestRegressor(10, max_depth=6, random_state=0)
                                 .fit(Xn, yr), True),
        "extra_trees_3_classes": lambda: (ExtraTreesClassifier(10, max_depth=5, random_state=0)
                                          .fit(X, y3), False),
        "gb_binary": lambda: (GradientBoostingClassifier(n_estimators=15, random_state=0)
                              .fit(X, y2), False),
        "gb_3_classes": lambda: (GradientBoostingClassifier(n_estimators=8, random_state=0)
                                 .fit(X, y3), False),
        "gb_regressor": lambda: (GradientBoostingRegressor(n_estimators=15, random_state=0)
                                 .fit(X, yr), False),
        "xgb_binary": lambda: (xgboost.XGBClassifier(n_estimators=20, max_depth=4, n_jobs=1)
                               .fit(Xn, y2), True),
        "xgb_3_classes": lambda: (xgboost.XGBClassifier(n_estimators=10, max_depth=4, n_jobs=1)
                                  .fit(Xn, y3), True),
        "xgb_regressor": lambda: (xgboost.XGBRegressor(n_estimators=20, max_depth=4, n_jobs=1)
                                  .fit(Xn, yr), True),
        "xgb_poisson": lambda: (xgboost.XGBRegressor(n_estimators=20, max_depth=3, n_jobs=1,
                                                     objective="count:poisson")
                                .fit(Xn, counts), True),
        "lgbm_binary": lambda: (lightgbm.LGBMClassifier(n_estimators=20, verbose=-1)
                                .fit(Xn, y2), True),
        "lgbm_3_classes": lambda: (lightgbm.LGBMClassifier(n_estimators=10, verbose=-1)
                                   .fit(Xn, y3), True),
        "lgbm_regressor_zero_as_missing": lambda: (
            lightgbm.LGBMRegressor(n_estimators=20, verbose=-1, zero_as_missing=True)
            .fit(Xz, yr), True),
    }
    return models[name]()


MODELS = ("rf_classifier", "rf_regressor", "extra_trees_3_classes", "gb_binary",
          "gb_3_classes", "gb_regressor", "xgb_binary", "xgb_3_classes", "xgb_regressor",
          "xgb_poisson", "lgbm_binary", "lgbm_3_classes", "lgbm_regressor_zero_as_missing")


# Models whose answers here may differ from the source's (none: LightGBM's softmax runs
# with the C library's exp, as LightGBM's does).
SOURCE_DIFFERS = ()


def _without_entry(model):
    converted = woodstar.convert(model)
    converted._small_batch = {"float32": False, "float64": False}  # the full path only
    return converted


def _source_answer(model, X):
    return model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)


def _answer(converted, X):
    return converted.predict_proba(X) if hasattr(converted, "predict_proba") \
        else converted.predict(X)


@pytest.mark.parametrize("name", MODELS)
def test_answers_match_the_source_and_the_full_path(name, rng):
    model, takes_nan = _fit(name, rng)
    converted, full = woodstar.convert(model), _without_entry(model)
    assert converted.route == "c-walk"
    for dtype in (np.float32, np.float64):
        for n in ROWS:
            X = _data(rng, n, nan=takes_nan).astype(dtype)
            if name.endswith("zero_as_missing"):
                X[rng.random(X.shape) < 0.2] = 0.0
            precision = converted._precision(X)
            entry = converted._small_batch.get(precision) \
                or converted._small_batch_entry(precision)
            assert entry, name
            taken = entry(X)
            assert entry.max_rows == container.SMALL_BATCH_ROWS == 255
            assert (taken is not None) == (n <= entry.max_rows), (name, n)
            if name not in SOURCE_DIFFERS:
                np.testing.assert_array_equal(_answer(converted, X), _source_answer(model, X),
                                              err_msg=f"{name} {n} rows {dtype.__name__}")
            if taken is not None:  # raw scores and links: the full path's, to the bit
                raw, transformed = full._run(X)
                np.testing.assert_array_equal(taken[0], raw, err_msg=name)
                np.testing.assert_array_equal(taken[1], transformed, err_msg=name)
                assert taken[0].dtype == raw.dtype and taken[1].shape == transformed.shape


def _error(converted, X):
    with pytest.raises(ValueError) as error:
        _answer(converted, X)
    return str(error.value)


@pytest.mark.parametrize("name", ["gb_binary", "rf_regressor", "xgb_binary"])
def test_errors_are_the_full_paths(name, rng):
    model, takes_nan = _fit(name, rng)
    converted, full = woodstar.convert(model), _without_entry(model)
    head = converted.ir.head
    cases = {"wrong width": rng.normal(size=(2, N_FEATURES + 1)).astype(np.float32)}
    for label, value in (("NaN", np.nan), ("inf", np.inf), ("-inf", -np.inf)):
        for dtype in (np.float32, np.float64):
            X = rng.normal(size=(3, N_FEATURES)).astype(dtype)
            X[1, 4] = value
            cases[f"{label} {dtype.__name__}"] = X
    X = rng.normal(size=(1, N_FEATURES))
    X[0, 2] = 1e300  # finite in float64, infinite once rounded to the model's float32
    cases["float64 beyond float32"] = X
    refused = 0
    for label, X in cases.items():
        is_nan = np.isnan(X).any()
        allowed = (head.allows_nan if is_nan else head.allows_inf) and label != "wrong width"
        if allowed:  # the model takes it: the source's answer
            np.testing.assert_array_equal(_answer(converted, X), _source_answer(model, X))
            continue
        message = _error(full, X)
        assert _error(converted, X) == message, label
        assert "NaN" in message if is_nan else ("features" in message or "infinity" in message)
        refused += 1
    assert refused >= 1


def test_the_check_refuses_in_c_without_answering(rng):
    model, _ = _fit("gb_binary", rng)
    converted = woodstar.convert(model)
    entry = converted._small_batch_entry("float32")
    X = rng.normal(size=(4, N_FEATURES)).astype(np.float32)
    assert entry(X) is not None
    X[3, 6] = np.nan
    assert entry(X) is None  # the full path then words the error
    X[3, 6] = np.inf
    assert entry(X) is None


def test_batches_it_does_not_take_go_the_full_path(rng):
    import pandas as pd

    model, _ = _fit("lgbm_binary", rng)
    converted = woodstar.convert(model)
    entry = converted._small_batch_entry("float32")
    X = _data(rng, 5, nan=True)
    assert entry(np.asfortranarray(X)) is None
    assert entry(np.nan_to_num(X).astype(np.int64)) is None
    assert entry(X[:, :-1].copy()) is None
    assert entry(np.zeros((0, N_FEATURES), np.float32)) is None
    assert entry(X.astype(np.float16)) is None
    for inputs in (np.asfortranarray(X), X.astype(np.float16), X[:, ::-1][:, ::-1],
                   pd.DataFrame(X, columns=[f"Column_{i}" for i in range(N_FEATURES)])):
        np.testing.assert_array_equal(converted.predict_proba(inputs),
                                      model.predict_proba(np.asarray(inputs)))


def test_it_can_be_turned_off(rng, monkeypatch):
    model, _ = _fit("rf_classifier", rng)
    monkeypatch.setattr(container, "SMALL_BATCH_ROWS", 0)
    converted = woodstar.convert(model)
    X = _data(rng, 3, nan=True)
    np.testing.assert_array_equal(converted.predict_proba(X), model.predict_proba(X))
    assert converted._small_batch == {"float32": False}


def test_rows_stay_below_the_thread_split(rng):
    model, _ = _fit("rf_classifier", rng)
    converted = woodstar.convert(model, extra_config={"n_threads": 2})
    walk = converted._cpu_runner("c-walk", "float32").program
    walk.parallel_min_steps = 10 * walk.steps_per_row
    entry = c_walk.SmallBatchEntry(walk, 64, False, True, "float32")
    assert entry.max_rows == 10


def test_rows_stay_within_the_cpu_routes_rows(rng):
    model, _ = _fit("xgb_binary", rng)
    converted = woodstar.convert(model, extra_config={"small_batch_rows": 5})
    X = _data(rng, 6, nan=True).astype(np.float32)
    np.testing.assert_array_equal(converted.predict_proba(X[:5]), model.predict_proba(X[:5]))
    entry = converted._small_batch["float32"]
    assert entry.max_rows == 5 and entry(X) is None  # 6 rows: the program's call
