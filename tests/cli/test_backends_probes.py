"""``woodstar backends`` answers without importing Inductor or onnxscript, and the
compiler name it reads without Inductor is the one Inductor's config gives."""

import json
import os
import subprocess
import sys

import pytest

from woodstar.backends import compile_backend

PROBE = """
import json, sys
from woodstar.cli.backends import build_report
from woodstar.backends.compile_backend import _inductor_cxx, c_compiler
report = build_report()
loaded = sorted(m for m in ("torch._inductor", "onnxscript") if m in sys.modules)
ours, path = _inductor_cxx(), c_compiler()
from torch._inductor import config
print(json.dumps({"loaded": loaded, "ours": ours, "path": path,
                  "inductor": config.cpp.cxx[-1], "path_with_inductor": c_compiler()}))
"""


@pytest.mark.parametrize("cxx", [None, "c++"])
def test_compiler_name_without_inductor_is_inductors(cxx):
    env = {k: v for k, v in os.environ.items() if k != "CXX"}
    if cxx:
        env["CXX"] = cxx
    out = subprocess.run([sys.executable, "-c", PROBE], env=env, capture_output=True,
                         text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["loaded"] == []
    default = "clang++" if sys.platform == "darwin" else "g++"
    assert result["ours"] == result["inductor"] == (cxx or default)
    assert result["path"] == result["path_with_inductor"]


def test_a_loaded_inductor_config_is_read(monkeypatch):
    """A process that changed Inductor's config gets the compiler it names."""
    class Cpp:
        cxx = (None, "my-c++")

    class Config:
        cpp = Cpp

    monkeypatch.setitem(sys.modules, "torch._inductor.config", Config)
    assert compile_backend._inductor_cxx() == "my-c++"
    monkeypatch.delitem(sys.modules, "torch._inductor.config")
    monkeypatch.setenv("CXX", "other-c++")
    assert compile_backend._inductor_cxx() == "other-c++"
