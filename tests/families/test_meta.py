"""Meta-estimators (searches, voting, stacking, bagging, AdaBoost, calibration,
one-vs-rest / one-vs-one, multi-output, chains, transformed targets) against
scikit-learn's own methods: labels identical and scores bit for bit on the default CPU
route (the ops repeat scikit-learn's NumPy code), within 1e-12 on the Torch program
and the other backends (their sums run in order; NumPy's row sums add in blocks)."""

import warnings

import numpy as np
import pytest
from joblib import parallel_backend

import woodstar
from woodstar.exceptions import MissingConverter

from .._parity import assert_parity

COVERS_OPS = ("meta_label", "meta_accumulate", "meta_average", "meta_calibrate", "meta_ovr_proba",
              "meta_ovo", "meta_samme", "meta_weighted_median", "meta_ufunc")
COVERS_MODELS = ("AdaBoostClassifier", "AdaBoostRegressor", "BaggingClassifier", "BaggingRegressor", "CalibratedClassifierCV", "ClassifierChain", "GridSearchCV", "HalvingGridSearchCV", "HalvingRandomSearchCV", "MultiOutputClassifier", "MultiOutputRegressor", "OneVsOneClassifier", "OneVsRestClassifier", "RandomizedSearchCV", "RegressorChain", "StackingClassifier", "StackingRegressor", "TransformedTargetRegressor", "VotingClassifier", "VotingRegressor")

sklearn = pytest.importorskip("sklearn")
from sklearn.calibration import CalibratedClassifierCV  # noqa: E402
from sklearn.compose import TransformedTargetRegressor  # noqa: E402
from sklearn.ensemble import (AdaBoostClassifier, AdaBoostRegressor, BaggingClassifier,  # noqa: E402
                              BaggingRegressor, RandomForestClassifier, StackingClassifier,
                              StackingRegressor, VotingClassifier, VotingRegressor)
from sklearn.experimental import enable_halving_search_cv  # noqa: E402,F401
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge  # noqa: E402
from sklearn.model_selection import (GridSearchCV, HalvingGridSearchCV,  # noqa: E402
                                     RandomizedSearchCV)
from sklearn.multiclass import OneVsOneClassifier, OneVsRestClassifier  # noqa: E402
from sklearn.multioutput import (ClassifierChain, MultiOutputClassifier,  # noqa: E402
                                 MultiOutputRegressor, RegressorChain)
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import MinMaxScaler, StandardScaler  # noqa: E402
from sklearn.tree import DecisionTreeClassifier, DecisionTreeRegressor  # noqa: E402

N_FEATURES = 5


def _lr():
    return LogisticRegression(max_iter=500)


def _tree(depth=4):
    return DecisionTreeClassifier(max_depth=depth, random_state=0)


def _reg_tree(depth=3):
    return DecisionTreeRegressor(max_depth=depth, random_state=0)


def _fit_all():
    rng = np.random.default_rng(12345)
    X = rng.normal(size=(200, N_FEATURES))
    y3 = np.where(X[:, 0] + X[:, 1] > 0.3, 2, np.where(X[:, 2] > 0.5, 1, 0))
    y2 = (X[:, 0] - X[:, 3] > 0).astype(int)
    labels = np.array(["ant", "bee", "cat"])[y3]
    yr = 2 * X[:, 0] - X[:, 1] + 0.1 * rng.normal(size=200)
    Y2 = np.stack([y2, (X[:, 4] > 0).astype(int)], axis=1)
    Yr = np.stack([yr, X[:, 2] - X[:, 4]], axis=1)
    forest = RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0)
    models = {
        "grid": GridSearchCV(OneVsRestClassifier(_lr()), {"estimator__C": [0.1, 1.0]}, cv=3),
        "randomized": RandomizedSearchCV(_tree(), {"max_depth": [2, 3, 4]}, n_iter=2, cv=3,
                                         random_state=0),
        "halving": HalvingGridSearchCV(_tree(), {"max_depth": [2, 4]}, cv=3, random_state=0),
        "voting_soft": VotingClassifier([("lr", _lr()), ("dt", _tree()), ("rf", forest)],
                                        voting="soft", weights=[2, 1, 1]),
        "voting_soft_plain": VotingClassifier([("lr", _lr()), ("dt", _tree())], voting="soft"),
        "voting_hard": VotingClassifier([("lr", _lr()), ("dt", _tree()), ("rf", forest)],
                                        voting="hard", weights=[1.5, 1.0, 1.0]),
        "voting_hard_tied": VotingClassifier([("lr", _lr()), ("dt", _tree())], voting="hard"),
        "voting_regressor": VotingRegressor([("r", Ridge()), ("t", _reg_tree())], weights=[3, 1]),
        "stacking_auto": StackingClassifier([("lr", _lr()), ("dt", _tree())], cv=3),
        "stacking_methods": StackingClassifier(
            [("lr", _lr()), ("dt", _tree()), ("lr2", LogisticRegression(C=0.1))],
            stack_method="predict", final_estimator=_tree(3), passthrough=True, cv=3),
        "stacking_decision": StackingClassifier([("lr", _lr())], stack_method="decision_function",
                                                passthrough=True, cv=3),
        "stacking_binary": StackingClassifier([("lr", _lr()), ("dt", _tree())], cv=3),
        "stacking_regressor": StackingRegressor([("r", Ridge()), ("t", _reg_tree())],
                                                passthrough=True, cv=3),
        "bagging_trees": BaggingClassifier(_tree(), n_estimators=6, max_features=3,
                                           max_samples=0.3, random_state=0),
        "bagging_linear": BaggingClassifier(_lr(), n_estimators=5, max_features=0.6,
                                            bootstrap_features=True, random_state=0, n_jobs=2),
        "bagging_votes": BaggingClassifier(make_pipeline(StandardScaler(), OneVsOneClassifier(_lr())),
                                           n_estimators=3, random_state=0),
        "bagging_regressor": BaggingRegressor(_reg_tree(), n_estimators=5, max_features=4,
                                              random_state=0),
        "adaboost": AdaBoostClassifier(_tree(2), n_estimators=8, random_state=0),
        "adaboost_binary": AdaBoostClassifier(n_estimators=8, random_state=0),
        "adaboost_regressor": AdaBoostRegressor(_reg_tree(3), n_estimators=8, random_state=0),
        "calibrated_sigmoid": CalibratedClassifierCV(_lr(), method="sigmoid", cv=3),
        "calibrated_isotonic": CalibratedClassifierCV(_tree(), method="isotonic", cv=3,
                                                      ensemble=False),
        "calibrated_isotonic_ensemble": CalibratedClassifierCV(_lr(), method="isotonic", cv=3),
        "calibrated_binary": CalibratedClassifierCV(_tree(), method="isotonic", cv=3),
        "ovr": OneVsRestClassifier(_lr()),
        "ovr_trees": OneVsRestClassifier(_tree()),
        "ovr_binary": OneVsRestClassifier(_lr()),
        "ovo": OneVsOneClassifier(_lr()),
        "ovo_trees": OneVsOneClassifier(_tree()),
        "multi_output_regressor": MultiOutputRegressor(Ridge()),
        "multi_output_classifier": MultiOutputClassifier(_tree()),
        "classifier_chain": ClassifierChain(_lr(), order=[1, 0], chain_method="predict_proba"),
        "classifier_chain_trees": ClassifierChain(_tree(), order=[0, 1]),
        "regressor_chain": RegressorChain(Ridge(), order=[1, 0]),
        "ttr_ufunc": TransformedTargetRegressor(Ridge(), func=np.log1p, inverse_func=np.expm1),
        "ttr_scaler": TransformedTargetRegressor(_reg_tree(), transformer=StandardScaler()),
        "ttr_minmax": TransformedTargetRegressor(LinearRegression(), transformer=MinMaxScaler()),
    }
    targets = {"voting_hard_tied": y2, "stacking_binary": y2, "adaboost_binary": y2,
               "calibrated_binary": y2, "ovr_binary": y2, "stacking_methods": labels,
               "voting_soft": labels, "adaboost": labels, "ovo": labels,
               "multi_output_classifier": Y2, "classifier_chain": Y2,
               "classifier_chain_trees": Y2, "multi_output_regressor": Yr, "regressor_chain": Yr,
               "ttr_ufunc": np.abs(yr)}
    regressors = ("voting_regressor", "stacking_regressor", "bagging_regressor",
                  "adaboost_regressor", "ttr_scaler", "ttr_minmax")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, model in models.items():
            model.fit(X, targets.get(name, yr if name in regressors else y3))
    return models


@pytest.fixture(scope="module")
def models():
    return _fit_all()


CASES = (
    "grid", "randomized", "halving", "voting_soft", "voting_soft_plain", "voting_hard",
    "voting_hard_tied", "voting_regressor", "stacking_auto", "stacking_methods",
    "stacking_decision", "stacking_binary", "stacking_regressor", "bagging_trees",
    "bagging_linear", "bagging_votes", "bagging_regressor", "adaboost", "adaboost_binary",
    "adaboost_regressor", "calibrated_sigmoid", "calibrated_isotonic",
    "calibrated_isotonic_ensemble", "calibrated_binary", "ovr", "ovr_trees", "ovr_binary", "ovo",
    "ovo_trees", "multi_output_regressor", "multi_output_classifier", "classifier_chain",
    "classifier_chain_trees", "regressor_chain", "ttr_ufunc", "ttr_scaler", "ttr_minmax")
METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function", "transform")
# one model per op kind, for the backends (the compiling ones sample these cases)
BACKEND_CASES = ("voting_soft", "voting_hard", "stacking_methods", "bagging_linear", "adaboost",
                 "adaboost_regressor", "calibrated_isotonic", "calibrated_sigmoid", "ovr", "ovo",
                 "classifier_chain", "ttr_ufunc")


def _inputs(rng, nan):
    X = rng.normal(scale=2.0, size=(150, N_FEATURES))
    X[:10] *= 1e3  # far outside the training range
    X[10:14] = 0.0
    if nan:
        X[rng.random(X.shape) < 0.05] = np.nan
    return X


# Methods the estimator has that the container leaves out: hard voting's transform (the
# inner labels as integers; the container returns floats).
NOT_PROVIDED = {"voting_hard": ("transform",), "voting_hard_tied": ("transform",)}


def _methods(model, name=None):
    return [m for m in METHODS if hasattr(model, m) and m not in NOT_PROVIDED.get(name, ())]


def _quiet(fn, *args):
    with warnings.catch_warnings(), np.errstate(all="ignore"), parallel_backend("threading", n_jobs=1):
        warnings.simplefilter("ignore")
        return fn(*args)


def _check(converted, model, X, tolerance, name=None):
    # n_jobs=2 (bagging_linear) in threads: the same jobs and sums as in processes;
    # n_jobs=1 for the rest (a forest left to the context would add its trees in the
    # order its threads finish)
    with warnings.catch_warnings(), np.errstate(all="ignore"), parallel_backend("threading", n_jobs=1):
        warnings.simplefilter("ignore")
        return assert_parity(converted, model, X, "float64", _methods(model, name), tolerance)


@pytest.mark.parametrize("name", CASES)
def test_default_route_is_exact(models, name, rng):
    model = models[name]
    converted = _quiet(woodstar.convert, model, "torch")
    assert _check(converted, model, _inputs(rng, nan=False), 0.0, name) >= 1
    _check(converted, model, _inputs(rng, nan=True), 0.0, name)
    for method in NOT_PROVIDED.get(name, ()):
        assert not hasattr(converted, method)


@pytest.mark.parametrize("name", CASES)
def test_program_route(models, name, rng):
    model = models[name]
    converted = _quiet(woodstar.convert, model, "torch", None, "cpu", {"cpu_route": "program"})
    _check(converted, model, _inputs(rng, nan=False), 1e-12, name)
    _check(converted, model, _inputs(rng, nan=True), 1e-12, name)


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_backends(models, name, backend, rng):
    model = models[name]
    if backend == "tvm" and getattr(model, "method", None) == "isotonic":
        with pytest.raises(MissingConverter, match="isotonic.*tvm"):
            _quiet(woodstar.convert, model, backend)
        return
    converted = _quiet(woodstar.convert, model, backend)
    X = _inputs(rng, nan=False)
    methods = [m for m in _methods(model, name) if m != "predict_log_proba"]
    with warnings.catch_warnings(), np.errstate(all="ignore"), parallel_backend("threading", n_jobs=1):
        warnings.simplefilter("ignore")
        assert_parity(converted, model, X, "float64", methods, 1e-12)
        if "predict_log_proba" in _methods(model, name):
            # The log of a probability near 0 magnifies the probability's own 1e-12 (ONNX
            # Runtime's float64 sigmoid differs from SciPy's in the last digits there):
            # the probabilities behind the logs are held to 1e-12.
            np.testing.assert_allclose(np.exp(converted.predict_log_proba(X)),
                                       np.exp(model.predict_log_proba(X)), rtol=1e-12, atol=1e-12)


def test_float32_input_follows_the_inner_models(models, rng):
    model = models["voting_soft_plain"]
    X = _inputs(rng, nan=False).astype(np.float32)
    converted = _quiet(woodstar.convert, model, "torch")
    for method in ("predict", "predict_proba"):
        np.testing.assert_array_equal(getattr(converted, method)(X), getattr(model, method)(X))


def test_labels_of_any_kind(models, rng):
    model = models["stacking_methods"]  # string labels, predict stacked as label values
    X = _inputs(rng, nan=False)
    assert _quiet(woodstar.convert, model, "torch").predict(X).tolist() == model.predict(X).tolist()
    assert list(_quiet(woodstar.convert, model, "torch").classes_) == ["ant", "bee", "cat"]


def test_in_a_pipeline(models, rng):
    X, y = rng.normal(size=(200, N_FEATURES)), rng.integers(0, 3, 200)
    pipeline = _quiet(make_pipeline(StandardScaler(), VotingClassifier(
        [("lr", _lr()), ("dt", _tree())], voting="soft")).fit, X, y)
    converted = _quiet(woodstar.convert, pipeline, "torch")
    _check(converted, pipeline, _inputs(rng, nan=False), tolerance=0.0)


def test_save_and_load(models, rng, tmp_path):
    model = models["calibrated_isotonic"]
    X = _inputs(rng, nan=False)
    converted = _quiet(woodstar.convert, model, "torch")
    path = converted.save(tmp_path / "meta.zip")
    loaded = woodstar.load(path)
    np.testing.assert_array_equal(loaded.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


# ------------------------------------------------------------------ refusals
def _fit(model, X, y):
    return _quiet(model.fit, X, y)


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(120, 4))
    return X, (X[:, 0] > 0).astype(int), X[:, 1] * 2


def test_search_without_refit_is_refused(data):
    X, y, _ = data
    search = _fit(GridSearchCV(_lr(), {"C": [0.1, 1.0]}, refit=False, cv=3), X, y)
    with pytest.raises(MissingConverter, match=r"GridSearchCV: refit .*no best_estimator_.*"
                                               r"best_params_ and convert it"):
        woodstar.convert(search, "torch")


def test_temperature_calibration_is_refused(data):
    X, y, _ = data
    model = _fit(CalibratedClassifierCV(_lr(), method="temperature", cv=3), X, y)
    with pytest.raises(MissingConverter, match="CalibratedClassifierCV: method .*'temperature'"):
        woodstar.convert(model, "torch")


def test_inverse_function_that_is_not_a_ufunc_is_refused(data):
    X, _, yr = data
    model = _fit(TransformedTargetRegressor(Ridge(), func=lambda v: v * 2,
                                            inverse_func=lambda v: v / 2, check_inverse=False), X, yr)
    with pytest.raises(MissingConverter, match="TransformedTargetRegressor: inverse_func"):
        woodstar.convert(model, "torch")


def test_unsupported_target_transformer_is_refused(data):
    from sklearn.preprocessing import QuantileTransformer

    X, _, yr = data
    model = _fit(TransformedTargetRegressor(Ridge(), transformer=QuantileTransformer(n_quantiles=20)),
                 X, yr)
    with pytest.raises(MissingConverter, match="TransformedTargetRegressor: transformer"):
        woodstar.convert(model, "torch")


def test_multi_output_classifier_deciding_on_scores_is_refused(data):
    X, y, _ = data
    model = _fit(MultiOutputClassifier(_lr()), X, np.stack([y, 1 - y], axis=1))
    with pytest.raises(MissingConverter, match="MultiOutputClassifier: an inner classifier that "
                                               "does not predict the argmax"):
        woodstar.convert(model, "torch")


def test_multi_output_classifier_with_one_output_is_refused(data):
    X, y, _ = data
    model = _fit(MultiOutputClassifier(_tree()), X, y.reshape(-1, 1))
    with pytest.raises(MissingConverter, match="MultiOutputClassifier: one output"):
        woodstar.convert(model, "torch")


def test_multilabel_one_vs_rest_is_refused(data):
    X, y, _ = data
    model = _fit(OneVsRestClassifier(_lr()), X, np.stack([y, 1 - y], axis=1))
    with pytest.raises(MissingConverter, match="OneVsRestClassifier: multilabel targets"):
        woodstar.convert(model, "torch")


def test_inner_estimator_without_a_converter_is_refused(data):
    from sklearn.dummy import DummyClassifier

    X, y, _ = data
    model = _fit(VotingClassifier([("d", DummyClassifier()), ("lr", _lr())]), X, y)
    with pytest.raises(MissingConverter, match="DummyClassifier"):
        woodstar.convert(model, "torch")


def test_multilabel_stacking_is_refused(data):
    X, y, _ = data
    model = _fit(StackingClassifier([("dt", _tree())], final_estimator=_tree(), cv=3), X,
                 np.stack([y, 1 - y], axis=1))
    with pytest.raises(MissingConverter, match="StackingClassifier: multilabel targets"):
        woodstar.convert(model, "torch")
