"""TVM on models whose missing values are a range of numbers (XGBoost's ``missing=-1``,
LightGBM's ``zero_as_missing``): the lowered program fills those values with NaN
(``torch.full((), nan)``), which TVM's legalisation of ``full`` rejected
(``TypeError: argument of type 'PrimType' is not iterable``). Parity with the source
library on rows that sit on, next to and far from the missing values."""

import math

import numpy as np
import pytest
import torch

import woodstar
from woodstar.backends import all_backends

N_FEATURES = 5


def _needs_tvm():
    available, reason = all_backends()["tvm"].is_available()
    if not available:
        pytest.skip(reason)


def _rows(rng, n, special):
    """Random rows with NaN, the ``special`` values and their float32 neighbours."""
    X = rng.normal(size=(n, N_FEATURES))
    neighbours = [float(np.nextafter(np.float32(v), np.float32(s)))
                  for v in special for s in (-np.inf, np.inf)]
    picks = np.array(list(special) + neighbours + [np.nan])
    mask = rng.random(X.shape) < 0.3
    X[mask] = picks[rng.integers(0, len(picks), mask.sum())]
    return X


def test_xgboost_regressor_with_missing_minus_one_converts_on_tvm(rng):
    _needs_tvm()
    xgboost = pytest.importorskip("xgboost")
    X = _rows(rng, 400, special=(-1.0, 0.0))
    y = np.nan_to_num(X[:, 0]) * 2 + np.where(X[:, 1] == -1, 3.0, 0.0)
    model = xgboost.XGBRegressor(n_estimators=8, max_depth=4, missing=-1.0).fit(X, y)
    converted = woodstar.convert(model, "tvm")
    rows = _rows(rng, 300, special=(-1.0, 0.0))
    for X_in in (rows.astype(np.float32), rows):
        # XGBoost sums in float32, woodstar in float64 (see README, "Exactness").
        np.testing.assert_allclose(converted.predict(X_in), model.predict(X_in),
                                   rtol=1e-6, atol=1e-6)


def test_lightgbm_classifier_with_zero_as_missing_converts_on_tvm(rng):
    _needs_tvm()
    lightgbm = pytest.importorskip("lightgbm")
    tiny = (0.0, 1e-36, -1e-36, 1e-34)  # |x| <= 1e-35 is LightGBM's zero
    X = _rows(rng, 400, special=tiny)
    y = (np.nan_to_num(X[:, 0]) > 0).astype(int) + (X[:, 1] == 0)
    model = lightgbm.LGBMClassifier(n_estimators=8, num_leaves=8, min_child_samples=5,
                                    zero_as_missing=True, verbose=-1).fit(X, y)
    converted = woodstar.convert(model, "tvm")
    rows = _rows(rng, 300, special=tiny)
    np.testing.assert_array_equal(converted.predict(rows), model.predict(rows))
    np.testing.assert_allclose(converted.predict_proba(rows), model.predict_proba(rows),
                               rtol=1e-12, atol=1e-12)


def test_tvm_rewrite_removes_every_non_finite_fill():
    """The rewrite alone (no TVM needed): ``full`` with NaN or +-inf is replaced by
    finite fills and arithmetic on them, with the same values."""
    from woodstar.backends.tvm_backend import _make_tvm_friendly

    class Fills(torch.nn.Module):
        def forward(self, x):
            shape = ()
            return (x + torch.full(shape, float("nan"), dtype=x.dtype),
                    x + torch.full(shape, float("inf"), dtype=x.dtype),
                    x + torch.full(shape, float("-inf"), dtype=x.dtype))

    x = torch.zeros((2, 3), dtype=torch.float64)
    program = torch.export.export(Fills(), (x,), dynamic_shapes=({0: torch.export.Dim("batch")},))
    program = _make_tvm_friendly(program.run_decompositions())
    fills = [n.args[1] for n in program.graph.nodes
             if n.op == "call_function" and n.target is torch.ops.aten.full.default]
    assert fills and all(math.isfinite(v) for v in fills)
    nan, plus, minus = program.module()(x)
    assert torch.isnan(nan).all()
    assert torch.equal(plus, torch.full_like(x, math.inf))
    assert torch.equal(minus, torch.full_like(x, -math.inf))
