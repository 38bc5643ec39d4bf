"""ONNX graphs with several inputs, int64 and string inputs: skl2onnx's graphs for
ColumnTransformer pipelines over mixed data, against ONNX Runtime on fresh rows with
unknown categories and NaN, given as a dict of the inputs and as a DataFrame."""

import warnings

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import session
from .test_tree_ensembles import _plain_proba

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")
pytest.importorskip("skl2onnx")
pd = pytest.importorskip("pandas")

COVERS_OPS = ("onnx_truncate_int64",)

ROUTES = [("torch", None), ("torch", {"cpu_route": "program"})]
CATEGORIES = {"c": ["x", "y", "z"], "d": ["p", "q"]}


def _frame(rng, n, unknown=0.0, nan=0.0):
    """Numeric a, b (NaN where asked), strings c, d (unseen ones where asked), int e."""
    frame = pd.DataFrame({"a": rng.normal(size=n), "b": rng.normal(size=n) * 3})
    for name, values in CATEGORIES.items():
        column = rng.choice(values, n).astype(object)
        column[rng.random(n) < unknown] = "unseen"
        frame[name] = column
    frame["e"] = rng.integers(0, 4, n) + (rng.random(n) < unknown) * 7
    frame.loc[rng.random(n) < nan, "a"] = np.nan
    return frame


def _feeds(frame, groups):
    """ONNX Runtime's feeds: {input: 2-D array of its DataFrame columns}, typed."""
    feeds = {}
    for name, columns, element in groups:
        values = frame[columns].to_numpy()
        feeds[name] = values.astype({"float": np.float32, "string": object, "int64": np.int64}[element])
    return feeds


def _types(groups):
    from skl2onnx.common.data_types import FloatTensorType, Int64TensorType, StringTensorType

    kinds = {"float": FloatTensorType, "string": StringTensorType, "int64": Int64TensorType}
    return [(name, kinds[element]([None, len(columns)])) for name, columns, element in groups]


def _pipeline(estimator, groups, rng):
    from sklearn.compose import ColumnTransformer
    from sklearn.impute import SimpleImputer
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import OneHotEncoder, OrdinalEncoder, StandardScaler
    from skl2onnx import convert_sklearn

    train = _frame(rng, 300, nan=0.1)
    y = (train["a"].fillna(0) + (train["c"] == "x") > 0.3).astype(int)
    if type(estimator).__name__.endswith("Regressor"):
        y = train["b"] + (train["d"] == "p")
    numeric = Pipeline([("impute", SimpleImputer()), ("scale", StandardScaler())])
    columns = ColumnTransformer([("num", numeric, ["a", "b"]),
                                 ("cat", OneHotEncoder(handle_unknown="ignore"), ["c", "d"]),
                                 ("ord", OrdinalEncoder(), ["e"])])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        model = Pipeline([("columns", columns), ("model", estimator)]).fit(train, y)
        return convert_sklearn(model, initial_types=_types(groups),
                               target_opset={"": 17, "ai.onnx.ml": 3})


def _check(graph, frame, groups, containers):
    feeds = _feeds(frame, groups)
    expected = session(graph).run(None, feeds)
    for container in containers:
        for X in (feeds, frame[[c for _, columns, _ in groups for c in columns]]):
            got = container.predict(X)
            np.testing.assert_array_equal(got, expected[0].reshape(got.shape))
            assert got.shape[0] == len(frame)
            if len(expected) == 2:
                np.testing.assert_array_equal(container.predict_proba(X), _plain_proba(expected[1]))


PER_COLUMN = [("a", ["a"], "float"), ("b", ["b"], "float"), ("c", ["c"], "string"),
              ("d", ["d"], "string"), ("e", ["e"], "int64")]


def _estimators():
    from sklearn.ensemble import GradientBoostingRegressor, RandomForestClassifier
    from sklearn.linear_model import LogisticRegression

    return {"logistic": LogisticRegression(),
            "forest": RandomForestClassifier(n_estimators=8, max_depth=5, random_state=0),
            "boosting": GradientBoostingRegressor(n_estimators=10, max_depth=3, random_state=0)}


@pytest.mark.parametrize("name", ["logistic", "forest", "boosting"])
def test_column_transformer_one_input_per_column(rng, name):
    graph = _pipeline(_estimators()[name], PER_COLUMN, rng)
    containers = [woodstar.convert(graph, b, extra_config=e) for b, e in ROUTES]
    _check(graph, _frame(rng, 400, unknown=0.15, nan=0.15), PER_COLUMN, containers)


def test_column_transformer_torch_jit(rng):
    graph = _pipeline(_estimators()["forest"], PER_COLUMN, rng)
    _check(graph, _frame(rng, 200, unknown=0.15, nan=0.15), PER_COLUMN,
           [woodstar.convert(graph, "torch.jit")])


GROUPED = [("num", ["a", "b"], "float"), ("cat", ["c", "d"], "string"), ("e", ["e"], "int64")]


def _grouped_graph(rng):
    """Inputs of width 2 (float, string) and 1 (int64): Scaler, Gather + OneHotEncoder
    per string column, Cast, Concat, LinearClassifier, as skl2onnx writes them."""
    from onnx import TensorProto as T
    from onnx import helper, numpy_helper

    ml = "ai.onnx.ml"
    nodes = [helper.make_node("Scaler", ["num"], ["scaled"], domain=ml, offset=[0.1, -0.2],
                              scale=[1.5, 0.7]),
             helper.make_node("Gather", ["cat", "i0"], ["c0"], axis=1),
             helper.make_node("Gather", ["cat", "i1"], ["c1"], axis=1),
             helper.make_node("OneHotEncoder", ["c0"], ["h0"], domain=ml, cats_strings=CATEGORIES["c"]),
             helper.make_node("OneHotEncoder", ["c1"], ["h1"], domain=ml, cats_strings=CATEGORIES["d"]),
             helper.make_node("Concat", ["h0", "h1"], ["hot3"], axis=-1),
             helper.make_node("Reshape", ["hot3", "shape"], ["hot"]),
             helper.make_node("Cast", ["e"], ["ef"], to=T.FLOAT),
             helper.make_node("Concat", ["scaled", "hot", "ef"], ["features"], axis=1),
             helper.make_node("LinearClassifier", ["features"], ["label", "probabilities"], domain=ml,
                              classlabels_ints=[0, 1, 2], post_transform="SOFTMAX",
                              coefficients=rng.normal(size=3 * 8).astype(np.float32).tolist(),
                              intercepts=rng.normal(size=3).astype(np.float32).tolist())]
    inits = [numpy_helper.from_array(np.array([0], np.int64), "i0"),
             numpy_helper.from_array(np.array([1], np.int64), "i1"),
             numpy_helper.from_array(np.array([-1, 5], np.int64), "shape")]
    vi = helper.make_tensor_value_info
    return _graph(nodes, [vi("num", T.FLOAT, [None, 2]), vi("cat", T.STRING, [None, 2]),
                          vi("e", T.INT64, [None, 1])],
                  [vi("label", T.INT64, [None]), vi("probabilities", T.FLOAT, [None, 3])], inits)


def test_grouped_inputs_and_their_dataframe_columns(rng):
    """An input of width k reads the DataFrame columns name_0 .. name_{k-1}."""
    graph = _grouped_graph(rng)
    frame = _frame(rng, 300, unknown=0.2, nan=0.1)
    containers = [woodstar.convert(graph, b, extra_config=e) for b, e in ROUTES]
    feeds = _feeds(frame, GROUPED)
    expected = session(graph).run(None, feeds)
    renamed = frame.rename(columns={"a": "num_0", "b": "num_1", "c": "cat_0", "d": "cat_1"})
    for container in containers:
        assert list(container.feature_names_in_) == ["num_0", "num_1", "cat_0", "cat_1", "e"]
        for X in (feeds, renamed, renamed[["e", "cat_1", "num_0", "cat_0", "num_1"]]):
            np.testing.assert_array_equal(container.predict(X), expected[0])
            np.testing.assert_array_equal(container.predict_proba(X), expected[1])


def test_single_string_input_one_hot(rng):
    """skl2onnx's OneHotEncoder alone on one (n, 2) string input: Gather per column,
    OneHotEncoder, Concat, Reshape; the container takes the object array itself."""
    from sklearn.preprocessing import OneHotEncoder
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import StringTensorType

    train = _frame(rng, 100)[["c", "d"]].to_numpy()
    encoder = OneHotEncoder(handle_unknown="ignore").fit(train)
    graph = convert_sklearn(encoder, initial_types=[("cat", StringTensorType([None, 2]))],
                            target_opset={"": 17, "ai.onnx.ml": 3})
    X = _frame(rng, 200, unknown=0.3)[["c", "d"]].to_numpy()
    (expected,) = session(graph).run(None, {"cat": X})
    for backend, extra in ROUTES:
        container = woodstar.convert(graph, backend, extra_config=extra)
        np.testing.assert_array_equal(container.predict(X), expected)
        np.testing.assert_array_equal(container.predict({"cat": X}), expected)
        assert container.predict(X).dtype == np.float32


def test_one_hot_on_float_columns(rng):
    """skl2onnx reads numeric categories of a float input through Gather, Cast to int64
    (toward zero) and OneHotEncoder; fractions, NaN and huge values included."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder
    from skl2onnx import to_onnx

    X = rng.integers(-2, 3, size=(200, 2)).astype(np.float32)
    model = make_pipeline(OneHotEncoder(handle_unknown="ignore"), LogisticRegression())
    graph = to_onnx(model.fit(X, X[:, 0] + X[:, 1] > 0), X[:1],
                    target_opset={"": 17, "ai.onnx.ml": 3}, options={"zipmap": False})
    special = np.array([np.nan, np.inf, -np.inf, 1e30, -1e30, 2.7, -2.7, -0.5, 0.5, -1.0],
                       np.float32)
    rows = rng.choice(np.concatenate([special, np.arange(-3, 4, dtype=np.float32)]),
                      size=(300, 2))
    expected = session(graph).run(None, {graph.graph.input[0].name: rows})
    for backend, extra in ROUTES + [("torch.jit", None)]:
        container = woodstar.convert(graph, backend, extra_config=extra)
        np.testing.assert_array_equal(container.predict(rows), expected[0])
        np.testing.assert_array_equal(container.predict_proba(rows), expected[1])


def test_ordinal_encoder_string_input(rng):
    """skl2onnx's OrdinalEncoder: ArrayFeatureExtractor per column, LabelEncoder
    (string -> int64), Reshape, Concat, Cast to float."""
    from sklearn.preprocessing import OrdinalEncoder
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import StringTensorType

    train = _frame(rng, 100)[["c", "d"]].to_numpy()
    encoder = OrdinalEncoder().fit(train)
    graph = convert_sklearn(encoder, initial_types=[("cat", StringTensorType([None, 2]))],
                            target_opset={"": 17, "ai.onnx.ml": 3})
    X = _frame(rng, 200, unknown=0.3)[["c", "d"]].to_numpy()
    (expected,) = session(graph).run(None, {"cat": X})
    container = woodstar.convert(graph, "torch")
    np.testing.assert_array_equal(container.predict(X), expected)


def test_unknown_category_with_zeros_0_fails_as_onnx_runtime_does(rng):
    """handle_unknown="error" becomes OneHotEncoder(zeros=0): ONNX Runtime fails the
    call on an unknown category; the container refuses the input, naming the column."""
    from sklearn.preprocessing import OneHotEncoder
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import StringTensorType

    train = _frame(rng, 100)[["c"]].to_numpy()
    graph = convert_sklearn(OneHotEncoder(drop="first").fit(train),
                            initial_types=[("c", StringTensorType([None, 1]))],
                            target_opset={"": 17, "ai.onnx.ml": 3})
    container = woodstar.convert(graph, "torch")
    known = _frame(rng, 50)[["c"]].to_numpy()
    np.testing.assert_array_equal(container.predict(known), session(graph).run(None, {"c": known})[0])
    unknown = np.array([["x"], ["unseen"]], dtype=object)
    with pytest.raises(Exception, match="Unknown Category"):
        session(graph).run(None, {"c": unknown})
    with pytest.raises(ValueError, match=r"zeros=0.*unknown categories \['unseen'\].*'c'"):
        container.predict(unknown)


# ------------------------------------------------------------------ the input edge
@pytest.fixture(scope="module")
def mixed():
    graph = _grouped_graph(np.random.default_rng(5))
    return graph, woodstar.convert(graph, "torch")


def test_input_errors_name_the_input(mixed):
    _, container = mixed
    frame = _frame(np.random.default_rng(1), 5)
    feeds = _feeds(frame, GROUPED)
    with pytest.raises(ValueError, match=r"missing \['cat'\]"):
        container.predict({k: v for k, v in feeds.items() if k != "cat"})
    with pytest.raises(ValueError, match=r"unexpected \['extra'\]"):
        container.predict({**feeds, "extra": feeds["e"]})
    with pytest.raises(ValueError, match=r"input 'num' takes \(n, 2\) values; got shape \(5, 3\)"):
        container.predict({**feeds, "num": np.zeros((5, 3), np.float32)})
    with pytest.raises(ValueError, match=r"input 'e' has 4 rows"):
        container.predict({**feeds, "e": feeds["e"][:4]})
    with pytest.raises(ValueError, match=r"input 'e' is an int64 tensor; it holds values that "
                                         r"are not integers"):
        container.predict({**feeds, "e": feeds["e"] + 0.5})
    with pytest.raises(ValueError, match=r"input 'e' holds integers beyond 2\*\*53"):
        container.predict({**feeds, "e": feeds["e"] + (1 << 60)})
    with pytest.raises(ValueError, match=r"input 'cat' is a string tensor; got an array of dtype"):
        container.predict({**feeds, "cat": np.zeros((5, 2))})
    with pytest.raises(ValueError, match=r"missing \['cat_1'\]"):
        container.predict(frame.rename(columns={"a": "num_0", "b": "num_1", "c": "cat_0"}))


def test_strings_read_as_onnx_runtime_reads_objects(mixed):
    """In an object array, None, NaN and numbers are their str() to ONNX Runtime."""
    graph, container = mixed
    frame = _frame(np.random.default_rng(2), 6)
    feeds = _feeds(frame, GROUPED)
    feeds["cat"][:, 0] = [None, np.nan, 1.5, "x", "nan", "None"]
    expected = session(graph).run(None, feeds)
    np.testing.assert_array_equal(container.predict(feeds), expected[0])
    np.testing.assert_array_equal(container.predict_proba(feeds), expected[1])


def test_a_plain_array_of_every_column(mixed):
    graph, container = mixed
    frame = _frame(np.random.default_rng(3), 20, unknown=0.2)
    feeds = _feeds(frame, GROUPED)
    expected = session(graph).run(None, feeds)
    array = frame[["a", "b", "c", "d", "e"]].to_numpy(dtype=object)
    np.testing.assert_array_equal(container.predict(array), expected[0])


def test_saved_and_loaded(mixed, tmp_path):
    graph, container = mixed
    frame = _frame(np.random.default_rng(4), 50, unknown=0.2, nan=0.2)
    feeds = _feeds(frame, GROUPED)
    loaded = woodstar.load(container.save(tmp_path / "mixed.zip"))
    np.testing.assert_array_equal(loaded.predict_proba(feeds), container.predict_proba(feeds))
    assert loaded.ir.head.input_blocks == container.ir.head.input_blocks


def test_single_float_input_also_takes_a_dict(rng):
    from sklearn.linear_model import LinearRegression
    from skl2onnx import to_onnx

    X = rng.normal(size=(50, 3)).astype(np.float32)
    graph = to_onnx(LinearRegression().fit(X, X[:, 0]), X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    container = woodstar.convert(graph, "torch")
    name = graph.graph.input[0].name
    (expected,) = session(graph).run(None, {name: X})
    np.testing.assert_array_equal(container.predict({name: X}), expected)
    np.testing.assert_array_equal(container.predict(X), expected)


# ------------------------------------------------------------------ refusals
def _graph(nodes, inputs, outputs, inits=(), ml=3):
    from onnx import helper

    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", ml)])


def test_refusals_name_what_is_refused():
    from onnx import TensorProto as T
    from onnx import helper

    vi = helper.make_tensor_value_info
    cast = _graph([helper.make_node("Cast", ["x"], ["y"], to=T.INT64)],
                  [vi("x", T.FLOAT, [None, 1])], [vi("y", T.INT64, None)])
    with pytest.raises(MissingConverter, match="unbounded"):
        woodstar.convert(cast, "torch")  # an int64 output of any value
    to_string = _graph([helper.make_node("Cast", ["x"], ["y"], to=T.STRING)],
                       [vi("x", T.INT64, [None, 1])], [vi("y", T.STRING, None)])
    with pytest.raises(MissingConverter, match="Cast of int64 to element type"):
        woodstar.convert(to_string, "torch")
    float_zeros_0 = _graph([helper.make_node("OneHotEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                                             cats_int64s=[1, 2], zeros=0)],
                           [vi("x", T.FLOAT, [None, 1])], [vi("y", T.FLOAT, None)])
    with pytest.raises(MissingConverter, match="zeros=0"):
        woodstar.convert(float_zeros_0, "torch")  # truncated floats: computed values
    passthrough = _graph([helper.make_node("Identity", ["x"], ["y"])],
                         [vi("x", T.STRING, [None, 1])], [vi("y", T.STRING, None)])
    with pytest.raises(MissingConverter, match="strings a LabelEncoder writes"):
        woodstar.convert(passthrough, "torch")
    computed = _graph([helper.make_node("LabelEncoder", ["x"], ["k"], domain="ai.onnx.ml",
                                        keys_strings=["a", "b"], values_int64s=[1, 2]),
                       helper.make_node("OneHotEncoder", ["k"], ["y"], domain="ai.onnx.ml",
                                        cats_int64s=[1, 2], zeros=0)],
                      [vi("x", T.STRING, [None, 1])], [vi("y", T.FLOAT, None)])
    with pytest.raises(MissingConverter, match="zeros=0"):
        woodstar.convert(computed, "torch")
    three_d = _graph([helper.make_node("OneHotEncoder", ["x"], ["y"], domain="ai.onnx.ml",
                                       cats_strings=["a"])],
                     [vi("x", T.STRING, [None, 2])], [vi("y", T.FLOAT, None)])
    with pytest.raises(MissingConverter, match="float tensor of shape"):
        woodstar.convert(three_d, "torch")
    bool_input = _graph([helper.make_node("Identity", ["x"], ["y"])],
                        [vi("x", T.BOOL, [None, 1])], [vi("y", T.BOOL, None)])
    with pytest.raises(MissingConverter, match="element type"):
        woodstar.convert(bool_input, "torch")
