"""skl2onnx's OneVsRestClassifier and OneVsOneClassifier graphs against ONNX Runtime,
to the bit. One-vs-rest: each binary estimator's positive column (``Slice``), the
columns concatenated, labels by ``ArgMax`` and probabilities by ``LpNormalization``
(p=1). One-vs-one: each pair's label cast to float and its probabilities reshaped to
(Shape(X)[0], -1) and sliced, votes and confidences summed, the ArgMax index as the
label (a column, as ONNX Runtime gives it). Fresh rows with NaN, one row and many, on
the CPU route, the eager program and torch.jit. ``LpNormalization``'s edge values (a
zero norm writes +0, NaN, infinities) and ``Slice``'s bounds are checked on small
graphs."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from ._sklearn_graphs import OPSETS, ROUTES, check_routes, nan_rows, sklearn_graph

pytest.importorskip("onnxruntime")
skl2onnx = pytest.importorskip("skl2onnx")


def _base(kind):
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    return LogisticRegression() if kind == "logistic" else DecisionTreeClassifier(max_depth=4)


@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("base", ["logistic", "tree"])
def test_one_vs_rest(rng, base, n_classes):
    from sklearn.multiclass import OneVsRestClassifier

    X = rng.normal(size=(300, 4)).astype(np.float32)
    model = OneVsRestClassifier(_base(base)).fit(X, rng.integers(0, n_classes, size=300))
    check_routes(sklearn_graph(model, X), nan_rows(rng, 1200, 4))


@pytest.mark.parametrize("n_classes", [2, 3, 5])
@pytest.mark.parametrize("base", ["logistic", "tree"])
def test_one_vs_one(rng, base, n_classes):
    from sklearn.multiclass import OneVsOneClassifier

    X = rng.normal(size=(300, 4)).astype(np.float32)
    model = OneVsOneClassifier(_base(base)).fit(X, rng.integers(0, n_classes, size=300))
    graph = skl2onnx.to_onnx(model, X[:1], options={id(model): {"zipmap": False}},
                             target_opset=OPSETS)
    check_routes(graph, nan_rows(rng, 1200, 4))


@pytest.mark.parametrize("classes", [(4, 8), (0, 1, 2), (3, 5, 7, 9)])
@pytest.mark.parametrize("base", ["logistic", "tree"])
def test_one_vs_one_with_zipmap(rng, base, classes):
    """skl2onnx's default graph casts the ArgMax index to int64 for its label and
    ZipMaps the scores: ``predict`` gives that index, as ONNX Runtime does (also where
    the classes are not 0..k-1), ``predict_proba`` the ZipMap's values as a matrix."""
    from sklearn.multiclass import OneVsOneClassifier

    X = rng.normal(size=(300, 4)).astype(np.float32)
    model = OneVsOneClassifier(_base(base)).fit(X, rng.choice(classes, size=300))
    graph = skl2onnx.to_onnx(model, X[:1], target_opset=OPSETS)
    assert [n.op_type for n in graph.graph.node[-2:]] == ["Cast", "ZipMap"]
    ort = session(graph)
    containers = [woodstar.convert(graph, b, extra_config=extra) for b, extra in ROUTES]
    rows = nan_rows(rng, 1200, 4)
    for call in (rows, rows[:1], rows[5:9]):
        labels, maps = ort.run(None, {"X": call})
        keys = list(maps[0])
        assert keys == list(classes)
        proba = np.array([[m[k] for k in keys] for m in maps], np.float32).reshape(len(call), -1)
        for container in containers:
            got = container.predict(call)
            assert got.shape == labels.shape and got.dtype == labels.dtype
            np.testing.assert_array_equal(got, labels)
            np.testing.assert_array_equal(container.predict_proba(call), proba)


def _graph(nodes, width, initializers=()):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "g", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, width])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def test_lp_normalization_edges(rng):
    from onnx import helper

    model = _graph([helper.make_node("LpNormalization", ["X"], ["Y"], axis=1, p=1)], 5)
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, 3e38], np.float32)
    X = (rng.normal(size=(600, 5)) * 10.0 ** rng.integers(-3, 4, size=(600, 5))).astype(np.float32)
    mask = rng.random(X.shape) < 0.25
    X[mask] = rng.choice(edges, size=int(mask.sum()))
    X[:20] = -0.0  # a zero norm: +0 everywhere, where the Normalizer keeps -0
    expected = session(model).run(None, {"X": X})[0]
    assert not np.signbit(expected[:20]).any()
    for backend, extra in ROUTES:
        got = woodstar.convert(model, backend, extra_config=extra).predict(X)
        np.testing.assert_array_equal(got, expected)
        np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))


def test_slice_bounds(rng):
    """Negative and clamped bounds and a step, as ONNX Runtime reads them."""
    from onnx import TensorProto, helper

    ints = lambda name, v: helper.make_tensor(name, TensorProto.INT64, [len(v)], v)  # noqa: E731
    for starts, ends, steps in (([-3], [100], [1]), ([0], [-1], [2]), ([4], [0], [-2])):
        model = _graph([helper.make_node("Slice", ["X", "s", "e", "a", "t"], ["Y"])], 6,
                       [ints("s", starts), ints("e", ends), ints("a", [1]), ints("t", steps)])
        X = nan_rows(rng, 50, 6)
        expected = session(model).run(None, {"X": X})[0]
        for backend, extra in ROUTES:
            got = woodstar.convert(model, backend, extra_config=extra).predict(X)
            np.testing.assert_array_equal(got, expected)


def test_other_slices_and_norms_are_refused():
    from onnx import TensorProto, helper

    ints = lambda name, v: helper.make_tensor(name, TensorProto.INT64, [len(v)], v)  # noqa: E731
    rows = _graph([helper.make_node("Slice", ["X", "s", "e", "a"], ["Y"])], 3,
                  [ints("s", [0]), ints("e", [1]), ints("a", [0])])
    with pytest.raises(MissingConverter, match="axes"):
        woodstar.convert(rows, "torch")
    l2 = _graph([helper.make_node("LpNormalization", ["X"], ["Y"], axis=1, p=2)], 3)
    with pytest.raises(MissingConverter, match=r"\(p, axis\)"):
        woodstar.convert(l2, "torch")
