"""``woodstar backends``: text and JSON reports, schema as documented."""

import json

import pytest

from woodstar.backends import all_backends
from woodstar.cli import main


def _report(capsys, *extra):
    assert main(["backends", "--json", *extra]) == 0
    return json.loads(capsys.readouterr().out)


def test_json_report_follows_the_schema(capsys):
    report = _report(capsys)
    assert report["schema_version"] == 1
    assert {"woodstar", "python", "platform", "torch", "cuda", "backends"} <= set(report)
    assert {"version", "build", "cuda_build", "num_threads"} <= set(report["torch"])
    assert {"available", "reason", "device_count", "devices", "smoke"} <= set(report["cuda"])
    names = [b["name"] for b in report["backends"]]
    assert names == sorted(all_backends())
    for entry in report["backends"]:
        assert {"name", "aliases", "available", "reason", "devices", "cuda_usable", "details"} <= set(entry)
        assert entry["available"] == (entry["reason"] is None), entry
    torch_entry = next(b for b in report["backends"] if b["name"] == "torch")
    assert torch_entry["available"] and "pytorch" in torch_entry["aliases"]
    from woodstar.runtimes import walk_ops

    for name in ("torch.compile", "torch.jit"):  # both call the tree walks' C kernels
        entry = next(b for b in report["backends"] if b["name"] == name)
        if entry["available"]:
            details = entry["details"]
            assert details["tree_walk_kernels"] == walk_ops.available(), name
            assert (details["tree_walk_kernels_error"] is None) == details["tree_walk_kernels"]
    routes = report["cpu_routes"]
    assert [r["name"] for r in routes] == ["c-walk", "onnx-ml", "numpy"]
    for entry in routes:
        assert entry["available"] == (entry["reason"] is None), entry
    from woodstar.runtimes import c_walk

    assert routes[0]["simd"] == (c_walk.simd_walk() if routes[0]["available"] else None)
    assert routes[0]["simd"] in ("avx512", "avx2", None)


def test_cpu_routes_say_why_the_compiled_walk_is_missing(capsys, monkeypatch):
    from woodstar.runtimes import _native, c_walk

    monkeypatch.setattr(c_walk, "_state", {})
    monkeypatch.setattr(_native.shutil, "which", lambda name: None)
    compiled = _report(capsys)["cpu_routes"][0]
    assert not compiled["available"] and "no C compiler" in compiled["reason"]
    assert compiled["simd"] is None


def test_unavailable_backend_says_what_to_install(capsys, monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda n, *a: None if n == "onnxruntime" else real(n, *a))
    report = _report(capsys)
    onnx = next(b for b in report["backends"] if b["name"] == "onnx")
    assert not onnx["available"] and "pip install 'woodstar[onnx]'" in onnx["reason"]


def test_no_cuda_gives_a_reason_and_smoke_is_skipped(capsys):
    import torch

    if torch.cuda.is_available():
        pytest.skip("CUDA is available here; scripts/cuda_checks.py covers it")
    report = _report(capsys, "--cuda-smoke")
    assert report["cuda"]["available"] is False and report["cuda"]["reason"]
    assert report["cuda"]["smoke"] is None


def test_probe_never_touches_cuda_without_smoke(capsys, monkeypatch):
    import torch

    def refuse(*args, **kwargs):
        raise AssertionError("a tensor was put on CUDA")

    monkeypatch.setattr(torch.cuda, "synchronize", refuse)
    monkeypatch.setattr(torch, "arange", refuse)
    _report(capsys)


def test_text_report(capsys):
    assert main(["backends"]) == 0
    out = capsys.readouterr().out
    assert "torch " in out and "backends:" in out
    for name in all_backends():
        assert name in out


def test_broken_c_compiler_makes_torch_compile_unavailable(capsys, monkeypatch):
    from woodstar.backends import compile_backend

    monkeypatch.setattr(compile_backend, "compiler_works", lambda c, timeout=60: (False, "ld: boom"))
    report = _report(capsys)
    entry = next(b for b in report["backends"] if b["name"] == "torch.compile")
    assert not entry["available"] and "ld: boom" in entry["reason"]


def test_the_report_says_which_routing_table_is_in_use(capsys, monkeypatch, tmp_path):
    from woodstar.lowering.routing import TABLE_PATH

    monkeypatch.setenv("WOODSTAR_CACHE_DIR", str(tmp_path))
    table = _report(capsys)["routing_table"]
    assert table["kind"] == "shipped" and table["path"] == str(TABLE_PATH)
    assert table["cpu"] == "AMD EPYC" and table["made"] and table["ignored"] is None
    assert main(["backends"]) == 0
    assert "routing table: shipped, measured on AMD EPYC, 2 logical CPUs" in capsys.readouterr().out
