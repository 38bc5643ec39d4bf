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
from woodstar.runtimes.linear_entry import LinearNativeEntry

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
    "robust_ridge": lambda: make_pipeline(RobustScaler(), Ridge()),
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
    if name in ("minmax_ridge", "maxabs_linear", "robust_ridge"):
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
    assert isinstance(converted._small_batch[precision], LinearNativeEntry), \
        "the native entry was not taken"


def test_several_outputs_take_one_row_value_by_value_and_256_scores_with_simd(rows_form):
    model = _fitted("robust_logistic_3", np.float32)
    converted = woodstar.convert(model, "torch")
    converted.predict(_rows(np.float32, 1, 1))
    entry = converted._small_batch["float32"]
    assert isinstance(entry, LinearNativeEntry)
    rows = 256 // 3 if rows_form else 1  # the C call's 256 scores
    assert entry.stack_rows == entry.max_rows == rows
    assert entry(_rows(np.float32, 1, rows)) is not None  # NumPy's gemm from 2 rows
    assert entry(_rows(np.float32, 1, rows + 1)) is None
    batch = _rows(np.float32, 2, rows + 1)
    np.testing.assert_array_equal(converted.predict_proba(batch), model.predict_proba(batch))


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
        max_rows = stack_rows = 3

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



def test_the_entry_takes_every_batch_the_numpy_route_runs_whole_where_it_steps_vectors():
    """With AVX2 or AVX-512: up to 255 rows in the C call's buffers, more in NumPy's, up
    to the rows of one batch; value by value: 64 rows (past that, NumPy's route is
    faster). Larger batches take the full path."""
    model = _fitted("scaled_logistic", np.float32)
    converted = woodstar.convert(model, "torch", extra_config={"batch_size": 700})
    converted.predict(_rows(np.float32, 10, 1))
    entry = converted._small_batch["float32"]
    simd = entry_module.simd_rows() is not None
    assert entry.stack_rows == (255 if simd else 64)
    assert entry.max_rows == (700 if simd else 64)
    assert entry(_rows(np.float32, 10, entry.max_rows)) is not None
    assert entry(_rows(np.float32, 10, entry.max_rows + 1)) is None
    big = _rows(np.float32, 11, 1500)  # three batches on the full path
    np.testing.assert_array_equal(converted.predict_proba(big), model.predict_proba(big))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", sorted(MODELS))
def test_large_calls_are_scikit_learns_to_the_bit(name, dtype, rows_form):
    """Batches past the C call's own buffers (NumPy's, and BLAS's threads from a few
    hundred rows), of sizes that end in every lane of a vector; with several outputs,
    the sizes the entry takes (NumPy's gemm; RidgeClassifier's Fortran-ordered
    coefficients included) and the full path past them."""
    model = _fitted(name, dtype)
    converted = woodstar.convert(model, "torch")
    methods = [m for m in METHODS if hasattr(model, m)]
    for n in (2, 17, 85, 86, 256, 1001, 2053, 4099, 10_000):
        batch = _rows(dtype, seed=n, n=n)
        for method in methods:
            np.testing.assert_array_equal(getattr(converted, method)(batch),
                                          getattr(model, method)(batch), err_msg=method)
    entry = converted._small_batch[np.dtype(dtype).name]
    assert isinstance(entry, LinearNativeEntry)
    several = entry.n_outputs > 1
    assert (entry(_rows(dtype, 1, 4099)) is not None) == (rows_form is not None and not several)
    assert (entry(_rows(dtype, 1, 17)) is not None) == (rows_form is not None or not several)
    if name == "robust_ridge" and dtype == np.float32:  # operands that are not float32 values
        assert entry._spec.steps_float == 0


@pytest.mark.parametrize("name", ("scaled_logistic", "minmax_ridge", "maxabs_linear"))
def test_float32_rows_stepped_in_float32_or_in_double_give_the_same_bits(name, rows_form):
    """The SIMD forms step float32 rows in float32 where every operand is a float32
    value; stepping in double and rounding, as the other forms do, gives the same.
    (RobustScaler's float64 operands on float32 rows step in double: robust_ridge.)"""
    if rows_form is None:
        pytest.skip("the scalar form always steps in double")
    model = _fitted(name, np.float32)
    converted = woodstar.convert(model, "torch")
    converted.predict(_rows(np.float32, 1, 1))
    entry = converted._small_batch["float32"]
    assert entry._spec.steps_float == 1
    for n in (1, 7, 255, 256, 2053) if entry.max_rows > 1 else (1,):
        X = _rows(np.float32, n, n)
        X[::5] *= np.float32(1e-30)  # subnormal results
        in_float = entry(X)
        entry._spec.steps_float = 0
        try:
            in_double = entry(X)
        finally:
            entry._spec.steps_float = 1
        for a, b in zip(in_float, in_double):
            np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("name", ["scaled_logistic", "logistic"])
def test_large_calls_refuse_what_small_ones_refuse(name, dtype, rows_form):
    """A NaN or an infinity anywhere in a large call, the run's last value included,
    leaves the call to the full path and its error: where the rows are stepped, and
    where they are only checked (a bare model's rows, of its coefficients' dtype)."""
    model = _fitted(name, dtype)
    converted = woodstar.convert(model, "torch")
    converted.predict(_rows(dtype, 1, 1))
    entry = converted._small_batch[np.dtype(dtype).name]
    assert entry.rows_in_place == (name == "logistic")  # its coefficients keep the rows dtype
    for n in (1001, 2053):
        X = _rows(dtype, 12, n)
        assert (entry(X) is not None) == (rows_form is not None)
        size = X.size  # the rows are read as one run: every lane of its first vectors and
        places = [*range(16), *range(size // 2, size // 2 + 16), *range(size - 16, size),
                  *range(4090, 4100)]  # and either side of the check's blocks of 4096
        for bad in (np.nan, np.inf, -np.inf):  # of its middle and last ones
            for place in places:
                Y = X.copy()
                Y.flat[place] = bad
                assert entry(Y) is None, (bad, place)
            with pytest.raises(ValueError, match="NaN|infinity"):
                converted.predict_proba(Y)


@pytest.mark.skipif(not __import__("os").path.exists("/proc/cpuinfo"), reason="reads /proc/cpuinfo")
def test_rows_are_prepared_with_the_widest_simd_the_cpu_has():
    with open("/proc/cpuinfo") as info:
        flags = next((line.split(":", 1)[1].split() for line in info if line.startswith("flags")), [])
    assert entry_module.simd_rows() == ("avx512" if "avx512f" in flags
                                        else "avx2" if "avx2" in flags else None)
