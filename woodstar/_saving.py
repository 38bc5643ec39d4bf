"""``container.save(path)`` and ``woodstar.load(path)``.

The file is a zip archive (stored, not compressed: artifacts are binary and the
arrays small) of:

* ``manifest.json``: what was saved (schema in docs/backends.md), including the
  SHA-256 of every other member;
* ``manifest.sha256``: the SHA-256 of ``manifest.json`` itself, which is the model's
  digest (``container.digest``; ``woodstar.load(path, digest=...)`` checks it);
* ``ir/nodes/<i>/<name>.npy``, ``ir/schema/<i>/<name>.npy``, ``ir/head/classes_<i>.npy``:
  the IR's arrays in NumPy's ``.npy`` format, written and read with
  ``allow_pickle=False``; the manifest's ``graph`` lists the nodes (op kind, inputs,
  outputs, the op's JSON fields and its arrays) and ``schema`` the input columns;
* ``artifacts/<precision>/<name>``: the backend's artifact per compiled precision
  (TorchScript archive, ONNX model, TVM shared library); none for the torch and
  torch.compile backends, which are rebuilt from the IR.

Format version 2 holds the graph IR; files of version 1 (a chain: ``ensemble``,
``linear`` and ``steps`` in the manifest) still load, as that chain.

Loading never unpickles: JSON, ``.npy`` without pickle, and each backend's own loader.
Every member is checked against its SHA-256 before it is used, members that the
manifest does not list are refused, and any inconsistency is a CorruptedFileError.
"""

import dataclasses
import hashlib
import io
import json
import os
import platform
import tempfile
import warnings
import zipfile

import numpy as np
import torch

from ._options import Options
from .exceptions import CorruptedFileError, InvalidModelError, VersionMismatchWarning
from .ir import (ColumnOps, Graph, Head, InputColumn, InputSchema, LinearModel, ModelIR, Node,
                 TreeEnsemble, ValueType, chain)
from .ir.graph import op_class

__all__ = ["save", "load_parts", "read_saved", "ir_digest", "FORMAT", "FORMAT_VERSION"]

FORMAT = "woodstar-model"
FORMAT_VERSION = 2
READABLE_VERSIONS = (1, 2)
MANIFEST = "manifest.json"
MANIFEST_HASH = "manifest.sha256"
MAX_MEMBER_BYTES = 4 * 2**30


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _npy_bytes(array) -> bytes:
    buffer = io.BytesIO()
    np.save(buffer, np.asarray(array), allow_pickle=False)
    return buffer.getvalue()


def _versions(backend_cls):
    from . import __version__

    versions = {"woodstar": __version__, "python": platform.python_version(),
                "numpy": np.__version__, "torch": torch.__version__}
    extra = getattr(backend_cls, "library_versions", None)
    if extra is not None:
        versions.update(extra())
    return versions


def _classes_for_saving(classes):
    """.npy without pickle cannot hold object arrays: store their values in a plain
    dtype and remember to give them back as objects."""
    if classes.dtype.kind != "O":
        return classes, False
    values = classes.tolist()
    for kind in (str, bytes):
        if all(isinstance(v, kind) for v in values):
            return np.asarray(values), True
    if all(isinstance(v, (bool, np.bool_)) for v in values):
        return np.asarray(values, dtype=bool), True
    if all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in values):
        return np.asarray(values, dtype=np.int64), True
    if all(isinstance(v, (float, int, np.floating, np.integer)) for v in values):
        return np.asarray(values, dtype=np.float64), True
    types = sorted({type(v).__name__ for v in values})
    raise ValueError(f"Cannot save class labels of types {types}: labels must be all strings, "
                     f"all bytes, all booleans or all numbers to be stored without pickle.")


def _json_value(value):
    if isinstance(value, (tuple, list)):
        return [_json_value(v) for v in value]
    if isinstance(value, dict):
        return {k: _json_value(v) for k, v in value.items()}
    if isinstance(value, (np.integer,)):
        return int(value)
    if isinstance(value, (np.floating,)):
        return float(value)
    return value


def _graph_meta(graph, members):
    nodes = []
    for i, node in enumerate(graph.nodes):
        fields, arrays = node.op.to_saved()
        files = {}
        for name, array in arrays.items():
            files[name] = f"ir/nodes/{i}/{name}.npy"
            members[files[name]] = _npy_bytes(array)
        nodes.append({"name": node.name, "op": node.kind, "inputs": list(node.inputs),
                      "outputs": list(node.outputs), "fields": _json_value(fields),
                      "arrays": files})
    return {"input_kinds": list(graph.input_type.kinds), "nodes": nodes,
            "raw": graph.raw, "transformed": graph.transformed}


def _schema_meta(schema, members):
    columns = []
    for i, column in enumerate(schema.columns):
        entry = {"name": column.name, "kind": column.kind,
                 "vocabulary": None if column.vocabulary is None else list(column.vocabulary),
                 "category_values": None, "allowed": None,
                 "allowed_missing": column.allowed_missing, "check_owner": column.check_owner,
                 "unseen_category": column.unseen_category,
                 "positive_only": column.positive_only}
        if column.category_values is not None:
            stored, as_object = _classes_for_saving(np.asarray(column.category_values,
                                                               dtype=object))
            entry["category_values"] = f"ir/schema/{i}/category_values.npy"
            members[entry["category_values"]] = _npy_bytes(stored)
        if column.allowed is not None:
            entry["allowed"] = f"ir/schema/{i}/allowed.npy"
            members[entry["allowed"]] = _npy_bytes(column.allowed)
        columns.append(entry)
    return {"columns": columns}


def _ir_members(ir, members):
    """The IR's arrays into ``members`` (name -> .npy bytes); returns the manifest's
    ``head``, ``graph`` and ``schema`` entries that name them."""
    graph_meta = _graph_meta(ir.graph, members)
    schema_meta = _schema_meta(ir.schema, members)
    head_meta = {"fields": {}, "classes": None}
    for field in dataclasses.fields(Head):
        value = getattr(ir.head, field.name)
        if field.name == "classes":
            if value is not None:
                head_meta["classes"] = []
                for i, classes in enumerate(value):
                    stored, as_object = _classes_for_saving(classes)
                    name = f"ir/head/classes_{i}.npy"
                    members[name] = _npy_bytes(stored)
                    head_meta["classes"].append({"file": name, "as_object": as_object})
        else:
            head_meta["fields"][field.name] = _json_value(value)
    return head_meta, graph_meta, schema_meta


def ir_digest(ir) -> str:
    """The SHA-256 of what ``save`` writes of ``ir``: equal IRs give equal digests."""
    members = {}
    head_meta, graph_meta, schema_meta = _ir_members(ir, members)
    described = {"head": head_meta, "graph": graph_meta, "schema": schema_meta,
                 "files": {name: _sha256(data) for name, data in sorted(members.items())}}
    return _sha256(json.dumps(described, sort_keys=True).encode("utf-8"))


# Settings of the conversion, not of the model: not written (a loaded model has none).
_UNSAVED_OPTIONS = ("conversion_cache",)


def save(container, path):
    """Write ``container`` to ``path`` (a file name or a writable binary file)."""
    members = {}
    head_meta, graph_meta, schema_meta = _ir_members(container.ir, members)
    backend_cls = container._backend_cls
    programs = {}
    for precision, program in sorted(container._programs.items()):
        entry = {"strategy": program.module.strategy, "artifact": None}
        if backend_cls.artifact_name is not None:
            name = f"artifacts/{precision}/{backend_cls.artifact_name}"
            members[name] = backend_cls.save_artifact(program)
            entry["artifact"] = name
        programs[precision] = entry
    manifest = {
        "format": FORMAT,
        "format_version": FORMAT_VERSION,
        "versions": _versions(backend_cls),
        "backend": container.backend,
        "device": str(container.device),
        "options": {k: _json_value(v) for k, v in dataclasses.asdict(container.options).items()
                    if k not in _UNSAVED_OPTIONS},
        "head": head_meta,
        "graph": graph_meta,
        "schema": schema_meta,
        "programs": programs,
        "files": {name: _sha256(data) for name, data in sorted(members.items())},
    }
    manifest_bytes = json.dumps(manifest, indent=1, sort_keys=True).encode("utf-8")
    members[MANIFEST] = manifest_bytes
    members[MANIFEST_HASH] = _sha256(manifest_bytes).encode("ascii")
    # The model's digest (Hummingbird's load(location, digest)): the manifest's SHA-256,
    # which covers every member through their SHA-256 in "files".
    container.digest = _sha256(manifest_bytes)
    if hasattr(path, "write"):
        _write_zip(path, members)
        return
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    handle, tmp = tempfile.mkstemp(prefix=".woodstar-", suffix=".tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as f:
            _write_zip(f, members)
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.unlink(tmp)
        raise


def _write_zip(f, members):
    with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_STORED) as archive:
        for name in (MANIFEST, MANIFEST_HASH, *sorted(set(members) - {MANIFEST, MANIFEST_HASH})):
            info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = 0o644 << 16
            archive.writestr(info, members[name])


# ------------------------------------------------------------------------- load
def _corrupted(source, why):
    return CorruptedFileError(f"{source} is not a valid woodstar model file: {why}")


def _read_members(path, source):
    try:
        with zipfile.ZipFile(path) as archive:
            infos = archive.infolist()
            names = [i.filename for i in infos]
            if MANIFEST not in names or MANIFEST_HASH not in names:
                raise _corrupted(source, f"it has no {MANIFEST} (members: {names[:5]})")
            if len(set(names)) != len(names):
                raise _corrupted(source, "it has duplicate members")
            members = {}
            for info in infos:
                if info.file_size > MAX_MEMBER_BYTES:
                    raise _corrupted(source, f"member {info.filename} is too large")
                members[info.filename] = archive.read(info)
            return members
    except CorruptedFileError:
        raise
    except (zipfile.BadZipFile, zipfile.LargeZipFile, EOFError, OSError, ValueError,
            NotImplementedError) as error:
        if isinstance(error, FileNotFoundError):
            raise
        raise _corrupted(source, f"{type(error).__name__}: {error}") from None


def _load_npy(data, name, source):
    try:
        return np.load(io.BytesIO(data), allow_pickle=False)
    except ValueError as error:
        raise _corrupted(source, f"{name} is not a plain .npy array ({error})") from None


def _check_manifest(members, source):
    manifest_bytes = members[MANIFEST]
    if members[MANIFEST_HASH].decode("ascii", "replace").strip() != _sha256(manifest_bytes):
        raise _corrupted(source, f"{MANIFEST} does not match its SHA-256")
    try:
        manifest = json.loads(manifest_bytes.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise _corrupted(source, f"{MANIFEST} is not JSON ({error})") from None
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT:
        raise _corrupted(source, f"{MANIFEST} does not describe a {FORMAT}")
    if manifest.get("format_version") not in READABLE_VERSIONS:
        raise _corrupted(source, f"format version {manifest.get('format_version')!r} is not "
                                 f"supported (this woodstar reads {READABLE_VERSIONS})")
    files = manifest.get("files")
    if not isinstance(files, dict):
        raise _corrupted(source, "the manifest lists no files")
    listed = set(files) | {MANIFEST, MANIFEST_HASH}
    unlisted = sorted(set(members) - listed)
    if unlisted:
        raise _corrupted(source, f"members not listed in the manifest: {unlisted}")
    for name, digest in files.items():
        if name not in members:
            raise _corrupted(source, f"member {name} is missing")
        if _sha256(members[name]) != digest:
            raise _corrupted(source, f"member {name} does not match its SHA-256")
    return manifest


def _warn_versions(saved, backend_cls, source):
    current = _versions(backend_cls)
    different = [f"{name} {saved[name]} (now {current[name]})" for name in sorted(saved)
                 if name in current and name != "python" and saved[name] != current[name]]
    if different:
        warnings.warn(f"{source} was saved with other library versions: {', '.join(different)}; "
                      f"predictions may differ.", VersionMismatchWarning, stacklevel=3)


def _build_head(head_meta, members, source):
    classes = None
    if head_meta["classes"] is not None:
        classes = []
        for entry in head_meta["classes"]:
            array = _load_npy(members[entry["file"]], entry["file"], source)
            if entry["as_object"]:
                array = _as_objects(array)
            classes.append(array)
    return Head(classes=classes, **head_meta["fields"])


def _as_objects(array):
    values = array.tolist()
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _build_ir(manifest, members, source):
    try:
        head = _build_head(manifest["head"], members, source)
        if manifest["format_version"] == 1:
            return _build_chain_v1(manifest, members, source, head).validate()
        schema = _build_schema(manifest["schema"], members, source)
        graph = _build_graph(manifest["graph"], members, source)
        return ModelIR(head=head, graph=graph, schema=schema).validate()
    except CorruptedFileError:
        raise
    except (KeyError, TypeError, ValueError, AttributeError, InvalidModelError) as error:
        raise _corrupted(source, f"its IR is inconsistent ({type(error).__name__}: {error})") from None


def _build_graph(meta, members, source):
    nodes = []
    for entry in meta["nodes"]:
        arrays = {name: _load_npy(members[file], file, source)
                  for name, file in entry["arrays"].items()}
        op = op_class(str(entry["op"])).from_saved(entry["fields"], arrays)
        nodes.append(Node(str(entry["name"]), op, tuple(entry["inputs"]), tuple(entry["outputs"])))
    return Graph(ValueType(tuple(meta["input_kinds"])), tuple(nodes), str(meta["raw"]),
                 str(meta["transformed"]))


def _build_schema(meta, members, source):
    columns = []
    for entry in meta["columns"]:
        category_values = allowed = None
        if entry["category_values"] is not None:
            name = entry["category_values"]
            category_values = tuple(_load_npy(members[name], name, source).tolist())
        if entry["allowed"] is not None:
            allowed = _float_array(members, entry["allowed"], source)
        columns.append(InputColumn(
            name=str(entry["name"]), kind=str(entry["kind"]),
            vocabulary=None if entry["vocabulary"] is None else tuple(entry["vocabulary"]),
            category_values=category_values, allowed=allowed,
            allowed_missing=bool(entry["allowed_missing"]), check_owner=str(entry["check_owner"]),
            unseen_category=str(entry.get("unseen_category", "missing")),
            positive_only=bool(entry.get("positive_only", False))))
    return InputSchema(tuple(columns))


def _build_chain_v1(manifest, members, source, head):
    """A version-1 file: trees or a linear model (or neither) after column-wise steps."""
    ens_meta = manifest["ensemble"]
    ensemble = None if ens_meta is None else _build_ensemble(ens_meta, members, source)
    linear = _build_linear(manifest.get("linear"), members, source)
    steps = tuple(_build_step(meta, members, source) for meta in manifest.get("steps", []))
    return chain(head, steps=steps, ensemble=ensemble, linear=linear)


def _build_ensemble(meta, members, source):
    arrays = {field: _load_npy(members[name], name, source)
              for field, name in meta["arrays"].items()}
    return TreeEnsemble.from_saved(meta["scalars"], arrays)


def _float_array(members, name, source):
    array = _load_npy(members[name], name, source)
    if array.dtype not in (np.float32, np.float64):
        raise _corrupted(source, f"{name} has dtype {array.dtype}")
    return array


def _build_linear(meta, members, source):
    if meta is None:
        return None
    return LinearModel(coef=_float_array(members, meta["coef"], source),
                       intercept=_float_array(members, meta["intercept"], source),
                       post_transform=str(meta["post_transform"]),
                       vector_coef=bool(meta["vector_coef"]))


def _build_step(meta, members, source):
    return ColumnOps(name=str(meta["name"]), n_features=int(meta["n_features"]),
                     ops=tuple(str(op) for op in meta["ops"]),
                     operands=tuple(_float_array(members, name, source) for name in meta["operands"]),
                     cast_operand=tuple(bool(c) for c in meta["cast_operand"]))


def _options(manifest, source):
    fields = {f.name for f in dataclasses.fields(Options)}
    raw = manifest.get("options", {})
    if not isinstance(raw, dict):
        raise _corrupted(source, "options are not a mapping")
    values = {}
    for key, value in raw.items():
        if key in fields:
            values[key] = tuple(value) if isinstance(value, list) else value
    return Options(**values)


def load_parts(path, device=None):
    """Read a model written by ``container.save``: (IR, backend class, options, device,
    programs by precision). ``device``: where to run it; by default where it was saved
    from, or the CPU when that device is not here."""
    return read_saved(path, device)[:5]


def read_saved(path, device=None, digest=None):
    """``load_parts`` and the file's digest (the SHA-256 of its manifest); a given
    ``digest`` that differs is a CorruptedFileError, before anything is built."""
    from .backends import all_backends, get_backend
    from .lowering import get_strategy, lower_model

    source = repr(os.fspath(path)) if not hasattr(path, "read") else "the file"
    members = _read_members(path, source)
    saved_digest = _sha256(members[MANIFEST])
    if digest is not None and str(digest).strip().lower() != saved_digest:
        raise _corrupted(source, f"its digest is {saved_digest}, not the expected {digest!r}")
    manifest = _check_manifest(members, source)
    try:
        backend_name = manifest["backend"]
        programs_meta = manifest["programs"]
        saved_versions = manifest["versions"]
    except KeyError as error:
        raise _corrupted(source, f"the manifest lacks {error}") from None
    if backend_name not in all_backends():
        raise _corrupted(source, f"backend {backend_name!r} is unknown")
    backend_cls = get_backend(backend_name)
    ir = _build_ir(manifest, members, source)
    options = _options(manifest, source)
    _warn_versions(saved_versions, backend_cls, source)
    if device is None:
        device = manifest.get("device", "cpu")
        if torch.device(device).type == "cuda" and not torch.cuda.is_available():
            warnings.warn(f"{source} was saved on {device}; CUDA is not available here, "
                          f"loading it on the CPU.", stacklevel=3)
            device = "cpu"
    device = torch.device(device)
    programs = {}
    for precision, entry in programs_meta.items():
        if precision not in ("float32", "float64"):
            raise _corrupted(source, f"unknown program precision {precision!r}")
        has_trees = bool(ir.graph.nodes_of("trees"))
        strategy = get_strategy(entry["strategy"]) if has_trees else None
        module = lower_model(ir, strategy, precision)
        artifact = entry.get("artifact")
        if (artifact is None) != (backend_cls.artifact_name is None):
            raise _corrupted(source, f"the {precision} program's artifact does not fit backend "
                                     f"{backend_name!r}")
        data = members[artifact] if artifact is not None else None
        try:
            programs[precision] = backend_cls.load_artifact(module, data, options, device)
        except CorruptedFileError:
            raise
        except Exception as error:  # noqa: BLE001  (each backend's loader has its own errors)
            raise _corrupted(source, f"the {backend_name} artifact {artifact} does not load "
                                     f"({type(error).__name__}: {error})") from None
    default = "float64" if ir.head.task == "forecast" else options.precision or "float32"
    if default not in programs:  # a forecaster's dates need float64 (container._Forecast)
        raise _corrupted(source, "the default program is missing")
    return ir, backend_cls, options, device, programs, saved_digest
