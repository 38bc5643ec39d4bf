"""skl2onnx's meta-estimator graphs over classifiers' probabilities against ONNX
Runtime running the same graph, to the bit, on the CPU route, the eager program and
the traced one. BaggingClassifier: the estimators' probabilities stacked (Reshape,
Concat on axis 0) and averaged (ReduceMean over axis 0: summed block after block,
divided by their count; multiplying by 1/count instead differs, checked below).
CalibratedClassifierCV (sigmoid): Exp, ReduceSum over each row, the zero mask
and ``1 / x``. AdaBoostClassifier (SAMME): each estimator's ArgMax as a one-hot
block, Where with a constant branch, the int32 zero guard. The operators' edge values
(infinities, NaN, values that truncate to 0) are checked on small graphs."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_stack_mean", "onnx_row_sums", "onnx_is_zero", "onnx_indicator")
OPSET = {"": 17, "ai.onnx.ml": 3}


def _data(rng, n=200):
    X = rng.normal(size=(n, 4)).astype(np.float32)
    return X, rng.integers(0, 3, size=n)


def _graph(model, X):
    return skl2onnx.to_onnx(model, X[:1], target_opset=OPSET,
                            options={id(model): {"zipmap": False}})


@FAST_BACKENDS
@pytest.mark.parametrize("n_estimators, base", [(5, "tree"), (4, "logistic")])
def test_bagging_classifier(backend, rng, n_estimators, base):
    from sklearn.ensemble import BaggingClassifier
    from sklearn.linear_model import LogisticRegression

    X, y = _data(rng)
    estimator = LogisticRegression() if base == "logistic" else None
    model = BaggingClassifier(estimator, n_estimators=n_estimators,
                              random_state=int(rng.integers(1 << 30))).fit(X, y)
    rows = rng.normal(size=(203, 4)).astype(np.float32)
    rows[rng.random(rows.shape) < 0.03] = np.nan
    check(_graph(model, X), rows, backend)


def test_bagging_mean_divides(rng):
    from sklearn.ensemble import BaggingClassifier
    from sklearn.linear_model import LogisticRegression

    X, y = _data(rng)
    model = BaggingClassifier(LogisticRegression(), n_estimators=3, random_state=0).fit(X, y)
    graph = _graph(model, X)
    rows = rng.normal(size=(300, 4)).astype(np.float32)
    _, proba = session(graph).run(None, {"X": rows})
    total = sum(e.predict_proba(rows).astype(np.float32) for e in model.estimators_)
    assert (proba != total * np.float32(1 / 3)).any()
    np.testing.assert_array_equal(woodstar.convert(graph, "torch").predict_proba(rows), proba)


def test_mean_over_other_axes_is_refused():
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Reshape", ["X", "s"], ["r"]),
             helper.make_node("Concat", ["r", "r"], ["m"], axis=0),
             helper.make_node("ReduceMean", ["m"], ["Y"], axes=[0], keepdims=1)]
    graph = helper.make_graph(
        nodes, "mean", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 3])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)],
        [helper.make_tensor("s", TensorProto.INT64, [3], [1, -1, 3])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MissingConverter, match="axes and keepdims"):
        woodstar.convert(model, "torch")


def _nan_rows(rng, n=150):
    rows = rng.normal(size=(n, 4)).astype(np.float32)
    rows[rng.random(rows.shape) < 0.03] = np.nan
    return rows


@FAST_BACKENDS
@pytest.mark.parametrize("n_classes, base", [(3, "logistic"), (5, "tree")])
def test_calibrated_classifier(backend, rng, n_classes, base):
    from sklearn.calibration import CalibratedClassifierCV
    from sklearn.linear_model import LogisticRegression
    from sklearn.tree import DecisionTreeClassifier

    X = rng.normal(size=(120, 4)).astype(np.float32)
    y = rng.integers(0, n_classes, size=120)
    estimator = LogisticRegression() if base == "logistic" else DecisionTreeClassifier(max_depth=3)
    model = CalibratedClassifierCV(estimator, cv=2).fit(X, y)
    check(_graph(model, X), _nan_rows(rng), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("n_classes, depth", [(3, 1), (2, 2)])
def test_adaboost_classifier(backend, rng, n_classes, depth):
    from sklearn.ensemble import AdaBoostClassifier
    from sklearn.tree import DecisionTreeClassifier

    X = rng.normal(size=(120, 4)).astype(np.float32)
    y = rng.integers(0, n_classes, size=120)
    model = AdaBoostClassifier(DecisionTreeClassifier(max_depth=depth), n_estimators=3,
                               random_state=int(rng.integers(1 << 30))).fit(X, y)
    check(_graph(model, X), _nan_rows(rng), backend)


def _edge_graph(nodes, initializers=()):
    from onnx import TensorProto, helper

    graph = helper.make_graph(
        nodes, "edges", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 5])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, None)], list(initializers))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _edge_rows(rng):
    edges = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 0.999, -0.999, 1.0, -1.0, 88.7,
                      89.0, -104.0, -87.5, 2.0 ** 31, -(2.0 ** 31), 3e9, 1e-30], np.float32)
    rows = rng.choice(edges, size=(120, 5)).astype(np.float32)
    rows[:40] = rng.normal(size=(40, 5)).astype(np.float32) * 30
    return rows


@FAST_BACKENDS
def test_edge_values_of_exp_row_sums_and_masks(backend, rng):
    from onnx import TensorProto, helper

    nodes = [helper.make_node("Exp", ["X"], ["e"]),
             helper.make_node("ReduceSum", ["e", "axis"], ["s"]),
             helper.make_node("Cast", ["X"], ["b"], to=TensorProto.BOOL),
             helper.make_node("Not", ["b"], ["nb"]),
             helper.make_node("Cast", ["nb"], ["z"], to=TensorProto.FLOAT),
             helper.make_node("Cast", ["X"], ["i"], to=TensorProto.INT32),
             helper.make_node("Equal", ["i", "zero"], ["t"]),
             helper.make_node("Cast", ["t"], ["tf"], to=TensorProto.FLOAT),
             helper.make_node("Div", ["one", "X"], ["r"]),
             helper.make_node("Concat", ["e", "s", "z", "tf", "r"], ["Y"], axis=1)]
    inits = [helper.make_tensor("axis", TensorProto.INT64, [1], [1]),
             helper.make_tensor("zero", TensorProto.INT32, [], [0]),
             helper.make_tensor("one", TensorProto.FLOAT, [], [1.0])]
    check(_edge_graph(nodes, inits), _edge_rows(rng), backend)


@FAST_BACKENDS
def test_first_largest_one_hot_and_constant_branches(backend, rng):
    from onnx import TensorProto, helper

    nodes = [helper.make_node("ArgMax", ["X"], ["a"], axis=1),
             helper.make_node("Equal", ["a", "codes"], ["hot"]),
             helper.make_node("Where", ["hot", "X", "half"], ["Y"])]
    inits = [helper.make_tensor("codes", TensorProto.INT64, [1, 5], [0, 1, 2, 3, 4]),
             helper.make_tensor("half", TensorProto.FLOAT, [1], [-0.5])]
    rows = np.round(_edge_rows(rng))  # ties: the first largest column wins
    rows[np.isnan(rows)] = 0.0  # NaN in a row: left to ArgMax's own (documented) rule
    check(_edge_graph(nodes, inits), rows, backend)
