"""glibc's logf (behind ReduceLogSumExp, ErfInv and the naive Bayes graphs) on the
exporting backends: each value's exponent is found by comparisons instead of frexp,
which the ONNX exporter cannot write, so the ONNX program gives ONNX Runtime's answers
to the bit; TVM is refused where its build loses a NaN or the mirrored fused
multiply-adds."""

import numpy as np
import pytest
import torch

import woodstar
from woodstar.exceptions import MissingConverter
from woodstar.lowering.families.onnx_ops import exportable_frexp

from ._graphs import session
from .test_math_graphs import _fit_rows, _graph, edge_rows

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")


def test_exportable_frexp_is_numpys(rng):
    """Every exponent of float32 (subnormals included), each power of two and the float
    just below it, and random bit patterns of positive finite floats."""
    powers = (np.arange(1, 255, dtype=np.int64) << 23)
    bits = np.concatenate([rng.integers(1, 0x7F800000, size=200_000), np.arange(1, 3000),
                           0x7F800000 - np.arange(1, 3000), powers, powers - 1])
    x = bits.astype(np.uint32).view(np.float32)
    mantissa, exponent = exportable_frexp(torch.from_numpy(x))
    expected_m, expected_e = np.frexp(x.astype(np.float64))
    np.testing.assert_array_equal(mantissa.numpy(), expected_m)
    np.testing.assert_array_equal(exponent.numpy(), expected_e.astype(np.float64))


def _naive_bayes(name, rng):
    import sklearn.naive_bayes

    X, y = _fit_rows(rng, 5)
    if name in ("MultinomialNB", "ComplementNB"):
        X = np.abs(X)
    model = getattr(sklearn.naive_bayes, name)().fit(X, y)
    return _graph(model, X)


def _plain_rows(rng, n_rows, n_features):
    """Random rows with NaN, +-inf and zeros of both signs: ``edge_rows`` without its
    huge and tiny values (on rows mixing 1e-30 and 88, MultinomialNB's MatMul differs
    from ONNX Runtime's in its last bits on every route, the CPU one included: a matter
    of the MatMul mirror, not of the logarithm tested here)."""
    X = (2.0 * rng.normal(size=(n_rows, n_features))).astype(np.float32)
    mask = rng.random(X.shape) < 0.1
    X[mask] = rng.choice(np.array([np.nan, np.inf, -np.inf, 0.0, -0.0], np.float32),
                         size=int(mask.sum()))
    return X


@pytest.mark.parametrize("backend", ["onnx"])  # sampled on CI as the other frontend cases
@pytest.mark.parametrize("name", ["GaussianNB", "BernoulliNB", "MultinomialNB", "ComplementNB"])
def test_naive_bayes_on_onnx(rng, name, backend):
    graph = _naive_bayes(name, rng)
    rows = _plain_rows(rng, 1001, 5)
    if name in ("MultinomialNB", "ComplementNB"):
        rows = np.abs(rows)  # the inputs these models take
    container = woodstar.convert(graph, "onnx")
    for call in (rows, rows[:1], rows[1:8]):
        labels, proba = session(graph).run(None, {"X": call})
        np.testing.assert_array_equal(container.predict(call), labels, err_msg=f"{len(call)} rows")
        np.testing.assert_array_equal(container.predict_proba(call), proba,
                                      err_msg=f"{len(call)} rows")


def test_naive_bayes_is_refused_on_tvm_by_its_exp(rng):
    from woodstar.backends import all_backends

    if not all_backends()["tvm"].is_available()[0]:
        pytest.skip("tvm is not installed")
    with pytest.raises(MissingConverter, match="Exp.*tvm"):
        woodstar.convert(_naive_bayes("GaussianNB", rng), "tvm")


def _log_sum_exp_graph():
    from onnx import TensorProto, helper

    node = helper.make_node("ReduceLogSumExp", ["X"], ["Y"], axes=[1], keepdims=1)
    graph = helper.make_graph(
        [node], "lse", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_log_sum_exp_on_onnx(rng):
    graph = _log_sum_exp_graph()
    rows = edge_rows(rng, 1003, 4, scale=20.0)
    container = woodstar.convert(graph, "onnx")
    for call in (rows, rows[:1], rows[1:6]):
        (expected,) = session(graph).run(None, {"X": call})
        np.testing.assert_array_equal(container.predict(call).reshape(expected.shape), expected)


def test_log_sum_exp_is_refused_on_tvm():
    from woodstar.backends import all_backends

    if not all_backends()["tvm"].is_available()[0]:
        pytest.skip("tvm is not installed")
    with pytest.raises(MissingConverter, match="ReduceLogSumExp.*tvm.*NaN"):
        woodstar.convert(_log_sum_exp_graph(), "tvm")
