"""Small tree models that reach every case of the walk kernels (TVM's, the C ones of
torch.compile): a forest, XGBoost with a missing value range, a multiclass LightGBM
fitted on NaN. Each returns ``(model, base)``: ``base`` has no NaN, for
``_parity.edge_rows`` to start from."""

import numpy as np
import pytest


def forest_classifier(rng):
    from sklearn.ensemble import RandomForestClassifier

    X = rng.normal(size=(500, 6))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.3)
    return RandomForestClassifier(n_estimators=12, max_depth=6, random_state=0).fit(X, y), X


def gradient_boosting_depth3(rng):
    """Shallow trees, one output: what the walk kernels' SIMD path takes."""
    from sklearn.ensemble import GradientBoostingClassifier

    X = rng.normal(size=(400, 5))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    return GradientBoostingClassifier(n_estimators=9, max_depth=3, random_state=0).fit(X, y), X


def gradient_boosting_multiclass_depth5(rng):
    """Shallow trees up to the SIMD path's depth, their leaves spread over three outputs."""
    from sklearn.ensemble import GradientBoostingClassifier

    X = rng.normal(size=(400, 5))
    y = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.3)
    return GradientBoostingClassifier(n_estimators=4, max_depth=5, random_state=0).fit(X, y), X


def xgboost_missing_range(rng):
    """``missing=-1``: the input is widened to four blocks of columns."""
    xgboost = pytest.importorskip("xgboost")
    X = rng.normal(size=(500, 4))
    X[rng.random(X.shape) < 0.2] = -1.0
    y = np.where(X[:, 0] == -1, 2.0, X[:, 0]) + X[:, 1]
    return xgboost.XGBRegressor(n_estimators=7, max_depth=4, missing=-1.0).fit(X, y), X


def lightgbm_multiclass_nan(rng):
    lightgbm = pytest.importorskip("lightgbm")
    X = rng.normal(size=(600, 5))
    X[rng.random(X.shape) < 0.1] = np.nan
    y = (np.nan_to_num(X[:, 0]) > 0).astype(int) + (np.nan_to_num(X[:, 1]) > 0.5) * 2
    model = lightgbm.LGBMClassifier(n_estimators=6, num_leaves=12, max_depth=4,
                                    min_child_samples=5, verbose=-1).fit(X, y)
    return model, np.nan_to_num(X)


def torch_program(model, strategy, **config):
    """The torch backend's tensor program with ``strategy``: the sums a walk kernel
    must equal."""
    import woodstar

    return woodstar.convert(model, "torch", extra_config={
        "cpu_route": "program", "tree_implementation": strategy, **config})


def raw_sums(converted, rows):
    """The trees' sums (raw scores) before the link function, as the container runs them."""
    return converted._run(rows)[0]


def assert_sums_and_answers(converted, model, strategy, X, sizes,
                            methods=("predict", "predict_proba"), tolerance=None, **config):
    """For the first ``n`` rows of ``X``, each ``n`` of ``sizes``: raw sums equal to the
    tensor program's bit for bit, and every method's answer the source's."""
    from ._parity import compare_outputs

    program = torch_program(model, strategy, **config)
    for n in sizes:
        rows = X[:n]
        np.testing.assert_array_equal(raw_sums(converted, rows), raw_sums(program, rows))
        for method in methods:
            compare_outputs(getattr(converted, method)(rows), getattr(model, method)(rows),
                            "float32", f"{method}, {n} rows", tolerance)


STRATEGIES = ("perf_tree_trav", "tree_trav")
OPERATOR_OF = {"perf_tree_trav": "woodstar::perfect_tree_walk",
               "tree_trav": "woodstar::node_tree_walk"}
"""The walk operator each traversal strategy exports."""


def needs_walk_kernels():
    """Skip where the walk operators' C kernels do not build (no C compiler)."""
    from woodstar.runtimes import walk_ops

    if not walk_ops.available():
        pytest.skip(walk_ops.unavailable_reason())
