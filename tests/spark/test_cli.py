"""``woodstar predict --spark local[2]``: a Parquet dataset scored through Spark, rows in
input order, ``--keep`` columns beside the scores, and errors before any task."""

import re
import zipfile

import numpy as np
import pandas as pd
import pytest

import woodstar
from woodstar.cli import main


@pytest.fixture(scope="module")
def saved(tmp_path_factory, spark):
    from sklearn.ensemble import RandomForestClassifier

    rng = np.random.default_rng(11)
    X = pd.DataFrame(rng.normal(size=(400, 3)), columns=["a", "b", "c"])
    X.loc[rng.random(400) < 0.1, "b"] = np.nan
    y = np.where(X["a"] > 0.3, "yes", np.where(X["c"] > 0, "maybe", "no"))
    folder = tmp_path_factory.mktemp("cli")
    path = str(folder / "model.zip")
    woodstar.convert(RandomForestClassifier(n_estimators=6, max_depth=5, random_state=0)
                     .fit(X, y), "torch").save(path)
    data = folder / "rows.parquet"  # a dataset of three files of different sizes
    data.mkdir()
    rows = X.assign(id=[f"row-{i}" for i in range(400)], region=rng.integers(0, 5, 400))
    for i, (start, stop) in enumerate([(0, 50), (50, 300), (300, 400)]):
        rows.iloc[start:stop][["region", "c", "id", "a", "b"]].to_parquet(data / f"part-{i}.parquet")
    return path, str(data), rows, folder


def test_predict_proba_through_spark_keeps_order_and_ids(saved, capsys):
    path, data, rows, folder = saved
    out = str(folder / "proba.parquet")
    assert main(["predict", path, "--input", data, "--output", out, "--method", "predict_proba",
                 "--spark", "local[2]", "--keep", "id,region", "--quiet"]) == 0
    assert "wrote 400 rows of predict_proba" in capsys.readouterr().err
    got = pd.read_parquet(out)
    model = woodstar.load(path)
    assert list(got.columns) == ["id", "region", *[f"proba_{c}" for c in model.classes_]]
    assert got["id"].tolist() == rows["id"].tolist()  # the input's order
    np.testing.assert_array_equal(got["region"].to_numpy(), rows["region"].to_numpy())
    np.testing.assert_array_equal(got.iloc[:, 2:].to_numpy(), model.predict_proba(rows[["a", "b", "c"]]))


def test_predict_labels_through_spark(saved):
    path, data, rows, folder = saved
    out = str(folder / "labels.parquet")
    assert main(["predict", path, "-i", data, "-o", out, "--spark", "local[2]", "--keep", "id",
                 "--quiet"]) == 0
    got = pd.read_parquet(out)
    assert list(got.columns) == ["id", "predict"]
    assert got["id"].tolist() == rows["id"].tolist()
    np.testing.assert_array_equal(got["predict"].to_numpy(),
                                  woodstar.load(path).predict(rows[["a", "b", "c"]]))


@pytest.mark.parametrize("extra,message", [
    (["--keep", "ident"], r"--keep names column\(s\) \['ident'\]"),
    (["--method", "transform"], "has no method 'transform'"),
])
def test_errors_before_any_task(saved, capsys, spark, extra, message):
    path, data, _, folder = saved
    tracker = spark.sparkContext.statusTracker()
    before = set(tracker.getJobIdsForGroup())
    assert main(["predict", path, "-i", data, "-o", str(folder / "x.parquet"),
                 "--spark", "local[2]", *extra]) == 1
    err = capsys.readouterr().err
    assert err.startswith("woodstar predict: ") and re.search(message, err)
    assert set(tracker.getJobIdsForGroup()) == before, "a Spark job ran"


def test_missing_feature_and_damaged_file(saved, capsys, tmp_path):
    path, data, rows, folder = saved
    narrow = tmp_path / "narrow.parquet"
    rows[["id", "a", "b"]].to_parquet(narrow)
    assert main(["predict", path, "-i", str(narrow), "-o", str(tmp_path / "o.parquet"),
                 "--spark", "local[2]"]) == 1
    assert "lacks column(s) ['c'] that the model needs" in capsys.readouterr().err
    damaged = tmp_path / "damaged.zip"
    raw = bytearray(open(path, "rb").read())
    with zipfile.ZipFile(path) as archive:  # a byte of a member's data, not of a zip header
        member = max(archive.infolist(), key=lambda info: info.compress_size)
        start = member.header_offset + 30 + len(member.filename.encode()) + len(member.extra)
    raw[start + member.compress_size // 2] ^= 0xFF
    damaged.write_bytes(bytes(raw))
    assert main(["predict", str(damaged), "-i", data, "-o", str(tmp_path / "o.parquet"),
                 "--spark", "local[2]"]) == 1
    assert "is not a valid woodstar model file" in capsys.readouterr().err
    assert main(["predict", path, "-i", data, "-o", str(tmp_path / "o.csv"),
                 "--spark", "local[2]"]) == 1
    assert "--output must end in .parquet" in capsys.readouterr().err
    assert main(["predict", path, "-i", data, "-o", str(tmp_path / "o.npy"), "--keep", "id"]) == 1
    assert "--keep is used with --spark" in capsys.readouterr().err
