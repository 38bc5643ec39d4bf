"""Containers pickle through the saved format: pickle, cloudpickle and joblib, before
and after a call has built the compiled CPU route (whose ctypes handles cannot be
pickled), and the copy answers bit for bit as the original."""

import io
import pickle

import numpy as np
import pytest

import woodstar

cloudpickle = pytest.importorskip("cloudpickle")
joblib = pytest.importorskip("joblib")
sklearn_ensemble = pytest.importorskip("sklearn.ensemble")


def _joblib_round_trip(obj):
    buffer = io.BytesIO()
    joblib.dump(obj, buffer)
    buffer.seek(0)
    return joblib.load(buffer)


ROUND_TRIPS = {
    "pickle": lambda obj: pickle.loads(pickle.dumps(obj)),
    "cloudpickle": lambda obj: cloudpickle.loads(cloudpickle.dumps(obj)),
    "joblib": _joblib_round_trip,
}


@pytest.fixture
def forest(rng):
    X = rng.normal(size=(300, 5))
    X[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(X[:, 0]) + X[:, 1] > 0).astype(int)
    model = sklearn_ensemble.RandomForestClassifier(n_estimators=8, max_depth=6, random_state=0)
    return model.fit(X, y), X


@pytest.mark.parametrize("called_first", [False, True], ids=["fresh", "after-a-call"])
@pytest.mark.parametrize("how", sorted(ROUND_TRIPS))
def test_container_pickles_through_saved_format(forest, how, called_first):
    model, X = forest
    converted = woodstar.convert(model, "torch")
    if called_first:  # builds the compiled walk (ctypes) where a C compiler is there
        expected = converted.predict_proba(X)
    else:
        expected = woodstar.convert(model, "torch").predict_proba(X)
    copy = ROUND_TRIPS[how](converted)
    assert type(copy).__name__ == type(converted).__name__
    assert copy.backend == converted.backend
    np.testing.assert_array_equal(copy.predict_proba(X), expected)
    np.testing.assert_array_equal(copy.predict(X), model.predict(X))


def test_pickle_carries_saved_bytes_not_python_objects(forest):
    model, X = forest
    converted = woodstar.convert(model, "torch")
    converted.predict(X)
    data = pickle.dumps(converted)
    assert b"woodstar._pickling" in data and b"from_saved_bytes" in data
    assert b"ctypes" not in data and b"woodstar.container" not in data
    assert b"manifest.json" in data  # the zip travels as bytes


def test_tampered_pickle_is_refused(forest):
    model, _ = forest
    data = bytearray(pickle.dumps(woodstar.convert(model, "torch")))
    at = data.index(b"manifest.json") + 200  # inside the zip: a member's bytes change
    data[at] ^= 0xFF
    with pytest.raises(woodstar.exceptions.CorruptedFileError, match="not a valid woodstar model"):
        pickle.loads(bytes(data))
