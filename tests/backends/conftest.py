"""Small fitted scikit-learn models shared by the backend tests (fitted once per
session: the backends, not the fitting, are under test)."""

import numpy as np
import pytest

def _data(n_rows=400, n_features=6, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, n_features))
    return X, rng


@pytest.fixture(scope="session")
def sk_models():
    from sklearn.ensemble import (
        GradientBoostingClassifier, HistGradientBoostingClassifier, IsolationForest,
        RandomForestClassifier,
    )

    X, rng = _data()
    y3 = (X[:, 0] > 0).astype(int) + (X[:, 1] > 0.5)
    labels = np.array(["low", "mid", "high"], dtype=object)[y3]
    models = {
        "rf": (RandomForestClassifier(n_estimators=4, max_depth=4, random_state=0).fit(X, labels), X),
        "gb": (GradientBoostingClassifier(n_estimators=4, max_depth=3, random_state=0)
               .fit(X, (X[:, 2] > 0).astype(int)), X),
        "iforest": (IsolationForest(n_estimators=4, max_samples=64, random_state=0).fit(X), X),
    }
    # HistGradientBoosting with a categorical feature and missing values.
    Xh = X.copy()
    Xh[:, 0] = rng.integers(0, 5, size=len(Xh))
    Xh[rng.random(Xh.shape) < 0.1] = np.nan
    yh = ((np.nan_to_num(Xh[:, 0]) % 2 == 0) ^ (np.nan_to_num(Xh[:, 1]) > 0)).astype(int)
    yh = yh + (np.nan_to_num(Xh[:, 3]) > 0.7)
    hgb = HistGradientBoostingClassifier(max_iter=3, max_depth=3, categorical_features=[0],
                                         random_state=0).fit(Xh, yh)
    models["hgb_cat_nan"] = (hgb, Xh)
    return models


