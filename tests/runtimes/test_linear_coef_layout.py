"""A linear model's coefficients keep the source's memory order: NumPy's matmul passes
BLAS other arguments for a Fortran-ordered matrix, and the sums come out in another
order than for a C-ordered copy."""

import numpy as np
from sklearn.linear_model import RidgeClassifier

import woodstar


def _rows(seed, n):
    rng = np.random.default_rng(seed)
    scale = np.random.default_rng(0).uniform(0.01, 300, 13)
    return (rng.normal(size=(n, 13)) * scale).astype(np.float32)


def test_fortran_ordered_coefficients_keep_their_order_through_saving(tmp_path):
    """RidgeClassifier fitted on float32 rows holds a Fortran-ordered ``coef_``."""
    X = _rows(0, 400)
    model = RidgeClassifier().fit(X, np.digitize(X[:, 1] / X[:, 1].std(), [-0.5, 0.5]))
    assert model.coef_.flags.f_contiguous and not model.coef_.flags.c_contiguous
    converted = woodstar.convert(model, "torch")
    assert converted.ir.graph.nodes[-1].op.coef_layout == "F"
    converted.save(tmp_path / "ridge.zip")
    loaded = woodstar.load(tmp_path / "ridge.zip")
    assert loaded.ir.graph.nodes[-1].op.coef_layout == "F"
    rows = _rows(10, 2000)
    for c in (converted, loaded):
        np.testing.assert_array_equal(c.decision_function(rows), model.decision_function(rows))
        np.testing.assert_array_equal(c.decision_function(rows[:1]),
                                      model.decision_function(rows[:1]))
