"""ONNX-ML linear models and their preprocessing (Scaler, Imputer, Normalizer, Cast,
ZipMap, Add/Sub/Mul/Div by a constant, Concat, FeatureVectorizer,
ArrayFeatureExtractor, Binarizer) against ONNX Runtime running the same graph: skl2onnx's exports of
scikit-learn pipelines and hand-made graphs for what the converters rarely write.

Scores and probabilities are ONNX Runtime's to the bit, one-row calls included
(MLAS's SGEMM: one fused multiply-add per feature, in K slices, and its one-row
kernel for a single row; MLAS's logistic mirrored operation by operation; SOFTMAX,
SOFTMAX_ZERO and one-column LOGISTIC through glibc's ``expf``, mirrored too).
"""

import os

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import MATCHES_THIS_CPU, assert_calls_match, session
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")

COVERS_OPS = ("onnx_linear", "onnx_normalizer", "onnx_cast", "onnx_binarizer")


def _rows(rng, n_rows, n_features, nan=0.0, dtype=np.float32):
    X = 2.0 * rng.normal(size=(n_rows, n_features))
    X[rng.random(X.shape) < nan] = np.nan
    return X.astype(dtype)


def linear_graph(rng, *, n_features=5, n_targets=3, classifier=True, post="NONE", labels=None,
                 before=(), input_type="float"):
    """``before``: (op_type, attributes) nodes of ai.onnx.ml applied to X first."""
    from onnx import TensorProto, helper

    nodes, name = [], "X"
    for i, (op_type, attrs) in enumerate(before):
        nodes.append(helper.make_node(op_type, [name], [f"pre{i}"], domain="ai.onnx.ml",
                                      name=f"pre{i}", **attrs))
        name = f"pre{i}"
    coefficients = rng.normal(size=(n_targets, n_features)).astype(np.float32).ravel().tolist()
    intercepts = rng.normal(size=n_targets).astype(np.float32).tolist()
    if classifier:
        labels = list(range(max(n_targets, 2))) if labels is None else labels
        key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_ints"
        nodes.append(helper.make_node("LinearClassifier", [name], ["label", "probabilities"],
                                      domain="ai.onnx.ml", name="linear", coefficients=coefficients,
                                      intercepts=intercepts, post_transform=post, **{key: labels}))
        label_type = TensorProto.STRING if isinstance(labels[0], str) else TensorProto.INT64
        outputs = [helper.make_tensor_value_info("label", label_type, [None]),
                   helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, None])]
    else:
        nodes.append(helper.make_node("LinearRegressor", [name], ["variable"], domain="ai.onnx.ml",
                                      name="linear", coefficients=coefficients,
                                      intercepts=intercepts, targets=n_targets))
        outputs = [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, n_targets])]
    dtype = TensorProto.FLOAT if input_type == "float" else TensorProto.DOUBLE
    graph = helper.make_graph(nodes, "linear",
                              [helper.make_tensor_value_info("X", dtype, [None, n_features])], outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", 1)])


# --------------------------------------------------------------- hand-made graphs
@FAST_BACKENDS
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_linear_classifier_post_transforms(backend, rng, post):
    model = linear_graph(rng, post=post, labels=["x", "y", "z"])
    check(model, _rows(rng, 300, 5), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC"])
def test_one_score_column_gives_two_probabilities(backend, rng, post):
    """One coefficient row and two labels: ONNX Runtime writes [1 - p, p] (p the score,
    or its logistic through float32 exp) and labels by score > 0."""
    model = linear_graph(rng, n_targets=1, post=post, labels=[4, 9])
    check(model, _rows(rng, 300, 5), backend)


@FAST_BACKENDS
def test_many_features_one_fma_chain(backend, rng):
    """Beyond 128 features (where a blocked product would split the chain)."""
    model = linear_graph(rng, n_features=150, n_targets=2, classifier=False)
    check(model, _rows(rng, 200, 150), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("norm", ["MAX", "L1", "L2"])
def test_scaler_imputer_normalizer_chain(backend, rng, norm):
    before = [("Imputer", dict(imputed_value_floats=rng.normal(size=5).astype(np.float32).tolist(),
                               replaced_value_float=float("nan"))),
              ("Scaler", dict(offset=rng.normal(size=5).astype(np.float32).tolist(),
                              scale=rng.random(5).astype(np.float32).tolist())),
              ("Normalizer", dict(norm=norm))]
    model = linear_graph(rng, before=before, classifier=False, n_targets=2)
    check(model, _rows(rng, 300, 5, nan=0.1), backend)


@FAST_BACKENDS
def test_imputer_of_a_number(backend, rng):
    before = [("Imputer", dict(imputed_value_floats=[7.5], replaced_value_float=0.5))]
    model = linear_graph(rng, before=before, classifier=False, n_targets=1)
    X = _rows(rng, 300, 5)
    X[rng.random(X.shape) < 0.2] = 0.5
    check(model, X, backend)


@FAST_BACKENDS
def test_double_input(backend, rng):
    before = [("Scaler", dict(offset=[0.25], scale=[1.5]))]
    model = linear_graph(rng, before=before, input_type="double", post="LOGISTIC")
    check(model, _rows(rng, 300, 5, dtype=np.float64), backend)


@FAST_BACKENDS
def test_feature_vectorizer_of_the_input_twice(backend, rng):
    from onnx import helper

    model = linear_graph(rng, classifier=False, n_targets=2, n_features=10)
    model.graph.input[0].type.tensor_type.shape.dim[1].dim_value = 5
    model.graph.node.insert(0, helper.make_node("FeatureVectorizer", ["X", "X"], ["both"],
                                                domain="ai.onnx.ml", inputdimensions=[5, 5]))
    model.graph.node[1].input[0] = "both"
    check(model, _rows(rng, 200, 5), backend)


@FAST_BACKENDS
def test_binarizer(backend, rng):
    before = [("Binarizer", dict(threshold=0.5))]
    model = linear_graph(rng, before=before, classifier=False, n_targets=2)
    X = _rows(rng, 300, 5)
    X[rng.random(X.shape) < 0.2] = 0.5  # on the threshold: not greater
    check(model, X, backend)


def test_binarizer_refuses_nan_as_onnx_runtime_does(rng):
    model = linear_graph(rng, before=[("Binarizer", dict(threshold=0.0))], classifier=False)
    X = _rows(rng, 20, 5)
    X[3, 2] = np.nan
    with pytest.raises(Exception):
        session(model).run(None, {"X": X})
    with pytest.raises(ValueError, match="NaN"):
        woodstar.convert(model, "torch").predict(X)


def test_save_and_load(rng, tmp_path):
    before = [("Scaler", dict(offset=[0.1], scale=[3.0])), ("Normalizer", dict(norm="L1"))]
    model = linear_graph(rng, before=before, post="LOGISTIC", labels=["a", "b", "c"])
    X = _rows(rng, 100, 5)
    container = woodstar.convert(model, "torch")
    container.save(tmp_path / "m.zip")
    loaded = woodstar.load(tmp_path / "m.zip")
    np.testing.assert_array_equal(loaded.predict_proba(X), container.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), container.predict(X))


def test_float64_rows_on_a_float_graph_are_rounded_first(rng):
    before = [("Scaler", dict(offset=[0.1], scale=[3.0])), ("Normalizer", dict(norm="L2"))]
    model = linear_graph(rng, before=before, classifier=False, n_targets=2)
    X = _rows(rng, 200, 5)
    expected = session(model).run(None, {"X": X})[0]
    got = woodstar.convert(model, "torch").predict(X.astype(np.float64) + 1e-12)
    np.testing.assert_array_equal(got, expected)


def _containers(model, jit=True):
    return [woodstar.convert(model, "torch"),
            woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})] + (
        [woodstar.convert(model, "torch.jit")] if jit else [])


@pytest.mark.parametrize("n_targets,post", [(1, "NONE"), (3, "NONE"), (1, "LOGISTIC"),
                                            (3, "LOGISTIC"), (3, "SOFTMAX"), (2, "SOFTMAX_ZERO")])
def test_one_row_calls_take_the_one_row_kernel(rng, n_targets, post):
    """A single row goes through MLAS's one-row kernel (eight lanes, then a reduction
    whose order depends on the output column, then the intercept): a program, traced
    or not, decides per call."""
    model = linear_graph(rng, n_features=20, n_targets=n_targets, post=post,
                         labels=[3, 8] if n_targets == 1 else None)
    assert_calls_match(model, _rows(rng, 16, 20, nan=0.02), _containers(model))
    regressor = linear_graph(rng, n_features=20, n_targets=n_targets, classifier=False)
    assert_calls_match(regressor, _rows(rng, 16, 20), _containers(regressor))


@pytest.mark.parametrize("n_features", [300, 1500])
def test_wide_inputs_add_the_kernels_k_slices(rng, n_features):
    """Past the kernel's K slice (1024 features for a few outputs) each slice's sum is
    added to the running one; one row still takes the one-row kernel. Tracing the
    1500-feature program (one exact float32 step per feature) takes tens of seconds, so
    torch.jit runs the wide case only in the full matrix; the 300-feature case traces
    the same code."""
    for model in (linear_graph(rng, n_features=n_features, n_targets=2, classifier=False),
                  linear_graph(rng, n_features=n_features, n_targets=3, post="LOGISTIC")):
        jit = n_features <= 1024 or os.environ.get("WOODSTAR_FULL_MATRIX") == "1"
        assert_calls_match(model, _rows(rng, 8, n_features), _containers(model, jit=jit))


@pytest.mark.parametrize("case", ["LinearRegression", "LogisticRegression-binary",
                                  "LogisticRegression"])
def test_skl2onnx_one_row_calls(rng, case):
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.linear_model import LinearRegression, LogisticRegression

    X = rng.normal(size=(300, 20)).astype(np.float32)
    score = X[:, 0] + X[:, 1] * X[:, 2]
    if case == "LinearRegression":
        model = LinearRegression().fit(X, score)
    else:
        n_classes = 2 if case.endswith("binary") else 3
        y = np.digitize(score, np.quantile(score, [0.4, 0.7][:n_classes - 1]))
        model = LogisticRegression(max_iter=500).fit(X, y)
    options = {id(model): {"zipmap": False}} if case != "LinearRegression" else None
    graph = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                             options=options)
    assert_calls_match(graph, _rows(rng, 30, 20), _containers(graph))


# ------------------------------------------------------------ skl2onnx pipelines
def _pipelines():
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MaxAbsScaler, MinMaxScaler, Normalizer, StandardScaler

    return {
        "StandardScaler+LogisticRegression-binary": (
            lambda: make_pipeline(StandardScaler(), LogisticRegression()), 2),
        "StandardScaler+LogisticRegression": (
            lambda: make_pipeline(StandardScaler(), LogisticRegression()), 3),
        "SimpleImputer+LinearRegression": (
            lambda: make_pipeline(SimpleImputer(), LinearRegression()), 0),
        "Normalizer+Ridge": (lambda: make_pipeline(Normalizer(), Ridge()), 0),
        "MinMaxScaler+Ridge": (lambda: make_pipeline(MinMaxScaler(), Ridge()), 0),
        "ColumnTransformer+LogisticRegression-binary": (
            lambda: make_pipeline(ColumnTransformer([("a", StandardScaler(), [0, 1]),
                                                     ("b", MinMaxScaler(), [2, 4])]),
                                  LogisticRegression()), 2),
        "MaxAbsScaler+LogisticRegression": (
            lambda: make_pipeline(MaxAbsScaler(), LogisticRegression()), 3),
    }


@FAST_BACKENDS
@pytest.mark.parametrize("case", sorted(_pipelines()))
def test_skl2onnx_pipelines(backend, rng, case):
    skl2onnx = pytest.importorskip("skl2onnx")
    make, n_classes = _pipelines()[case]
    X = rng.normal(size=(300, 5)).astype(np.float32)
    score = X[:, 0] + X[:, 1] * X[:, 2]
    y = score if n_classes == 0 else np.digitize(score, np.quantile(score, [0.4, 0.7][:n_classes - 1]))
    nan = 0.1 if "Imputer" in case else 0.0
    X[rng.random(X.shape) < nan] = np.nan
    model = make().fit(X, y)
    graph = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    check(graph, _rows(rng, 400, 5, nan=nan), backend)


# --------------------------------------------------------------------- refusals
def test_unsupported_operator_is_refused_by_name(rng):
    from onnx import helper

    model = linear_graph(rng, classifier=False, n_targets=1)
    model.graph.node.insert(0, helper.make_node("Round", ["X"], ["X_round"], name="rounds"))
    model.graph.node[1].input[0] = "X_round"
    with pytest.raises(MissingConverter, match=r"operator Round \(domain 'ai\.onnx', node 'rounds'\)"):
        woodstar.convert(model, "torch")


def test_arithmetic_with_a_computed_operand(rng):
    """X + X (two computed blocks: ``onnx_elementwise``) before the model node."""
    from onnx import helper

    model = linear_graph(rng, classifier=False, n_targets=1)
    model.graph.node.insert(0, helper.make_node("Add", ["X", "X"], ["X2"], name="twice"))
    model.graph.node[1].input[0] = "X2"
    X = _rows(rng, 100, 5, nan=0.05)
    expected = session(model).run(None, {"X": X})[0]
    got = woodstar.convert(model, "torch").predict(X)
    np.testing.assert_array_equal(got.reshape(expected.shape), expected)


@MATCHES_THIS_CPU
@pytest.mark.parametrize("n_targets", [2, 3, 4, 5, 7])
def test_softmax_kernel_follows_the_calls_size(rng, n_targets):
    """ONNX Runtime's SOFTMAX switches from its float32 loop to MLAS's softmax at 32768
    scores a call (two classes), 16384 (three or four) and always from five: calls
    of one row fewer and at the switch, in one program that decides per call."""
    model = linear_graph(rng, n_features=6, n_targets=n_targets, post="SOFTMAX")
    switch = {2: 32768, 3: 16384, 4: 16384}.get(n_targets, 5 * n_targets)
    first_large = -(-switch // n_targets)
    X = _rows(rng, first_large, 6, nan=0.001) * np.float32(8.0)  # wide logits: the kernels differ
    ort, containers = session(model), _containers(model)
    for rows in (X[:first_large - 1], X, X[:1]):
        expected = ort.run(None, {"X": rows})[1]
        for container in containers:
            np.testing.assert_array_equal(container.predict_proba(rows), expected)
    if n_targets <= 4:  # the two kernels give other bits on these rows: the switch is seen
        small = ort.run(None, {"X": X[:first_large - 1]})[1]
        assert not np.array_equal(small, ort.run(None, {"X": X})[1][:first_large - 1], equal_nan=True)


def test_int64_one_hot_graph(rng):
    """skl2onnx reads integer categories through an int64 input (Gather, Cast,
    OneHotEncoder with zeros=0: an unknown category fails the call, here as there)."""
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    X = rng.integers(0, 4, size=(100, 3)).astype(np.int64)
    model = make_pipeline(OneHotEncoder(), LogisticRegression()).fit(X, X[:, 0] > 1)
    graph = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                             options={"zipmap": False})
    container = woodstar.convert(graph, "torch")
    rows = rng.integers(0, 4, size=(300, 3)).astype(np.int64)
    expected = session(graph).run(None, {graph.graph.input[0].name: rows})
    np.testing.assert_array_equal(container.predict(rows), expected[0])
    np.testing.assert_array_equal(container.predict_proba(rows), expected[1])
    with pytest.raises(ValueError, match="unknown categories"):
        container.predict(rows + 4)
