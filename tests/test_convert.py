"""The public path: convert() arguments, input checking at the container's edge."""

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn.ensemble import IsolationForest, RandomForestClassifier, RandomForestRegressor  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import ConstantError, MissingBackend, MissingConverter  # noqa: E402


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] > 0).astype(int)
    return RandomForestClassifier(8, max_depth=5, random_state=0).fit(X, y), X


def test_unknown_backend_lists_the_known_ones(forest):
    with pytest.raises(MissingBackend, match=r"Unknown backend 'tensorflow'; available backends: .*pytorch.*torch"):
        woodstar.convert(forest[0], "tensorflow")


@pytest.mark.parametrize("name", ["torch", "pytorch", "PyTorch"])
def test_torch_backend_names(forest, name):
    model, X = forest
    converted = woodstar.convert(model, name)
    np.testing.assert_array_equal(converted.predict(X), model.predict(X))


def test_unknown_extra_config_key_is_an_error(forest):
    with pytest.raises(ConstantError, match="Unknown extra_config key"):
        woodstar.convert(forest[0], "torch", extra_config={"tree_impl": "gemm"})


def test_container_exposes_only_the_estimators_methods(forest):
    model, X = forest
    converted = woodstar.convert(model, "torch")
    assert hasattr(converted, "predict_proba") and not hasattr(converted, "decision_function")
    assert converted.n_features_in_ == 5
    np.testing.assert_array_equal(converted.classes_, model.classes_)
    regressor = RandomForestRegressor(3, random_state=0).fit(X, X[:, 0])
    converted = woodstar.convert(regressor, "torch")
    assert not hasattr(converted, "predict_proba") and not hasattr(converted, "classes_")
    anomaly = woodstar.convert(IsolationForest(n_estimators=5, random_state=0).fit(X), "torch")
    assert {"predict", "decision_function", "score_samples"} <= set(dir(anomaly))


def test_container_false_returns_the_backend_model(forest):
    module = woodstar.convert(forest[0], "torch", extra_config={"container": False})
    torch = pytest.importorskip("torch")
    assert isinstance(module, torch.nn.Module)


@pytest.mark.parametrize("make_input", [
    lambda X: X.astype(np.float32),
    lambda X: X.astype(np.float16),
    lambda X: np.asfortranarray(X),
    lambda X: X.astype(np.float32)[:, ::1],
    lambda X: X.tolist(),
    lambda X: (X * 100).astype(np.int64),
    lambda X: __import__("torch").from_numpy(X),
], ids=["float32", "float16", "fortran", "view", "list", "int64", "torch"])
def test_input_kinds(forest, make_input):
    model, X = forest
    converted = woodstar.convert(model, "torch")
    given = make_input(X)
    expected_input = np.asarray(given.numpy() if hasattr(given, "numpy") else given, dtype=np.float64)
    np.testing.assert_array_equal(converted.predict(given), model.predict(expected_input))


@pytest.mark.parametrize("bad, message", [
    (np.zeros(5), r"expects a 2-D array \(n_samples, 5\); got a 1-D array of shape \(5,\) "
                  r"\(reshape a single sample"),
    (np.zeros((3, 4)), r"expects 5 features; got 4"),
    (np.zeros((2, 3, 5)), r"got a 3-D array"),
    (np.array([["a"] * 5]), r"takes numeric features; got dtype <U1"),
    (np.array([[1, 2, "x", 4, 5]], dtype=object), r"takes numeric features; the input has non-numeric"),
    (np.zeros((2, 5), dtype=complex), r"takes numeric features; got dtype complex128"),
])
def test_bad_input_is_named(forest, bad, message):
    converted = woodstar.convert(forest[0], "torch")
    with pytest.raises(ValueError, match=message):
        converted.predict(bad)


def test_dataframe_with_text_column_is_named(forest):
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame(np.zeros((2, 5)), columns=list("abcde"))
    frame["c"] = ["x", "y"]
    converted = woodstar.convert(forest[0], "torch")
    with pytest.raises(ValueError, match=r"non-numeric column\(s\): 'c'"):
        converted.predict(frame)


def test_test_input_with_wrong_width_fails_at_convert(forest):
    with pytest.raises(ValueError, match="expects 5 features; got 3"):
        woodstar.convert(forest[0], "torch", test_input=np.zeros((2, 3)))


def test_empty_batch_gives_empty_results(forest):
    model, _ = forest
    converted = woodstar.convert(model, "torch")
    assert converted.predict(np.zeros((0, 5))).shape == (0,)
    assert converted.predict_proba(np.zeros((0, 5))).shape == (0, 2)


def test_nan_and_inf_rejected_where_sklearn_rejects_them():
    from sklearn.ensemble import GradientBoostingRegressor

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 3))
    model = GradientBoostingRegressor(n_estimators=3).fit(X, X[:, 0])
    converted = woodstar.convert(model, "torch")
    with pytest.raises(ValueError, match="Input contains NaN; GradientBoostingRegressor does not accept"):
        converted.predict(np.array([[np.nan, 0, 0]]))
    with pytest.raises(ValueError, match="infinity or a value too large for float32"):
        converted.predict(np.array([[1e300, 0, 0]]))


@pytest.mark.parametrize("rows", [1, 42, 43, 200])  # 126 and 129 values: either side of
def test_nan_and_inf_rejected_on_the_python_path_at_every_size(rows):  # the Python check
    """The exporting backends check rows in Python (small calls, on Python floats) or
    with NumPy: the same errors either way, wherever the bad value sits."""
    from sklearn.ensemble import GradientBoostingRegressor

    from woodstar._input import PYTHON_CHECK_MAX_VALUES

    assert 42 * 3 <= PYTHON_CHECK_MAX_VALUES < 43 * 3
    rng = np.random.default_rng(3)
    X = rng.normal(size=(200, 3))
    model = GradientBoostingRegressor(n_estimators=3).fit(X, X[:, 0])
    converted = woodstar.convert(model, "torch.jit")
    clean = rng.normal(size=(rows, 3))
    np.testing.assert_array_equal(converted.predict(clean), model.predict(clean))
    for where in (0, -1):
        bad = clean.copy()
        bad.flat[where] = np.nan
        with pytest.raises(ValueError, match="Input contains NaN; GradientBoostingRegressor"):
            converted.predict(bad)
        bad.flat[where] = 1e300
        with pytest.raises(ValueError, match="infinity or a value too large for float32"):
            converted.predict(bad)
        bad.flat[where] = -np.inf
        with pytest.raises(ValueError, match="infinity or a value too large for float32"):
            converted.predict(np.asfortranarray(bad))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_all_finite_agrees_with_numpy(dtype):
    from woodstar._input import PYTHON_CHECK_MAX_VALUES, all_finite

    rng = np.random.default_rng(4)
    for size in (0, 1, PYTHON_CHECK_MAX_VALUES, PYTHON_CHECK_MAX_VALUES + 1, 1000):
        values = rng.normal(size=(size, 1)).astype(dtype)
        assert all_finite(values)
        for bad in (np.nan, np.inf, -np.inf):
            for where in {0, size // 2, size - 1} if size else ():
                spoiled = values.copy()
                spoiled.flat[where] = bad
                assert not all_finite(spoiled) and not all_finite(np.asfortranarray(spoiled))


def test_batches_give_the_same_answer_as_one_call(forest):
    model, X = forest
    whole = woodstar.convert(model, "torch").predict_proba(X)
    batched = woodstar.convert(model, "torch", extra_config={"batch_size": 7}).predict_proba(X)
    np.testing.assert_array_equal(whole, batched)
    tiny_budget = woodstar.convert(model, "torch", extra_config={"memory_budget_bytes": 50_000})
    np.testing.assert_array_equal(whole, tiny_budget.predict_proba(X))


def test_strategy_that_cannot_hold_the_model_is_refused():
    rng = np.random.default_rng(2)
    X = rng.normal(size=(2000, 4))
    model = RandomForestRegressor(4, random_state=0).fit(X, rng.normal(size=2000))  # deep trees
    with pytest.raises(MissingConverter, match=r"tree_implementation 'perf_tree_trav' cannot hold this model"):
        woodstar.convert(model, "torch", extra_config={"tree_implementation": "perf_tree_trav"})
    assert woodstar.convert(model, "torch").strategy == "tree_trav"


def test_predictions_do_not_track_gradients(forest):
    torch = pytest.importorskip("torch")
    converted = woodstar.convert(forest[0], "torch")
    assert all(not b.requires_grad for b in converted.model.buffers())
    assert not any(True for _ in converted.model.parameters())


def test_n_threads_restores_the_global_setting(forest):
    torch = pytest.importorskip("torch")
    model, X = forest
    before = torch.get_num_threads()
    converted = woodstar.convert(model, "torch", extra_config={"n_threads": 1})
    converted.predict(X)
    assert torch.get_num_threads() == before


def test_cuda_device_without_cuda_is_a_clear_error(forest):
    torch = pytest.importorskip("torch")
    if torch.cuda.is_available():
        pytest.skip("a GPU is present")
    with pytest.raises(ValueError, match="CUDA is not available here"):
        woodstar.convert(forest[0], "torch", device="cuda")
