"""ai.onnx.ml LabelEncoder (opsets 1, 2 and 4: strings, int64s, floats, doubles,
defaults, repeated and NaN keys) and OneHotEncoder (string and int64 input, repeated
categories, zeros=0) in hand-built graphs, against ONNX Runtime."""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

ML = "ai.onnx.ml"
ROUTES = [("torch", None), ("torch", {"cpu_route": "program"}), ("torch.jit", None)]


def _model(node_attrs, element_in, element_out, ml, width=1, op="LabelEncoder"):
    from onnx import TensorProto as T
    from onnx import helper

    types = {"string": T.STRING, "int64": T.INT64, "float": T.FLOAT, "double": T.DOUBLE}
    node = helper.make_node(op, ["x"], ["y"], domain=ML, **node_attrs)
    graph = helper.make_graph([node], "encoder",
                              [helper.make_tensor_value_info("x", types[element_in], [None, width])],
                              [helper.make_tensor_value_info("y", types[element_out], None)])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(ML, ml)])


def _check(model, X, routes=ROUTES):
    (expected,) = session(model).run(None, {"x": X})
    for backend, extra in routes:
        got = woodstar.convert(model, backend, extra_config=extra).predict(X)
        got = got.reshape(expected.shape)
        np.testing.assert_array_equal(got, expected, err_msg=f"{backend} {extra}")
        if expected.dtype.kind == "f":  # -0.0 defaults: the sign bit too
            np.testing.assert_array_equal(np.signbit(got), np.signbit(expected))
            assert got.dtype == expected.dtype
    return expected


def _strings(rng, n, values):
    return rng.choice(values, size=(n, 1)).astype(object)


@pytest.mark.parametrize("ml", [2, 4])
def test_string_to_int64(rng, ml):
    model = _model(dict(keys_strings=["a", "b", "c", "a"], values_int64s=[5, -3, 7, 9],
                        default_int64=42), "string", "int64", ml)
    expected = _check(model, _strings(rng, 200, ["a", "b", "c", "zz", ""]))
    assert 42 in expected and 9 not in expected  # the first of repeated keys wins


def test_string_to_int64_without_default(rng):
    model = _model(dict(keys_strings=["a", "b"], values_int64s=[1, 2]), "string", "int64", 2)
    assert -1 in _check(model, _strings(rng, 100, ["a", "b", "zz"]))


def test_opset_1_classes_strings(rng):
    to_int = _model(dict(classes_strings=["u", "v", "w"], default_int64=-7), "string", "int64", 1)
    _check(to_int, _strings(rng, 100, ["u", "v", "w", "other"]))
    to_string = _model(dict(classes_strings=["u", "v", "w"]), "int64", "string", 1)
    _check(to_string, rng.integers(-2, 5, size=(100, 1)))  # "_Unused" outside the classes


@pytest.mark.parametrize("ml", [2, 4])
def test_int64_to_string(rng, ml):
    model = _model(dict(keys_int64s=[1, 2, 3], values_strings=["p", "q", "p"],
                        default_string="none"), "int64", "string", ml)
    _check(model, rng.integers(0, 5, size=(150, 1)))


@pytest.mark.parametrize("ml", [2, 4])
def test_string_to_float_and_default(rng, ml):
    model = _model(dict(keys_strings=["a", "b"], values_floats=[1.5, -2.25]), "string", "float", ml)
    expected = _check(model, _strings(rng, 100, ["a", "b", "c"]))
    assert np.signbit(expected[expected == 0]).all()  # the default is -0.0
    with_default = _model(dict(keys_strings=["a", "b"], values_floats=[1.5, -2.25],
                               default_float=0.125), "string", "float", ml)
    _check(with_default, _strings(rng, 100, ["a", "b", "c"]))


@pytest.mark.parametrize("ml", [2, 4])
def test_float_keys_nan_and_signed_zero(rng, ml):
    """A NaN key matches NaN from opset 4 on, never before; -0.0 finds key 0.0."""
    model = _model(dict(keys_floats=[0.0, float("nan"), 2.5, -1.0], values_int64s=[1, 2, 3, 4]),
                   "float", "int64", ml)
    X = rng.choice(np.array([0.0, -0.0, np.nan, 2.5, -1.0, 3.0], np.float32), size=(200, 1))
    expected = _check(model, X)
    assert (2 in expected) == (ml >= 4)


def test_opset_4_tensors_doubles_and_default_tensor(rng):
    from onnx import TensorProto as T
    from onnx import helper

    attrs = dict(keys_tensor=helper.make_tensor("k", T.DOUBLE, [3], [0.1, 0.2, np.nan]),
                 values_tensor=helper.make_tensor("v", T.INT64, [3], [10, 20, 30]),
                 default_tensor=helper.make_tensor("d", T.INT64, [1], [-9]), default_int64=4)
    model = _model(attrs, "double", "int64", 4)
    X = rng.choice(np.array([0.1, 0.2, np.nan, 0.30000001, float(np.float32(0.1))]), size=(100, 1))
    _check(model, X)


def test_label_encoder_on_several_columns(rng):
    model = _model(dict(keys_strings=["a", "b"], values_strings=["x", "y"]), "string", "string",
                   2, width=2)
    X = rng.choice(["a", "b", "c"], size=(50, 2)).astype(object)
    (expected,) = session(model).run(None, {"x": X})
    with pytest.raises(MissingConverter, match="one column"):
        woodstar.convert(model, "torch")  # an output of two string columns
    assert expected.shape == (50, 2)


def test_chained_encoders(rng):
    """string -> int64 -> string -> one-hot: a computed string table feeds the next."""
    from onnx import TensorProto as T
    from onnx import helper

    nodes = [helper.make_node("LabelEncoder", ["x"], ["k"], domain=ML, keys_strings=["a", "b", "c"],
                              values_int64s=[1, 2, 1]),
             helper.make_node("LabelEncoder", ["k"], ["s"], domain=ML, keys_int64s=[1, 2],
                              values_strings=["one", "two"]),
             helper.make_node("OneHotEncoder", ["s"], ["h"], domain=ML,
                              cats_strings=["two", "_Unused", "one", "zero"]),
             helper.make_node("Reshape", ["h", "shape"], ["y"])]
    graph = helper.make_graph(nodes, "chain", [helper.make_tensor_value_info("x", T.STRING, [None, 1])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)],
                              [helper.make_tensor("shape", T.INT64, [2], [-1, 4])])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ML, 2)])
    _check(model, _strings(rng, 100, ["a", "b", "c", "d"]))


# ------------------------------------------------------------------ OneHotEncoder
def _one_hot_model(cats, element, width, zeros=1):
    from onnx import TensorProto as T
    from onnx import helper

    key = "cats_strings" if element == "string" else "cats_int64s"
    nodes = [helper.make_node("OneHotEncoder", ["x"], ["h"], domain=ML, zeros=zeros, **{key: cats}),
             helper.make_node("Reshape", ["h", "shape"], ["y"])]
    types = {"string": T.STRING, "int64": T.INT64}
    graph = helper.make_graph(nodes, "one_hot",
                              [helper.make_tensor_value_info("x", types[element], [None, width])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)],
                              [helper.make_tensor("shape", T.INT64, [2], [-1, width * len(cats)])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid(ML, 1)])


def test_one_hot_int64_input_two_columns(rng):
    """(n, 2) -> (n, 2, 4) -> (n, 8); a repeated category sets its last position."""
    model = _one_hot_model([3, -1, 7, 3], "int64", 2)
    _check(model, rng.integers(-2, 9, size=(300, 2)))


def test_one_hot_string_input(rng):
    model = _one_hot_model(["a", "b", "c"], "string", 1)
    _check(model, _strings(rng, 100, ["a", "b", "c", "d"]))


def test_one_hot_zeros_0_int64(rng):
    model = _one_hot_model([1, 2, 3], "int64", 1, zeros=0)
    _check(model, rng.integers(1, 4, size=(50, 1)))
    container = woodstar.convert(model, "torch")
    with pytest.raises(Exception, match="Unknown Category"):
        session(model).run(None, {"x": np.array([[1], [5]])})
    with pytest.raises(ValueError, match=r"unknown categories \[5.0\]"):
        container.predict(np.array([[1], [5]]))


def test_moves_of_three_dimensional_tensors(rng):
    """Gather (negative indices), Concat along the last axis of (n, 2, k) tensors (which
    interleaves their rows), ArrayFeatureExtractor, Reshape with 0 and -1."""
    from onnx import TensorProto as T
    from onnx import helper

    nodes = [helper.make_node("OneHotEncoder", ["x"], ["h"], domain=ML, cats_strings=["a", "b", "c"]),
             helper.make_node("Gather", ["h", "back"], ["g"], axis=2),
             helper.make_node("Concat", ["h", "g"], ["both"], axis=-1),
             helper.make_node("ArrayFeatureExtractor", ["both", "pick"], ["picked"], domain=ML),
             helper.make_node("Concat", ["both", "picked"], ["all"], axis=2),
             helper.make_node("Reshape", ["all", "shape"], ["y"])]
    inits = [helper.make_tensor("back", T.INT64, [2], [-1, 0]),
             helper.make_tensor("pick", T.INT64, [2], [4, 1]),
             helper.make_tensor("shape", T.INT64, [2], [0, -1])]
    graph = helper.make_graph(nodes, "moves", [helper.make_tensor_value_info("x", T.STRING, [None, 2])],
                              [helper.make_tensor_value_info("y", T.FLOAT, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                    helper.make_opsetid(ML, 2)])
    X = rng.choice(["a", "b", "c", "d"], size=(60, 2)).astype(object)
    assert _check(model, X).shape == (60, 14)


def test_label_encoder_values_beyond_2_53_are_refused():
    model = _model(dict(keys_strings=["a"], values_int64s=[(1 << 53) + 1]), "string", "int64", 2)
    with pytest.raises(MissingConverter, match=r"values beyond 2\*\*53"):
        woodstar.convert(model, "torch")
