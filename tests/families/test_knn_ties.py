"""Nearest neighbours with tied distances at the k-th place, on the CPU route, against
scikit-learn bit for bit: integer-valued features (ties everywhere), float targets
(so the order of the neighbours, which the mean and the weighted sums follow,
matters), k from 1 to 7, both weightings, classifier and regressor, training sets
inside one 256-row chunk and across several, and calls on both sides of ArgKmin's
"parallel on X" / "parallel on Y" switch (which depends on scikit-learn's thread
count: checked in subprocesses with OMP_NUM_THREADS set)."""

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.neighbors import KNeighborsClassifier, KNeighborsRegressor
from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
from sklearn.utils._sorting import _py_simultaneous_sort

import woodstar
from woodstar.exceptions import InvalidModelError
from woodstar.runtimes.families import neighbors as knn_runtime

pytestmark = pytest.mark.skipif(knn_runtime.unavailable_reason() is not None,
                                reason=str(knn_runtime.unavailable_reason()))

ROOT = Path(__file__).resolve().parents[2]


def _models(k, metric, X, y, t, algorithm="brute", **kw):
    kw = dict(kw, algorithm=algorithm, metric=metric)
    if metric == "minkowski":
        kw.setdefault("p", 3)
    return [KNeighborsClassifier(k, **kw).fit(X, y),
            KNeighborsClassifier(k, weights="distance", **kw).fit(X, y),
            KNeighborsRegressor(k, **kw).fit(X, t),
            KNeighborsRegressor(k, weights="distance", **kw).fit(X, t)]


def _mismatches(model, Q, **config):
    """Methods whose answers differ from scikit-learn's on Q."""
    converted = woodstar.convert(model, "torch", extra_config=config or None)
    bad = []
    for method in ("predict", "predict_proba"):
        if hasattr(model, method):
            expected, got = getattr(model, method)(Q), getattr(converted, method)(Q)
            if not np.array_equal(got, expected):
                bad.append(f"{type(model).__name__}({model.n_neighbors}, {model.weights}, "
                           f"{model.metric}).{method} on {len(Q)} rows")
    return bad


def _data(seed, n_train, n_queries, low=-2, high=3):
    local = np.random.default_rng(seed)
    X = local.integers(low, high, size=(n_train, 3)).astype(float)
    Q = local.integers(low, high, size=(n_queries, 3)).astype(float)
    return X, local.integers(0, 3, n_train), local.normal(size=n_train), Q


def test_simultaneous_sort_is_scikit_learns(rng):
    for n in [*range(1, 40), 100, 600]:
        for _ in range(10):
            values = rng.integers(0, 4, n).astype(float)  # duplicates: the order of ties
            indices = rng.permutation(n).astype(np.intp)
            expected_v, expected_i = values.copy(), indices.copy()
            _py_simultaneous_sort(expected_v, expected_i, n, use_three_way_partition=False)
            got_v, got_i = knn_runtime.simultaneous_sort(values, indices)
            np.testing.assert_array_equal(got_v, expected_v)
            np.testing.assert_array_equal(got_i, expected_i)


def test_thread_count_is_scikit_learns(monkeypatch):
    from joblib import cpu_count

    assert knn_runtime.sklearn_openmp_threads() == _openmp_effective_n_threads()
    # without scikit-learn's helper in the process: from the environment, as its
    # runtime would start (a fresh process compares it with scikit-learn's below)
    monkeypatch.delitem(sys.modules, "sklearn.utils._openmp_helpers")
    monkeypatch.setenv("OMP_NUM_THREADS", "3,1")
    assert knn_runtime.sklearn_openmp_threads() == 3  # even past the CPUs, as libgomp
    monkeypatch.delenv("OMP_NUM_THREADS")
    monkeypatch.setattr(knn_runtime, "_omp_default_threads", lambda: 4)
    monkeypatch.setattr(knn_runtime, "_physical_cpu_count", lambda: 2)
    assert knn_runtime.sklearn_openmp_threads() == 2
    # the count without joblib: its logical CPUs, read the same way
    assert knn_runtime._logical_cpus_like_loky() == cpu_count(only_physical_cores=False)


def test_thread_count_follows_threadpool_limits(rng):
    """threadpoolctl's OpenMP limit changes scikit-learn's count (and so its strategy):
    the count is read from scikit-learn's own OpenMP runtime."""
    from threadpoolctl import threadpool_limits

    X, y, t, Q = _data(rng.integers(1 << 31), 700, 300)
    model = KNeighborsRegressor(5, algorithm="brute").fit(X, t)
    with threadpool_limits(limits=1, user_api="openmp"):
        assert knn_runtime.sklearn_openmp_threads() == _openmp_effective_n_threads() == 1
        assert _mismatches(model, Q) == []
    assert knn_runtime.sklearn_openmp_threads() == _openmp_effective_n_threads()


@pytest.mark.parametrize("n_train", [60, 260, 700])  # one chunk; a 4-row last chunk; three
@pytest.mark.parametrize("n_queries", [1, 10, 300, 5000])
def test_brute_force_ties(n_train, n_queries, rng):
    X, y, t, Q = _data(rng.integers(1 << 31), n_train, n_queries)
    bad = []
    for k in range(1, 8):
        metric = ("euclidean", "manhattan", "chebyshev")[k % 3]
        for model in _models(k, metric, X, y, t):
            bad += _mismatches(model, Q)
    assert not bad, bad


@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
@pytest.mark.parametrize("n_train", [40, 300])
def test_tree_ties(algorithm, n_train, rng):
    """The trees' depth-first query replayed over the fitted tree's own arrays: visit
    order, bounds, leaf order and heap; leaf sizes from 1 row to the whole set."""
    X, y, t, Q = _data(rng.integers(1 << 31), n_train, 300)
    bad = []
    for k in range(1, 8):
        metric = ("euclidean", "manhattan", "chebyshev", "minkowski")[k % 4]
        for model in _models(k, metric, X, y, t, algorithm, leaf_size=int(rng.integers(1, 45))):
            bad += _mismatches(model, Q)
    assert not bad, bad


@pytest.mark.parametrize("algorithm", ["kd_tree", "ball_tree"])
def test_tree_float_data(algorithm, rng):
    """Continuous data, float32 queries, a fractional Minkowski p (libm's pow, as in
    scikit-learn's DistanceMetric) and more neighbours than one leaf holds."""
    local = np.random.default_rng(rng.integers(1 << 31))
    X, t, y = local.normal(size=(300, 4)), local.normal(size=300), local.integers(0, 3, 300)
    Q = np.vstack([local.normal(size=(200, 4)) * 2, X[:10]])
    bad = []
    for p in (1.5, 2, 3):
        kw = dict(algorithm=algorithm, p=p, weights="distance")
        for model in (KNeighborsRegressor(20, **kw).fit(X, t),
                      KNeighborsClassifier(5, **kw).fit(X, y)):
            bad += _mismatches(model, Q) + _mismatches(model, Q.astype(np.float32))
    assert not bad, bad


def test_cosine_ties(rng):
    # cosine goes through scikit-learn's chunked distance matrix and argpartition
    X, y, t, Q = _data(rng.integers(1 << 31), 300, 200, low=0, high=3)
    bad = []
    for k in (1, 4, 7):
        for model in _models(k, "cosine", X, y, t):
            bad += _mismatches(model, Q)
    assert not bad, bad


def test_float32_queries(rng):
    """float32 rows against a float64 training set: scikit-learn's brute force then
    computes the distance matrix and partitions it (argpartition, argsort)."""
    bad = []
    for low, high in ((-2, 3), (-50, 50)):
        X, y, t, Q = _data(rng.integers(1 << 31), 300, 200, low, high)
        Q = (Q + rng.normal(scale=0.01, size=Q.shape) * (high > 3)).astype(np.float32)
        for k, metric in ((1, "euclidean"), (4, "euclidean"), (3, "manhattan"),
                          (5, "chebyshev"), (2, "minkowski"), (4, "cosine")):
            for model in _models(k, metric, X, y, t):
                bad += _mismatches(model, Q)
    assert not bad, bad


def test_minkowski_and_many_neighbours(rng):
    # k above 15: the final sort's quicksort steps, not only its insertion sort
    X, y, t, Q = _data(rng.integers(1 << 31), 700, 40)
    bad = []
    for model in (_models(20, "minkowski", X, y, t)
                  + [KNeighborsRegressor(33, algorithm="brute", p=3).fit(X, t)]):
        bad += _mismatches(model, Q)
    assert not bad, bad


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
def test_ties_were_there_and_the_lower_index_rule_misses_them(algorithm, rng):
    """The data does tie, and the traced programs' lower-index rule (still theirs) gives
    other answers on some of these rows: the tests above can fail."""
    X, y, t, Q = _data(rng.integers(1 << 31), 300, 200)
    model = KNeighborsRegressor(4, algorithm=algorithm).fit(X, t)
    program = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    assert not np.array_equal(program.predict(Q), model.predict(Q))
    assert _mismatches(model, Q) == []


def test_row_threads_do_not_change_the_answer(rng):
    X, y, t, Q = _data(rng.integers(1 << 31), 700, 3000)
    for model in _models(5, "euclidean", X, y, t)[2:]:
        assert _mismatches(model, Q, n_threads=2) == []
        assert _mismatches(model, Q[:500], n_threads=2) == []


def test_a_call_split_into_batches_is_decided_batch_by_batch(rng):
    """With ``batch_size`` smaller than a call, each batch takes the strategy
    scikit-learn takes for a call of that many rows (the answer scikit-learn gives
    when called batch by batch)."""
    X, y, t, Q = _data(rng.integers(1 << 31), 700, 900)
    model = KNeighborsRegressor(4, algorithm="brute").fit(X, t)
    converted = woodstar.convert(model, "torch", extra_config={"batch_size": 300})
    expected = np.concatenate([model.predict(Q[s:s + 300]) for s in range(0, 900, 300)])
    np.testing.assert_array_equal(converted.predict(Q), expected)


@pytest.mark.parametrize("algorithm", ["brute", "kd_tree", "ball_tree"])
def test_save_load_keeps_the_search(algorithm, rng, tmp_path):
    X, y, t, Q = _data(rng.integers(1 << 31), 300, 100)
    model = KNeighborsRegressor(5, algorithm=algorithm).fit(X, t)
    path = woodstar.convert(model, "torch").save(tmp_path / "knn.zip")
    np.testing.assert_array_equal(woodstar.load(path).predict(Q), model.predict(Q))


def test_bad_tree_arrays_are_refused(rng):
    X, y, t, Q = _data(rng.integers(1 << 31), 100, 10)
    op = woodstar.convert(KNeighborsRegressor(3, algorithm="kd_tree").fit(X, t),
                          "torch").ir.graph.nodes[0].op
    nodes = op.tree_nodes.copy()
    nodes[0, 1] = 1000
    for changes, match in (({"tree_index": op.tree_index[::-1] % 50}, "permutation"),
                           ({"tree_nodes": nodes}, "row ranges"),
                           ({"tree_bounds": op.tree_bounds[:1]}, "tree_bounds"),
                           ({"search": "brute"}, "without a tree")):
        with pytest.raises(InvalidModelError, match=match):
            dataclasses.replace(op, **changes).validate()


_CHILD = r"""
import json, sys
import numpy as np
sys.path.insert(0, {root!r})
from sklearn.neighbors import KNeighborsRegressor, KNeighborsClassifier
from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
import woodstar
from woodstar.exceptions import InvalidModelError
from woodstar.runtimes.families.neighbors import sklearn_openmp_threads
bad = []
rng = np.random.default_rng({seed})
for n_train, n_queries in ((700, 300), (700, 1500), (2000, 2100), (300, 10)):
    X = rng.integers(-2, 3, size=(n_train, 3)).astype(float)
    Q = rng.integers(-2, 3, size=(n_queries, 3)).astype(float)
    t, y = rng.normal(size=n_train), rng.integers(0, 3, n_train)
    for k in (2, 5):
        for model in (KNeighborsRegressor(k, algorithm="brute").fit(X, t),
                      KNeighborsClassifier(k, algorithm="brute", weights="distance").fit(X, y)):
            if not np.array_equal(woodstar.convert(model, "torch").predict(Q), model.predict(Q)):
                bad.append((n_train, n_queries, k, type(model).__name__))
from woodstar.runtimes.families import neighbors
ours = sklearn_openmp_threads()
sys.modules.pop("sklearn.utils._openmp_helpers")  # as without scikit-learn: the environment
print(json.dumps({{"bad": bad, "ours": ours, "from_environment": sklearn_openmp_threads(),
                   "sklearn": _openmp_effective_n_threads()}}))
"""


@pytest.mark.parametrize("threads", ["1", "2", "3", None])
def test_scikit_learn_thread_counts(threads, rng):
    """Each thread count shares the training chunks differently in "parallel on Y" and
    moves the switch to "parallel on X" (4 * 256 * threads rows); None: the count
    scikit-learn derives itself without OMP_NUM_THREADS."""
    env = {k: v for k, v in os.environ.items() if k != "OMP_NUM_THREADS"}
    if threads is not None:
        env["OMP_NUM_THREADS"] = threads
    code = _CHILD.format(root=str(ROOT), seed=int(rng.integers(1 << 31)))
    done = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["ours"] == result["from_environment"] == result["sklearn"]
    if threads is not None:
        assert result["sklearn"] == int(threads)
    assert result["bad"] == []


def test_without_the_c_helper_or_the_search_the_reference_runs(rng, monkeypatch):
    """No compiler, or an op saved before its search was recorded: the op's reference
    (the lower training index among tied rows, as the traced programs)."""
    X, y, t, Q = _data(rng.integers(1 << 31), 300, 200)
    model = KNeighborsRegressor(4, algorithm="brute").fit(X, t)
    op = woodstar.convert(model, "torch").ir.graph.nodes[0].op
    lower_index = op.reference([Q])[1]
    assert not np.array_equal(lower_index[:, 0], model.predict(Q))  # the data ties
    meta, arrays = op.to_saved()
    del meta["search"]
    unknown = type(op).from_saved(meta, arrays).validate()
    assert unknown.search == ""
    for candidate, patch in ((unknown, False), (op, True)):
        if patch:
            monkeypatch.setattr(knn_runtime._LIBRARY, "load", lambda: None)
        run = knn_runtime._k_neighbors(candidate, SimpleNamespace(n_threads=1))
        np.testing.assert_array_equal(run(Q)[1], lower_index)
