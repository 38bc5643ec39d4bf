"""ONNX-ML tree ensembles against ONNX Runtime running the same graph: hand-made
graphs (every node mode, post-transform, base-value layout, label kind) and the
graphs skl2onnx and onnxmltools write for scikit-learn, LightGBM and XGBoost models.

Sums, labels and probabilities are ONNX Runtime's to the bit (single-threaded
session: the order the kernel adds trees in on one thread; LOGISTIC, SOFTMAX and
SOFTMAX_ZERO through glibc's ``expf``, mirrored operation by operation). PROBIT is
mirrored through glibc's logf (see test_probit_over_many_scores_is_onnx_runtimes_to_the_bit).
"""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import grid_rows, random_tree_graph, session

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

COVERS_OPS = ("onnx_tree_scores",)
COVERS_MODELS = ("ModelProto",)
# The hand-made graphs run on the eager and traced programs (and the CPU route); the
# converters' graphs below run on every backend, sampled as tests/conftest.py does.
FAST_BACKENDS = pytest.mark.parametrize("backend", ["torch", "torch.jit"])


def _routes(backend):
    """The torch backend's CPU route (a tree runtime) and its program; other backends
    their program."""
    if backend == "torch":
        return [None, {"cpu_route": "program"}]
    return [None]


def _plain_proba(probabilities):
    if isinstance(probabilities, list):  # ZipMap: a list of {label: probability}
        keys = sorted(probabilities[0])
        return np.array([[row[k] for k in keys] for row in probabilities], dtype=np.float32)
    return probabilities


def check(model, X, backend, n_threads=1):
    outputs = session(model, n_threads).run(None, {model.graph.input[0].name: X})
    for extra in _routes(backend):
        container = woodstar.convert(model, backend, extra_config=extra)
        what = f"{backend} {extra or 'default route'}"
        if len(outputs) == 2:
            labels, proba = outputs[0], _plain_proba(outputs[1])
            np.testing.assert_array_equal(container.predict(X), labels, err_msg=what)
            got = container.predict_proba(X)
        else:
            proba, got = outputs[0], container.predict(X)
        assert got.shape == proba.shape, what
        np.testing.assert_array_equal(got, proba, err_msg=what)


# --------------------------------------------------------------- hand-made graphs
@FAST_BACKENDS
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE"])
def test_regressor_every_mode(backend, rng, aggregate):
    post = "NONE"
    model = random_tree_graph(rng, classifier=False, n_targets=1, post_transform=post,
                              base_values=[0.25], aggregate=aggregate)
    check(model, grid_rows(rng, 300, 4), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("post", ["NONE", "SOFTMAX_ZERO"])
def test_multi_target_regressor(backend, rng, post):
    model = random_tree_graph(rng, classifier=False, n_targets=3, post_transform=post,
                              base_values=[0.5, -0.25, 0.0],
                              targets_per_tree=lambda t: [t % 3])
    check(model, grid_rows(rng, 300, 4), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("post", ["NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO"])
def test_multiclass_every_post_transform(backend, rng, post):
    model = random_tree_graph(rng, classifier=True, n_targets=3, post_transform=post,
                              base_values=[0.1, -0.2, 0.3], labels=["ant", "bee", "cat"])
    check(model, grid_rows(rng, 300, 4), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("layout", ["one_class_positive", "one_class_mixed_logistic",
                                    "one_class_mixed_none", "both_classes_base2",
                                    "both_classes_no_base"])
def test_binary_layouts(backend, rng, layout):
    """The kernel's two-class rules: one weighted class (``binary_case``), all weights
    positive or not, two base values (which it combines with class 0's score)."""
    kwargs = dict(classifier=True, n_targets=2, labels=[3, 7])
    if layout == "one_class_positive":
        kwargs.update(targets_per_tree=lambda t: [1], negative_weights=False, base_values=[0.1])
        kwargs["n_trees"] = 3
    elif layout == "one_class_mixed_logistic":
        kwargs.update(targets_per_tree=lambda t: [0], post_transform="LOGISTIC", base_values=[0.2])
    elif layout == "one_class_mixed_none":
        kwargs.update(targets_per_tree=lambda t: [0])
    elif layout == "both_classes_base2":
        kwargs.update(base_values=[0.3, 0.3], post_transform="LOGISTIC", labels=[0, 1])
    else:
        kwargs.update(labels=["no", "yes"])
    model = random_tree_graph(rng, **kwargs)
    check(model, grid_rows(rng, 300, 4), backend)


@FAST_BACKENDS
def test_double_input_sums_in_float64(backend, rng):
    model = random_tree_graph(rng, classifier=False, n_targets=1, n_trees=40,
                              base_values=[1e3], input_type="double")
    check(model, grid_rows(rng, 300, 4, dtype=np.float64), backend)


def test_float64_rows_on_a_float_graph_are_read_as_float32(rng):
    model = random_tree_graph(rng, classifier=False, n_targets=1, n_trees=30)
    X = grid_rows(rng, 200, 4)
    expected = session(model).run(None, {"X": X})[0]
    got = woodstar.convert(model, "torch").predict(X.astype(np.float64))
    np.testing.assert_array_equal(got, expected)


def test_many_trees_add_in_the_kernels_order(rng):
    """Large and small leaves, so that float32 sums in another order would differ."""
    model = random_tree_graph(rng, classifier=False, n_targets=1, n_trees=120, depth=2,
                              modes=("BRANCH_LEQ",))
    for i, attr in enumerate(model.graph.node[0].attribute):
        if attr.name == "target_weights":
            scaled = [w * (1e4 if k % 3 == 0 else 1.0) for k, w in enumerate(attr.floats)]
            del attr.floats[:]
            attr.floats.extend(scaled)
    X = grid_rows(rng, 400, 4)
    expected = session(model).run(None, {"X": X})[0]
    container = woodstar.convert(model, "torch")
    np.testing.assert_array_equal(container.predict(X), expected)
    # a float64 sum rounded once would not be the kernel's answer on every row
    assert container.predict(X).dtype.kind == "f"


def test_multithreaded_session_is_within_a_reordered_float32_sum(rng):
    """With several threads and more than 50 rows the kernel adds per-thread partial
    sums: the order, so the last bits, depend on its thread count. woodstar gives the
    one-thread answer; the bound is the float32 rounding of a reordered sum."""
    model = random_tree_graph(rng, classifier=False, n_targets=1, n_trees=100, depth=2)
    X = grid_rows(rng, 500, 4)
    one = session(model, 1).run(None, {"X": X})[0]
    two = session(model, 2).run(None, {"X": X})[0]
    got = woodstar.convert(model, "torch").predict(X)
    np.testing.assert_array_equal(got, one)
    magnitude = np.float32(100 * 4.0)  # trees x a bound on |leaf| (normal weights)
    assert np.all(np.abs(got - two) <= 100 * np.finfo(np.float32).eps * magnitude)


# ------------------------------------------------------------ converters' graphs
def _sklearn_cases():
    from sklearn.ensemble import (ExtraTreesRegressor, GradientBoostingClassifier,
                                  GradientBoostingRegressor, RandomForestClassifier)
    from sklearn.tree import DecisionTreeRegressor

    return {
        "RandomForestClassifier": (RandomForestClassifier(6, max_depth=4), 3, {}),
        "RandomForestClassifier-binary": (RandomForestClassifier(8, max_depth=4), 2, {}),
        "GradientBoostingClassifier-binary": (GradientBoostingClassifier(n_estimators=8, max_depth=3), 2, {}),
        "GradientBoostingClassifier": (GradientBoostingClassifier(n_estimators=5, max_depth=3), 3,
                                       {"zipmap": False}),
        "DecisionTreeRegressor": (DecisionTreeRegressor(max_depth=6), 0, {}),
        "ExtraTreesRegressor": (ExtraTreesRegressor(6, max_depth=4), 0, {}),
        "GradientBoostingRegressor": (GradientBoostingRegressor(n_estimators=8, max_depth=3), 0, {}),
    }


def _training_data(rng, n_classes, n_rows=300, n_features=5):
    X = rng.normal(size=(n_rows, n_features)).astype(np.float32)
    score = X[:, 0] + 0.5 * X[:, 1] * X[:, 2] + 0.3 * rng.normal(size=n_rows)
    if n_classes == 0:
        return X, score
    edges = np.quantile(score, np.linspace(0, 1, n_classes + 1)[1:-1])
    return X, np.digitize(score, edges)


def _fresh_rows(rng, n_rows=400, n_features=5):
    X = (2.0 * rng.normal(size=(n_rows, n_features))).astype(np.float32)
    X[rng.random(X.shape) < 0.08] = np.nan
    return X


@FAST_BACKENDS
@pytest.mark.parametrize("case", sorted(_sklearn_cases()))
def test_skl2onnx_graphs(backend, rng, case):
    skl2onnx = pytest.importorskip("skl2onnx")
    model, n_classes, options = _sklearn_cases()[case]
    X, y = _training_data(rng, n_classes)
    model.set_params(random_state=int(rng.integers(1 << 30))).fit(X, y)
    graph = skl2onnx.to_onnx(model, X[:1], target_opset={"": 17, "ai.onnx.ml": 3},
                             options={id(model): options} if options else None)
    post = {a.name: a for a in graph.graph.node[0].attribute}["post_transform"].s.decode()
    check(graph, _fresh_rows(rng), backend)


def _onnxmltools_graph(library, model, n_features):
    onnxmltools = pytest.importorskip("onnxmltools")
    from onnxmltools.convert.common.data_types import FloatTensorType

    convert = onnxmltools.convert_lightgbm if library == "lightgbm" else onnxmltools.convert_xgboost
    return convert(model, initial_types=[("X", FloatTensorType([None, n_features]))],
                   target_opset=15)


@FAST_BACKENDS
@pytest.mark.parametrize("library", ["lightgbm", "xgboost"])
@pytest.mark.parametrize("n_classes", [0, 2, 3])
def test_onnxmltools_graphs(backend, rng, library, n_classes):
    lib = pytest.importorskip(library)
    X, y = _training_data(rng, n_classes)
    kwargs = dict(n_estimators=6, max_depth=3, random_state=int(rng.integers(1 << 30)))
    if library == "lightgbm":
        kwargs["verbose"] = -1
        model = (lib.LGBMRegressor if n_classes == 0 else lib.LGBMClassifier)(**kwargs)
    else:
        model = (lib.XGBRegressor if n_classes == 0 else lib.XGBClassifier)(**kwargs)
    X[rng.random(X.shape) < 0.05] = np.nan  # learn missing-value directions
    model.fit(X, y)
    graph = _onnxmltools_graph(library, model, X.shape[1])
    trees = [n for n in graph.graph.node if n.op_type.startswith("TreeEnsemble")][0]
    post = {a.name: a for a in trees.attribute}.get("post_transform")
    check(graph, _fresh_rows(rng), backend)


# ------------------------------------------------------------------- the container
def test_path_to_onnx_file_converts(rng, tmp_path):
    model = random_tree_graph(rng, classifier=True, n_targets=3, labels=["a", "b", "c"])
    path = tmp_path / "trees.onnx"
    path.write_bytes(model.SerializeToString())
    X = grid_rows(rng, 100, 4)
    expected = session(model).run(None, {"X": X})
    for location in (path, str(path)):
        container = woodstar.convert(location, "torch")
        np.testing.assert_array_equal(container.predict(X), expected[0])
        np.testing.assert_array_equal(container.predict_proba(X), expected[1])


def test_save_and_load(rng, tmp_path):
    model = random_tree_graph(rng, classifier=True, n_targets=3, post_transform="SOFTMAX",
                              base_values=[0.1, 0.2, 0.3])
    X = grid_rows(rng, 100, 4)
    container = woodstar.convert(model, "torch")
    container.save(tmp_path / "m.zip")
    loaded = woodstar.load(tmp_path / "m.zip")
    np.testing.assert_array_equal(loaded.predict_proba(X), container.predict_proba(X))
    np.testing.assert_array_equal(loaded.predict(X), container.predict(X))


# --------------------------------------------------------------------- refusals
def _with_node(model, node):
    model.graph.node.append(node)
    return model


def test_unknown_operator_is_refused_by_name_domain_and_node(rng):
    from onnx import helper

    model = random_tree_graph(rng, classifier=False, n_targets=1)
    model = _with_node(model, helper.make_node("Round", ["variable"], ["round"], name="rounds"))
    with pytest.raises(MissingConverter, match=r"Round.*ai\.onnx.*rounds"):
        woodstar.convert(model, "torch")


@pytest.mark.parametrize("n_targets", [1, 3])
def test_plain_operator_on_a_regressors_values(rng, n_targets):
    """Abs of a tree regressor's (n, n_targets) values, against ONNX Runtime."""
    from onnx import helper

    model = random_tree_graph(rng, classifier=False, n_targets=n_targets)
    model = _with_node(model, helper.make_node("Abs", ["variable"], ["abs"], name="absolute"))
    model.graph.output[0].name = "abs"
    check(model, grid_rows(rng, 200, 4), "torch")


@FAST_BACKENDS
@pytest.mark.parametrize("aggregate", ["MIN", "MAX"])
@pytest.mark.parametrize("n_targets,base",
                         [(1, None), (1, [0.25]), (3, None), (3, [0.5, -1.0, 2.0])],
                         ids=["one", "one_base", "three", "three_bases"])
def test_min_max_aggregation(backend, rng, aggregate, n_targets, base):
    """The first tree's weight, then each next one only when strictly smaller (larger),
    plus the base values; ties between equal weights included (a coarse weight grid)."""
    model = random_tree_graph(rng, classifier=False, n_targets=n_targets, aggregate=aggregate,
                              base_values=base, n_trees=9)
    attr = {a.name: a for a in model.graph.node[0].attribute}
    weights = np.round(np.asarray(attr["target_weights"].floats) * 2) / 2  # many ties
    del attr["target_weights"].floats[:]
    attr["target_weights"].floats.extend(weights.tolist())
    check(model, grid_rows(rng, 300, 4), backend)


@pytest.mark.parametrize("aggregate", ["MIN", "MAX"])
def test_min_max_on_a_double_input(rng, aggregate):
    """Compared and added to the base values in double, written as float."""
    model = random_tree_graph(rng, classifier=False, n_targets=2, aggregate=aggregate,
                              base_values=[1e3, -0.1], input_type="double", n_trees=9)
    check(model, grid_rows(rng, 300, 4, dtype=np.float64), "torch")


@FAST_BACKENDS
@pytest.mark.parametrize("aggregate", ["MIN", "MAX"])
def test_min_max_with_a_target_no_tree_writes(backend, rng, aggregate):
    """A target no tree weights has no score: 0, whatever its base value."""
    model = random_tree_graph(rng, classifier=False, n_targets=3, aggregate=aggregate,
                              base_values=[0.5, -1.5, 2.0], targets_per_tree=lambda t: [t % 2],
                              post_transform="SOFTMAX")
    check(model, grid_rows(rng, 300, 4), backend)


def test_min_max_with_a_target_on_some_leaves_only_is_refused(rng):
    model = random_tree_graph(rng, classifier=False, n_targets=2, n_trees=2, depth=2,
                              aggregate="MIN")
    attr = {a.name: a for a in model.graph.node[0].attribute}
    ids = list(attr["target_ids"].ints)
    keep = [i for i in range(len(ids)) if i != 1]  # the first leaf loses its second target
    for name in ("target_ids", "target_nodeids", "target_treeids", "target_weights"):
        field = attr[name].floats if name == "target_weights" else attr[name].ints
        values = list(field)
        del field[:]
        field.extend([values[i] for i in keep])
    with pytest.raises(MissingConverter, match="MIN/MAX.*some leaves only"):
        woodstar.convert(model, "torch")


def test_target_on_some_leaves_only_is_refused(rng):
    model = random_tree_graph(rng, classifier=False, n_targets=2, n_trees=1, depth=2)
    attr = {a.name: a for a in model.graph.node[0].attribute}
    ids = list(attr["target_ids"].ints)
    ids[0] = 1 - ids[0] if ids[1] == ids[0] else ids[0]
    keep = [i for i in range(len(ids)) if i != 1]  # the first leaf loses its second target
    for name in ("target_ids", "target_nodeids", "target_treeids"):
        values = list(attr[name].ints)
        del attr[name].ints[:]
        attr[name].ints.extend([values[i] for i in keep])
    values = list(attr["target_weights"].floats)
    del attr["target_weights"].floats[:]
    attr["target_weights"].floats.extend([values[i] for i in keep])
    with pytest.raises(MissingConverter, match="some leaves only"):
        woodstar.convert(model, "torch")


def test_a_second_input_the_trees_do_not_read(rng):
    """Each input takes its columns of woodstar's input (test_inputs.py has more)."""
    from onnx import TensorProto, helper

    model = random_tree_graph(rng, classifier=False, n_targets=1)
    model.graph.input.append(helper.make_tensor_value_info("Z", TensorProto.FLOAT, [None, 2]))
    feeds = {"X": grid_rows(rng, 200, 4), "Z": rng.normal(size=(200, 2)).astype(np.float32)}
    (expected,) = session(model).run(None, feeds)
    np.testing.assert_array_equal(woodstar.convert(model, "torch").predict(feeds), expected)


def _dense_leaf_graph(rng, depth=11):
    """Two balanced trees of 2**depth leaves on one feature each, leaves uniform in
    (0, 1), AVERAGE, PROBIT: a hundred thousand rows reach over 10**5 distinct scores,
    enough to meet the values where a correctly rounded log and glibc's logf differ."""
    from onnx import TensorProto, helper

    inner = 2 ** depth - 1
    columns = {name: [] for name in ("ids", "nodes", "features", "values", "modes", "true",
                                     "false", "leaf_trees", "leaf_nodes", "weights")}
    for tree in range(2):
        thresholds = np.sort(rng.normal(size=inner)).astype(np.float32)
        in_order = []

        def visit(node):  # a heap layout's internal nodes, left to right
            if node < inner:
                visit(2 * node + 1)
                in_order.append(node)
                visit(2 * node + 2)

        visit(0)
        split = np.empty(inner, np.float32)
        split[in_order] = thresholds
        for node in range(2 * inner + 1):
            leaf = node >= inner
            columns["ids"].append(tree)
            columns["nodes"].append(node)
            columns["features"].append(tree)
            columns["values"].append(0.0 if leaf else float(split[node]))
            columns["modes"].append("LEAF" if leaf else "BRANCH_LEQ")
            columns["true"].append(0 if leaf else 2 * node + 1)
            columns["false"].append(0 if leaf else 2 * node + 2)
            if leaf:
                columns["leaf_trees"].append(tree)
                columns["leaf_nodes"].append(node)
                columns["weights"].append(float(np.float32(rng.uniform(0.0, 1.0))))
    node = helper.make_node(
        "TreeEnsembleRegressor", ["X"], ["Y"], domain="ai.onnx.ml", name="trees", n_targets=1,
        nodes_treeids=columns["ids"], nodes_nodeids=columns["nodes"],
        nodes_featureids=columns["features"], nodes_values=columns["values"],
        nodes_modes=columns["modes"], nodes_truenodeids=columns["true"],
        nodes_falsenodeids=columns["false"], target_treeids=columns["leaf_trees"],
        target_nodeids=columns["leaf_nodes"], target_ids=[0] * len(columns["leaf_nodes"]),
        target_weights=columns["weights"], aggregate_function="AVERAGE", post_transform="PROBIT")
    graph = helper.make_graph([node], "probit",
                              [helper.make_tensor_value_info("X", TensorProto.FLOAT, [None, 2])],
                              [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [None, 1])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", 3)])


@pytest.mark.parametrize("classifier", [False, True])
def test_probit(rng, classifier):
    model = random_tree_graph(rng, classifier=classifier, n_targets=3 if classifier else 1,
                              post_transform="PROBIT")
    check(model, grid_rows(rng, 300, 4), "torch")


def test_probit_over_many_scores_is_onnx_runtimes_to_the_bit(rng):
    """ONNX Runtime's ErfInv cancels (-v + sqrt(v * v - v2)) near probability 0.5, so a
    one-ulp difference of its float32 log becomes many ulps: woodstar computes that log
    as glibc's logf does (with a correctly rounded log, about 1 score in 2 000 differs)."""
    model = _dense_leaf_graph(rng)
    X = rng.normal(size=(100_000, 2)).astype(np.float32)
    (expected,) = session(model).run(None, {"X": X})
    assert len(np.unique(expected)) > 50_000
    for extra in ({}, {"cpu_route": "program"}):
        got = woodstar.convert(model, "torch", extra_config=extra).predict(X)
        np.testing.assert_array_equal(got.reshape(expected.shape), expected, err_msg=str(extra))


@pytest.mark.parametrize("backend", ["onnx", "tvm"])
def test_probit_on_exporting_backends(rng, backend):
    """glibc's logf behind ErfInv finds each value's exponent by comparisons (no frexp),
    so the exported programs give ONNX Runtime's scores to the bit too."""
    from woodstar.backends import all_backends

    if not all_backends()[backend].is_available()[0]:
        pytest.skip(f"backend {backend} is not installed")
    model = _dense_leaf_graph(rng)
    X = rng.normal(size=(20_000, 2)).astype(np.float32)
    container = woodstar.convert(model, backend)
    for rows in (X, X[:1], X[1:6]):
        (expected,) = session(model).run(None, {"X": rows})
        np.testing.assert_array_equal(container.predict(rows).reshape(expected.shape), expected)
