"""Every file the package reads at run time besides its Python modules (C and C++
sources built on the user's machine, their headers, the routing table) is named by
pyproject.toml's package data, so an installed wheel has it, not only a source
checkout."""

import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "woodstar"


def test_every_c_source_header_and_table_ships_in_the_package():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    patterns = config["tool"]["setuptools"]["package-data"]["woodstar"]
    data_files = [path for suffix in ("*.c", "*.cpp", "*.h", "*.json") for path in PACKAGE.rglob(suffix)]
    assert any(path.suffix == ".c" for path in data_files)
    missing = [str(path.relative_to(PACKAGE)) for path in data_files
               if not any(path.relative_to(PACKAGE).match(pattern) for pattern in patterns)]
    assert not missing, f"not in pyproject.toml's package data: {missing}"
