"""Every registered op kind is lowered, and exercised by a parity case against its
source library: registering an op without both fails here."""

from pathlib import Path

import woodstar.ir as ir
from woodstar.lowering import lowered_kinds

TESTS = Path(__file__).resolve().parents[1]
# op kind -> a test module that converts a source model using it and compares answers
PARITY_CASES = {
    "trees": "frontends/test_sklearn_trees.py",
    "linear": "frontends/test_sklearn_linear.py",
    "column_ops": "frontends/test_sklearn_linear.py",
    "select": "frontends/test_sklearn_compose.py",
    "concat": "frontends/test_sklearn_compose.py",
    "one_hot": "frontends/test_sklearn_compose.py",
    "ordinal": "frontends/test_sklearn_compose.py",
    "missing_indicator": "frontends/test_sklearn_compose.py",
}


def test_every_registered_op_is_lowered():
    missing = set(ir.op_kinds()) - set(lowered_kinds())
    assert not missing, f"ops without a Torch lowering: {sorted(missing)}"


def test_every_registered_op_has_a_parity_case():
    kinds = set(ir.op_kinds())
    assert kinds == set(PARITY_CASES), f"add a parity case for {sorted(kinds - set(PARITY_CASES))}"
    for kind, module in PARITY_CASES.items():
        assert (TESTS / module).exists(), module
