"""skl2onnx's IsolationForest graph (per tree a Gather, a TreeEnsembleRegressor of leaf
ids, LabelEncoders, float32 steps with Log; Sum, Div, Pow of 2, the labels) against
ONNX Runtime running the same graph: labels, decision_function and score_samples to
the bit on the CPU route, the eager program and torch.jit, with NaN rows, 1 row, a few
rows and 1 003 rows (a Log's kernel depends on a row's place in the call)."""

import ctypes
import ctypes.util

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter
from woodstar.ir.families.onnx_isolation import OnnxIsolationForest, powf_of_base
from woodstar.ir.families.onnx_ops import NumpyMath

from ._graphs import session

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_isolation_forest",)
OPSET = {"": 17, "ai.onnx.ml": 3}
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]
SIZES = (1, 2, 3, 5, 8, 1003)


def _graph(rng, score_samples=False, n_features=5, **params):
    from sklearn.ensemble import IsolationForest

    X = rng.normal(size=(300, n_features)).astype(np.float32)
    model = IsolationForest(random_state=int(rng.integers(1 << 16)), **params).fit(X)
    options = {id(model): {"score_samples": True}} if score_samples else None
    return skl2onnx.to_onnx(model, X[:1], target_opset=OPSET, options=options)


def _rows(rng, n, n_features=5):
    rows = (rng.normal(size=(n, n_features)) * 2).astype(np.float32)
    rows[rng.random(rows.shape) < 0.1] = np.nan
    rows[rng.random(rows.shape) < 0.01] = np.inf
    rows[rng.random(rows.shape) < 0.01] = -np.inf
    return rows


def _check(container, graph, rng, score_samples=False):
    rows = _rows(rng, max(SIZES))
    calls = [rows[:n] for n in SIZES] + [rows[700:701], rows[1:8]]
    for call in calls:
        expected = session(graph).run(None, {"X": call})
        what = f"{len(call)} rows"
        np.testing.assert_array_equal(container.predict(call), expected[0], err_msg=what)
        np.testing.assert_array_equal(container.decision_function(call), expected[1][:, 0],
                                      err_msg=what)
        if score_samples:
            np.testing.assert_array_equal(container.score_samples(call), expected[2][:, 0],
                                          err_msg=what)
    labels = session(graph).run(None, {"X": rows})[0]
    assert (labels == -1).any() and (labels == 1).any()  # both decisions occur


@pytest.mark.parametrize("params", [
    dict(n_estimators=3, max_samples=20),
    dict(n_estimators=10, contamination=0.1, bootstrap=True),
    dict(n_estimators=25, contamination=0.2, max_samples=64),
    dict(n_estimators=100),
])
def test_every_route(rng, params):
    graph = _graph(rng, score_samples=True, **params)
    for backend, extra in ROUTES:
        _check(woodstar.convert(graph, backend, extra_config=extra), graph, rng, score_samples=True)


def test_without_score_samples(rng):
    graph = _graph(rng, n_estimators=7)
    container = woodstar.convert(graph, "torch")
    assert not hasattr(container, "score_samples")
    _check(container, graph, rng)


def test_save_and_load(rng, tmp_path):
    graph = _graph(rng, score_samples=True, n_estimators=20)
    container = woodstar.convert(graph, "torch")
    path = tmp_path / "isolation.zip"
    container.save(str(path))
    loaded = woodstar.load(str(path))
    rows = _rows(rng, 1003)
    for method in ("predict", "decision_function", "score_samples"):
        np.testing.assert_array_equal(getattr(loaded, method)(rows),
                                      getattr(container, method)(rows))


def _isolation_op(graph):
    from woodstar.frontends.onnx_ml import from_onnx

    ir = from_onnx(graph, None)
    (op,) = [n.op for n in ir.graph.nodes if isinstance(n.op, OnnxIsolationForest)]
    return op


def test_eigen_and_glibc_logarithms_differ_on_some_leaf(rng):
    """Some leaf's term differs between Eigen's and glibc's Log, so a row's answer
    depends on its place in the call: the op is whole_call, and a batch size does not
    split a call (the last n % 4 rows get glibc's logarithm)."""
    for _ in range(5):
        graph = _graph(rng, score_samples=True, n_estimators=100)
        op = _isolation_op(graph)
        if op.whole_call:
            break
    assert op.whole_call
    leaves = ~np.isnan(op.packet_terms)  # ids that are some tree's leaf
    assert np.array_equal(leaves, ~np.isnan(op.tail_terms))
    assert (op.packet_terms[leaves] != op.tail_terms[leaves]).any()
    for extra in ({"batch_size": 4}, {"batch_size": 7, "cpu_route": "program"}):
        _check(woodstar.convert(graph, "torch", extra_config=extra), graph, rng,
               score_samples=True)


def _with_terms(graph):
    """The graph with each tree's leaf ids and depth term (the Sum's inputs, in order)
    as extra outputs, and the tree output behind each term."""
    import onnx

    nodes = {o: n for n in graph.graph.node for o in n.output}
    (total,) = [n for n in graph.graph.node if n.op_type == "Sum"]

    def tree_of(name):
        node = nodes.get(name)
        if node is None:
            return None
        if node.op_type == "TreeEnsembleRegressor":
            return node.output[0]
        return next((t for t in map(tree_of, node.input) if t is not None), None)

    trees = [tree_of(name) for name in total.input]
    extra = onnx.ModelProto()
    extra.CopyFrom(graph)
    for name in list(total.input) + trees:
        extra.graph.output.append(onnx.helper.make_tensor_value_info(name, 1, None))
    return extra, len(total.input)


def test_each_tree_term_is_onnx_runtimes_in_its_place(rng):
    """ONNX Runtime's own per-tree terms: Eigen's logarithm on the rows of whole
    packets, glibc's on the last n % 4 rows; the op's tables hold both, and a leaf
    whose two terms differ gets each in its place."""
    for _ in range(5):
        graph = _graph(rng, n_estimators=100)
        op = _isolation_op(graph)
        if op.whole_call:
            break
    extra, n_trees = _with_terms(graph)
    rows = _rows(rng, 1003)
    outputs = session(extra).run(None, {"X": rows})[2:]
    terms, leaves = np.hstack(outputs[:n_trees]), np.hstack(outputs[n_trees:]).astype(np.int64)
    trees = np.arange(n_trees)
    packet, tail = op.packet_terms[trees, leaves], op.tail_terms[trees, leaves]
    np.testing.assert_array_equal(terms[:1000], packet[:1000])
    np.testing.assert_array_equal(terms[1000:], tail[1000:])
    differing = np.argwhere(packet[:1000] != tail[:1000])
    assert len(differing) > 0  # rows of whole packets whose glibc term would differ
    for row, _ in differing[:5]:  # alone in a call: glibc's logarithm
        alone = np.hstack(session(extra).run(None, {"X": rows[row:row + 1]})[2:2 + n_trees])
        np.testing.assert_array_equal(alone[0], tail[row])
        assert (alone[0] != packet[row]).any()


def test_powf_of_base_is_glibc_powf(rng):
    libm = ctypes.util.find_library("m")
    if libm is None:
        pytest.skip("no libm")
    powf = ctypes.CDLL(libm).powf
    powf.restype, powf.argtypes = ctypes.c_float, (ctypes.c_float, ctypes.c_float)
    y = np.concatenate([rng.normal(size=3000) * 10, -rng.random(3000) * 160,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 127.9, 128.0, -149.5, -126.0]])
    y = y.astype(np.float32)
    for base in (2.0, 0.5, 3.7):
        got = powf_of_base(NumpyMath, np.float32(base), y)
        expected = np.array([powf(base, float(v)) for v in y], np.float32)
        np.testing.assert_array_equal(got, expected, err_msg=f"base {base}")


@pytest.mark.parametrize("exporter", ["onnx", "tvm"])
def test_exporting_backends_are_refused(rng, exporter):
    """Refused at convert time with the reason (exporting the mirrored powf takes
    minutes), not a compile that does not end."""
    from woodstar.backends import all_backends

    if exporter not in all_backends():
        pytest.skip(f"{exporter} not installed")
    with pytest.raises(MissingConverter, match="IsolationForest"):
        woodstar.convert(_graph(rng, n_estimators=3), exporter)


def test_a_double_input_is_refused(rng):
    """The trees' features must be float32, as skl2onnx writes the graph (a double
    graph's steps would run in float64)."""
    graph = _graph(rng, n_estimators=3)
    graph.graph.input[0].type.tensor_type.elem_type = 11  # double
    with pytest.raises(MissingConverter, match="float64"):
        woodstar.convert(graph, "torch")


def test_an_unknown_step_is_refused(rng):
    """A base of the power other than the graph's constant: the steps are matched, and
    a Pow whose base is computed is refused by name."""
    graph = _graph(rng, n_estimators=3)
    (power,) = [n for n in graph.graph.node if n.op_type == "Pow"]
    power.input[0] = power.input[1]  # Pow(x, x)
    with pytest.raises(MissingConverter, match="Pow"):
        woodstar.convert(graph, "torch")
