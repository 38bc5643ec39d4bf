"""The linear models' native small-call entry (woodstar/runtimes/linear_entry.py) gives
scikit-learn's answers to the bit, is really taken for the calls it is meant for, and
leaves every other call, and every refused input, to the full path."""

import numpy as np
import pytest
from sklearn.linear_model import (LinearRegression, LogisticRegression, Ridge, RidgeClassifier,
                                  SGDClassifier)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, RobustScaler, StandardScaler
from sklearn.svm import LinearSVC

import woodstar
from woodstar.runtimes import linear_entry as entry_module
from woodstar.runtimes.linear_entry import LinearSmallBatchEntry

N_FEATURES = 13


def _data(dtype, seed=0, n=400):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, N_FEATURES)) * rng.uniform(0.01, 300, N_FEATURES) \
        + rng.uniform(-50, 50, N_FEATURES)
    y = (X[:, 0] / X[:, 0].std() + rng.normal(size=n) > 0).astype(int) if n > 1 else None
    y3 = np.digitize(X[:, 1] / X[:, 1].std() + rng.normal(size=n), [-0.5, 0.5]) if n > 1 \
        else None
    return X.astype(dtype), y, y3


def _rows(dtype, seed, n):
    """Fresh rows on the training scale, some far outside it, some of them exactly 0."""
    X, _, _ = _data(np.float64, seed=seed, n=n)
    X[::7] *= 1e3
    X[::11, 3] = 0.0
    return X.astype(dtype)


MODELS = {
    "logistic": lambda: LogisticRegression(max_iter=300),
    "scaled_logistic": lambda: make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)),
    "robust_logistic_3": lambda: make_pipeline(RobustScaler(), LogisticRegression(max_iter=300)),
    "minmax_ridge": lambda: make_pipeline(MinMaxScaler(), Ridge()),
    "maxabs_linear": lambda: make_pipeline(MaxAbsScaler(), LinearRegression()),
    "ridge_two_targets": lambda: Ridge(alpha=0.5),
    "scaled_svc": lambda: make_pipeline(StandardScaler(), LinearSVC()),
    "sgd_3": lambda: make_pipeline(StandardScaler(), SGDClassifier(random_state=0)),
    "ridge_classifier_3": lambda: RidgeClassifier(),
}
METHODS = ("predict", "predict_proba", "decision_function")
WIDEST = entry_module.simd_rows()
FORMS = {"avx512": ["avx512", "avx2", None], "avx2": ["avx2", None], None: [None]}[WIDEST]


@pytest.fixture(params=FORMS, ids=lambda form: form or "scalar")
def rows_form(request):
    """Each way this CPU prepares rows, the widest restored after the test."""
    assert entry_module.limit_simd_rows(request.param) == request.param
    yield request.param
    entry_module.limit_simd_rows("avx512")


def _fitted(name, dtype):
    X, y, y3 = _data(dtype)
    model = MODELS[name]()
    if name == "ridge_two_targets":
        return model.fit(X, np.c_[X[:, 0] * 0.5, X[:, 2]].astype(np.float64))
    target = y3 if name.endswith("_3") else y
    if name in ("minmax_ridge", "maxabs_linear"):
        target = X[:, 0] * 0.3 + X[:, 5]
    return model.fit(X, target)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_small_calls_are_scikit_learns_to_the_bit(name, dtype, rows_form):
    model = _fitted(name, dtype)
    converted = woodstar.convert(model, "torch")
    methods = [m for m in METHODS if hasattr(model, m)]
    rows = _rows(dtype, seed=5, n=300)
    for i in range(len(rows)):  # one-row calls, each on its own
        row = rows[i:i + 1]
        for method in methods:
            np.testing.assert_array_equal(getattr(converted, method)(row),
                                          getattr(model, method)(row), err_msg=method)
    for n in (2, 3, 17, 255):  # small batches
        batch = _rows(dtype, seed=n, n=n)
        for method in methods:
            np.testing.assert_array_equal(getattr(converted, method)(batch),
                                          getattr(model, method)(batch), err_msg=method)
    precision = np.dtype(dtype).name
    assert isinstance(converted._small_batch[precision], LinearSmallBatchEntry), \
        "the native entry was not taken"


def test_the_entry_takes_one_row_of_several_outputs_and_leaves_batches_of_them():
    model = _fitted("robust_logistic_3", np.float32)
    converted = woodstar.convert(model, "torch")
    converted.predict(_rows(np.float32, 1, 1))
    entry = converted._small_batch["float32"]
    assert isinstance(entry, LinearSmallBatchEntry) and entry.max_rows == 1
    assert entry(_rows(np.float32, 1, 1)) is not None
    assert entry(_rows(np.float32, 1, 2)) is None  # a matrix product: NumPy's gemm path


def test_refused_input_reaches_the_full_path_and_its_errors():
    model = _fitted("logistic", np.float64)
    converted = woodstar.convert(model, "torch")
    row = _rows(np.float64, 2, 1)
    converted.predict(row)
    entry = converted._small_batch["float64"]
    for bad in (np.nan, np.inf):
        X = row.copy()
        X[0, 4] = bad
        assert entry(X) is None
        with pytest.raises(ValueError, match="NaN|infinity"):
            converted.predict_proba(X)
    assert entry(row.astype(np.float32)) is None  # another dtype: converted on the full path
    assert entry(np.asfortranarray(_rows(np.float64, 2, 3))) is None
    assert entry(_rows(np.float64, 2, 1)[:, :-1]) is None
    fortran = np.asfortranarray(_rows(np.float64, 3, 5))
    np.testing.assert_array_equal(converted.predict_proba(fortran), model.predict_proba(fortran))


def test_a_scaler_passing_nan_to_a_model_that_refuses_it_keeps_the_error():
    model = _fitted("scaled_logistic", np.float32)
    converted = woodstar.convert(model, "torch")
    X = _rows(np.float32, 4, 1)
    converted.predict(X)
    X[0, 2] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        model.predict(X)
    with pytest.raises(ValueError, match="NaN"):
        converted.predict(X)


def test_a_step_that_overflows_runs_on_the_full_path_with_numpys_warning():
    X, y, _ = _data(np.float32)
    X[:, 0] = X[:, 0] / X[:, 0].std() * np.float32(1e-3)  # a scale far below 1
    model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=300)).fit(X, y)
    converted = woodstar.convert(model, "torch")
    row = _rows(np.float32, 6, 1)
    converted.predict(row)
    entry = converted._small_batch["float32"]
    row[0, 0] = np.float32(3e38)  # finite, but over float32's range once scaled
    assert entry(row) is None
    with pytest.raises(ValueError), pytest.warns(RuntimeWarning, match="overflow"):
        model.predict(row)
    with pytest.raises(ValueError, match="infinity"), pytest.warns(RuntimeWarning,
                                                                   match="overflow"):
        converted.predict(row)


def test_without_numpys_blas_the_numpy_route_answers(monkeypatch):
    monkeypatch.setattr(entry_module, "numpy_blas", lambda: None)
    model = _fitted("scaled_logistic", np.float64)
    converted = woodstar.convert(model, "torch")
    row = _rows(np.float64, 7, 1)
    np.testing.assert_array_equal(converted.predict_proba(row), model.predict_proba(row))
    assert converted._small_batch["float64"] is False


def test_an_entry_that_disagrees_with_the_numpy_route_is_not_used():
    class Off:
        max_rows = 3

        def __init__(self, real):
            self.real = real

        def __call__(self, X):
            raw, transformed = self.real(X)
            return np.nextafter(raw, np.inf), transformed

    model = _fitted("scaled_logistic", np.float64)
    converted = woodstar.convert(model, "torch")
    converted.predict(_rows(np.float64, 8, 1))
    real = converted._small_batch["float64"]
    graph = converted._cpu_runner("numpy", "float64")
    assert entry_module._agrees(real, graph, N_FEATURES, np.float64)
    assert not entry_module._agrees(Off(real), graph, N_FEATURES, np.float64)


def test_the_entry_can_be_turned_off_for_timing(monkeypatch):
    monkeypatch.setenv("WOODSTAR_LINEAR_ENTRY", "0")
    model = _fitted("logistic", np.float32)
    converted = woodstar.convert(model, "torch")
    row = _rows(np.float32, 9, 1)
    np.testing.assert_array_equal(converted.predict_proba(row), model.predict_proba(row))
    assert converted._small_batch["float32"] is False



def test_the_entry_takes_batches_up_to_its_cpus_ceiling():
    """255 rows where it prepares rows with AVX2 or AVX-512, 64 where it goes value by
    value (past those, NumPy's route is faster); larger batches take the full path."""
    model = _fitted("scaled_logistic", np.float32)
    converted = woodstar.convert(model, "torch")
    converted.predict(_rows(np.float32, 10, 1))
    entry = converted._small_batch["float32"]
    ceiling = 255 if entry_module.simd_rows() else 64
    assert entry.max_rows == ceiling
    assert entry(_rows(np.float32, 10, ceiling)) is not None
    assert entry(_rows(np.float32, 10, ceiling + 1)) is None
    big = _rows(np.float32, 11, ceiling + 1)
    np.testing.assert_array_equal(converted.predict_proba(big), model.predict_proba(big))


@pytest.mark.skipif(not __import__("os").path.exists("/proc/cpuinfo"), reason="reads /proc/cpuinfo")
def test_rows_are_prepared_with_the_widest_simd_the_cpu_has():
    with open("/proc/cpuinfo") as info:
        flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    assert entry_module.simd_rows() == ("avx512" if "avx512f" in flags
                                        else "avx2" if "avx2" in flags else None)
