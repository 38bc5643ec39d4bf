"""skl2onnx's GaussianProcessRegressor graphs (predict, no return_std) against ONNX
Runtime running the same graph, on the CPU route, the eager program and the traced one,
to the bit: the RBF kernel (isotropic or one length scale per feature), times a
ConstantKernel, plus a WhiteKernel. The graph's shape arithmetic on its training rows is
folded when read, the distance Scan becomes ``onnx_squared_distances``, and the
operators after it (Mul, Neg, MLAS's Exp, MatMul by the dual coefficients) are read one
by one."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from .test_tree_ensembles import FAST_BACKENDS, _routes

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_squared_distances",)
OPSET = {"": 17, "ai.onnx.ml": 3}


def _kernel(name):
    from sklearn.gaussian_process.kernels import RBF, ConstantKernel, WhiteKernel

    return {"default": None, "rbf": RBF(0.7), "anisotropic": RBF([0.5, 1.0, 2.0]),
            "constant_rbf": ConstantKernel(2.0) * RBF(1.3),
            "constant_rbf_white": ConstantKernel(2.0) * RBF(1.3) + WhiteKernel(0.1)}[name]


def _graph(rng, kernel, n_train=30):
    from sklearn.gaussian_process import GaussianProcessRegressor

    X = rng.normal(size=(n_train, 3)).astype(np.float32)
    y = np.sin(X[:, 0]) + X[:, 1] * X[:, 2]
    model = GaussianProcessRegressor(kernel=_kernel(kernel), random_state=0).fit(X, y)
    return skl2onnx.to_onnx(model, X[:1], target_opset=OPSET)


def _rows(rng, n):
    X = rng.normal(scale=1.5, size=(n, 3)).astype(np.float32)
    X[rng.random(X.shape) < 0.03] = np.nan
    if n > 4:
        X[1, 0], X[2, 1], X[3] = np.inf, -np.inf, 1e20  # distances overflow: exp(-inf) is 0
    return X


def _check_calls(graph, calls, backend):
    runs = session(graph)
    expected = [runs.run(None, {"X": X})[0] for X in calls]
    for extra in _routes(backend):
        container = woodstar.convert(graph, backend, extra_config=extra)
        for X, want in zip(calls, expected):
            got = container.predict(X)
            assert got.shape == want.shape
            np.testing.assert_array_equal(got, want, err_msg=f"{backend} {extra} {len(X)} rows")


@FAST_BACKENDS
@pytest.mark.parametrize("kernel", ["default", "rbf", "anisotropic", "constant_rbf",
                                    "constant_rbf_white"])
def test_gaussian_process_regressor(backend, rng, kernel):
    _check_calls(_graph(rng, kernel), [_rows(rng, n) for n in (1, 3, 1001)], backend)


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("n_train", [7, 41])
def test_other_fits(seed, n_train):
    rng = np.random.default_rng(seed)
    _check_calls(_graph(rng, "constant_rbf", n_train), [_rows(rng, n) for n in (1, 1002)],
                 "torch")


@pytest.mark.parametrize("backend", ["onnx", "tvm"])
def test_exporting_backends_equal_or_refused(rng, backend):
    from woodstar.backends import all_backends

    if not all_backends()[backend].is_available()[0]:
        pytest.skip(f"backend {backend} is not installed")
    graph = _graph(rng, "rbf", 5)  # a small kernel: the onnx export of each column is slow
    try:
        container = woodstar.convert(graph, backend)
    except MissingConverter as refused:
        assert backend in str(refused)
        return
    X = _rows(rng, 200)
    np.testing.assert_array_equal(container.predict(X), session(graph).run(None, {"X": X})[0])


def test_saved_and_loaded(rng, tmp_path):
    container = woodstar.convert(_graph(rng, "constant_rbf_white"), "torch")
    path = tmp_path / "gpr.zip"
    container.save(str(path))
    X = _rows(rng, 50)
    np.testing.assert_array_equal(woodstar.load(str(path)).predict(X), container.predict(X))


def test_other_kernels_are_refused_by_operator(rng):
    from sklearn.gaussian_process import GaussianProcessRegressor
    from sklearn.gaussian_process.kernels import DotProduct

    X = rng.normal(size=(20, 3)).astype(np.float32)
    model = GaussianProcessRegressor(kernel=DotProduct(), alpha=1.0).fit(X, X[:, 0])
    try:
        graph = skl2onnx.to_onnx(model, X[:1], target_opset=OPSET)
    except Exception:  # skl2onnx has no converter for this kernel
        pytest.skip("skl2onnx cannot write this kernel")
    try:
        container = woodstar.convert(graph, "torch")
    except MissingConverter:
        return
    R = _rows(rng, 100)
    np.testing.assert_array_equal(container.predict(R), session(graph).run(None, {"X": R})[0])


def test_constant_gather_out_of_range_is_refused():
    from onnx import TensorProto, helper

    X = helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])
    Y = helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 2])
    inits = [helper.make_tensor("c", TensorProto.FLOAT, [3, 2], np.ones(6, np.float32)),
             helper.make_tensor("i", TensorProto.INT64, [1], [5])]
    nodes = [helper.make_node("Shape", ["c"], ["s"]), helper.make_node("Gather", ["s", "i"], ["g"]),
             helper.make_node("Add", ["X", "X"], ["Y"])]
    graph = helper.make_model(helper.make_graph(nodes, "g", [X], [Y], inits),
                              opset_imports=[helper.make_opsetid("", 17)])
    with pytest.raises(MissingConverter, match="Gather.*indices"):
        woodstar.convert(graph, "torch")
