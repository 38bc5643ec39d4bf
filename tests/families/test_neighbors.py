"""Nearest-neighbour estimators and NearestCentroid against scikit-learn.

Exactness: the KD and ball trees (scikit-learn's choice for small data) and the
brute-force search with non-euclidean metrics sum the reduced distance feature by
feature in float64; woodstar's CPU route does the same (Minkowski's ``|d|**p`` with
libm's ``pow``, as scikit-learn), so labels, probabilities and regression values are
scikit-learn's bit for bit. Two distances are not reproducible in NumPy and are
compared within 1e-12 where distance weights use them: the brute-force euclidean
search takes the rows' norms from BLAS ``ddot`` (its own summation order), and the
traced programs' ``|d|**p`` for a general Minkowski ``p`` is the backend's power, not
libm's (a few ULPs). Labels stay identical. A query equal to a training row is the
exception in the programs: scikit-learn's distance to it is its BLAS kernel's rounding
(0, or about 1e-8 with some OpenBLAS kernels), which a distance weight turns into 1/d;
the programs find 0, so their probabilities there are compared within 1e-6.
Exactly tied distances at the k-th place: the CPU route replays scikit-learn's heap
and search order (tests/families/test_knn_ties.py), so it keeps scikit-learn's rows;
the traced programs keep the lower training index, so there we check the answers
wherever the k-th and (k+1)-th distances differ (rows where scikit-learn's own
answer is determined).

Radius neighbours: scikit-learn sums the neighbours' targets (the regressor's mean,
the distance-weighted vote) in the order its search returns them, which for the KD
and ball trees is the tree's visit order; woodstar sums in training-index order (the
brute-force search's order), so those sums are compared within 1e-12; counts
(uniform votes) and the brute-force search's sums are exact.
"""

import warnings


import numpy as np
import pytest
from sklearn.neighbors import (KNeighborsClassifier, KNeighborsRegressor, NearestCentroid,
                               RadiusNeighborsClassifier, RadiusNeighborsRegressor)
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import woodstar
from woodstar.exceptions import MissingConverter
from tests._parity import assert_parity

COVERS_OPS = ("k_neighbors", "radius_neighbors", "centroid_discriminant")
COVERS_MODELS = ("KNeighborsClassifier", "KNeighborsRegressor", "NearestCentroid", "RadiusNeighborsClassifier", "RadiusNeighborsRegressor")
METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function")

EXACT = {
    "knn_kd": (lambda: KNeighborsClassifier(5), True),
    "knn_ball_distance": (lambda: KNeighborsClassifier(9, weights="distance", algorithm="ball_tree"), True),
    "knn_manhattan_brute": (lambda: KNeighborsClassifier(4, metric="manhattan", weights="distance", algorithm="brute"), True),
    "knn_chebyshev": (lambda: KNeighborsClassifier(3, metric="chebyshev", weights="distance"), True),
    "knn_cosine": (lambda: KNeighborsClassifier(6, metric="cosine", weights="distance"), True),
    "knn_brute_euclid": (lambda: KNeighborsClassifier(7, weights="distance", algorithm="brute"), False),
    "knn_p3": (lambda: KNeighborsClassifier(4, p=3, weights="distance"), True),
    "knn_p3_brute": (lambda: KNeighborsClassifier(4, p=3, weights="distance", algorithm="brute"), True),
    "knnr_kd": (lambda: KNeighborsRegressor(5), True),
    "knnr_distance_2d": (lambda: KNeighborsRegressor(10, weights="distance"), True),
    "knnr_brute": (lambda: KNeighborsRegressor(6, weights="distance", algorithm="brute"), False),
    "centroid": (lambda: NearestCentroid(), True),
    "centroid_manhattan": (lambda: NearestCentroid(metric="manhattan"), True),
    "centroid_priors": (lambda: NearestCentroid(priors=[0.2, 0.3, 0.5]), True),
    "rnc_kd": (lambda: RadiusNeighborsClassifier(2.0, outlier_label="most_frequent"), True),
    "rnc_kd_distance": (lambda: RadiusNeighborsClassifier(2.0, weights="distance", outlier_label=1), False),
    "rnc_manhattan_brute": (lambda: RadiusNeighborsClassifier(3.0, weights="distance", metric="manhattan", algorithm="brute", outlier_label=0), True),
    "rnc_none": (lambda: RadiusNeighborsClassifier(1.5, weights="distance", algorithm="ball_tree"), False),
    "rnc_brute_uniform": (lambda: RadiusNeighborsClassifier(1.5, algorithm="brute"), True),
    "rnr_kd": (lambda: RadiusNeighborsRegressor(2.0), False),
    "rnr_brute_manhattan": (lambda: RadiusNeighborsRegressor(3.0, metric="manhattan", algorithm="brute"), True),
    "rnr_brute_euclid_2d": (lambda: RadiusNeighborsRegressor(2.0, weights="distance", algorithm="brute"), False),
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
        target = t if name.startswith(("knnr", "rnr")) else y
        if name.endswith("_2d"):
            target = np.column_stack([t, -t])
        fitted[name] = model.fit(X, target)
    return fitted


def _queries(rng, X):
    Q = rng.normal(scale=2.0, size=(150, X.shape[1]))
    Q[:5] *= 1e3  # far outside the training range
    return np.vstack([Q, X[:10]])  # training rows themselves: a zero distance


def _sklearn(model, method, X):
    with warnings.catch_warnings():  # the radius regressor warns of its NaN
        warnings.simplefilter("ignore", UserWarning)
        return getattr(model, method)(X)


def _check(c, model, X, exact):
    for method in METHODS:
        if not hasattr(model, method):
            assert method not in c.ir.head.methods
            continue
        try:
            expected = _sklearn(model, method, X)
        except ValueError:  # a radius classifier's row with no neighbour
            with pytest.raises(ValueError, match="no neighbors"):
                getattr(c, method)(X)
            continue
        got = getattr(c, method)(X)
        if exact or expected.dtype.kind != "f":
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


def _near(rng, X):
    """Queries with neighbours within every radius of the tests."""
    return X[rng.integers(0, len(X), 80)] + rng.normal(scale=0.1, size=(80, X.shape[1]))


@pytest.mark.parametrize("name", sorted(EXACT))
def test_default_route_matches_sklearn(name, models, data, rng):
    model, exact = models[name], EXACT[name][1]
    X = _queries(rng, data[0])
    c = woodstar.convert(model, "torch")
    _check(c, model, X, exact)
    _check(c, model, _near(rng, data[0]), exact)
    for bad in (np.nan, np.inf):
        X[3, 1] = bad
        with pytest.raises(ValueError):
            model.predict(X)
        with pytest.raises(ValueError):
            c.predict(X)


# one model per distance formula and output kind (the compiling backends take seconds each)
BACKEND_CASES = ("knn_kd", "knn_brute_euclid", "knn_cosine", "knn_p3", "knnr_distance_2d",
                 "centroid", "centroid_manhattan", "centroid_priors", "rnc_kd_distance",
                 "rnc_none", "rnr_brute_euclid_2d")


# Distance-weighted brute-force euclidean models: see the training rows in test_backends.
SELF_DISTANCE_CASES = ("knn_brute_euclid", "rnr_brute_euclid_2d")


@pytest.mark.parametrize("name", BACKEND_CASES)
def test_backends(name, models, data, rng, backend):
    model = models[name]
    c = woodstar.convert(model, backend, extra_config={"cpu_route": "program"}
                         if backend == "torch" else None)
    methods = [m for m in METHODS if m in c.ir.head.methods]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        Q = _queries(rng, data[0])
        if "decision_function" in methods:
            # the discriminant scores of the rows far outside (|score| ~ 1e6) come from
            # |x|^2 - 2 x.c + |c|^2, whose rounding depends on the product's summation
            # order; predict_log_proba subtracts two of them: ~1e-16 of |score|, absolute
            assert_parity(c, model, Q[:5], "float64", methods=methods, tolerance=1e-8)
            Q = Q[5:]
        if name in SELF_DISTANCE_CASES:
            # A training row's distance to itself is |x|^2 - 2 x.x + |x|^2 in scikit-learn's
            # BLAS: 0 or ~1e-8 by OpenBLAS's kernel (OPENBLAS_CORETYPE=Haswell leaves
            # 4.2e-8 on one row of these), and a distance weight makes it 1 / d. The
            # programs' products give 0 there; the CPU route's are scikit-learn's.
            assert_parity(c, model, Q[-10:], "float64", methods=methods, tolerance=1e-6)
            Q = Q[:-10]
        assert_parity(c, model, Q, "float64", methods=methods)
        if name.startswith("r"):
            assert_parity(c, model, _near(rng, data[0]), "float64", methods=methods)


def test_float32_input(models, data, rng):
    model = models["knn_ball_distance"]
    X = _queries(rng, data[0]).astype(np.float32)
    c = woodstar.convert(model, "torch")
    np.testing.assert_array_equal(c.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(c.predict(X), model.predict(X))


def test_float32_input_discriminant(models, data, rng):
    model = models["centroid"]  # predict in float32, the discriminant scores in float64
    X = _queries(rng, data[0]).astype(np.float32)
    c = woodstar.convert(model, "torch")
    for method in METHODS:
        np.testing.assert_array_equal(getattr(c, method)(X), getattr(model, method)(X))


def test_binary_centroid_decision(data, rng):
    X, y, _ = data
    model = NearestCentroid().fit(X, y % 2)
    c = woodstar.convert(model, "torch")
    _check(c, model, _queries(rng, X), True)
    assert c.decision_function(X).shape == (len(X),)


def test_radius_outliers(models, data):
    X = data[0]
    far = np.vstack([X[:5], np.full((2, X.shape[1]), 50.0)])  # two rows with no neighbour
    with pytest.raises(ValueError, match="No neighbors"):
        models["rnc_none"].predict(far)
    c = woodstar.convert(models["rnc_none"], "torch")
    with pytest.raises(ValueError, match="no neighbors"):
        c.predict_proba(far)
    c.predict(far[:5])  # rows with neighbours alone convert fine
    for name in ("rnc_kd_distance", "rnc_manhattan_brute"):
        c = woodstar.convert(models[name], "torch")
        np.testing.assert_array_equal(c.predict(far), models[name].predict(far))
        np.testing.assert_array_equal(c.predict_proba(far)[5:], models[name].predict_proba(far)[5:])
    c = woodstar.convert(models["rnr_kd"], "torch")
    got = c.predict(far)
    assert np.isnan(got[5:]).all() and np.isfinite(got[:5]).all()
    np.testing.assert_allclose(got, _sklearn(models["rnr_kd"], "predict", far), rtol=1e-12)


def _grid_points(rng, n):
    return rng.integers(0, 3, size=(n, 3)).astype(float)  # many rows at equal distances


def test_exact_ties_keep_the_determined_neighbours(rng):
    # About 1 draw in 300 leaves no query whose 4th neighbour is determined (the 4th and
    # 5th distances differ): draw again then, so that the test always checks some.
    for _ in range(10):
        X, Q = _grid_points(rng, 120), _grid_points(rng, 200)
        d = np.sort(np.sqrt(((Q[:, None, :] - X[None]) ** 2).sum(axis=2)), axis=1)
        if (d[:, 3] < d[:, 4]).any():
            break
    y = rng.integers(0, 3, 120)
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


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
def test_integer_features_match_wherever_the_kth_distance_is_not_tied(algorithm, rng):
    """Integer-valued features and targets, ties everywhere, many seeds: predict,
    predict_proba and the regressor's mean equal scikit-learn's bit for bit on every
    query on the CPU route, and on the Torch program wherever the k-th and (k+1)-th
    distances differ (integer targets: the mean's sum is exact in any order);
    elsewhere the program's neighbours' distances are the same."""
    undetermined = 0
    for _ in range(6):
        local = np.random.default_rng(rng.integers(1 << 31))
        X = local.integers(-2, 3, size=(150, 3)).astype(float)
        y = local.integers(0, 3, 150)
        t = local.integers(-9, 10, 150).astype(float)
        Q = local.integers(-2, 3, size=(300, 3)).astype(float)
        k = int(local.integers(1, 9))
        models = [KNeighborsClassifier(k, algorithm=algorithm).fit(X, y),
                  KNeighborsClassifier(k, algorithm=algorithm, weights="distance").fit(X, y),
                  KNeighborsRegressor(k, algorithm=algorithm).fit(X, t)]
        distances, _ = models[0].kneighbors(Q, k + 1)
        determined = distances[:, k - 1] < distances[:, k]
        undetermined += (~determined).sum()
        for model in models:
            for config, D in (({}, Q), ({"cpu_route": "program"}, Q[determined])):
                converted = woodstar.convert(model, "torch", extra_config=config)
                for method in ("predict", "predict_proba"):
                    if hasattr(model, method):
                        np.testing.assert_array_equal(getattr(converted, method)(D),
                                                      getattr(model, method)(D),
                                                      err_msg=f"{method} {config}")
        op = woodstar.convert(models[0], "torch").ir.graph.nodes[0].op
        _, dist = op.neighbours(Q)
        np.testing.assert_array_equal(np.sort(dist, axis=1), np.sort(distances[:, :k], axis=1))
    assert undetermined > 0  # the data did tie at the k-th place


@pytest.mark.parametrize("weights", ["uniform", "distance"])
@pytest.mark.parametrize("n_outputs", [1, 3])
def test_regressor_means_add_in_scikit_learns_order(weights, n_outputs, rng):
    """Real-valued targets, 12 neighbours: the Torch program's means equal scikit-learn's
    bit for bit. Uniform weights take np.mean over a (rows, k, outputs) array, which adds
    the neighbours one after another with several outputs and pairwise with one;
    distance weights take np.sum over (rows, k) per output, pairwise."""
    X = rng.normal(size=(300, 4))
    y = rng.normal(size=(300, n_outputs)) * 10.0 ** rng.integers(-3, 4, size=(300, n_outputs))
    model = KNeighborsRegressor(12, weights=weights, algorithm="kd_tree").fit(
        X, y[:, 0] if n_outputs == 1 else y)
    Q = rng.normal(size=(500, 4))
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    np.testing.assert_array_equal(converted.predict(Q), model.predict(Q))


def test_pipeline(data, rng):
    X, y, _ = data
    Q = _queries(rng, X)
    for final in (KNeighborsClassifier(5, weights="distance"), NearestCentroid(),
                  RadiusNeighborsClassifier(1.5, weights="distance", outlier_label=2)):
        model = make_pipeline(StandardScaler(), final).fit(X, y)
        c = woodstar.convert(model, "torch")
        np.testing.assert_array_equal(c.predict(Q), model.predict(Q))
        np.testing.assert_allclose(c.predict_proba(Q), model.predict_proba(Q), rtol=1e-12, atol=1e-12)


def test_save_load(models, data, rng, tmp_path):
    Q = _queries(rng, data[0])
    for name, method in (("knnr_distance_2d", "predict"), ("rnc_manhattan_brute", "predict_proba"),
                         ("centroid", "decision_function")):
        model = models[name]
        path = woodstar.convert(model, "torch").save(tmp_path / f"{name}.zip")
        np.testing.assert_array_equal(getattr(woodstar.load(path), method)(Q),
                                      getattr(model, method)(Q))


def test_refusals(data):
    X, y, t = data
    cases = [
        (KNeighborsClassifier(3, metric="precomputed").fit(np.abs(X @ X.T), y), "metric"),
        (KNeighborsClassifier(3, weights=lambda d: d).fit(X, y), "weights"),
        (KNeighborsClassifier(3, metric="minkowski", metric_params={"w": np.ones(5)}).fit(X, y), "w"),
        (KNeighborsClassifier(3, metric="hamming").fit(X, y), "metric"),
        (KNeighborsClassifier(3, algorithm="brute").fit(X.astype(np.float32), y), "brute-force"),
        (KNeighborsClassifier(3).fit(X, np.column_stack([y, y])), "multi-output"),
        (NearestCentroid(metric="manhattan", priors=[0.2, 0.3, 0.5]).fit(X, y), "class priors"),
        (RadiusNeighborsClassifier(2.0, outlier_label=7).fit(X, y), "outlier_label"),
        (RadiusNeighborsClassifier(2.0).fit(X, np.column_stack([y, y])), "multi-output"),
        (RadiusNeighborsRegressor(2.0, metric="hamming").fit(X, t), "metric"),
        (RadiusNeighborsRegressor(2.0, algorithm="brute").fit(X.astype(np.float32), t), "brute-force"),
    ]
    for model, match in cases:
        with pytest.raises(MissingConverter, match=match):
            woodstar.convert(model, "torch")
