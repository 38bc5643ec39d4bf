"""``woodstar backends``: which backends and devices work here, and why not.

Reads versions and build facts only; it never installs anything and never runs work
on a GPU unless ``--cuda-smoke`` asks for it. ``--json`` prints the report in the
schema documented in docs/backends.md (``schema_version`` 1).
"""

import json
import platform
import sys
import time

SCHEMA_VERSION = 1


def register(subparsers):
    parser = subparsers.add_parser(
        "backends", help="report which backends and devices work here (and what to install)")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.add_argument("--cuda-smoke", action="store_true",
                        help="also run a tiny tensor operation on every CUDA device")
    parser.set_defaults(handler=run)


def _torch_report():
    import torch

    cuda_build = getattr(torch.version, "cuda", None)
    hip_build = getattr(torch.version, "hip", None)
    build = f"cuda {cuda_build}" if cuda_build else (f"rocm {hip_build}" if hip_build else "cpu")
    return {"version": torch.__version__, "build": build, "cuda_build": cuda_build,
            "num_threads": torch.get_num_threads(),
            "mkldnn": bool(torch.backends.mkldnn.is_available()),
            "openmp": bool(torch.backends.openmp.is_available())}


def _cuda_report(smoke):
    """Device count and names. ``torch.cuda.device_count`` reads the driver without
    creating a context; names are read only when there are devices."""
    import torch

    report = {"available": False, "reason": None, "device_count": 0, "devices": [], "smoke": None}
    if not getattr(torch.version, "cuda", None):
        report["reason"] = ("this torch build has no CUDA support: install a CUDA build of torch "
                            "(https://pytorch.org/get-started/locally/)")
        return report
    try:
        count = torch.cuda.device_count()
    except Exception as error:  # noqa: BLE001  (a broken driver is a reason, not a crash)
        report["reason"] = f"the CUDA driver could not be queried: {type(error).__name__}: {error}"
        return report
    if count == 0:
        report["reason"] = "no CUDA device is visible (driver missing, or CUDA_VISIBLE_DEVICES empty)"
        return report
    report["available"] = bool(torch.cuda.is_available())
    report["device_count"] = count
    for index in range(count):
        props = torch.cuda.get_device_properties(index)
        report["devices"].append({"index": index, "name": props.name,
                                  "capability": f"{props.major}.{props.minor}",
                                  "memory_bytes": int(props.total_memory)})
    if smoke:
        report["smoke"] = [_smoke(index) for index in range(count)]
    return report


def _smoke(index):
    import torch

    start = time.perf_counter()
    try:
        x = torch.arange(8, dtype=torch.float32, device=f"cuda:{index}")
        total = float((x * 2).sum().item())
        torch.cuda.synchronize(index)
        ok = total == 56.0
        error = None if ok else f"wrong result {total} (expected 56.0)"
    except Exception as err:  # noqa: BLE001  (report the failure, keep probing)
        ok, error = False, f"{type(err).__name__}: {err}"
    return {"index": index, "ok": ok, "error": error,
            "seconds": round(time.perf_counter() - start, 4)}


def _torchscript_details():
    import torch

    from ..runtimes import walk_ops

    kernels = {"tree_walk_kernels": walk_ops.available(),
               "tree_walk_kernels_error": walk_ops.unavailable_reason()}
    try:
        traced = torch.jit.trace(lambda x: x + 1, torch.zeros(2))
        ok = bool(traced(torch.zeros(2)).eq(1).all())
        return ({"trace_works": ok, **kernels},
                None if ok else "a traced function gave a wrong answer")
    except Exception as error:  # noqa: BLE001
        return ({"trace_works": False, **kernels},
                f"torch.jit.trace failed: {type(error).__name__}: {error}")


def _cuda_usable(name, details, cuda_available):
    """Whether this backend can run on the CUDA devices found (None: no devices)."""
    if not cuda_available:
        return None
    if name == "onnx":
        return "CUDAExecutionProvider" in details.get("providers", [])
    if name == "tvm":
        return bool(details.get("targets", {}).get("cuda"))
    return True


def _backend_reports(cuda_available=False):
    from ..backends import all_backends

    reports = []
    for name, cls in sorted(all_backends().items()):
        available, reason = cls.is_available()
        details = {}
        if available and name == "torch.jit":
            details, problem = _torchscript_details()
            if problem:
                available, reason = False, problem
        elif available and hasattr(cls, "details"):
            try:
                details = cls.details()
            except Exception as error:  # noqa: BLE001
                available, reason = False, f"{type(error).__name__}: {error}"
            if name == "torch.compile" and not details.get("c_compiler_works", True):
                available = False
                reason = (f"the C++ compiler {details.get('c_compiler')} does not build a test "
                          f"program: {details.get('c_compiler_error')}")
        reports.append({"name": name, "aliases": list(cls.aliases), "available": available,
                        "reason": reason or None, "devices": list(getattr(cls, "devices", ("cpu",))),
                        "cuda_usable": _cuda_usable(name, details, cuda_available) if available else None,
                        "details": details})
    return reports


def _cpu_route_reports():
    """The torch backend's CPU routes, in the order the container tries them."""
    from ..runtimes import c_walk, onnx_ml

    compiled = c_walk.available()
    return [
        {"name": "c-walk", "available": compiled,
         "reason": None if compiled else c_walk.unavailable_reason(),
         "simd": c_walk.simd_walk() if compiled else None},
        {"name": "onnx-ml", "available": onnx_ml.available(),
         "reason": None if onnx_ml.available() else "onnx and onnxruntime are not installed "
                                                   "(pip install \"woodstar[onnx]\")"},
        {"name": "numpy", "available": True, "reason": None},
    ]


def build_report(cuda_smoke=False):
    from .. import __version__
    from ..calibration import table_in_use

    cuda = _cuda_report(cuda_smoke)
    return {"schema_version": SCHEMA_VERSION, "woodstar": __version__,
            "python": platform.python_version(), "platform": platform.platform(),
            "torch": _torch_report(), "cuda": cuda,
            "backends": _backend_reports(cuda["available"]),
            "cpu_routes": _cpu_route_reports(),
            "routing_table": table_in_use()}


def _print_text(report, out):
    t, cuda = report["torch"], report["cuda"]
    print(f"woodstar {report['woodstar']}  python {report['python']}  ({report['platform']})", file=out)
    print(f"torch {t['version']} ({t['build']} build, {t['num_threads']} threads)", file=out)
    if cuda["available"]:
        names = ", ".join(f"cuda:{d['index']} {d['name']}" for d in cuda["devices"])
        print(f"CUDA: {cuda['device_count']} device(s): {names}", file=out)
    else:
        print(f"CUDA: not available ({cuda['reason']})", file=out)
    for result in cuda["smoke"] or []:
        state = "ok" if result["ok"] else f"FAILED: {result['error']}"
        print(f"  smoke test cuda:{result['index']}: {state} ({result['seconds']} s)", file=out)
    print("backends:", file=out)
    for b in report["backends"]:
        aliases = f" (also {', '.join(b['aliases'])})" if b["aliases"] else ""
        if b["available"]:
            facts = ", ".join(f"{k}={v}" for k, v in b["details"].items() if v is not None)
            print(f"  {b['name']:<14} yes{aliases}  {facts}", file=out)
        else:
            print(f"  {b['name']:<14} no{aliases}  {b['reason']}", file=out)
    print("torch backend CPU routes (first available is used):", file=out)
    for r in report["cpu_routes"]:
        simd = f"  (SIMD walk: {r['simd']})" if r.get("simd") else ""
        print(f"  {r['name']:<14} {'yes' + simd if r['available'] else 'no  ' + str(r['reason'])}",
              file=out)
    table = report["routing_table"]
    cpus = f", {table['logical_cpus']} logical CPUs" if table["logical_cpus"] else ""
    print(f"routing table: {table['kind']}, measured on {table['cpu']}{cpus}, "
          f"made {table['made'] or 'unknown'}: {table['path']}", file=out)
    if table["ignored"]:
        print(f"  ignored: {table['ignored']}", file=out)


def run(args):
    report = build_report(cuda_smoke=args.cuda_smoke)
    if args.json:
        json.dump(report, sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print_text(report, sys.stdout)
    if args.cuda_smoke and any(not r["ok"] for r in report["cuda"]["smoke"] or []):
        return 1
    return 0
