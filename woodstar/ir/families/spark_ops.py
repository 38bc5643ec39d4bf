"""Spark ML's classifier head: how ``rawPrediction`` becomes ``probability`` and
``prediction`` (``spark_classify``), Spark's ``Bucketizer`` (``spark_bucketize``), and
``spark_float64``: the input widened to float64, as Spark computes every stage in
double whatever the input's float type.

``spark_classify`` reads the raw scores (n, n_classes) and writes one value of
``n_classes + 1`` columns: the probabilities, then the index of the predicted class.
Each ``probability`` rule is the expression Spark's model evaluates, in its order:

* ``logistic``: binary LogisticRegressionModel, whose raw vector is ``[-margin,
  margin]``: ``p0 = 1 / (1 + exp(-raw[0]))``, ``p1 = 1 - p0``;
* ``softmax``: multinomial LogisticRegressionModel: ``exp(r - m)`` of each entry,
  ``m`` the largest (NaN and -inf never count; at least the lowest double), summed left
  to right, each multiplied by ``1 / sum``; a row holding ``+inf`` is the row times
  0.0 (so NaN and -inf give NaN) with 1.0 at the first ``+inf``;
* ``normalize``: tree classifiers: each entry divided by the left-to-right sum;
* ``gbt_logistic``: GBTClassificationModel: ``p0 = 1 / (1 + exp(-2 * raw[0]))``,
  ``p1 = 1 - p0``.

``prediction``: ``argmax`` (the first largest raw entry, Spark's ``Vector.argmax``),
``binary_threshold`` (class 1 when ``raw[1] > raw_threshold``, LogisticRegressionModel
with ``threshold``) or ``thresholds`` (the first largest ``probability[i] /
thresholds[i]``, strictly greater than every earlier one, starting below -inf).

``spark_bucketize``: per column, Spark's bucket search over ``splits``: ``x ==
splits[-1]`` is the last bucket; otherwise the bucket is found by Java's
``Arrays.binarySearch`` on doubles, which orders ``-0.0`` below ``0.0`` (so ``-0.0`` at
a split ``0.0`` falls in the bucket below). NaN goes to the extra bucket
``len(splits) - 1`` where ``keep_nan``, else NaN (the frontend refuses NaN at the
edge where Spark raises). The outer splits are -inf and inf, so no value falls
outside them.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Tuple

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["SparkClassify", "SparkBucketize", "SparkFloat64", "PROBABILITY_RULES",
           "PREDICTION_RULES", "spark_argmax"]

PROBABILITY_RULES = ("logistic", "softmax", "normalize", "gbt_logistic")
PREDICTION_RULES = ("argmax", "binary_threshold", "thresholds")


def spark_argmax(values: np.ndarray) -> np.ndarray:
    """Index of the first largest entry of each row, by Spark's loop (a later entry
    wins only when strictly greater; a NaN never wins, a NaN first entry never loses)."""
    best = values[:, 0].copy()
    index = np.zeros(len(values), dtype=np.int64)
    for i in range(1, values.shape[1]):
        greater = values[:, i] > best
        best = np.where(greater, values[:, i], best)
        index = np.where(greater, i, index)
    return index


def _softmax(raw):
    top = np.max(np.where(raw > -np.inf, raw, _LOWEST), axis=1, initial=_LOWEST,
                 keepdims=True)  # NaN and -inf never win; the start is the lowest double
    with np.errstate(invalid="ignore", over="ignore"):
        exp = np.exp(raw - top)
    total = np.zeros(len(raw))
    for k in range(raw.shape[1]):
        total = total + exp[:, k]
    with np.errstate(divide="ignore", invalid="ignore"):
        out = exp * (1.0 / total)[:, None]
    infinite = np.isposinf(raw).any(axis=1)
    if infinite.any():  # the first +inf entry: 1, every other entry times 0.0
        rows = raw[infinite]
        with np.errstate(invalid="ignore"):
            one_hot = rows * 0.0
        one_hot[np.arange(len(rows)), np.argmax(np.isposinf(rows), axis=1)] = 1.0
        out[infinite] = one_hot
    return out


_LOWEST = np.finfo(np.float64).min


def _normalize(raw):
    total = np.zeros(len(raw))
    for k in range(raw.shape[1]):
        total = total + raw[:, k]
    with np.errstate(invalid="ignore", divide="ignore"):
        return raw / total[:, None]


def spark_probability(rule: str, raw: np.ndarray) -> np.ndarray:
    with np.errstate(over="ignore"):
        if rule == "logistic":
            p0 = 1.0 / (1.0 + np.exp(-raw[:, 0]))
            return np.stack([p0, 1.0 - p0], axis=1)
        if rule == "gbt_logistic":
            p0 = 1.0 / (1.0 + np.exp(-2.0 * raw[:, 0]))
            return np.stack([p0, 1.0 - p0], axis=1)
    if rule == "softmax":
        return _softmax(raw)
    return _normalize(raw)


@register_op
@dataclass(frozen=True, eq=False)
class SparkClassify(Op):
    """Raw scores (n, ``n_classes``) -> [probability (``n_classes``), prediction index]."""

    kind = "spark_classify"
    n_classes: int
    probability: str
    prediction: str = "argmax"
    raw_threshold: float = 0.0  # binary_threshold: class 1 when raw[1] > this
    thresholds: Tuple[float, ...] = ()  # thresholds: one per class

    def __post_init__(self):
        object.__setattr__(self, "thresholds", tuple(float(t) for t in self.thresholds))

    def validate(self):
        self.expect(self.probability in PROBABILITY_RULES,
                    f"probability rule {self.probability!r} not in {PROBABILITY_RULES}")
        self.expect(self.prediction in PREDICTION_RULES,
                    f"prediction rule {self.prediction!r} not in {PREDICTION_RULES}")
        self.expect(self.n_classes >= 2, f"{self.n_classes} classes; Spark needs 2 or more")
        if self.probability in ("logistic", "gbt_logistic") or self.prediction == "binary_threshold":
            self.expect(self.n_classes == 2, f"{self.probability}/{self.prediction} needs 2 classes")
        if self.prediction == "thresholds":
            self.expect(len(self.thresholds) == self.n_classes,
                        f"{len(self.thresholds)} thresholds for {self.n_classes} classes")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_classes)
        return [ValueType.floats(self.n_classes + 1)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def predict_index(self, raw, proba):
        if self.prediction == "binary_threshold":
            return (raw[:, 1] > self.raw_threshold).astype(np.int64)
        if self.prediction == "thresholds":
            scaled = np.empty_like(proba)
            with np.errstate(invalid="ignore", divide="ignore"):
                for i, t in enumerate(self.thresholds):
                    scaled[:, i] = proba[:, i] / t
            best = np.full(len(proba), -np.inf)
            index = np.zeros(len(proba), dtype=np.int64)
            for i in range(self.n_classes):
                greater = scaled[:, i] > best
                best = np.where(greater, scaled[:, i], best)
                index = np.where(greater, i, index)
            return index
        return spark_argmax(raw)

    def reference(self, inputs):
        raw = np.asarray(inputs[0], dtype=np.float64)
        proba = spark_probability(self.probability, raw)
        index = self.predict_index(raw, proba)
        return [np.concatenate([proba, index[:, None].astype(np.float64)], axis=1)]

    def to_saved(self):
        return ({"n_classes": self.n_classes, "probability": self.probability,
                 "prediction": self.prediction, "raw_threshold": self.raw_threshold,
                 "thresholds": list(self.thresholds)}, {})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_classes=int(meta["n_classes"]), probability=str(meta["probability"]),
                   prediction=str(meta["prediction"]), raw_threshold=float(meta["raw_threshold"]),
                   thresholds=tuple(meta["thresholds"]))


def bucket_of(splits: np.ndarray, x: np.ndarray, keep_nan: bool) -> np.ndarray:
    """Spark's bucket index of each of ``x`` (float64; NaN where Spark raises)."""
    # Java's binarySearch orders -0.0 before 0.0: compare on a key that does too.
    key_splits = _java_order(splits)
    key_x = _java_order(x)
    position = np.searchsorted(key_splits, key_x, side="left")
    found = (position < len(splits)) & (key_splits[np.minimum(position, len(splits) - 1)] == key_x)
    bucket = np.where(found, position, position - 1).astype(np.float64)
    outside = (~found) & ((position == 0) | (position == len(splits)))
    bucket[outside] = np.nan
    bucket[x == splits[-1]] = len(splits) - 2
    nan = np.isnan(x)
    bucket[nan] = len(splits) - 1 if keep_nan else np.nan
    return bucket


def _java_order(values):
    """An int64 key whose order is Java's ``Double.compare`` on non-NaN doubles
    (-0.0 < 0.0): the bits, with the negative half flipped to count downwards."""
    bits = np.ascontiguousarray(values, dtype=np.float64).view(np.int64)
    return np.where(bits < 0, bits ^ np.int64(0x7FFFFFFFFFFFFFFF), bits)


@register_op
@dataclass(frozen=True, eq=False)
class SparkBucketize(Op):
    """Per column ``j``, the bucket of each value in ``splits[j]`` (see the module's
    docstring); ``keep_nan[j]``: Spark's ``handleInvalid="keep"``."""

    kind = "spark_bucketize"
    n_features: int
    splits: Tuple[np.ndarray, ...]
    keep_nan: Tuple[bool, ...]

    def __post_init__(self):
        object.__setattr__(self, "splits", tuple(np.ascontiguousarray(s, dtype=np.float64)
                                                 for s in self.splits))
        object.__setattr__(self, "keep_nan", tuple(bool(k) for k in self.keep_nan))

    def validate(self):
        self.expect(len(self.splits) == len(self.keep_nan) == self.n_features,
                    f"{len(self.splits)} split lists and {len(self.keep_nan)} flags for "
                    f"{self.n_features} columns")
        for j, s in enumerate(self.splits):
            self.expect(s.ndim == 1 and len(s) >= 3 and bool(np.all(np.diff(s) > 0)),
                        f"column {j}: splits must be 3 or more strictly increasing values")
            self.expect(s[0] == -np.inf and s[-1] == np.inf,
                        f"column {j}: the outer splits must be -inf and inf")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_features)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def reference(self, inputs):
        X = np.asarray(inputs[0], dtype=np.float64)
        out = np.empty(X.shape, dtype=np.float64)
        for j in range(self.n_features):
            out[:, j] = bucket_of(self.splits[j], X[:, j], self.keep_nan[j])
        return [out]

    def to_saved(self):
        return ({"n_features": self.n_features, "keep_nan": list(self.keep_nan)},
                {f"splits_{j}": s for j, s in enumerate(self.splits)})

    @classmethod
    def from_saved(cls, meta, arrays):
        n = int(meta["n_features"])
        return cls(n_features=n, splits=tuple(arrays[f"splits_{j}"] for j in range(n)),
                   keep_nan=tuple(bool(k) for k in meta["keep_nan"]))


@register_op
@dataclass(frozen=True, eq=False)
class SparkFloat64(Op):
    """Its input, widened to float64 (exact); column kinds unchanged."""

    kind = "spark_float64"
    n_features: int

    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_features)
        return [value]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def reference(self, inputs):
        return [np.asarray(inputs[0], dtype=np.float64)]

    def to_saved(self):
        return {"n_features": self.n_features}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]))
