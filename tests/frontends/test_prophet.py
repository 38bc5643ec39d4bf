"""Prophet against its own ``predict``: linear, logistic (cap and floor, or the default
floor) and flat growth with changepoints; yearly, weekly, daily, custom and conditional
seasonalities; additive and multiplicative modes; holidays with windows and their own
prior scales; standardized, binary and multiplicative regressors; dates before the
history, inside it, far past the last changepoint, at any time of day, repeated and
unsorted; microsecond and nanosecond time units. The NumPy route gives Prophet's bits;
Torch programs (eager, TorchScript, ONNX, TVM) agree to 1e-9 of each column's size.
Saved and loaded; bad frames and unsupported models refused with the reason."""

import copy
import logging
import pickle

import numpy as np
import pytest

prophet = pytest.importorskip("prophet", reason="prophet is not installed")
pd = pytest.importorskip("pandas")

import woodstar  # noqa: E402
from woodstar.backends import all_backends  # noqa: E402
from woodstar.exceptions import MissingConverter, NotFittedError  # noqa: E402
from woodstar.ir.families.forecast import seconds_since_epoch  # noqa: E402

COVERS_OPS = ("prophet_features", "prophet_trend", "prophet_components")
COVERS_MODELS = ("Prophet",)

logging.getLogger("cmdstanpy").disabled = True
logging.getLogger("prophet").setLevel(logging.ERROR)

N_DAYS = 240
START = pd.Timestamp("2021-03-01")
HOLIDAYS = pd.DataFrame({
    "holiday": ["sale", "sale", "sale", "launch", "launch", "future_only"],
    "ds": pd.to_datetime(["2021-04-10", "2021-08-02", "2022-04-10", "2021-06-15",
                          "2023-06-15", "2023-01-01"]),
    "lower_window": [-1, -1, -1, 0, 0, -2],
    "upper_window": [2, 2, 2, 0, 0, 1],
    "prior_scale": [5.0, 5.0, 5.0, np.nan, np.nan, 0.5],
})


def _history(rng, unit="us", logistic=False):
    ds = pd.Series(pd.date_range(START, periods=N_DAYS, freq="D")).astype(f"datetime64[{unit}]")
    t = np.arange(N_DAYS)
    y = 10 + 0.02 * t + np.sin(2 * np.pi * t / 7) + rng.normal(scale=0.3, size=N_DAYS)
    df = pd.DataFrame({"ds": ds, "y": y})
    df["temp"] = rng.normal(20, 5, size=N_DAYS)
    df["promo"] = (rng.random(N_DAYS) < 0.2).astype(float)
    df["price"] = rng.normal(3, 0.5, size=N_DAYS)
    df["is_weekend"] = df["ds"].dt.dayofweek >= 5
    if logistic:
        df["y"] = 20 / (1 + np.exp(-(t - 120) / 30)) + 3 + 0.3 * np.sin(2 * np.pi * t / 7) \
            + rng.normal(scale=0.2, size=N_DAYS)
        df["cap"] = 25.0
        df["floor"] = 2.0
    return df


CASES = {
    "linear_additive": dict(
        make=lambda: prophet.Prophet(yearly_seasonality=3, weekly_seasonality=True,
                                     daily_seasonality=2, holidays=HOLIDAYS, n_changepoints=10,
                                     uncertainty_samples=50)
        .add_seasonality("monthly", period=30.5, fourier_order=4, prior_scale=3.0)
        .add_regressor("temp").add_regressor("promo")
        .add_regressor("price", standardize=False, mode="multiplicative"),
        history={}),
    "logistic_multiplicative": dict(
        make=lambda: prophet.Prophet(growth="logistic", seasonality_mode="multiplicative",
                                     weekly_seasonality=True, yearly_seasonality=False,
                                     holidays=HOLIDAYS, uncertainty_samples=0)
        .add_seasonality("weekend_hours", period=1, fourier_order=3, condition_name="is_weekend")
        .add_regressor("temp", mode="additive").add_regressor("price"),
        history=dict(logistic=True)),
    "logistic_minmax_default_floor": dict(
        make=lambda: prophet.Prophet(growth="logistic", scaling="minmax",
                                     changepoints=["2021-05-01", "2021-07-01", "2021-09-15"],
                                     weekly_seasonality=3, yearly_seasonality=False,
                                     uncertainty_samples=0),
        history=dict(logistic=True), drop=("floor",)),
    "flat": dict(
        make=lambda: prophet.Prophet(growth="flat", weekly_seasonality=True,
                                     yearly_seasonality=2, uncertainty_samples=0),
        history={}),
    "linear_nanoseconds": dict(
        make=lambda: prophet.Prophet(weekly_seasonality=True, yearly_seasonality=False,
                                     daily_seasonality=False, uncertainty_samples=0),
        history=dict(unit="ns")),
    "bare": dict(
        make=lambda: prophet.Prophet(weekly_seasonality=False, yearly_seasonality=False,
                                     daily_seasonality=False, n_changepoints=0,
                                     uncertainty_samples=0),
        history={}),
}


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(20261201)
    models = {}
    for name, case in CASES.items():
        df = _history(rng, **case["history"]).drop(columns=list(case.get("drop", ())))
        if "cap" in df and "floor" not in df:
            df["cap"] = df["y"].max() + 5.0
        models[name] = case["make"]().fit(df)
    return models


def _future(rng, model, n=160):
    """Fresh rows: before the history, inside it, years after it; midnight and any time
    of day (nanoseconds too, for a nanosecond model); holidays; repeats; unsorted."""
    unit = model.start.unit
    span = (N_DAYS + 3 * 365 + 90) * 86400
    seconds = rng.integers(0, span, size=n)
    ds = (START - pd.Timedelta(days=90)).as_unit(unit) + pd.to_timedelta(seconds, unit="s")
    ds = pd.Series(ds).astype(f"datetime64[{unit}]")
    ds[: n // 3] = ds[: n // 3].dt.floor("D")
    ds[n // 3: n // 3 + 6] = pd.to_datetime(["2021-04-09", "2021-04-12", "2022-04-10",
                                             "2023-06-15 13:00", "2022-12-30", "2023-01-02"],
                                            format="ISO8601")
    if unit == "ns":  # just past whole seconds: pandas nudges total_seconds off them
        ds[-20:] = ds[-20:].dt.floor("s") + pd.to_timedelta(rng.integers(1, 90, 20), unit="ns")
    ds[-3:] = ds.iloc[:3].to_numpy()
    df = pd.DataFrame({"ds": ds})
    df["temp"] = rng.normal(20, 5, size=n)
    df["promo"] = (rng.random(n) < 0.3).astype(float)
    df["price"] = rng.normal(3, 0.5, size=n)
    df["is_weekend"] = df["ds"].dt.dayofweek >= 5
    if model.growth == "logistic":
        floor = 2.0 if model.logistic_floor else model.y_min
        df["floor"] = floor + rng.normal(0, 0.1, size=n) if model.logistic_floor else None
        df["cap"] = floor + rng.uniform(15, 40, size=n)
        if not model.logistic_floor:
            df = df.drop(columns="floor")
    return df.sample(frac=1.0, random_state=int(rng.integers(1 << 30))).reset_index(drop=True)


def _expected_columns(expected):
    return [c for c in expected.columns if not c.endswith(("_lower", "_upper"))]


def _check(got, expected, exact):
    assert list(got.columns) == _expected_columns(expected)
    assert got.index.equals(expected.index)
    assert (got["ds"] == expected["ds"]).all()
    for column in got.columns[1:]:
        a, b = got[column].to_numpy(np.float64), expected[column].to_numpy(np.float64)
        if exact:
            np.testing.assert_array_equal(a, b, err_msg=column)
        else:
            scale = np.max(np.abs(b)) if len(b) else 0.0
            np.testing.assert_allclose(a, b, rtol=1e-9, atol=1e-9 * scale, err_msg=column)


@pytest.mark.parametrize("route", ["numpy", "program"])
@pytest.mark.parametrize("name", list(CASES))
def test_matches_prophet(fitted, name, route, rng):
    model = fitted[name]
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": route})
    df = _future(rng, model)
    expected = model.predict(df)
    got = converted.predict(df)
    _check(got, expected, exact=route == "numpy")
    if route == "program" and model.growth != "logistic":  # no exp: the trend is exact
        np.testing.assert_array_equal(got["trend"], expected["trend"])


def _available(name):
    cls = all_backends().get(name)
    return cls is not None and cls.is_available()[0]


# a sample of the compiling backends (each compiles for seconds); not the ``backend``
# fixture's name, so that conftest's sampling keeps every one of these
@pytest.mark.parametrize("backend_name, name", [
    ("torch.jit", "linear_additive"), ("torch.jit", "logistic_multiplicative"),
    ("onnx", "logistic_multiplicative"), ("tvm", "linear_additive"),
])
def test_backends_match_prophet(fitted, backend_name, name, rng):
    if not _available(backend_name):
        pytest.skip(f"backend {backend_name} is not available")
    model = fitted[name]
    converted = woodstar.convert(model, backend_name)
    df = _future(rng, model, n=60)
    _check(converted.predict(df), model.predict(df), exact=False)


def test_saved_and_loaded(fitted, tmp_path, rng):
    model = fitted["logistic_multiplicative"]
    converted = woodstar.convert(model, "torch")
    df = _future(rng, model)
    before = converted.predict(df)
    path = converted.save(tmp_path / "prophet.zip")
    loaded = woodstar.load(path)
    assert loaded.ir.head.frame_columns == converted.ir.head.frame_columns
    assert loaded.ir.head.output_names == converted.ir.head.output_names
    pd.testing.assert_frame_equal(loaded.predict(df), before)
    pd.testing.assert_frame_equal(pickle.loads(pickle.dumps(converted)).predict(df), before)
    for ours, theirs in zip(converted.ir.graph.nodes, loaded.ir.graph.nodes):
        (meta, arrays), (meta2, arrays2) = ours.op.to_saved(), theirs.op.to_saved()
        assert type(ours.op) is type(theirs.op) and meta == meta2
        for key in arrays:
            np.testing.assert_array_equal(arrays[key], arrays2[key])


def test_total_seconds_as_pandas(rng):
    """pandas' total_seconds (with its nudge off whole seconds past 2**53 ticks) from
    the exact day/tick split, in NumPy and in the lowered module, before and after
    1970."""
    import torch

    from woodstar.lowering.families.forecast import _Seconds

    whole = rng.integers(-3 * 10 ** 9, 3 * 10 ** 9, size=6000) * 10 ** 9
    ticks = whole + np.concatenate([rng.integers(1, 120, 2000),  # nudged up
                                    rng.integers(10 ** 9 - 120, 10 ** 9, 2000),  # down
                                    rng.integers(0, 10 ** 9, 2000)])
    ticks[:10] = whole[:10]
    deltas = pd.Series(pd.to_timedelta(ticks, unit="ns"))
    expected = deltas.dt.total_seconds().to_numpy()
    days, rem = np.divmod(ticks, 86400 * 10 ** 9)
    days, rem = days.astype(np.float64), rem.astype(np.float64)
    np.testing.assert_array_equal(seconds_since_epoch(days, rem, 10 ** 9), expected)
    module = _Seconds(10 ** 9)
    got = module(torch.from_numpy(days), torch.from_numpy(rem)).numpy()
    np.testing.assert_array_equal(got, expected)


def test_dates_as_strings_and_index_named_ds(fitted, rng):
    model = fitted["linear_additive"]
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "numpy"})
    df = _future(rng, model, n=40)
    df["ds"] = df["ds"].dt.strftime("%Y-%m-%d %H:%M:%S")
    expected = model.predict(df)
    _check(converted.predict(df), expected, exact=True)
    df.index = pd.Index(df["ds"].to_numpy(), name="ds")
    _check(converted.predict(df), model.predict(df), exact=True)


def test_intervals_are_refused(fitted, rng):
    converted = woodstar.convert(fitted["linear_additive"], "torch")
    df = _future(rng, fitted["linear_additive"], n=12)
    with pytest.raises(NotImplementedError, match="random draws"):
        converted.predict(df, intervals=True)
    with pytest.raises(NotImplementedError, match="random draws"):
        converted.predictive_samples(df)
    assert not any(c.endswith(("_lower", "_upper")) for c in converted.predict(df).columns)


def _errors_of(model, converted, df):
    """Prophet's error and the converted model's, on the same frame."""
    with pytest.raises(ValueError) as source:
        model.predict(df.copy())
    with pytest.raises(ValueError) as ours:
        converted.predict(df.copy())
    return str(source.value), str(ours.value)


def test_bad_frames_get_prophets_errors(fitted, rng):
    model = fitted["logistic_multiplicative"]
    converted = woodstar.convert(model, "torch")
    good = _future(rng, model, n=20)
    cases = {
        "missing regressor": good.drop(columns="temp"),
        "NaN regressor": good.assign(temp=np.where(np.arange(20) == 3, np.nan, good["temp"])),
        "missing cap": good.drop(columns="cap"),
        "missing floor": good.drop(columns="floor"),
        "cap below floor": good.assign(cap=good["floor"] - 1.0),
        "missing condition": good.drop(columns="is_weekend"),
        "non-boolean condition": good.assign(is_weekend=2),
        "NaN date": good.assign(ds=good["ds"].where(np.arange(20) != 5)),
        "time zone": good.assign(ds=good["ds"].dt.tz_localize("UTC")),
        "no rows": good.iloc[:0],
    }
    for what, df in cases.items():
        source, ours = _errors_of(model, converted, df)
        assert ours == source, what
    with pytest.raises((ValueError, KeyError)):
        model.predict(good.drop(columns="ds"))
    with pytest.raises(ValueError, match="'ds'"):
        converted.predict(good.drop(columns="ds"))
    with pytest.raises(ValueError, match="keeps no history"):
        converted.predict()
    with pytest.raises(ValueError, match="DataFrame"):
        converted.predict(good.to_numpy())


def test_times_finer_than_the_unit_are_refused(fitted, rng):
    model = fitted["linear_additive"]  # fitted on microseconds
    converted = woodstar.convert(model, "torch")
    df = _future(rng, model, n=10)
    df["ds"] = df["ds"].astype("datetime64[ns]") + pd.Timedelta(1, "ns")
    with pytest.raises(ValueError, match="finer than the model's time unit"):
        converted.predict(df)
    df["ds"] = df["ds"].dt.floor("us")  # a nanosecond column holding microseconds is fine
    _check(converted.predict(df), model.predict(df), exact=False)


def test_unsupported_models_are_refused(fitted):
    with pytest.raises(NotFittedError, match="not been fitted"):
        woodstar.convert(prophet.Prophet(), "torch")
    base = fitted["bare"]
    mcmc = copy.deepcopy(base)
    mcmc.mcmc_samples = 100
    with pytest.raises(MissingConverter, match="MCMC"):
        woodstar.convert(mcmc, "torch")
    country = copy.deepcopy(base)
    country.country_holidays = "US"
    with pytest.raises(MissingConverter, match="country holidays"):
        woodstar.convert(country, "torch")
    forecast_regressor = copy.deepcopy(fitted["linear_additive"])
    forecast_regressor.extra_regressors["temp"]["predictor_spec"] = {}
    with pytest.raises(MissingConverter, match="regressor_predictor"):
        woodstar.convert(forecast_regressor, "torch")
