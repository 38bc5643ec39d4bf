"""Hand-made ONNX-ML tree graphs (every node mode, post-transform and base-value
layout, including those the converters never write) and ONNX Runtime sessions."""

import numpy as np
import pytest

MODES = ("BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ")
GRID = np.array([-1.0, -0.5, 0.0, 0.5, 1.0], dtype=np.float32)


def session(model, threads=1):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    return ort.InferenceSession(model.SerializeToString(), options,
                                providers=["CPUExecutionProvider"])


def random_tree_graph(rng, *, classifier, n_targets, n_features=4, n_trees=6, depth=3,
                      modes=MODES, post_transform="NONE", base_values=None,
                      aggregate="SUM", labels=None, input_type="float",
                      targets_per_tree=None, negative_weights=True):
    """A random ensemble: thresholds on ``GRID``, random modes and missing tracks,
    leaves weighting ``targets_per_tree(t)`` (default: every target)."""
    from onnx import TensorProto, helper

    nodes = {k: [] for k in ("treeids", "nodeids", "featureids", "modes", "values",
                             "truenodeids", "falsenodeids", "missing_value_tracks_true")}
    weights = {k: [] for k in ("treeids", "nodeids", "ids", "weights")}
    for t in range(n_trees):
        targets = range(n_targets) if targets_per_tree is None else targets_per_tree(t)
        next_id = [0]

        def grow(level):
            node_id = next_id[0]
            next_id[0] += 1
            row = len(nodes["nodeids"])
            for key in nodes:
                nodes[key].append(None)
            nodes["treeids"][row], nodes["nodeids"][row] = t, node_id
            if level == depth or (level > 0 and rng.random() < 0.2):
                nodes["modes"][row], nodes["featureids"][row] = "LEAF", 0
                nodes["values"][row] = 0.0
                nodes["truenodeids"][row] = nodes["falsenodeids"][row] = 0
                nodes["missing_value_tracks_true"][row] = 0
                for k in targets:
                    w = rng.normal() if negative_weights else rng.random()
                    weights["treeids"].append(t)
                    weights["nodeids"].append(node_id)
                    weights["ids"].append(int(k))
                    weights["weights"].append(float(np.float32(w)))
                return node_id
            nodes["modes"][row] = str(rng.choice(modes))
            nodes["featureids"][row] = int(rng.integers(0, n_features))
            nodes["values"][row] = float(rng.choice(GRID))
            nodes["missing_value_tracks_true"][row] = int(rng.integers(0, 2))
            nodes["truenodeids"][row] = grow(level + 1)
            nodes["falsenodeids"][row] = grow(level + 1)
            return node_id

        grow(0)
    attrs = {f"nodes_{k}": v for k, v in nodes.items()}
    attrs["post_transform"] = post_transform
    prefix = "class" if classifier else "target"
    attrs.update({f"{prefix}_{k}": v for k, v in weights.items()})
    if base_values is not None:
        attrs["base_values"] = [float(b) for b in base_values]
    dtype = TensorProto.FLOAT if input_type == "float" else TensorProto.DOUBLE
    inputs = [helper.make_tensor_value_info("X", dtype, [None, n_features])]
    if classifier:
        labels = list(range(n_targets)) if labels is None else labels
        key = "classlabels_strings" if isinstance(labels[0], str) else "classlabels_int64s"
        attrs[key] = labels
        label_type = TensorProto.STRING if isinstance(labels[0], str) else TensorProto.INT64
        node = helper.make_node("TreeEnsembleClassifier", ["X"], ["label", "probabilities"],
                                domain="ai.onnx.ml", name="trees", **attrs)
        outputs = [helper.make_tensor_value_info("label", label_type, [None]),
                   helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, None])]
    else:
        attrs["n_targets"] = n_targets
        attrs["aggregate_function"] = aggregate
        node = helper.make_node("TreeEnsembleRegressor", ["X"], ["variable"],
                                domain="ai.onnx.ml", name="trees", **attrs)
        outputs = [helper.make_tensor_value_info("variable", TensorProto.FLOAT, [None, n_targets])]
    graph = helper.make_graph([node], "trees", inputs, outputs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17),
                                                   helper.make_opsetid("ai.onnx.ml", 3)])


def grid_rows(rng, n_rows, n_features, dtype=np.float32):
    """Values on the thresholds, one float32 step either side, random ones, NaN and +-inf."""
    near = np.concatenate([GRID, np.nextafter(GRID, np.float32(np.inf)),
                           np.nextafter(GRID, np.float32(-np.inf))])
    X = rng.choice(near, size=(n_rows, n_features)).astype(np.float64)
    mask = rng.random(X.shape)
    X[mask < 0.2] = rng.normal(size=int((mask < 0.2).sum()))
    X[mask > 0.93] = np.nan
    X[(mask > 0.91) & (mask <= 0.92)] = np.inf
    X[(mask > 0.92) & (mask <= 0.93)] = -np.inf
    return X.astype(dtype)


def ulps(a, b):
    """Distance in float32 steps between two float32 arrays (0 where both are equal)."""
    a, b = np.asarray(a, np.float32), np.asarray(b, np.float32)
    ia = a.view(np.int32).astype(np.int64)
    ib = b.view(np.int32).astype(np.int64)
    ia = np.where(ia < 0, -(ia & 0x7FFFFFFF), ia)
    ib = np.where(ib < 0, -(ib & 0x7FFFFFFF), ib)
    same = (a == b) | (np.isnan(a) & np.isnan(b))
    return np.where(same, 0, np.abs(ia - ib))


def assert_calls_match(model, X, containers):
    """Every row alone, pairs of rows and the whole batch: each call's outputs equal
    ONNX Runtime's bit for bit (MLAS takes another kernel for a single row)."""
    ort = session(model)
    name = model.graph.input[0].name
    calls = [X[i:i + 1] for i in range(len(X))] + [X[i:i + 2] for i in range(0, len(X), 2)] + [X]
    for rows in calls:
        expected = ort.run(None, {name: rows})
        for container in containers:
            if len(expected) == 2:
                np.testing.assert_array_equal(container.predict(rows), expected[0])
                np.testing.assert_array_equal(container.predict_proba(rows), expected[1])
            else:
                got = container.predict(rows)
                np.testing.assert_array_equal(got, expected[0].reshape(got.shape))


def _has_avx512f():
    try:
        with open("/proc/cpuinfo") as info:
            return " avx512f" in info.read()
    except OSError:
        return False


# woodstar mirrors the AVX-512F kernels; ONNX Runtime picks others on other CPUs (an
# AVX2 CPU's clamp and 8-lane sum differ for logits ~87 below the row's maximum)
MATCHES_THIS_CPU = pytest.mark.skipif(not _has_avx512f(), reason=(
    "ONNX Runtime takes MLAS's AVX-512F softmax only on a CPU with AVX-512F, the kernel "
    "woodstar mirrors"))
