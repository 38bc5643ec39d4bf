"""One small fitted model per registered frontend class, for the model matrix
(tests/test_model_matrix.py). Each entry: (package, class name) -> a function of a
NumPy Generator returning the fitted model and the rows to score; ``TOLERANCE`` says
where a source sums in another precision than float64."""

import warnings

import numpy as np

N_FEATURES = 5

# Sources that do not sum in float64: woodstar matches them within these bounds.
TOLERANCE = {"xgboost": 1e-6, "catboost": 1e-9}


def _data(rng, n=240, classes=2):
    X = rng.normal(size=(n, N_FEATURES))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int)
    if classes > 2:
        y = y + (X[:, 3] > 0.5)
    return X, y


def _rows(rng, nan=True):
    X = rng.normal(scale=3.0, size=(60, N_FEATURES))
    if nan:
        X[rng.random(X.shape) < 0.05] = np.nan
    return X


def _sk(name):
    import importlib

    for module in ("ensemble", "tree", "linear_model", "svm", "preprocessing", "impute",
                   "compose", "pipeline"):
        mod = importlib.import_module(f"sklearn.{module}")
        if hasattr(mod, name):
            return getattr(mod, name)
    raise KeyError(name)


def _classifier(name, classes=2, **params):
    def make(rng):
        X, y = _data(rng, classes=classes)
        return _sk(name)(**params).fit(X, y), _rows(rng)
    return make


def _regressor(name, **params):
    def make(rng):
        X, y = _data(rng)
        return _sk(name)(**params).fit(X, X[:, 0] * 2 + y), _rows(rng)
    return make


def _transformer(name, **params):
    def make(rng):
        X, _ = _data(rng)
        return _sk(name)(**params).fit(X), _rows(rng)
    return make


def _composed(name):
    def make(rng):
        from sklearn.compose import ColumnTransformer
        from sklearn.pipeline import FeatureUnion, make_pipeline
        from sklearn.preprocessing import MinMaxScaler, StandardScaler
        from sklearn.impute import SimpleImputer
        from sklearn.linear_model import LogisticRegression

        X, y = _data(rng)
        if name == "Pipeline":
            model = make_pipeline(SimpleImputer(), StandardScaler(), LogisticRegression())
            return model.fit(X, y), _rows(rng)
        if name == "ColumnTransformer":
            model = ColumnTransformer([("a", StandardScaler(), [0, 1]), ("b", MinMaxScaler(), [3])],
                                      remainder="passthrough")
        else:
            model = FeatureUnion([("a", StandardScaler()), ("b", MinMaxScaler())])
        return model.fit(X), _rows(rng)
    return make


def _lightgbm(kind):
    def make(rng):
        import lightgbm

        X, y = _data(rng, classes=3 if kind == "LGBMClassifier" else 2)
        params = dict(n_estimators=12, num_leaves=7, verbose=-1)
        if kind == "LGBMRanker":
            model = lightgbm.LGBMRanker(**params).fit(X, y, group=[40] * 6)
        elif kind == "LGBMClassifier":
            model = lightgbm.LGBMClassifier(**params).fit(X, y)
        else:
            model = lightgbm.LGBMRegressor(**params).fit(X, X[:, 0] + y)
        if kind == "Booster":
            model = model.booster_
        elif kind == "LGBMModel":
            model = lightgbm.LGBMModel(objective="regression", **params).fit(X, X[:, 0] + y)
        return model, _rows(rng)
    return make


def _xgboost(kind):
    def make(rng):
        import xgboost

        X, y = _data(rng)
        params = dict(n_estimators=10, max_depth=3)
        classes = {"XGBClassifier": xgboost.XGBClassifier, "XGBRFClassifier": xgboost.XGBRFClassifier}
        if kind in classes:
            model = classes[kind](**params).fit(X, y)
        elif kind == "XGBRanker":
            model = xgboost.XGBRanker(**params).fit(X, y, qid=np.repeat(np.arange(6), 40))
        elif kind == "XGBRFRegressor":
            model = xgboost.XGBRFRegressor(**params).fit(X, X[:, 0] + y)
        else:
            model = xgboost.XGBRegressor(**params).fit(X, X[:, 0] + y)
        if kind == "Booster":
            model = model.get_booster()
        return model, _rows(rng)
    return make


def _catboost(kind):
    def make(rng):
        import catboost

        X, y = _data(rng)
        params = dict(iterations=8, depth=3, verbose=False, allow_writing_files=False)
        if kind == "CatBoostClassifier":
            model = catboost.CatBoostClassifier(**params).fit(X, y)
        elif kind == "CatBoostRanker":
            model = catboost.CatBoostRanker(**params).fit(X, y, group_id=np.repeat(np.arange(6), 40))
        elif kind == "CatBoost":
            model = catboost.CatBoost(dict(params, loss_function="RMSE")).fit(X, X[:, 0] + y)
        else:
            model = catboost.CatBoostRegressor(**params).fit(X, X[:, 0] + y)
        return model, _rows(rng, nan=False)
    return make


_TREE_CLASSIFIERS = ("DecisionTreeClassifier", "ExtraTreeClassifier", "RandomForestClassifier",
                     "ExtraTreesClassifier", "GradientBoostingClassifier", "HistGradientBoostingClassifier")
_TREE_REGRESSORS = ("DecisionTreeRegressor", "ExtraTreeRegressor", "RandomForestRegressor",
                    "ExtraTreesRegressor", "GradientBoostingRegressor", "HistGradientBoostingRegressor")
_SMALL = {"RandomForestClassifier": dict(n_estimators=8, max_depth=5),
          "RandomForestRegressor": dict(n_estimators=8, max_depth=5),
          "ExtraTreesClassifier": dict(n_estimators=8, max_depth=5),
          "ExtraTreesRegressor": dict(n_estimators=8, max_depth=5),
          "GradientBoostingClassifier": dict(n_estimators=10, max_depth=3),
          "GradientBoostingRegressor": dict(n_estimators=10, max_depth=3),
          "HistGradientBoostingClassifier": dict(max_iter=10),
          "HistGradientBoostingRegressor": dict(max_iter=10)}
_LINEAR_CLASSIFIERS = ("LogisticRegression", "LogisticRegressionCV", "LinearSVC", "RidgeClassifier",
                       "RidgeClassifierCV", "SGDClassifier", "Perceptron", "PassiveAggressiveClassifier")
_LINEAR_REGRESSORS = ("LinearRegression", "Ridge", "RidgeCV", "Lasso", "LassoCV", "ElasticNet",
                      "ElasticNetCV", "Lars", "LassoLars", "OrthogonalMatchingPursuit", "BayesianRidge",
                      "ARDRegression", "HuberRegressor", "SGDRegressor", "LinearSVR",
                      "TheilSenRegressor", "QuantileRegressor")


def _no_nan(make):
    def wrapped(rng):
        model, X = make(rng)
        return model, np.nan_to_num(X)
    return wrapped


ZOO = {}
for _name in _TREE_CLASSIFIERS:
    ZOO[("sklearn", _name)] = _classifier(_name, classes=3, **_SMALL.get(_name, {}), random_state=0)
for _name in _TREE_REGRESSORS:
    ZOO[("sklearn", _name)] = _regressor(_name, **_SMALL.get(_name, {}), random_state=0)
ZOO[("sklearn", "IsolationForest")] = _transformer("IsolationForest", n_estimators=10, random_state=0)
for _name in _LINEAR_CLASSIFIERS:
    ZOO[("sklearn", _name)] = _no_nan(_classifier(_name, classes=3))
for _name in _LINEAR_REGRESSORS:
    ZOO[("sklearn", _name)] = _no_nan(_regressor(_name))
for _name in ("StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler", "SimpleImputer",
              "MissingIndicator"):
    ZOO[("sklearn", _name)] = _transformer(_name)
ZOO[("sklearn", "OneHotEncoder")] = lambda rng: _encoder(rng, "OneHotEncoder")
ZOO[("sklearn", "OrdinalEncoder")] = lambda rng: _encoder(rng, "OrdinalEncoder")
for _name in ("Pipeline", "ColumnTransformer", "FeatureUnion"):
    ZOO[("sklearn", _name)] = _composed(_name)
for _name in ("LGBMClassifier", "LGBMRegressor", "LGBMRanker", "LGBMModel", "Booster"):
    ZOO[("lightgbm", _name)] = _lightgbm(_name)
for _name in ("XGBClassifier", "XGBRegressor", "XGBRanker", "XGBRFClassifier", "XGBRFRegressor",
              "Booster"):
    ZOO[("xgboost", _name)] = _xgboost(_name)
for _name in ("CatBoostClassifier", "CatBoostRegressor", "CatBoostRanker", "CatBoost"):
    ZOO[("catboost", _name)] = _catboost(_name)


def _encoder(rng, name):
    X = rng.integers(0, 4, size=(200, 3)).astype(float)
    T = rng.integers(-1, 6, size=(60, 3)).astype(float)
    params = {"handle_unknown": "ignore"} if name == "OneHotEncoder" else \
        {"handle_unknown": "use_encoded_value", "unknown_value": -1}
    return _sk(name)(**params).fit(X), T


def fit(key, rng):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return ZOO[key](rng)


def source_answer(model, method, X):
    """What the source library itself answers (an XGBoost Booster predicts a DMatrix)."""
    if type(model).__module__.startswith("xgboost") and type(model).__name__ == "Booster":
        import xgboost

        X = xgboost.DMatrix(X)
    out = getattr(model, method)(X)
    return out.toarray() if hasattr(out, "toarray") else np.asarray(out) if not isinstance(out, list) else out
