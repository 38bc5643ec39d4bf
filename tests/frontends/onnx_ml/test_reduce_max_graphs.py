"""ReduceMax over 4 or more columns against ONNX Runtime, to the bit: Eigen's
vectorized maximum takes each row in packets of four from its first 16-byte boundary,
so which NaN, -0 or +0 comes out depends on the row's place in the call (mirrored,
``whole_call``). Checked on a small graph with NaN, infinities and zeros of both
signs, and on skl2onnx's QuadraticDiscriminantAnalysis graph with 4 to 9 classes;
every call size, on the CPU route, the eager program and torch.jit."""

import numpy as np
import pytest

import woodstar

from ._graphs import session
from ._sklearn_graphs import ROUTES, sklearn_graph

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

EDGES = np.array([np.nan, 0.0, -0.0, np.inf, -np.inf, 1.0, -1.0], np.float32)


def _reduce_max_graph(width):
    """ReduceMax of a computed tensor (ONNX Runtime's own 64-byte aligned buffer)."""
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Add", ["X", "zero"], ["A"]),
             helper.make_node("ReduceMax", ["A"], ["Y"], axes=[1], keepdims=1)]
    graph = helper.make_graph(
        nodes, "max", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [helper.make_tensor("zero", TensorProto.FLOAT, [1], [0.0])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _same_bits(got, expected):
    """Equal values with equal signs (-0 and +0 apart), NaN where ``expected`` has NaN."""
    got, expected = np.asarray(got, np.float32), np.asarray(expected, np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(expected))
    both = ~np.isnan(expected)
    np.testing.assert_array_equal(got[both].view(np.int32), expected[both].view(np.int32))


@pytest.mark.parametrize("width", [4, 5, 6, 7, 8, 9, 13])
def test_reduce_max_edges(rng, width):
    model = _reduce_max_graph(width)
    ort = session(model)
    containers = [woodstar.convert(model, b, extra_config=e) for b, e in ROUTES]
    for n_rows in (1, 2, 3, 5, 1000, 1003):
        X = rng.choice(EDGES, size=(n_rows, width)).astype(np.float32)
        mask = rng.random(X.shape) < 0.3
        X[mask] = rng.normal(size=int(mask.sum())).astype(np.float32)
        expected = ort.run(None, {"X": X})[0]
        for container in containers:
            got = container.predict(X).reshape(expected.shape)
            _same_bits(got, expected)  # NaN where ONNX Runtime's is, -0 and +0 apart


def test_first_nan_depends_on_the_row(rng):
    """A NaN in column 0 of 5: kept on rows whose first packet starts there, skipped
    on every fourth row (its packet starts at column 1): the reason for ``whole_call``."""
    model = _reduce_max_graph(5)
    X = np.ones((8, 5), np.float32)
    X[:, 0] = np.nan
    expected = session(model).run(None, {"X": X})[0][:, 0]
    assert np.isnan(expected[:3]).all() and not np.isnan(expected[3])
    for backend, extra in ROUTES:
        got = woodstar.convert(model, backend, extra_config=extra).predict(X).reshape(-1)
        _same_bits(got, expected)


@pytest.mark.parametrize("n_classes", [4, 5, 7, 9])
def test_quadratic_discriminant_analysis_many_classes(rng, n_classes):
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis

    X = rng.normal(size=(400, 4)).astype(np.float32)
    y = np.arange(400) % n_classes
    X += y[:, None].astype(np.float32)
    graph = sklearn_graph(QuadraticDiscriminantAnalysis(reg_param=0.01).fit(X, y), X)
    rows = (3 * rng.normal(size=(1203, 4))).astype(np.float32) + 2
    rows[rng.random(rows.shape) < 0.03] = np.nan
    rows[:20] = X[:20]
    ort = session(graph)
    for backend, extra in ROUTES:
        container = woodstar.convert(graph, backend, extra_config=extra)
        for call in (rows, rows[:1], rows[1:4]):
            labels, proba = ort.run(None, {"X": call})
            # ONNX Runtime gives QDA's labels as one (1, n) row; predict gives (n,)
            np.testing.assert_array_equal(container.predict(call), labels.reshape(-1))
            np.testing.assert_array_equal(container.predict_proba(call), proba)
