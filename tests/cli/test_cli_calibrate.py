"""``woodstar calibrate``: a small run writes a table the router reads; bad options
are refused with the reason."""

import json

import pytest

from woodstar import calibration
from woodstar.cli import main
from woodstar.exceptions import ConstantError
from woodstar.lowering import routing

SMALL = ["calibrate", "--budget", "20", "--depths", "2,7", "--batches", "1,30", "--threads", "1",
         "--trees", "4", "--repeats", "2", "--no-progress"]


def test_calibrate_writes_a_table_the_router_reads(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path))
    assert main(SMALL) == 0
    path = calibration.calibrated_path()
    assert path.is_relative_to(tmp_path) and path.exists()
    assert str(path) in capsys.readouterr().out
    table = routing.load_table()
    assert table["kind"] == "calibrated" and table["machine"] == calibration.machine()
    assert table["budget_s"] == 20 and table["elapsed_s"] <= 20 + 1
    from woodstar._calibrate import random_forest

    ens = random_forest(7, n_trees=3, seed=1)
    chosen = routing.choose_strategy(ens, None, "float32", 2**29, "RF", 30, 1)
    assert chosen.name == routing.lookup(table, 7, 30, 1)[0]
    assert main(["backends", "--json"]) == 0
    in_use = json.loads(capsys.readouterr().out)["routing_table"]
    assert in_use["kind"] == "calibrated" and in_use["path"] == str(path)


def test_calibrate_with_no_time_writes_nothing(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path))
    args = SMALL.copy()
    args[2] = "1e-9"
    assert main(args) == 1
    assert "no table written" in capsys.readouterr().err
    assert not calibration.calibrated_path().exists()


@pytest.mark.parametrize("option, value, match", [
    ("--budget", "0", r"--budget must be positive seconds \(got 0.0\)"),
    ("--threads", "0", r"--threads takes positive integers \(got \(0,\)\)"),
])
def test_bad_options_are_refused(option, value, match, tmp_path, monkeypatch):
    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path))
    with pytest.raises(ConstantError, match=match):
        main(["calibrate", option, value, "--no-progress"])
