"""container.save / woodstar.load: round trips in a fresh process, and files that are
truncated, tampered with, foreign or carry a pickle are refused."""

import io
import json
from pathlib import Path
import warnings
import os
import pickle
import subprocess
import sys
import zipfile

import numpy as np
import pytest

import woodstar
from woodstar.backends import get_backend
from woodstar.exceptions import CorruptedFileError, VersionMismatchWarning

from ._helpers import inputs_for

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCORE_IN_FRESH_PROCESS = """
import sys, numpy as np, woodstar
model = woodstar.load(sys.argv[1])
X = np.load(sys.argv[2], allow_pickle=False)
np.save(sys.argv[3], model.predict(X).astype(str), allow_pickle=False)
np.save(sys.argv[4], model.predict_proba(X), allow_pickle=False)
np.save(sys.argv[5], model.predict_proba(X.astype(np.float32)), allow_pickle=False)
print(model.backend, model.strategy, sorted(model._programs))
"""


def _fresh_process(*args):
    env = dict(os.environ, PYTHONPATH=REPO + os.pathsep + os.environ.get("PYTHONPATH", ""))
    result = subprocess.run([sys.executable, "-c", SCORE_IN_FRESH_PROCESS, *map(str, args)],
                            capture_output=True, text=True, env=env, timeout=600)
    assert result.returncode == 0, result.stderr[-3000:]
    return result.stdout


@pytest.fixture(scope="module")
def string_label_hgb():
    """HGB with categorical splits, NaN and string labels (object dtype)."""
    from sklearn.ensemble import HistGradientBoostingClassifier

    rng = np.random.default_rng(3)
    X = rng.normal(size=(300, 5))
    X[:, 0] = rng.integers(0, 4, size=300)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = np.array(["north", "south", "east"], dtype=object)[
        (np.nan_to_num(X[:, 0]) % 3).astype(int)]
    model = HistGradientBoostingClassifier(max_iter=3, max_depth=3, categorical_features=[0],
                                           random_state=0).fit(X, y)
    return model, X


def test_round_trip_in_fresh_process(backend, string_label_hgb, tmp_path, rng):
    model, X = string_label_hgb
    # The programs themselves are saved here (the CPU route would run without them).
    converted = woodstar.convert(model, backend, extra_config={"cpu_route": "program"}
                                 if backend == "torch" else None)
    rows = inputs_for(model, X, rng)
    converted.predict(rows)  # float64 input: builds the float64 program too; both are saved
    path = tmp_path / "model.woodstar"
    converted.save(path)
    np.save(tmp_path / "X.npy", rows)
    out = _fresh_process(path, tmp_path / "X.npy", tmp_path / "labels.npy",
                         tmp_path / "proba64.npy", tmp_path / "proba32.npy")
    assert "float32" in out and "float64" in out
    np.testing.assert_array_equal(np.load(tmp_path / "labels.npy"), converted.predict(rows).astype(str))
    np.testing.assert_array_equal(np.load(tmp_path / "proba64.npy"), converted.predict_proba(rows))
    np.testing.assert_array_equal(np.load(tmp_path / "proba32.npy"),
                                  converted.predict_proba(rows.astype(np.float32)))
    # In this process too: labels keep their dtype (object strings here).
    loaded = woodstar.load(path)
    assert loaded.classes_.dtype == converted.classes_.dtype == object
    assert list(loaded.classes_) == list(model.classes_)
    assert loaded.backend == converted.backend and loaded.strategy == converted.strategy


def test_torchscript_artifact_loads_with_torch_alone(string_label_hgb, tmp_path):
    import torch

    model, X = string_label_hgb
    converted = woodstar.convert(model, "torchscript")
    path = tmp_path / "m.zip"
    converted.save(path)
    with zipfile.ZipFile(path) as archive:
        data = archive.read("artifacts/float32/model.pt")
    scripted = torch.jit.load(io.BytesIO(data))
    raw, proba = scripted(torch.from_numpy(X[:20].astype(np.float32)))
    np.testing.assert_allclose(proba.numpy(), converted.predict_proba(X[:20].astype(np.float32)))


@pytest.mark.parametrize("labels", [
    np.array([3, 7, 11]), np.array([True, False, True]),
    np.array(["a", "bb", "ccc"]), np.array(["x", "y", "z"], dtype=object),
    np.array([1.0, 2.0, 4.0]),
], ids=["int", "bool", "unicode", "object-str", "float"])
def test_labels_of_any_dtype_round_trip(labels, tmp_path):
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    y = labels[np.arange(60) % len(labels)]
    model = DecisionTreeClassifier(max_depth=3, random_state=0).fit(X, y)
    converted = woodstar.convert(model)
    converted.save(tmp_path / "m.zip")
    loaded = woodstar.load(tmp_path / "m.zip")
    assert loaded.classes_.dtype == model.classes_.dtype
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_object_labels_are_stored_without_pickle():
    from woodstar._saving import _classes_for_saving

    stored, as_object = _classes_for_saving(np.array([10, 20], dtype=object))
    assert as_object and stored.dtype == np.int64
    with pytest.raises(ValueError, match="Cannot save class labels of types"):
        _classes_for_saving(np.array(["a", 1], dtype=object))


# ----------------------------------------------------------------- tampering
@pytest.fixture(scope="module")
def saved(tmp_path_factory, string_label_hgb):
    model, X = string_label_hgb
    path = tmp_path_factory.mktemp("saved") / "model.zip"
    woodstar.convert(model, "torchscript").save(path)
    return path


def _members(path):
    with zipfile.ZipFile(path) as archive:
        return {name: archive.read(name) for name in archive.namelist()}


def _write(path, members):
    with zipfile.ZipFile(path, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)


def _rehash_manifest(members):
    import hashlib

    members["manifest.sha256"] = hashlib.sha256(members["manifest.json"]).hexdigest().encode()


def _replace_member(members, name, data):
    """What an attacker who rewrites the hashes would do: the member, its SHA-256 in the
    manifest and the manifest's own SHA-256 all consistent."""
    import hashlib

    members[name] = data
    manifest = json.loads(members["manifest.json"])
    manifest["files"][name] = hashlib.sha256(data).hexdigest()
    members["manifest.json"] = json.dumps(manifest).encode()
    _rehash_manifest(members)


def test_flipped_byte_is_refused(saved, tmp_path):
    data = bytearray(saved.read_bytes())
    with zipfile.ZipFile(saved) as archive:
        info = archive.getinfo("ir/nodes/0/threshold.npy")
    data[info.header_offset + 30 + len(info.filename) + 200] ^= 0x01  # inside the member's data
    bad = tmp_path / "flipped.zip"
    bad.write_bytes(bytes(data))
    with pytest.raises(CorruptedFileError, match="not a valid woodstar model file"):
        woodstar.load(bad)


@pytest.mark.parametrize("keep", [0.1, 0.5, 0.99])
def test_truncated_file_is_refused(saved, tmp_path, keep):
    data = saved.read_bytes()
    bad = tmp_path / "truncated.zip"
    bad.write_bytes(data[:int(len(data) * keep)])
    with pytest.raises(CorruptedFileError):
        woodstar.load(bad)


def test_member_rewritten_with_valid_zip_is_refused(saved, tmp_path):
    members = _members(saved)
    buffer = io.BytesIO()
    threshold = np.load(io.BytesIO(members["ir/nodes/0/threshold.npy"]))
    np.save(buffer, threshold + 1.0)
    members["ir/nodes/0/threshold.npy"] = buffer.getvalue()
    bad = tmp_path / "rewritten.zip"
    _write(bad, members)
    with pytest.raises(CorruptedFileError, match="threshold.npy does not match its SHA-256"):
        woodstar.load(bad)


def test_edited_manifest_is_refused(saved, tmp_path):
    members = _members(saved)
    members["manifest.json"] = members["manifest.json"].replace(b'"torch.jit"', b'"torch"')
    bad = tmp_path / "edited.zip"
    _write(bad, members)
    with pytest.raises(CorruptedFileError, match="manifest.json does not match its SHA-256"):
        woodstar.load(bad)


def test_unlisted_member_is_refused(saved, tmp_path):
    members = _members(saved)
    members["extra.bin"] = b"hello"
    bad = tmp_path / "extra.zip"
    _write(bad, members)
    with pytest.raises(CorruptedFileError, match="not listed in the manifest"):
        woodstar.load(bad)


def test_foreign_zip_is_refused(tmp_path):
    bad = tmp_path / "foreign.zip"
    _write(bad, {"README.txt": b"just a zip"})
    with pytest.raises(CorruptedFileError, match="has no manifest.json"):
        woodstar.load(bad)


def test_not_a_zip_is_refused(tmp_path):
    bad = tmp_path / "random.bin"
    bad.write_bytes(os.urandom(1000))
    with pytest.raises(CorruptedFileError, match="BadZipFile"):
        woodstar.load(bad)


class _Boom:
    def __reduce__(self):
        return (os.system, ("echo pwned > /dev/null",))


def test_zip_with_a_pickle_is_refused(tmp_path):
    bad = tmp_path / "pickle.zip"
    _write(bad, {"data.pkl": pickle.dumps(_Boom())})
    with pytest.raises(CorruptedFileError):
        woodstar.load(bad)


def test_pickled_array_with_matching_hash_is_refused(saved, tmp_path):
    """An attacker who rewrites the manifest's hashes still cannot make load unpickle:
    arrays are read with allow_pickle=False."""
    members = _members(saved)
    buffer = io.BytesIO()
    np.save(buffer, np.array([_Boom()], dtype=object), allow_pickle=True)
    _replace_member(members, "ir/nodes/0/threshold.npy", buffer.getvalue())
    bad = tmp_path / "pickled-array.zip"
    _write(bad, members)
    with pytest.raises(CorruptedFileError, match="is not a plain .npy array"):
        woodstar.load(bad)


def test_loading_never_unpickles(saved, monkeypatch):
    def refuse(*args, **kwargs):
        raise AssertionError("pickle was used while loading")

    monkeypatch.setattr(pickle, "load", refuse)
    monkeypatch.setattr(pickle, "loads", refuse)
    monkeypatch.setattr(pickle, "Unpickler", refuse)
    loaded = woodstar.load(saved)
    assert loaded.backend == "torch.jit"


def test_version_mismatch_warns(saved, tmp_path):
    members = _members(saved)
    manifest = json.loads(members["manifest.json"])
    manifest["versions"]["torch"] = "1.0.0"
    members["manifest.json"] = json.dumps(manifest).encode()
    _rehash_manifest(members)
    path = tmp_path / "old.zip"
    _write(path, members)
    with pytest.warns(VersionMismatchWarning, match=r"torch 1\.0\.0 \(now "):
        woodstar.load(path)


def test_manifest_records_versions_and_hashes(saved):
    manifest = json.loads(_members(saved)["manifest.json"])
    assert manifest["format"] == "woodstar-model" and manifest["format_version"] == 2
    assert {"woodstar", "torch", "numpy", "python"} <= set(manifest["versions"])
    assert manifest["backend"] == "torch.jit"
    assert set(manifest["files"]) == set(_members(saved)) - {"manifest.json", "manifest.sha256"}


def test_missing_file_is_file_not_found(tmp_path):
    with pytest.raises(FileNotFoundError):
        woodstar.load(tmp_path / "nope.zip")


def test_save_leaves_no_temporary_files(string_label_hgb, tmp_path):
    model, _ = string_label_hgb
    woodstar.convert(model).save(tmp_path / "m.zip")
    assert os.listdir(tmp_path) == ["m.zip"]


def test_torchscript_saved_on_another_device_is_traced_again(saved, monkeypatch):
    """A trace keeps its device in constants; when the loaded trace does not reproduce
    the eager module on the target device, load traces again instead of failing."""
    from woodstar.backends import torchscript_backend

    monkeypatch.setattr(torchscript_backend, "_same_as_eager", lambda *args: False)
    traced = []
    real_trace = torchscript_backend.trace
    monkeypatch.setattr(torchscript_backend, "trace",
                        lambda *a: traced.append(1) or real_trace(*a))
    loaded = woodstar.load(saved)
    assert traced  # traced again
    reference = woodstar.load(saved)
    X = np.random.default_rng(0).normal(size=(20, 5))
    np.testing.assert_array_equal(loaded.predict_proba(X), reference.predict_proba(X))


FORMAT_V1 = Path(__file__).resolve().parents[1] / "fixtures" / "format_v1"


@pytest.mark.parametrize("name", ["rf_torch.predict_proba", "pipeline_logreg_torch.predict_proba",
                                  "pipeline_logreg_torchscript.predict_proba",
                                  "lgbm_regressor_onnx.predict"])
def test_files_of_format_version_1_load_and_give_the_source_answers(name):
    """Files written before the graph IR (a chain in the manifest) load as that chain;
    each is compared with the source estimator's answer stored beside it."""
    stem, method = name.rsplit(".", 1)
    backend = {"torch": "torch", "torchscript": "torch.jit", "onnx": "onnx"}[stem.rsplit("_", 1)[1]]
    available, reason = get_backend(backend).is_available()
    if not available:
        pytest.skip(reason)
    manifest = json.loads(_members(FORMAT_V1 / f"{stem}.zip")["manifest.json"])
    assert manifest["format_version"] == 1
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # saved with other library versions, maybe
        loaded = woodstar.load(FORMAT_V1 / f"{stem}.zip")
    X = np.load(FORMAT_V1 / "inputs.npy")
    expected = np.load(FORMAT_V1 / f"{name}.npy")
    got = getattr(loaded, method)(X)
    if loaded.route == "program":
        np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)
    elif stem.startswith("pipeline_logreg"):
        # The stored answer was computed on another CPU, and OpenBLAS sums a product with
        # the kernel of the CPU it runs on: the source's answer here is the pipeline's
        # own, rebuilt from the saved parameters.
        np.testing.assert_allclose(got, expected, rtol=1e-14, atol=0)
        np.testing.assert_array_equal(got, getattr(_rebuilt_pipeline(loaded), method)(X))
    else:
        np.testing.assert_array_equal(got, expected)


def _rebuilt_pipeline(loaded):
    """scikit-learn's SimpleImputer -> StandardScaler -> LogisticRegression with the
    parameters a loaded container holds (fitted on stand-in rows first, so that every
    attribute scikit-learn reads exists)."""
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    fill, scale, linear = (node.op for node in loaded.ir.graph.nodes)
    assert fill.ops == ("fill_nan",) and scale.ops == ("sub", "div") and linear.coef.shape[0] == 3
    rng = np.random.default_rng(0)
    stand_in = rng.normal(size=(30, linear.coef.shape[1]))
    pipeline = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression())
    pipeline.fit(stand_in, np.arange(30) % 3)
    imputer, scaler, logistic = pipeline.steps[0][1], pipeline.steps[1][1], pipeline.steps[2][1]
    imputer.statistics_ = fill.operands[0].copy()
    scaler.mean_, scaler.scale_ = scale.operands[0].copy(), scale.operands[1].copy()
    scaler.var_ = scaler.scale_ ** 2
    logistic.coef_ = np.array(linear.coef_as_source, copy=True, order="K")
    logistic.intercept_ = linear.intercept.copy()
    return pipeline


def test_linear_coefficients_of_a_wrong_dtype_are_refused(tmp_path):
    """A step operand or coefficient array must be float32 or float64."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(0)
    X = rng.normal(size=(50, 3))
    model = make_pipeline(StandardScaler(), LogisticRegression()).fit(X, X[:, 0] > 0)
    path = tmp_path / "pipe.zip"
    woodstar.convert(model, "torch").save(path)
    for name in ("ir/nodes/1/coef.npy", "ir/nodes/0/operand_1.npy"):
        members = _members(path)
        buffer = io.BytesIO()
        np.save(buffer, np.load(io.BytesIO(members[name])).astype(np.int64))
        _replace_member(members, name, buffer.getvalue())
        bad = tmp_path / "bad.zip"
        _write(bad, members)
        with pytest.raises(CorruptedFileError, match="dtype int64"):
            woodstar.load(bad)
