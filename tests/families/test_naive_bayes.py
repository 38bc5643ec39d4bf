"""scikit-learn's naive Bayes classifiers: GaussianNB, MultinomialNB, ComplementNB,
BernoulliNB (``binarize``) and CategoricalNB.

The default route (the ``torch`` backend on the CPU) runs scikit-learn's own NumPy
expressions of ``_joint_log_likelihood`` and ``predict_log_proba`` (``jll -
logsumexp(jll)``, its own ``_logsumexp``), so every method equals scikit-learn bit for
bit, dtype included. The Torch program and the other backends sum over features and
classes in their own order: ``predict_log_proba`` subtracts two numbers of the size of
``jll`` (far from the training data, thousands), so the bound there is 1e-12 relative
to ``|jll|``, not to the (small) log-probability."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn import naive_bayes as nb  # noqa: E402
from sklearn.compose import make_column_transformer  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter, NotFittedError  # noqa: E402
from woodstar.frontends import find_frontend  # noqa: E402

from .._parity import assert_parity, compare_outputs  # noqa: E402

COVERS_OPS = ("gaussian_nb", "discrete_nb", "categorical_nb", "nb_posterior")
COVERS_MODELS = ("BernoulliNB", "CategoricalNB", "ComplementNB", "GaussianNB", "MultinomialNB")

N_FEATURES = 6
METHODS = ("predict", "predict_proba", "predict_log_proba")
N_CATEGORIES = (3, 5, 2, 4, 3, 6)

# name -> (factory, data kind, target kind, fit on float32)
CASES = {
    "gaussian": (lambda: nb.GaussianNB(), "normal", "multiclass", False),
    "gaussian_float32": (lambda: nb.GaussianNB(), "normal", "multiclass", True),
    "gaussian_nine_classes": (lambda: nb.GaussianNB(var_smoothing=1e-3), "normal", "nine", False),
    "gaussian_strings": (lambda: nb.GaussianNB(priors=[0.3, 0.7]), "normal", "strings", False),
    "multinomial": (lambda: nb.MultinomialNB(alpha=0.5), "counts", "multiclass", False),
    "multinomial_nine_classes": (lambda: nb.MultinomialNB(), "counts", "nine", False),
    "complement": (lambda: nb.ComplementNB(), "counts", "multiclass", False),
    "complement_norm": (lambda: nb.ComplementNB(norm=True), "counts", "strings", False),
    "complement_one_class": (lambda: nb.ComplementNB(), "counts", "one", False),
    "bernoulli": (lambda: nb.BernoulliNB(), "normal", "multiclass", False),
    "bernoulli_threshold": (lambda: nb.BernoulliNB(binarize=0.3), "normal", "strings", False),
    "bernoulli_float32_threshold": (lambda: nb.BernoulliNB(binarize=np.float32(0.3)), "normal",
                                    "multiclass", False),
    "bernoulli_none": (lambda: nb.BernoulliNB(binarize=None, alpha=0.1), "binary", "multiclass",
                       False),
    "categorical": (lambda: nb.CategoricalNB(), "categories", "multiclass", False),
    "categorical_min_categories": (lambda: nb.CategoricalNB(min_categories=7, alpha=0.3),
                                   "categories", "strings", False),
}


def _data(kind, rng, n):
    X = rng.normal(size=(n, N_FEATURES)) * np.array([1.0, 2.0, 0.5, 1.0, 3.0, 1.0])
    if kind == "counts":
        return np.floor(np.abs(X) * 3)
    if kind == "binary":
        return (X > 0).astype(np.float64)
    if kind == "categories":
        return np.floor(rng.random((n, N_FEATURES)) * np.array(N_CATEGORIES))
    return X


def _targets(X, kind):
    signal = X[:, 0] + 0.5 * X[:, 1] - 0.3 * X[:, 4]
    if kind == "nine":
        return np.digitize(signal, np.quantile(signal, np.linspace(0.1, 0.9, 8)))
    if kind == "strings":
        return np.where(signal > np.median(signal), "high", "low")
    if kind == "one":
        return np.zeros(len(X), dtype=int)
    return np.digitize(signal, np.quantile(signal, [0.33, 0.66]))


@pytest.fixture(scope="module")
def models():
    rng = np.random.default_rng(0)
    fitted = {}
    for name, (factory, data, target, on_float32) in CASES.items():
        X = _data(data, rng, 200)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            fitted[name] = factory().fit(X.astype(np.float32) if on_float32 else X,
                                         _targets(X, target))
    return fitted


def _rows(name, rng, n=100):
    """Fresh rows of the model's kind, around and far beyond the training range."""
    data = CASES[name][1]
    if data == "categories":  # indices read as scikit-learn reads them: int(x)
        X = np.floor(rng.random((n, N_FEATURES)) * np.array(N_CATEGORIES))
        X[::3] += rng.random((len(X[::3]), N_FEATURES)) * 0.999  # truncated toward zero
        X[1::7, 0] = -0.5  # int(-0.5) == 0
        return X
    X = _data(data, rng, n) * rng.choice((0.5, 1, 10, 1e3), size=(n, 1))
    X[rng.random(X.shape) < 0.05] = 0.0
    if name.startswith("bernoulli"):  # values on the threshold, both roundings of 0.3
        X[rng.random(X.shape) < 0.1] = 0.3
        X[rng.random(X.shape) < 0.1] = float(np.float32(0.3))
    return X


def _special_rows():
    rows = np.zeros((4, N_FEATURES))
    rows[0, 1], rows[1, 2], rows[2, 0], rows[3, 3] = np.nan, np.inf, -np.inf, 1e39
    return rows


@pytest.mark.parametrize("name", list(CASES))
def test_reference_matches_sklearn_bit_for_bit(name, models, rng):
    """Frontend check, no torch: the IR's NumPy reference is scikit-learn's joint
    log-likelihood, probabilities and log-probabilities."""
    model = models[name]
    model_ir = find_frontend(model)(model, None)
    k = len(model.classes_)
    for dtype in (np.float64, np.float32):
        X = _rows(name, rng).astype(dtype)
        raw, transformed = model_ir.graph.reference(X)
        for got, expected in ((raw, model.predict_joint_log_proba(X)),
                              (transformed[:, :k], model.predict_proba(X)),
                              (transformed[:, k:], model.predict_log_proba(X))):
            assert got.dtype == expected.dtype
            np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", list(CASES))
def test_default_route_is_sklearn_bit_for_bit(name, models, rng):
    model = models[name]
    converted = woodstar.convert(model, "torch")
    assert converted.route == "numpy"
    X = _rows(name, rng)
    for X_in in (X, X.astype(np.float32), np.trunc(X).astype(np.int64), X[:1]):
        for method in METHODS:
            expected = getattr(model, method)(X_in)
            got = getattr(converted, method)(X_in)
            assert got.dtype == expected.dtype, method
            np.testing.assert_array_equal(got, expected, err_msg=method)
    np.testing.assert_array_equal(converted.classes_, model.classes_)
    for row in _special_rows():  # NaN, infinity, float32 overflow: refused by both
        with np.errstate(over="ignore"):
            assert_parity(converted, model, row.reshape(1, -1), methods=METHODS)
            assert_parity(converted, model, row.reshape(1, -1).astype(np.float32), methods=METHODS)


def _compare_program(converted, model, X, tolerance):
    """Labels exactly; probabilities and log-probabilities within ``tolerance``
    relative to the joint log-likelihood's size (see the module's docstring)."""
    jll = (model[-1].predict_joint_log_proba(model[:-1].transform(X)) if hasattr(model, "steps")
           else model.predict_joint_log_proba(X))
    scale = max(1.0, float(np.abs(jll[np.isfinite(jll)]).max()))
    compare_outputs(converted.predict(X), model.predict(X), "float64", "predict")
    for method in METHODS[1:]:
        compare_outputs(getattr(converted, method)(X), getattr(model, method)(X), "float64",
                        method, tolerance=tolerance * scale)


@pytest.mark.parametrize("name", list(CASES))
def test_program_and_backends_match_sklearn(name, models, backend, rng):
    model = models[name]
    # A GaussianNB fitted on float32 computes in float32 for float32 input.
    tolerance = 1e-6 if CASES[name][3] else 1e-12
    configs = [{"cpu_route": "program"}] if backend == "torch" else [{}]
    X = _rows(name, rng)
    for config in configs:
        converted = woodstar.convert(model, backend, extra_config=config)
        for X_in in (X, X.astype(np.float32), X[:1]):
            _compare_program(converted, model, X_in, tolerance)
        for row in _special_rows()[:2]:
            assert_parity(converted, model, row.reshape(1, -1), methods=METHODS)


@pytest.mark.parametrize("name", ["categorical", "categorical_min_categories"])
@pytest.mark.parametrize("config", [{}, {"cpu_route": "program"}], ids=["numpy", "program"])
def test_categorical_indices_outside_the_fitted_ones_are_refused(name, config, models):
    """scikit-learn reads int(x): a negative index is its ValueError, one past the
    fitted categories its IndexError; woodstar refuses both with a ValueError."""
    model = models[name]
    converted = woodstar.convert(model, "torch", extra_config=config)
    n_categories = model.feature_log_prob_[1].shape[1]
    for value, error in ((-1.0, ValueError), (-3.5, ValueError), (n_categories, IndexError),
                         (1e12, (ValueError, IndexError))):
        X = np.zeros((3, N_FEATURES))
        X[1, 1] = value
        for method in METHODS:
            with pytest.raises(error):
                getattr(model, method)(X)
            with pytest.raises(ValueError, match="category index outside the categories"):
                getattr(converted, method)(X)
    X = np.zeros((2, N_FEATURES))
    X[0, 1] = n_categories - 0.001  # int(x) is the last category
    np.testing.assert_allclose(converted.predict_proba(X), model.predict_proba(X), rtol=1e-12)


def test_bernoulli_threshold_is_compared_in_the_inputs_dtype_like_sklearn(models):
    """A Python threshold is rounded to float32 for float32 input (NumPy's rule), a
    NumPy float64 one is not: float32(0.3) is above 0.3 but not above float32(0.3)."""
    X = np.full((2, N_FEATURES), np.float32(0.3), dtype=np.float32)
    for name in ("bernoulli_threshold", "bernoulli_float32_threshold"):
        model = models[name]
        default = woodstar.convert(model, "torch")
        program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
        for X_in in (X, X.astype(np.float64)):
            expected = model.predict_proba(X_in)
            np.testing.assert_array_equal(default.predict_proba(X_in), expected)
            np.testing.assert_allclose(program.predict_proba(X_in), expected,
                                       rtol=1e-12, atol=1e-12)
    # the two models see the float32 row on different sides of their thresholds
    assert not np.array_equal(models["bernoulli_threshold"].predict_proba(X),
                              models["bernoulli_threshold"].predict_proba(X.astype(np.float64)))


def test_inside_a_pipeline_after_a_scaler(rng):
    X = _data("normal", rng, 200) + 3.0
    y = _targets(X, "multiclass")
    model = make_pipeline(StandardScaler(), nb.GaussianNB()).fit(X, y)
    fresh = _data("normal", rng, 100) * 10 + 3.0
    default = woodstar.convert(model, "torch")
    for method in METHODS:
        np.testing.assert_array_equal(getattr(default, method)(fresh),
                                      getattr(model, method)(fresh))
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    _compare_program(program, model, fresh, 1e-12)
    with pytest.raises(ValueError, match="infinity"):
        default.predict(np.full((1, N_FEATURES), np.inf))


def test_after_encoders_sparse_and_ordinal(rng):
    """MultinomialNB after a one-hot ColumnTransformer reads a sparse matrix (the CPU
    route multiplies it as scikit-learn does); CategoricalNB after an OrdinalEncoder
    reads its codes."""
    X = rng.integers(0, 12, size=(200, 3)).astype(np.float64)
    y = _targets(np.c_[X, X], "multiclass")
    onehot = make_pipeline(make_column_transformer((OneHotEncoder(handle_unknown="ignore"), [0, 1]),
                                                   remainder="passthrough"),
                           nb.MultinomialNB()).fit(X, y)
    ordinal = make_pipeline(OrdinalEncoder(), nb.CategoricalNB()).fit(X, y)
    assert onehot[0].sparse_output_
    fresh = rng.integers(0, 12, size=(60, 3)).astype(np.float64)
    for model in (onehot, ordinal):
        default = woodstar.convert(model, "torch")
        for method in METHODS:
            np.testing.assert_array_equal(getattr(default, method)(fresh),
                                          getattr(model, method)(fresh))
        program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
        _compare_program(program, model, fresh, 1e-12)


def test_save_and_load(models, tmp_path, rng):
    for name in ("bernoulli_float32_threshold", "categorical"):
        model = models[name]
        converted = woodstar.convert(model, "torch")
        loaded = woodstar.load(converted.save(tmp_path / f"{name}.zip"))
        X = _rows(name, rng).astype(np.float32)
        for method in METHODS:
            np.testing.assert_array_equal(getattr(loaded, method)(X), getattr(model, method)(X))


def test_an_integer_numpy_threshold_is_refused(rng):
    X = _data("normal", rng, 50)
    model = nb.BernoulliNB(binarize=np.int64(1)).fit(X, _targets(X, "multiclass"))
    with pytest.raises(MissingConverter,
                       match="binarize is not supported \\(got np.int64\\(1\\)\\)"):
        woodstar.convert(model, "torch")


def test_parameters_of_another_dtype_are_refused(models):
    import copy

    model = copy.deepcopy(models["multinomial"])
    model.feature_log_prob_ = model.feature_log_prob_.astype(np.float16)
    with pytest.raises(MissingConverter, match="feature_log_prob_ of dtype is not supported "
                                               "\\(got 'float16'\\)"):
        woodstar.convert(model, "torch")


@pytest.mark.parametrize("model", [nb.GaussianNB(), nb.MultinomialNB(), nb.ComplementNB(),
                                   nb.BernoulliNB(), nb.CategoricalNB()],
                         ids=lambda m: type(m).__name__)
def test_unfitted_models_are_refused(model):
    with pytest.raises(NotFittedError, match="not fitted"):
        woodstar.convert(model, "torch")
