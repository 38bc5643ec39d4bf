"""``backend="auto"`` reads the 1-row and 100k-row rankings too, not only 10k rows
(woodstar/backends/ranking.py)."""

from woodstar.backends.ranking import backend_order, choose_backend

EVERYTHING = lambda name: True  # noqa: E731


def _entry(batch, ratios, threads=1):
    ranking = sorted(ratios, key=ratios.get)
    return {"device": "cpu", "threads": threads, "batch": batch, "ranking": ranking,
            "mean_ratio_to_fastest": ratios}


def _table(*entries):
    return {"backends": {"entries": list(entries)}}


def test_a_winner_at_10k_rows_that_is_slow_on_single_rows_loses():
    table = _table(_entry(1, {"torch": 1.0, "tvm": 20.0}),
                   _entry(10_000, {"tvm": 1.0, "torch": 1.2}),
                   _entry(100_000, {"tvm": 1.0, "torch": 1.1}))
    # geometric means: torch (1 * 1.2 * 1.1)^(1/3) = 1.10, tvm (20 * 1 * 1)^(1/3) = 2.71
    assert choose_backend("auto", 1, table=table, available=EVERYTHING) == "torch"
    # A known batch size decides by the nearest entry alone.
    assert choose_backend("auto", 1, table=table, available=EVERYTHING, n_rows=50_000) == "tvm"
    assert choose_backend("auto", 1, table=table, available=EVERYTHING, n_rows=2) == "torch"


def test_large_batches_count_as_much_as_the_default_batch():
    table = _table(_entry(1, {"onnx": 1.0, "torch.compile": 1.5}),
                   _entry(10_000, {"onnx": 1.0, "torch.compile": 1.2}),
                   _entry(100_000, {"torch.compile": 1.0, "onnx": 4.0}))
    # onnx (1 * 1 * 4)^(1/3) = 1.59 against torch.compile (1.5 * 1.2 * 1)^(1/3) = 1.22
    assert backend_order(table["backends"]["entries"]) == ["torch.compile", "onnx"]


def test_an_entry_without_ratios_ranks_by_place_and_absence_is_no_penalty():
    entries = [{"device": "cpu", "threads": 1, "batch": 10_000, "ranking": ["tvm", "onnx", "torch"]},
               {"device": "cpu", "threads": 1, "batch": 1, "ranking": ["onnx", "torch"]}]
    # tvm: place 1 at 10k, unranked at 1 row -> 1; onnx: (2 * 1)^(1/2); torch: (3 * 2)^(1/2)
    assert backend_order(entries) == ["tvm", "onnx", "torch"]
    assert choose_backend("auto", 1, table=_table(*entries),
                          available=lambda n: n != "tvm") == "onnx"


def test_threads_pick_their_own_entries():
    table = _table(_entry(10_000, {"torch": 1.0, "tvm": 2.0}, threads=1),
                   _entry(10_000, {"tvm": 1.0, "torch": 2.0}, threads=2))
    assert choose_backend("auto", 1, table=table, available=EVERYTHING) == "torch"
    assert choose_backend("auto", 2, table=table, available=EVERYTHING) == "tvm"
