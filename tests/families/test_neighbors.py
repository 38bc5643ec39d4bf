"""k-nearest-neighbour estimators and NearestCentroid against scikit-learn.

Exactness: the KD and ball trees (scikit-learn's choice for small data) and the
brute-force search with non-euclidean metrics sum the reduced distance feature by
feature in float64; woodstar's CPU route does the same, so labels, probabilities and
regression values are scikit-learn's bit for bit. Two distances are not reproducible
in NumPy and are compared within 1e-12 where distance weights use them: the
brute-force euclidean search takes the rows' norms from BLAS ``ddot`` (its own
summation order), and ``|d|**p`` for a general Minkowski ``p`` is libm's ``pow`` in
scikit-learn but NumPy's vectorised power here (a few ULPs). Labels stay identical.
Exactly tied distances at the k-th place: scikit-learn keeps whichever its search
met first (KD-tree visit order, heap layout, thread count); woodstar keeps the lower
training index, so with tied rows we check the neighbour sets wherever the k-th and
(k+1)-th distances differ (rows where sklearn's own answer is determined).
"""

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor, NearestCentroid
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import woodstar
from woodstar.exceptions import MissingConverter
from tests._parity import assert_parity

COVERS_OPS = ("k_neighbors",)
COVERS_MODELS = ("KNeighborsClassifier", "KNeighborsRegressor", "NearestCentroid")

EXACT = {
    "knn_kd": (lambda: KNeighborsClassifier(5), True),
    "knn_ball_distance": (lambda: KNeighborsClassifier(9, weights="distance", algorithm="ball_tree"), True),
    "knn_manhattan_brute": (lambda: KNeighborsClassifier(4, metric="manhattan", weights="distance", algorithm="brute"), True),
    "knn_chebyshev": (lambda: KNeighborsClassifier(3, metric="chebyshev", weights="distance"), True),
    "knn_cosine": (lambda: KNeighborsClassifier(6, metric="cosine", weights="distance"), True),
    "knn_brute_euclid": (lambda: KNeighborsClassifier(7, weights="distance", algorithm="brute"), False),
    "knn_p3": (lambda: KNeighborsClassifier(4, p=3, weights="distance"), False),
    "knnr_kd": (lambda: KNeighborsRegressor(5), True),
    "knnr_distance_2d": (lambda: KNeighborsRegressor(10, weights="distance"), True),
    "knnr_brute": (lambda: KNeighborsRegressor(6, weights="distance", algorithm="brute"), False),
    "centroid": (lambda: NearestCentroid(), True),
    "centroid_manhattan": (lambda: NearestCentroid(metric="manhattan"), True),
}


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(200, 5))
    return X, rng.integers(0, 3, 200), X[:, 0] * 2 + rng.normal(size=200)


@pytest.fixture(scope="module")
def models(data):
    X, y, t = data
    fitted = {}
    for name, (make, _) in EXACT.items():
        model = make()
        target = t if name.startswith("knnr") else y
        if name == "knnr_distance_2d":
            target = np.column_stack([t, -t])
        fitted[name] = model.fit(X, target)
    return fitted


def _queries(rng, X):
    Q = rng.normal(scale=2.0, size=(150, X.shape[1]))
    Q[:5] *= 1e3  # far outside the training range
    return np.vstack([Q, X[:10]])  # training rows themselves: a zero distance


@pytest.mark.parametrize("name", sorted(EXACT))
def test_default_route_matches_sklearn(name, models, data, rng):
    model, exact = models[name], EXACT[name][1]
    X = _queries(rng, data[0])
    c = woodstar.convert(model, "torch")
    for method in ("predict", "predict_proba"):
        if not hasattr(model, method) or method not in c.ir.head.methods:
            continue
        got, expected = getattr(c, method)(X), getattr(model, method)(X)
        if exact or expected.dtype.kind != "f":
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    for bad in (np.nan, np.inf):
        X[3, 1] = bad
        with pytest.raises(ValueError):
            model.predict(X)
        with pytest.raises(ValueError):
            c.predict(X)


# one model per distance formula and output kind (the compiling backends take seconds each)
BACKEND_CASES = ("knn_kd", "knn_brute_euclid", "knn_cosine", "knn_p3", "knnr_distance_2d",
                 "centroid", "centroid_manhattan")


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_backends(name, models, data, rng, backend):
    model = models[name]
    c = woodstar.convert(model, backend, extra_config={"cpu_route": "program"}
                         if backend == "torch" else None)
    assert_parity(c, model, _queries(rng, data[0]), "float64",
                  methods=[m for m in ("predict", "predict_proba") if m in c.ir.head.methods])


def test_float32_input(models, data, rng):
    model = models["knn_ball_distance"]
    X = _queries(rng, data[0]).astype(np.float32)
    c = woodstar.convert(model, "torch")
    np.testing.assert_array_equal(c.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(c.predict(X), model.predict(X))


def test_exact_ties_keep_the_determined_neighbours(rng):
    X = rng.integers(0, 3, size=(120, 3)).astype(float)  # many rows at equal distances
    y = rng.integers(0, 3, 120)
    Q = rng.integers(0, 3, size=(200, 3)).astype(float)
    for algorithm in ("kd_tree", "brute"):
        model = KNeighborsClassifier(4, algorithm=algorithm).fit(X, y)
        op = woodstar.convert(model, "torch").ir.graph.nodes[0].op
        index, dist = op.neighbours(Q)
        ref_dist, ref_index = model.kneighbors(Q, 5)
        determined = ref_dist[:, 3] < ref_dist[:, 4]
        assert determined.any()
        for row in np.flatnonzero(determined):
            assert set(index[row]) == set(ref_index[row, :4])
        np.testing.assert_array_equal(np.sort(dist, axis=1), np.sort(ref_dist[:, :4], axis=1))


def test_pipeline(data, rng):
    X, y, _ = data
    model = make_pipeline(StandardScaler(), KNeighborsClassifier(5, weights="distance")).fit(X, y)
    c = woodstar.convert(model, "torch")
    Q = _queries(rng, X)
    np.testing.assert_array_equal(c.predict(Q), model.predict(Q))
    np.testing.assert_allclose(c.predict_proba(Q), model.predict_proba(Q), rtol=1e-12, atol=1e-12)


def test_save_load(models, data, rng, tmp_path):
    model = models["knnr_distance_2d"]
    c = woodstar.convert(model, "torch")
    path = c.save(tmp_path / "knn.zip")
    Q = _queries(rng, data[0])
    np.testing.assert_array_equal(woodstar.load(path).predict(Q), model.predict(Q))


def test_refusals(data):
    X, y, t = data
    cases = [
        (KNeighborsClassifier(3, metric="precomputed").fit(np.abs(X @ X.T), y), "metric"),
        (KNeighborsClassifier(3, weights=lambda d: d).fit(X, y), "weights"),
        (KNeighborsClassifier(3, metric="minkowski", metric_params={"w": np.ones(5)}).fit(X, y), "w"),
        (KNeighborsClassifier(3, metric="hamming").fit(X, y), "metric"),
        (KNeighborsClassifier(3, algorithm="brute").fit(X.astype(np.float32), y), "brute-force"),
        (KNeighborsClassifier(3).fit(X, np.column_stack([y, y])), "multi-output"),
        (NearestCentroid(priors=[0.2, 0.3, 0.5]).fit(X, y), "class priors"),
    ]
    for model, match in cases:
        with pytest.raises(MissingConverter, match=match):
            woodstar.convert(model, "torch")
