"""scikit-learn's multilayer perceptrons: MLPClassifier (binary, multiclass, multilabel)
and MLPRegressor, every hidden activation.

The default route (the ``torch`` backend on the CPU) runs scikit-learn's own NumPy
expressions of ``_forward_pass_fast``, so every method equals scikit-learn bit for
bit, dtype included (float32 stays float32 for a network fitted on float32). The
Torch program and the other backends multiply in their own order: within 1e-12 in
float64 (relative, and absolute where a probability's log is near 0), within
float32's precision for a network fitted on float32."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.compose import make_column_transformer  # noqa: E402
from sklearn.neural_network import MLPClassifier, MLPRegressor  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, StandardScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter, NotFittedError  # noqa: E402
from woodstar.frontends import find_frontend  # noqa: E402

from .._parity import assert_parity  # noqa: E402

COVERS_OPS = ("mlp",)
COVERS_MODELS = ("MLPClassifier", "MLPRegressor")

N_FEATURES = 5
ACTIVATIONS = ("identity", "logistic", "tanh", "relu")
_SCALE = np.array([1.0, 3.0, 0.5, 10.0, 1.0])

# name -> (factory, target, fit on float32)
CASES = {
    **{f"classifier_{a}": (lambda a=a: MLPClassifier((6, 4), activation=a, max_iter=60,
                                                      random_state=0), "multiclass", False)
       for a in ACTIVATIONS},
    "classifier_binary_strings": (lambda: MLPClassifier((5,), activation="tanh", max_iter=60,
                                                        random_state=0), "binary_strings", False),
    "classifier_multilabel": (lambda: MLPClassifier((6,), activation="relu", max_iter=60,
                                                    random_state=0), "multilabel", False),
    "classifier_float32": (lambda: MLPClassifier((6, 4), max_iter=60, random_state=0),
                           "multiclass", True),
    **{f"regressor_{a}": (lambda a=a: MLPRegressor(hidden_layer_sizes=(6, 4), activation=a,
                                                   max_iter=60, random_state=0),
                          "regression", False)
       for a in ACTIVATIONS},
    "regressor_two_targets": (lambda: MLPRegressor(hidden_layer_sizes=(5,), activation="tanh",
                                                   max_iter=60, random_state=0),
                              "two_targets", False),
    "regressor_float32": (lambda: MLPRegressor(hidden_layer_sizes=(5,), max_iter=60,
                                               random_state=0), "regression", True),
    "regressor_poisson": (lambda: MLPRegressor(hidden_layer_sizes=(5,), loss="poisson",
                                               max_iter=60, random_state=0), "counts", False),
}


def _targets(X, kind):
    signal = X[:, 0] + 0.3 * X[:, 1] - 0.1 * X[:, 3]
    if kind == "multiclass":
        return np.digitize(signal, [-0.8, 0.8])
    if kind == "binary_strings":
        return np.where(signal > 0, "yes", "no")
    if kind == "multilabel":
        return np.c_[signal > 0, X[:, 2] > 0, signal + X[:, 4] > 1].astype(int)
    if kind == "counts":
        return np.floor(np.exp(0.5 * signal))
    if kind == "two_targets":
        return np.c_[signal, X[:, 2] - X[:, 4]]
    return signal


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(0)
    fitted = {}
    for name, (factory, target, on_float32) in CASES.items():
        X = rng.normal(size=(200, N_FEATURES)) * _SCALE
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # ConvergenceWarning: small, quick fits
            fitted[name] = factory().fit(X.astype(np.float32) if on_float32 else X,
                                         _targets(X, target))
    return fitted


def _methods(model):
    return [m for m in ("predict", "predict_proba", "predict_log_proba") if hasattr(model, m)]


def _rows(rng, n=100, spread=(0.5, 1, 10, 1e3)):
    """Rows around and far beyond the training range, some exact zeros."""
    X = rng.normal(size=(n, N_FEATURES)) * _SCALE * rng.choice(spread, size=(n, 1))
    X[rng.random(X.shape) < 0.05] = 0.0
    return X


def _special_rows():
    rows = np.zeros((4, N_FEATURES))
    rows[0, 1], rows[1, 2], rows[2, 0], rows[3, 3] = np.nan, np.inf, -np.inf, 1e39
    return rows


@pytest.mark.parametrize("name", list(CASES))
def test_reference_matches_sklearn_bit_for_bit(name, models, rng):
    """Frontend check, no torch: the IR's NumPy reference is scikit-learn's output."""
    model = models[name]
    model_ir = find_frontend(model)(model, None)
    for dtype in (np.float64, np.float32):
        X = _rows(rng).astype(dtype)
        expected = model.predict_proba(X) if hasattr(model, "predict_proba") else model.predict(X)
        _, transformed = model_ir.graph.reference(X)
        got = transformed[:, 0] if expected.ndim == 1 else transformed
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", list(CASES))
def test_default_route_is_sklearn_bit_for_bit(name, models, rng):
    model = models[name]
    converted = woodstar.convert(model, "torch")
    assert converted.route == "numpy"
    X = _rows(rng)
    for X_in in (X, X.astype(np.float32), np.round(X).astype(np.int64), X[:1]):
        for method in _methods(model):
            expected = getattr(model, method)(X_in)
            got = getattr(converted, method)(X_in)
            assert got.dtype == expected.dtype, method
            np.testing.assert_array_equal(got, expected, err_msg=method)
    for row in _special_rows():  # NaN, infinity, float32 overflow: refused by both
        with np.errstate(over="ignore"):
            assert_parity(converted, model, row.reshape(1, -1), methods=_methods(model))
            assert_parity(converted, model, row.reshape(1, -1).astype(np.float32),
                          methods=_methods(model))


@pytest.mark.parametrize("name", list(CASES))
def test_program_and_backends_match_sklearn(name, models, backend, rng):
    model = models[name]
    # A network fitted on float32 computes in float32: to float32's precision on the
    # programs, which order the float32 products differently, on rows in the training
    # range (the bound is relative to the terms' size).
    on_float32 = CASES[name][2]
    tolerance = 1e-5 if on_float32 else 1e-12
    X = _rows(rng, spread=(0.5, 1) if on_float32 else (0.5, 1, 10, 1e3))
    if model.out_activation_ == "exp":
        # exp(z) turns z's absolute rounding (z sums terms of up to ~1e3 here, in
        # another order) into a relative error of about |z| * eps: the bound grows with z.
        with np.errstate(over="ignore", divide="ignore"):
            z = np.log(model.predict(X))
        tolerance = 1e-12 * max(1.0, np.abs(z[np.isfinite(z)]).max())
    configs = [{"cpu_route": "program"}] if backend == "torch" else [{}]
    for config in configs:
        converted = woodstar.convert(model, backend, extra_config=config)
        for X_in in (X, X.astype(np.float32), X[:1]):
            assert assert_parity(converted, model, X_in, "float64", methods=_methods(model),
                                 tolerance=tolerance) == len(_methods(model))
        for row in _special_rows()[:2]:
            assert_parity(converted, model, row.reshape(1, -1), methods=_methods(model))


def test_multilabel_predict_is_the_indicator_matrix(models, rng):
    model = models["classifier_multilabel"]
    converted = woodstar.convert(model, "torch")
    X = _rows(rng)
    got = converted.predict(X)
    assert got.shape == (len(X), 3) and got.dtype == model.predict(X).dtype
    np.testing.assert_array_equal(got, model.predict(X))
    np.testing.assert_array_equal(converted.classes_, model.classes_)


def test_inside_a_pipeline_after_a_scaler(rng):
    X = _rows(rng, 200, spread=(1,)) + 5.0
    y = _targets(X - 5.0, "multiclass")
    for estimator in (MLPClassifier((6,), max_iter=60, random_state=0),
                      MLPRegressor(hidden_layer_sizes=(6,), activation="relu", max_iter=60,
                                   random_state=0)):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make_pipeline(StandardScaler(), estimator).fit(X, y)
        fresh = _rows(rng) + 5.0
        default = woodstar.convert(model, "torch")
        for method in _methods(model):
            np.testing.assert_array_equal(getattr(default, method)(fresh),
                                          getattr(model, method)(fresh))
        program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
        assert assert_parity(program, model, fresh, "float64", methods=_methods(model)) \
            == len(_methods(model))
        with pytest.raises(ValueError, match="infinity"):
            default.predict(np.full((1, N_FEATURES), np.inf))


def test_after_a_sparse_one_hot_encoding(rng):
    """A one-hot ColumnTransformer gives the network a sparse matrix: the CPU route
    multiplies it by scipy, as scikit-learn's safe_sparse_dot does."""
    X = np.c_[rng.integers(0, 12, size=(200, 2)), rng.normal(size=(200, 2))]
    y = (X[:, 0] > 5).astype(int) + (X[:, 2] > 0)
    encoder = make_column_transformer((OneHotEncoder(handle_unknown="ignore"), [0, 1]),
                                      remainder="passthrough")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = make_pipeline(encoder, MLPClassifier((5,), max_iter=60, random_state=0)).fit(X, y)
    assert model[0].sparse_output_
    fresh = np.c_[rng.integers(0, 14, size=(60, 2)), rng.normal(size=(60, 2)) * 10]
    default = woodstar.convert(model, "torch")
    for method in _methods(model):
        np.testing.assert_array_equal(getattr(default, method)(fresh),
                                      getattr(model, method)(fresh))
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    assert assert_parity(program, model, fresh, "float64", methods=_methods(model)) == 3


def test_save_and_load(models, tmp_path, rng):
    model = models["classifier_tanh"]
    converted = woodstar.convert(model, "torch")
    loaded = woodstar.load(converted.save(tmp_path / "mlp.zip"))
    X = _rows(rng)
    for method in _methods(model):
        np.testing.assert_array_equal(getattr(loaded, method)(X), getattr(model, method)(X))


def _refit(name, models):
    import copy

    return copy.deepcopy(models[name])


def test_an_unknown_activation_is_refused(models):
    model = _refit("classifier_relu", models)
    model.activation = "softplus"
    with pytest.raises(MissingConverter, match="activation is not supported \\(got 'softplus'\\)"):
        woodstar.convert(model, "torch")


def test_an_output_activation_other_than_the_fitted_one_is_refused(models):
    model = _refit("regressor_relu", models)
    model.out_activation_ = "logistic"
    with pytest.raises(MissingConverter,
                       match="out_activation_ is not supported \\(got 'logistic'\\)"):
        woodstar.convert(model, "torch")


def test_an_unknown_regression_loss_is_refused(models):
    model = _refit("regressor_identity", models)
    model.loss = "gamma"
    with pytest.raises(MissingConverter, match="loss is not supported \\(got 'gamma'\\)"):
        woodstar.convert(model, "torch")


def test_weights_of_another_dtype_are_refused(models):
    model = _refit("regressor_identity", models)
    model.coefs_ = [c.astype(np.float16) for c in model.coefs_]
    with pytest.raises(MissingConverter, match="weights of dtype is not supported"):
        woodstar.convert(model, "torch")


def test_an_unknown_target_type_is_refused(models):
    model = _refit("classifier_tanh", models)
    model._label_binarizer.y_type_ = "multiclass-multioutput"
    with pytest.raises(MissingConverter, match="targets of type is not supported"):
        woodstar.convert(model, "torch")


@pytest.mark.parametrize("model", [MLPClassifier(), MLPRegressor()],
                         ids=["classifier", "regressor"])
def test_unfitted_models_are_refused(model):
    with pytest.raises(NotFittedError, match="not fitted"):
        woodstar.convert(model, "torch")
