"""Ops of the meta-estimators: models that combine other models' results (voting,
stacking, bagging, boosting, calibration, one-vs-rest / one-vs-one, chains, target
transforms).

A meta-estimator's graph holds its inner models' graphs, spliced in whole; these ops
read the inner results and combine them as scikit-learn does. Every ``reference``
repeats scikit-learn's own NumPy expressions, in its order and layout (the CPU route
runs them, so its answer is scikit-learn's to the bit):

* ``meta_label``: an inner classifier's decision (argmax, or a threshold on one
  column) as a class index, looked up in a table (a label's value, or its position
  among the meta-estimator's classes);
* ``meta_accumulate``: running sums starting at zero (or at -inf with
  ``logaddexp``), per job as scikit-learn's ``Parallel`` splits the estimators, then
  divided (bagging, hard votes, the mean of calibrated classifiers);
* ``meta_average``: ``np.average`` over stacked results (soft voting, VotingRegressor);
* ``meta_calibrate``: one calibrated classifier's ``predict_proba`` (sigmoid or
  isotonic maps, then the normalisation);
* ``meta_ovr_proba``, ``meta_ovo``: one-vs-rest probabilities, one-vs-one votes;
* ``meta_samme``: AdaBoostClassifier's decision function and probabilities;
* ``meta_weighted_median``: AdaBoostRegressor's weighted median;
* ``meta_ufunc``: a NumPy ufunc (TransformedTargetRegressor's inverse function, a log,
  a cast to float64).

The ops give a model its scores (``gives_scores``): the graph's raw result may be
written by one of them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ..graph import Op, ValueType, register_op
from ..transforms import _sigmoid

__all__ = ["MetaLabel", "MetaAccumulate", "MetaAverage", "MetaCalibrate", "MetaOvrProba",
           "MetaOvo", "MetaSamme", "MetaWeightedMedian", "MetaUfunc", "UFUNCS", "META_KINDS"]

F64 = np.dtype(np.float64)


def _ints(values):
    return tuple(int(v) for v in values)


def _check_inputs(op, input_types, widths):
    op.expect(len(input_types) == len(widths),
              f"reads {len(input_types)} values; it combines {len(widths)}")
    for i, (value, width) in enumerate(zip(input_types, widths)):
        op.expect_width(value, width, f"input {i}")
        op.expect_numeric(value, f"input {i}")


# ------------------------------------------------------------------ labels
LABEL_RULES = ("argmax", "gt", "ge", "index")


@register_op
@dataclass(frozen=True, eq=False)
class MetaLabel(Op):
    """``values[index]`` as one float64 column, where ``index`` is the class an inner
    classifier predicts from its ``n_columns`` results: ``argmax`` over them (ties to
    the first, as ``np.argmax``), column 0 ``gt``/``ge`` ``threshold`` (1, else 0), or
    column 0 itself (``index``: an inner model's label index)."""

    kind = "meta_label"
    gives_scores = True
    n_columns: int
    rule: str
    values: np.ndarray
    threshold: float = 0.0

    def __post_init__(self):
        object.__setattr__(self, "values", np.asarray(self.values, dtype=np.float64).reshape(-1))

    def validate(self):
        self.expect(self.rule in LABEL_RULES, f"rule {self.rule!r} not in {LABEL_RULES}")
        if self.rule == "index":
            self.expect(self.n_columns == 1 and len(self.values) >= 1, "index reads one column")
        else:
            n = self.n_columns if self.rule == "argmax" else 2
            self.expect(len(self.values) == n, f"{len(self.values)} values for {n} classes")
        return self

    def output_types(self, input_types):
        _check_inputs(self, input_types, [self.n_columns])
        return [ValueType.floats(1)]

    def output_dtypes(self, input_dtypes):
        return [F64]

    def indices(self, x):
        if self.rule == "argmax":
            return np.argmax(x, axis=1)
        if self.rule == "index":
            return x[:, 0].astype(np.int64)
        if self.rule == "gt":
            return (x[:, 0] > self.threshold).astype(np.int64)
        return (x[:, 0] >= self.threshold).astype(np.int64)

    def reference(self, inputs):
        return [self.values[self.indices(inputs[0])].reshape(-1, 1)]

    def to_saved(self):
        return ({"n_columns": self.n_columns, "rule": self.rule, "threshold": self.threshold},
                {"values": self.values})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_columns=int(meta["n_columns"]), rule=str(meta["rule"]),
                   values=arrays["values"], threshold=float(meta["threshold"]))


# ------------------------------------------------------------------ running sums
@register_op
@dataclass(frozen=True, eq=False)
class MetaAccumulate(Op):
    """Sums of the inputs into ``n_outputs`` columns, as scikit-learn's loops add them.

    Input ``i`` has ``widths[i]`` columns going to output columns ``columns[i]``; with
    ``as_index[i]`` it is one column holding an index into ``columns[i]`` instead,
    and adds ``weights[i]`` (1 when ``weighted`` is False) at that column (a vote, as
    ``proba[i, prediction] += 1`` and ``np.bincount(..., weights)`` add them).
    ``groups`` are the first input of each job: each job sums from zeros (``mode``
    ``add``) or from -inf (``logaddexp``), the jobs are then summed in order (Python's
    ``sum``, or ``np.logaddexp``), and the total is divided by ``divisor`` (``add``)
    or has ``np.log(divisor)`` subtracted (``logaddexp``); ``divisor`` 0: neither."""

    kind = "meta_accumulate"
    gives_scores = True
    n_outputs: int
    widths: Tuple[int, ...]
    columns: Tuple[Tuple[int, ...], ...]
    as_index: Tuple[bool, ...]
    weights: np.ndarray
    weighted: bool = False
    groups: Tuple[int, ...] = (0,)
    divisor: float = 0.0
    mode: str = "add"

    def __post_init__(self):
        object.__setattr__(self, "widths", _ints(self.widths))
        object.__setattr__(self, "columns", tuple(_ints(c) for c in self.columns))
        object.__setattr__(self, "as_index", tuple(bool(b) for b in self.as_index))
        object.__setattr__(self, "weights", np.asarray(self.weights, dtype=np.float64).reshape(-1))
        object.__setattr__(self, "groups", _ints(self.groups))

    def validate(self):
        m = len(self.widths)
        self.expect(m >= 1, "no inputs")
        self.expect(len(self.columns) == len(self.as_index) == len(self.weights) == m,
                    "columns, as_index and weights need one entry per input")
        self.expect(self.mode in ("add", "logaddexp"), f"mode {self.mode!r} not in add, logaddexp")
        self.expect(self.groups and self.groups[0] == 0 and list(self.groups) == sorted(set(self.groups))
                    and self.groups[-1] < m, f"groups {self.groups} are not job starts")
        for i, (w, cols, index) in enumerate(zip(self.widths, self.columns, self.as_index)):
            self.expect(w == 1 if index else len(cols) == w,
                        f"input {i}: {len(cols)} target columns for {w} columns")
            bad = [c for c in cols if not 0 <= c < self.n_outputs]
            self.expect(not bad, f"input {i}: columns {bad[:5]} outside 0..{self.n_outputs - 1}")
            self.expect(not (index and self.mode != "add"), "votes add; they do not logaddexp")
        return self

    def output_types(self, input_types):
        _check_inputs(self, input_types, self.widths)
        return [ValueType.floats(self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        return [F64]

    def _identity(self, i):
        return not self.as_index[i] and self.columns[i] == tuple(range(self.n_outputs))

    def reference(self, inputs):
        n = inputs[0].shape[0]
        bounds = list(self.groups) + [len(inputs)]
        jobs = []
        for start, stop in zip(bounds[:-1], bounds[1:]):
            if self.mode == "add":
                acc = np.zeros((n, self.n_outputs))
            else:
                acc = np.empty((n, self.n_outputs))
                acc.fill(-np.inf)
            for i in range(start, stop):
                x = inputs[i]
                cols = list(self.columns[i])
                if self.as_index[i]:
                    target = np.asarray(cols)[x[:, 0].astype(np.int64)]
                    w = self.weights[i] if self.weighted else 1
                    acc[np.arange(n), target] += w  # one vote per row
                    continue
                if self.weighted:
                    x = x * self.weights[i]
                if self.mode == "add":
                    if self._identity(i):
                        acc += x
                    else:
                        acc[:, cols] += x[:, range(len(cols))]
                elif self._identity(i):
                    acc = np.logaddexp(acc, x)
                else:
                    acc[:, cols] = np.logaddexp(acc[:, cols], x[:, range(len(cols))])
            jobs.append(acc)
        if self.mode == "add":
            total = sum(jobs)
            return [total / self.divisor if self.divisor else total]
        total = jobs[0]
        for job in jobs[1:]:
            total = np.logaddexp(total, job)
        if self.divisor:
            total -= np.log(self.divisor)
        return [total]

    def to_saved(self):
        return ({"n_outputs": self.n_outputs, "widths": list(self.widths),
                 "columns": [list(c) for c in self.columns], "as_index": list(self.as_index),
                 "weighted": self.weighted, "groups": list(self.groups),
                 "divisor": self.divisor, "mode": self.mode}, {"weights": self.weights})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_outputs=int(meta["n_outputs"]), widths=tuple(meta["widths"]),
                   columns=tuple(tuple(c) for c in meta["columns"]),
                   as_index=tuple(meta["as_index"]), weights=arrays["weights"],
                   weighted=bool(meta["weighted"]), groups=tuple(meta["groups"]),
                   divisor=float(meta["divisor"]), mode=str(meta["mode"]))


# ------------------------------------------------------------------ np.average
@register_op
@dataclass(frozen=True, eq=False)
class MetaAverage(Op):
    """``np.average`` of ``len(widths)`` results. ``layout`` ``stack``:
    ``np.average(np.asarray(results), axis=0, weights)`` (VotingClassifier's
    probabilities); ``columns``: one-column results as
    ``np.average(np.asarray([r[:, 0], ...]).T, axis=1, weights)`` (VotingRegressor).
    ``weights`` keep scikit-learn's array dtype (integers stay integers); empty: none."""

    kind = "meta_average"
    gives_scores = True
    widths: Tuple[int, ...]
    layout: str
    weights: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "widths", _ints(self.widths))
        object.__setattr__(self, "weights", np.asarray(self.weights).reshape(-1))

    def validate(self):
        self.expect(self.layout in ("stack", "columns"), f"layout {self.layout!r}")
        self.expect(len(set(self.widths)) == 1, f"results of different widths {self.widths}")
        self.expect(self.layout == "stack" or self.widths[0] == 1, "columns takes 1-column results")
        self.expect(len(self.weights) in (0, len(self.widths)), "one weight per result")
        self.expect(self.weights.dtype.kind in "iuf", f"weights of dtype {self.weights.dtype}")
        return self

    def output_types(self, input_types):
        _check_inputs(self, input_types, self.widths)
        return [ValueType.floats(self.widths[0])]

    def output_dtypes(self, input_dtypes):
        dtype = np.result_type(*input_dtypes)
        if len(self.weights):
            dtype = np.result_type(dtype, self.weights.dtype)
        return [dtype]

    def reference(self, inputs):
        weights = self.weights if len(self.weights) else None
        if self.layout == "stack":
            return [np.average(np.asarray(inputs), axis=0, weights=weights)]
        stacked = np.asarray([x[:, 0] for x in inputs]).T
        return [np.average(stacked, axis=1, weights=weights).reshape(-1, 1)]

    def to_saved(self):
        return {"widths": list(self.widths), "layout": self.layout}, {"weights": self.weights}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(widths=tuple(meta["widths"]), layout=str(meta["layout"]),
                   weights=arrays["weights"])


# ------------------------------------------------------------------ calibration
@register_op
@dataclass(frozen=True, eq=False)
class MetaCalibrate(Op):
    """One ``_CalibratedClassifier.predict_proba``: column ``j`` of the inner scores
    (``n_columns``) goes through calibrator ``j`` into class ``class_index[j]`` of
    ``n_classes``; then the normalisation (binary: ``1 - p``; else divided by the row
    sum where it is not 0, uniform where it is) and values in (1, 1 + 1e-5] set to 1.

    ``sigmoid``: ``expit(-(a * s + b))``. ``isotonic``: scipy's ``interp1d`` over the
    fitted thresholds (``x``, ``y`` concatenated, ``offsets`` of each calibrator),
    after clipping to the thresholds' range, as ``IsotonicRegression.predict`` does;
    ``interp1d`` hands float64 thresholds to ``np.interp`` (``numpy_interp``), others
    to its own slope formula."""

    kind = "meta_calibrate"
    gives_scores = True
    n_columns: int
    n_classes: int
    class_index: Tuple[int, ...]
    method: str
    a: np.ndarray = None
    b: np.ndarray = None
    x: np.ndarray = None
    y: np.ndarray = None
    offsets: Tuple[int, ...] = ()
    numpy_interp: bool = True

    def __post_init__(self):
        object.__setattr__(self, "class_index", _ints(self.class_index))
        object.__setattr__(self, "offsets", _ints(self.offsets))
        for name in ("a", "b", "x", "y"):
            value = getattr(self, name)
            object.__setattr__(self, name, np.zeros(0) if value is None
                               else np.asarray(value, dtype=np.float64).reshape(-1))

    def validate(self):
        self.expect(self.method in ("sigmoid", "isotonic"), f"method {self.method!r}")
        self.expect(len(self.class_index) == self.n_columns, "one class per scores column")
        self.expect(all(0 <= c < self.n_classes for c in self.class_index), "class outside range")
        if self.method == "sigmoid":
            self.expect(len(self.a) == len(self.b) == self.n_columns, "one (a, b) per column")
        else:
            self.expect(len(self.offsets) == self.n_columns + 1 and self.offsets[0] == 0
                        and self.offsets[-1] == len(self.x) == len(self.y)
                        and all(b > a for a, b in zip(self.offsets[:-1], self.offsets[1:])),
                        "isotonic thresholds and offsets disagree")
        return self

    def output_types(self, input_types):
        _check_inputs(self, input_types, [self.n_columns])
        return [ValueType.floats(self.n_classes)]

    def output_dtypes(self, input_dtypes):
        return [F64]

    def thresholds(self, j):
        return (self.x[self.offsets[j]:self.offsets[j + 1]],
                self.y[self.offsets[j]:self.offsets[j + 1]])

    def _isotonic(self, j, T):
        x, y = self.thresholds(j)
        T = np.asarray(T, dtype=x.dtype)
        T = np.clip(T, x[0], x[-1])
        if len(x) == 1:
            return y.repeat(T.shape)
        if self.numpy_interp:
            return np.interp(T, x, y).astype(T.dtype)
        # scipy.interpolate.interp1d(x, y, kind="linear")._call_linear
        hi = np.searchsorted(x, T).clip(1, len(x) - 1).astype(int)
        lo = hi - 1
        slope = (y[hi] - y[lo]) / (x[hi] - x[lo])
        return (slope * (T - x[lo]) + y[lo]).astype(T.dtype)

    def reference(self, inputs):
        predictions = inputs[0]
        n_classes = self.n_classes
        proba = np.zeros((predictions.shape[0], n_classes))
        for j, (class_idx, this_pred) in enumerate(zip(self.class_index, predictions.T)):
            if self.method == "sigmoid":
                proba[:, class_idx] = _sigmoid(-(self.a[j] * this_pred + self.b[j]))
            else:
                proba[:, class_idx] = self._isotonic(j, this_pred)
        if n_classes == 2:
            proba[:, 0] = 1.0 - proba[:, 1]
        else:
            denominator = np.sum(proba, axis=1)[:, np.newaxis]
            uniform_proba = np.full_like(proba, 1 / n_classes)
            proba = np.divide(proba, denominator, out=uniform_proba, where=denominator != 0)
        proba[(1.0 < proba) & (proba <= 1.0 + 1e-5)] = 1.0
        return [proba]

    def to_saved(self):
        return ({"n_columns": self.n_columns, "n_classes": self.n_classes,
                 "class_index": list(self.class_index), "method": self.method,
                 "offsets": list(self.offsets), "numpy_interp": self.numpy_interp},
                {"a": self.a, "b": self.b, "x": self.x, "y": self.y})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_columns=int(meta["n_columns"]), n_classes=int(meta["n_classes"]),
                   class_index=tuple(meta["class_index"]), method=str(meta["method"]),
                   a=arrays["a"], b=arrays["b"], x=arrays["x"], y=arrays["y"],
                   offsets=tuple(meta["offsets"]), numpy_interp=bool(meta["numpy_interp"]))


# ------------------------------------------------------------------ one-vs-rest / one-vs-one
@register_op
@dataclass(frozen=True, eq=False)
class MetaOvrProba(Op):
    """OneVsRestClassifier.predict_proba from ``n_estimators`` one-column positive-class
    probabilities: one estimator gives ``(1 - Y, Y)``; otherwise the rows are divided
    by their sums where those are not 0."""

    kind = "meta_ovr_proba"
    gives_scores = True
    n_estimators: int

    def output_types(self, input_types):
        _check_inputs(self, input_types, [1] * self.n_estimators)
        return [ValueType.floats(2 if self.n_estimators == 1 else self.n_estimators)]

    def output_dtypes(self, input_dtypes):
        return [np.result_type(*input_dtypes)]

    def reference(self, inputs):
        Y = np.array([x[:, 0] for x in inputs]).T
        if self.n_estimators == 1:
            Y = np.concatenate(((1 - Y), Y), axis=1)
        row_sums = np.sum(Y, axis=1)[:, np.newaxis]
        np.divide(Y, row_sums, out=Y, where=row_sums != 0)
        return [Y]

    def to_saved(self):
        return {"n_estimators": self.n_estimators}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_estimators=int(meta["n_estimators"]))


@register_op
@dataclass(frozen=True, eq=False)
class MetaOvo(Op):
    """scikit-learn's ``_ovr_decision_function``: the pairwise estimators' predicted
    labels (0 or 1) and confidences, (n, n_classes (n_classes - 1) / 2) each, into
    votes plus confidences mapped to (-1/3, 1/3)."""

    kind = "meta_ovo"
    gives_scores = True
    n_classes: int

    @property
    def n_pairs(self):
        return self.n_classes * (self.n_classes - 1) // 2

    def output_types(self, input_types):
        _check_inputs(self, input_types, [self.n_pairs, self.n_pairs])
        return [ValueType.floats(self.n_classes)]

    def output_dtypes(self, input_dtypes):
        return [F64]

    def reference(self, inputs):
        predictions, confidences = inputs
        n_classes = self.n_classes
        n_samples = predictions.shape[0]
        votes = np.zeros((n_samples, n_classes))
        sum_of_confidences = np.zeros((n_samples, n_classes))
        k = 0
        for i in range(n_classes):
            for j in range(i + 1, n_classes):
                sum_of_confidences[:, i] -= confidences[:, k]
                sum_of_confidences[:, j] += confidences[:, k]
                votes[predictions[:, k] == 0, i] += 1
                votes[predictions[:, k] == 1, j] += 1
                k += 1
        transformed_confidences = sum_of_confidences / (3 * (np.abs(sum_of_confidences) + 1))
        return [votes + transformed_confidences]

    def to_saved(self):
        return {"n_classes": self.n_classes}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_classes=int(meta["n_classes"]))


# ------------------------------------------------------------------ AdaBoost
def _softmax(X):
    """scikit-learn's ``utils.extmath.softmax`` (in place on its argument)."""
    max_prob = np.reshape(np.max(X, axis=1), (-1, 1))
    X -= max_prob
    np.exp(X, out=X)
    sum_prob = np.reshape(np.sum(X, axis=1), (-1, 1))
    X /= sum_prob
    return X


@register_op
@dataclass(frozen=True, eq=False)
class MetaSamme(Op):
    """AdaBoostClassifier (SAMME): each input is the class index (among ``n_classes``)
    one estimator predicts; ``decision = sum(where(predicted, pos[i], neg[i])) /
    divisor`` (binary: ``-d[:, 0] + d[:, 1]``, one column), then the probabilities
    ``softmax(decision / (n_classes - 1))`` (binary: of ``(-d, d) / 2``)."""

    kind = "meta_samme"
    gives_scores = True
    n_classes: int
    pos: np.ndarray
    neg: np.ndarray
    divisor: float

    def __post_init__(self):
        object.__setattr__(self, "pos", np.asarray(self.pos, dtype=np.float64).reshape(-1))
        object.__setattr__(self, "neg", np.asarray(self.neg, dtype=np.float64).reshape(-1))

    def validate(self):
        self.expect(self.n_classes >= 2, "AdaBoost with one class predicts a constant")
        self.expect(len(self.pos) == len(self.neg) >= 1, "one (pos, neg) pair per estimator")
        return self

    def output_types(self, input_types):
        _check_inputs(self, input_types, [1] * len(self.pos))
        width = 1 if self.n_classes == 2 else self.n_classes
        return [ValueType.floats(width), ValueType.floats(self.n_classes)]

    def output_dtypes(self, input_dtypes):
        return [F64, F64]

    def reference(self, inputs):
        classes = np.arange(self.n_classes)
        pred = sum(np.where((x[:, 0].astype(np.int64) == classes[:, None]).T, w, v)
                   for x, w, v in zip(inputs, self.pos, self.neg))
        pred /= self.divisor
        if self.n_classes == 2:
            pred[:, 0] *= -1
            decision = pred.sum(axis=1)
            proba = _softmax(np.vstack([-decision, decision]).T / 2)
            return [decision.reshape(-1, 1), proba]
        proba = _softmax(pred / (self.n_classes - 1))
        return [pred, proba]

    def to_saved(self):
        return ({"n_classes": self.n_classes, "divisor": self.divisor},
                {"pos": self.pos, "neg": self.neg})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_classes=int(meta["n_classes"]), pos=arrays["pos"], neg=arrays["neg"],
                   divisor=float(meta["divisor"]))


@register_op
@dataclass(frozen=True, eq=False)
class MetaWeightedMedian(Op):
    """AdaBoostRegressor's weighted median of its estimators' one-column predictions:
    sorted per row (``np.argsort``), the first whose cumulative weight reaches half
    the total."""

    kind = "meta_weighted_median"
    gives_scores = True
    weights: np.ndarray

    def __post_init__(self):
        object.__setattr__(self, "weights", np.asarray(self.weights, dtype=np.float64).reshape(-1))

    def output_types(self, input_types):
        _check_inputs(self, input_types, [1] * len(self.weights))
        return [ValueType.floats(1)]

    def output_dtypes(self, input_dtypes):
        return [np.result_type(*input_dtypes)]

    def reference(self, inputs):
        predictions = np.array([x[:, 0] for x in inputs]).T
        sorted_idx = np.argsort(predictions, axis=1)
        weight_cdf = np.cumsum(self.weights[sorted_idx], axis=1)
        median_or_above = weight_cdf >= 0.5 * weight_cdf[:, -1][:, np.newaxis]
        median_idx = median_or_above.argmax(axis=1)
        rows = np.arange(predictions.shape[0])
        median_estimators = sorted_idx[rows, median_idx]
        return [predictions[rows, median_estimators].reshape(-1, 1)]

    def to_saved(self):
        return {}, {"weights": self.weights}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(weights=arrays["weights"])


# ------------------------------------------------------------------ ufuncs
UFUNCS = ("log", "exp", "expm1", "log1p", "sqrt", "square", "negative", "reciprocal",
          "float64", "identity")


@register_op
@dataclass(frozen=True, eq=False)
class MetaUfunc(Op):
    """A NumPy ufunc applied to every column (``float64``: a cast; ``identity``:
    a copy)."""

    kind = "meta_ufunc"
    gives_scores = True
    n_features: int
    name: str

    def validate(self):
        self.expect(self.name in UFUNCS, f"ufunc {self.name!r} not in {UFUNCS}")
        return self

    def output_types(self, input_types):
        _check_inputs(self, input_types, [self.n_features])
        return [ValueType.floats(self.n_features)]

    def output_dtypes(self, input_dtypes):
        if self.name == "float64":
            return [F64]
        return [np.result_type(input_dtypes[0], np.float16)]

    def reference(self, inputs):
        x = inputs[0]
        if self.name == "float64":
            return [x.astype(np.float64)]
        if self.name == "identity":
            return [x.copy()]
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            return [getattr(np, self.name)(x)]

    def to_saved(self):
        return {"n_features": self.n_features, "name": self.name}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), name=str(meta["name"]))


META_KINDS = ("meta_label", "meta_accumulate", "meta_average", "meta_calibrate",
              "meta_ovr_proba", "meta_ovo", "meta_samme", "meta_weighted_median", "meta_ufunc")
