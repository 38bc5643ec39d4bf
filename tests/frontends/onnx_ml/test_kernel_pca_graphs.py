"""skl2onnx's KernelPCA graphs against ONNX Runtime running the same graph, on the CPU
route, the eager program and the traced one, to the bit: the rbf kernel (a Scan of
squared distances, MLAS's exp), the linear and sigmoid kernels (MatMul by the
transposed training rows, MLAS's tanh), then the centring (ReduceSum in Eigen's
packet order) and MatMul (MLAS's SGEMM). The poly and cosine kernels' Pow by an int64
2 or 3 is ONNX Runtime's ``x * x`` or ``x * x * x``; other integer exponents are refused."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from .test_tree_ensembles import FAST_BACKENDS, check

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
skl2onnx = pytest.importorskip("skl2onnx")

COVERS_OPS = ("onnx_rbf_kernel_rows", "onnx_mlas_tanh")
OPSET = {"": 17, "ai.onnx.ml": 3}


def _rows(rng, n, n_features):
    X = rng.normal(size=(n, n_features)).astype(np.float32)
    X[n // 2:] = np.round(X[n // 2:])  # integer-valued rows: equal distances
    X[rng.random(X.shape) < 0.03] = np.nan
    X[1] = np.inf
    X[2] = 1e30  # squares overflow: exp(-inf) is 0
    return X


@FAST_BACKENDS
@pytest.mark.parametrize("n_train, gamma, n_components", [(150, None, 2), (37, 2.0, 5)])
def test_rbf_kernel_pca(backend, rng, n_train, gamma, n_components):
    from sklearn.decomposition import KernelPCA

    X = rng.normal(size=(n_train, 4)).astype(np.float32)
    model = KernelPCA(n_components, kernel="rbf", gamma=gamma).fit(X)
    graph = skl2onnx.to_onnx(model, X[:1], target_opset=OPSET)
    check(graph, _rows(rng, 203, 4), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("kernel", ["linear", "sigmoid"])
def test_kernel_pca_without_scan(backend, rng, kernel):
    from sklearn.decomposition import KernelPCA

    X = rng.normal(size=(41, 4)).astype(np.float32)
    model = KernelPCA(3, kernel=kernel, gamma=0.2, coef0=0.5).fit(X)
    graph = skl2onnx.to_onnx(model, X[:1], target_opset=OPSET)
    check(graph, _rows(rng, 150, 4), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("kernel,degree", [("poly", 2), ("poly", 3), ("cosine", 3)])
def test_kernel_pca_with_an_integer_power(backend, rng, kernel, degree):
    from sklearn.decomposition import KernelPCA

    X = rng.normal(size=(41, 4)).astype(np.float32)
    model = KernelPCA(3, kernel=kernel, degree=degree, gamma=0.2, coef0=0.5).fit(X)
    graph = skl2onnx.to_onnx(model, X[:1], target_opset=OPSET)
    check(graph, _rows(rng, 150, 4), backend)


def test_other_integer_powers_are_refused_by_operator(rng):
    from sklearn.decomposition import KernelPCA

    X = rng.normal(size=(30, 3)).astype(np.float32)
    graph = skl2onnx.to_onnx(KernelPCA(2, kernel="poly", degree=4).fit(X), X[:1],
                             target_opset=OPSET)
    with pytest.raises(MissingConverter, match="Pow"):
        woodstar.convert(graph, "torch")
