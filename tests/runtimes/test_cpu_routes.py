"""The CPU routes (the NumPy walk, ONNX Runtime's tree kernel on the IR) == the IR
reference to the bit, on hand-built edge trees with NaN, +-inf, values on thresholds,
``<`` splits, vector leaves and missing ranges; and the container uses them only where
it should. ONNX-specific checks are in test_onnx_ml.py."""

import numpy as np
import pytest

from woodstar.exceptions import ConstantError, MissingConverter
from woodstar.ir.reference import predict
from woodstar.runtimes import c_walk, onnx_ml
from woodstar.runtimes.numpy_walk import NumpyTreeWalk
from woodstar.lowering.routing import small_batch_rows

from tests.lowering.test_gbdt_semantics import ZERO, _ensemble as missing_range_ensemble
from tests.lowering.test_gbdt_semantics import _inputs as missing_range_inputs
from tests.lowering.test_strategies import CASES, inputs, random_ensemble

NUMERICAL_CASES = sorted(c for c in CASES if "categorical" not in CASES[c])


def _onnx_ml_route():
    pytest.importorskip("onnxruntime")
    from woodstar.runtimes.onnx_ml import OnnxMlTrees

    return OnnxMlTrees


def _c_walk_route():
    from woodstar.runtimes import c_walk

    if not c_walk.available():
        pytest.skip(c_walk.unavailable_reason())
    return c_walk.CTreeWalk


ROUTE_CLASSES = {"numpy": lambda: NumpyTreeWalk, "onnx-ml": _onnx_ml_route, "c-walk": _c_walk_route}


@pytest.mark.parametrize("route", sorted(ROUTE_CLASSES))
@pytest.mark.parametrize("rows", [1, 3, 300])
@pytest.mark.parametrize("case", NUMERICAL_CASES)
def test_route_matches_reference(case, rows, route, precision, rng):
    route_cls = ROUTE_CLASSES[route]()
    ens = random_ensemble(rng, **CASES[case])
    X = inputs(rng, ens.n_features, n=rows)
    if precision == "float32" or ens.input_precision == "float32":
        X = X.astype(np.float32).astype(np.float64)
    raw_ref, transformed_ref = predict(ens, X)
    raw, transformed = route_cls(ens, precision)(X.astype(precision))
    np.testing.assert_array_equal(raw, raw_ref)
    np.testing.assert_array_equal(transformed, transformed_ref)  # the IR's own NumPy transform


@pytest.mark.parametrize("route", ["numpy", "c-walk"])
@pytest.mark.parametrize("missing_range", [(-ZERO, ZERO), (-999.0, -999.0)])
def test_walks_treat_the_missing_range_as_missing(missing_range, route, precision, rng):
    route_cls = ROUTE_CLASSES[route]()
    ens = missing_range_ensemble(rng, missing_range, comparison=0, categorical=False)
    X = missing_range_inputs(rng, ens.n_features, n=50)
    if precision == "float32":
        X = X.astype(np.float32).astype(np.float64)
    assert ens.has_missing_range
    np.testing.assert_array_equal(route_cls(ens, precision)(X.astype(precision))[0],
                                  predict(ens, X)[0])


def test_walk_refuses_categorical_ensembles(rng):
    ens = random_ensemble(rng, **CASES["categorical-exact"])
    assert not NumpyTreeWalk.supports(ens)
    with pytest.raises(ValueError, match="categorical"):
        NumpyTreeWalk(ens, "float32")


# ---------------------------------------------------------------- in the container
sklearn = pytest.importorskip("sklearn")
from sklearn import ensemble as sk_ensemble  # noqa: E402

import woodstar  # noqa: E402


@pytest.fixture(scope="module")
def forest():
    rng = np.random.default_rng(5)
    X = rng.normal(size=(300, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = rng.integers(0, 3, 300)
    return sk_ensemble.RandomForestClassifier(20, max_depth=6, random_state=0).fit(X, y), X


ROUTES = [pytest.param("c-walk", marks=pytest.mark.skipif(
              not c_walk.available(), reason=str(c_walk.unavailable_reason()))),
          pytest.param("onnx-ml", marks=pytest.mark.skipif(
              not onnx_ml.available(), reason="onnxruntime not installed")),
          "numpy"]


@pytest.mark.parametrize("route", ROUTES)
def test_calls_up_to_the_limit_take_the_cpu_route_and_match_the_source(forest, rng, route):
    model, X = forest
    first = "c-walk" if c_walk.available() else "onnx-ml" if onnx_ml.available() else "numpy-walk"
    assert woodstar.convert(model, "torch").route == first
    name = "numpy-walk" if route == "numpy" else route
    limit = small_batch_rows(woodstar.convert(model, "torch").ir.ensemble, route)
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": name,
                                                               "small_batch_rows": min(limit, 10**9)})
    assert converted.route == name and converted._routes.single_row == name
    assert converted._routes.cpu_rows >= 8
    calls = []
    runner = converted._cpu_runner(name, "float32")
    converted._cpu_runners[(name, "float32")] = \
        lambda batch: calls.append(len(batch)) or runner(batch)
    X_test = X[rng.integers(0, len(X), 40)].astype(np.float32)
    for i in range(20):  # one row at a time: every call goes through the route
        np.testing.assert_array_equal(converted.predict_proba(X_test[i:i + 1]),
                                      model.predict_proba(X_test[i:i + 1]))
        assert converted.predict(X_test[i:i + 1]) == model.predict(X_test[i:i + 1])
    assert calls and set(calls) == {1}
    big = np.repeat(X_test, 20, axis=0)
    np.testing.assert_array_equal(converted.predict_proba(big), model.predict_proba(big))
    # The compiled and ONNX-ML routes have no row limit; the NumPy walk hands big
    # batches to Torch.
    assert (len(big) in calls) == (route != "numpy")


def test_batch_size_holds_on_the_cpu_route(forest, rng):
    model, X = forest
    converted = woodstar.convert(model, "torch", extra_config={"batch_size": 7})
    assert converted.route != "program"
    calls = []
    runner = converted._cpu_runner(converted.route, "float32")
    converted._cpu_runners[(converted.route, "float32")] = \
        lambda batch: calls.append(len(batch)) or runner(batch)
    rows = X[:30].astype(np.float32)
    np.testing.assert_array_equal(converted.predict_proba(rows), model.predict_proba(rows))
    assert calls == [7, 7, 7, 7, 2]


@pytest.mark.parametrize("extra_config, backend", [
    ({"small_batch_rows": 0}, "torch"),
    ({"tree_implementation": "tree_trav"}, "torch"),
    ({"cpu_route": "program"}, "torch"),
    ({}, "torch.jit"),
])
def test_walk_is_off_when_asked_or_not_torch(forest, extra_config, backend):
    model, X = forest
    converted = woodstar.convert(model, backend, extra_config=extra_config)
    assert converted._routes.cpu_rows == 0
    converted.predict_proba(X[:1])
    assert not converted._cpu_runners


def test_repr_names_the_cpu_route_where_one_runs(forest):
    model, _ = forest
    converted = woodstar.convert(model, "torch")
    assert f"route={converted.route!r}" in repr(converted)
    assert "route=" not in repr(woodstar.convert(model, "torch",
                                                 extra_config={"small_batch_rows": 0}))


def test_a_route_that_cannot_take_the_model_is_refused(forest):
    model, _ = forest
    with pytest.raises(MissingConverter, match="cpu_route is not supported \\(got 'numpy'\\)"):
        woodstar.convert(model, "torch", extra_config={"cpu_route": "numpy"})
    with pytest.raises(ConstantError, match="cpu_route"):
        woodstar.convert(model, "torch", extra_config={"cpu_route": "fast"})


def test_a_cpu_route_forced_on_another_backend_is_refused(forest):
    """The exporting backends run their own program: a CPU route asked of one is an
    error that says so, not an option silently dropped."""
    model, _ = forest
    for route in ("c-walk", "numpy-walk"):
        with pytest.raises(MissingConverter, match="CPU routes run on the 'torch' backend "
                                                   "\\(this one is 'torch.jit'"):
            woodstar.convert(model, "torch.jit", extra_config={"cpu_route": route})
    converted = woodstar.convert(model, "torch.jit", extra_config={"cpu_route": "program"})
    assert converted._routes.for_rows(1) == "program"


def test_small_batch_rows_is_validated(forest):
    model, _ = forest
    with pytest.raises(ConstantError, match="small_batch_rows"):
        woodstar.convert(model, "torch", extra_config={"small_batch_rows": -3})
    assert woodstar.convert(model, "torch", extra_config={"small_batch_rows": 5})._routes.cpu_rows == 5
