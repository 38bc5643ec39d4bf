"""``extra_config["onnx_runtime_threads"]``: a tree ensemble's answers are those of an ONNX
Runtime session with that many intra-op threads, whose kernel splits a call's trees over
its threads (from 51 rows; one row with several outputs from 81 trees) and adds the
parts: the last bit of a float32 sum differs from one thread's."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import ConstantError

from ._graphs import session

onnxmltools = pytest.importorskip("onnxmltools")
lightgbm = pytest.importorskip("lightgbm")
xgboost = pytest.importorskip("xgboost")
ROWS = (1, 30, 50, 51, 300)


def _data(seed=0, n=600):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 6)).astype(np.float32)
    X[::9, 2] = np.nan
    return X


def _graphs():
    from onnxmltools.convert.common.data_types import FloatTensorType

    X = _data()
    types = [("input", FloatTensorType([None, 6]))]
    regressor = lightgbm.LGBMRegressor(n_estimators=97, verbose=-1).fit(X, X[:, 0] * 2 + 1)
    classes = np.digitize(X[:, 1], [-0.5, 0.5])
    classifier = xgboost.XGBClassifier(n_estimators=30, max_depth=4).fit(X, classes)
    return {
        "lightgbm_regressor_97_trees": onnxmltools.convert_lightgbm(regressor,
                                                                    initial_types=types),
        # 3 classes x 30 rounds: 90 trees, so one-row calls are split too
        "xgboost_3_classes": onnxmltools.convert_xgboost(classifier, initial_types=types),
    }


GRAPHS = _graphs()


def _answers(converted, X):
    out = converted.predict_proba(X) if hasattr(converted, "predict_proba") \
        else converted.predict(X)
    return np.asarray(out)


@pytest.mark.parametrize("threads", [2, 3])
@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_answers_are_those_of_a_session_with_that_many_threads(name, threads):
    graph = GRAPHS[name]
    reference = session(graph, threads)
    one_thread = woodstar.convert(graph, "torch")
    routes = [woodstar.convert(graph, "torch", extra_config={"onnx_runtime_threads": threads}),
              woodstar.convert(graph, "torch", extra_config={"onnx_runtime_threads": threads,
                                                             "cpu_route": "program"})]
    X = _data(seed=threads)
    differs = False
    for n in ROWS:
        expected = reference.run(None, {"input": X[:n]})[-1]
        for converted in routes:
            np.testing.assert_array_equal(_answers(converted, X[:n]).reshape(expected.shape),
                                          expected, err_msg=f"{n} rows")
        differs |= not np.array_equal(_answers(one_thread, X[:n]).reshape(expected.shape),
                                      expected)
    assert differs, "one thread's sums equal these: the test would not see a wrong split"


def test_the_thread_count_is_saved_with_the_model(tmp_path):
    graph = GRAPHS["lightgbm_regressor_97_trees"]
    converted = woodstar.convert(graph, "torch", extra_config={"onnx_runtime_threads": 2})
    converted.save(tmp_path / "model.zip")
    loaded = woodstar.load(tmp_path / "model.zip")
    X = _data(seed=7)[:200]
    np.testing.assert_array_equal(loaded.predict(X), session(graph, 2).run(None, {"input": X})[0])


@pytest.mark.parametrize("value", [0, -2, 1.5, "two"])
def test_a_thread_count_that_is_not_a_positive_int_is_refused(value):
    with pytest.raises((ConstantError, ValueError, TypeError), match="onnx_runtime_threads"):
        woodstar.convert(GRAPHS["xgboost_3_classes"], "torch",
                         extra_config={"onnx_runtime_threads": value})


def test_parts_of_a_large_call_keep_the_sessions_split(monkeypatch):
    """A call the program route splits into parts: equal parts, each of over 50 rows,
    keep the whole call's split sums; a short remainder part would not."""
    from woodstar.lowering import routing

    monkeypatch.setattr(routing, "CACHE_PART_BYTES", 1)  # parts of CACHE_PART_MIN_ROWS
    graph = GRAPHS["lightgbm_regressor_97_trees"]
    converted = woodstar.convert(graph, "torch", extra_config={
        "onnx_runtime_threads": 2, "cpu_route": "program", "n_threads": 1})
    X = _data(seed=11, n=3 * routing.CACHE_PART_MIN_ROWS + 40)
    expected = session(graph, 2).run(None, {"input": X})[0]
    np.testing.assert_array_equal(_answers(converted, X).reshape(expected.shape), expected)
    tail = X[-40:]  # what fixed-size parts would have left as their last call
    assert not np.array_equal(_answers(converted, tail).reshape(-1), expected[-40:].reshape(-1))
