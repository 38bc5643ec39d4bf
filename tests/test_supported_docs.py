"""docs/supported.md lists exactly the registered classes (regenerate it with
``python -m woodstar.supported_table > docs/supported.md``)."""

from pathlib import Path

import pytest

pytest.importorskip("sklearn")

from woodstar.supported_table import markdown  # noqa: E402

DOC = Path(__file__).resolve().parents[1] / "docs" / "supported.md"


def test_supported_models_doc_is_current():
    assert DOC.read_text() == markdown(), \
        "docs/supported.md is out of date: python -m woodstar.supported_table > docs/supported.md"
