"""skl2onnx's k-nearest-neighbours graphs (a Scan of pairwise distances, TopK, a vote
or a mean) against ONNX Runtime running the same graph, on the CPU route, the eager
program and the traced one: labels, probabilities and values to the bit, with
integer-valued rows (equal distances: TopK's order among ties decides the
neighbours), NaN and infinite rows, and row counts that put rows at every offset of
the kernels' SSE packets (ReduceSum's order depends on it)."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_neighbors",)
OPSET = {"": 17, "ai.onnx.ml": 3}


def _data(rng, n, n_features=5):
    """Half integer-valued rows (many equal distances), half continuous."""
    X = rng.integers(0, 4, size=(n, n_features)).astype(np.float32)
    X[: n // 2] += rng.normal(size=(n // 2, n_features)).astype(np.float32)
    return X


def _rows(rng, n, n_features=5):
    X = _data(rng, n, n_features)
    X[rng.random(X.shape) < 0.03] = np.nan
    X[1] = np.inf
    X[2, 0] = -np.inf
    X[3] = 1e30  # squares overflow: every distance is infinite
    return X


def _graph(model, X):
    options = {id(model): {"zipmap": False}} if hasattr(model, "classes_") else None
    return skl2onnx.to_onnx(model, X[:1], target_opset=OPSET, options=options)


@FAST_BACKENDS
@pytest.mark.parametrize("k, weights, metric", [(5, "uniform", "euclidean"),
                                                 (3, "distance", "euclidean"),
                                                 (4, "uniform", "manhattan"),
                                                 (6, "distance", "manhattan")])
def test_classifier(backend, rng, k, weights, metric):
    from sklearn.neighbors import KNeighborsClassifier

    X = _data(rng, 90)
    y = rng.integers(0, 3, size=len(X))
    model = KNeighborsClassifier(k, weights=weights, metric=metric).fit(X, y)
    check(_graph(model, X), _rows(rng, 203), backend)


@FAST_BACKENDS
def test_classifier_string_labels(backend, rng):
    from sklearn.neighbors import KNeighborsClassifier

    X = _data(rng, 60, 3)
    y = np.array(["ant", "bee", "cat", "dog"])[rng.integers(0, 4, size=len(X))]
    model = KNeighborsClassifier(7).fit(X, y)
    check(_graph(model, X), _rows(rng, 150, 3), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("k, weights, metric", [(5, "uniform", "euclidean"),
                                                 (7, "distance", "euclidean"),
                                                 (6, "uniform", "manhattan"),
                                                 (2, "distance", "manhattan")])
def test_regressor(backend, rng, k, weights, metric):
    from sklearn.neighbors import KNeighborsRegressor

    X = _data(rng, 100, 6)
    y = (X[:, 0] * 10 + rng.normal(size=len(X)) * 100).astype(np.float32)
    model = KNeighborsRegressor(k, weights=weights, metric=metric).fit(X, y)
    check(_graph(model, X), _rows(rng, 201, 6), backend)


@FAST_BACKENDS
def test_after_a_scaler_in_a_pipeline(backend, rng):
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    X = _data(rng, 80, 4)
    model = make_pipeline(StandardScaler(), KNeighborsClassifier(5, weights="distance"))
    model.fit(X, rng.integers(0, 3, size=len(X)))
    check(_graph(model, X), _rows(rng, 120, 4), backend)


def test_sum_order_is_the_kernels(rng):
    """A plain left-to-right sum of the neighbours' targets differs from ONNX Runtime's
    in the last bit on many rows (so the test above can fail)."""
    from sklearn.neighbors import KNeighborsRegressor

    from ._graphs import session

    X = rng.normal(size=(100, 4)).astype(np.float32)
    y = (rng.normal(size=100) * 100).astype(np.float32)
    model = KNeighborsRegressor(7).fit(X, y)
    rows = rng.normal(size=(200, 4)).astype(np.float32)
    expected = session(_graph(model, X)).run(None, {"X": rows})[0]
    order = np.argsort(((rows[:, None, :] - X[None]) ** 2).sum(axis=2), axis=1, kind="stable")
    naive = np.zeros(len(rows), np.float32)
    for j in range(7):
        naive = naive + y[order[:, j]]
    assert (naive / np.float32(7) != expected[:, 0]).any()
    np.testing.assert_array_equal(woodstar.convert(_graph(model, X), "torch").predict(rows),
                                  expected)


def test_other_distance_bodies_are_refused(rng):
    from sklearn.neighbors import KNeighborsClassifier

    X = _data(rng, 30, 3)
    model = KNeighborsClassifier(3, p=3).fit(X, np.arange(30) % 2)
    with pytest.raises(MissingConverter, match="Scan body of operators.*Pow"):
        woodstar.convert(_graph(model, X), "torch")


@pytest.mark.parametrize("kind, k, weights, metric", [
    ("classifier", 5, "uniform", "euclidean"), ("classifier", 4, "distance", "manhattan"),
    ("regressor", 3, "uniform", "manhattan"), ("regressor", 6, "distance", "euclidean")])
def test_onnx_backend(rng, kind, k, weights, metric):
    """The exported program holds the graph's own TopK, so ONNX Runtime picks the same
    neighbours among equal distances (integer-valued rows) and NaN ones: labels,
    probabilities and values to the bit on 1 row, a few rows and 1 003 rows."""
    from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor

    from ._graphs import session

    X = _data(rng, 90)
    if kind == "classifier":
        model = KNeighborsClassifier(k, weights=weights, metric=metric)
        model.fit(X, rng.integers(0, 3, size=len(X)))
    else:
        model = KNeighborsRegressor(k, weights=weights, metric=metric)
        model.fit(X, (X[:, 0] * 10 + rng.normal(size=len(X)) * 100).astype(np.float32))
    graph = _graph(model, X)
    rows = _rows(rng, 1003)
    rows[500:] = np.round(rows[500:])  # integer-valued: ties among the distances
    difference = np.abs(rows[500:, None, :] - X[None])
    power = 1 if metric == "manhattan" else 2
    kth = np.sort((difference ** power).sum(axis=2), axis=1)[:, k - 1:k + 1]
    assert (kth[:, 0] == kth[:, 1]).sum() > 50  # the k-th neighbour is chosen among ties
    container = woodstar.convert(graph, "onnx")
    for call in (rows, rows[:1], rows[1:8], rows[700:701]):
        expected = session(graph).run(None, {"X": call})
        got = container.predict(call)
        np.testing.assert_array_equal(got, expected[0].reshape(got.shape), err_msg=len(call))
        if kind == "classifier":
            np.testing.assert_array_equal(container.predict_proba(call), expected[1],
                                          err_msg=len(call))


def test_tvm_is_refused(rng):
    from sklearn.neighbors import KNeighborsRegressor

    from woodstar.backends import all_backends

    if not all_backends()["tvm"].is_available()[0]:
        pytest.skip("tvm is not installed")
    X = _data(rng, 30, 3)
    graph = _graph(KNeighborsRegressor(3).fit(X, X[:, 0]), X)
    with pytest.raises(MissingConverter, match="nearest-neighbours.*tvm.*NaN"):
        woodstar.convert(graph, "tvm")


@pytest.mark.parametrize("route", [None, {"cpu_route": "program"}])
def test_small_batches_keep_the_calls_order(rng, route):
    """ReduceSum's order depends on a row's place in the whole call, so a call is
    never split into batches (``whole_call``) where that order matters."""
    from sklearn.neighbors import KNeighborsRegressor

    from ._graphs import session

    X = rng.normal(size=(80, 4)).astype(np.float32)
    y = (rng.normal(size=80) * 100).astype(np.float32)
    graph = _graph(KNeighborsRegressor(5).fit(X, y), X)
    rows = rng.normal(size=(101, 4)).astype(np.float32)
    expected = session(graph).run(None, {"X": rows})[0]
    extra = dict(route or {}, batch_size=7)
    np.testing.assert_array_equal(
        woodstar.convert(graph, "torch", extra_config=extra).predict(rows), expected)
