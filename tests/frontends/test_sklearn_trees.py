"""scikit-learn tree models: IR reference == scikit-learn, and converted == scikit-learn
for every strategy, precision and backend, on fresh data with NaN, +-inf and values
on split thresholds."""

import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn import ensemble, tree  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter, NotFittedError  # noqa: E402
from woodstar.frontends import find_frontend  # noqa: E402
from woodstar.ir.reference import predict as reference_predict  # noqa: E402

from .._parity import assert_parity, make_test_inputs  # noqa: E402

N_FEATURES = 6


def _data(seed, n=400, nan_fraction=0.1, task="binary"):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEATURES))
    X[:, 1] = np.round(X[:, 1] * 3)  # repeated values: many exact ties at thresholds
    signal = X[:, 0] + 0.5 * X[:, 1] - X[:, 2] * X[:, 3] + rng.normal(scale=0.3, size=n)
    if nan_fraction:
        X[rng.random(X.shape) < nan_fraction] = np.nan
    if task == "binary":
        y = np.where(signal > 0, "yes", "no")
    elif task == "multiclass":
        y = np.digitize(signal, [-1.0, 0.0, 1.0]) * 3 - 4  # labels -4, -1, 2, 5
    elif task == "multioutput":
        y = np.stack([signal > 0, np.digitize(signal, [-0.5, 0.5])], axis=1).astype(int)
    elif task == "multiregression":
        y = np.stack([signal, np.abs(signal)], axis=1)
    elif task == "positive":
        y = np.exp(signal / 2)
    else:
        y = signal
    return X, y


# (id, estimator factory, task, training data may hold NaN)
MODELS = [
    ("tree-clf-depth1", lambda: tree.DecisionTreeClassifier(max_depth=1), "binary", True),
    ("tree-clf-depth3", lambda: tree.DecisionTreeClassifier(max_depth=3), "multiclass", True),
    ("tree-clf-depth8", lambda: tree.DecisionTreeClassifier(max_depth=8), "binary", True),
    ("tree-reg-depth12", lambda: tree.DecisionTreeRegressor(max_depth=12), "regression", True),
    ("tree-reg-unlimited", lambda: tree.DecisionTreeRegressor(), "regression", True),
    ("extra-tree-clf", lambda: tree.ExtraTreeClassifier(max_depth=6), "multiclass", False),
    ("rf-clf", lambda: ensemble.RandomForestClassifier(12, max_depth=8), "multiclass", True),
    ("rf-clf-unlimited", lambda: ensemble.RandomForestClassifier(6), "binary", True),
    ("rf-reg", lambda: ensemble.RandomForestRegressor(10, max_depth=6), "regression", True),
    ("rf-multioutput-clf", lambda: ensemble.RandomForestClassifier(8, max_depth=5), "multioutput", True),
    ("rf-multioutput-reg", lambda: ensemble.RandomForestRegressor(8, max_depth=5), "multiregression", True),
    ("et-clf", lambda: ensemble.ExtraTreesClassifier(10, max_depth=8), "binary", False),
    ("et-reg-multioutput", lambda: ensemble.ExtraTreesRegressor(8, max_depth=7), "multiregression", False),
    ("gb-clf-binary", lambda: ensemble.GradientBoostingClassifier(n_estimators=15, max_depth=3), "binary", False),
    ("gb-clf-exponential", lambda: ensemble.GradientBoostingClassifier(
        n_estimators=15, loss="exponential"), "binary", False),
    ("gb-clf-multiclass", lambda: ensemble.GradientBoostingClassifier(n_estimators=8), "multiclass", False),
    ("gb-clf-init-zero", lambda: ensemble.GradientBoostingClassifier(n_estimators=8, init="zero"),
     "multiclass", False),
    ("gb-reg-squared", lambda: ensemble.GradientBoostingRegressor(n_estimators=15), "regression", False),
    ("gb-reg-absolute", lambda: ensemble.GradientBoostingRegressor(
        n_estimators=10, loss="absolute_error"), "regression", False),
    ("gb-reg-huber", lambda: ensemble.GradientBoostingRegressor(n_estimators=10, loss="huber"),
     "regression", False),
    ("gb-reg-quantile", lambda: ensemble.GradientBoostingRegressor(
        n_estimators=10, loss="quantile", alpha=0.8), "regression", False),
    ("hgb-clf-binary", lambda: ensemble.HistGradientBoostingClassifier(max_iter=15), "binary", True),
    ("hgb-clf-multiclass", lambda: ensemble.HistGradientBoostingClassifier(max_iter=10), "multiclass", True),
    ("hgb-reg-squared", lambda: ensemble.HistGradientBoostingRegressor(max_iter=15), "regression", True),
    ("hgb-reg-absolute", lambda: ensemble.HistGradientBoostingRegressor(
        max_iter=10, loss="absolute_error"), "regression", True),
    ("hgb-reg-quantile", lambda: ensemble.HistGradientBoostingRegressor(
        max_iter=10, loss="quantile", quantile=0.3), "regression", True),
    ("hgb-reg-poisson", lambda: ensemble.HistGradientBoostingRegressor(max_iter=10, loss="poisson"),
     "positive", True),
    ("hgb-reg-gamma", lambda: ensemble.HistGradientBoostingRegressor(max_iter=10, loss="gamma"),
     "positive", True),
    ("iforest", lambda: ensemble.IsolationForest(n_estimators=20, random_state=0), "regression", True),
    ("iforest-subsampled-features", lambda: ensemble.IsolationForest(
        n_estimators=15, max_features=0.5, max_samples=64, random_state=0), "regression", True),
]


@pytest.fixture(scope="module", params=MODELS, ids=[m[0] for m in MODELS])
def fitted(request):
    name, factory, task, nan_ok = request.param
    X, y = _data(seed=len(name), nan_fraction=0.1 if nan_ok else 0.0, task=task)
    model = factory()
    if "random_state" in model.get_params():
        model.set_params(random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model.fit(X, y)
    return model, X


def _inputs(model, ensemble, rng, X_train):
    head = find_frontend(model)(model, None).head
    return make_test_inputs(ensemble, rng, base=X_train, nan=head.allows_nan, inf=head.allows_inf)


def test_reference_matches_sklearn(fitted, rng):
    """Frontend check, no torch: the IR's NumPy reference == scikit-learn in float64."""
    model, X_train = fitted
    model_ir = find_frontend(model)(model, None)
    X = _inputs(model, model_ir.ensemble, rng, X_train)
    raw, transformed = reference_predict(model_ir.ensemble, X)
    if hasattr(model, "predict_proba"):
        expected = model.predict_proba(X)
        expected = np.hstack(expected) if isinstance(expected, list) else expected
        np.testing.assert_allclose(transformed, expected, rtol=1e-12, atol=1e-12)
    if hasattr(model, "decision_function") and not hasattr(model, "score_samples"):
        np.testing.assert_allclose(raw.reshape(len(X), -1),
                                   model.decision_function(X).reshape(len(X), -1), rtol=1e-12, atol=1e-12)
    if hasattr(model, "score_samples"):
        np.testing.assert_allclose(transformed[:, 0], model.score_samples(X), rtol=1e-12, atol=1e-12)
    if not hasattr(model, "predict_proba") and not hasattr(model, "score_samples"):
        np.testing.assert_allclose(transformed, model.predict(X).reshape(len(X), -1), rtol=1e-12, atol=1e-12)


# Outputs that are plain float64 sums of leaves (no link function): scikit-learn adds
# trees one by one from the base score, and so does every route here, so these match
# bit for bit. A near tie between classes is decided by that last bit.
SUM_METHODS = {
    "RandomForestClassifier": ("predict_proba",), "ExtraTreesClassifier": ("predict_proba",),
    "RandomForestRegressor": ("predict",), "ExtraTreesRegressor": ("predict",),
    "DecisionTreeClassifier": ("predict_proba",), "ExtraTreeClassifier": ("predict_proba",),
    "DecisionTreeRegressor": ("predict",),
    "GradientBoostingClassifier": ("decision_function",),
    "HistGradientBoostingClassifier": ("decision_function",),
}
IDENTITY_LOSSES = ("squared_error", "absolute_error", "huber", "quantile")


def _bitwise_methods(model):
    name = type(model).__name__
    if name in ("GradientBoostingRegressor", "HistGradientBoostingRegressor"):
        return ("predict",) if model.loss in IDENTITY_LOSSES else ()
    return SUM_METHODS.get(name, ())


def test_converted_matches_sklearn(fitted, strategy, precision, backend, rng):
    model, X_train = fitted
    ensemble_ir = find_frontend(model)(model, None).ensemble
    X = _inputs(model, ensemble_ir, rng, X_train)
    converted = woodstar.convert(model, backend, extra_config={
        "tree_implementation": strategy, "tree_op_precision_dtype": precision})
    assert converted.strategy == strategy
    # float32 input is what the float32 route is exact for; float64 for the float64 route.
    X_in = X.astype(np.float32) if precision == "float32" else X
    assert assert_parity(converted, model, X_in, precision) >= 1
    for method in _bitwise_methods(model):
        expected, got = getattr(model, method)(X_in), getattr(converted, method)(X_in)
        expected = np.hstack(expected) if isinstance(expected, list) else expected
        got = np.hstack(got) if isinstance(got, list) else got
        differ = np.flatnonzero((got != expected).reshape(len(X_in), -1).any(axis=1))
        assert len(differ) == 0, f"{method}: {len(differ)} rows differ in the last bits, first {differ[:5]}"


def test_float64_input_takes_the_sources_branch(rng):
    """HistGradientBoosting compares float64 values: a float64 input one ulp from a
    threshold must not be rounded to float32 by the default (automatic) route."""
    X, y = _data(seed=3, task="regression")
    model = ensemble.HistGradientBoostingRegressor(max_iter=10).fit(X, y)
    ens = find_frontend(model)(model, None).ensemble
    internal = np.flatnonzero(ens.left >= 0)
    X_edge = np.tile(np.nanmedian(X, axis=0), (len(internal), 1))
    for row, node in enumerate(internal):
        X_edge[row, ens.feature[node]] = np.nextafter(ens.threshold[node], np.inf)
    converted = woodstar.convert(model, "torch")
    np.testing.assert_allclose(converted.predict(X_edge), model.predict(X_edge), rtol=1e-12, atol=1e-12)


def test_string_and_negative_labels_round_trip():
    X, y = _data(seed=1, task="multiclass")
    model = ensemble.RandomForestClassifier(5, random_state=0).fit(X, y)
    converted = woodstar.convert(model, "torch")
    assert set(np.unique(converted.predict(X))) <= set(model.classes_)
    np.testing.assert_array_equal(converted.classes_, model.classes_)
    X, y = _data(seed=1, task="binary")
    model = ensemble.RandomForestClassifier(5, random_state=0).fit(X, y)
    predicted = woodstar.convert(model, "torch").predict(X)
    assert predicted.dtype == model.predict(X).dtype
    np.testing.assert_array_equal(predicted, model.predict(X))


def _hgb_categorical_model(seed):
    rng = np.random.default_rng(seed)
    n = 600
    X = np.column_stack([
        rng.normal(size=n),
        rng.integers(0, 8, n).astype(float),  # categorical, codes 0..7
        rng.normal(size=n),
        rng.choice([2.0, 5.0, 11.0, 40.0], n),  # categorical, sparse codes
    ])
    X[rng.random(n) < 0.1, 1] = np.nan
    y = (np.isin(X[:, 1], [1, 3, 6]) ^ (X[:, 0] > 0) ^ (X[:, 3] == 11)).astype(int)
    model = ensemble.HistGradientBoostingClassifier(
        max_iter=15, categorical_features=[1, 3], random_state=0).fit(X, y)
    return model, X


def test_hgb_categorical_with_unseen_and_negative_categories(strategy, precision, backend, rng):
    model, X_train = _hgb_categorical_model(seed=7)
    n = 400
    X = X_train[rng.integers(0, len(X_train), n)].copy()
    # Unseen (8, 9, 12, 41, 1000), negative, non-integer and NaN categories.
    X[:, 1] = rng.choice([0, 1, 3, 6, 7, 8, 9, -1, -0.5, 2.5, np.nan, 1000], n)
    X[:, 3] = rng.choice([2, 5, 11, 40, 12, 41, 0, -3, np.nan], n)
    X[:, 0] = np.where(rng.random(n) < 0.05, np.inf, X[:, 0])  # fine in a numerical column
    converted = woodstar.convert(model, backend, extra_config={
        "tree_implementation": strategy, "tree_op_precision_dtype": precision})
    X_in = X.astype(np.float32) if precision == "float32" else X
    assert assert_parity(converted, model, X_in, precision) == 3
    # scikit-learn's encoder rejects an infinite category; so must woodstar.
    X_in[0, 1] = np.inf
    with pytest.raises(ValueError):
        model.predict(X_in)
    with pytest.raises(ValueError, match=r"infinity in categorical feature\(s\) \[1, 3\]"):
        converted.predict(X_in)


def test_pandas_dataframe_input_with_feature_names(rng):
    pd = pytest.importorskip("pandas")
    X, y = _data(seed=2, task="binary")
    frame = pd.DataFrame(X, columns=[f"f{i}" for i in range(N_FEATURES)])
    model = ensemble.RandomForestClassifier(5, random_state=0).fit(frame, y)
    converted = woodstar.convert(model, "torch")
    np.testing.assert_array_equal(converted.feature_names_in_, model.feature_names_in_)
    np.testing.assert_allclose(converted.predict_proba(frame), model.predict_proba(frame), atol=1e-12)
    shuffled = frame[frame.columns[::-1]]
    np.testing.assert_allclose(converted.predict_proba(shuffled), model.predict_proba(frame), atol=1e-12)
    with pytest.raises(ValueError, match=r"lacks \['f5'\] and has unexpected \['zzz'\]"):
        converted.predict(frame.rename(columns={"f5": "zzz"}))


# ------------------------------------------------------------------------ refusals
def test_unsupported_init_estimator_is_refused():
    from sklearn.linear_model import LinearRegression

    X, y = _data(seed=4, nan_fraction=0, task="regression")
    model = ensemble.GradientBoostingRegressor(n_estimators=3, init=LinearRegression()).fit(X, y)
    with pytest.raises(MissingConverter, match=r"Cannot convert GradientBoostingRegressor: init estimator "
                                               r"is not supported \(got 'LinearRegression'\)"):
        woodstar.convert(model, "torch")


def test_unfitted_model_is_refused():
    with pytest.raises(NotFittedError, match="RandomForestClassifier: the model is not fitted"):
        woodstar.convert(ensemble.RandomForestClassifier(), "torch")


def test_string_categories_are_refused_with_a_reason():
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"color": pd.Categorical(["red", "blue", "green"] * 30),
                          "x": np.arange(90.0)})
    y = np.arange(90) % 2
    model = ensemble.HistGradientBoostingClassifier(max_iter=3, categorical_features="from_dtype")
    model.fit(frame, y)
    with pytest.raises(MissingConverter, match="categorical feature 0 with categories"):
        woodstar.convert(model, "torch")


def test_unsupported_model_names_what_is_supported():
    from sklearn.kernel_ridge import KernelRidge

    with pytest.raises(MissingConverter, match=r"Cannot convert KernelRidge: this model type is not "
                                               r"supported \(got 'sklearn.kernel_ridge.KernelRidge'\); "
                                               r"supported: the \d+ classes listed in "
                                               r"docs/supported.md"):
        woodstar.convert(KernelRidge(), "torch")
