"""Feature selectors as column selections (``get_support()``), alone and in pipelines;
RFE and RFECV predicting through their estimator_ on the selected columns."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.feature_selection import (RFE, RFECV, GenericUnivariateSelect,  # noqa: E402
                                       SelectFdr, SelectFpr, SelectFromModel, SelectFwe,
                                       SelectKBest, SelectPercentile, SequentialFeatureSelector,
                                       VarianceThreshold)
from sklearn.linear_model import LogisticRegression, Ridge  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import StandardScaler  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402

from .._parity import assert_parity  # noqa: E402

COVERS_OPS = ("select",)
COVERS_MODELS = ("RFE", "RFECV")

SELECTORS = {
    "variance": lambda: VarianceThreshold(0.9),
    "kbest": lambda: SelectKBest(k=3),
    "percentile": lambda: SelectPercentile(percentile=50),
    "fpr": lambda: SelectFpr(alpha=0.2),
    "fdr": lambda: SelectFdr(alpha=0.5),
    "fwe": lambda: SelectFwe(alpha=0.5),
    "generic": lambda: GenericUnivariateSelect(mode="k_best", param=2),
    "from_model": lambda: SelectFromModel(LogisticRegression()),
    "sequential": lambda: SequentialFeatureSelector(LogisticRegression(), n_features_to_select=2,
                                                    cv=2),
    "rfe_linear": lambda: RFE(LogisticRegression(), n_features_to_select=3),
    "rfe_ridge": lambda: RFE(Ridge(), n_features_to_select=2),
    "rfecv_tree": lambda: RFECV(DecisionTreeClassifier(max_depth=3, random_state=0), cv=2),
}
METHODS = ("transform", "predict", "predict_proba", "decision_function")


def data(rng, n):
    X = rng.normal(size=(n, 6))
    X[:, 1] *= 0.5
    return X


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(20260302)
    X = data(rng, 200)
    y = (X[:, 0] + X[:, 2] > 0).astype(int)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return {name: make().fit(X, X[:, 0] + X[:, 3] if name == "rfe_ridge" else y)
                for name, make in SELECTORS.items()}


def _rows(rng, model=None):
    X = np.vstack([data(rng, 60), 50 * data(rng, 20)])
    X[rng.random(X.shape) < 0.05] = np.nan
    # infinity in a selected column: RFE around an estimator that takes NaN (a tree)
    # lets infinity through in the columns it drops, where woodstar refuses it (the
    # input edge checks every column)
    column = 0 if model is None else int(np.flatnonzero(model.get_support())[0])
    X[3, column] = np.inf
    return X


def _methods(model, converted):
    return [m for m in METHODS if hasattr(model, m) and hasattr(converted, m)]


@pytest.mark.parametrize("name", list(SELECTORS))
def test_matches_sklearn_on_every_backend(fitted, name, backend, rng):
    model = fitted[name]
    converted = woodstar.convert(model, backend)
    X = _rows(rng, model)
    clean = np.nan_to_num(X, posinf=0.0)
    exact = converted.route != "program"
    for method in _methods(model, converted):
        # NaN and infinity: refused by both, or answered by both. (RFE around a tree:
        # its transform passes infinity, its predict refuses it; the container checks
        # its input once for every method, so it refuses infinity in transform too.)
        rows = np.where(np.isinf(X), 0.0, X) if name == "rfecv_tree" and method == "transform" \
            else X
        assert_parity(converted, model, rows, "float64", [method])
        expected, got = getattr(model, method)(clean), getattr(converted, method)(clean)
        if exact or expected.dtype.kind != "f":
            np.testing.assert_array_equal(got, expected, err_msg=method)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=method)


@pytest.mark.parametrize("name", list(SELECTORS))
def test_program_route_within_tolerance(fitted, name, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    X = np.nan_to_num(_rows(rng), posinf=0.0)
    for method in _methods(model, converted):
        expected, got = getattr(model, method)(X), getattr(converted, method)(X)
        if expected.dtype.kind == "f":
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12, err_msg=method)
        else:
            np.testing.assert_array_equal(got, expected, err_msg=method)


def test_rfe_keeps_the_estimators_methods(fitted):
    converted = woodstar.convert(fitted["rfe_linear"], "torch")
    assert {"predict", "predict_proba", "decision_function", "transform"} <= set(dir(converted))
    np.testing.assert_array_equal(converted.classes_, fitted["rfe_linear"].classes_)


@pytest.mark.parametrize("name", ["kbest", "variance", "rfe_linear"])
def test_in_a_pipeline_after_a_scaler(fitted, name, rng):
    X = data(rng, 200)
    y = (X[:, 0] - X[:, 1] > 0).astype(int)
    model = make_pipeline(StandardScaler(), SELECTORS[name](), LogisticRegression()).fit(X, y)
    T = 10 * data(rng, 80)
    converted = woodstar.convert(model, "torch")
    np.testing.assert_array_equal(converted.predict_proba(T), model.predict_proba(T))
    ends_in_rfe = make_pipeline(StandardScaler(), SELECTORS[name]()).fit(X, y)
    got = woodstar.convert(ends_in_rfe, "torch")
    np.testing.assert_array_equal(got.transform(T), ends_in_rfe.transform(T))
    if name == "rfe_linear":
        np.testing.assert_array_equal(got.predict_proba(T), ends_in_rfe.predict_proba(T))


def test_float32_input(fitted, rng):
    X = data(rng, 50).astype(np.float32)
    got = woodstar.convert(fitted["kbest"], "torch").transform(X)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, fitted["kbest"].transform(X))
    # RFE's transform is a block beside its estimator's float64 outputs: same values
    rfe = fitted["rfe_linear"]
    np.testing.assert_array_equal(woodstar.convert(rfe, "torch").transform(X), rfe.transform(X))


def test_save_and_load(fitted, rng, tmp_path):
    model = fitted["rfecv_tree"]
    path = woodstar.convert(model, "torch").save(tmp_path / "rfecv.zip")
    loaded = woodstar.load(path)
    X = np.nan_to_num(_rows(rng), posinf=0.0)
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(loaded.transform(X), model.transform(X))


def test_empty_selection_is_refused(rng):
    X = data(rng, 50)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = VarianceThreshold(100.0)
        model.variances_ = np.var(X, axis=0)
        model.n_features_in_ = X.shape[1]
    with pytest.raises(MissingConverter, match="a selection of no features is not supported"):
        woodstar.convert(model, "torch")
