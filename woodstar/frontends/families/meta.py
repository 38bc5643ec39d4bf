"""scikit-learn meta-estimators -> one graph holding their inner models' graphs.

Each inner estimator goes through its own frontend (``find_frontend``); its graph is
spliced into the meta-estimator's, reading the input (or the columns the inner model
was fitted on: Bagging's feature subsets, a chain's augmented input), and the inner
results are combined with the ops of ``woodstar/ir/families/ensemble_meta.py``, which
repeat scikit-learn's own NumPy code. An inner model's head says how its methods read
its results (``Head.blocks``, ``decision_rule``), so any supported classifier can vote.

Fitted attributes read: the public ones (``estimators_``, ``classes_``,
``estimators_features_``, ``estimator_weights_``, ``calibrated_classifiers_``,
``best_estimator_``, ...) and three private ones: VotingClassifier's
``_weights_not_none`` (the weights of the estimators not dropped), the job split of
``sklearn.ensemble._base._partition_estimators`` (Bagging sums per job, then the
jobs), and TransformedTargetRegressor's ``_training_dim``.
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, ColumnOps, Concat, GraphBuilder, ModelIR, Select, ValueType
from ...ir.families.ensemble_meta import (UFUNCS, MetaAccumulate, MetaAverage, MetaCalibrate,
                                          MetaLabel, MetaOvo, MetaOvrProba, MetaSamme,
                                          MetaUfunc, MetaWeightedMedian)
from .._sklearn import check_fitted, sklearn_head
from ..registry import find_frontend, register_frontend

__all__ = ["SEARCHES", "META_ESTIMATORS"]

SEARCHES = ("GridSearchCV", "RandomizedSearchCV", "HalvingGridSearchCV", "HalvingRandomSearchCV")
META_ESTIMATORS = SEARCHES + (
    "VotingClassifier", "VotingRegressor", "StackingClassifier", "StackingRegressor",
    "BaggingClassifier", "BaggingRegressor", "AdaBoostClassifier", "AdaBoostRegressor",
    "CalibratedClassifierCV", "MultiOutputClassifier", "MultiOutputRegressor",
    "ClassifierChain", "RegressorChain", "OneVsRestClassifier", "OneVsOneClassifier",
    "TransformedTargetRegressor")


def _refuse(owner, what, value, supported):
    raise MissingConverter(unsupported_message(owner, what, value, supported))


def _plain(schema):
    """The schema reads numbers only, with no check of its own at the edge."""
    return all(c.kind == "float" and c.vocabulary is None and c.category_values is None
               and c.allowed is None and c.allowed_missing for c in schema.columns)


def _unwrap(estimator):
    # FrozenEstimator (cv="prefit" replacement) predicts with the estimator it holds
    return estimator.estimator if type(estimator).__name__ == "FrozenEstimator" else estimator


class _Inner:
    """One inner model spliced into the meta-estimator's graph; reads its methods'
    results as its head says they are read."""

    def __init__(self, meta, estimator, value, prefix):
        self.meta = meta
        self.estimator = estimator
        ir = find_frontend(estimator)(estimator, meta.options)
        if not _plain(ir.schema):
            _refuse(meta.owner, "an inner estimator that reads string or category columns",
                    type(estimator).__name__, "inner estimators over numeric columns")
        self.head = ir.head
        self.raw, self.transformed = meta.builder.splice(ir.graph, value, prefix=prefix)
        self.name = type(estimator).__name__

    def width(self, value):
        return self.meta.builder.type_of(value).width

    def _block(self, role, default):
        span = self.head.block(role)
        if span is None:
            return default
        return self.meta.select(self.transformed, range(*span))

    def _need(self, method):
        if method not in self.head.methods:
            _refuse(self.meta.owner, f"an inner estimator without {method}", self.name,
                    f"inner estimators with {method}")

    def _single_output(self):
        if self.head.is_multi_output_classifier:
            _refuse(self.meta.owner, "a multi-output inner classifier", self.name,
                    "single-output inner classifiers")

    @property
    def classes(self):
        return self.head.classes[0]

    def proba(self):
        self._need("predict_proba")
        self._single_output()
        return self._block("proba", self.transformed)

    def decision(self):
        self._need("decision_function")
        return self._block("decision", self.raw)

    def log_proba(self):
        span = self.head.block("log_proba")
        if span is not None:
            return self.meta.select(self.transformed, range(*span))
        proba = self.proba()
        return self.meta.add(MetaUfunc(self.width(proba), "log"), [proba], "log_proba")

    def value(self):
        if self.head.task != "regression":
            _refuse(self.meta.owner, "an inner estimator that is not a regressor", self.name,
                    "regressors")
        return self._block("value", self.transformed)

    def label(self, values):
        """``values[i]`` where ``i`` is the class the inner classifier predicts."""
        if self.head.task != "classification":
            _refuse(self.meta.owner, "an inner estimator that is not a classifier", self.name,
                    "classifiers")
        self._single_output()
        values = np.asarray(values, dtype=np.float64)
        span = self.head.block("label_index")
        rule = self.head.decision_rule
        if span is not None:
            op, source = MetaLabel(1, "index", values), self.meta.select(self.transformed, [span[0]])
        elif rule == "argmax":
            source = self._block("proba", self.transformed)
            op = MetaLabel(self.width(source), "argmax", values)
        elif rule == "raw_argmax":
            op, source = MetaLabel(self.width(self.raw), "argmax", values), self.raw
        else:
            op = MetaLabel(self.width(self.raw), "ge" if rule == "raw_ge_zero" else "gt", values)
            source = self.raw
        return self.meta.add(op, [source], "label")

    def label_values(self):
        """The predicted label itself, as a number (the inner classes are numbers)."""
        classes = self.classes
        if classes.dtype.kind not in "biuf":
            _refuse(self.meta.owner, "inner class labels that are not numbers", list(classes[:3]),
                    "numeric labels")
        return self.label(classes.astype(np.float64))

    def positions(self, meta_classes):
        """Each inner class's position among ``meta_classes``."""
        meta_classes = list(np.asarray(meta_classes).tolist())
        found = []
        for c in np.asarray(self.classes).tolist():
            if c not in meta_classes:
                _refuse(self.meta.owner, "an inner class outside the meta-estimator's classes", c,
                        f"classes among {meta_classes[:5]}")
            found.append(meta_classes.index(c))
        return np.asarray(found)

    def binary_score(self):
        """scikit-learn's ``_predict_binary``: a regressor's prediction, else the
        decision function, else the positive class's probability."""
        from sklearn.base import is_regressor

        if is_regressor(self.estimator):
            return self.value()
        if hasattr(self.estimator, "decision_function"):
            score = self.decision()
        else:
            score = self.meta.select(self.proba(), [1])
        if self.width(score) != 1:
            _refuse(self.meta.owner, "an inner estimator with several scores", self.name,
                    "binary inner estimators")
        return score


class _Meta:
    """The graph of one meta-estimator, its inner models, and the head's fields."""

    def __init__(self, model, options):
        self.model, self.options = model, options
        self.owner = type(model).__name__
        self.n_features = int(model.n_features_in_)
        self.builder = GraphBuilder(ValueType.floats(self.n_features))
        self.inners = []

    def inner(self, estimator, value=INPUT):
        inner = _Inner(self, _unwrap(estimator), value, prefix=f"{len(self.inners)}/")
        self.inners.append(inner)
        return inner

    def add(self, op, inputs, name=""):
        outputs = self.builder.add(op, list(inputs), name)
        return outputs[0] if len(outputs) == 1 else outputs

    def single_predictions(self, estimators):
        """Each inner regressor's one-column prediction (several targets are refused)."""
        values = []
        for estimator in estimators:
            value = self.inner(estimator).value()
            if self.width(value) != 1:
                _refuse(self.owner, "an inner regressor with several targets", self.width(value), 1)
            values.append(value)
        return values

    def select(self, value, indices, always=False):
        """Columns ``indices`` of ``value``; ``always``: a copy even of every column in
        order (``X[:, features]``: NumPy's copy has its own memory layout, which decides
        the summation order of a matrix product after it)."""
        indices = [int(i) for i in indices]
        width = self.builder.type_of(value).width
        if indices == list(range(width)) and not always:
            return value
        return self.add(Select(width, tuple(indices)), [value], "select")

    def concat(self, values, name="concat"):
        widths = tuple(self.builder.type_of(v).width for v in values)
        return self.add(Concat(widths), values, name)

    def width(self, value):
        return self.builder.type_of(value).width

    def outputs(self, blocks):
        """(role, value) pairs side by side: the transformed result and Head.blocks."""
        spans, start = [], 0
        for role, value in blocks:
            width = self.width(value)
            spans.append((role, start, start + width))
            start += width
        return self.concat([v for _, v in blocks], "outputs"), tuple(spans)

    def build(self, task, methods, raw, blocks, allows_nan=None, allows_inf=None, **fields):
        transformed, spans = self.outputs(blocks)
        inner_nan = all(i.head.allows_nan for i in self.inners)
        inner_inf = all(i.head.allows_inf for i in self.inners)
        head = sklearn_head(
            self.model, task, methods, blocks=spans,
            allows_nan=inner_nan if allows_nan is None else allows_nan and inner_nan,
            allows_inf=inner_inf if allows_inf is None else allows_inf and inner_inf, **fields)
        graph = self.builder.build(raw, transformed)
        return ModelIR(head=head, graph=graph).validate()


def _methods(model, candidates):
    return tuple(m for m in candidates if hasattr(model, m))


# ------------------------------------------------------------------ searches
@register_frontend("sklearn", *SEARCHES)
def _search(model, options):
    owner = type(model).__name__
    if model.refit is False:
        _refuse(owner, "refit", False,
                "refit=True or a scorer name: with refit=False the search keeps no "
                "best_estimator_ to convert; refit the search, or fit the estimator with "
                "best_params_ and convert it")
    check_fitted(model, "best_estimator_")
    inner = find_frontend(model.best_estimator_)(model.best_estimator_, options)
    head = inner.head.replace(estimator=f"{owner}({inner.head.estimator})")
    return ModelIR(head=head, graph=inner.graph, schema=inner.schema).validate()


# ------------------------------------------------------------------ voting
def _weights(weights):
    return np.asarray(weights) if weights is not None else np.zeros(0)


@register_frontend("sklearn", "VotingClassifier")
def _voting_classifier(model, options):
    check_fitted(model, "estimators_")
    meta = _Meta(model, options)
    k = len(model.classes_)
    weights = model._weights_not_none
    inners = [meta.inner(e) for e in model.estimators_]
    everything = np.arange(k)
    if model.voting == "soft":
        probas = []
        for inner in inners:
            proba = inner.proba()
            if not np.array_equal(inner.positions(everything), everything):
                _refuse(meta.owner, "an inner estimator fitted on fewer classes",
                        inner.classes.tolist(), "inner estimators fitted on every class")
            probas.append(proba)
        average = meta.add(MetaAverage((k,) * len(probas), "stack", _weights(weights)), probas,
                           "average")
        label = meta.add(MetaLabel(k, "argmax", everything), [average], "label")
        blocks = [("proba", average), ("label_index", label)]
        methods = ("predict", "predict_proba")
        if model.flatten_transform:
            blocks.append(("transform", meta.concat(probas)))
            methods += ("transform",)
        return meta.build("classification", methods, average, blocks,
                          classes=(np.asarray(model.classes_),))
    votes = [inner.label(inner.positions(everything)) for inner in inners]
    m = len(votes)
    counts = meta.add(MetaAccumulate(
        n_outputs=k, widths=(1,) * m, columns=(tuple(everything),) * m, as_index=(True,) * m,
        weights=_weights(weights).astype(np.float64) if weights is not None else np.ones(m),
        weighted=weights is not None), votes, "votes")
    label = meta.add(MetaLabel(k, "argmax", everything), [counts], "label")
    # transform (the inner labels, as integers) is left out: the container gives floats
    return meta.build("classification", ("predict",), counts, [("label_index", label)],
                      classes=(np.asarray(model.classes_),))


@register_frontend("sklearn", "VotingRegressor")
def _voting_regressor(model, options):
    check_fitted(model, "estimators_")
    meta = _Meta(model, options)
    predictions = meta.single_predictions(model.estimators_)
    m = len(predictions)
    average = meta.add(MetaAverage((1,) * m, "columns", _weights(model._weights_not_none)),
                       predictions, "average")
    return meta.build("regression", ("predict", "transform"), average,
                      [("value", average), ("transform", meta.concat(predictions))])


# ------------------------------------------------------------------ stacking
def _stack_features(meta, model, binary):
    features = []
    for est, method in zip(model.estimators_, model.stack_method_):
        inner = meta.inner(est)
        if method == "predict_proba":
            value = inner.proba()
            if binary:
                value = meta.select(value, range(1, meta.width(value)))
        elif method == "decision_function":
            value = inner.decision()
        elif method == "predict":
            value = inner.label_values() if inner.head.task == "classification" else inner.value()
        else:
            _refuse(meta.owner, "stack_method", method,
                    "predict_proba, decision_function, predict")
        features.append(value)
    if model.passthrough:
        features.append(INPUT)
    return meta.concat(features, "stack")


def _final(meta, model, X_meta):
    final = model.final_estimator_
    ir = find_frontend(final)(final, meta.options)
    if ir.head.n_features != meta.width(X_meta) or not _plain(ir.schema):
        _refuse(meta.owner, "a final estimator reading other columns than the stacked ones",
                ir.head.n_features, meta.width(X_meta))
    inner = _Inner.__new__(_Inner)
    inner.meta, inner.estimator, inner.head, inner.name = meta, final, ir.head, type(final).__name__
    inner.raw, inner.transformed = meta.builder.splice(ir.graph, X_meta, prefix="final/")
    return inner


def _stacking_flags(model, final):
    """A NaN (infinity) passed through reaches the final estimator, which may refuse it."""
    if not model.passthrough:
        return {}
    return dict(allows_nan=final.head.allows_nan, allows_inf=final.head.allows_inf)


@register_frontend("sklearn", "StackingClassifier")
def _stacking_classifier(model, options):
    check_fitted(model, "estimators_")
    if isinstance(model.classes_, list):
        _refuse("StackingClassifier", "multilabel targets", "multilabel-indicator",
                "binary and multiclass targets")
    meta = _Meta(model, options)
    k = len(model.classes_)
    X_meta = _stack_features(meta, model, binary=k == 2)
    final = _final(meta, model, X_meta)
    blocks = []
    methods = _methods(model, ("predict", "predict_proba", "decision_function", "transform"))
    if "predict_proba" in methods:
        blocks.append(("proba", final.proba()))
    blocks.append(("label_index", final.label(final.positions(np.arange(k)))))
    if "decision_function" in methods:
        blocks.append(("decision", final.decision()))
    blocks.append(("transform", X_meta))
    return meta.build("classification", methods, final.raw, blocks,
                      classes=(np.asarray(model.classes_),), **_stacking_flags(model, final))


@register_frontend("sklearn", "StackingRegressor")
def _stacking_regressor(model, options):
    check_fitted(model, "estimators_")
    meta = _Meta(model, options)
    X_meta = _stack_features(meta, model, binary=False)
    final = _final(meta, model, X_meta)
    value = final.value()
    return meta.build("regression", ("predict", "transform"), final.raw,
                      [("value", value), ("transform", X_meta)],
                      squeeze_output=final.head.squeeze_output, **_stacking_flags(model, final))


# ------------------------------------------------------------------ bagging
def _jobs(model):
    from sklearn.ensemble._base import _partition_estimators

    _, _, starts = _partition_estimators(model.n_estimators, model.n_jobs)
    groups = tuple(int(s) for s in starts[:-1] if s < len(model.estimators_))
    if int(starts[-1]) != len(model.estimators_):
        _refuse(type(model).__name__, "estimators_ of another length than n_estimators",
                len(model.estimators_), model.n_estimators)
    return groups


def _bagged(meta, model):
    inners = []
    for est, features in zip(model.estimators_, model.estimators_features_):
        value = meta.select(INPUT, np.asarray(features), always=True)
        inners.append(meta.inner(est, value))
    return inners


def _sum(meta, values, n_outputs, columns, as_index, groups, divisor, mode="add"):
    m = len(values)
    op = MetaAccumulate(n_outputs=n_outputs, widths=tuple(meta.width(v) for v in values),
                        columns=tuple(columns), as_index=tuple(as_index), weights=np.ones(m),
                        groups=groups, divisor=float(divisor), mode=mode)
    return meta.add(op, values, "sum")


@register_frontend("sklearn", "BaggingClassifier")
def _bagging_classifier(model, options):
    check_fitted(model, "estimators_")
    meta = _Meta(model, options)
    k = int(model.n_classes_)
    groups, n = _jobs(model), model.n_estimators
    inners = _bagged(meta, model)
    everything = np.arange(k)
    values, columns, as_index = [], [], []
    for inner, est in zip(inners, model.estimators_):
        positions = inner.positions(everything)
        if hasattr(est, "predict_proba"):
            values.append(inner.proba())
            columns.append(tuple(positions))
            as_index.append(False)
        else:  # scikit-learn counts the votes instead
            values.append(inner.label(positions))
            columns.append(tuple(everything))
            as_index.append(True)
    proba = _sum(meta, values, k, columns, as_index, groups, n)
    label = meta.add(MetaLabel(k, "argmax", everything), [proba], "label")
    blocks = [("proba", proba), ("label_index", label)]
    if hasattr(model.estimator_, "predict_log_proba"):
        logs = [inner.log_proba() for inner in inners]
        log_proba = _sum(meta, logs, k, [tuple(inner.positions(everything)) for inner in inners],
                         [False] * len(logs), groups, n, mode="logaddexp")
        blocks.append(("log_proba", log_proba))
    methods = _methods(model, ("predict", "predict_proba", "predict_log_proba", "decision_function"))
    if "decision_function" in methods:
        decisions = [inner.decision() for inner in inners]
        width = meta.width(decisions[0])
        decision = _sum(meta, decisions, width, [tuple(range(width))] * len(decisions),
                        [False] * len(decisions), groups, n)
        blocks.append(("decision", decision))
    return meta.build("classification", methods, proba, blocks,
                      classes=(np.asarray(model.classes_),))


@register_frontend("sklearn", "BaggingRegressor")
def _bagging_regressor(model, options):
    check_fitted(model, "estimators_")
    meta = _Meta(model, options)
    inners = _bagged(meta, model)
    values = [inner.value() for inner in inners]
    width = meta.width(values[0])
    total = _sum(meta, values, width, [tuple(range(width))] * len(values),
                 [False] * len(values), _jobs(model), model.n_estimators)
    return meta.build("regression", ("predict",), total, [("value", total)],
                      squeeze_output=inners[0].head.squeeze_output)


# ------------------------------------------------------------------ AdaBoost
@register_frontend("sklearn", "AdaBoostClassifier")
def _adaboost_classifier(model, options):
    check_fitted(model, "estimators_")
    algorithm = getattr(model, "algorithm", "SAMME")
    if algorithm not in ("SAMME", "deprecated"):
        _refuse("AdaBoostClassifier", "algorithm", algorithm, "'SAMME'")
    k = int(model.n_classes_)
    if k < 2:
        _refuse("AdaBoostClassifier", "a model fitted on one class", k, "two classes or more")
    meta = _Meta(model, options)
    labels, pos, neg = [], [], []
    for est, w in zip(model.estimators_, model.estimator_weights_):
        inner = meta.inner(est)
        labels.append(inner.label(inner.positions(model.classes_)))
        pos.append(w)
        neg.append(-1 / (k - 1) * w)  # scikit-learn's expression, in its order
    decision, proba = meta.add(MetaSamme(k, np.asarray(pos), np.asarray(neg),
                                         float(model.estimator_weights_.sum())), labels, "samme")
    label = meta.add(MetaLabel(meta.width(decision), "gt" if k == 2 else "argmax",
                               np.arange(k)), [decision], "label")
    # scikit-learn checks the input itself (finite values only) before the estimators
    return meta.build("classification",
                      ("predict", "predict_proba", "predict_log_proba", "decision_function"),
                      decision, [("proba", proba), ("label_index", label), ("decision", decision)],
                      classes=(np.asarray(model.classes_),), allows_nan=False, allows_inf=False)


@register_frontend("sklearn", "AdaBoostRegressor")
def _adaboost_regressor(model, options):
    check_fitted(model, "estimators_")
    meta = _Meta(model, options)
    values = meta.single_predictions(model.estimators_)
    weights = np.asarray(model.estimator_weights_[:len(values)], dtype=np.float64)
    median = meta.add(MetaWeightedMedian(weights), values, "median")
    return meta.build("regression", ("predict",), median, [("value", median)],
                      allows_nan=False, allows_inf=False)


# ------------------------------------------------------------------ calibration
def _calibrator(owner, calibrator, method):
    if method == "sigmoid":
        return dict(a=[calibrator.a_], b=[calibrator.b_])
    if calibrator.out_of_bounds != "clip":
        _refuse(owner, "isotonic out_of_bounds", calibrator.out_of_bounds, "'clip'")
    call = getattr(getattr(calibrator, "f_", None), "_call", None)
    return dict(x=np.asarray(calibrator.X_thresholds_, np.float64),
                y=np.asarray(calibrator.y_thresholds_, np.float64),
                numpy_interp=getattr(call, "__name__", "") != "_call_linear")


@register_frontend("sklearn", "CalibratedClassifierCV")
def _calibrated(model, options):
    check_fitted(model, "calibrated_classifiers_")
    owner = "CalibratedClassifierCV"
    if model.method not in ("sigmoid", "isotonic"):
        _refuse(owner, "method", model.method, "'sigmoid', 'isotonic'")
    meta = _Meta(model, options)
    classes = np.asarray(model.classes_)
    k = len(classes)
    probas = []
    for calibrated in model.calibrated_classifiers_:
        inner = meta.inner(calibrated.estimator)
        if hasattr(inner.estimator, "decision_function"):
            scores = inner.decision()
        else:
            scores = inner.proba()
            if meta.width(scores) == 2:  # the positive class's column, as scikit-learn reads it
                scores = meta.select(scores, [1])
        c = meta.width(scores)
        positions = inner.positions(calibrated.classes)
        class_index = [1] if k == 2 else list(positions[:c])
        if len(calibrated.calibrators) != c:
            _refuse(owner, "calibrators of another number than the scores", len(calibrated.calibrators), c)
        parts = [_calibrator(owner, cal, model.method) for cal in calibrated.calibrators]
        if model.method == "sigmoid":
            fields = dict(a=np.concatenate([p["a"] for p in parts]),
                          b=np.concatenate([p["b"] for p in parts]))
        else:
            lengths = [len(p["x"]) for p in parts]
            fields = dict(x=np.concatenate([p["x"] for p in parts]),
                          y=np.concatenate([p["y"] for p in parts]),
                          numpy_interp=all(p["numpy_interp"] for p in parts),
                          offsets=tuple(np.concatenate([[0], np.cumsum(lengths)]).tolist()))
        probas.append(meta.add(MetaCalibrate(c, k, tuple(class_index), model.method, **fields),
                               [scores], "calibrated"))
    m = len(probas)
    mean = _sum(meta, probas, k, [tuple(range(k))] * m, [False] * m, (0,), m)
    label = meta.add(MetaLabel(k, "argmax", np.arange(k)), [mean], "label")
    return meta.build("classification", ("predict", "predict_proba"), mean,
                      [("proba", mean), ("label_index", label)], classes=(classes,))


# ------------------------------------------------------------------ one-vs-rest, one-vs-one
def _threshold(estimator):
    """scikit-learn's ``_threshold_for_binary_predict``."""
    from sklearn.base import is_classifier

    return 0.0 if hasattr(estimator, "decision_function") and is_classifier(estimator) else 0.5


@register_frontend("sklearn", "OneVsRestClassifier")
def _one_vs_rest(model, options):
    check_fitted(model, "estimators_")
    owner = "OneVsRestClassifier"
    if model.multilabel_:
        _refuse(owner, "multilabel targets", "multilabel-indicator", "binary and multiclass targets")
    meta = _Meta(model, options)
    classes = np.asarray(model.classes_)
    inners = [meta.inner(e) for e in model.estimators_]
    scores = [inner.binary_score() for inner in inners]
    if len(inners) == 1:
        label = meta.add(MetaLabel(1, "gt", [0, 1], _threshold(model.estimators_[0])), scores,
                         "label")
    else:
        label = meta.add(MetaLabel(len(scores), "argmax", np.arange(len(scores))),
                         [meta.concat(scores)], "label")
    methods = _methods(model, ("predict", "predict_proba", "decision_function"))
    blocks = []
    if "predict_proba" in methods:
        positives = [meta.select(inner.proba(), [1]) for inner in inners]
        blocks.append(("proba", meta.add(MetaOvrProba(len(positives)), positives, "proba")))
    blocks.append(("label_index", label))
    if "decision_function" in methods:
        if len(inners) == 1:
            blocks.append(("decision", inners[0].decision()))
        else:
            decisions = [inner.decision() for inner in inners]
            if any(meta.width(d) != 1 for d in decisions):
                _refuse(owner, "inner estimators with several decision columns", "", "binary ones")
            blocks.append(("decision", meta.concat(decisions)))
    return meta.build("classification", methods, label, blocks, classes=(classes,))


@register_frontend("sklearn", "OneVsOneClassifier")
def _one_vs_one(model, options):
    check_fitted(model, "estimators_")
    owner = "OneVsOneClassifier"
    if getattr(model, "pairwise_indices_", None) is not None:
        _refuse(owner, "a pairwise (precomputed kernel) estimator", "pairwise_indices_",
                "estimators on features")
    meta = _Meta(model, options)
    classes = np.asarray(model.classes_)
    k = len(classes)
    inners = [meta.inner(e) for e in model.estimators_]
    predictions = meta.concat([inner.label_values() for inner in inners], "predictions")
    confidences = meta.concat([inner.binary_score() for inner in inners], "confidences")
    Y = meta.add(MetaOvo(k), [predictions, confidences], "ovo")
    if k == 2:
        decision = meta.select(Y, [1])
        label = meta.add(MetaLabel(1, "gt", [0, 1], _threshold(model.estimators_[0])),
                         [decision], "label")
    else:
        decision = Y
        label = meta.add(MetaLabel(k, "argmax", np.arange(k)), [Y], "label")
    return meta.build("classification", ("predict", "decision_function"), Y,
                      [("label_index", label), ("decision", decision)], classes=(classes,))


# ------------------------------------------------------------------ multi-output, chains
@register_frontend("sklearn", "MultiOutputRegressor")
def _multi_output_regressor(model, options):
    check_fitted(model, "estimators_")
    meta = _Meta(model, options)
    values = meta.single_predictions(model.estimators_)
    together = meta.concat(values, "predictions")
    return meta.build("regression", ("predict",), together, [("value", together)],
                      squeeze_output=False)


@register_frontend("sklearn", "MultiOutputClassifier")
def _multi_output_classifier(model, options):
    check_fitted(model, "estimators_")
    owner = "MultiOutputClassifier"
    if len(model.estimators_) < 2:
        _refuse(owner, "one output", len(model.estimators_), "two outputs or more")
    meta = _Meta(model, options)
    probas, classes = [], []
    for e in model.estimators_:
        inner = meta.inner(e)
        head = inner.head
        # The container labels each output by the argmax of its probabilities: exact for
        # inner classifiers that predict so (trees, forests, soft votes), not for those
        # that decide on their scores.
        if head.task != "classification" or head.decision_rule != "argmax" \
                or head.block("label_index") is not None or "predict_proba" not in head.methods:
            _refuse(owner, "an inner classifier that does not predict the argmax of its "
                    "predict_proba", inner.name,
                    "inner classifiers predicting by their probabilities (trees, forests)")
        probas.append(inner.proba())
        classes.append(inner.classes)
    proba = meta.concat(probas, "proba")
    return meta.build("classification", ("predict", "predict_proba"), proba, [("proba", proba)],
                      classes=tuple(classes))


def _chain_output(inner, method):
    """``_get_response_values(estimator, X, response_method=method)`` of a binary inner
    classifier (the positive class: the last one), or of a regressor."""
    if inner.head.task == "regression":
        return inner.value()
    if len(inner.classes) > 2:
        _refuse(inner.meta.owner, "an inner classifier with more than two classes",
                len(inner.classes), "binary targets")
    if method == "predict":
        return inner.label_values()
    if method == "predict_proba":
        proba = inner.proba()
        return inner.meta.select(proba, [inner.meta.width(proba) - 1])
    if method == "decision_function":
        return inner.decision()
    _refuse(inner.meta.owner, "chain_method", method,
            "predict, predict_proba, decision_function")


@register_frontend("sklearn", "ClassifierChain", "RegressorChain")
def _chain(model, options):
    check_fitted(model, "estimators_")
    meta = _Meta(model, options)
    classifier = meta.owner == "ClassifierChain"
    chain_method = getattr(model, "chain_method_", "predict")
    if isinstance(chain_method, (list, tuple)):
        chain_method = chain_method[0]
    # hstack((X, previous predictions in float64)): float64 from the first estimator on
    X = meta.add(MetaUfunc(meta.n_features, "float64"), [INPUT], "X")
    methods = _methods(model, ("predict", "predict_proba", "predict_log_proba", "decision_function")) \
        if classifier else ("predict",)
    wanted = [m for m in ("predict", "predict_proba", "decision_function") if m in methods]
    features, outputs = [], {m: [] for m in wanted}
    for est in model.estimators_:
        X_aug = meta.concat([X] + features, "X_aug") if features else X
        inner = meta.inner(est, X_aug)
        features.append(_chain_output(inner, chain_method))
        for m in wanted:
            outputs[m].append(_chain_output(inner, m))
    inverse = np.empty_like(model.order_)
    inverse[model.order_] = np.arange(len(model.order_))
    roles = {"predict": "value", "predict_proba": "proba", "decision_function": "decision"}
    blocks = [(roles[m], meta.select(meta.concat(outputs[m], m), inverse)) for m in wanted]
    # validate_data rejects NaN and infinity before the first estimator
    return meta.build("regression", methods, blocks[0][1], blocks, squeeze_output=False,
                      allows_nan=False, allows_inf=False)


# ------------------------------------------------------------------ transformed target
_INVERSE_SCALERS = {
    "StandardScaler": lambda t: ([("mul", t.scale_)] if t.with_std and t.scale_ is not None else [])
    + ([("add", t.mean_)] if t.with_mean else []),
    "MinMaxScaler": lambda t: [("sub", t.min_), ("div", t.scale_)],
    "MaxAbsScaler": lambda t: [("mul", t.scale_)],
    "RobustScaler": lambda t: ([("mul", t.scale_)] if t.with_scaling else [])
    + ([("add", t.center_)] if t.with_centering else []),
}


@register_frontend("sklearn", "TransformedTargetRegressor")
def _transformed_target(model, options):
    check_fitted(model, "regressor_")
    owner = "TransformedTargetRegressor"
    meta = _Meta(model, options)
    prediction = meta.inner(model.regressor_).value()
    width = meta.width(prediction)
    transformer = model.transformer_
    name = type(transformer).__name__
    if name == "FunctionTransformer":
        inverse = transformer.inverse_func
        if inverse is None:
            ufunc = "identity"
        elif isinstance(inverse, np.ufunc) and inverse.__name__ in UFUNCS \
                and getattr(np, inverse.__name__) is inverse:
            ufunc = inverse.__name__
        else:
            _refuse(owner, "inverse_func", getattr(inverse, "__name__", inverse),
                    f"None or a NumPy ufunc among {', '.join(u for u in UFUNCS if u not in ('float64', 'identity'))}")
        if transformer.inv_kw_args:
            _refuse(owner, "inv_kw_args", transformer.inv_kw_args, "None")
        value = meta.add(MetaUfunc(width, ufunc), [prediction], "inverse")
    elif name in _INVERSE_SCALERS:
        steps = _INVERSE_SCALERS[name](transformer)
        if not steps:
            value = meta.add(MetaUfunc(width, "identity"), [prediction], "inverse")
        else:
            operands = [np.broadcast_to(np.asarray(v, dtype=np.float64), (width,)).copy()
                        for _, v in steps]
            op = ColumnOps(name=f"{name}.inverse_transform", n_features=width,
                           ops=tuple(s for s, _ in steps), operands=tuple(operands),
                           cast_operand=(False,) * len(steps))
            value = meta.add(op, [prediction], "inverse")
    else:
        _refuse(owner, "transformer", name,
                "None, a FunctionTransformer with a NumPy ufunc inverse, "
                + ", ".join(_INVERSE_SCALERS))
    return meta.build("regression", ("predict",), value, [("value", value)],
                      squeeze_output=int(getattr(model, "_training_dim", 1)) == 1)
