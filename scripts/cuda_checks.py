#!/usr/bin/env python
"""GPU checks for the backends, to run on a machine with a CUDA device.

    python scripts/cuda_checks.py [--json OUT.json]

Runs, on every visible CUDA device: the probe's smoke test (``woodstar backends
--cuda-smoke``), then for each available backend that can use CUDA (torch, torch.jit,
torch.compile; onnx with onnxruntime-gpu; tvm built with CUDA) a conversion of three
small scikit-learn models with ``device="cuda:N"``, compared with the same backend on
the CPU and with scikit-learn, plus ``container.to("cuda:N")`` and a save/load round
trip on the device. Finally the pytest tests that are skipped without CUDA
(``-k cuda``). Prints one line per check and a summary; exit status 0 when every
check passed, 1 otherwise, 2 when there is no CUDA device.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import traceback

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO)


def _models():
    from sklearn.ensemble import (
        HistGradientBoostingClassifier, IsolationForest, RandomForestRegressor,
    )

    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, 8))
    X[:, 0] = rng.integers(0, 6, size=len(X))
    Xn = X.copy()
    Xn[rng.random(X.shape) < 0.05] = np.nan
    y = (np.nan_to_num(Xn[:, 0]) % 2 == 0).astype(int) + (np.nan_to_num(Xn[:, 1]) > 0)
    return {
        "hgb_cat_nan": (HistGradientBoostingClassifier(max_iter=20, categorical_features=[0],
                                                       random_state=0).fit(Xn, y), Xn),
        "rf_regressor": (RandomForestRegressor(n_estimators=20, max_depth=8, random_state=0)
                         .fit(X, X[:, 2]), X),
        "iforest": (IsolationForest(n_estimators=20, random_state=0).fit(X), X),
    }


def _methods(model):
    return [m for m in ("predict", "predict_proba", "decision_function", "score_samples")
            if hasattr(model, m)]


def _check(results, name, fn):
    start = time.perf_counter()
    try:
        detail = fn() or ""
        ok = True
    except Exception as error:  # noqa: BLE001  (report every failure, keep going)
        ok, detail = False, f"{type(error).__name__}: {error}\n{traceback.format_exc(limit=3)}"
    seconds = time.perf_counter() - start
    results.append({"check": name, "ok": ok, "seconds": round(seconds, 2), "detail": detail})
    print(f"{'PASS' if ok else 'FAIL'} {name} ({seconds:.1f} s) {detail if not ok else ''}", flush=True)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--json", help="also write the results here")
    parser.add_argument("--skip-pytest", action="store_true")
    args = parser.parse_args()

    import torch

    import woodstar
    from woodstar.cli.backends import build_report

    report = build_report(cuda_smoke=True)
    print(json.dumps({k: report[k] for k in ("torch", "cuda")}, indent=1))
    if not report["cuda"]["available"]:
        print("no CUDA device: nothing to check")
        return 2
    results = []
    for smoke in report["cuda"]["smoke"]:
        results.append({"check": f"smoke cuda:{smoke['index']}", "ok": smoke["ok"],
                        "seconds": smoke["seconds"], "detail": smoke["error"] or ""})
    usable = [b["name"] for b in report["backends"] if b["available"] and b["cuda_usable"]]
    print("backends usable on CUDA:", usable)
    models = _models()
    for index in range(torch.cuda.device_count()):
        device = f"cuda:{index}"
        for backend in usable:
            for model_name, (model, X) in models.items():
                rows = X[:1000]

                def parity(model=model, rows=rows, backend=backend, device=device):
                    cpu = woodstar.convert(model, backend)
                    gpu = woodstar.convert(model, backend, device=device)
                    for method in _methods(model):
                        expected = getattr(model, method)(rows)
                        got = getattr(gpu, method)(rows)
                        on_cpu = getattr(cpu, method)(rows)
                        if np.asarray(expected).dtype.kind == "f":
                            np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5,
                                                       err_msg=method)
                            np.testing.assert_allclose(got, on_cpu, rtol=1e-5, atol=1e-5,
                                                       err_msg=method)
                        else:
                            np.testing.assert_array_equal(got, expected, err_msg=method)
                    moved = cpu.to(device)
                    method = _methods(model)[-1]
                    np.testing.assert_allclose(getattr(moved, method)(rows),
                                               getattr(gpu, method)(rows), rtol=1e-5, atol=1e-5)
                    with tempfile.TemporaryDirectory() as directory:
                        path = os.path.join(directory, "m.zip")
                        gpu.save(path)
                        loaded = woodstar.load(path)
                        assert loaded.device == torch.device(device), loaded.device
                        np.testing.assert_array_equal(getattr(loaded, method)(rows),
                                                      getattr(gpu, method)(rows))
                    return ""

                _check(results, f"{backend} {model_name} on {device}", parity)
    if not args.skip_pytest:
        def pytest_cuda():
            result = subprocess.run(
                [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-k", "cuda",
                 os.path.join(REPO, "tests")], cwd=REPO, capture_output=True, text=True,
                env=dict(os.environ, PYTHONPATH=REPO))
            if result.returncode != 0:
                raise AssertionError(result.stdout[-4000:] + result.stderr[-2000:])
            return result.stdout.strip().splitlines()[-1]

        _check(results, "pytest -k cuda", pytest_cuda)
    failed = [r for r in results if not r["ok"]]
    print(f"\n{len(results) - len(failed)} passed, {len(failed)} failed")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"report": report, "results": results}, f, indent=1)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
