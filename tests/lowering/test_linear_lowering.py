"""Lowering of linear models and column-wise steps: the Torch modules and the NumPy
route against the IR's reference, including the roundings and the edge cases of the
post-transforms."""

import numpy as np
import pytest
import torch

from woodstar.ir import ColumnOps, Head, LinearModel, ModelIR, chain
from woodstar.ir.transforms import apply_post_transform
from woodstar.lowering import lower_model
from woodstar.lowering.column_ops import ColumnOpsModule
from woodstar.runtimes import NumpyGraph
from woodstar.lowering.post_transforms import PostTransform

N = 4


def _step(rng, cast):
    ops = ("fill_nan", "sub", "div", "mul", "add", "maximum", "minimum")
    operands = (rng.normal(size=N) * 1e-3, rng.normal(size=N) * 100, rng.random(N) + 0.01,
                rng.normal(size=N), rng.normal(size=N), np.full(N, -0.3), np.full(N, 0.7))
    return ColumnOps("Scaler", N, ops, operands, (cast,) * len(ops)).validate()


def _steps_route(step, dtype):
    head = Head(estimator="Test", task="transform", n_features=N, methods=("transform",))
    graph = NumpyGraph(chain(head, steps=(step,)).validate(), dtype)
    return lambda X: graph(X)[0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("cast", [True, False])
def test_steps_equal_the_reference_bit_for_bit(dtype, cast, rng):
    step = _step(rng, cast)
    X = (rng.normal(size=(300, N)) * 1000).astype(dtype)
    X[rng.random(X.shape) < 0.05] = np.nan
    expected = step.apply(X)
    got_numpy = _steps_route(step, dtype)(X)
    got_torch = ColumnOpsModule(step, dtype)(torch.from_numpy(X)).numpy()
    assert not np.isnan(expected).any()  # the first step filled every NaN
    for got in (got_numpy, got_torch):
        assert got.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(got, expected)


def test_numpy_steps_never_write_the_callers_rows(rng):
    step = _step(rng, True)
    X = rng.normal(size=(5, N))
    before = X.copy()
    _steps_route(step, "float64")(X)
    np.testing.assert_array_equal(X, before)


@pytest.mark.parametrize("coef_dtype", [np.float32, np.float64])
@pytest.mark.parametrize("input_dtype", ["float32", "float64"])
def test_linear_scores_follow_numpys_dtype_rules(coef_dtype, input_dtype, rng):
    linear = LinearModel(coef=rng.normal(size=(3, N)).astype(coef_dtype),
                         intercept=rng.normal(size=3).astype(coef_dtype), post_transform="softmax")
    head = Head(estimator="Test", task="classification", n_features=N,
                methods=("predict", "predict_proba"), classes=(np.arange(3),))
    model_ir = chain(head, linear=linear).validate()
    X = rng.normal(size=(50, N)).astype(input_dtype)
    expected = linear.scores(X)
    raw_numpy, proba_numpy = NumpyGraph(model_ir, input_dtype)(X)
    np.testing.assert_array_equal(raw_numpy, expected)
    raw_torch, proba_torch = (t.numpy() for t in lower_model(model_ir, None, input_dtype)(torch.from_numpy(X)))
    assert raw_torch.dtype == expected.dtype == raw_numpy.dtype
    tol = 1e-6 if expected.dtype == np.float32 else 1e-12
    np.testing.assert_allclose(raw_torch, expected, rtol=tol, atol=tol)
    np.testing.assert_allclose(proba_torch, proba_numpy, rtol=tol, atol=tol)


def test_sigmoid_ovr_normalises_and_gives_uniform_rows_when_all_sigmoids_vanish():
    raw = np.array([[0.0, 1.0, -1.0], [-1000.0, -1000.0, -1000.0], [np.inf, 0.0, -np.inf]])
    expected = 1.0 / (1.0 + np.exp(-raw[:1]))
    expected = expected / expected.sum()
    numpy_out = apply_post_transform("sigmoid_ovr", raw)
    torch_out = PostTransform("sigmoid_ovr")(torch.from_numpy(raw)).numpy()
    for out in (numpy_out, torch_out):
        np.testing.assert_allclose(out[0], expected[0], rtol=1e-15)
        np.testing.assert_array_equal(out[1], np.full(3, 1 / 3))
        np.testing.assert_allclose(out.sum(axis=1), 1.0, rtol=1e-15)


def test_sigmoid_binary_matches_the_textbook_sigmoid_on_both_halves():
    z = np.array([[-800.0], [-30.0], [-1e-300], [0.0], [1e-300], [2.5], [800.0], [np.nan]])
    out = apply_post_transform("sigmoid_binary", z)
    with np.errstate(over="ignore"):
        p = 1.0 / (1.0 + np.exp(-z[:, 0]))
    np.testing.assert_allclose(out[:, 1], p, rtol=1e-15, atol=0)
    np.testing.assert_array_equal(out[:, 0][:-1], 1.0 - out[:, 1][:-1])
    assert np.isnan(out[-1]).all()
