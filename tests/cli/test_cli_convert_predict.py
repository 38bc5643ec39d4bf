"""``woodstar convert`` and ``woodstar predict`` through ``woodstar.cli.main``."""

import os

import numpy as np
import pytest

import woodstar
from woodstar.cli import main
from woodstar.frontends import supported_models


@pytest.fixture(scope="module")
def forest(tmp_path_factory):
    import joblib
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 4))
    y = np.array(["cat", "dog", "eel"], dtype=object)[(X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)]
    model = RandomForestClassifier(n_estimators=5, max_depth=4, random_state=0).fit(X, y)
    directory = tmp_path_factory.mktemp("cli")
    joblib.dump(model, directory / "model.joblib")
    np.save(directory / "X.npy", X)
    np.save(directory / "example.npy", X[:4])
    main(["convert", str(directory / "model.joblib"), "--backend", "torchscript",
          "--test-input", str(directory / "example.npy"), "--output", str(directory / "model.wz")])
    return model, X, directory


def test_convert_writes_a_loadable_model(forest, capsys):
    model, X, directory = forest
    loaded = woodstar.load(directory / "model.wz")
    assert loaded.backend == "torch.jit"
    np.testing.assert_array_equal(loaded.predict(X), model.predict(X))


def test_convert_with_extra_config(forest, tmp_path, capsys):
    _, X, directory = forest
    code = main(["convert", str(directory / "model.joblib"), "--backend", "torch", "--output",
                 str(tmp_path / "m.wz"), "--extra-config", '{"tree_implementation": "gemm"}'])
    assert code == 0
    assert woodstar.load(tmp_path / "m.wz").strategy == "gemm"


@pytest.mark.parametrize("args, message", [
    (["missing.joblib", "--backend", "torch"], "no such file"),
    (["model.xyz", "--backend", "torch"], "cannot tell the format"),
    (["model.joblib", "--backend", "nope"], "Unknown backend 'nope'"),
    (["model.joblib", "--backend", "torch", "--extra-config", "{bad"], "not valid JSON"),
    (["model.joblib", "--backend", "torch", "--extra-config", '{"colour": 1}'], "Unknown extra_config key"),
    (["model.joblib", "--backend", "torch", "--test-input", "X3.npy"], "expects 4 features; got 3"),
])
def test_convert_errors(forest, tmp_path, capsys, args, message):
    _, X, directory = forest
    (directory / "model.xyz").write_bytes(b"?")
    np.save(directory / "X3.npy", X[:2, :3])
    args = [str(directory / a) if a.endswith((".joblib", ".xyz", ".npy")) else a for a in args]
    assert main(["convert", *args, "--output", str(tmp_path / "out.wz")]) == 1
    assert message in capsys.readouterr().err
    assert not (tmp_path / "out.wz").exists()


def _write_input(X, path):
    if path.suffix == ".npy":
        np.save(path, X)
    elif path.suffix == ".csv":
        import pandas as pd

        pd.DataFrame(X, columns=[f"x{i}" for i in range(X.shape[1])]).to_csv(path, index=False)
    else:
        pq = pytest.importorskip("pyarrow.parquet")
        import pyarrow as pa

        table = pa.table({f"x{i}": X[:, i] for i in range(X.shape[1])})
        pq.write_table(table, path, row_group_size=50)


def _read_output(path, column):
    if path.suffix == ".npy":
        return np.load(path, allow_pickle=False)
    if path.suffix == ".csv":
        import pandas as pd

        frame = pd.read_csv(path)
    else:
        import pandas as pd

        frame = pd.read_parquet(path)
    return frame[column].to_numpy() if column in frame else frame.to_numpy()


@pytest.mark.parametrize("in_ext", [".npy", ".csv", ".parquet"])
@pytest.mark.parametrize("out_ext", [".npy", ".csv", ".parquet"])
def test_predict_labels(forest, tmp_path, in_ext, out_ext, capsys):
    if ".parquet" in (in_ext, out_ext):
        pytest.importorskip("pyarrow")
    model, X, directory = forest
    source, target = tmp_path / f"in{in_ext}", tmp_path / f"out{out_ext}"
    _write_input(X, source)
    code = main(["predict", str(directory / "model.wz"), "--input", str(source), "--output",
                 str(target), "--batch-rows", "64", "--quiet"])
    assert code == 0, capsys.readouterr().err
    got = _read_output(target, "predict")
    np.testing.assert_array_equal(got.astype(str), model.predict(X).astype(str))
    assert sorted(os.listdir(tmp_path)) == sorted([source.name, target.name])  # no leftovers


def test_predict_proba_in_batches(forest, tmp_path, capsys, monkeypatch):
    model, X, directory = forest
    calls = []
    real_load = woodstar.load

    def counting_load(*args, **kwargs):
        converted = real_load(*args, **kwargs)
        method = converted.predict_proba
        converted.predict_proba = lambda batch: calls.append(len(batch)) or method(batch)
        return converted

    monkeypatch.setattr(woodstar, "load", counting_load)
    code = main(["predict", str(directory / "model.wz"), "--input", str(directory / "X.npy"),
                 "--output", str(tmp_path / "p.csv"), "--method", "predict_proba",
                 "--batch-rows", "128"])
    assert code == 0
    assert calls == [128, 128, 44]
    import pandas as pd

    frame = pd.read_csv(tmp_path / "p.csv")
    assert list(frame.columns) == ["proba_cat", "proba_dog", "proba_eel"]
    np.testing.assert_allclose(frame.to_numpy(), model.predict_proba(X), atol=1e-12)
    assert "300" in capsys.readouterr().err  # the progress bar / summary


@pytest.mark.parametrize("args, message", [
    (["--method", "fly"], "has no method 'fly'"),
    (["--input", "X.txt"], "--input must end in"),
    (["--output", "out.json"], "--output must end in"),
])
def test_predict_errors(forest, tmp_path, capsys, args, message):
    _, _, directory = forest
    base = {"--input": str(directory / "X.npy"), "--output": str(tmp_path / "o.npy")}
    for flag, value in zip(args[::2], args[1::2]):
        base[flag] = value
    argv = ["predict", str(directory / "model.wz")] + [x for kv in base.items() for x in kv]
    argv += [a for a in args if a not in base and a not in base.values()]
    assert main(argv) == 1
    assert message in capsys.readouterr().err


def test_predict_refuses_a_corrupted_model(tmp_path, forest, capsys):
    _, _, directory = forest
    bad = tmp_path / "bad.wz"
    bad.write_bytes(b"PK\x03\x04 not really")
    assert main(["predict", str(bad), "--input", str(directory / "X.npy"),
                 "--output", str(tmp_path / "o.npy")]) == 1
    assert "not a valid woodstar model file" in capsys.readouterr().err


# ------------------------------------------------- other libraries' model files
def _needs_frontend(package, cls):
    if (package, cls) not in supported_models():
        pytest.skip(f"the {package} frontend is not available")


def test_convert_lightgbm_text_file(tmp_path, capsys):
    lightgbm = pytest.importorskip("lightgbm")
    _needs_frontend("lightgbm", "Booster")
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 4)), rng.normal(size=200)
    booster = lightgbm.train({"num_leaves": 7, "verbose": -1}, lightgbm.Dataset(X, y), 5)
    booster.save_model(str(tmp_path / "model.txt"))
    assert main(["convert", str(tmp_path / "model.txt"), "--backend", "torch",
                 "--output", str(tmp_path / "m.wz")]) == 0, capsys.readouterr().err
    np.testing.assert_allclose(woodstar.load(tmp_path / "m.wz").predict(X), booster.predict(X),
                               rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("ext", [".json", ".ubj"])
def test_convert_xgboost_model_file(tmp_path, capsys, ext):
    xgboost = pytest.importorskip("xgboost")
    _needs_frontend("xgboost", "Booster")
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 4)), rng.normal(size=200)
    booster = xgboost.train({"max_depth": 3}, xgboost.DMatrix(X, y), 5)
    booster.save_model(str(tmp_path / f"model{ext}"))
    assert main(["convert", str(tmp_path / f"model{ext}"), "--backend", "torch",
                 "--output", str(tmp_path / "m.wz")]) == 0, capsys.readouterr().err
    np.testing.assert_allclose(woodstar.load(tmp_path / "m.wz").predict(X),
                               booster.predict(xgboost.DMatrix(X)), rtol=1e-5, atol=1e-6)


def test_convert_catboost_model_file(tmp_path, capsys):
    catboost = pytest.importorskip("catboost")
    _needs_frontend("catboost", "CatBoost")
    rng = np.random.default_rng(0)
    X, y = rng.normal(size=(200, 4)), rng.normal(size=200)
    model = catboost.CatBoostRegressor(iterations=5, depth=3, verbose=False,
                                       allow_writing_files=False).fit(X, y)
    model.save_model(str(tmp_path / "model.cbm"))
    assert main(["convert", str(tmp_path / "model.cbm"), "--backend", "torch",
                 "--output", str(tmp_path / "m.wz")]) == 0, capsys.readouterr().err
    np.testing.assert_allclose(woodstar.load(tmp_path / "m.wz").predict(X), model.predict(X),
                               rtol=1e-5, atol=1e-6)


def test_convert_reports_an_unsupported_model_type(tmp_path, capsys):
    import joblib

    joblib.dump({"not": "a model"}, tmp_path / "thing.joblib")
    assert main(["convert", str(tmp_path / "thing.joblib"), "--backend", "torch",
                 "--output", str(tmp_path / "m.wz")]) == 1
    assert "Cannot convert dict" in capsys.readouterr().err


# ------------------------------------------------- pipelines of scalers and linear models
@pytest.mark.parametrize("backend", ["torch", "onnx"])
def test_convert_and_predict_a_scaler_pipeline(tmp_path, capsys, backend):
    """A pickled Pipeline(StandardScaler, LogisticRegression) through both commands; a
    bare scaler's ``transform`` through ``woodstar predict --method transform``."""
    if backend == "onnx":
        pytest.importorskip("onnxruntime")
    import joblib
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    rng = np.random.default_rng(1)
    X = rng.normal(size=(200, 4)) * [1, 100, 0.01, 5]
    y = (X[:, 0] + X[:, 1] / 100 > 0).astype(int)
    for name, model, method in (("pipe", make_pipeline(StandardScaler(), LogisticRegression()).fit(X, y),
                                 "predict_proba"),
                                ("scaler", StandardScaler().fit(X), "transform")):
        joblib.dump(model, tmp_path / f"{name}.joblib")
        np.save(tmp_path / "X.npy", X)
        assert main(["convert", str(tmp_path / f"{name}.joblib"), "--backend", backend,
                     "--output", str(tmp_path / f"{name}.wz")]) == 0, capsys.readouterr().err
        assert main(["predict", str(tmp_path / f"{name}.wz"), "--input", str(tmp_path / "X.npy"),
                     "--method", method, "--output", str(tmp_path / f"{name}.npy")]) == 0
        np.testing.assert_allclose(np.load(tmp_path / f"{name}.npy"), getattr(model, method)(X),
                                   rtol=1e-12, atol=1e-12)
