"""The ``ai.onnx.ml`` opset-5 ``TreeEnsemble`` against ONNX Runtime running the same
graph: hand-made graphs (every node mode mixed in each tree, BRANCH_MEMBER sets,
leaves on either branch, several targets, SUM and AVERAGE, NaN with and without
missing tracking, float and double inputs) and a skl2onnx graph rewritten from the
opset-3 operator into the opset-5 one.

Sums are ONNX Runtime's to the bit (single-threaded session). SOFTMAX and LOGISTIC go
through float32 ``exp``, which woodstar rounds from float64 while ONNX Runtime calls
``expf``: held to 2 ulps (or one float32 epsilon absolute where the kernel computes
``1 - v``), as for the older operators.
"""

import numpy as np
import pytest

import woodstar
from woodstar.exceptions import MissingConverter

from ._graphs import GRID, grid_rows, session, ulps

pytest.importorskip("onnxruntime")
pytest.importorskip("onnx")

FAST_BACKENDS = pytest.mark.parametrize("backend", ["torch", "torch.jit"])
MODES5 = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ",
          "BRANCH_MEMBER")
AGGREGATES = {"AVERAGE": 0, "SUM": 1, "MIN": 2, "MAX": 3}
# as ONNX Runtime reads the numbers (the operator's documentation swaps 1 and 2)
POSTS = {"NONE": 0, "LOGISTIC": 1, "SOFTMAX": 2, "SOFTMAX_ZERO": 3, "PROBIT": 4}
CATEGORIES = np.arange(6)  # the values BRANCH_MEMBER sets draw from


def _graph(attrs, n_features, dtype, n_targets):
    from onnx import TensorProto, helper

    elem = TensorProto.FLOAT if dtype == np.float32 else TensorProto.DOUBLE
    node = helper.make_node("TreeEnsemble", ["X"], ["Y"], domain="ai.onnx.ml", name="trees",
                            **attrs)
    graph = helper.make_graph([node], "trees",
                              [helper.make_tensor_value_info("X", elem, [None, n_features])],
                              [helper.make_tensor_value_info("Y", elem, [None, n_targets])])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21),
                                                   helper.make_opsetid("ai.onnx.ml", 5)])


def random_v5_graph(rng, *, n_targets=1, n_features=4, n_trees=6, depth=3, dtype=np.float32,
                    aggregate="SUM", post="NONE", mixed_targets=False, modes=MODES5,
                    extra_member=None):
    """Random trees: thresholds on ``GRID``, member sets of 1-4 values from
    ``CATEGORIES`` (plus ``extra_member`` in every set), random missing tracks; each
    tree's leaves weight one target (a random target per leaf with ``mixed_targets``).
    A tree may be a single leaf."""
    from onnx import numpy_helper

    nodes = {k: [] for k in ("featureids", "modes", "splits", "truenodeids", "trueleafs",
                             "falsenodeids", "falseleafs", "missing_value_tracks_true")}
    members, leaf_targets, leaf_weights, roots = [], [], [], []

    def leaf(target):
        leaf_targets.append(int(target))
        leaf_weights.append(rng.normal())
        return len(leaf_targets) - 1

    for t in range(n_trees):
        target = t % n_targets

        def grow(level):
            """(is_leaf, index) of a new subtree."""
            if level == depth or (level > 0 and rng.random() < 0.2):
                return 1, leaf(rng.integers(n_targets) if mixed_targets else target)
            i = len(nodes["modes"])
            for column in nodes.values():
                column.append(0)
            mode = int(rng.integers(len(modes)))
            mode = MODES5.index(modes[mode])
            nodes["modes"][i], nodes["featureids"][i] = mode, int(rng.integers(n_features))
            nodes["splits"][i] = float(rng.choice(GRID)) if mode != 6 else 0.0
            if mode == 6:
                chosen = rng.choice(CATEGORIES, int(rng.integers(1, 5)), replace=False).tolist()
                extra = [] if extra_member is None else [extra_member]
                members.extend(sorted(chosen) + extra + [np.nan])
            nodes["missing_value_tracks_true"][i] = int(rng.integers(0, 2))
            for side in ("true", "false"):
                is_leaf, index = grow(level + 1)
                nodes[f"{side}leafs"][i], nodes[f"{side}nodeids"][i] = is_leaf, index
            return 0, i

        if rng.random() < 0.1:  # a one-leaf tree: a node whose branches are one leaf
            i = len(nodes["modes"])
            for column in nodes.values():
                column.append(0)
            j = leaf(target)
            nodes["trueleafs"][i] = nodes["falseleafs"][i] = 1
            nodes["truenodeids"][i] = nodes["falsenodeids"][i] = j
            roots.append(i)
        else:
            roots.append(grow(0)[1])
    attrs = {f"nodes_{k}": v for k, v in nodes.items() if k not in ("modes", "splits")}
    attrs.update(
        tree_roots=roots, n_targets=n_targets, leaf_targetids=leaf_targets,
        nodes_modes=numpy_helper.from_array(np.array(nodes["modes"], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array(nodes["splits"], dtype)),
        leaf_weights=numpy_helper.from_array(np.array(leaf_weights, dtype)),
        aggregate_function=AGGREGATES[aggregate], post_transform=POSTS[post])
    if members:
        attrs["membership_values"] = numpy_helper.from_array(np.array(members, dtype))
    return _graph(attrs, n_features, dtype, n_targets)


def rows(rng, n_rows, n_features, dtype=np.float32):
    """``grid_rows`` (thresholds, a float32 step either side, NaN, +-inf) with whole
    numbers around ``CATEGORIES`` and halves between them; for a double input also a
    float64 step either side of the thresholds."""
    X = grid_rows(rng, n_rows, n_features).astype(np.float64)
    mask = rng.random(X.shape)
    cats = mask < 0.3
    X[cats] = rng.choice(np.concatenate([np.arange(-1, 8), [2.5, -0.0, -0.5, 1e9, 40, 40.5]]),
                         int(cats.sum()))
    if dtype == np.float64:
        near = mask > 0.85
        base = rng.choice(GRID.astype(np.float64), int(near.sum()))
        X[near] = np.nextafter(base, rng.choice([-np.inf, np.inf], len(base)))
    return X.astype(dtype)


def _routes(backend):
    return [None, {"cpu_route": "program"}] if backend == "torch" else [None]


def check(model, X, backend, exact=True):
    (expected,) = session(model).run(None, {"X": X})
    for extra in _routes(backend):
        container = woodstar.convert(model, backend, extra_config=extra)
        what = f"{backend} {extra or 'default route'}"
        got = container.predict(X)
        assert got.shape == expected.shape, what
        if X.dtype == np.float64:  # double sums, returned as double
            assert got.dtype == np.float64, what
            np.testing.assert_array_equal(got, expected, err_msg=what)
            continue
        assert got.dtype == np.float32, what
        distance = ulps(got, expected)
        if not exact:
            distance = np.where(np.abs(got - expected) <= np.finfo(np.float32).eps, 0, distance)
        assert distance.max() <= (0 if exact else 2), f"{what}: {distance.max()} ulps"


# --------------------------------------------------------------- hand-made graphs
@FAST_BACKENDS
@pytest.mark.parametrize("aggregate", ["SUM", "AVERAGE"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
def test_every_mode_mixed_in_each_tree(backend, rng, aggregate, dtype):
    model = random_v5_graph(rng, dtype=dtype, aggregate=aggregate, n_trees=8, depth=4)
    check(model, rows(rng, 400, 4, dtype), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
@pytest.mark.parametrize("mixed", [False, True], ids=["tree_per_target", "target_per_leaf"])
def test_several_targets(backend, rng, dtype, mixed):
    model = random_v5_graph(rng, n_targets=3, dtype=dtype, mixed_targets=mixed, n_trees=7)
    check(model, rows(rng, 300, 4, dtype), backend)


@FAST_BACKENDS
@pytest.mark.parametrize("post", ["SOFTMAX", "LOGISTIC", "SOFTMAX_ZERO"])
def test_float_post_transforms(backend, rng, post):
    model = random_v5_graph(rng, n_targets=3, post=post, n_trees=7)
    check(model, rows(rng, 300, 4), backend, exact=False)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
@pytest.mark.parametrize("extra_member", [None, 40], ids=["small_sets", "big_sets"])
def test_member_only_trees_with_nan(rng, dtype, extra_member):
    """Deep trees of nothing but BRANCH_MEMBER tests (several members each); with a
    member 40 in every set, the kernel's truncating reading of big sets."""
    model = random_v5_graph(rng, dtype=dtype, modes=("BRANCH_MEMBER",), depth=5,
                            extra_member=extra_member)
    X = rows(rng, 400, 4, dtype)
    X[rng.random(X.shape) < 0.1] = np.nan
    check(model, X, "torch")


def test_post_transform_one_is_logistic_in_onnx_runtime(rng):
    """ONNX Runtime's reading of the number, which woodstar follows."""
    model = random_v5_graph(rng, n_targets=3, post="LOGISTIC")
    X = rows(rng, 50, 4)
    (transformed,) = session(model).run(None, {"X": X})
    for a in model.graph.node[0].attribute:
        if a.name == "post_transform":
            assert a.i == 1
            a.i = 0
    (raw,) = session(model).run(None, {"X": X})
    # ONNX Runtime's logistic is an approximation (~1.4e-6 relative at times); a softmax
    # across the three targets would be off by far more
    np.testing.assert_allclose(transformed, 1 / (1 + np.exp(-raw.astype(np.float64))), rtol=1e-5)


def _one_member_node(members, dtype=np.float32, tracks=0):
    from onnx import numpy_helper

    attrs = dict(
        tree_roots=[0], nodes_featureids=[0], nodes_truenodeids=[0], nodes_trueleafs=[1],
        nodes_falsenodeids=[1], nodes_falseleafs=[1], nodes_missing_value_tracks_true=[tracks],
        nodes_modes=numpy_helper.from_array(np.array([6], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array([0], dtype)),
        membership_values=numpy_helper.from_array(np.array(members, dtype)),
        leaf_targetids=[0, 0], leaf_weights=numpy_helper.from_array(np.array([1, 2], dtype)),
        n_targets=1)
    return _graph(attrs, 1, dtype, 1)


EDGES = (0, 1, 2, 3, 3.5, 2.999, -1, -0.5, -0.0, 0.5, 40, 40.5, 41, 65535.5, 1e9, -1e9,
         np.nan, np.inf, -np.inf)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["float", "double"])
@pytest.mark.parametrize("tracks", [0, 1])
@pytest.mark.parametrize("members", [[1, 3, 7], [0, 1, 3, 40], list(range(0, 70, 2))],
                         ids=["small", "beyond_30", "31_or_more"])
def test_member_edges(dtype, tracks, members):
    """Small sets: equality (3.5 and 2.999 are not 3); big ones: the truncated value
    (3.5 and -0.5 are in); NaN by its tracking flag; huge values and infinities out."""
    model = _one_member_node(members, dtype=dtype, tracks=tracks)
    X = np.array([[v] for v in EDGES + (np.nextafter(3, 4), np.nextafter(3, 2))], dtype)
    check(model, X, "torch")


def test_mixed_kinds_of_member_set_are_refused():
    from onnx import numpy_helper

    model = _one_member_node([1, 3, np.nan, 1, 40])
    node = model.graph.node[0]
    for a in node.attribute:
        if a.name == "nodes_modes":
            a.t.CopyFrom(numpy_helper.from_array(np.array([6, 6], np.uint8)))
        elif a.name in ("nodes_featureids", "nodes_missing_value_tracks_true", "nodes_trueleafs"):
            a.ints[:] = [a.ints[0]] * 2
        elif a.name == "nodes_splits":
            a.t.CopyFrom(numpy_helper.from_array(np.zeros(2, np.float32)))
        elif a.name == "nodes_truenodeids":
            a.ints[:] = [0, 0]
        elif a.name == "nodes_falsenodeids":
            a.ints[:] = [1, 1]
        elif a.name == "nodes_falseleafs":
            a.ints[:] = [0, 1]
    session(model)  # ONNX Runtime reads it
    _refusal(model, "sets of both kinds")


def _refusal(model, match):
    with pytest.raises(MissingConverter, match=match):
        woodstar.convert(model, "torch")


def test_negative_member_is_refused():
    _refusal(_one_member_node([-1, 3]), "BRANCH_MEMBER member")


@FAST_BACKENDS
@pytest.mark.parametrize("aggregate", ["MIN", "MAX"])
@pytest.mark.parametrize("n_targets", [1, 3])
def test_min_max_aggregation(backend, rng, aggregate, n_targets):
    model = random_v5_graph(rng, n_targets=n_targets, aggregate=aggregate, n_trees=8, depth=4)
    check(model, rows(rng, 400, 4), backend)


def test_min_max_and_double_post_transform_are_refused(rng):
    _refusal(random_v5_graph(rng, aggregate="MIN", dtype=np.float64), "double input")
    _refusal(random_v5_graph(rng, aggregate="MAX", n_targets=3, mixed_targets=True, n_trees=4),
             "some leaves only")
    _refusal(random_v5_graph(rng, post="LOGISTIC", dtype=np.float64), "double input")


def test_probit(rng):
    """Post-transform 4, PROBIT: ONNX Runtime's ErfInv over glibc's logf."""
    check(random_v5_graph(rng, post="PROBIT"), rows(rng, 400, 4), "torch")


def test_split_tensor_of_another_dtype_is_refused(rng):
    from onnx import numpy_helper

    model = random_v5_graph(rng)
    for a in model.graph.node[0].attribute:
        if a.name == "nodes_splits":
            values = numpy_helper.to_array(a.t).astype(np.float64)
            a.t.CopyFrom(numpy_helper.from_array(values))
    _refusal(model, "nodes_splits of dtype")


# ------------------------------------------- an opset-3 graph rewritten to opset 5
_V3_MODES = {"BRANCH_LEQ": 0, "BRANCH_LT": 1, "BRANCH_GTE": 2, "BRANCH_GT": 3,
             "BRANCH_EQ": 4, "BRANCH_NEQ": 5}


def _v3_to_v5(model):
    """A one-target TreeEnsembleRegressor graph as the same trees in TreeEnsemble."""
    from onnx import helper, numpy_helper

    old = model.graph.node[0]
    a = {x.name: helper.get_attribute_value(x) for x in old.attribute}
    assert not any(a.get("base_values", [])) and a["n_targets"] == 1
    modes = [m.decode() for m in a["nodes_modes"]]
    keys = list(zip(a["nodes_treeids"], a["nodes_nodeids"]))
    leaves = {(t, n): w for t, n, w in zip(a["target_treeids"], a["target_nodeids"],
                                            a["target_weights"])}
    interior = {k: i for i, k in enumerate(k for k, m in zip(keys, modes) if m != "LEAF")}
    leaf_index = {k: j for j, k in enumerate(k for k, m in zip(keys, modes) if m == "LEAF")}
    rows = [i for i, m in enumerate(modes) if m != "LEAF"]
    v5 = {k: [] for k in ("featureids", "modes", "splits", "truenodeids", "trueleafs",
                          "falsenodeids", "falseleafs", "missing_value_tracks_true")}
    tracks = a.get("nodes_missing_value_tracks_true", [0] * len(modes))
    for i in rows:
        t = keys[i][0]
        v5["featureids"].append(a["nodes_featureids"][i])
        v5["modes"].append(_V3_MODES[modes[i]])
        v5["splits"].append(a["nodes_values"][i])
        v5["missing_value_tracks_true"].append(tracks[i])
        for side in ("true", "false"):
            child = (t, a[f"nodes_{side}nodeids"][i])
            is_leaf = child in leaf_index
            v5[f"{side}leafs"].append(int(is_leaf))
            v5[f"{side}nodeids"].append(leaf_index[child] if is_leaf else interior[child])
    first = {}
    for k in keys:
        first.setdefault(k[0], k)
    assert all(k in interior for k in first.values())  # no one-leaf trees here
    leaf_keys = sorted(leaf_index, key=leaf_index.get)
    attrs = {f"nodes_{k}": v for k, v in v5.items() if k not in ("modes", "splits")}
    attrs.update(
        tree_roots=[interior[first[t]] for t in first], n_targets=1,
        leaf_targetids=[0] * len(leaf_keys),
        leaf_weights=numpy_helper.from_array(np.array([leaves[k] for k in leaf_keys], np.float32)),
        nodes_modes=numpy_helper.from_array(np.array(v5["modes"], np.uint8)),
        nodes_splits=numpy_helper.from_array(np.array(v5["splits"], np.float32)),
        aggregate_function=AGGREGATES[a.get("aggregate_function", b"SUM").decode()],
        post_transform=POSTS[a.get("post_transform", b"NONE").decode()])
    return _graph(attrs, model.graph.input[0].type.tensor_type.shape.dim[1].dim_value,
                  np.float32, 1)


@FAST_BACKENDS
def test_skl2onnx_forest_rewritten_to_opset5(backend, rng):
    skl2onnx = pytest.importorskip("skl2onnx")
    from sklearn.ensemble import RandomForestRegressor

    X = rng.normal(size=(300, 5)).astype(np.float32)
    X[rng.random(X.shape) < 0.1] = np.nan
    y = 2 * np.nan_to_num(X[:, 0]) - np.nan_to_num(X[:, 1]) + rng.normal(size=300)
    forest = RandomForestRegressor(n_estimators=5, max_depth=5,
                                   random_state=int(rng.integers(1 << 30))).fit(X, y)
    old = skl2onnx.to_onnx(forest, X[:1], target_opset={"": 17, "ai.onnx.ml": 3})
    new = _v3_to_v5(old)
    X_test = (2.0 * rng.normal(size=(400, 5))).astype(np.float32)
    X_test[rng.random(X_test.shape) < 0.1] = np.nan
    (v3,) = session(old).run(None, {old.graph.input[0].name: X_test})
    (v5,) = session(new).run(None, {"X": X_test})
    np.testing.assert_array_equal(v3, v5)  # the rewrite keeps ONNX Runtime's answers
    check(old_named_x(old), X_test, backend)
    check(new, X_test, backend)


def old_named_x(model):
    """The opset-3 graph with its input named X (as ``check`` feeds it)."""
    name = model.graph.input[0].name
    for node in model.graph.node:
        node.input[:] = ["X" if i == name else i for i in node.input]
    model.graph.input[0].name = "X"
    return model
