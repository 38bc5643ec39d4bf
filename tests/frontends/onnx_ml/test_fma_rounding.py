"""MLAS's SGEMM adds each product with one fused multiply-add, rounded once. Mirrored
in float64, a product that lies exactly halfway between two float32 values plus a tiny
running sum rounds twice (the tiny part is lost in float64, then the tie goes to even);
the FMA's single rounding goes to the tiny part's side. The mirror corrects those ties
(``exact_sum32``), so MatMul stays ONNX Runtime's to the bit on such rows (they occur
in naive Bayes graphs on rows mixing 1e-30 or subnormal counts with values like 88)."""

import numpy as np
import pytest

import woodstar

from ._graphs import session

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]


def _matmul_graph(weights):
    from onnx import TensorProto, helper, numpy_helper

    k, n = weights.shape
    graph = helper.make_graph(
        [helper.make_node("MatMul", ["X", "W"], ["Y"])], "matmul",
        [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, k])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n])],
        [numpy_helper.from_array(weights.astype(np.float32), "W")])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _halfway_rows():
    """A tiny first term, then 3 times a weight 1 + m * 2^-23: the second product is
    exactly halfway between two float32 values for odd m."""
    rows = []
    for tiny in (1e-30, -1e-30, 1e-40, -1e-40):
        for big in (3.0, -3.0, 88.0, -104.0):
            rows.append([tiny, big])
    return np.array(rows, np.float32)


def _twice_rounded(rows, weights):
    """The float64 mirror without the tie correction (the product plus the running sum
    rounded in float64, then to float32)."""
    first = (rows[:, :1].astype(np.float64) * weights[0].astype(np.float64)).astype(np.float32)
    second = rows[:, 1:].astype(np.float64) * weights[1].astype(np.float64)
    return (second + first.astype(np.float64)).astype(np.float32)


def test_a_tie_broken_by_a_tiny_running_sum_rounds_as_the_fma_does():
    weights = np.array([[1.0] * 4, [1 + m * 2.0 ** -23 for m in (1, 3, 5, 7)]], np.float32)
    graph = _matmul_graph(weights)
    rows = _halfway_rows()
    expected = session(graph).run(None, {"X": rows})[0]
    assert not np.array_equal(_twice_rounded(rows, weights), expected), \
        "no row needs the correction: the test would not see it missing"
    for backend, extra in ROUTES:
        converted = woodstar.convert(graph, backend, extra_config=extra)
        np.testing.assert_array_equal(converted.predict(rows), expected,
                                      err_msg=f"{backend} {extra}")
        for i in range(len(rows)):  # one row at a time too (MLAS's other kernel)
            np.testing.assert_array_equal(converted.predict(rows[i:i + 1]), expected[i:i + 1],
                                          err_msg=f"{backend} {extra} row {i}")


def test_the_float64_mirror_answers_as_the_compiled_slices(monkeypatch):
    """The CPU route's compiled slices (``fmaf``) and the float64 mirror the programs run
    give the same bits, ties, NaN, infinities and subnormals included; with the compiled
    form off, the CPU route is still ONNX Runtime's."""
    from woodstar.ir.families import onnx_ops
    from woodstar.ir.families.onnx_ops import NumpyMath, slice_sums

    rng = np.random.default_rng(3)
    edges = np.array([np.nan, np.inf, -np.inf, 1e-40, -1e-40, 1e-30, 0.0, -0.0, 88.0, -104.0,
                      3e38], np.float32)
    A = (3 * rng.normal(size=(300, 37))).astype(np.float32)
    mask = rng.random(A.shape) < 0.2
    A[mask] = rng.choice(edges, size=int(mask.sum()))
    B = np.concatenate([rng.normal(size=(5, 37)),
                        1 + rng.integers(1, 8, size=(3, 37)) * 2.0 ** -23]).astype(np.float32)
    assert onnx_ops._FMA_SLICES, "the compiled slices are not registered"
    compiled = slice_sums(NumpyMath, A, B, 16)
    monkeypatch.setattr(onnx_ops, "_FMA_SLICES", [])
    mirrored = slice_sums(NumpyMath, A, B, 16)
    for a, b in zip(compiled, mirrored):
        np.testing.assert_array_equal(a, b)
    weights = np.array([[1.0] * 4, [1 + m * 2.0 ** -23 for m in (1, 3, 5, 7)]], np.float32)
    graph = _matmul_graph(weights)
    rows = _halfway_rows()
    np.testing.assert_array_equal(woodstar.convert(graph, "torch").predict(rows),
                                  session(graph).run(None, {"X": rows})[0])
