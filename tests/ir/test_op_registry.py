"""Every registered op kind is lowered, and exercised by a parity case against its
source library: registering an op without both fails here."""

import re
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


def _declared_cases():
    """Test modules declare the ops they exercise: ``COVERS_OPS = ("kind", ...)``."""
    cases = dict(PARITY_CASES)
    for path in TESTS.rglob("test_*.py"):
        match = re.search(r"^COVERS_OPS = \(([^)]*)\)", path.read_text(), re.MULTILINE)
        if match:
            for kind in re.findall(r"\"([a-z_0-9]+)\"", match.group(1)):
                cases.setdefault(kind, str(path.relative_to(TESTS)))
    return cases


def test_every_registered_op_has_a_parity_case():
    kinds = set(ir.op_kinds())
    cases = _declared_cases()
    missing = kinds - set(cases)
    assert not missing, f"add a parity case (COVERS_OPS in a test module) for {sorted(missing)}"
    for kind, module in cases.items():
        assert (TESTS / module).exists(), module
