"""scikit-learn linear models, scalers and pipelines of them.

The IR's NumPy reference equals scikit-learn bit for bit (no torch); every converted
model equals scikit-learn on every backend, for float32, float64, integer and
DataFrame input, with values far from the training data, NaN and infinities (refused
where scikit-learn refuses them)."""

import functools
import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn import linear_model as lm  # noqa: E402
from sklearn import svm  # noqa: E402
from sklearn.kernel_approximation import Nystroem  # noqa: E402
from sklearn.ensemble import RandomForestClassifier  # noqa: E402
from sklearn.impute import SimpleImputer  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, RobustScaler, StandardScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter, NotFittedError  # noqa: E402
from woodstar.frontends import find_frontend  # noqa: E402
from woodstar.frontends.sklearn_pipeline import column_wise_ops  # noqa: E402

from .._parity import assert_parity  # noqa: E402

N_FEATURES = 5
# Columns of very different scales and offsets, so the scalers' roundings matter.
_SCALE = np.array([1.0, 30.0, 0.01, 1e4, 3.0])
_OFFSET = np.array([0.0, -200.0, 5.0, 1e5, 0.5])

# name -> (factory, target, fit on float32)
LINEAR = {
    "logreg_binary": (lambda: lm.LogisticRegression(), "binary", False),
    "logreg_multi": (lambda: lm.LogisticRegression(C=10.0), "multi", False),
    "logreg_saga_f32": (lambda: lm.LogisticRegression(solver="saga", max_iter=300), "multi", True),
    "logreg_no_intercept": (lambda: lm.LogisticRegression(fit_intercept=False), "binary", False),
    "linear_svc_multi": (lambda: svm.LinearSVC(), "multi", False),
    "linear_svc_strings": (lambda: svm.LinearSVC(), "strings", False),
    "ridge_classifier": (lambda: lm.RidgeClassifier(), "multi", False),
    "sgd_log_multi": (lambda: lm.SGDClassifier(loss="log_loss", random_state=0), "multi", False),
    "sgd_log_binary": (lambda: lm.SGDClassifier(loss="log_loss", random_state=0), "binary", False),
    "sgd_hinge": (lambda: lm.SGDClassifier(random_state=0), "multi", False),
    "perceptron": (lambda: lm.Perceptron(random_state=0), "multi", False),
    "linreg": (lambda: lm.LinearRegression(), "regression", False),
    "linreg_f32": (lambda: lm.LinearRegression(), "regression", True),
    "linreg_column_target": (lambda: lm.LinearRegression(), "column", False),
    "ridge_two_targets": (lambda: lm.Ridge(), "two_targets", False),
    "lasso": (lambda: lm.Lasso(alpha=0.01), "regression", False),
    "elasticnet_no_intercept": (lambda: lm.ElasticNet(alpha=0.01, fit_intercept=False),
                                "regression", False),
    "sgd_regressor": (lambda: lm.SGDRegressor(random_state=0), "regression", False),
    "linear_svr": (lambda: svm.LinearSVR(random_state=0), "regression", False),
    "huber": (lambda: lm.HuberRegressor(), "regression", False),
    "bayesian_ridge": (lambda: lm.BayesianRidge(), "regression", False),
    "ard": (lambda: lm.ARDRegression(), "regression", False),
    "lars": (lambda: lm.Lars(), "regression", False),
    "logreg_cv": (lambda: lm.LogisticRegressionCV(Cs=3, cv=3), "multi", False),
    "ridge_classifier_cv": (lambda: lm.RidgeClassifierCV(), "binary", False),
    "passive_aggressive": (lambda: lm.PassiveAggressiveClassifier(random_state=0), "multi", False),
    "ridge_cv": (lambda: lm.RidgeCV(), "regression", False),
    "lasso_cv": (lambda: lm.LassoCV(cv=3), "regression", False),
    "elasticnet_cv": (lambda: lm.ElasticNetCV(cv=3), "regression", False),
    "lasso_lars": (lambda: lm.LassoLars(alpha=0.01), "regression", False),
    "omp": (lambda: lm.OrthogonalMatchingPursuit(), "regression", False),
    "theil_sen": (lambda: lm.TheilSenRegressor(max_subpopulation=200, random_state=0),
                  "regression", False),
    "quantile": (lambda: lm.QuantileRegressor(alpha=0.0), "regression", False),
}
SCALERS = {
    "none": lambda: None,
    "standard": lambda: StandardScaler(),
    "standard_no_mean": lambda: StandardScaler(with_mean=False),
    "minmax_clip": lambda: MinMaxScaler(feature_range=(-0.3, 0.7), clip=True),
    "maxabs": lambda: MaxAbsScaler(),
    "robust": lambda: RobustScaler(),
    "standard_then_minmax": lambda: (StandardScaler(), MinMaxScaler()),
}


def test_every_registered_linear_model_is_in_the_matrix():
    """Registering a linear model puts it under the parity matrix above."""
    from woodstar.frontends.sklearn_linear import LINEAR_CLASSIFIERS, LINEAR_REGRESSORS

    covered = {type(factory()).__name__ for factory, _, _ in LINEAR.values()}
    assert set(LINEAR_CLASSIFIERS + LINEAR_REGRESSORS) <= covered, \
        set(LINEAR_CLASSIFIERS + LINEAR_REGRESSORS) - covered


def _targets(X, kind, rng):
    signal = X[:, 0] / _SCALE[0] + 0.5 * (X[:, 1] - _OFFSET[1]) / _SCALE[1] + rng.normal(size=len(X))
    if kind == "binary":
        return (signal > 0).astype(int)
    if kind in ("multi", "strings"):
        y = np.digitize(signal, [-0.7, 0.7])
        return np.array(["b", "a", "c"], dtype=object)[y] if kind == "strings" else y
    if kind == "column":
        return signal.reshape(-1, 1)
    if kind == "two_targets":
        return np.c_[signal, 2 * signal - 1]
    return signal


@functools.lru_cache(maxsize=None)  # one fit per case and worker: conversions do not change it
def _fit(linear_name, scaler_name, seed=0):
    factory, target, on_float32 = LINEAR[linear_name]
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, N_FEATURES)) * _SCALE + _OFFSET
    y = _targets(X, target, rng)
    scalers = SCALERS[scaler_name]()
    scalers = () if scalers is None else scalers if isinstance(scalers, tuple) else (scalers,)
    model = make_pipeline(*scalers, factory()) if scalers else factory()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X.astype(np.float32) if on_float32 else X, y)
    return model


def _fresh_rows(rng, n=120, spread=(0.5, 1, 10, 1e3)):
    """Rows around and far beyond the training range, some on exact zeros."""
    X = rng.normal(size=(n, N_FEATURES)) * _SCALE * rng.choice(spread, size=(n, 1)) + _OFFSET
    X[rng.random(X.shape) < 0.05] = 0.0
    return X


CASES = [(lin, sc) for lin in LINEAR for sc in SCALERS
         if sc in ("none", "standard") or lin in ("logreg_multi", "linreg", "sgd_log_multi")]


def _raw_reference(model_ir, X):
    for step in model_ir.steps:
        X = step.apply(X)
    return X if model_ir.linear is None else model_ir.linear.scores(X)


@pytest.mark.parametrize("linear_name, scaler_name", CASES)
def test_reference_matches_sklearn_bit_for_bit(linear_name, scaler_name, rng):
    """Frontend check, no torch: scores (decision_function, or predict for a regressor)
    from the IR's reference are scikit-learn's own, value and dtype."""
    model = _fit(linear_name, scaler_name)
    model_ir = find_frontend(model)(model, None)
    for dtype in (np.float64, np.float32):
        X = _fresh_rows(rng).astype(dtype)
        expected = model.decision_function(X) if hasattr(model, "decision_function") else model.predict(X)
        raw = _raw_reference(model_ir, X)
        raw = raw[:, 0] if expected.ndim == 1 else raw
        assert raw.dtype == expected.dtype
        np.testing.assert_array_equal(raw, expected)


def _inputs(rng, spread=(0.5, 1, 10, 1e3)):
    X = _fresh_rows(rng, spread=spread)
    special = X.copy()[:12]
    special[0, 1], special[1, 2], special[2, 0], special[3, 3] = np.nan, np.inf, -np.inf, 1e39
    return X, special


@pytest.mark.parametrize("linear_name, scaler_name", CASES)
def test_converted_matches_sklearn(linear_name, scaler_name, backend, rng):
    model = _fit(linear_name, scaler_name)
    # A model fitted on float32 keeps float32 coefficients and computes in float32:
    # bit for bit on the NumPy route (test_outputs_follow_the_input_dtype_like_sklearn,
    # every row), to float32's precision on the Torch program and the other backends,
    # which order the float32 dot product differently. That bound is relative to the
    # terms' size, so those models are compared on rows in the training range, where
    # the terms are of the order of the scores.
    on_float32 = LINEAR[linear_name][2]
    tolerance = 1e-5 if on_float32 else 1e-12
    X, special = _inputs(rng, spread=(0.5, 1) if on_float32 else (0.5, 1, 10, 1e3))
    routes = [{}]
    if backend == "torch":
        routes.append({"small_batch_rows": 0})  # the Torch program, not the NumPy route
    for config in routes:
        converted = woodstar.convert(model, backend, extra_config=config)
        for X_in in (X, X.astype(np.float32), X[:1], X.astype(np.float32)[:3]):
            assert assert_parity(converted, model, X_in, "float64", tolerance=tolerance) >= 1
        # NaN, infinity, and a float32 overflow: refused as scikit-learn refuses them.
        with np.errstate(over="ignore"):  # 1e39 is infinity in float32
            for row in special[:4]:
                assert_parity(converted, model, row.reshape(1, -1), "float64", tolerance=tolerance)
                assert_parity(converted, model, row.reshape(1, -1).astype(np.float32), "float64",
                              tolerance=tolerance)


@pytest.mark.parametrize("scaler_name", ["standard", "minmax_clip", "maxabs", "robust",
                                         "standard_then_minmax"])
def test_bare_scalers_transform_bit_for_bit(scaler_name, rng):
    scalers = SCALERS[scaler_name]()
    model = make_pipeline(*scalers) if isinstance(scalers, tuple) else scalers
    model.fit(_fresh_rows(rng, 200))
    converted = woodstar.convert(model, "torch")
    program = woodstar.convert(model, "torch", extra_config={"small_batch_rows": 0})
    X = _fresh_rows(rng)
    X[rng.random(X.shape) < 0.05] = np.nan  # the scalers pass NaN through
    for X_in in (X, X.astype(np.float32), np.nan_to_num(X).astype(np.int64)):
        expected = model.transform(X_in)
        for container in (converted, program):
            got = container.transform(X_in)
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)
    assert not hasattr(converted, "predict")
    with pytest.raises(ValueError, match="infinity"):
        converted.transform(np.full((1, N_FEATURES), np.inf))


def test_the_program_splits_large_inputs_by_the_memory_budget(rng):
    """The Torch program's batches: a budget of a few rows' temporaries splits 500 rows
    into many batches, and the answers do not change."""
    for model in (_fit("logreg_multi", "standard_then_minmax"),
                  StandardScaler().fit(_fresh_rows(rng, 100))):
        converted = woodstar.convert(model, "torch", extra_config={
            "small_batch_rows": 0, "memory_budget_bytes": 8 * 16 * N_FEATURES * 7})
        X = _fresh_rows(rng, 500)
        assert converted._rows_per_batch("float64", len(X)) < 100  # 5+ batches
        method = "predict_proba" if hasattr(model, "predict_proba") else "transform"
        np.testing.assert_allclose(getattr(converted, method)(X), getattr(model, method)(X),
                                   rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("strategy", ["mean", "median", "most_frequent", "constant"])
@pytest.mark.parametrize("fit_dtype", [np.float64, np.float32])
def test_simple_imputer_alone_and_before_a_linear_model(strategy, fit_dtype, rng):
    """NaN takes the statistic rounded as scikit-learn rounds it (to the fit dtype, then
    the input's); the pipeline then accepts NaN although the linear model would not."""
    X = _fresh_rows(rng, 300, spread=(1,))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = _targets(np.nan_to_num(X), "multi", rng)
    imputer = SimpleImputer(strategy=strategy, fill_value=0.3).fit(X.astype(fit_dtype))
    pipeline = make_pipeline(SimpleImputer(strategy=strategy, fill_value=0.3), StandardScaler(),
                             lm.LogisticRegression()).fit(X.astype(fit_dtype), y)
    fresh = _fresh_rows(rng)
    fresh[rng.random(fresh.shape) < 0.2] = np.nan
    float32_model = pipeline[-1].coef_.dtype == np.float32
    for config in ({}, {"small_batch_rows": 0}):
        converted_imputer = woodstar.convert(imputer, "torch", extra_config=config)
        converted = woodstar.convert(pipeline, "torch", extra_config=config)
        for X_in in (fresh, fresh.astype(np.float32)):
            expected = imputer.transform(X_in)
            got = converted_imputer.transform(X_in)
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)
            if not config:  # the NumPy route: scikit-learn's expressions, bit for bit
                assert assert_parity(converted, pipeline, X_in, "float64", tolerance=0) == 3
            elif float32_model:  # the Torch program: its own float32 sum order
                _assert_within_float32_sums(converted, pipeline, X_in)
            else:
                assert assert_parity(converted, pipeline, X_in, "float64") == 3
        with pytest.raises(ValueError, match="infinity"):
            converted.predict(np.full((1, N_FEATURES), np.inf))


def _assert_within_float32_sums(converted, pipeline, X):
    """A float32 model's decision values summed in another order than BLAS's differ by
    rounding of the terms, not of the result: |got - expected| <= (n + 2) eps32 (sum of
    |x_j w_j| + |b|), which is large next to a value that cancels. Probabilities move
    at most by the largest such bound in their row; labels agree wherever the two best
    classes are further apart than twice their bounds."""
    final = pipeline[-1]
    Z = pipeline[:-1].transform(X).astype(np.float64)
    scale = np.abs(Z) @ np.abs(final.coef_.astype(np.float64)).T + np.abs(final.intercept_)
    bound = (Z.shape[1] + 2) * np.finfo(np.float32).eps * scale
    got, expected = converted.decision_function(X), pipeline.decision_function(X)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    assert np.all(np.abs(got.astype(np.float64) - expected) <= bound)
    np.testing.assert_array_less(
        np.abs(converted.predict_proba(X) - pipeline.predict_proba(X)).max(axis=1),
        bound.max(axis=1) + 1e-7)
    top2 = np.sort(expected.astype(np.float64), axis=1)[:, -2:]
    clear = top2[:, 1] - top2[:, 0] > 2 * bound.max(axis=1)
    np.testing.assert_array_equal(converted.predict(X)[clear], pipeline.predict(X)[clear])


@pytest.mark.parametrize("imputer", [SimpleImputer(add_indicator=True), SimpleImputer()])
def test_imputers_that_add_indicators_or_drop_empty_features(imputer, rng):
    X = _fresh_rows(rng, 50)
    X[:, 2] = np.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the empty column's warning
        model = make_pipeline(imputer, StandardScaler()).fit(X)
        T = _fresh_rows(rng, 30)
        np.testing.assert_array_equal(woodstar.convert(model, "torch").transform(T), model.transform(T))


@pytest.mark.parametrize("imputer, message", [
    (SimpleImputer(missing_values="x", strategy="most_frequent"),
     "missing_values is not supported \\(got 'x'\\); supported: np.nan or a finite number"),
])
def test_unsupported_imputers_are_refused_with_the_reason(imputer, message, rng):
    X = _fresh_rows(rng, 50).astype(object)
    with pytest.raises(MissingConverter, match=message):
        column_wise_ops(imputer.fit(X))


MISSING_NUMBERS = [0, -1, 0.0, np.float64(-1.0), 2.5]


def _rows_with(value, rng, n):
    X = np.round(_fresh_rows(rng, n, spread=(1,)) * 2) / 2  # halves: the value recurs
    X[rng.random(X.shape) < 0.15] = value
    return X


@pytest.mark.parametrize("missing", MISSING_NUMBERS)
@pytest.mark.parametrize("strategy", ["mean", "median", "most_frequent", "constant"])
@pytest.mark.parametrize("fit_dtype", [np.float64, np.float32])
def test_imputer_with_a_number_as_missing_values_is_sklearns_to_the_bit(missing, strategy,
                                                                        fit_dtype, rng):
    """X == missing_values is replaced by the statistic, compared as NumPy compares (a
    Python number in X's dtype); the IR, the NumPy route and the Torch module agree."""
    import torch

    from woodstar.lowering.column_ops import ColumnOpsModule

    X = _rows_with(missing, rng, 300)
    imputer = SimpleImputer(missing_values=missing, strategy=strategy, fill_value=0.3,
                            keep_empty_features=True).fit(X.astype(fit_dtype))
    op = column_wise_ops(imputer)
    assert op.ops == ("fill_value",)
    fresh = _rows_with(missing, rng, 200)
    for X_in in (fresh, fresh.astype(np.float32)):
        expected = imputer.transform(X_in)
        for got in (op.apply(X_in), ColumnOpsModule(op, str(X_in.dtype))(torch.from_numpy(X_in)).numpy()):
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("missing", [0, -1.0])
def test_imputer_with_a_number_as_missing_values_converts_alone_and_in_a_pipeline(missing, rng):
    X = _rows_with(missing, rng, 300)
    y = _targets(X, "multi", rng)
    imputer = SimpleImputer(missing_values=missing).fit(X)
    pipeline = make_pipeline(SimpleImputer(missing_values=missing), StandardScaler(),
                             lm.LogisticRegression()).fit(X, y)
    fresh = _rows_with(missing, rng, 120)
    for config in ({}, {"small_batch_rows": 0}):
        np.testing.assert_array_equal(
            woodstar.convert(imputer, "torch", extra_config=config).transform(fresh),
            imputer.transform(fresh))
        converted = woodstar.convert(pipeline, "torch", extra_config=config)
        assert assert_parity(converted, pipeline, fresh, "float64", tolerance=1e-12) == 3
    with pytest.raises(ValueError, match="NaN"):
        converted.predict(np.full((1, N_FEATURES), np.nan))  # scikit-learn refuses it too


def test_outputs_follow_the_input_dtype_like_sklearn(rng):
    """float32 in: the scaler rounds in float32, as scikit-learn's does; float64 and
    integers: float64. Bit for bit on the NumPy route."""
    model = _fit("linreg_f32", "standard")
    converted = woodstar.convert(model, "torch")
    X = _fresh_rows(rng)
    for X_in in (X, X.astype(np.float32), np.round(X).astype(np.int32)):
        expected, got = model.predict(X_in), converted.predict(X_in)
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def test_tree_op_precision_does_not_change_a_pipelines_arithmetic(rng):
    """tree_op_precision_dtype concerns tree models: a scaler still rounds float32
    input in float32, as scikit-learn's does."""
    model = _fit("logreg_multi", "standard")
    X = _fresh_rows(rng).astype(np.float32)
    for precision in ("float32", "float64"):
        converted = woodstar.convert(model, "torch", extra_config={"tree_op_precision_dtype": precision})
        np.testing.assert_array_equal(converted.decision_function(X), model.decision_function(X))
        np.testing.assert_array_equal(converted.predict(X), model.predict(X))


def test_dataframe_input_matches_sklearn(rng):
    pd = pytest.importorskip("pandas")
    columns = [f"f{i}" for i in range(N_FEATURES)]
    X = _fresh_rows(rng, 300)
    y = _targets(X, "multi", rng)
    frame = pd.DataFrame(X, columns=columns)
    model = make_pipeline(StandardScaler(), lm.LogisticRegression()).fit(frame, y)
    converted = woodstar.convert(model, "torch")
    np.testing.assert_array_equal(converted.feature_names_in_, columns)
    fresh = pd.DataFrame(_fresh_rows(rng), columns=columns)
    for frame_in in (fresh, fresh.astype(np.float32)):
        assert assert_parity(converted, model, frame_in, "float64") == 3
    # Columns are matched by name (scikit-learn refuses another order; woodstar reorders).
    np.testing.assert_array_equal(converted.predict_proba(fresh[columns[::-1]]),
                                  converted.predict_proba(fresh))
    # Mixed float32 and float64 columns: scikit-learn computes in float64.
    mixed = fresh.astype({columns[0]: np.float32})
    assert assert_parity(converted, model, mixed, "float64") == 3


def test_scaler_before_trees(backend, rng):
    """A scaler feeding a forest: the trees read the scaler's rounded output."""
    X = _fresh_rows(rng, 400)
    y = _targets(X, "multi", rng)
    model = make_pipeline(StandardScaler(), RandomForestClassifier(
        n_estimators=5, max_depth=6, random_state=0)).fit(X, y)
    converted = woodstar.convert(model, backend)
    fresh = _fresh_rows(rng)
    fresh[rng.random(fresh.shape) < 0.05] = np.nan  # both the scaler and the forest take NaN
    for X_in in (fresh, fresh.astype(np.float32)):
        assert assert_parity(converted, model, X_in, "float64") == 2
        np.testing.assert_array_equal(converted.predict_proba(X_in), model.predict_proba(X_in))
    assert_parity(converted, model, np.full((1, N_FEATURES), np.inf), "float64")


def test_save_and_load_keep_the_pipeline(tmp_path, rng):
    model = _fit("logreg_multi", "standard_then_minmax")
    converted = woodstar.convert(model, "torch")
    path = converted.save(tmp_path / "pipeline.zip")
    loaded = woodstar.load(path)
    X = _fresh_rows(rng).astype(np.float32)
    for method in ("predict", "predict_proba", "decision_function"):
        np.testing.assert_array_equal(getattr(loaded, method)(X), getattr(converted, method)(X))
    assert loaded.ir.head.estimator == "Pipeline(StandardScaler, MinMaxScaler, LogisticRegression)"


def test_a_scaler_overflowing_float32_is_refused_like_sklearn():
    """A finite float32 row that a scaler turns into infinity: scikit-learn's linear
    model refuses it, and so does the container, on both routes."""
    model = _fit("logreg_binary", "standard")
    X = np.full((2, N_FEATURES), 3e38, dtype=np.float32)
    with np.errstate(over="ignore"):
        with pytest.raises(ValueError, match="infinity"):
            model.predict(X)
        for config in ({}, {"small_batch_rows": 0}):
            converted = woodstar.convert(model, "torch", extra_config=config)
            with pytest.raises(ValueError, match="infinity or a value too large for float32"):
                converted.predict(X)


def test_float16_input_is_refused_with_the_reason():
    converted = woodstar.convert(_fit("linreg", "standard"), "torch")
    with pytest.raises(ValueError, match="float16"):
        converted.predict(np.zeros((2, N_FEATURES), dtype=np.float16))


def test_wrong_feature_count_is_refused():
    converted = woodstar.convert(_fit("logreg_binary", "standard"), "torch")
    with pytest.raises(ValueError, match=f"expects {N_FEATURES} features; got 3"):
        converted.predict(np.zeros((2, 3)))


def test_unsupported_pipeline_step_names_what_is_supported(rng):
    model = make_pipeline(Nystroem(n_components=5), lm.LogisticRegression()).fit(
        _fresh_rows(rng, 100), rng.integers(0, 2, 100))
    with pytest.raises(MissingConverter, match=r"Cannot convert Nystroem: this transformer is not "
                                               r"supported \(got 'Nystroem'\); supported: "
                                               r".*StandardScaler"):
        woodstar.convert(model, "torch")


@pytest.mark.parametrize("backend", ["torch", "torch.jit"])
@pytest.mark.parametrize("n_classes", [2, 3, 5])
def test_modified_huber_predict_proba_is_sklearns_to_the_bit(n_classes, backend, rng):
    """Binary: (clip(decision, -1, 1) + 1) / 2 beside its complement; several classes:
    normalised, uniform where every clipped score is -1 (the all-zero rule)."""
    X = _fresh_rows(rng, 300, spread=(1,))
    y = rng.integers(0, n_classes, 300)
    model = lm.SGDClassifier(loss="modified_huber", random_state=0).fit(X, y)
    fresh = _fresh_rows(rng, 200, spread=(0.5, 1, 10))
    converted = woodstar.convert(model, backend)
    expected = model.predict_proba(fresh)
    got = converted.predict_proba(fresh)
    if backend == "torch":  # the default route: scikit-learn's own NumPy expressions
        np.testing.assert_array_equal(got, expected)
    else:
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    np.testing.assert_array_equal(converted.predict(fresh), model.predict(fresh))


def test_modified_huber_rows_clipped_to_minus_one_everywhere_are_uniform():
    import torch

    from woodstar.ir.transforms import apply_post_transform
    from woodstar.lowering.post_transforms import PostTransform

    raw = np.array([[-5.0, -1.0, -3.0], [0.5, -2.0, 3.0], [-1.0, -1.0, -1.0]])
    expected = np.array([[1 / 3] * 3, [0.75 / 1.75, 0.0, 1 / 1.75], [1 / 3] * 3])
    for got in (apply_post_transform("modified_huber", raw),
                PostTransform("modified_huber")(torch.from_numpy(raw)).numpy()):
        np.testing.assert_allclose(got, expected, rtol=1e-15)


def test_multilabel_ridge_classifier_is_refused(rng):
    y = rng.integers(0, 2, size=(100, 2))
    model = lm.RidgeClassifier().fit(_fresh_rows(rng, 100), y)
    with pytest.raises(MissingConverter, match="multilabel targets is not supported"):
        woodstar.convert(model, "torch")


@pytest.mark.parametrize("model", [lm.LogisticRegression(), StandardScaler(),
                                   make_pipeline(StandardScaler(), lm.LinearRegression())],
                         ids=["logreg", "scaler", "pipeline"])
def test_unfitted_models_are_refused(model):
    with pytest.raises(NotFittedError, match="not fitted"):
        woodstar.convert(model, "torch")
