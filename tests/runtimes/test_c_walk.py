"""The compiled walk: its build (cached, refused with a reason), its row blocks, and
the container's fallback without it (its equality with the IR reference on edge trees
is in test_cpu_routes.py)."""

import os

import numpy as np
import pytest

from woodstar.ir.reference import predict
from woodstar.runtimes import _native, c_walk

from tests.lowering.test_strategies import inputs, random_ensemble

needs_compiler = pytest.mark.skipif(not c_walk.available(),
                                    reason=str(c_walk.unavailable_reason()))


@pytest.fixture
def fresh_build(monkeypatch, tmp_path):
    """A process that has not loaded the library yet, with an empty cache."""
    monkeypatch.setattr(c_walk, "_state", {})
    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path / "cache"))
    return tmp_path / "cache"


@needs_compiler
def test_the_build_is_cached_by_source_and_reused(fresh_build, monkeypatch):
    assert c_walk.available()
    built = list(fresh_build.glob("c_walk-*.so"))
    assert len(built) == 1 and not list(fresh_build.glob("*.tmp"))
    monkeypatch.setattr(c_walk, "_state", {})
    monkeypatch.setattr(_native.subprocess, "run", lambda *a, **k: pytest.fail("rebuilt"))
    assert c_walk.available()  # loaded from the cache, no compiler run


def test_with_a_compiler_the_walk_builds():
    # Otherwise every compiled-walk test would skip: a broken c_walk.c must fail here.
    if c_walk._compiler() is None:
        pytest.skip("no C compiler here")
    assert c_walk.available(), c_walk.unavailable_reason()


@needs_compiler
def test_threads_converting_at_once_build_once(fresh_build, monkeypatch):
    from concurrent.futures import ThreadPoolExecutor

    builds = []
    real_run = _native.subprocess.run
    monkeypatch.setattr(_native.subprocess, "run",
                        lambda *a, **k: builds.append(1) or real_run(*a, **k))
    with ThreadPoolExecutor(4) as pool:
        assert all(pool.map(lambda _: c_walk.available(), range(8)))
    assert len(builds) == 1
    assert len(list(fresh_build.glob("c_walk-*.so"))) == 1 and not list(fresh_build.glob("*.tmp"))


@needs_compiler
def test_a_read_only_cache_falls_back_to_the_temp_dir(fresh_build, monkeypatch, tmp_path):
    fresh_build.mkdir(parents=True)
    real_access = os.access  # (a chmod would not stop root, so the check is stubbed)
    monkeypatch.setattr(_native.os, "access",
                        lambda path, mode: False if path == fresh_build else real_access(path, mode))
    monkeypatch.setattr(_native.tempfile, "gettempdir", lambda: str(tmp_path / "tmp"))
    assert c_walk.available(), c_walk.unavailable_reason()
    assert list((tmp_path / "tmp").glob("woodstar-*/c_walk-*.so"))
    assert not list(fresh_build.iterdir())


def test_windows_is_refused_with_a_reason(fresh_build, monkeypatch):
    monkeypatch.setattr(c_walk.sys, "platform", "win32")
    assert not c_walk.available()
    assert "Linux and macOS" in c_walk.unavailable_reason()


def test_an_unexpected_build_error_is_a_reason_not_a_crash(fresh_build, monkeypatch):
    monkeypatch.setattr(c_walk, "_compiler", lambda: "cc")
    monkeypatch.setattr(c_walk, "_build", lambda compiler: 1 / 0)
    assert not c_walk.available()
    assert "ZeroDivisionError" in c_walk.unavailable_reason()


def test_without_a_compiler_it_says_why(fresh_build, monkeypatch):
    monkeypatch.setattr(_native.shutil, "which", lambda name: None)
    assert not c_walk.available()
    assert "no C compiler" in c_walk.unavailable_reason()
    with pytest.raises(RuntimeError, match="no C compiler"):
        c_walk.CTreeWalk(random_ensemble(np.random.default_rng(0)), "float32")


@needs_compiler
def test_a_failed_build_says_why_and_leaves_nothing(fresh_build, monkeypatch, tmp_path):
    broken = tmp_path / "broken.c"
    broken.write_text("this is not C\n")
    monkeypatch.setattr(c_walk, "SOURCE", broken)
    assert not c_walk.available()
    assert "failed" in c_walk.unavailable_reason()
    assert not list(fresh_build.glob("*"))


@needs_compiler
@pytest.mark.parametrize("precision", ["float32", "float64"])
def test_rows_split_over_threads_give_the_same_bits(precision, rng):
    ens = random_ensemble(rng, n_trees=30, max_depth=7, leaf_width=2, n_outputs=2)
    X = inputs(rng, ens.n_features, n=701)
    if precision == "float32":
        X = X.astype(np.float32).astype(np.float64)
    walk = c_walk.CTreeWalk(ens, precision, n_threads=3)
    walk.parallel_min_steps = 0
    np.testing.assert_array_equal(walk(X.astype(precision))[0], predict(ens, X)[0])
    assert walk.last_threads == 3
    np.testing.assert_array_equal(walk(X[:2].astype(precision))[0], predict(ens, X[:2])[0])
    assert walk.last_threads == 2  # never more threads than rows
    walk.parallel_min_steps = 10 ** 12
    walk(X.astype(precision))
    assert walk.last_threads == 1  # small calls stay on the calling thread


@needs_compiler
def test_read_only_rows_are_walked_in_place(rng):
    ens = random_ensemble(rng)
    X = inputs(rng, ens.n_features, n=9).astype(np.float32)
    walk = c_walk.CTreeWalk(ens, "float32")
    expected = walk(X)[0]
    X.setflags(write=False)
    np.testing.assert_array_equal(walk(X)[0], expected)
    np.testing.assert_array_equal(expected, predict(ens, X.astype(np.float64))[0])


@needs_compiler
def test_wrong_shapes_are_refused_before_the_kernel(rng):
    ens = random_ensemble(rng)
    walk = c_walk.CTreeWalk(ens, "float32")
    with pytest.raises(ValueError, match="expected"):
        walk(np.zeros((3, ens.n_features + 1), np.float32))
    assert walk(np.zeros((0, ens.n_features), np.float32))[0].shape == (0, ens.n_outputs)


# ---------------------------------------------------------------- in the container
sklearn = pytest.importorskip("sklearn")
from sklearn import ensemble as sk_ensemble  # noqa: E402

import woodstar  # noqa: E402


def test_container_falls_back_without_a_compiler(fresh_build, monkeypatch, rng):
    monkeypatch.setattr(_native.shutil, "which", lambda name: None)
    X = rng.normal(size=(200, 4))
    model = sk_ensemble.GradientBoostingRegressor(n_estimators=10, random_state=0).fit(X, X[:, 0])
    converted = woodstar.convert(model, "torch")
    assert converted.route in ("onnx-ml", "numpy-walk")
    X_test = rng.normal(size=(5, 4)).astype(np.float32)
    np.testing.assert_array_equal(converted.predict(X_test), model.predict(X_test))


DEEP_VARIANTS = {
    "numerical": {},
    "vector-leaves": dict(leaf_width=2, n_outputs=3),
    "missing-range": dict(missing_range=(-999.0, -999.0)),
    "categorical": dict(categorical=True, categorical_rule="truncate"),
    "float32-sums": dict(sum_precision="float32", input_precision="float32"),
}


@needs_compiler
@pytest.mark.parametrize("variant", sorted(DEEP_VARIANTS))
def test_few_rows_of_deep_trees_match_the_reference(variant, precision, rng):
    """Calls under 8 rows of a model with trees deeper than 12 take the walk whose lanes
    take the next tree as soon as theirs is done (c_walk.c, REFILL_MIN_DEPTH); each row
    must still get its trees' leaves in tree order, in every kind of step."""
    fields = dict(DEEP_VARIANTS[variant])
    ens = random_ensemble(rng, n_trees=12, n_features=5, max_depth=15, **fields)
    if variant == "float32-sums":  # XGBoost's sums: float32 leaves and base score
        ens = ens.replace(leaf_value=ens.leaf_value.astype(np.float32).astype(np.float64),
                          base_score=ens.base_score.astype(np.float32).astype(np.float64))
    assert ens.tree_depths().max() > 12
    walk = c_walk.CTreeWalk(ens, precision)
    for rows in range(1, 8):
        X = inputs(rng, ens.n_features, n=rows)
        if variant == "missing-range":
            X[rng.random(X.shape) < 0.2] = -999.0
        if precision == "float32" or ens.input_precision == "float32":
            X = X.astype(np.float32).astype(np.float64)
        np.testing.assert_array_equal(walk(X.astype(precision))[0], predict(ens, X)[0],
                                      err_msg=f"{rows} rows")


@needs_compiler
def test_few_rows_of_more_trees_than_one_chunk(rng):
    """Past 256 trees the refilled walk keeps its leaves chunk by chunk; a row's sum must
    still run over every tree in order (one deep tree sends the model down that walk)."""
    from woodstar.ir.builder import EnsembleBuilder

    from tests.lowering.test_strategies import random_tree

    def depth(tree, node=0):
        if tree["left"][node] < 0:
            return 0
        return 1 + max(depth(tree, tree["left"][node]), depth(tree, tree["right"][node]))

    deep = random_tree(rng, 4, 14, 1, False)
    while depth(deep) <= 12:  # a random tree may stop early
        deep = random_tree(rng, 4, 14, 1, False)
    builder = EnsembleBuilder(1)
    for t in range(600):
        tree = deep if t == 300 else random_tree(rng, 4, 2, 1, False)
        builder.add_tree(**tree, comparison=rng.integers(0, 2, len(tree["feature"])))
    ens = builder.build(n_features=4, n_outputs=1, base_score=np.array([0.25]))
    assert ens.tree_depths().max() > 12
    walk = c_walk.CTreeWalk(ens, "float64")
    for rows in (1, 5):
        X = inputs(rng, 4, n=rows)
        np.testing.assert_array_equal(walk(X)[0], predict(ens, X)[0])
