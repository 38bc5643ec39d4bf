"""skl2onnx graphs of PCA(whiten), KMeans/MiniBatchKMeans and the naive Bayes
classifiers (Exp, Sqrt, Log, Pow, ReduceSum, ReduceSumSquare, ReduceLogSumExp,
ArgMin, a Gemm over a computed bias, a Reshape to (-1, 1, F) with broadcasting),
against ONNX Runtime on fresh rows holding NaN, infinities, huge, tiny and
subnormal values: every label, probability and distance is ONNX Runtime's to the
bit, on the CPU route, the Torch program and torch.jit."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_math", "onnx_reduce", "onnx_gemm")
OPSETS = {"": 17, "ai.onnx.ml": 3}
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]
EDGES = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-40, -1e-40, 0.0, -0.0, 1e-30,
                  88.0, -104.0], np.float32)


def edge_rows(rng, n_rows, n_features, scale=2.0):
    """Random rows, a fifth of their values replaced by NaN, +-inf, huge, tiny and
    subnormal values, zeros of both signs."""
    X = (scale * rng.normal(size=(n_rows, n_features))).astype(np.float32)
    mask = rng.random(X.shape) < 0.2
    X[mask] = rng.choice(EDGES, size=int(mask.sum()))
    return X


def _graph(model, X):
    options = {id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None
    return skl2onnx.to_onnx(model, X[:1], options=options, target_opset=OPSETS)


def _check(graph, X, method_of_second="predict_proba", labels_row=False):
    """Each route's answers against ONNX Runtime's on the whole batch, one row and an
    odd number of rows. ``labels_row``: ONNX Runtime gives the labels as one (1, n) row
    (an ArrayFeatureExtractor of the 1-D classes at (n, 1) indices: QDA's graph);
    ``predict`` gives them as (n,), scikit-learn's shape, so the values are compared."""
    for backend, extra in ROUTES:
        container = woodstar.convert(graph, backend, extra_config=extra)
        for rows in (X, X[:1], X[1:8]):
            expected = session(graph).run(None, {graph.graph.input[0].name: rows})
            what = f"{backend} {extra or 'default route'} on {len(rows)} rows"
            if len(expected) == 2:
                labels = expected[0].reshape(-1) if labels_row else expected[0]
                np.testing.assert_array_equal(container.predict(rows), labels, err_msg=what)
                got = getattr(container, method_of_second)(rows)
                assert got.shape == expected[1].shape, what
                np.testing.assert_array_equal(got, expected[1], err_msg=what)
            else:
                got = container.predict(rows)
                np.testing.assert_array_equal(got, expected[0].reshape(got.shape), err_msg=what)


def _fit_rows(rng, n_features=5, classes=3, n=120):
    X = rng.normal(size=(n, n_features)).astype(np.float32)
    y = rng.integers(0, classes, size=n)
    X += y[:, None].astype(np.float32)  # classes apart, so probabilities are not all tied
    return X, y


@pytest.mark.parametrize("n_features", [4, 7])
def test_pca_whiten(rng, n_features):
    from sklearn.decomposition import PCA

    X, _ = _fit_rows(rng, n_features)
    graph = _graph(PCA(3, whiten=True).fit(X), X)
    _check(graph, edge_rows(rng, 60, n_features))


@pytest.mark.parametrize("cls", ["KMeans", "MiniBatchKMeans"])
def test_kmeans_predict_and_transform(rng, cls):
    import sklearn.cluster

    X, _ = _fit_rows(rng, 4)
    model = getattr(sklearn.cluster, cls)(4, n_init=1, random_state=0).fit(X)
    graph = _graph(model, X)
    rows = edge_rows(rng, 60, 4)
    rows[:10] = model.cluster_centers_[rng.integers(0, 4, size=10)]  # zero distances
    _check(graph, rows, method_of_second="transform")


@pytest.mark.parametrize("cls,n_features", [("GaussianNB", 4), ("GaussianNB", 7),
                                            ("BernoulliNB", 5), ("MultinomialNB", 6),
                                            ("ComplementNB", 6)])
def test_naive_bayes(rng, cls, n_features):
    import sklearn.naive_bayes

    X, y = _fit_rows(rng, n_features, classes=3)
    if cls in ("MultinomialNB", "ComplementNB"):
        X = np.abs(X)
    model = getattr(sklearn.naive_bayes, cls)().fit(X, np.array([10, 20, 30])[y])
    graph = _graph(model, X)
    rows = edge_rows(rng, 60, n_features, scale=3.0)
    rows[-10:] = X[:10]  # rows the model knows: probabilities far from 0 and 1
    _check(graph, rows)


def test_gaussian_nb_odd_widths_keep_the_call_whole(rng):
    """ReduceSum over 7 features: each row's order depends on its place in the call,
    so a batch size that would split the call is not applied."""
    from sklearn.naive_bayes import GaussianNB

    X, y = _fit_rows(rng, 7)
    graph = _graph(GaussianNB().fit(X, y), X)
    rows = edge_rows(rng, 41, 7, scale=3.0)
    container = woodstar.convert(graph, "torch", extra_config={"batch_size": 4})
    expected = session(graph).run(None, {"X": rows})
    np.testing.assert_array_equal(container.predict_proba(rows), expected[1])


@pytest.mark.parametrize("n_classes", [2, 3])
def test_quadratic_discriminant_analysis(rng, n_classes):
    """Pow by -0.5 and Log of constants (folded with powf and Eigen's logarithm), the
    per-class norms stacked by Concat along the rows, Reshape and Transpose, ReduceMax
    (std::max, term after term), Exp, ReduceSum and Div."""
    from sklearn.discriminant_analysis import QuadraticDiscriminantAnalysis

    X, y = _fit_rows(rng, 4, classes=n_classes)
    graph = _graph(QuadraticDiscriminantAnalysis().fit(X, y), X)
    rows = edge_rows(rng, 60, 4)
    rows[-10:] = X[:10]
    _check(graph, rows, labels_row=True)


def _single_node_graph(op_type, shape=(None, 6), **attrs):
    from onnx import TensorProto, helper

    node = helper.make_node(op_type, ["X"], ["y"], **attrs)
    graph = helper.make_graph([node], op_type,
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, list(shape))],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


@pytest.mark.parametrize("op_type,attrs", [("Exp", {}), ("Sqrt", {}),
                                           ("ReduceSumSquare", {"axes": [1]}),
                                           ("ReduceMax", {"axes": [1]}),
                                           ("ReduceLogSumExp", {"axes": [1], "keepdims": 0})])
def test_single_operators_every_float_class(rng, op_type, attrs):
    """Each kernel on values across float32's range: exp's overflow and underflow
    edges, sqrt of negatives, NaN, infinities and subnormals."""
    width = 3 if op_type == "ReduceMax" else 6  # ReduceMax: the scalar loop's widths
    X = edge_rows(rng, 400, width, scale=40.0)
    X[:50] = rng.uniform(-110, 95, size=(50, width)).astype(np.float32)
    _check(_single_node_graph(op_type, shape=(None, width), **attrs), X)


@pytest.mark.parametrize("encode", ["ordinal", "onehot-dense"])
@pytest.mark.parametrize("strategy", ["quantile", "uniform"])
def test_kbins_discretizer(rng, encode, strategy):
    """Less of each column against its bin edges (a one-column block against k
    constants), ``x * 0 + 1`` as the last column (NaN for NaN and infinities), ArgMax
    (the first largest; a NaN never wins) and, one-hot, OneHotEncoder of that index."""
    from sklearn.preprocessing import KBinsDiscretizer

    X, _ = _fit_rows(rng, 4)
    graph = _graph(KBinsDiscretizer(4, encode=encode, strategy=strategy).fit(X), X)
    rows = edge_rows(rng, 60, 4)
    rows[:8] = np.repeat(np.quantile(X, 0.5, axis=0)[None, :], 8, axis=0)  # on an edge
    _check(graph, rows)


def test_argmin_alone_is_refused():
    from onnx import TensorProto

    graph = _single_node_graph("ArgMin", axis=1, keepdims=1)
    graph.graph.output[0].type.tensor_type.elem_type = TensorProto.INT64
    with pytest.raises(MissingConverter, match="ArgMin"):
        woodstar.convert(graph, "torch")


def test_exp_and_gemm_over_a_bias_are_refused_on_tvm(rng):
    """TVM's build of the mirrored fused multiply-adds fails LLVM's verification: the
    backend is refused at convert time, naming the operator."""
    from woodstar.backends import all_backends

    if not all_backends()["tvm"].is_available()[0]:
        pytest.skip("tvm is not installed")
    with pytest.raises(MissingConverter, match="Exp"):
        woodstar.convert(_single_node_graph("Exp"), "tvm")


def test_saved_and_loaded(rng, tmp_path):
    """The new ops' fields survive a save and a load (KMeans: Gemm, reductions, Sqrt;
    GaussianNB: the broadcast, ReduceSum over (n, C, F), ReduceLogSumExp, Exp)."""
    from sklearn.cluster import KMeans
    from sklearn.naive_bayes import GaussianNB

    X, y = _fit_rows(rng, 5)
    rows = edge_rows(rng, 30, 5)
    for model, method in ((KMeans(3, n_init=1, random_state=0), "transform"),
                          (GaussianNB(), "predict_proba")):
        container = woodstar.convert(_graph(model.fit(X, y), X), "torch")
        path = tmp_path / f"{type(model).__name__}.zip"
        container.save(str(path))
        loaded = woodstar.load(str(path))
        np.testing.assert_array_equal(loaded.predict(rows), container.predict(rows))
        np.testing.assert_array_equal(getattr(loaded, method)(rows), getattr(container, method)(rows))
