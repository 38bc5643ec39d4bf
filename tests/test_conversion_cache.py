"""``extra_config["conversion_cache"]``: a converted model's artifact kept on disk and
loaded, not compiled, when the same model is converted the same way again; any change
to the model, the backend, the options, woodstar's code or the machine misses; a file
that does not load is converted again; a folder that cannot be written leaves the
conversion standing."""

import os

import numpy as np
import pytest

import woodstar
from woodstar import _conversion_cache, _convert
from woodstar._options import parse_options
from woodstar._saving import ir_digest
from woodstar.exceptions import ConstantError
from woodstar.frontends import find_frontend

sklearn_ensemble = pytest.importorskip("sklearn.ensemble")
pytest.importorskip("onnxruntime")


def _forest(seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 5))
    y = (X[:, 0] + rng.normal(size=300) > 0).astype(int)
    return sklearn_ensemble.RandomForestClassifier(n_estimators=5, max_depth=4,
                                                   random_state=seed).fit(X, y)


def _rows(rng, n=64):
    X = rng.normal(size=(n, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    X[0, :] = [1e30, -1e30, 0.0, -0.0, 1e-30]  # scikit-learn refuses infinity
    return X


@pytest.fixture
def conversions(monkeypatch):
    """Counts the containers that ``convert`` compiles (a hit loads its programs)."""
    built = []
    original = _convert.make_container

    def counting(*args, **kwargs):
        if kwargs.get("programs") is None:
            built.append(args[1].name)
        return original(*args, **kwargs)

    monkeypatch.setattr(_convert, "make_container", counting)
    return built


def _cached_files(folder):
    return sorted(p for p in os.listdir(folder) if p.endswith(_conversion_cache.SUFFIX))


def test_a_repeated_conversion_is_loaded_and_answers_the_same(tmp_path, conversions, rng):
    model = _forest(0)
    config = {"conversion_cache": str(tmp_path)}
    first = woodstar.convert(model, "onnx", extra_config=config)
    assert conversions == ["onnx"] and len(_cached_files(tmp_path)) == 1
    second = woodstar.convert(model, "onnx", extra_config=config)
    assert conversions == ["onnx"]  # loaded, not converted
    assert second.options.conversion_cache == str(tmp_path)
    X = _rows(rng)
    np.testing.assert_array_equal(second.predict_proba(X), model.predict_proba(X))
    np.testing.assert_array_equal(second.predict_proba(X), first.predict_proba(X))
    np.testing.assert_array_equal(second.predict(X), model.predict(X))


@pytest.mark.parametrize("change", ["model", "backend", "options", "code", "machine"])
def test_each_part_of_the_key_makes_a_miss(change, tmp_path, conversions, monkeypatch):
    config = {"conversion_cache": str(tmp_path)}
    woodstar.convert(_forest(0), "onnx", extra_config=config)
    model, backend = _forest(0), "onnx"
    if change == "model":
        model = _forest(1)
    elif change == "backend":
        backend = "torch.jit"
    elif change == "options":
        config = {**config, "n_threads": 2}
    elif change == "code":
        monkeypatch.setattr(_conversion_cache, "code_digest", lambda: "edited")
    else:
        monkeypatch.setattr(_conversion_cache, "machine", lambda: {"cpu": "another"})
    woodstar.convert(model, backend, extra_config=config)
    assert len(conversions) == 2 and len(_cached_files(tmp_path)) == 2


def test_the_same_model_fitted_again_has_the_same_key(tmp_path, conversions):
    config = {"conversion_cache": str(tmp_path)}
    woodstar.convert(_forest(3), "onnx", extra_config=config)
    woodstar.convert(_forest(3), "onnx", extra_config=config)  # another object, same trees
    assert len(conversions) == 1
    irs = [find_frontend(m)(m, parse_options(None)) for m in (_forest(3), _forest(3), _forest(4))]
    assert ir_digest(irs[0]) == ir_digest(irs[1]) != ir_digest(irs[2])


def test_a_file_that_does_not_load_is_converted_again(tmp_path, conversions, rng):
    model = _forest(0)
    config = {"conversion_cache": str(tmp_path)}
    woodstar.convert(model, "onnx", extra_config=config)
    (name,) = _cached_files(tmp_path)
    path = tmp_path / name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF  # one flipped byte in a member
    path.write_bytes(bytes(data))
    with pytest.warns(UserWarning, match="conversion cache.*converting again"):
        converted = woodstar.convert(model, "onnx", extra_config=config)
    assert len(conversions) == 2
    X = _rows(rng)
    np.testing.assert_array_equal(converted.predict_proba(X), model.predict_proba(X))
    woodstar.convert(model, "onnx", extra_config=config)  # the file was written again
    assert len(conversions) == 2


def test_a_folder_that_cannot_be_written_leaves_the_conversion(tmp_path, conversions, rng):
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    model = _forest(0)
    with pytest.warns(UserWarning, match="could not save"):
        converted = woodstar.convert(model, "onnx", extra_config={"conversion_cache": str(blocked)})
    X = _rows(rng)
    np.testing.assert_array_equal(converted.predict_proba(X), model.predict_proba(X))


def test_backends_without_an_artifact_keep_nothing(tmp_path, conversions):
    for _ in range(2):
        woodstar.convert(_forest(0), "torch", extra_config={"conversion_cache": str(tmp_path)})
    assert conversions == ["torch", "torch"] and _cached_files(tmp_path) == []


def test_saved_files_hold_no_cache_setting(tmp_path):
    converted = woodstar.convert(_forest(0), "onnx",
                                 extra_config={"conversion_cache": str(tmp_path / "cache")})
    converted.save(tmp_path / "model.zip")
    assert woodstar.load(tmp_path / "model.zip").options.conversion_cache is None


def test_the_option_takes_true_or_a_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path))
    assert parse_options({"conversion_cache": True}).conversion_cache == str(tmp_path / "conversions")
    assert parse_options({"conversion_cache": False}).conversion_cache is None
    assert parse_options({"conversion_cache": "~/x"}).conversion_cache == os.path.expanduser("~/x")
    with pytest.raises(ConstantError, match=r"'conversion_cache'\] must be True or a folder"):
        parse_options({"conversion_cache": 3})


def test_a_tvm_conversion_is_loaded_from_the_cache(tmp_path, conversions, rng):
    from woodstar.backends import get_backend

    available, why = get_backend("tvm").is_available()
    if not available:
        pytest.skip(why)
    model = _forest(0)
    config = {"conversion_cache": str(tmp_path)}
    woodstar.convert(model, "tvm", extra_config=config)
    converted = woodstar.convert(model, "tvm", extra_config=config)
    assert conversions == ["tvm"]
    X = _rows(rng)
    np.testing.assert_array_equal(converted.predict_proba(X), model.predict_proba(X))
