"""Pickling a container goes through the saved format.

``pickle``, ``cloudpickle`` and ``joblib`` call ``ConvertedModel.__reduce__``, which
hands them :func:`from_saved_bytes` and the bytes ``container.save`` writes (a zip of
a JSON manifest, ``.npy`` arrays and the backend's artifact, each with its SHA-256).
So what travels is data, never the container's Python objects: its compiled CPU route
holds ctypes handles that cannot be pickled, its class is made at run time, and a
program rebuilt on the receiving side fits that machine. Unpickling checks every
member as ``woodstar.load`` does: a damaged payload raises ``CorruptedFileError``.
"""

import io

__all__ = ["saved_bytes", "from_saved_bytes"]


def saved_bytes(container) -> bytes:
    """The bytes ``container.save(path)`` would write."""
    buffer = io.BytesIO()
    container.save(buffer)
    return buffer.getvalue()


def from_saved_bytes(data: bytes, device=None):
    """The container that ``data`` (written by :func:`saved_bytes`) describes, on
    ``device`` (default: where it was saved from, or the CPU when that is not here)."""
    from . import load  # woodstar.load

    return load(io.BytesIO(data), device=device)
