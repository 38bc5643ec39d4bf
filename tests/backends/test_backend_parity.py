"""Every backend against Torch eager, for every strategy, on scikit-learn models.

A difference here is a backend bug: the eager module is the reference (its own parity
with the source libraries is tested elsewhere). Backends that compile for seconds run
a reduced matrix: the hardest model (categorical splits, NaN routing) under every
strategy, its float64 program under GEMM only, and IsolationForest's transform once.
"""

import numpy as np
import pytest

import woodstar

from ._helpers import SLOW_BACKENDS, assert_same_as, inputs_for

MODELS = ("rf", "gb", "hgb_cat_nan", "iforest")
STRATEGIES = ("gemm", "tree_trav", "perf_tree_trav")
SLOW_CASES = {("hgb_cat_nan", s) for s in STRATEGIES} | {("iforest", "tree_trav")}


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("strategy_name", STRATEGIES)
def test_backend_matches_torch_eager(backend, name, strategy_name, sk_models, rng):
    if backend in SLOW_BACKENDS and (name, strategy_name) not in SLOW_CASES:
        pytest.skip(f"{backend} compiles slowly: reduced matrix (see module docstring)")
    model, X = sk_models[name]
    config = {"tree_implementation": strategy_name}
    reference = woodstar.convert(model, "torch", extra_config=config)
    converted = woodstar.convert(model, backend, extra_config=config)
    assert converted.backend == woodstar.backends.get_backend(backend).name
    assert converted.strategy == strategy_name
    rows = inputs_for(model, X, rng)
    # float64 input: float64 program where the model compares in float64 (HGB).
    precision = "float64" if model.__class__.__name__.startswith("Hist") else "float32"
    if backend in SLOW_BACKENDS and strategy_name != "gemm":
        rows, precision = rows.astype(np.float32), "float32"  # one compile per case
    assert_same_as(converted, reference, rows, precision)
    assert_same_as(converted, reference, rows.astype(np.float32), "float32")
    # Batch sizes other than the example's (2): one row, odd sizes.
    for n in (1, 3, 17):
        assert_same_as(converted, reference, rows[:n], precision)


def test_every_backend_matches_source_model(backend, sk_models, rng):
    """One end-to-end check per backend against scikit-learn itself (the slow backends'
    reduced matrix above already runs this model under the default strategy)."""
    if backend in SLOW_BACKENDS:
        pytest.skip(f"{backend} compiles slowly: covered by the reduced matrix")
    model, X = sk_models["hgb_cat_nan"]
    converted = woodstar.convert(model, backend)
    rows = inputs_for(model, X, rng)
    np.testing.assert_array_equal(converted.predict(rows), model.predict(rows))
    np.testing.assert_allclose(converted.predict_proba(rows), model.predict_proba(rows),
                               rtol=1e-12, atol=1e-12)


def test_pipeline_backend_matches_torch_eager_and_source(backend, rng):
    """The whole pipeline (an imputer, two scalers, then a multinomial logistic
    regression) is one exported program on every backend, the slow ones included."""
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MinMaxScaler, StandardScaler

    X = rng.normal(size=(300, 5)) * [1, 50, 0.02, 3, 1] + [0, 10, 0, -4, 1]
    y = np.digitize(X[:, 0] + X[:, 3] / 3, [-0.5, 0.5])
    X[rng.random(X.shape) < 0.1] = np.nan
    model = make_pipeline(SimpleImputer(strategy="median"), StandardScaler(),
                          MinMaxScaler(clip=True), LogisticRegression()).fit(X, y)
    reference = woodstar.convert(model, "torch", extra_config={"small_batch_rows": 0})
    converted = woodstar.convert(model, backend)
    rows = rng.normal(size=(40, 5)) * [2, 80, 0.05, 5, 2]
    rows[rng.random(rows.shape) < 0.15] = np.nan
    for X_in, precision in ((rows, "float64"), (rows.astype(np.float32), "float32")):
        if backend in SLOW_BACKENDS and precision == "float64":
            continue  # one compile per case
        assert_same_as(converted, reference, X_in, "float64")
        np.testing.assert_array_equal(converted.predict(X_in), model.predict(X_in))
        np.testing.assert_allclose(converted.predict_proba(X_in), model.predict_proba(X_in),
                                   rtol=1e-12, atol=1e-12)
