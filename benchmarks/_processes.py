"""What the before/after A/B scripts share: a copy of the package with some files as
at an earlier commit, and a child process that times one package and prints JSON."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

__all__ = ["ROOT", "baseline_tree", "run_child"]

ROOT = Path(__file__).resolve().parents[1]


def baseline_tree(commit, where, files):
    """The working tree's package with ``files`` as at ``commit`` (read with
    ``git show``, which changes nothing in the repository)."""
    shutil.copytree(ROOT / "woodstar", where / "woodstar",
                    ignore=shutil.ignore_patterns("__pycache__"))
    for path in files:
        text = subprocess.run(["git", "show", f"{commit}:{path}"], cwd=ROOT, check=True,
                              capture_output=True).stdout
        (where / path).write_bytes(text)
    return where


def run_child(module, package_root, models_path, repeats):
    """``python -m <module> --child`` on one thread with ``package_root`` first on the
    path; its last output line, as JSON."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(package_root), str(ROOT)]),
               OMP_NUM_THREADS="1", MKL_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", module, "--child",
                          "--models", str(models_path), "--repeats", str(repeats)],
                         env=env, cwd=package_root, capture_output=True, text=True)
    if out.returncode:
        raise RuntimeError(f"the process timing {package_root} failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout.strip().splitlines()[-1])
