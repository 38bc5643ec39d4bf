"""NMF and MiniBatchNMF ``transform``, to scikit-learn's bits: both NMF solvers (cd,
with and without a shuffled coordinate order; mu with every beta loss), the W
penalties, MiniBatchNMF's own solve, float32 and float64, one row and 500, alone and
before a LogisticRegression (on the CPU route, exact end to end; a Torch program's
classifier sums in Torch's order). Their transform solves over the whole call, so the
container never splits a call (``batch_size`` and the memory budget change nothing),
sparse rows and traced backends are refused with the reason, and bad input gets the
source's error meaning."""

import warnings

import numpy as np
import pytest

sklearn = pytest.importorskip("sklearn")
from sklearn.decomposition import NMF, MiniBatchNMF  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402
from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import MinMaxScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.backends import all_backends  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402
from woodstar.ir.families.decomposition import NMFTransform, _cd_sweep  # noqa: E402
from woodstar.runtimes.families.decomposition import (  # noqa: E402
    cd_sweep_unavailable_reason, compiled_cd_sweep)

COVERS_OPS = ("nmf_transform",)
COVERS_MODELS = ("MiniBatchNMF", "NMF")

N_FEATURES = 7

# name -> (estimator factory, whether the loss needs strictly positive rows)
CASES = {
    "cd": (lambda: NMF(3, solver="cd", init="nndsvda", max_iter=300), False),
    "cd_tol0": (lambda: NMF(3, solver="cd", init="random", random_state=1, tol=0,
                            max_iter=40), False),
    "cd_shuffle": (lambda: NMF(4, solver="cd", shuffle=True, random_state=5), False),
    "cd_penalised": (lambda: NMF(3, solver="cd", alpha_W=0.02, l1_ratio=0.4,
                                 init="nndsvdar", random_state=0), False),
    "mu_frobenius": (lambda: NMF(3, solver="mu", init="random", random_state=2), False),
    "mu_kl": (lambda: NMF(3, solver="mu", beta_loss="kullback-leibler", max_iter=300), False),
    "mu_kl_l1": (lambda: NMF(3, solver="mu", beta_loss="kullback-leibler", alpha_W=0.01,
                             l1_ratio=0.6, max_iter=300), False),
    "mu_is": (lambda: NMF(3, solver="mu", beta_loss="itakura-saito", init="nndsvda",
                          max_iter=300), True),
    "mu_beta_half": (lambda: NMF(3, solver="mu", beta_loss=0.5, init="nndsvda"), True),
    "mu_beta_1_5_l2": (lambda: NMF(3, solver="mu", beta_loss=1.5, alpha_W=0.05,
                                   l1_ratio=0.0, init="nndsvda"), False),
    "mu_beta_3": (lambda: NMF(2, solver="mu", beta_loss=3.0, tol=0, max_iter=30,
                              init="random", random_state=3), False),
    "minibatch": (lambda: MiniBatchNMF(3, random_state=0, max_iter=30), False),
    "minibatch_kl": (lambda: MiniBatchNMF(3, beta_loss="kullback-leibler", alpha_W=0.01,
                                          l1_ratio=0.5, random_state=0, max_iter=30), False),
    "minibatch_is": (lambda: MiniBatchNMF(3, beta_loss="itakura-saito", random_state=0,
                                          max_iter=30, transform_max_iter=60), True),
}


def _rows(rng, n, positive, dtype=np.float64):
    """Fresh non-negative rows: zeros (unless the loss needs positive values), and a
    row of one repeated value."""
    X = rng.random((n, N_FEATURES)) * rng.uniform(0.5, 4.0, N_FEATURES)
    if positive:
        X += 0.05
    else:
        X[rng.random(X.shape) < 0.2] = 0.0
    if n > 3:
        X[1] = X[1, 0]
        X[2] = 0.0 if not positive else 0.5
    return X.astype(dtype)


def _quiet_fit(model, X, y=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning: irrelevant to parity
        return model.fit(X, y)


def _source(method, *args):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return method(*args)


def _assert_same(got, expected):
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(20240611)
    models = {}
    for name, (make, positive) in CASES.items():
        for dtype in (np.float64, np.float32):
            models[name, dtype] = _quiet_fit(make(), _rows(rng, 150, positive, dtype))
    return models


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_transform_is_the_source_answer(name, dtype, fitted, rng):
    model, positive = fitted[name, dtype], CASES[name][1]
    converted = woodstar.convert(model, "torch")
    assert converted.route == "numpy"
    for n in (1, 500):
        X = _rows(rng, n, positive, dtype)
        _assert_same(converted.transform(X), _source(model.transform, X))
    X = np.asfortranarray(X)  # the mean and the products read the rows in memory order
    _assert_same(converted.transform(X), _source(model.transform, X))


@pytest.mark.parametrize("name", ["cd_shuffle", "mu_kl_l1", "minibatch"])
def test_the_eager_torch_program_gives_the_same_answer(name, fitted, rng):
    model, positive = fitted[name, np.float64], CASES[name][1]
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    assert converted.route == "program"
    X = _rows(rng, 60, positive)
    _assert_same(converted.transform(X), _source(model.transform, X))
    X = np.asfortranarray(_rows(rng, 1500, positive))  # read in the caller's memory order
    _assert_same(converted.transform(X), _source(model.transform, X))


def test_pipeline_before_a_classifier_predicts_as_the_source(rng):
    X = _rows(rng, 300, False)
    y = (X[:, 0] + rng.normal(0, 0.3, len(X)) > X[:, 1]).astype(int)
    for nmf in (NMF(3, solver="cd", max_iter=400), NMF(3, solver="mu", max_iter=400),
                MiniBatchNMF(3, random_state=0)):
        pipe = _quiet_fit(make_pipeline(MinMaxScaler(), nmf, LogisticRegression()), X, y)
        converted = woodstar.convert(pipe, "torch")  # the CPU route: exact end to end
        for n in (1, 500):
            rows = _rows(rng, n, False)
            _assert_same(converted.predict_proba(rows), _source(pipe.predict_proba, rows))
            np.testing.assert_array_equal(converted.predict(rows), _source(pipe.predict, rows))


@pytest.mark.parametrize("make", [
    lambda: NMF(3, solver="cd", shuffle=True, random_state=0),  # stops on the whole call
    lambda: NMF(3, solver="mu"),  # starts from the call's mean, too
    lambda: MiniBatchNMF(3, random_state=0, max_iter=30)], ids=["cd", "mu", "minibatch"])
def test_a_call_is_never_split_into_batches(make, rng):
    model = _quiet_fit(make(), _rows(rng, 150, False))
    X = _rows(rng, 200, False)
    # The rows' answers depend on each other: the source's answer on pieces differs
    # (for cd only through the stopping test, so at a tolerance where a piece stops at
    # another iteration than the whole call).
    for tol in (model.tol, 1e-3, 0.2, 0.02, 0.1, 1e-5):
        model.set_params(tol=tol)
        expected = _source(model.transform, X)
        pieces = [_source(model.transform, X[i:i + 1]) for i in range(200)]
        if not np.array_equal(np.concatenate(pieces), expected):
            break
    else:
        pytest.fail("no tolerance made the source's answer depend on the call")
    for config in ({"batch_size": 7}, {"memory_budget_bytes": 1024},
                   {"batch_size": 7, "cpu_route": "program"}, {"n_threads": 2}):
        converted = woodstar.convert(model, "torch", extra_config=config)
        _assert_same(converted.transform(X), expected)


@pytest.mark.parametrize("name", ["cd", "mu_kl", "minibatch_kl"])
def test_save_and_load_round_trip(name, fitted, rng, tmp_path):
    for dtype in (np.float64, np.float32):
        model, positive = fitted[name, dtype], CASES[name][1]
        path = woodstar.convert(model, "torch").save(tmp_path / f"{name}.zip")
        loaded = woodstar.load(path)
        X = _rows(rng, 80, positive, dtype)
        _assert_same(loaded.transform(X), _source(model.transform, X))


def test_a_cd_fit_keeps_its_fortran_ordered_components_through_saving(fitted, tmp_path):
    model = fitted["cd", np.float64]
    assert model.components_.flags.f_contiguous and not model.components_.flags.c_contiguous
    path = woodstar.convert(model, "torch").save(tmp_path / "cd.zip")
    (op,) = [n.op for n in woodstar.load(path).ir.graph.nodes if n.kind == "nmf_transform"]
    assert op.components.flags.f_contiguous


def test_negative_input_gets_the_source_error_meaning(fitted, rng):
    for name in ("cd", "mu_kl"):
        model = fitted[name, np.float64]
        X = _rows(rng, 20, False)
        X[3, 2] = -0.5
        with pytest.raises(ValueError, match="Negative values"):
            model.transform(X)
        with pytest.raises(ValueError, match=r"NMF.transform takes non-negative values only"):
            woodstar.convert(model, "torch").transform(X)


def test_minibatch_takes_negative_values_as_the_source_does(fitted, rng):
    model = fitted["minibatch", np.float64]
    converted = woodstar.convert(model, "torch")
    X = _rows(rng, 40, False)
    X[3, 2] = -0.5  # MiniBatchNMF.transform does not check the sign
    _assert_same(converted.transform(X), _source(model.transform, X))
    X = -np.abs(_rows(rng, 40, False))  # a negative mean: the start is NaN, scipy refuses
    with pytest.raises(ValueError):
        _source(model.transform, X)
    with pytest.raises(ValueError, match="diverged"), np.errstate(invalid="ignore"):
        converted.transform(X)


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_nan_and_infinity_are_refused_as_the_source_refuses_them(bad, fitted, rng):
    for name in ("cd", "minibatch"):
        model = fitted[name, np.float64]
        X = _rows(rng, 10, False)
        X[4, 1] = bad
        with pytest.raises(ValueError):
            model.transform(X)
        with pytest.raises(ValueError, match="Input contains"):
            woodstar.convert(model, "torch").transform(X)


def test_no_rows_are_refused_as_the_source_refuses_them(fitted, rng):
    model = fitted["mu_kl", np.float64]
    X = _rows(rng, 5, False)[:0]
    with pytest.raises(ValueError, match="0 sample"):
        model.transform(X)
    with pytest.raises(ValueError, match="at least one row"):
        woodstar.convert(model, "torch").transform(X)


def test_zeros_with_a_loss_that_cannot_take_them_are_refused(fitted, rng):
    model = fitted["mu_is", np.float64]
    X = _rows(rng, 10, True)
    X[2, 2] = 0.0
    with pytest.raises(ValueError, match="beta_loss <= 0"):
        model.transform(X)
    with pytest.raises(ValueError, match="beta_loss <= 0"):
        woodstar.convert(model, "torch").transform(X)


def test_input_of_another_dtype_than_the_fit(fitted, rng):
    X = _rows(rng, 30, False, np.float32)
    model = fitted["mu_frobenius", np.float64]  # NMF: scikit-learn raises TypeError
    with pytest.raises(TypeError, match="same dtype"):
        model.transform(X)
    with pytest.raises(TypeError, match="the dtype it was fitted in"):
        woodstar.convert(model, "torch").transform(X)
    model = fitted["minibatch", np.float64]  # MiniBatchNMF mixes the dtypes
    _assert_same(woodstar.convert(model, "torch").transform(X), _source(model.transform, X))


def test_sparse_rows_are_refused(fitted, rng):
    from scipy import sparse

    model = fitted["mu_kl", np.float64]
    X = sparse.csr_matrix(_rows(rng, 20, False))
    with pytest.raises(TypeError, match="sparse input is not reproduced"):
        woodstar.convert(model, "torch").transform(X)


@pytest.mark.parametrize("state", [None, np.random.RandomState(0)], ids=["None", "instance"])
def test_shuffle_needs_an_int_random_state(state, rng):
    model = _quiet_fit(NMF(3, solver="cd", shuffle=True, random_state=state),
                       _rows(rng, 80, False))
    with pytest.raises(MissingConverter, match=r"random_state with shuffle=True is not "
                                               r"supported.*only an int seed"):
        woodstar.convert(model, "torch")
    model.set_params(shuffle=False)  # the state is then never read by transform
    X = _rows(rng, 30, False)
    _assert_same(woodstar.convert(model, "torch").transform(X), _source(model.transform, X))


@pytest.mark.parametrize("changed, message", [
    ({"n_components": 4}, r"n_components is not supported \(got 4\); supported: 3"),
    ({"beta_loss": "kullback-leibler"}, r"solver and beta_loss is not supported")])
def test_parameters_changed_after_fit_that_transform_rejects(changed, message, rng):
    model = _quiet_fit(NMF(3, solver="cd"), _rows(rng, 80, False)).set_params(**changed)
    with pytest.raises(ValueError):
        model.transform(_rows(rng, 5, False))  # scikit-learn raises on every call
    with pytest.raises(MissingConverter, match=message):
        woodstar.convert(model, "torch")


def _tracing_backends():
    params = []
    for name in ("torch.jit", "torch.compile", "onnx", "tvm"):
        available, reason = all_backends()[name].is_available()
        marks = () if available else (pytest.mark.skip(reason=f"backend {name}: {reason}"),)
        params.append(pytest.param(name, marks=marks, id=name))
    return params


# "traced", not "backend": a refusal compiles nothing, so the sampling of slow compiling
# backends (tests/conftest.py) has no reason to skip it.
@pytest.mark.parametrize("traced", _tracing_backends())
def test_traced_backends_are_refused_by_name(traced, fitted):
    for model in (fitted["cd", np.float64], fitted["minibatch", np.float32]):
        name = type(model).__name__
        with pytest.raises(MissingConverter, match=rf"Cannot convert {name}: backend is not "
                                                   rf"supported \(got '{traced}'\).*NumPy"):
            woodstar.convert(model, traced)


def _cd_sweep_as_written(W, HHt, XHt, permutation):
    """The source's coordinate loop as it is written (row after row, term after term),
    in the arrays' dtype."""
    violation = W.dtype.type(0)
    n_samples, n_components = W.shape
    for t in permutation:
        for i in range(n_samples):
            grad = -XHt[i, t]
            for r in range(n_components):
                grad += HHt[t, r] * W[i, r]
            pg = (grad if grad < 0 else W.dtype.type(0)) if W[i, t] == 0 else grad
            violation += abs(pg)
            hess = HHt[t, t]
            if hess != 0:
                value = W[i, t] - grad / hess
                W[i, t] = 0.0 if 0.0 > value else value
    return float(violation)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["float64", "float32"])
def test_the_sweeps_are_the_row_wise_loop(dtype, rng):
    """The NumPy sweep (column by column) and the compiled one (the CPU route's) give
    the source loop's bits."""
    W = rng.random((40, 5)).astype(dtype)
    W[rng.random(W.shape) < 0.3] = 0
    H = rng.random((5, 9)).astype(dtype)
    HHt, XHt = H @ H.T, (rng.random((40, 9)).astype(dtype) @ H.T) - dtype(0.7)
    HHt[2, 2] = 0  # a zero Hessian leaves the column as it is
    permutation = rng.permutation(5)
    W_loop, W_compiled = W.copy(), W.copy()
    expected = _cd_sweep_as_written(W_loop, HHt, XHt, permutation)
    assert _cd_sweep(W, HHt, XHt, permutation) == expected
    np.testing.assert_array_equal(W, W_loop)
    compiled = compiled_cd_sweep()
    if compiled is None:
        pytest.skip(f"the compiled sweep: {cd_sweep_unavailable_reason()}")
    assert compiled(W_compiled, HHt, XHt, permutation) == expected
    np.testing.assert_array_equal(W_compiled, W_loop)


def _saved_again(model):
    (op,) = [n.op for n in woodstar.convert(model, "torch").ir.graph.nodes]
    return NMFTransform.from_saved(*op.to_saved())


def test_the_op_is_saved_with_its_numbers_as_given(fitted):
    again = _saved_again(fitted["mu_beta_3", np.float64])
    assert (again.beta_loss, again.gamma, again.max_iter, again.tol) == (3.0, 0.5, 30, 0)
    assert type(again.beta_loss) is float
    assert type(_saved_again(fitted["mu_kl", np.float64]).beta_loss) is int  # "kullback-leibler"
