"""Per-machine routing tables: which table the router reads, and where it came from.

The shipped table (``woodstar/lowering/routing_table.json``) was measured on the
machine its ``machine`` field names. ``woodstar calibrate`` measures this machine's
routing cells (``woodstar._calibrate``) and writes a calibrated table into the user's
cache folder (``$WOODSTAR_CACHE_DIR``, default ``~/.cache/woodstar``: the folder the
compiled walk builds into), one file per CPU model and logical CPU count. The table
records the machine (CPU model, logical CPUs, woodstar version) and how it was made.

``calibrated_table()`` is what ``woodstar.lowering.routing.load_table`` asks first:
this machine's calibrated table when it exists and is valid, else None (the shipped
table is used). A table that cannot be read, fails validation, or records another
CPU, core count or woodstar version is ignored with a ``CalibrationWarning`` naming
the file and the reason; ``woodstar calibrate`` writes a new one.
"""

import datetime
import functools
import hashlib
import json
import os
import platform
import re
import warnings
from pathlib import Path

from .exceptions import CalibrationWarning

__all__ = ["KIND", "SCHEMA_VERSION", "cache_dir", "cpu_model", "machine", "machine_key",
           "calibrated_path", "validate_table", "read_calibrated", "calibrated_table",
           "write_table", "table_in_use", "now"]

KIND = "calibrated"
SCHEMA_VERSION = 1
MACHINE_FIELDS = ("cpu", "logical_cpus", "woodstar")


def cache_dir() -> Path:
    """``$WOODSTAR_CACHE_DIR``, else ``$XDG_CACHE_HOME/woodstar``, else
    ``~/.cache/woodstar`` (the compiled walk's rule, woodstar/runtimes/c_walk.py)."""
    configured = os.environ.get("WOODSTAR_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "woodstar"


@functools.lru_cache(maxsize=1)
def cpu_model() -> str:
    """The CPU's model name (``/proc/cpuinfo`` on Linux), else what ``platform`` says,
    else "unknown"."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


def machine() -> dict:
    """What a calibrated table must match: CPU model, logical CPUs, woodstar version."""
    from . import __version__

    return {"cpu": cpu_model(), "logical_cpus": os.cpu_count(), "woodstar": __version__}


def machine_key(info=None) -> str:
    """A file-name key for a CPU model and core count (the version is checked inside
    the file, so an upgrade finds the old table and says why it is not used)."""
    info = info or machine()
    slug = re.sub(r"[^a-z0-9]+", "-", str(info["cpu"]).lower()).strip("-")[:40] or "cpu"
    digest = hashlib.sha256(f"{info['cpu']}|{info['logical_cpus']}".encode()).hexdigest()[:8]
    return f"{slug}-{info['logical_cpus']}cpu-{digest}"


def calibrated_path(info=None) -> Path:
    """Where this machine's calibrated table lives (it may not exist)."""
    return cache_dir() / "routing" / f"routing_table-{machine_key(info)}.json"


def _fail(path, reason):
    return f"calibrated routing table {path}: {reason}"


def validate_table(table, path="<table>", expected=None):
    """None when ``table`` is a usable calibrated table for the machine ``expected``
    (default: this one), else the reason it is not, naming the file and the field."""
    from .lowering.registry import strategy_names

    if not isinstance(table, dict):
        return _fail(path, f"not a JSON object (got {type(table).__name__})")
    if table.get("kind") != KIND or table.get("version") != SCHEMA_VERSION:
        return _fail(path, f"not a version-{SCHEMA_VERSION} calibrated table (kind "
                           f"{table.get('kind')!r}, version {table.get('version')!r})")
    expected = expected or machine()
    recorded = table.get("machine")
    if not isinstance(recorded, dict):
        return _fail(path, "no 'machine' record")
    for field in MACHINE_FIELDS:
        if recorded.get(field) != expected[field]:
            return _fail(path, f"measured with {field} {recorded.get(field)!r}, this machine has "
                               f"{expected[field]!r}; run `woodstar calibrate` again")
    entries = table.get("entries")
    if not isinstance(entries, list) or not entries:
        return _fail(path, "no routing entries")
    names = set(strategy_names())
    for i, entry in enumerate(entries):
        where = f"entry {i}"
        if not isinstance(entry, dict) or not {"device", "backend", "threads", "batch",
                                               "regions"} <= set(entry):
            return _fail(path, f"{where}: needs device, backend, threads, batch and regions")
        if not (isinstance(entry["threads"], int) and entry["threads"] >= 1
                and isinstance(entry["batch"], int) and entry["batch"] >= 1):
            return _fail(path, f"{where}: threads and batch must be positive integers "
                               f"(got {entry['threads']!r}, {entry['batch']!r})")
        regions = entry["regions"]
        if not isinstance(regions, list) or not regions:
            return _fail(path, f"{where}: no regions")
        bounds = [r.get("depth_le") if isinstance(r, dict) else "?" for r in regions]
        if bounds[-1] is not None or not all(isinstance(b, int) for b in bounds[:-1]) \
                or bounds[:-1] != sorted(set(bounds[:-1])):
            return _fail(path, f"{where}: depth bounds {bounds} must increase and end with null")
        for j, region in enumerate(regions):
            ranking = region.get("ranking")
            if region.get("strategy") not in names or not isinstance(ranking, list) \
                    or not set(ranking) <= names:
                return _fail(path, f"{where}, region {j}: strategy {region.get('strategy')!r} "
                                   f"or ranking {ranking!r} names no registered strategy "
                                   f"({', '.join(sorted(names))})")
    return None


@functools.lru_cache(maxsize=8)
def _read(path: str, stamp):
    """(table, reason) for one version of a file (``stamp``: its mtime and size), so
    a call to convert costs a ``stat`` and a changed file is read again."""
    try:
        table = json.loads(Path(path).read_text())
    except (OSError, ValueError) as error:
        return None, _fail(path, f"cannot be read ({type(error).__name__}: {error})")
    reason = validate_table(table, path)
    if reason:
        return None, reason
    return table, None


def read_calibrated(path=None):
    """(table, reason): this machine's calibrated table and None; (None, None) when
    there is none; (None, why) when there is one that cannot be used."""
    path = Path(path) if path is not None else calibrated_path()
    try:
        st = path.stat()
    except OSError:
        return None, None
    return _read(str(path), (st.st_mtime_ns, st.st_size, tuple(machine().values())))


_warned = set()


def calibrated_table():
    """This machine's calibrated table, or None. An unusable one is reported once per
    file version with a ``CalibrationWarning`` and ignored."""
    path = calibrated_path()
    table, reason = read_calibrated(path)
    if reason is not None:
        try:
            st = path.stat()
            stamp = (str(path), st.st_mtime_ns, st.st_size)
        except OSError:
            stamp = (str(path),)
        if stamp not in _warned:
            _warned.add(stamp)
            warnings.warn(f"{reason}. Using the shipped routing table.", CalibrationWarning,
                          stacklevel=3)
    return table


def write_table(table, path=None) -> Path:
    """Validate ``table`` for this machine and write it atomically (default: this
    machine's calibrated path); returns the path."""
    path = Path(path) if path is not None else calibrated_path()
    reason = validate_table(table, path)
    if reason:
        from .exceptions import WoodstarError

        raise WoodstarError(reason)
    path.parent.mkdir(parents=True, exist_ok=True)
    partial = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    partial.write_text(json.dumps(table, indent=1) + "\n")
    os.replace(partial, path)  # a concurrent reader never sees half a table
    return path


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def table_in_use() -> dict:
    """Which routing table ``convert`` reads here, for ``woodstar backends``: kind
    ("calibrated" or "shipped"), path, the CPU it was measured on, when, and (when a
    calibrated table exists but is not used) why."""
    from .lowering.routing import TABLE_PATH

    path = calibrated_path()
    table, reason = read_calibrated(path)
    if table is not None:
        recorded = table["machine"]
        return {"kind": KIND, "path": str(path), "cpu": recorded["cpu"],
                "logical_cpus": recorded["logical_cpus"], "made": table.get("made"),
                "ignored": None}
    try:
        shipped = json.loads(TABLE_PATH.read_text())
    except (OSError, ValueError):
        shipped = {}
    recorded = shipped.get("machine") or {}
    return {"kind": "shipped" if shipped else "none (depth rule)", "path": str(TABLE_PATH),
            "cpu": recorded.get("cpu", (shipped.get("source") or {}).get("cpu", "unknown")),
            "logical_cpus": recorded.get("logical_cpus"),
            "made": shipped.get("made") or (shipped.get("source") or {}).get("date"),
            "ignored": reason}
