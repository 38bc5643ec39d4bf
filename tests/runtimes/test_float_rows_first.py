"""Float64 rows of a model that compares in float64 (LightGBM's) on the compiled walk's
float route (``_FloatRowsFirst`` in c_walk.py): every row but those whose rounding to
float32 could change a comparison. The sums must be the double route's bits, on rows
built to sit on, next to and between thresholds and their float32 roundings, with NaN,
infinities and values beyond float32's range."""

import numpy as np
import pytest

from woodstar.ir.reference import predict
from woodstar.lowering.trees._common import node_thresholds
from woodstar.runtimes import c_walk

from tests.lowering.test_strategies import inputs, random_ensemble

pytestmark = pytest.mark.skipif(
    not c_walk.available() or c_walk.simd_walk() is None,
    reason="the compiled walk with its SIMD copies (the float route this is for)")


def _ensemble(rng, **fields):
    fields.setdefault("input_precision", "float64")
    return random_ensemble(rng, n_trees=30, n_features=5, max_depth=10, **fields)


def _double_only(ens, monkeypatch, n_threads=1):
    with monkeypatch.context() as patch:
        patch.setattr(c_walk, "FLOAT_ROWS_FIRST_MIN_ROWS", None)
        walk = c_walk.CTreeWalk(ens, "float64", n_threads)
    assert walk.float_rows is None
    return walk


def _rows_at_thresholds(rng, ens, n):
    """Rows whose values are a feature's thresholds, the doubles next to them, their
    float32 roundings and the doubles next to those, random doubles, NaN, +-inf and
    values beyond float32's range."""
    thresholds = node_thresholds(ens, "float64")
    X = inputs(rng, ens.n_features, n=n) + rng.normal(scale=1e-9, size=(n, ens.n_features))
    for f in range(ens.n_features):
        own = thresholds[(ens.left >= 0) & (ens.feature == f)]
        if not len(own):
            continue
        t = rng.choice(own, size=n)
        rounded = t.astype(np.float32).astype(np.float64)
        near = np.stack([t, np.nextafter(t, np.inf), np.nextafter(t, -np.inf), rounded,
                         np.nextafter(rounded, np.inf), np.nextafter(rounded, -np.inf),
                         (t + rounded) / 2])
        pick = rng.integers(0, len(near), size=n)
        chosen = near[pick, np.arange(n)]
        where = rng.random(n) < 0.4
        X[where, f] = chosen[where]
    X[rng.random(X.shape) < 0.01] = 1e39
    X[rng.random(X.shape) < 0.01] = -1e39
    return np.ascontiguousarray(X)


def _off_float_thresholds(rng, ens):
    """The ensemble with thresholds moved off float32 values (a float64 model's)."""
    jitter = rng.uniform(1e-9, 1e-7, size=ens.n_nodes) * rng.choice([-1, 1], size=ens.n_nodes)
    return ens.replace(threshold=np.where(ens.left >= 0, ens.threshold + jitter, ens.threshold))


@pytest.mark.parametrize("n_threads", [1, 2])
@pytest.mark.parametrize("case", ["plain", "off-float-thresholds", "vector-leaves"])
def test_sums_are_the_double_routes_bits(case, n_threads, rng, monkeypatch):
    fields = dict(leaf_width=2, n_outputs=3) if case == "vector-leaves" else {}
    ens = _ensemble(rng, **fields)
    if case == "off-float-thresholds":
        ens = _off_float_thresholds(rng, ens)
    walk = c_walk.CTreeWalk(ens, "float64", n_threads)
    assert walk.float_rows is not None
    double = _double_only(ens, monkeypatch, n_threads)
    X = _rows_at_thresholds(rng, ens, 3000)
    floats = np.clip(X[:500], -1e30, 1e30).astype(np.float32).astype(np.float64)
    X = np.ascontiguousarray(np.vstack([X, floats]))  # rows no value of which moves
    sums = walk._tree_sums(X)
    assert walk.float_rows.last_marked > 0  # some rows went back to the double route
    assert walk.float_rows.last_marked <= 3000
    np.testing.assert_array_equal(sums, double._tree_sums(X))
    np.testing.assert_array_equal(walk(X)[0], predict(ens, X)[0])


def test_float32_values_are_never_walked_twice(rng):
    ens = _off_float_thresholds(rng, _ensemble(rng))
    walk = c_walk.CTreeWalk(ens, "float64")
    X = _rows_at_thresholds(rng, ens, 1000)
    X[np.abs(X) > 1e38] = np.inf  # rounds to float32 as it is
    X = X.astype(np.float32).astype(np.float64)
    raw = walk(X)[0]
    assert walk.float_rows.last_marked == 0
    np.testing.assert_array_equal(raw, predict(ens, X)[0])


def test_small_calls_keep_the_double_route(rng):
    ens = _ensemble(rng)
    walk = c_walk.CTreeWalk(ens, "float64")
    X = _rows_at_thresholds(rng, ens, walk.float_rows.min_rows - 1)
    walk.float_rows.last_marked = -1
    np.testing.assert_array_equal(walk(X)[0], predict(ens, X)[0])
    assert walk.float_rows.last_marked == -1


@pytest.mark.parametrize("case", ["plain", "vector-leaves-softmax"])
def test_the_small_batch_entry_splits_in_its_one_call(case, rng, monkeypatch):
    """The entry's C call rounds, walks the float route and walks the marked rows again
    on the double one (``float_rows_first`` in c_walk.c): the double route's bits, and
    its link, at every size from the split's first row count to the entry's ceiling."""
    fields = dict(leaf_width=2, n_outputs=3, post_transform="softmax") \
        if case == "vector-leaves-softmax" else dict(post_transform="sigmoid")
    ens = _ensemble(rng, **fields)
    walk = c_walk.CTreeWalk(ens, "float64")
    entry = c_walk.SmallBatchEntry(walk, 255, False, False, "float64")
    assert entry._spec.float_m == walk.float_rows.walk._model_address
    double = c_walk.SmallBatchEntry(_double_only(ens, monkeypatch), 255, False, False, "float64")
    assert not double._spec.float_m
    first = walk.float_rows.min_rows
    marked = 0
    for n in [first - 1, first, first + 1, 16, 63, 64, 65, 200, 255]:
        X = _rows_at_thresholds(rng, ens, n)
        raw, transformed = entry(X)
        walk.float_rows.sums(X, walk._walk_sums)  # how many rows go back (Python's split)
        marked += walk.float_rows.last_marked
        expected = double(X)
        np.testing.assert_array_equal(raw, expected[0], err_msg=f"{n} rows")
        np.testing.assert_array_equal(transformed, expected[1], err_msg=f"{n} rows")
        np.testing.assert_array_equal(raw, predict(ens, X)[0], err_msg=f"{n} rows")
    assert marked > 0  # rows went back to the double route


@pytest.mark.parametrize("kind", ["float32-comparisons", "categorical", "missing-range",
                                  "float32-sums"])
def test_models_that_do_not_take_it(kind, rng):
    if kind == "missing-range":  # XGBoost's missing=-999: a range test on every node
        ens = _ensemble(rng, missing_range=(-999.0, -999.0))
        ens = ens.replace(missing_in_range=ens.left >= 0)
        assert ens.has_missing_range
    else:
        ens = _ensemble(rng, **{"float32-comparisons": dict(input_precision="float32"),
                                "categorical": dict(categorical=True, categorical_rule="truncate"),
                                "float32-sums": dict(sum_precision="float32")}[kind])
    assert c_walk.CTreeWalk(ens, "float64").float_rows is None
    assert c_walk.CTreeWalk(_ensemble(rng), "float32").float_rows is None


@pytest.mark.parametrize("library", ["lightgbm", "sklearn"])
def test_float64_models_on_float64_rows(library, rng):
    """LightGBM's and HistGradientBoosting's own answers on rows at their thresholds,
    through the public path (both compare in float64)."""
    import woodstar

    X = rng.normal(size=(2000, 6))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + np.nan_to_num(X[:, 1]) ** 2 > 0.5).astype(int)
    if library == "lightgbm":
        lightgbm = pytest.importorskip("lightgbm")
        model = lightgbm.LGBMClassifier(n_estimators=40, num_leaves=63, verbose=-1).fit(X, y)
    else:
        from sklearn.ensemble import HistGradientBoostingClassifier
        model = HistGradientBoostingClassifier(max_iter=40, random_state=0).fit(X, y)
    converted = woodstar.convert(model, "torch")
    assert converted.ir.ensemble.input_precision == "float64"
    ens = converted.ir.ensemble
    for n in [9, 100, 255, 2000]:  # the small-batch entry's split, then the full path's
        rows = _rows_at_thresholds(rng, ens, n)
        np.testing.assert_array_equal(converted.predict_proba(rows), model.predict_proba(rows))
        np.testing.assert_array_equal(converted.predict(rows), model.predict(rows))
    assert converted._small_batch["float64"]._spec.float_m  # the entry took the split


def test_values_next_to_a_zero_threshold(rng, monkeypatch):
    """The smallest doubles round to a zero of either sign; -0.0 and +0.0 are the same
    threshold, so a value rounding to either must go back to the double route."""
    ens = _ensemble(rng)
    internal = np.flatnonzero(ens.left >= 0)
    signs = np.where(rng.random(len(internal)) < 0.5, -0.0, 0.0)
    threshold = ens.threshold.copy()
    threshold[internal] = signs
    ens = ens.replace(threshold=threshold)
    tiny = np.array([5e-324, -5e-324, 1e-46, -1e-46, 0.0, -0.0, 1e-45, -1e-45, 1e-300, -1e-300])
    X = np.ascontiguousarray(rng.choice(tiny, size=(2000, ens.n_features)))
    walk = c_walk.CTreeWalk(ens, "float64")
    sums = walk._tree_sums(X)
    assert walk.float_rows.last_marked > 0
    np.testing.assert_array_equal(sums, _double_only(ens, monkeypatch)._tree_sums(X))
    np.testing.assert_array_equal(walk(X)[0], predict(ens, X)[0])


def test_the_float64_route_shares_the_containers_float_walk(rng):
    """The container builds its float32 route at convert time; the float64 route's
    float walk is that same walk, not a second copy of the tables."""
    lightgbm = pytest.importorskip("lightgbm")
    import woodstar

    X = rng.normal(size=(1000, 5))
    model = lightgbm.LGBMClassifier(n_estimators=20, num_leaves=31, verbose=-1).fit(X, X[:, 0] > 0)
    converted = woodstar.convert(model, "torch", extra_config={"n_threads": 1})
    rows = _rows_at_thresholds(rng, converted.ir.ensemble, 300)
    np.testing.assert_array_equal(converted.predict_proba(rows), model.predict_proba(rows))
    float32_route = converted._cpu_runner("c-walk", "float32").program
    float64_route = converted._cpu_runner("c-walk", "float64").program
    assert float64_route.float_rows.walk is float32_route


def test_a_float_walk_is_shared_only_for_its_own_ensemble_and_threads(rng):
    ens, other = _ensemble(rng), _ensemble(rng)
    walk = c_walk.CTreeWalk(ens, "float32", 1)
    assert c_walk._float_walk(ens, 1) is walk
    assert c_walk._float_walk(ens, 2) is not walk  # another thread count
    # an entry left by an ensemble whose id the new one took over
    c_walk._FLOAT_WALKS[(id(other), 1)] = walk
    assert c_walk._float_walk(other, 1) is not walk
    X = _rows_at_thresholds(rng, other, 50)
    np.testing.assert_array_equal(c_walk.CTreeWalk(other, "float64")(X)[0], predict(other, X)[0])
