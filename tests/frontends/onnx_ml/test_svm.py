"""ONNX-ML SVMRegressor / SVMClassifier (the graphs skl2onnx writes for SVR, NuSVR,
SVC and NuSVC) against ONNX Runtime running the same graph: every kernel, NaN and
infinite inputs, one-row calls (MLAS's one-row kernel), support vectors past MLAS's
K slice, and features past its 128-column slice. Every number is ONNX Runtime's to
the bit, RBF included (glibc's ``expf`` is mirrored operation by operation)."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")
# skl2onnx reads SVC's deprecated probA_/probB_ attributes whatever the model
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning")

COVERS_OPS = ("onnx_svm",)
OPSET = {"": 17, "ai.onnx.ml": 3}
KERNELS = [("linear", {}), ("poly", {"degree": 2}), ("poly", {"degree": 3}), ("rbf", {}),
           ("sigmoid", {})]
KERNEL_IDS = [f"{k}{e.get('degree', '')}" for k, e in KERNELS]


def _rows(rng, n_rows, n_features, dtype=np.float32):
    """Normal values with NaN and +-inf cells (ONNX Runtime accepts them)."""
    X = 2.0 * rng.normal(size=(n_rows, n_features))
    mask = rng.random(X.shape)
    X[mask < 0.02] = np.nan
    X[(mask >= 0.02) & (mask < 0.025)] = np.inf
    X[(mask >= 0.025) & (mask < 0.03)] = -np.inf
    return X.astype(dtype)


def _data(rng, n_rows=150, n_features=5):
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    return X, X[:, 0] * X[:, 1] + X[:, 2]


def _graph(model, X, **options):
    return skl2onnx.to_onnx(model, X[:1], target_opset=OPSET, options=options or None)


def _kernel_args(rng, kernel, extra):
    return dict(kernel=kernel, gamma=float(rng.uniform(0.05, 0.4)),
                coef0=float(rng.uniform(-0.5, 0.5)), **extra)


@FAST_BACKENDS
@pytest.mark.parametrize("kernel,extra", KERNELS, ids=KERNEL_IDS)
def test_svr_and_nusvr(backend, rng, kernel, extra):
    from sklearn.svm import SVR, NuSVR

    X, y = _data(rng)
    for model in (SVR(C=2.0, **_kernel_args(rng, kernel, extra)),
                  NuSVR(nu=0.4, **_kernel_args(rng, kernel, extra))):
        check(_graph(model.fit(X, y), X), _rows(rng, 300, 5), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("kernel,extra", KERNELS, ids=KERNEL_IDS)
def test_binary_svc_with_zipmap(backend, rng, kernel, extra):
    from sklearn.svm import SVC

    X, y = _data(rng)
    model = SVC(**_kernel_args(rng, kernel, extra)).fit(X, y > 0)
    check(_graph(model, X), _rows(rng, 300, 5), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("kernel", ["linear", "rbf", "sigmoid"])
def test_multiclass_one_vs_one(backend, rng, kernel):
    """decision_function_shape='ovo': the graph returns the pair scores as they are."""
    from sklearn.svm import SVC, NuSVC

    X, y = _data(rng, n_rows=200)
    labels = np.array(["low", "mid", "high", "top"])[np.digitize(y, [-0.5, 0.3, 1.2])]
    for model in (SVC(decision_function_shape="ovo", **_kernel_args(rng, kernel, {})),
                  NuSVC(nu=0.2, decision_function_shape="ovo", **_kernel_args(rng, kernel, {}))):
        graph = _graph(model.fit(X, labels), X, zipmap=False)
        check(graph, _rows(rng, 300, 5), backend)


def test_double_input_classifier(rng):
    """A double input is rounded to float first, as ONNX Runtime's kernel does."""
    from sklearn.svm import SVC

    X, y = _data(rng)
    model = SVC(kernel="poly", degree=3, coef0=0.3).fit(X.astype(np.float64), y > 0.5)
    graph = _graph(model, X.astype(np.float64), zipmap=False)
    check(graph, _rows(rng, 300, 5, dtype=np.float64), "torch")


@pytest.mark.parametrize("kernel", ["linear", "rbf", "poly"])
def test_one_row_calls(rng, kernel):
    """One row takes MLAS's one-row kernel (lanes of 8, then a reduction whose order
    depends on the output column): a program, traced or not, decides per call."""
    from sklearn.svm import SVC, SVR

    X, y = _data(rng)
    regressor = _graph(SVR(**_kernel_args(rng, kernel, {})).fit(X, y), X)
    classifier = _graph(SVC(**_kernel_args(rng, kernel, {})).fit(X, y > 0), X, zipmap=False)
    for graph in (regressor, classifier):
        ort = session(graph)
        containers = [woodstar.convert(graph, "torch"),
                      woodstar.convert(graph, "torch", extra_config={"cpu_route": "program"}),
                      woodstar.convert(graph, "torch.jit")]
        batch = _rows(rng, 40, 5)
        for row in [batch[i:i + 1] for i in range(40)] + [batch]:
            expected = ort.run(None, {"X": row})
            for container in containers:
                if len(expected) == 2:
                    np.testing.assert_array_equal(container.predict(row), expected[0])
                    np.testing.assert_array_equal(container.predict_proba(row), expected[1])
                else:
                    np.testing.assert_array_equal(container.predict(row), expected[0])


def test_many_support_vectors_and_features(rng):
    """Past 1024 support vectors the regressor's Gemm adds K slices; past 128 features
    (fewer vectors than features) the kernel's Gemm does."""
    from sklearn.svm import NuSVR, SVR

    X, y = _data(rng, n_rows=1400)
    model = NuSVR(nu=0.95, kernel="rbf", C=0.5).fit(X, y)
    assert model.support_vectors_.shape[0] > 1024
    check(_graph(model, X), _rows(rng, 200, 5), "torch")
    X, y = _data(rng, n_rows=120, n_features=300)
    for kernel in ("linear", "poly"):
        model = SVR(kernel=kernel, degree=2, gamma=0.01, coef0=0.2).fit(X, y)
        check(_graph(model, X), _rows(rng, 100, 300), "torch")


def _refused(graph, match):
    with pytest.raises(MissingConverter, match=match):
        woodstar.convert(graph, "torch")


def _probability_svc(rng, n_classes, kernel="rbf", extra=None, n_rows=200, **options):
    from sklearn.svm import SVC

    X, y = _data(rng, n_rows=n_rows)
    labels = np.digitize(y, np.quantile(y, np.linspace(0, 1, n_classes + 1)[1:-1]))
    model = SVC(probability=True, random_state=int(rng.integers(1 << 30)),
                **_kernel_args(rng, kernel, extra or {})).fit(X, labels)
    return _graph(model, X, **options)


@pytest.mark.parametrize("backend,kernel,extra,n_classes", [
    ("torch", "linear", {}, 2), ("torch", "rbf", {}, 3), ("torch", "poly", {"degree": 2}, 5),
    ("torch", "sigmoid", {}, 4), ("torch.jit", "linear", {}, 3)],
    ids=["linear2", "rbf3", "poly2_5", "sigmoid4", "jit_linear3"])
def test_probabilities(backend, rng, kernel, extra, n_classes):
    """prob_a/prob_b: ONNX Runtime's Platt scaling of each pair score and its pairwise
    coupling (up to 100 float32 sweeps, each row stopping on its own), bit for bit;
    NaN rows stay at 1 / n_classes there."""
    check(_probability_svc(rng, n_classes, kernel, extra, zipmap=False), _rows(rng, 300, 5),
          backend)


def test_probabilities_with_zipmap_and_string_labels(rng):
    from sklearn.svm import SVC

    X, y = _data(rng, n_rows=200)
    labels = np.array(["ant", "bee", "cat", "dog"])[np.digitize(y, [-1.0, 0.0, 1.0])]
    model = SVC(kernel="linear", probability=True, random_state=0).fit(X, labels)
    check(_graph(model, X), _rows(rng, 200, 5), "torch")


def test_probabilities_one_row_and_steep_platt_curves(rng):
    """Steep Platt curves: many pair probabilities pinned at the 1e-7 and 1 - 1e-7
    clamps, often inconsistent with each other. The coupling's stopping rule decides
    the last bits (one sweep more or less changes most rows), so it is checked here
    too; one-row calls included."""
    from onnx import helper

    graph = _probability_svc(rng, 5, kernel="linear", zipmap=False)
    node = graph.graph.node[0]
    for a in node.attribute:
        if a.name in ("prob_a", "prob_b"):
            values = rng.normal(scale=40.0, size=len(a.floats)).astype(np.float32)
            a.CopyFrom(helper.make_attribute(a.name, values.tolist()))
    containers = [woodstar.convert(graph, "torch"),
                  woodstar.convert(graph, "torch", extra_config={"cpu_route": "program"})]
    batch = _rows(rng, 300, 5)
    expected = session(graph).run(None, {"X": batch})
    for container in containers:
        np.testing.assert_array_equal(container.predict(batch), expected[0])
        np.testing.assert_array_equal(container.predict_proba(batch), expected[1])
    for row in (batch[i:i + 1] for i in range(0, 300, 50)):
        expected = session(graph).run(None, {"X": row})
        for container in containers:
            np.testing.assert_array_equal(container.predict_proba(row), expected[1])


def test_probabilities_of_the_wrong_length_are_refused(rng):
    from onnx import helper

    graph = _probability_svc(rng, 3, zipmap=False)
    node = graph.graph.node[0]
    for a in node.attribute:
        if a.name == "prob_a":
            a.CopyFrom(helper.make_attribute("prob_a", list(a.floats)[:2]))
    with pytest.raises(MissingConverter, match="prob_a and prob_b"):
        woodstar.convert(graph, "torch")


def test_refusals(rng):
    from sklearn.svm import SVR

    X, y = _data(rng)
    _refused(_graph(SVR(kernel="poly", degree=4).fit(X, y), X), "degree")
    graph = _graph(SVR().fit(X, y), X)
    from onnx import helper

    graph.graph.node[0].attribute.append(helper.make_attribute("one_class", 1))
    _refused(graph, "one_class")


def test_probabilities_on_the_onnx_backend_hold_one_coupling_loop(rng):
    """The exported program keeps the coupling sweeps as one ONNX Loop that stops when
    every row has (an unrolled export of the 100 sweeps took many minutes): ONNX
    Runtime running woodstar's export gives the source graph's probabilities."""
    graph = _probability_svc(rng, 3, kernel="linear", n_rows=24, zipmap=False)  # a small export
    X = _rows(rng, 200, 5)
    converted = woodstar.convert(graph, "onnx")
    assert "Loop" in {node.op_type for node in converted.model.graph.node}
    expected = session(graph).run(None, {"X": X})
    np.testing.assert_array_equal(converted.predict(X), expected[0])
    np.testing.assert_array_equal(converted.predict_proba(X), expected[1])


def test_probabilities_are_refused_on_tvm_at_once(rng):
    """TVM does not import the coupling loop (and the unrolled sweeps take minutes to
    compile): refused at convert time, before any export starts."""
    from woodstar.backends import all_backends

    if not all_backends()["tvm"].is_available()[0]:
        pytest.skip("backend tvm is not installed")
    graph = _probability_svc(rng, 3, kernel="linear", zipmap=False)
    with pytest.raises(MissingConverter, match="backend.*tvm.*coupling"):
        woodstar.convert(graph, "tvm")
