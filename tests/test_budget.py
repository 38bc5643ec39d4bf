"""The time budget of measuring runs: what is left, what fits, the reason it gives."""

import pytest

from woodstar._budget import Budget


def test_budget_counts_down_and_refuses_what_does_not_fit():
    now = [100.0]
    budget = Budget(10, n_cells=4, progress=False, clock=lambda: now[0])
    assert budget.fits(9.5) and not budget.fits(10.5)
    now[0] += 7
    assert budget.left() == pytest.approx(3) and not budget.fits(4)
    assert "3 s left of the 10 s budget" in budget.skip_reason("batch 9", 4)
    now[0] += 70
    assert budget.left() == 0 and not budget.fits(0.0)   # nothing fits in a spent budget


def test_no_budget_fits_everything():
    budget = Budget(None, 1, progress=False)
    assert budget.left() == float("inf") and budget.fits(1e9)


def test_the_bar_shows_seconds_spent_and_left(capsys):
    pytest.importorskip("tqdm")
    now = [0.0]
    budget = Budget(60, n_cells=3, progress=True, clock=lambda: now[0])
    now[0] = 15
    budget.tick("rf t1 b100", cells=1)
    budget.close()
    err = capsys.readouterr().err
    assert "15 s spent, at most 45 s left of 60 s; cells 1/3" in err
