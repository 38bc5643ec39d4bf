"""The container's per-call shortcuts (a NumPy array of the fitted width goes straight
to conversion, DataFrames of plain numbers are read in one step, the precision is
remembered per dtype, a chain of ops runs without a table of values) give the answers
and the errors of the full input path, against the source library on fresh rows."""

import numpy as np
import pandas as pd
import pytest
from sklearn.ensemble import RandomForestClassifier
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

import woodstar
from woodstar.runtimes import NumpyGraph

N_FEATURES = 6
NAMES = [f"c{i}" for i in range(N_FEATURES)]


@pytest.fixture(scope="module")
def data():
    rng = np.random.default_rng(7)
    X = rng.normal(size=(400, N_FEATURES))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    return X, y


@pytest.fixture(scope="module")
def forest(data):
    X, y = data
    frame = pd.DataFrame(X, columns=NAMES)
    return RandomForestClassifier(20, max_depth=6, random_state=0).fit(frame, y)


@pytest.fixture(scope="module")
def linear(data):
    X, y = data
    return make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)


def _mixed_frame(rng, n):
    """Columns of every plain kind a DataFrame may hold (one block or several)."""
    return pd.DataFrame({
        "c0": rng.normal(size=n).astype(np.float32),
        "c1": rng.normal(size=n),
        "c2": rng.integers(-3, 3, n),
        "c3": rng.integers(0, 2, n).astype(bool),
        "c4": rng.integers(0, 4, n).astype(np.uint8),
        "c5": pd.Categorical(rng.choice([0.5, 1.5, -2.0], n)),
    })


@pytest.mark.parametrize("rows", [1, 3, 50])
def test_dataframes_of_plain_numbers_match_the_source(forest, rng, rows):
    converted = woodstar.convert(forest)
    frames = [pd.DataFrame(rng.normal(size=(rows, N_FEATURES)).astype(np.float32), columns=NAMES),
              pd.DataFrame(rng.normal(size=(rows, N_FEATURES)), columns=NAMES),
              _mixed_frame(rng, rows)]
    frames[1].iloc[0, 2] = np.nan  # the forest takes missing values
    for frame in frames:
        np.testing.assert_array_equal(converted.predict_proba(frame), forest.predict_proba(frame))
        shuffled = frame[NAMES[::-1]]  # matched by name, as scikit-learn does
        np.testing.assert_array_equal(converted.predict_proba(shuffled),
                                      forest.predict_proba(frame))


def test_dataframes_with_object_columns_take_the_full_path(forest, rng):
    converted = woodstar.convert(forest)
    frame = pd.DataFrame(rng.normal(size=(5, N_FEATURES)), columns=NAMES)
    numbers_as_objects = frame.astype({"c1": object})
    np.testing.assert_array_equal(converted.predict_proba(numbers_as_objects),
                                  forest.predict_proba(frame))
    words = frame.astype({"c1": object})
    words.loc[0, "c1"] = "a word"
    with pytest.raises(ValueError, match=r"takes numeric features; non-numeric column\(s\): 'c1'"):
        converted.predict_proba(words)
    dates = frame.assign(c3=pd.Timestamp("2024-01-01"))
    with pytest.raises(ValueError, match=r"non-numeric column\(s\): 'c3'"):
        converted.predict_proba(dates)
    with pytest.raises(ValueError, match=r"the DataFrame lacks \['c5'\] and has unexpected \[\]"):
        converted.predict_proba(frame.drop(columns="c5"))


def test_linear_pipeline_follows_the_frame_dtype(linear, rng):
    converted = woodstar.convert(linear)
    X = rng.normal(size=(40, N_FEATURES)).astype(np.float32)
    frame = pd.DataFrame(X)
    np.testing.assert_array_equal(converted.predict_proba(frame), linear.predict_proba(frame))
    np.testing.assert_array_equal(converted.predict_proba(frame[:1]), linear.predict_proba(frame[:1]))
    X64 = X.astype(np.float64)
    for rows in (X64, X64[:1]):
        np.testing.assert_array_equal(converted.predict_proba(rows), linear.predict_proba(rows))
    mixed = frame.astype({0: np.float64})
    np.testing.assert_array_equal(converted.predict_proba(mixed[:1]), linear.predict_proba(mixed[:1]))
    assert set(converted._cpu_runners) == {("numpy", "float32"), ("numpy", "float64")}


@pytest.mark.parametrize("backend", ["torch", "torch.jit"])
def test_linear_pipeline_on_fortran_ordered_float64_rows(linear, rng, backend):
    """scikit-learn keeps the rows' memory order, and its float64 product rounds
    differently for Fortran-ordered rows (a float DataFrame's values are): the NumPy
    route keeps the order too; programs take the rows C-ordered."""
    converted = woodstar.convert(linear, backend)
    X = np.asfortranarray(rng.normal(size=(200, N_FEATURES)))
    frame = pd.DataFrame(np.ascontiguousarray(X))
    for rows in (X, X.astype(np.float32), X[:1]):
        got, expected = converted.predict_proba(rows), linear.predict_proba(rows)
        if backend == "torch":
            np.testing.assert_array_equal(got, expected)
        else:
            np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-15)
    if backend == "torch":
        np.testing.assert_array_equal(converted.predict_proba(frame), linear.predict_proba(frame))


@pytest.mark.parametrize("layout", ["C", "F", "int", "bool", "float16", "strided"])
def test_numpy_arrays_of_any_layout_match_the_source(forest, rng, layout):
    converted = woodstar.convert(forest)
    X = rng.normal(size=(9, N_FEATURES)) * 3
    X = {"C": X, "F": np.asfortranarray(X), "int": X.astype(np.int64), "bool": X > 0,
         "float16": X.astype(np.float16), "strided": np.repeat(X, 2, axis=0)[::2]}[layout]
    with pytest.warns(UserWarning, match="feature names"):
        expected = forest.predict_proba(X)
    np.testing.assert_array_equal(converted.predict_proba(X), expected)
    np.testing.assert_array_equal(converted.predict_proba(X[:1]), expected[:1])


def test_errors_of_the_numpy_path_are_unchanged(forest, linear, rng):
    tree, pipe = woodstar.convert(forest), woodstar.convert(linear)
    X = rng.normal(size=(3, N_FEATURES))
    with pytest.raises(ValueError, match=r"expects 6 features; got 5 \(input shape \(3, 5\)\)"):
        tree.predict_proba(X[:, :5])
    with pytest.raises(ValueError, match=r"got a 1-D array of shape \(6,\) \(reshape a single"):
        tree.predict_proba(X[0])
    with pytest.raises(ValueError, match="takes numeric features; got dtype <U"):
        tree.predict_proba(X.astype(str))
    bad = X.copy()
    bad[1, 2] = np.inf
    with pytest.raises(ValueError, match="Input contains infinity or a value too large"):
        tree.predict_proba(bad)
    bad[1, 2] = np.nan
    with pytest.raises(ValueError, match="Input contains NaN"):
        pipe.predict_proba(bad)
    with pytest.raises(ValueError, match="Input contains NaN"):
        pipe.predict_proba(bad[1:2])
    # float64 beyond float32's range is infinity to the forest (it reads float32)
    with pytest.raises(ValueError, match="too large for float32"):
        tree.predict_proba(np.full((1, N_FEATURES), 1e300))


def test_a_scaler_overflow_is_refused_on_one_row(rng):
    X = rng.normal(size=(50, 3))
    y = (X[:, 0] > 0).astype(int)
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y)
    model[0].scale_ = np.array([1e-300, 1.0, 1.0])  # finite input, an infinite score
    converted = woodstar.convert(model)
    with pytest.warns(RuntimeWarning, match="overflow"), \
            pytest.raises(ValueError, match="holds infinity or a value too large"):
        converted.predict_proba(np.array([[1e10, 0.0, 0.0]]))


def test_new_options_are_read_again(forest, rng):
    converted = woodstar.convert(forest)
    X = rng.normal(size=(30, N_FEATURES)).astype(np.float32)
    frame = pd.DataFrame(X, columns=NAMES)
    converted.predict_proba(X)
    converted.options = converted.options.replace(precision="float64", batch_size=7)
    calls = []
    runner = converted._cpu_runner(converted.route, "float64")
    converted._cpu_runners[(converted.route, "float64")] = \
        lambda batch: calls.append((len(batch), batch.dtype)) or runner(batch)
    np.testing.assert_array_equal(converted.predict_proba(X), forest.predict_proba(frame))
    assert calls == [(7, np.float64)] * 4 + [(2, np.float64)]


def test_a_chain_runs_as_the_graph_does(linear, rng):
    ir = woodstar.convert(linear).ir
    X = rng.normal(size=(20, N_FEATURES))
    graph = NumpyGraph(ir, "float64")
    assert graph.direct == graph._chain
    chained = graph.direct(X)
    graph._is_chain = False  # the table of named values, node by node
    by_name = graph(X)
    for a, b in zip(chained, by_name):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(chained[1], linear.predict_proba(X))
