"""Converted models kept on disk, keyed by everything that decides the conversion
(``extra_config["conversion_cache"]``, see constants.CONVERSION_CACHE).

A compiling backend's conversion (TVM's build, the ONNX export and its session, a
TorchScript trace) takes up to seconds and gives the same artifact each time for the
same model. ``convert`` with a cache folder first looks there for the model's saved
container, in woodstar's own format (``container.save`` / ``woodstar.load``: JSON,
``.npy`` without pickle, each member checked against its SHA-256); a hit is loaded
instead of converted, and a miss is converted and then saved there.

The key is the SHA-256 of: the model's IR (what ``save`` writes of it), the backend,
the device, the other options, the library versions a saved file records, a digest of
woodstar's own source files (a changed lowering must not reuse an old artifact), and
the machine (architecture, CPU model and flags: a compiled library is machine code).
A file that no longer loads is removed with a warning and the model converted again.
Nothing is ever evicted; deleting the folder, or any file in it, is always safe.

The folder holds artifacts that are loaded as code (TVM's shared libraries), like any
saved TVM model: point it only at a folder that only you can write. A folder woodstar
makes is made readable by its owner only.
"""

import dataclasses
import functools
import hashlib
import json
import os
import platform
import warnings
from pathlib import Path

import torch

from .exceptions import CorruptedFileError

__all__ = ["default_folder", "conversion_key", "cached_conversion"]

SUFFIX = ".woodstar.zip"
SOURCE_SUFFIXES = (".py", ".c", ".json")


def default_folder() -> Path:
    """``$WOODSTAR_CACHE_DIR/conversions`` (default ``~/.cache/woodstar/conversions``)."""
    from .calibration import cache_dir

    return cache_dir() / "conversions"


@functools.lru_cache(maxsize=1)
def code_digest() -> str:
    """SHA-256 over woodstar's source files (names and contents), once per process."""
    package = Path(__file__).resolve().parent
    digest = hashlib.sha256()
    for path in sorted(package.rglob("*")):
        if path.suffix in SOURCE_SUFFIXES and "__pycache__" not in path.parts and path.is_file():
            digest.update(path.relative_to(package).as_posix().encode("utf-8") + b"\0")
            digest.update(path.read_bytes() + b"\0")
    return digest.hexdigest()


@functools.lru_cache(maxsize=1)
def machine() -> dict:
    """What a compiled artifact depends on: architecture, CPU model and its flags."""
    from .calibration import cpu_model

    flags = ""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith(("flags", "Features")):
                flags = " ".join(sorted(line.split(":", 1)[1].split()))
                break
    except OSError:
        pass
    return {"system": platform.system(), "architecture": platform.machine(),
            "cpu": cpu_model(), "flags": hashlib.sha256(flags.encode()).hexdigest()}


def conversion_key(model_ir, backend_cls, options, device) -> str:
    """The cache key of converting ``model_ir`` with these settings (a hex digest)."""
    from ._saving import FORMAT_VERSION, _json_value, _versions, ir_digest

    settings = {k: _json_value(v) for k, v in dataclasses.asdict(options).items()
                if k != "conversion_cache"}
    described = {"format_version": FORMAT_VERSION, "ir": ir_digest(model_ir),
                 "backend": backend_cls.name, "device": str(torch.device(device)),
                 "options": settings, "versions": _versions(backend_cls),
                 "woodstar_code": code_digest(), "machine": machine()}
    return hashlib.sha256(json.dumps(described, sort_keys=True).encode("utf-8")).hexdigest()


def cached_conversion(model_ir, backend_cls, options, device, convert):
    """The container for ``model_ir``: loaded from ``options.conversion_cache`` when a
    conversion with the same key was saved there, else ``convert()``'s, then saved
    there. Backends without an artifact (rebuilt from the IR on load) are converted
    and not saved. Returns (container, "hit" | "miss" | "not cached")."""
    if backend_cls.artifact_name is None:
        return convert(), "not cached"
    folder = Path(options.conversion_cache)
    path = folder / (conversion_key(model_ir, backend_cls, options, device) + SUFFIX)
    if path.is_file():
        container = _load(path, device, options)
        if container is not None:
            return container, "hit"
    container = convert()
    _store(container, folder, path)
    return container, "miss"


def _load(path, device, options):
    from ._convert import load

    try:
        container = load(path, device=device)
    except CorruptedFileError as error:
        warnings.warn(f"woodstar's conversion cache: {error}; converting again.", stacklevel=4)
        _remove(path)
        return None
    # The file holds no cache setting (it is not part of the model): give it back.
    container.options = container.options.replace(conversion_cache=options.conversion_cache)
    return container


def _store(container, folder, path):
    """Save ``container`` at ``path``; a folder or disk that refuses is a warning, the
    conversion stands."""
    try:
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        container.save(path)
    except OSError as error:
        warnings.warn(f"woodstar's conversion cache: could not save to {folder} ({error}).",
                      stacklevel=4)


def _remove(path):
    try:
        os.unlink(path)
    except OSError:
        pass
