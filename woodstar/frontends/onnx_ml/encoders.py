"""``ai.onnx.ml`` OneHotEncoder and LabelEncoder, onto the ``one_hot`` and ``ordinal``
ops (an element's code or integer is looked up in a table of categories).

ONNX Runtime's tables, as it builds them:

* OneHotEncoder (string or int64 input of shape (n, ...)): a float tensor with one
  more dimension of ``len(cats)``; a repeated category sets its last position; an
  unknown one sets none (``zeros=1``) or fails the call (``zeros=0``: the input edge
  raises, naming the column; refused where the value is computed and could fall
  outside the categories). A float input with ``cats_int64s`` is truncated to int64
  first, as ONNX Runtime reads it.
* LabelEncoder, by the model's ``ai.onnx.ml`` opset: version 1 (``classes_strings``:
  string -> its index, int64 -> the string at that index), version 2 (``keys_*`` /
  ``values_*`` of strings, int64s or floats) and version 4 (also ``keys_tensor`` /
  ``values_tensor`` / ``default_tensor``, doubles included). The first of repeated
  keys wins; 0.0 and -0.0 are one key; a NaN key matches NaN from version 4 on, never
  before. Defaults: -1, ``"_Unused"``, -0.0 (or the ``default_*`` attribute; in
  version 4 ``default_tensor`` first).
"""

import numpy as np

from ...ir import OneHotEncode, OrdinalEncode
from ._attributes import attributes, refuse
from .tensors import EXACT_INT, FLOATS, Tensor, read_tensor, truncated, write_tensor

__all__ = ["handle_one_hot_encoder", "handle_label_encoder"]

_DEFAULTS = {"string": "_Unused", "int64": -1, "float32": np.float32(-0.0),
             "float64": np.float64(-0.0)}


def _code(state, tensor, j, key):
    """The number element ``j`` of ``tensor`` holds for ``key``, or None where it
    never holds it."""
    if tensor.element == "string":
        kind, where = tensor.codebooks[j]
        if kind == "input":
            return state.schema.code(where, key)
        return float(where.index(key)) if key in where else None
    if tensor.element == "int64" and abs(int(key)) > EXACT_INT:
        return None  # the edge refuses such inputs; a LabelEncoder never writes them
    return float(key)


def _check_known(state, node, tensor, j, codes):
    """zeros=0: ONNX Runtime fails the call on a value outside the categories; the input
    edge repeats the check on an input column; computed values must always be known."""
    source = tensor.codebooks[j] if tensor.codebooks is not None else None
    if source is not None and source[0] == "input":
        column = source[1]
        previous = state.schema._extra[column].get("allowed")
        allowed = np.asarray(codes, np.float64) if previous is None \
            else np.intersect1d(previous, codes)
        state.schema.set(column, allowed=allowed, check_owner=(
            f"ONNX Runtime's OneHotEncoder (node {node.name!r}, zeros=0: 'Unknown Category')"))
        return
    possible = None
    if source is not None:  # strings a LabelEncoder wrote
        possible = np.arange(len(source[1]), dtype=np.float64)
    elif tensor.table is not None:
        possible = np.asarray(tensor.table, np.float64)
    if possible is None or not np.isin(possible, codes).all():
        refuse(node, "zeros=0 (ONNX Runtime fails on an unknown category) on", "computed values",
               "zeros=1, or zeros=0 on an input column or on values that are all categories")


def handle_one_hot_encoder(node, state):
    a = attributes(node)
    strings, ints = a.get("cats_strings"), a.get("cats_int64s")
    if (strings is None) == (ints is None):
        refuse(node, "categories", sorted(k for k in a if k.startswith("cats")),
               "exactly one of cats_strings, cats_int64s")
    element = "string" if strings is not None else "int64"
    tensor = read_tensor(state, node, 0)
    if element == "int64" and tensor.element in FLOATS:
        tensor = truncated(state, node, tensor)  # ONNX Runtime reads floats as int64
    if tensor.element != element:
        refuse(node, "input of element type", tensor.element, f"{element} for its categories")
    cats = list(strings) if strings is not None else [int(c) for c in ints]
    zeros = int(a.get("zeros", 1))
    if zeros not in (0, 1):
        refuse(node, "zeros", zeros, "0 or 1")
    last = {cat: k for k, cat in enumerate(cats)}  # a repeated category: its last place
    categories, outputs = [], []
    for j in range(tensor.width):
        pairs = [(_code(state, tensor, j, cat), k) for cat, k in last.items()]
        pairs = [(c, j * len(cats) + k) for c, k in pairs if c is not None]
        categories.append(np.array([c for c, _ in pairs], np.float64))
        outputs.append(np.array([o for _, o in pairs], np.int64))
        if zeros == 0:
            _check_known(state, node, tensor, j, categories[-1])
    op = OneHotEncode(n_features=tensor.width, n_outputs=tensor.width * len(cats),
                      categories=tuple(categories), outputs=tuple(outputs),
                      unknown=(-1,) * tensor.width, dtype="float32")
    (value,) = state.add(op, [tensor.value], node)
    write_tensor(state, node.output[0], Tensor(value, "float32", tensor.shape + (len(cats),)))


# ------------------------------------------------------------------------ LabelEncoder
def _typed_list(node, a, prefix, version):
    """(element, values) of the ``keys``/``values`` attributes."""
    found = [(e, a[f"{prefix}_{s}"]) for e, s in (("string", "strings"), ("int64", "int64s"),
                                                   ("float32", "floats")) if f"{prefix}_{s}" in a]
    if version >= 4 and f"{prefix}_tensor" in a:
        found.append(_tensor_list(node, a[f"{prefix}_tensor"], f"{prefix}_tensor"))
    if len(found) != 1:
        refuse(node, f"{prefix} attributes", sorted(k for k in a if k.startswith(prefix)),
               f"exactly one {prefix}_* list")
    element, values = found[0]
    return element, list(values)


def _tensor_list(node, array, what):
    array = np.asarray(array).reshape(-1)
    if array.dtype.kind in "OSU":
        return "string", [v.decode("utf-8") if isinstance(v, bytes) else str(v) for v in array]
    for element, dtype in (("int64", np.int64), ("float32", np.float32), ("float64", np.float64)):
        if array.dtype == dtype:
            return element, list(array)
    refuse(node, f"{what} of dtype", str(array.dtype), "string, int64, float or double")


def _default(node, a, element, version):
    if version >= 4 and "default_tensor" in a:
        kind, values = _tensor_list(node, a["default_tensor"], "default_tensor")
        if kind != element or len(values) != 1:
            refuse(node, "default_tensor", values, f"one {element} value")
        return values[0]
    name = {"string": "default_string", "int64": "default_int64",
            "float32": "default_float"}.get(element)
    return a.get(name, _DEFAULTS[element]) if name else _DEFAULTS[element]


def _table(node, a, version, element):
    """(key element, keys, value element, values, default) of a LabelEncoder."""
    if version == 1:
        classes = list(a.get("classes_strings", []))
        if element == "string":
            return "string", classes, "int64", list(range(len(classes))), \
                int(a.get("default_int64", -1))
        return "int64", list(range(len(classes))), "string", classes, \
            a.get("default_string", "_Unused")
    key_element, keys = _typed_list(node, a, "keys", version)
    value_element, values = _typed_list(node, a, "values", version)
    if len(keys) != len(values):
        refuse(node, "keys and values of lengths", (len(keys), len(values)), "equal lengths")
    return key_element, keys, value_element, values, _default(node, a, value_element, version)


def _first_keys(keys, values, version):
    """The pairs ONNX Runtime's map keeps: the first of equal keys (0.0 and -0.0 are
    equal); NaN keys match NaN from version 4 on (the first one), never before."""
    seen_nan, kept = False, {}
    for key, value in zip(keys, values):
        if isinstance(key, (float, np.floating)) and np.isnan(key):
            if version >= 4 and not seen_nan:
                seen_nan = True
                kept[np.nan] = value
            continue
        if key not in kept:
            kept[key] = value
    return list(kept.items())


def _exact_ints(node, what, numbers):
    beyond = [int(v) for v in numbers if abs(int(v)) > EXACT_INT]
    if beyond:
        refuse(node, f"{what} beyond 2**53", beyond[:3], "integers that float64 holds exactly")


def handle_label_encoder(node, state):
    version = 1 if state.ml_opset <= 1 else 2 if state.ml_opset < 4 else 4
    tensor = read_tensor(state, node, 0)
    a = attributes(node)
    key_element, keys, value_element, values, default = _table(node, a, version, tensor.element)
    if tensor.element != key_element:
        refuse(node, "input of element type", tensor.element, f"{key_element}, the keys' type")
    if value_element == "int64":
        _exact_ints(node, "values", values + [default])
    pairs = _first_keys(keys, values, version)
    if value_element == "string":
        strings = list(dict.fromkeys([str(v) for v in values] + [str(default)]))
        numbers = [float(strings.index(str(v))) for _, v in pairs]
        unknown = float(strings.index(str(default)))
    else:
        numbers = [float(v) for _, v in pairs]
        unknown = float(default)
    categories, outputs = [], []
    for j in range(tensor.width):
        coded = [(_code(state, tensor, j, k), n) for (k, _), n in zip(pairs, numbers)]
        coded = [(c, n) for c, n in coded if c is not None]
        categories.append(np.array([c for c, _ in coded], np.float64))
        outputs.append(np.array([n for _, n in coded], np.float64))
    dtype = "float32" if value_element == "float32" else "float64"
    op = OrdinalEncode(n_features=tensor.width, categories=tuple(categories),
                       outputs=tuple(outputs), unknown=(unknown,) * tensor.width, dtype=dtype)
    (value,) = state.add(op, [tensor.value], node)
    if value_element == "string":
        out = Tensor(value, "string", tensor.shape, [("table", tuple(strings))] * tensor.width)
    else:
        table = None if value_element != "int64" \
            else np.unique(np.array(values + [default], np.int64))
        out = Tensor(value, value_element, tensor.shape,
                     [None] * tensor.width if value_element == "int64" else None, table)
    write_tensor(state, node.output[0], out)
