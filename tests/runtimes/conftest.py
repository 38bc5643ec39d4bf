"""Fixtures shared by the compiled walk's tests."""

import pytest

from woodstar.runtimes import c_walk

WIDEST = c_walk.simd_walk() if c_walk.available() else None
SIMD_FORMS = {"avx512": ["avx512", "avx2"], "avx2": ["avx2"], None: []}[WIDEST]


@pytest.fixture(params=SIMD_FORMS or [None])
def simd_form(request):
    """Each SIMD form of the compiled walk this CPU has, the widest restored after the
    test; skipped where the CPU has none (the node walk is tested everywhere)."""
    if request.param is None:
        pytest.skip("this CPU has no SIMD walk (the node walk is tested everywhere)")
    assert c_walk.limit_simd_walk(request.param) == request.param
    yield request.param
    c_walk.limit_simd_walk("avx512")
