"""The oneDAL peer of the tree-kernel benchmark (benchmarks/candidates.py): it runs
where daal4py is installed and refuses cleanly, with the reason, where it is not or
where the model is not a boosted-tree library's."""

import sys

import numpy as np
import pytest

xgb = pytest.importorskip("xgboost")

from benchmarks.candidates import NotAvailable, PEERS  # noqa: E402
from benchmarks.models import ModelSpec  # noqa: E402

SPEC = ModelSpec("tiny_xgb", "xgboost", "XGBoost, 5 trees", n_features=4)


def _model(rng):
    X = rng.normal(size=(200, 4))
    return xgb.XGBClassifier(n_estimators=5, max_depth=3, n_jobs=1).fit(X, X[:, 0] > 0), X


def test_missing_daal4py_is_a_reason(monkeypatch, rng):
    model, _ = _model(rng)
    monkeypatch.setitem(sys.modules, "daal4py", None)  # import daal4py raises ImportError
    with pytest.raises(NotAvailable, match="daal4py not installed"):
        PEERS["onedal"](SPEC, model).build(1)


def test_other_libraries_are_refused(rng):
    spec = ModelSpec("tiny_rf", "sklearn", "RandomForest", n_features=4)
    with pytest.raises(NotAvailable, match="model builders take XGBoost, LightGBM"):
        PEERS["onedal"](spec, object()).build(1)


def test_onedal_answers_like_xgboost(rng):
    pytest.importorskip("daal4py.mb")
    model, X = _model(rng)
    fn = PEERS["onedal"](SPEC, model).build(1).fn
    X = X.astype(np.float32)
    np.testing.assert_allclose(fn(X), model.predict_proba(X), rtol=1e-5, atol=1e-5)


def test_catboost_peers_answer_like_catboost(rng):
    """CatBoost in the grid: its own predict_proba, ONNX Runtime on CatBoost's ONNX export
    with the ZipMap removed (a probability tensor, as the other peers return), and oneDAL."""
    catboost = pytest.importorskip("catboost")
    pytest.importorskip("onnxruntime")
    spec = ModelSpec("tiny_catboost", "catboost", "CatBoost, 20 trees", n_features=4)
    X = rng.normal(size=(300, 4))
    model = catboost.CatBoostClassifier(iterations=20, depth=4, verbose=0, thread_count=1,
                                        random_seed=0).fit(X, (X[:, 0] + X[:, 1] > 0).astype(int))
    X = X.astype(np.float32)
    expected = model.predict_proba(X)
    peers = ["native", "onnxruntime"]
    try:
        import daal4py.mb  # noqa: F401
        peers.append("onedal")
    except ImportError:
        pass
    for name in peers:
        out = PEERS[name](spec, model).build(1).fn(X)
        assert np.asarray(out).shape == expected.shape, name
        np.testing.assert_allclose(out, expected, rtol=1e-5, atol=1e-5, err_msg=name)
