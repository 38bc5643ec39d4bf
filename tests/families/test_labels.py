"""LabelEncoder and LabelBinarizer against scikit-learn's own transform: 1-D labels
(numbers and strings), unseen labels, scikit-learn's binary/multiclass output shape,
every backend, saved and loaded; refusals."""

import warnings

import numpy as np
import pytest

pytest.importorskip("sklearn")

from sklearn.pipeline import make_pipeline  # noqa: E402
from sklearn.preprocessing import LabelBinarizer, LabelEncoder, StandardScaler  # noqa: E402

import woodstar  # noqa: E402
from woodstar.exceptions import MissingConverter  # noqa: E402

COVERS_MODELS = ("LabelEncoder", "LabelBinarizer")

WORDS = np.array(["apple", "kiwi", "pear", "fig", "plum"])
MODELS = {
    "encoder_int": lambda: (LabelEncoder(), "int"),
    "encoder_float": lambda: (LabelEncoder(), "float"),
    "encoder_str": lambda: (LabelEncoder(), "str"),
    "binarizer_multiclass_int": lambda: (LabelBinarizer(), "int"),
    "binarizer_multiclass_str": lambda: (LabelBinarizer(neg_label=-1, pos_label=3), "str"),
    "binarizer_binary_int": lambda: (LabelBinarizer(), "int2"),
    "binarizer_binary_str": lambda: (LabelBinarizer(neg_label=-2, pos_label=5), "str2"),
    "binarizer_one_class": lambda: (LabelBinarizer(), "int1"),
    "binarizer_pos_zero": lambda: (LabelBinarizer(neg_label=-3, pos_label=0), "int"),
    "binarizer_sparse": lambda: (LabelBinarizer(sparse_output=True), "int"),
}


def _labels(kind, rng, n):
    if kind == "int":
        return rng.integers(-2, 4, size=n) * 3
    if kind == "int2":
        return rng.choice([4, 9], size=n)
    if kind == "int1":
        return np.full(n, 7)
    if kind == "float":
        return rng.choice([-1.5, 0.25, 2.0, 1e6], size=n)
    if kind == "str":
        return rng.choice(WORDS, size=n)
    return rng.choice(WORDS[:2], size=n)


def _unseen(kind):
    if kind.startswith("str"):
        return ["banana", "apple"] if kind == "str" else ["banana", "apple", "kiwi"]
    if kind == "float":
        return [0.25, 3.5]
    return [7 if kind == "int1" else 4, 1000, -1000]


@pytest.fixture(scope="module")
def fitted():
    rng = np.random.default_rng(0)
    models = {}
    for name, make in MODELS.items():
        model, kind = make()
        models[name] = (model.fit(_labels(kind, rng, 100)), kind)
    return models


def _dense(values):
    return values.toarray() if hasattr(values, "toarray") else np.asarray(values)


def _check(converted, model, y):
    expected = _dense(model.transform(y))
    got = converted.transform(y)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("name", list(MODELS))
def test_matches_sklearn_on_every_backend(fitted, name, backend, rng):
    model, kind = fitted[name]
    converted = woodstar.convert(model, backend)
    y = _labels(kind, rng, 60)
    _check(converted, model, y)
    _check(converted, model, list(y))  # a list, as scikit-learn takes it
    _check(converted, model, y[:1])


@pytest.mark.parametrize("name", list(MODELS))
def test_program_route(fitted, name, rng):
    model, kind = fitted[name]
    converted = woodstar.convert(model, "torch", extra_config={"cpu_route": "program"})
    _check(converted, model, _labels(kind, rng, 40))


@pytest.mark.parametrize("name", [n for n in MODELS if n.startswith("binarizer")])
def test_binarizer_unseen_labels_are_negative_rows(fitted, name):
    model, kind = fitted[name]
    converted = woodstar.convert(model, "torch")
    y = _unseen(kind)
    _check(converted, model, y)  # three distinct labels: a "multiclass" target
    _check(converted, model, y[:2])  # two: a "binary" one (one column for <= 2 classes)


@pytest.mark.parametrize("name", [n for n in MODELS if n.startswith("encoder")])
def test_encoder_refuses_unseen_labels_as_sklearn_does(fitted, name):
    model, kind = fitted[name]
    converted = woodstar.convert(model, "torch")
    y = _unseen(kind)
    with pytest.raises(ValueError) as expected:
        model.transform(y)
    with pytest.raises(ValueError, match="y contains previously unseen labels") as got:
        converted.transform(y)
    assert str(got.value) == str(expected.value)


def test_encoder_casts_labels_as_sklearn_does(fitted):
    model, _ = fitted["encoder_int"]
    converted = woodstar.convert(model, "torch")
    y = np.array([3.7, -6.0, 0.2])  # cast to the classes' integers first
    _check(converted, model, y)
    for bad in ([np.nan], np.array([[0, 3]])):
        with pytest.raises(ValueError):
            model.transform(bad)
        with pytest.raises(ValueError):
            converted.transform(bad)
    strings = LabelEncoder().fit(["a", "b", "c"])  # classes '<U1': "ab" is cut to "a"
    _check(woodstar.convert(strings, "torch"), strings, ["ab", "c"])


def test_nan_and_continuous_labels_are_refused_as_sklearn_does(fitted):
    floats, _ = fitted["encoder_float"]
    for model, y in ((floats, [np.nan]), (floats, [np.inf]),
                     (fitted["binarizer_multiclass_int"][0], [0.5, 3.0]),
                     (fitted["binarizer_multiclass_int"][0], [np.nan, 3.0])):
        converted = woodstar.convert(model, "torch")
        with pytest.raises(ValueError) as expected:
            model.transform(y)
        with pytest.raises(ValueError) as got:
            converted.transform(y)
        assert str(got.value) == str(expected.value)


def test_no_labels(fitted):
    encoder = fitted["encoder_str"][0]
    got = woodstar.convert(encoder, "torch").transform([])
    expected = encoder.transform([])
    assert got.dtype == expected.dtype and got.shape == expected.shape
    binarizer = fitted["binarizer_multiclass_int"][0]
    with pytest.raises(ValueError):
        binarizer.transform(np.array([], dtype=np.int64))
    with pytest.raises(ValueError, match="0 sample"):
        woodstar.convert(binarizer, "torch").transform(np.array([], dtype=np.int64))


def test_inputs_of_other_types(fitted):
    pd = pytest.importorskip("pandas")
    torch = pytest.importorskip("torch")
    model, _ = fitted["encoder_str"]
    converted = woodstar.convert(model, "torch")
    series = pd.Series(["kiwi", "fig", "apple"])
    _check(converted, model, series)
    column = np.array([["kiwi"], ["fig"]], dtype=object)  # (n, 1): column_or_1d takes it
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(converted, model, column)
    numbers, _ = fitted["binarizer_multiclass_int"]
    _check(woodstar.convert(numbers, "torch"), numbers, np.array([0, 3, 6], dtype=np.int32))
    _check(woodstar.convert(numbers, "torch"), numbers, torch.tensor([0, 3, 6]).numpy())
    np.testing.assert_array_equal(woodstar.convert(numbers, "torch").transform(
        torch.tensor([0, 3, 6])), numbers.transform(np.array([0, 3, 6])))


def test_save_and_load(fitted, tmp_path, rng):
    for name in ("encoder_str", "binarizer_binary_str"):
        model, kind = fitted[name]
        path = woodstar.convert(model, "torch").save(tmp_path / f"{name}.zip")
        loaded = woodstar.load(path)
        y = _labels(kind, rng, 30)
        _check(loaded, model, y)
        _check(loaded, model, _unseen(kind)[:2] if name.startswith("binarizer") else y[:3])


def test_refusals(fitted, rng):
    multilabel = LabelBinarizer().fit(np.array([[0, 1], [1, 1], [1, 0]]))
    with pytest.raises(MissingConverter, match="multilabel targets is not supported"):
        woodstar.convert(multilabel, "torch")
    X = rng.normal(size=(20, 2))
    pipeline = make_pipeline(StandardScaler(), fitted["encoder_int"][0])
    pipeline.steps[0][1].fit(X)
    with pytest.raises(MissingConverter, match="a label transformer as a step of a pipeline"):
        woodstar.convert(pipeline, "torch")
