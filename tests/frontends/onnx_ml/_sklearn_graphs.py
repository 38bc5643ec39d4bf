"""skl2onnx graphs of fitted scikit-learn models and the parity check the graph tests
of the meta-estimators share: every route's answers against ONNX Runtime's, to the
bit, on one row and on many."""

import numpy as np
import pytest

import woodstar

from ._graphs import session

OPSETS = {"": 17, "ai.onnx.ml": 3}
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]


def sklearn_graph(model, X):
    """``model``'s ONNX graph for float rows like ``X`` (probabilities as a matrix)."""
    skl2onnx = pytest.importorskip("skl2onnx")
    options = {id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None
    return skl2onnx.to_onnx(model, X[:1], options=options, target_opset=OPSETS)


def nan_rows(rng, n_rows, n_features, nan=0.03):
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    X[rng.random(X.shape) < nan] = np.nan
    return X


def outputs(container, n_outputs, rows):
    """The container's answers in the order of the graph's outputs."""
    if n_outputs == 1:
        return [container.predict(rows)]
    return [container.predict(rows), container.predict_proba(rows)]


def assert_same(got, expected, what):
    if isinstance(expected, list):  # a sequence of tensors (SequenceConstruct)
        assert isinstance(got, list) and len(got) == len(expected), what
        for g, e in zip(got, expected):
            assert_same(g, e, what)
        return
    assert got.shape == expected.shape, (what, got.shape, expected.shape)
    np.testing.assert_array_equal(got, expected, err_msg=what)


def check_routes(graph, rows, routes=ROUTES, single_rows=3):
    """``rows`` in one call, then a few rows alone: the CPU route, the eager program
    and the traced one give ONNX Runtime's outputs."""
    ort = session(graph)
    name = graph.graph.input[0].name
    containers = [(f"{b} {extra or ''}", woodstar.convert(graph, b, extra_config=extra))
                  for b, extra in routes]
    calls = [rows] + [rows[i:i + 1] for i in range(min(single_rows, len(rows)))]
    for call in calls:
        expected = ort.run(None, {name: call})
        for what, container in containers:
            for got, exp in zip(outputs(container, len(expected), call), expected):
                assert_same(got, exp, f"{what}, {len(call)} rows")
