"""Build and load a small C source of this package as a shared library, once per
process, cached on disk under ``$WOODSTAR_CACHE_DIR`` (default ``~/.cache/woodstar``)
keyed by the source, the package's C headers, the compiler and the flags. A failure is
a reason string, never an exception: the caller falls back to its NumPy route."""

from __future__ import annotations

import ctypes
import hashlib
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import threading
from pathlib import Path

__all__ = ["NativeLibrary", "build", "cache_dir", "find_compiler", "find_cxx_compiler",
           "simd_code", "simd_name"]


def cache_dir() -> Path:
    configured = os.environ.get("WOODSTAR_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "woodstar"


def find_compiler():
    for name in (os.environ.get("CC"), "cc", "gcc", "clang"):
        if name and shutil.which(name):
            return name
    return None


def find_cxx_compiler():
    for name in (os.environ.get("CXX"), "c++", "g++", "clang++"):
        if name and shutil.which(name):
            return name
    return None


class NativeLibrary:
    """``NativeLibrary(source, flags, setup)``: ``load()`` gives the ``ctypes.CDLL`` (or
    None, with ``reason`` saying why); ``setup(lib)`` declares its functions' types."""

    def __init__(self, source: Path, flags, setup, what: str):
        self.source, self.flags, self._setup, self.what = Path(source), tuple(flags), setup, what
        self._lib, self.reason = None, None
        self._lock = threading.Lock()

    def load(self):
        if self._lib is not None or self.reason is not None:
            return self._lib
        with self._lock:
            if self._lib is None and self.reason is None:
                self._load_once()
        return self._lib

    def _load_once(self):
        if sys.platform == "win32":
            self.reason = f"{self.what} is built on Linux and macOS only"
            return
        compiler = find_compiler()
        if compiler is None:
            self.reason = "no C compiler found (set CC, or install gcc)"
            return
        try:
            lib = ctypes.CDLL(str(build(self.source, self.flags, compiler)))
            self._setup(lib)
        except Exception as error:  # noqa: BLE001  (any failure: a reason, and the NumPy route)
            self.reason = f"{self.what} could not be built: {type(error).__name__}: {error}"
            return
        self._lib = lib


HEADERS = Path(__file__).parent  # the C headers the sources include ("cpu_simd.h")
_SIMD_NAMES = {0: None, 1: "avx2", 2: "avx512"}  # SIMD_* in cpu_simd.h


def simd_name(code: int):
    """A library's SIMD form (SIMD_* of cpu_simd.h) by name: "avx512", "avx2" or None."""
    return _SIMD_NAMES[int(code)]


def simd_code(name) -> int:
    """The SIMD_* code of "avx512", "avx2" or None."""
    return {value: key for key, value in _SIMD_NAMES.items()}[name]


def build(source: Path, flags, compiler: str, libraries=("-lm",)) -> Path:
    """The shared library of ``source`` built with ``compiler`` and ``flags``, linked
    with ``libraries`` (named after the source, so that a linker that drops unneeded
    libraries keeps them): from the cache when it is there, else compiled into it (or
    into the temp dir). The source may lie elsewhere (a benchmark's candidate) and still
    include this package's headers."""
    source = Path(source)
    text = source.read_bytes() + b"".join(h.read_bytes() for h in sorted(HEADERS.glob("*.h")))
    key = hashlib.sha256(text + " ".join((compiler, *flags, *libraries)).encode()).hexdigest()[:16]
    name = f"{source.stem}-{platform.machine()}-{key}.so"
    for directory in (cache_dir(), Path(tempfile.gettempdir()) / f"woodstar-{os.getuid()}"):
        target = directory / name
        if target.exists():
            return target
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError:
            continue
        if not os.access(directory, os.W_OK):
            continue
        partial = directory / f"{name}.{os.getpid()}.{threading.get_ident()}.tmp"
        result = subprocess.run([compiler, *flags, f"-I{HEADERS}", str(source), "-o",
                                 str(partial), *libraries],
                                capture_output=True, text=True, timeout=300)
        if result.returncode != 0:
            partial.unlink(missing_ok=True)
            raise RuntimeError(f"{compiler} failed: {result.stderr.strip()[:500]}")
        os.replace(partial, target)  # atomic: a concurrent build is never half-read
        return target
    raise RuntimeError(f"no writable cache directory ({cache_dir()} or the temp dir)")
