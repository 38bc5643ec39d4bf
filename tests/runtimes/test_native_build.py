"""The native libraries' build: a source anywhere (a benchmark's candidate) includes the
package's C headers, and a header's change makes a new library instead of reusing one
built from the old header."""

import ctypes
import shutil

import pytest

from woodstar.runtimes import _native

COMPILER = _native.find_compiler()
pytestmark = pytest.mark.skipif(COMPILER is None, reason="no C compiler")

SOURCE = """#include <stdint.h>
#include "cpu_simd.h"
int64_t form(void) { return simd_form(); }
"""


def test_a_source_outside_the_package_includes_its_headers_and_they_key_the_cache(
        tmp_path, monkeypatch):
    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path / "cache"))
    source = tmp_path / "candidate.c"
    source.write_text(SOURCE)
    flags = ("-O2", "-std=c99", "-fPIC", "-shared")
    built = _native.build(source, flags, COMPILER)
    form = ctypes.CDLL(str(built)).form
    form.restype = ctypes.c_int64
    assert _native.simd_name(form()) in (None, "avx2", "avx512")
    assert _native.build(source, flags, COMPILER) == built  # cached
    headers = tmp_path / "headers"
    shutil.copytree(_native.HEADERS, headers, ignore=shutil.ignore_patterns("*.c", "*.py",
                                                                           "__pycache__"))
    (headers / "cpu_simd.h").write_text((headers / "cpu_simd.h").read_text() + "\n/* changed */\n")
    monkeypatch.setattr(_native, "HEADERS", headers)
    assert _native.build(source, flags, COMPILER) != built


def test_simd_names_and_codes_round_trip():
    for name in (None, "avx2", "avx512"):
        assert _native.simd_name(_native.simd_code(name)) == name
