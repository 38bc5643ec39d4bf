"""Hummingbird's call forms, names and inputs: code written for Hummingbird runs after
changing the import."""

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")
from sklearn.ensemble import GradientBoostingClassifier, RandomForestClassifier  # noqa: E402
from sklearn.linear_model import LogisticRegression  # noqa: E402

import woodstar  # noqa: E402
from woodstar import constants  # noqa: E402
from woodstar._options import parse_options  # noqa: E402
from woodstar.exceptions import ConstantError, CorruptedFileError  # noqa: E402

# Every name of hummingbird.ml.constants (hummingbird/ml/supported.py), the earlier
# ones, and post_transform with its values (hummingbird/ml/operator_converters/constants.py).
HUMMINGBIRD_NAMES = {
    "TREE_IMPLEMENTATION": "tree_implementation", "TREE_OP_PRECISION_DTYPE": "tree_op_precision_dtype",
    "ONNX_OUTPUT_MODEL_NAME": "onnx_model_name", "ONNX_TARGET_OPSET": "onnx_target_opset",
    "TVM_MAX_FUSE_DEPTH": "tvm_max_fuse_depth", "TVM_PAD_INPUT": "tvm_pad_prediction_inputs",
    "INPUT_NAMES": "input_names", "OUTPUT_NAMES": "output_names", "CONTAINER": "container",
    "N_THREADS": "n_threads", "BATCH_SIZE": "batch_size", "REMAINDER_SIZE": "remainder_size",
    "MAX_STRING_LENGTH": "max_string_length", "N_FEATURES": "n_features",
    "ONNX_INITIAL_TYPES": "onnx_initial_types", "ONNX_INPUT_NAMES": "onnx_input_names",
    "ONNX_OUTPUT_NAMES": "onnx_output_names", "POST_TRANSFORM": "post_transform",
    "SIGMOID": "LOGISTIC", "SOFTMAX": "SOFTMAX", "TWEEDIE": "TWEEDIE",
}


@pytest.fixture
def data(rng):
    X = rng.normal(size=(300, 4))
    return X, (X[:, 0] > 0).astype(int) + (X[:, 1] > 0)


# ------------------------------------------------------------------ constants, options
@pytest.mark.parametrize("name, value", sorted(HUMMINGBIRD_NAMES.items()))
def test_constants_has_every_hummingbird_name(name, value):
    assert getattr(constants, name) == value
    assert name in constants.__all__


@pytest.mark.parametrize("key", sorted(constants.IGNORED_KEYS))
def test_keys_without_effect_warn_once_with_the_reason(key):
    with pytest.warns(UserWarning, match=rf"extra_config\['{key}'\] has no effect in woodstar: ") as record:
        options = parse_options({key: 3})
    assert len(record) == 1 and "\n" not in str(record[0].message)
    assert options == parse_options({})


def test_remainder_size_given_to_convert_is_accepted_with_a_warning(data):
    X, y = data
    model = LogisticRegression().fit(X, y)
    with pytest.warns(UserWarning, match="every woodstar backend takes any batch size"):
        converted = woodstar.convert(model, "torch", extra_config={constants.REMAINDER_SIZE: 10})
    np.testing.assert_array_equal(converted.predict(X), model.predict(X))


def test_an_unknown_key_is_still_an_error():
    with pytest.raises(ConstantError, match=r"Unknown extra_config key\(s\) 'remainder'"):
        parse_options({"remainder": 1})


def test_onnx_input_names_is_read_as_input_names():
    assert parse_options({"onnx_input_names": ["x"]}).input_names == ("x",)
    with pytest.raises(ConstantError, match="both 'input_names' and its earlier name"):
        parse_options({"onnx_input_names": ["x"], "input_names": ["y"]})


# ------------------------------------------------------------------ call forms
def test_an_empty_test_input_means_none(data):
    X, y = data
    model = LogisticRegression().fit(X, y)
    for empty in ([], (), np.empty((0,))):
        converted = woodstar.convert(model, "torch", empty)
        np.testing.assert_array_equal(converted.predict(X), model.predict(X))


def test_supported_backends_maps_names_like_hummingbird():
    from woodstar.supported import backends

    assert backends["torch"] == "torch" and backends["pytorch"] == "torch"
    assert backends["torchscript"] == "torch.jit"
    for name in backends:
        woodstar.backends.get_backend(name)  # every listed name is usable here


def test_load_checks_the_digest_and_takes_hummingbirds_arguments(data, tmp_path):
    X, y = data
    model = RandomForestClassifier(n_estimators=3, max_depth=3, random_state=0).fit(X, y)
    converted = woodstar.convert(model, "torch")
    path = tmp_path / "model.zip"
    converted.save(str(path))
    import hashlib
    import zipfile

    with zipfile.ZipFile(path) as archive:
        expected = hashlib.sha256(archive.read("manifest.json")).hexdigest()
    assert converted.digest == expected
    for loaded in (woodstar.load(str(path), digest=expected), woodstar.load(str(path), expected),
                   woodstar.load(str(tmp_path / "model"), override_flag=True),
                   woodstar.load(str(path), "cpu")):
        assert loaded.digest == expected
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
    with pytest.raises(CorruptedFileError, match=f"its digest is {expected}, not the expected"):
        woodstar.load(str(path), digest="0" * 64)


# ------------------------------------------------------------------ post_transform
def test_post_transform_none_gives_raw_scores_and_keeps_labels(data, rng):
    X, y = data
    fresh = rng.normal(size=(200, 4))
    for model in (LogisticRegression().fit(X, y), LogisticRegression().fit(X, y > 0),
                  GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y),
                  GradientBoostingClassifier(n_estimators=5, random_state=0).fit(X, y > 0)):
        converted = woodstar.convert(model, "torch", extra_config={constants.POST_TRANSFORM: None})
        raw = model.decision_function(fresh)
        np.testing.assert_allclose(converted.predict_proba(fresh), raw.reshape(len(fresh), -1),
                                   rtol=1e-12, atol=1e-12)
        np.testing.assert_array_equal(converted.predict(fresh), model.predict(fresh))
        assert not hasattr(converted, "predict_log_proba")


def test_post_transform_naming_the_models_own_changes_nothing_and_others_are_refused(data):
    X, y = data
    model = LogisticRegression().fit(X, y)
    same = woodstar.convert(model, "torch", extra_config={constants.POST_TRANSFORM: constants.SOFTMAX})
    np.testing.assert_array_equal(same.predict_proba(X), model.predict_proba(X))
    with pytest.raises(ConstantError, match="'LOGISTIC' does not fit .*whose post-transform is 'softmax'"):
        woodstar.convert(model, "torch", extra_config={constants.POST_TRANSFORM: constants.SIGMOID})
    with pytest.raises(ConstantError, match=r"'post_transform'\] is not supported \(got 'raw'\)"):
        parse_options({constants.POST_TRANSFORM: "raw"})


# ------------------------------------------------------------------ onnx opset
def test_an_onnx_opset_below_the_minimum_is_refused_at_once(data):
    pytest.importorskip("onnxruntime")
    from woodstar.backends.onnx_backend import MIN_TARGET_OPSET

    X, y = data
    model = RandomForestClassifier(n_estimators=2, max_depth=2, random_state=0).fit(X, y)
    with pytest.raises(ConstantError, match=f"must be at least {MIN_TARGET_OPSET} .*got 11"):
        woodstar.convert(model, "onnx", extra_config={"onnx_target_opset": 11})


# ------------------------------------------------------------------ inputs
def test_sparse_and_object_inputs_are_accepted_like_sklearn(data):
    sparse = pytest.importorskip("scipy.sparse")
    pd = pytest.importorskip("pandas")
    X, y = data
    X = np.where(np.abs(X) < 0.5, 0.0, X)
    model = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    converted = woodstar.convert(model, "torch")
    expected = model.predict_proba(X)
    for matrix in (sparse.csr_matrix(X), sparse.csc_matrix(X), sparse.coo_matrix(X)):
        np.testing.assert_array_equal(converted.predict_proba(matrix), expected)
    np.testing.assert_array_equal(converted.predict_proba(X.astype(object)), expected)
    frame = pd.DataFrame(X).astype({0: object, 2: object})
    np.testing.assert_array_equal(converted.predict_proba(frame), model.predict_proba(frame))
    frame[0] = ["a"] + list(X[1:, 0])
    with pytest.raises(ValueError, match=r"non-numeric column\(s\): 0 \(object\)"):
        converted.predict(frame)


# ------------------------------------------------------------------ command line
def test_python_dash_m_runs_the_command_line():
    result = subprocess.run([sys.executable, "-m", "woodstar", "--version"], capture_output=True,
                            text=True, timeout=120)
    assert result.returncode == 0 and result.stdout.startswith("woodstar ")


def test_progress_bar_without_tqdm(monkeypatch, capsys):
    from woodstar.cli import predict

    monkeypatch.setitem(sys.modules, "tqdm", None)  # import tqdm now fails
    bar = predict._progress(10, quiet=False)
    bar.update(4)
    bar.update(6)
    bar.close()
    assert "10/10 rows (100%)" in capsys.readouterr().err


def _classifier_files(tmp_path, rng, n_classes):
    X = rng.normal(size=(300, 4))
    y = (X[:, 0] > 0).astype(int) + ((X[:, 1] > 0) if n_classes == 3 else 0)
    files = []
    try:
        import lightgbm

        model = lightgbm.LGBMClassifier(n_estimators=5, num_leaves=7, verbose=-1).fit(X, y)
        model.booster_.save_model(str(tmp_path / "model.txt"))
        files.append((tmp_path / "model.txt", model))
    except ImportError:
        pass
    try:
        import xgboost

        model = xgboost.XGBClassifier(n_estimators=5, max_depth=3).fit(X, y)
        model.save_model(str(tmp_path / "model.json"))
        files.append((tmp_path / "model.json", model))
    except ImportError:
        pass
    return X, files


@pytest.mark.parametrize("n_classes", [2, 3])
def test_cli_converts_a_classifiers_booster_file_as_a_classifier(tmp_path, rng, n_classes, capsys):
    from woodstar.cli import main

    X, files = _classifier_files(tmp_path, rng, n_classes)
    if not files:
        pytest.skip("needs lightgbm or xgboost")
    for path, model in files:
        out = tmp_path / (path.suffix[1:] + ".wz")
        assert main(["convert", str(path), "--backend", "torch", "--output", str(out)]) == 0, \
            capsys.readouterr().err
        loaded = woodstar.load(str(out))
        np.testing.assert_array_equal(loaded.predict(X), model.predict(X))
        np.testing.assert_allclose(loaded.predict_proba(X), model.predict_proba(X),
                                   rtol=1e-6, atol=1e-7)
        assert main(["convert", str(path), "--backend", "torch", "--output", str(out),
                     "--as-booster"]) == 0
        assert not hasattr(woodstar.load(str(out)), "predict_proba")


def test_tvm_compile_warnings_do_not_reach_stderr(data, capfd):
    pytest.importorskip("tvm")
    from woodstar.backends.registry import get_backend

    try:
        get_backend("tvm")
    except Exception as error:  # noqa: BLE001
        pytest.skip(str(error))
    from woodstar.backends.tvm_backend import _filtered_native_stderr

    with _filtered_native_stderr():
        os.write(2, b"[10:15:06] /x/transform.h:1261: Warning: Fast mode segfaults when ...\n"
                    b"Scope Saving: x\nsomething else\n")
    err = capfd.readouterr().err
    assert "Fast mode" not in err and "Scope Saving" not in err and "something else" in err
    X, y = data
    model = RandomForestClassifier(n_estimators=2, max_depth=3, random_state=0).fit(X, y)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        converted = woodstar.convert(model, "tvm")
    np.testing.assert_array_equal(converted.predict(X), model.predict(X))
    err = capfd.readouterr().err
    assert "Fast mode segfaults" not in err and "Scope Saving:" not in err
