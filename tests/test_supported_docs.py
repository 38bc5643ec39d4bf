"""docs/supported.md lists exactly the registered classes (regenerate it with
``python -m woodstar.supported_table > docs/supported.md``). Generated in a fresh
process: other tests register frontends of their own in this one."""

import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("sklearn")

DOC = Path(__file__).resolve().parents[1] / "docs" / "supported.md"


def test_supported_models_doc_is_current():
    generated = subprocess.run([sys.executable, "-m", "woodstar.supported_table"],
                               capture_output=True, text=True, check=True).stdout
    assert DOC.read_text() == generated, \
        "docs/supported.md is out of date: python -m woodstar.supported_table > docs/supported.md"
