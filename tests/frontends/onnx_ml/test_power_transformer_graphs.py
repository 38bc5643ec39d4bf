"""skl2onnx's PowerTransformer graphs (Yeo-Johnson and Box-Cox, standardized or not)
against ONNX Runtime running the same graph, on the CPU route, the eager program and
the traced one, to the bit: ``Log`` of computed blocks (Eigen's packets of four, glibc's
logf on the tensor's last ``size % 4`` elements, so widths that are not a multiple of 4
are checked on calls of several sizes), ``Pow`` by a constant exponent per column
(glibc's powf), ``Less`` of two computed blocks and its ``Not``. Hand-made graphs check
Log and Pow alone over wide ranges, zeros, infinities, subnormals and NaN."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from .test_tree_ensembles import FAST_BACKENDS, _routes

pytest.importorskip("onnxruntime")
onnx = pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_log", "onnx_powf")
OPSET = {"": 17, "ai.onnx.ml": 3}
SIZES = (1, 2, 3, 5, 1003)  # a row's place against the tensor's end decides Log's kernel


def _rows(rng, n, n_features, positive=False):
    X = rng.normal(scale=2.0, size=(n, n_features)).astype(np.float32)
    if positive:
        X = np.abs(X) + np.float32(0.01)
    X[rng.random(X.shape) < 0.03] = np.nan
    if n > 8:
        X[1, 0], X[2, -1], X[3, 0] = np.inf, -np.inf, 0.0
        X[4, -1], X[5, 0], X[6, -1] = -0.0, 1e-40, -1.0  # subnormal; 1 - x = 2
        X[7] = 1e30  # powers overflow
    return X


def _check_calls(graph, calls, backend):
    """Each call's answer on every route of ``backend`` (converted once) equals ONNX
    Runtime's."""
    runs = session(graph)
    expected = [runs.run(None, {"X": X})[0] for X in calls]
    for extra in _routes(backend):
        container = woodstar.convert(graph, backend, extra_config=extra)
        for X, want in zip(calls, expected):
            got = container.predict(X)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want, err_msg=f"{backend} {extra} {len(X)} rows")


def _fitted_graph(rng, method, n_features, standardize):
    from sklearn.preprocessing import PowerTransformer

    if method == "box-cox":
        X = rng.lognormal(size=(200, n_features)).astype(np.float32)
    else:
        X = (rng.gamma(2.0, size=(200, n_features)) - 1.5).astype(np.float32)
    model = PowerTransformer(method=method, standardize=standardize).fit(X)
    return skl2onnx.to_onnx(model, X[:1], target_opset=OPSET)


@FAST_BACKENDS
@pytest.mark.parametrize("method", ["yeo-johnson", "box-cox"])
@pytest.mark.parametrize("n_features", [3, 4])
@pytest.mark.parametrize("standardize", [True, False])
def test_power_transformer(backend, rng, method, n_features, standardize):
    graph = _fitted_graph(rng, method, n_features, standardize)
    positive = method == "box-cox"
    calls = [_rows(rng, n, n_features, positive) for n in SIZES]
    if positive:  # negatives too: NaN where the exponent is not an integer
        calls.append(_rows(rng, 300, n_features))
    _check_calls(graph, calls, backend)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_yeo_johnson_on_other_fits(seed):
    rng = np.random.default_rng(seed)
    graph = _fitted_graph(rng, "yeo-johnson", 5, True)
    _check_calls(graph, [_rows(rng, n, 5) for n in (1, 6, 1002)], "torch")


def _graph(op, n_features, exponents=None):
    from onnx import TensorProto, helper

    X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, n_features])
    Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, n_features])
    # Add(X, X): a computed block, as in skl2onnx's graphs (exact doubling)
    nodes = [helper.make_node("Add", ["X", "X"], ["T"])]
    inits = []
    if op == "Pow":
        inits.append(helper.make_tensor("e", TensorProto.FLOAT, [len(exponents)],
                                        np.asarray(exponents, np.float32)))
        nodes.append(helper.make_node("Pow", ["T", "e"], ["Y"]))
    else:
        nodes.append(helper.make_node("Log", ["T"], ["Y"]))
    graph = helper.make_graph(nodes, "g", [X], [Y], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _wide(rng, n, n_features):
    X = np.exp(rng.normal(scale=20.0, size=(n, n_features))).astype(np.float32)
    X *= np.where(rng.random(X.shape) < 0.2, -1, 1).astype(np.float32)
    special = np.array([0.0, -0.0, np.inf, -np.inf, np.nan, 0.5, -0.5, 1e-45, 3e-39, 1.0,
                        -1.0, 2.0], np.float32)
    X.reshape(-1)[:special.size] = special[:X.size]
    return X


@FAST_BACKENDS
@pytest.mark.parametrize("exponents", [[-0.32123885, 0.03907088, 1.0932196, 2.3212388],
                                       [3.0, -3.0, 2.0, -2.0], [0.0, 1.0, -7.5, 25.0], [0.5]])
def test_pow_by_constants(backend, rng, exponents):
    _check_calls(_graph("Pow", 4, exponents), [_wide(rng, 5000, 4), _wide(rng, 1, 4)], backend)


@FAST_BACKENDS
@pytest.mark.parametrize("n_features", [1, 2, 3, 4, 5])
def test_log_by_place(backend, rng, n_features):
    calls = [_wide(rng, n, n_features) for n in (1, 2, 3, 4, 7, 1001)]
    _check_calls(_graph("Log", n_features), calls, backend)


def test_log_of_a_computed_block_is_never_split(rng):
    """Where the width is not a multiple of 4 a row's logarithm depends on its place in
    the call: a batch size does not split such a call."""
    graph = _graph("Log", 3)
    X = _wide(rng, 1001, 3)
    expected = session(graph).run(None, {"X": X})[0]
    for extra in (None, {"batch_size": 7}, {"batch_size": 7, "cpu_route": "program"}):
        container = woodstar.convert(graph, "torch", extra_config=extra)
        np.testing.assert_array_equal(container.predict(X), expected, err_msg=str(extra))


def test_infinite_exponent_is_refused():
    with pytest.raises(MissingConverter, match="finite"):
        woodstar.convert(_graph("Pow", 2, [np.inf, 1.5]), "torch")


@pytest.mark.parametrize("backend_name", ["onnx", "tvm"])
def test_exporting_backends_are_refused_at_convert_time(backend_name):
    from woodstar.backends import all_backends

    if not all_backends()[backend_name].is_available()[0]:
        pytest.skip(f"backend {backend_name} is not installed")
    for op, match in (("Pow", "Pow.*powf"), ("Log", "Log.*logarithm")):
        with pytest.raises(MissingConverter, match=f"{match}.*{backend_name}"):
            woodstar.convert(_graph(op, 2, [1.5, -0.5]), backend_name)


def test_saved_and_loaded(rng, tmp_path):
    container = woodstar.convert(_fitted_graph(rng, "yeo-johnson", 3, True), "torch")
    path = tmp_path / "power.zip"
    container.save(str(path))
    X = _rows(rng, 101, 3)
    np.testing.assert_array_equal(woodstar.load(str(path)).predict(X), container.predict(X))
