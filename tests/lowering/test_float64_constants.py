"""Float64 programs keep their constants exact when exported.

torch's default ONNX exporter (``torch.onnx.export(..., dynamo=True)``) writes a Python
float that enters arithmetic, a comparison, ``full_like`` or ``clamp`` as a float32
value, even in a float64 graph: ``x * 0.1`` then multiplies by 0.100000001490116...
The lowerings hold such constants as tensors (buffers) instead. Two checks:

* every lowered float64 program, captured with ``torch.export``, has no float literal
  that float32 cannot hold (a ``pow`` exponent is exempt: the exporter keeps it in
  float64); cheap, and it covers ops whose rounding rarely shows in an answer (a
  comparison threshold, a zero-denominator fallback);
* the same models exported to ONNX Runtime, on float64 rows: the default exporter's
  graph passes the backend's own check (no fallback to the TorchScript exporter) and
  its answers are scikit-learn's with the exactness of the Torch program.
"""

import logging
import warnings

import numpy as np
import pytest
import torch

sklearn = pytest.importorskip("sklearn")
from sklearn.calibration import CalibratedClassifierCV  # noqa: E402
from sklearn.decomposition import KernelPCA  # noqa: E402
from sklearn.discriminant_analysis import LinearDiscriminantAnalysis  # noqa: E402
from sklearn.ensemble import (AdaBoostClassifier, BaggingClassifier,  # noqa: E402
                              VotingClassifier, VotingRegressor)
from sklearn.linear_model import LinearRegression, LogisticRegression, Ridge  # noqa: E402
from sklearn.mixture import GaussianMixture  # noqa: E402
from sklearn.naive_bayes import GaussianNB  # noqa: E402
from sklearn.neighbors import (KNeighborsClassifier, KNeighborsRegressor,  # noqa: E402
                               RadiusNeighborsClassifier, RadiusNeighborsRegressor)
from sklearn.preprocessing import FunctionTransformer, QuantileTransformer  # noqa: E402
from sklearn.svm import SVC  # noqa: E402
from sklearn.tree import DecisionTreeClassifier  # noqa: E402

import woodstar  # noqa: E402
from woodstar.backends import all_backends  # noqa: E402

N_FEATURES = 4
RTOL = 1e-12
# sqrt of just under 2: scikit-learn leaves out training rows at squared distance 2
# (integer features), a radius rounded to float32 would take them in
RADIUS_BELOW_SQRT2 = float(np.sqrt(2.0 - 2.0 ** -40))


def _data(rng, n=120):
    X = rng.normal(size=(n, N_FEATURES))
    classes = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    return X, classes, X[:, 0] + 0.5 * X[:, 1] + 0.1 * rng.normal(size=n)


def _rows(rng, n=60):
    """Rows near the training data and far outside it (where probabilities round to
    0 and quantiles to their clipping bounds)."""
    return rng.normal(size=(n, N_FEATURES)) * rng.choice([0.5, 1.0, 3.0, 40.0], size=(n, 1))


def _grid_rows(rng, n):
    return rng.integers(-2, 3, size=(n, N_FEATURES)).astype(np.float64)


def _fit(make, target):
    def factory(rng):
        X, classes, values = _data(rng)
        y = {"classes": classes, "values": values, None: None}[target]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            model = make().fit(X) if y is None else make().fit(X, y)
        return model, _rows(rng)
    return factory


def _radius(rng):
    X = _grid_rows(rng, 150)
    model = RadiusNeighborsRegressor(radius=RADIUS_BELOW_SQRT2, algorithm="brute")
    return model.fit(X, X[:, 0] * 3.0 + X[:, 1]), _grid_rows(rng, 80)


def _ufunc(name):
    """A FunctionTransformer of one NumPy ufunc, on rows with NaN, zeros and negatives."""
    def factory(rng):
        X = _rows(rng)
        X[rng.random(X.shape) < 0.1] = np.nan
        X[rng.random(X.shape) < 0.05] = 0.0
        return FunctionTransformer(getattr(np, name)).fit(X), X
    return factory


CASES = {
    "kpca_rbf": _fit(lambda: KernelPCA(4, kernel="rbf", gamma=0.1), None),
    "kpca_poly": _fit(lambda: KernelPCA(4, kernel="poly", gamma=0.1, coef0=0.3, degree=3), None),
    "kpca_sigmoid": _fit(lambda: KernelPCA(4, kernel="sigmoid", gamma=0.1, coef0=0.3), None),
    "voting_regressor": _fit(lambda: VotingRegressor(
        [("ridge", Ridge(alpha=0.3)), ("ols", LinearRegression())], weights=[0.2, 0.7]), "values"),
    "voting_soft": _fit(lambda: VotingClassifier(
        [("lr", LogisticRegression()), ("nb", GaussianNB())], voting="soft",
        weights=[0.2, 0.7]), "classes"),
    "voting_hard": _fit(lambda: VotingClassifier(
        [("lr", LogisticRegression()), ("nb", GaussianNB()),
         ("tree", DecisionTreeClassifier(max_depth=3, random_state=0))],
        voting="hard", weights=[0.2, 0.7, 0.4]), "classes"),
    "bagging_log_proba": _fit(lambda: BaggingClassifier(
        LogisticRegression(), n_estimators=3, random_state=0), "classes"),
    "adaboost": _fit(lambda: AdaBoostClassifier(n_estimators=3, random_state=0), "classes"),
    "calibrated": _fit(lambda: CalibratedClassifierCV(LogisticRegression(), cv=2), "classes"),
    "knn_p3": _fit(lambda: KNeighborsRegressor(p=3), "values"),
    "knn_p3_distance": _fit(lambda: KNeighborsClassifier(p=3, weights="distance"), "classes"),
    "radius_below_sqrt2": _radius,
    "radius_classifier": _fit(lambda: RadiusNeighborsClassifier(
        radius=1.3, outlier_label=0), "classes"),
    "quantile_normal": _fit(lambda: QuantileTransformer(
        n_quantiles=30, output_distribution="normal"), None),
    "gaussian_mixture": _fit(lambda: GaussianMixture(2, random_state=0), None),
    "lda_log_proba": _fit(lambda: LinearDiscriminantAnalysis(), "classes"),
    # libsvm's coupling iterations: float32 stopping threshold or gamma once moved
    # answers on ONNX Runtime (scan only: exporting the unrolled sweeps takes minutes)
    "svc_proba": _fit(lambda: SVC(probability=True, gamma=0.1, random_state=0), "classes"),
    # constants inside the exporter's own decompositions (deg2rad's pi / 180, log10's
    # Log(x) / Log(10)) and sign's NaN: seen on ONNX Runtime only
    "rad2deg": _ufunc("rad2deg"),
    "log10": _ufunc("log10"),
    "sign": _ufunc("sign"),
}

# Exported to ONNX Runtime as well (seconds each): one per kind of constant whose
# float32 rounding shows in the answers on these rows.
# (QuantileTransformer's normal output is not among them: neither ONNX exporter has an
# operator for torch.special.ndtri.)
ONNX_CASES = ("kpca_rbf", "kpca_poly", "kpca_sigmoid", "voting_regressor", "voting_soft",
              "bagging_log_proba", "adaboost", "knn_p3", "radius_below_sqrt2",
              "gaussian_mixture", "lda_log_proba", "rad2deg", "log10", "sign")


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(20261201)
    return {name: make(rng) for name, make in CASES.items()}


def _float64_program(model):
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    return converted, converted._program("float64").module


def _scalars(arguments):
    for a in arguments:
        if isinstance(a, (list, tuple)):
            yield from _scalars(a)
        else:
            yield a


def inexact_float_literals(module, n_features):
    """(op, value, where) of every float literal of the captured program that float32
    cannot hold, pow exponents left out."""
    example = torch.zeros((3, n_features), dtype=torch.float64)
    program = torch.export.export(module, (example,),
                                  dynamic_shapes=({0: torch.export.Dim("batch")},))
    found = []
    for node in program.graph.nodes:
        if node.op != "call_function":
            continue
        arguments = list(node.args)
        if "pow" in str(node.target):
            arguments = arguments[:1]
        for value in _scalars(arguments + list(node.kwargs.values())):
            if isinstance(value, float) and np.isfinite(value) \
                    and float(np.float32(value)) != value:
                trace = (node.meta.get("stack_trace") or "").strip().splitlines()
                found.append((str(node.target), value, trace[-2].strip() if len(trace) > 1 else ""))
    return found


@pytest.mark.parametrize("name", sorted(CASES))
def test_float64_programs_hold_no_float32_rounded_literals(name, fitted):
    model, _ = fitted[name]
    _, module = _float64_program(model)
    found = inexact_float_literals(module, module.n_features)
    assert not found, f"{name}: float literals the ONNX exporter would round: {found}"


@pytest.mark.parametrize("name", ["deg2rad", "rad2deg"])
def test_degree_conversions_use_numpys_constant_in_float32(name, rng):
    """NumPy's float32 loop multiplies by its float32 constant (computed in float32);
    torch.rad2deg's float32 constant is another float32 value."""
    X = (rng.normal(size=(500, N_FEATURES)) * 100).astype(np.float32)
    model = FunctionTransformer(getattr(np, name)).fit(X)
    expected = model.transform(X)
    assert expected.dtype == np.float32
    program, _ = _float64_program(model)
    np.testing.assert_array_equal(program.transform(X), expected)


def _methods(model):
    names = ("predict", "predict_proba", "predict_log_proba", "decision_function",
             "transform", "score_samples")
    return [m for m in names if hasattr(model, m)]


def _sklearn(model, method, X):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # RadiusNeighborsRegressor: rows with no neighbour
        return getattr(model, method)(X)


def _assert_close(got, expected, what):
    """Labels exactly; values within RTOL of each column's size."""
    got, expected = np.asarray(got), np.asarray(expected)
    assert got.shape == expected.shape, what
    if expected.dtype.kind != "f":
        np.testing.assert_array_equal(got, expected, err_msg=what)
        return
    scale = np.nanmax(np.abs(expected), axis=0, initial=1.0) if len(expected) else 1.0
    np.testing.assert_allclose(got, expected, rtol=RTOL, atol=RTOL * np.max(scale),
                               err_msg=what)


@pytest.fixture(scope="module")
def quiet_exporter():
    loggers = [logging.getLogger(n) for n in ("torch.onnx", "torch.export", "onnxscript")]
    levels = [lg.level for lg in loggers]
    for lg in loggers:
        lg.setLevel(logging.ERROR)
    yield
    for lg, level in zip(loggers, levels):
        lg.setLevel(level)


def _onnx_available():
    cls = all_backends().get("onnx")
    return cls is not None and cls.is_available()[0]


@pytest.mark.skipif(not _onnx_available(), reason="onnx backend not installed")
@pytest.mark.parametrize("name", ONNX_CASES)
def test_onnx_float64_programs_match_sklearn(name, fitted, quiet_exporter):
    model, X = fitted[name]
    program, _ = _float64_program(model)
    exported = woodstar.convert(model, "onnx")
    for method in _methods(model):
        expected = _sklearn(model, method, X)
        on_torch = getattr(program, method)(X)
        on_onnx = getattr(exported, method)(X)
        _assert_close(on_torch, expected, f"{name}.{method} torch program")
        _assert_close(on_onnx, expected, f"{name}.{method} onnx")
    assert exported._programs["float64"].exporter == "dynamo"


@pytest.fixture(scope="module")
def prophet_model():
    prophet = pytest.importorskip("prophet", reason="prophet is not installed")
    pd = pytest.importorskip("pandas")
    logging.getLogger("cmdstanpy").disabled = True
    logging.getLogger("prophet").setLevel(logging.ERROR)
    rng = np.random.default_rng(20261202)
    days = 150
    t = np.arange(days)
    history = pd.DataFrame({
        "ds": pd.date_range("2022-01-03", periods=days, freq="D"),
        "y": 7.3 + 0.031 * t + np.sin(2 * np.pi * t / 7) + rng.normal(scale=0.2, size=days)})
    model = prophet.Prophet(weekly_seasonality=2, yearly_seasonality=False,
                            daily_seasonality=False, n_changepoints=4, uncertainty_samples=0)
    future = pd.DataFrame({"ds": pd.Timestamp("2021-11-01")
                           + pd.to_timedelta(rng.integers(0, 400 * 86400, 50), unit="s")})
    return model.fit(history), future


def test_prophet_program_holds_no_float32_rounded_literals(prophet_model):
    model, _ = prophet_model
    _, module = _float64_program(model)
    found = inexact_float_literals(module, module.n_features)
    assert not found, f"Prophet: float literals the ONNX exporter would round: {found}"


@pytest.mark.skipif(not _onnx_available(), reason="onnx backend not installed")
def test_prophet_on_onnx_keeps_the_exact_trend(prophet_model, quiet_exporter):
    """A linear trend is exact on the Torch program (no transcendental function): the
    exported one too, and the seasonal columns within the Torch program's 1e-9."""
    model, future = prophet_model
    expected = model.predict(future)
    exported = woodstar.convert(model, "onnx")
    got = exported.predict(future)
    assert exported._programs["float64"].exporter == "dynamo"
    np.testing.assert_array_equal(got["trend"], expected["trend"])
    for column in got.columns[1:]:
        a, b = got[column].to_numpy(np.float64), expected[column].to_numpy(np.float64)
        np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * np.max(np.abs(b)),
                                   err_msg=column)


def test_spark_binary_threshold_is_not_a_literal():
    """Spark's binary threshold on the raw score (a logit, rarely a float32 value)."""
    from woodstar.ir.families.spark_ops import SparkClassify
    from woodstar.lowering.families.spark_ops import SparkClassifyNode

    threshold = float(np.log(0.3 / 0.7))
    op = SparkClassify(2, "logistic", "binary_threshold", raw_threshold=threshold).validate()
    node = SparkClassifyNode(op)
    assert not inexact_float_literals(node, 2)
    raw = torch.tensor([[0.0, threshold], [0.0, float(np.nextafter(threshold, 1.0))]],
                       dtype=torch.float64)
    np.testing.assert_array_equal(node(raw)[0][:, -1].numpy(), [0.0, 1.0])


def test_onnx_ops_float64_fill_is_not_a_literal():
    """The ONNX-ML ops' filled columns (a double tree ensemble's base values, an SVM's
    rho) keep a float64 value's bits in a float64 program."""
    from woodstar.lowering.families.onnx_ops import TorchMath

    value = 0.1

    class Fill(torch.nn.Module):
        n_features = 2

        def forward(self, x):
            return TorchMath.full(x, value, "float64") + x[:, 0]

    assert not inexact_float_literals(Fill(), 2)
    got = Fill()(torch.zeros((3, 2), dtype=torch.float64))
    np.testing.assert_array_equal(got.numpy(), np.full(3, value))
