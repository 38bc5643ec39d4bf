"""ONNX ``Softmax`` against ONNX Runtime: MLAS's kernels (the row maximum, its
vectorized exp by fused multiply-adds, a 16-lane sum, a multiply by ``1 / sum``)
mirrored bit for bit, on one row, two rows and big batches, with extreme logits,
NaN and infinities; and skl2onnx's multiclass MLPClassifier graphs, which end in it."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter
from woodstar.ir.families.onnx_ops import NumpyMath, OnnxSoftmax, exact_fma32

from ._graphs import MATCHES_THIS_CPU, assert_calls_match, session
from .test_linear_pipelines import _rows
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")


COVERS_OPS = ("onnx_softmax",)
EXTREMES = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3e38, -3e38, 1e-40, -120.0, -104.0,
                     -103.0, -88.5, -87.5, 88.0, 89.0, 1.0], dtype=np.float32)


def _softmax_graph(width, dtype="float", axis=-1):
    from onnx import TensorProto, helper

    elem = TensorProto.FLOAT if dtype == "float" else TensorProto.DOUBLE
    graph = helper.make_graph(
        [helper.make_node("Softmax", ["X"], ["Y"], axis=axis)], "softmax",
        [helper.make_tensor_value_info("X", elem, [None, width])],
        [helper.make_tensor_value_info("Y", elem, [None, width])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _logits(rng, n_rows, width):
    """Rows at several scales (differences past exp's underflow included), then rows
    drawn from ``EXTREMES``."""
    scale = rng.choice([0.01, 1.0, 10.0, 40.0, 80.0], size=(n_rows, 1))
    X = (rng.normal(size=(n_rows, width)) * scale).astype(np.float32)
    k = n_rows // 5
    X[:k] = rng.choice(EXTREMES, size=(k, width))
    return X


def _equal(got, expected):
    np.testing.assert_array_equal(np.asarray(got, np.float32), expected)


@pytest.mark.parametrize("width", [1, 2, 3, 5, 8, 9, 16, 17, 40, 50])
@MATCHES_THIS_CPU
def test_softmax_kernel_is_onnx_runtimes(rng, width):
    """The NumPy kernel on a big batch: every lane layout of the sum (up to 16
    columns, one pass of 48, a masked tail)."""
    model = _softmax_graph(width)
    X = _logits(rng, 20000, width)
    expected = session(model).run(None, {"X": X})[0]
    _equal(OnnxSoftmax(width=width).reference([X])[0], expected)


@pytest.mark.parametrize("width", [3, 10, 20])
@MATCHES_THIS_CPU
def test_softmax_routes_one_row_two_rows_and_batch(rng, width):
    model = _softmax_graph(width)
    containers = [woodstar.convert(model, "torch"),
                  woodstar.convert(model, "torch", extra_config={"cpu_route": "program"}),
                  woodstar.convert(model, "torch.jit")]
    assert_calls_match(model, _logits(rng, 30, width), containers)


@MATCHES_THIS_CPU
def test_softmax_program_on_a_big_batch(rng):
    model = _softmax_graph(7)
    X = _logits(rng, 5000, 7)
    expected = session(model).run(None, {"X": X})[0]
    container = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    _equal(container.predict(X), expected)


def test_exact_fma_rounds_once():
    """(1 + 2^-12)^2 is 1 + 2^-11 + 2^-24, halfway between two float32 values; adding
    +-2^-60 decides the rounding, which a float64 sum (then float32) loses."""
    a = np.full(2, 1 + 2.0 ** -12, np.float32)
    c = np.array([2.0 ** -60, -(2.0 ** -60)], np.float32)
    got = exact_fma32(NumpyMath, a, a, c)
    np.testing.assert_array_equal(got, np.array([1 + 2.0 ** -11 + 2.0 ** -23, 1 + 2.0 ** -11],
                                                np.float32))
    twice = (a.astype(np.float64) * a + c).astype(np.float32)
    assert twice[0] != got[0]  # the naive form rounds twice here
    torch = pytest.importorskip("torch")
    from woodstar.lowering.families.onnx_ops import TorchMath

    program = exact_fma32(TorchMath, torch.from_numpy(a), torch.from_numpy(a),
                          torch.from_numpy(c))
    np.testing.assert_array_equal(program.numpy(), got)


def _round_to_float32(value):
    """The float32 nearest the exact rational ``value`` (ties to even)."""
    from fractions import Fraction

    guess = np.float32(float(value))
    if Fraction(float(guess)) > value:
        below, above = np.nextafter(guess, np.float32(-np.inf)), guess
    else:
        below, above = guess, np.nextafter(guess, np.float32(np.inf))
    low, high = value - Fraction(float(below)), Fraction(float(above)) - value
    if low != high:
        return below if low < high else above
    return below if int(below.view(np.int32)) % 2 == 0 else above


def test_exact_fma_on_near_ties(rng):
    """Products with few significant bits plus addends at and beside the float32
    halfway points (both signs, across powers of two), against exact rationals."""
    from fractions import Fraction

    n = 3000
    a = (1 + rng.integers(0, 64, n) * 2.0 ** -12) * rng.choice([1.0, -1.0, 0.5, 2.0], n)
    b = (1 + rng.integers(0, 64, n) * 2.0 ** -12) * rng.choice([1.0, 0.25, 4.0], n)
    a, b = a.astype(np.float32), b.astype(np.float32)
    tie = rng.choice([0.0, 2.0 ** -24, -(2.0 ** -24), 2.0 ** -25], n)
    nudge = rng.choice([0.0, 2.0 ** -50, -(2.0 ** -50), 2.0 ** -70], n)
    c = (tie * np.abs(a.astype(np.float64) * b) + nudge).astype(np.float32)
    got = exact_fma32(NumpyMath, a, b, c)
    exact = np.array([_round_to_float32(Fraction(float(x)) * Fraction(float(y)) +
                                        Fraction(float(z))) for x, y, z in zip(a, b, c)],
                     np.float32)
    np.testing.assert_array_equal(got, exact)


def _mlp_classifier(rng, classes, zipmap, hidden=(10,)):
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.neural_network import MLPClassifier

    X = rng.normal(size=(300, 6)).astype(np.float32)
    index = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5) + 2 * (X[:, 2] * X[:, 3] > 0)
    y = np.asarray(classes)[index % len(classes)]
    model = MLPClassifier(hidden_layer_sizes=hidden, max_iter=80,
                          random_state=int(rng.integers(1 << 30))).fit(X, y)
    return skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                            options={"zipmap": zipmap})


@FAST_BACKENDS
@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@pytest.mark.parametrize("zipmap", [False, True])
@pytest.mark.parametrize("classes", [[0, 1, 2], ["ant", "bee", "cat", "dog", "eel"]])
@MATCHES_THIS_CPU
def test_skl2onnx_multiclass_mlp_classifier(backend, rng, zipmap, classes):
    """Softmax, ArgMax and the class lookup: labels and probabilities are ONNX
    Runtime's to the bit, NaN rows and large inputs included."""
    model = _mlp_classifier(rng, classes, zipmap)
    X = _rows(rng, 400, 6, nan=0.03)
    X[:40] *= 50  # logits far apart: exps that underflow
    check(model, X, backend)


@pytest.mark.filterwarnings("ignore::sklearn.exceptions.ConvergenceWarning")
@MATCHES_THIS_CPU
def test_multiclass_mlp_one_row_and_two_rows(rng):
    model = _mlp_classifier(rng, [3, 5, 7, 9], False, hidden=(20, 8))
    containers = [woodstar.convert(model, "torch"),
                  woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})]
    assert_calls_match(model, _rows(rng, 12, 6, nan=0.05), containers)


def test_double_softmax_is_refused():
    with pytest.raises(MissingConverter, match="Softmax.*float"):
        woodstar.convert(_softmax_graph(3, dtype="double"), "torch")


def test_softmax_over_rows_is_refused():
    with pytest.raises(MissingConverter, match="axis"):
        woodstar.convert(_softmax_graph(3, axis=0), "torch")


def test_mlas_exp_traces_under_torchdynamo():
    """MLAS's exp constants are Python floats: NumPy scalars in a module dict made
    TorchDynamo fail its own guard (torch.compile of any Softmax graph crashed)."""
    import torch

    from woodstar.ir.families.onnx_ops import mlas_exp_avx512
    from woodstar.lowering.families.onnx_ops import TorchMath

    traced = torch.compile(lambda d: mlas_exp_avx512(TorchMath, d), backend="eager",
                           fullgraph=True)
    d = torch.tensor([-104.0, -87.5, -1.0, -1e-8, 0.0, float("nan")], dtype=torch.float32)
    with torch.inference_mode():  # as woodstar's programs run
        got = traced(d).numpy()
    np.testing.assert_array_equal(got, mlas_exp_avx512(NumpyMath, d.numpy()))
