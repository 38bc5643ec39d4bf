"""The kernel SVMs on the CPU route give scikit-learn's answers to the bit: libsvm's
kernel values through the same BLAS ddot, libm's exp and tanh, the decision values
summed one support vector at a time, Platt's sigmoid and the pairwise coupling."""

import warnings

import numpy as np
import pandas as pd
import pytest
from sklearn.svm import SVC, SVR, NuSVC, NuSVR, OneClassSVM

import woodstar
from woodstar.runtimes.families.svm import unavailable_reason

pytestmark = pytest.mark.skipif(unavailable_reason() is not None,
                                reason=f"libsvm arithmetic not built: {unavailable_reason()}")

KERNELS = ("linear", "poly", "rbf", "sigmoid")
METHODS = ("predict", "decision_function", "predict_proba", "predict_log_proba", "score_samples")


def _data(n_features, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(160, n_features))
    y = (X[:, 0] + X[:, 1] * X[:, -1] > 0).astype(int) + (X[:, 1] > 0.6)
    # rows at several scales: kernels near 0 and 1, exp underflowing, large dot products
    rows = rng.normal(size=(240, n_features)) * rng.choice([1e-3, 1.0, 30.0], size=(240, 1))
    rows[:5] = X[:5]  # rows equal to training rows (support vectors among them)
    return X, y, rows


def _fit(estimator, X, y):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # probability=True is deprecated in 1.9
        return estimator.fit(X, y)


def _models(kernel, X, y):
    common = dict(kernel=kernel, gamma=0.2, coef0=0.4, degree=3)
    return [
        _fit(SVC(probability=True, random_state=0, **common), X, y),
        _fit(SVC(decision_function_shape="ovr", break_ties=True, **common), X, y),
        _fit(SVC(probability=True, random_state=0, **common), X, y > 0),
        _fit(NuSVC(nu=0.1, decision_function_shape="ovo", **common), X, y),
        _fit(SVR(C=3.0, **common), X, X[:, 0] - X[:, 1]),
        _fit(NuSVR(**common), X, X[:, 0] - X[:, 1]),
        _fit(OneClassSVM(nu=0.3, **common), X, None),
    ]


def _assert_same(converted, model, rows, label):
    for method in METHODS:
        if not hasattr(model, method):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # log of a zero probability
            expected = getattr(model, method)(rows)
            got = getattr(converted, method)(rows)
        np.testing.assert_array_equal(got, expected, err_msg=f"{label}.{method}")


# 3 features: ddot's scalar tail only; 37: its vectorised blocks and a tail
@pytest.mark.parametrize("n_features", [3, 37])
@pytest.mark.parametrize("kernel", KERNELS)
def test_every_method_equals_libsvm_bit_for_bit(kernel, n_features):
    X, y, rows = _data(n_features, seed=n_features)
    for model in _models(kernel, X, y):
        converted = woodstar.convert(model, "torch")
        label = f"{type(model).__name__}({kernel}, {n_features} features)"
        _assert_same(converted, model, rows, label)
        _assert_same(converted, model, rows[:1], label + " one row")


def test_float32_rows_and_data_frames_are_widened_as_scikit_learn_widens_them():
    X, y, rows = _data(6, seed=3)
    model = _fit(SVC(kernel="rbf", probability=True, random_state=0), X, y)
    converted = woodstar.convert(model, "torch")
    _assert_same(converted, model, rows.astype(np.float32), "float32 rows")
    _assert_same(converted, model, np.asfortranarray(rows), "Fortran-ordered rows")
    frame_model = _fit(SVR(kernel="poly"), pd.DataFrame(X, columns=[f"c{i}" for i in range(6)]),
                       X[:, 0])
    frame = pd.DataFrame(rows, columns=[f"c{i}" for i in range(6)])
    np.testing.assert_array_equal(woodstar.convert(frame_model, "torch").predict(frame),
                                  frame_model.predict(frame))


def test_answers_do_not_depend_on_the_thread_count():
    X, y, rows = _data(5, seed=4)
    model = _fit(SVC(kernel="rbf"), X, y)
    big = np.repeat(rows, 40, axis=0)
    one = woodstar.convert(model, "torch", extra_config={"n_threads": 1})
    two = woodstar.convert(model, "torch", extra_config={"n_threads": 2})
    np.testing.assert_array_equal(one.decision_function(big), model.decision_function(big))
    np.testing.assert_array_equal(two.decision_function(big), model.decision_function(big))


def test_saved_model_keeps_the_in_order_sums(tmp_path):
    X, y, rows = _data(4, seed=5)
    model = _fit(NuSVC(nu=0.1, kernel="sigmoid", gamma=0.1), X, y)
    path = woodstar.convert(model, "torch").save(tmp_path / "svm.zip")
    loaded = woodstar.load(path)
    np.testing.assert_array_equal(loaded.decision_function(rows), model.decision_function(rows))
