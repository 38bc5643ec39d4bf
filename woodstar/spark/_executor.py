"""What runs inside Spark's Python workers: a per-process model cache and the batch
scorer. No pyspark import here, so it is tested without Spark as well.

A model reaches a worker as the bytes of woodstar's saved format (a broadcast
variable, see ``_udf.py``); the first batch that needs it checks the bytes against
the digest the driver computed, loads them once (``woodstar.load``: every member's
SHA-256 is checked, nothing is unpickled) and keeps the container for every later
batch and task this Python process runs (Spark reuses its Python workers:
``spark.python.worker.reuse``, on by default). ``stats()`` reports the loads and
batches per model in this process, for tests and for monitoring.
"""

import hashlib
import os
import threading

import numpy as np

__all__ = ["cached_model", "score_batch", "stats", "clear"]

_LOCK = threading.Lock()
_MODELS = {}  # (digest, device, n_threads) -> container
_COUNTS = {}  # digest -> {"loads": int, "batches": int, "rows": int}


def _counts(digest):
    return _COUNTS.setdefault(digest, {"loads": 0, "batches": 0, "rows": 0})


def cached_model(digest, fetch, device="cpu", n_threads=None):
    """The container whose saved bytes have SHA-256 ``digest``; ``fetch()`` returns
    those bytes and is called only when this process has not loaded it yet."""
    key = (digest, device, n_threads)
    container = _MODELS.get(key)
    if container is not None:
        return container
    with _LOCK:
        container = _MODELS.get(key)
        if container is None:
            from ..exceptions import CorruptedFileError
            from .._pickling import from_saved_bytes

            data = fetch()
            actual = hashlib.sha256(data).hexdigest()
            if actual != digest:
                raise CorruptedFileError(
                    f"the model bytes this Spark worker received do not match the driver's "
                    f"(SHA-256 {actual[:16]}..., expected {digest[:16]}...)")
            container = from_saved_bytes(data, device=device)
            if n_threads is not None:
                _use_threads(container, n_threads)
            _MODELS[key] = container
            _counts(digest)["loads"] += 1
    return container


def _use_threads(container, n_threads):
    """Run ``container``'s calls on ``n_threads`` threads: the option its CPU routes
    read when first built and its backend runners read on every call."""
    options = container.options.replace(n_threads=n_threads)
    container.options = options
    for program in container._programs.values():
        program.options = options


def stats():
    """{digest: {"loads", "batches", "rows"}} for this process, and its ``pid``."""
    with _LOCK:
        return {"pid": os.getpid(), "models": {d: dict(c) for d, c in _COUNTS.items()}}


def clear():
    """Forget every cached model and count (tests)."""
    with _LOCK:
        _MODELS.clear()
        _COUNTS.clear()


def _frame(columns, feature_names):
    """One pandas DataFrame from a UDF's arguments: a single struct column arrives as
    a DataFrame (matched by name by the container); separate columns arrive as Series
    in the model's feature order. Boolean columns with nulls arrive as objects: they
    become 0.0/1.0 with NaN for null."""
    import pandas as pd

    if len(columns) == 1 and isinstance(columns[0], pd.DataFrame):
        frame = columns[0]
    else:
        names = feature_names if feature_names is not None else range(len(columns))
        if len(columns) != len(names):
            raise ValueError(f"the model takes {len(names)} feature columns; the UDF got "
                             f"{len(columns)}")
        frame = pd.DataFrame(dict(zip(names, columns)), copy=False)
    for name in frame.columns:
        column = frame[name]
        if column.dtype == object and column.map(lambda v: v is None or isinstance(v, bool)).all():
            frame[name] = column.map({True: 1.0, False: 0.0}).astype(np.float64)
    return frame


def score_batch(container, columns, method, kind, field_names, digest=None):
    """The UDF's answer for one Arrow batch: ``kind`` "array" (a Series of arrays),
    "columns" (a DataFrame, one column per output: Spark's struct) or "label" (a
    Series of scalars)."""
    import pandas as pd

    names = getattr(container, "feature_names_in_", None)
    frame = _frame(columns, None if names is None else list(names))
    n_rows = len(frame)
    if n_rows == 1:
        # NumPy's matrix product takes another path for one row, whose last bit can
        # differ from a batch's (scikit-learn's own scores differ the same way): a lone
        # row is scored as two copies, so no row's score depends on how Spark cut batches.
        frame = frame.iloc[[0, 0]]
    values = getattr(container, method)(frame)
    if isinstance(values, list):  # multi-output classifiers: one block per output
        values = np.hstack(values)
    values = np.asarray(values)[:n_rows]
    if values.dtype.kind == "f":
        values = values.astype(np.float64, copy=False)
    if digest is not None:
        with _LOCK:
            counts = _counts(digest)
            counts["batches"] += 1
            counts["rows"] += n_rows
    if kind == "label":
        return pd.Series(values.reshape(len(values)))
    values = values.reshape(len(values), -1)
    if kind == "columns":
        return pd.DataFrame({name: values[:, i] for i, name in enumerate(field_names)})
    return pd.Series(list(values))
