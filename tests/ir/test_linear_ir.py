"""The linear-model and column-wise step IRs: validation names the problem."""

import numpy as np
import pytest

from woodstar.exceptions import InvalidModelError
from woodstar.ir import ColumnOps, Head, LinearModel, ModelIR, chain


def _linear(**changes):
    fields = dict(coef=np.ones((2, 3)), intercept=np.zeros(2), post_transform="softmax")
    fields.update(changes)
    return LinearModel(**fields)


@pytest.mark.parametrize("changes, message", [
    ({"coef": np.ones((2, 3), dtype=np.int64)}, "coef has dtype int64"),
    ({"coef": np.full((2, 3), np.nan)}, "coef holds non-finite values"),
    ({"intercept": np.zeros(3)}, r"intercept has shape \(3,\); expected \(2,\)"),
    ({"post_transform": "tanh"}, "post_transform 'tanh' not in"),
    ({"post_transform": "sigmoid_binary"}, "sigmoid_binary needs exactly one output"),
    ({"vector_coef": True}, "vector_coef needs exactly one output"),
])
def test_linear_model_validation_names_the_problem(changes, message):
    with pytest.raises(InvalidModelError, match=message):
        _linear(**changes).validate()


@pytest.mark.parametrize("fields, message", [
    ({"ops": ("sub", "pow")}, "op 1 'pow' not in"),
    ({"operands": (np.zeros(3), np.zeros(4))}, r"op 1 \(div\): operand shape \(4,\), expected \(3,\)"),
    ({"operands": (np.zeros(3), np.zeros(3, dtype=np.int32))}, r"op 1 \(div\): operand dtype int32"),
    ({"cast_operand": (True,)}, "2 ops, 2 operands, 1 cast flags"),
])
def test_column_ops_validation_names_the_problem(fields, message):
    base = dict(name="StandardScaler", n_features=3, ops=("sub", "div"),
                operands=(np.zeros(3), np.ones(3)), cast_operand=(True, True))
    base.update(fields)
    with pytest.raises(InvalidModelError, match=message):
        ColumnOps(**base).validate()


def test_model_ir_checks_feature_counts_and_final_functions():
    head = Head(estimator="Pipeline", task="classification", n_features=4, methods=("predict",),
                classes=(np.array([0, 1, 2]),))
    with pytest.raises(InvalidModelError, match=r"node 'linear' \(linear\): its input has 4 "
                                                r"columns; this linear reads 3"):
        chain(head, linear=_linear()).validate()
    step = ColumnOps("StandardScaler", 3, ("sub",), (np.zeros(3),), (True,))
    with pytest.raises(InvalidModelError, match=r"node 'StandardScaler' \(column_ops\): its "
                                                r"input has 4 columns"):
        chain(head, steps=(step,), linear=_linear(coef=np.ones((2, 4)))).validate()
    with pytest.raises(InvalidModelError, match="only a transformer may return its input unchanged"):
        chain(head).validate()


def test_column_ops_reference_rounds_after_each_operation():
    """float32 working dtype: (x - mean) rounds to float32 before the division, as
    scikit-learn's in-place ``X -= mean; X /= scale`` does."""
    rng = np.random.default_rng(0)
    X = rng.normal(size=(1000, 3)).astype(np.float32) * 1000
    mean, scale = rng.normal(size=3) * 100, rng.random(3) + 0.1
    step = ColumnOps("RobustScaler", 3, ("sub", "div"), (mean, scale), (False, False))
    expected = X.copy()
    expected -= mean
    expected /= scale
    got = step.apply(X)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, expected)
    one_rounding = ((X.astype(np.float64) - mean) / scale).astype(np.float32)
    assert (one_rounding != expected).any()  # the test can tell the two apart
