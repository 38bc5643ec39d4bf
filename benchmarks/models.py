"""The benchmark models: trained once on synthetic data and cached in the user's cache
folder (``$WOODSTAR_CACHE_DIR/bench-models``, default ``~/.cache/woodstar``), not in
the checkout. A model whose library is missing is skipped."""

import dataclasses
import hashlib
import pickle
from pathlib import Path

import numpy as np

__all__ = ["ModelSpec", "MODEL_SPECS", "QUICK_MODELS", "load_model", "test_rows"]

from woodstar.calibration import cache_dir

CACHE_DIR = cache_dir() / "bench-models"
N_TRAIN = 20_000
N_TEST = 100_000


@dataclasses.dataclass(frozen=True)
class ModelSpec:
    name: str
    library: str          # "sklearn", "lightgbm", "xgboost", "catboost"
    description: str
    n_features: int = 28
    n_classes: int = 2
    params: tuple = ()    # ((key, value), ...) for the estimator
    missing: float = 0.0  # the share of values set to NaN, in training and test rows

    def key(self):
        fields = (self.name, self.library, self.n_features, self.n_classes, self.params, N_TRAIN)
        if self.missing:  # (models without missing values keep their cached files)
            fields += (self.missing,)
        return hashlib.sha256(repr(fields).encode()).hexdigest()[:12]


MODEL_SPECS = {
    s.name: s for s in [
        ModelSpec("rf_100x8", "sklearn", "RandomForest, 100 trees, depth 8",
                  params=(("kind", "rf"), ("n_estimators", 100), ("max_depth", 8))),
        ModelSpec("lgbm_500x256", "lightgbm", "LightGBM, 500 trees, 256 leaves",
                  params=(("n_estimators", 500), ("num_leaves", 256))),
        ModelSpec("xgb_500x8", "xgboost", "XGBoost, 500 trees, depth 8",
                  params=(("n_estimators", 500), ("max_depth", 8))),
        ModelSpec("rf_50x20", "sklearn", "RandomForest, 50 trees, depth 20",
                  params=(("kind", "rf"), ("n_estimators", 50), ("max_depth", 20))),
        ModelSpec("scaler_logreg", "sklearn", "StandardScaler + LogisticRegression pipeline",
                  params=(("kind", "pipeline"),)),
        ModelSpec("gbdt_100x3", "sklearn", "GradientBoosting, 100 trees, depth 3 (shallow)",
                  params=(("kind", "gbdt"), ("n_estimators", 100), ("max_depth", 3))),
        ModelSpec("lgbm_multi10", "lightgbm", "LightGBM multiclass (10 classes), 100 rounds, 31 leaves",
                  n_classes=10, params=(("n_estimators", 100), ("num_leaves", 31))),
        ModelSpec("rf_wide500", "sklearn", "RandomForest, 100 trees, depth 8, 500 features (wide)",
                  n_features=500,
                  params=(("kind", "rf"), ("n_estimators", 100), ("max_depth", 8))),
        ModelSpec("catboost_500x6", "catboost", "CatBoost, 500 symmetric trees, depth 6",
                  params=(("iterations", 500), ("depth", 6))),
        ModelSpec("logreg_200", "sklearn",
                  "LogisticRegression alone, 200 features, fitted on float32 rows",
                  n_features=200, params=(("kind", "logreg"), ("fit_dtype", "float32"))),
        ModelSpec("xgb_500x8_nan", "xgboost",
                  "XGBoost, 500 trees, depth 8, 2% of the values missing (NaN)",
                  params=(("n_estimators", 500), ("max_depth", 8)), missing=0.02),
    ]
}

QUICK_MODELS = ("rf_100x8", "gbdt_100x3", "scaler_logreg", "lgbm_multi10")


def _data(spec: ModelSpec, n_rows: int, seed: int):
    from sklearn.datasets import make_classification

    X, y = make_classification(
        n_samples=n_rows, n_features=spec.n_features, n_informative=min(10, spec.n_features),
        n_redundant=min(4, spec.n_features // 4), n_classes=spec.n_classes,
        n_clusters_per_class=1 if spec.n_classes > 4 else 2, random_state=seed)
    if spec.missing:
        X[np.random.default_rng(seed).random(X.shape) < spec.missing] = np.nan
    return X, y


def test_rows(spec: ModelSpec, n_rows: int = N_TEST) -> np.ndarray:
    """Fresh float32 rows from the same distribution as the training data."""
    X, _ = _data(spec, n_rows, seed=12345)
    return np.ascontiguousarray(X, dtype=np.float32)


def _train(spec: ModelSpec):
    p = dict(spec.params)
    X, y = _data(spec, N_TRAIN, seed=0)
    X = X.astype(p.pop("fit_dtype", "float64"))
    if spec.library == "sklearn":
        kind = p.pop("kind")
        if kind == "rf":
            from sklearn.ensemble import RandomForestClassifier
            model = RandomForestClassifier(random_state=0, n_jobs=2, **p)
        elif kind == "gbdt":
            from sklearn.ensemble import GradientBoostingClassifier
            model = GradientBoostingClassifier(random_state=0, **p)
        elif kind == "logreg":
            from sklearn.linear_model import LogisticRegression
            model = LogisticRegression(max_iter=1000)
        elif kind == "pipeline":
            from sklearn.linear_model import LogisticRegression
            from sklearn.pipeline import make_pipeline
            from sklearn.preprocessing import StandardScaler
            model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=1000))
        else:
            raise ValueError(kind)
    elif spec.library == "lightgbm":
        import lightgbm
        model = lightgbm.LGBMClassifier(random_state=0, verbose=-1, min_child_samples=5, **p)
    elif spec.library == "xgboost":
        import xgboost
        model = xgboost.XGBClassifier(random_state=0, tree_method="hist", **p)
    elif spec.library == "catboost":
        import catboost
        model = catboost.CatBoostClassifier(random_seed=0, verbose=0, thread_count=2, **p)
    else:
        raise ValueError(spec.library)
    model.fit(X, y)
    return model


def load_model(spec: ModelSpec, progress=print):
    """The fitted model, from the cache when there (trained and cached otherwise)."""
    CACHE_DIR.mkdir(parents=True, exist_ok=True)
    path = CACHE_DIR / f"{spec.name}-{spec.key()}.pkl"
    if path.exists():
        with open(path, "rb") as f:
            return pickle.load(f)  # our own cache file, written below
    progress(f"training {spec.name} ({spec.description}) ...")
    model = _train(spec)
    with open(path, "wb") as f:
        pickle.dump(model, f)
    return model


# Routing sweep: the same forest at every depth, so a depth threshold has measured
# points on both of its sides (only woodstar's own strategies are timed on these).
SWEEP_DEPTHS = (2, 3, 4, 5, 6, 8, 10, 12, 14)
for _depth in SWEEP_DEPTHS:
    MODEL_SPECS[f"sweep_rf_d{_depth}"] = ModelSpec(
        f"sweep_rf_d{_depth}", "sklearn", f"routing sweep: RandomForest, 100 trees, depth {_depth}",
        params=(("kind", "rf"), ("n_estimators", 100), ("max_depth", _depth)))
SWEEP_MODELS = tuple(f"sweep_rf_d{d}" for d in SWEEP_DEPTHS)
