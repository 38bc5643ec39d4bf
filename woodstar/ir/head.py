"""The estimator head: how a model's raw outputs become the estimator's methods.

The TreeEnsemble says what function the trees compute; the head says what the
source estimator does with it (labels, which methods exist, 1-D or 2-D outputs), so
the container can reproduce the estimator's public API without knowing its library.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from ..exceptions import InvalidModelError

__all__ = ["Head", "TASKS", "DECISION_RULES", "METHODS", "BLOCK_ROLES"]

TASKS = ("regression", "classification", "anomaly", "ranking", "transform", "forecast")
DECISION_RULES = (
    "argmax",  # label = classes[argmax(proba)]; ties go to the first class
    "raw_ge_zero",  # binary on one raw margin: class 1 when raw >= 0 (GradientBoosting)
    "raw_gt_zero",  # binary on one raw margin: class 1 when raw > 0 (HistGradientBoosting)
    "raw_argmax",  # label = classes[argmax(raw)] (linear classifiers decide on scores)
    "multilabel",  # predict: the (n, n_labels) indicator proba > 0.5, as ints (MLPClassifier)
)
METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function", "score_samples",
           "transform")
# Named column blocks of the transformed output, for models whose methods read more
# than one result (``Head.blocks``): the block a method reads, instead of the default.
BLOCK_ROLES = (
    "proba",  # predict_proba (default: all of transformed)
    "log_proba",  # predict_log_proba (default: log of proba)
    "label_index",  # predict: one column, the index into classes (default: decision_rule)
    "value",  # a regressor's predict (default: all of transformed)
    "decision",  # decision_function (default: raw)
    "score_samples",  # one column (default for anomaly models: transformed[:, 0])
    "transform",  # transform (default: all of transformed)
)


@dataclass(frozen=True, eq=False)
class Head:
    """What the container exposes for one converted estimator.

    ``class_groups`` lists, for a classifier, the number of classes of each output
    (one entry for an ordinary classifier, several for multi-output ones); the
    transformed outputs hold those groups' probabilities side by side.
    """

    estimator: str
    task: str
    n_features: int
    methods: Tuple[str, ...]
    feature_names: Optional[Tuple[str, ...]] = None
    classes: Optional[Tuple[np.ndarray, ...]] = None
    decision_rule: str = "argmax"
    squeeze_output: bool = True  # 1-D predict/decision_function for a single output
    labels_as_column: bool = False  # predict gives labels as (n, 1) (CatBoost MultiClass)
    anomaly_offset: float = 0.0  # IsolationForest.offset_
    allows_nan: bool = True  # the source accepts NaN at predict time
    allows_inf: bool = True  # the source accepts +-inf (after rounding to its precision)
    inf_rejected_features: Tuple[int, ...] = ()  # columns where the source rejects +-inf
    library_versions: Tuple[Tuple[str, str], ...] = ()
    blocks: Tuple[Tuple[str, int, int], ...] = ()  # (role, start, stop) in transformed
    nan_scores_error: str = ""  # raw scores holding NaN: the source refuses the input (why)
    # 1-D label transformers (LabelEncoder, LabelBinarizer): ``transform`` takes a 1-D
    # array of labels, read as the one input column, after casting it to
    # ``input_1d_dtype`` where the source casts it (LabelEncoder casts to its classes'
    # dtype); ``squeeze_output`` gives a 1-D result.
    input_1d: bool = False
    input_1d_dtype: str = ""
    # The 1-D labels must be a classification target as scikit-learn's ``type_of_target``
    # sees it (no NaN, no non-integer floats); when they hold at most two distinct
    # values (a "binary" target), ``transform`` reads only ``binary_labels_block``
    # (start, stop) of its columns (LabelBinarizer with one or two classes).
    labels_target_check: bool = False
    binary_labels_block: Tuple[int, ...] = ()
    # ``transform`` returns this dtype (default: the route's float); "labels_int": the 1-D
    # labels' signed integer dtype, else int64 (scikit-learn's label_binarize)
    transform_dtype: str = ""
    # Forecasters (task "forecast", woodstar/_forecast.py): ``output_names`` names the
    # columns of the transformed output; ``frame_columns`` lists the input frame's
    # columns as (name, role) in matrix order: role "datetime:<unit>" fills two matrix
    # columns (whole days since the epoch and the ticks of <unit> within the day, both
    # exact in float64), "number", "cap", "floor" and "condition" (a boolean) one each.
    output_names: Tuple[str, ...] = ()
    frame_columns: Tuple[Tuple[str, str], ...] = ()
    # ONNX graphs (frontends/onnx_ml): the graph's input tensors as (name, element type
    # "float"/"double"/"int64"/"string", width), in matrix order; the container also
    # takes a dict {name: array} as ONNX Runtime does (woodstar/_onnx_feeds.py).
    input_blocks: Tuple[Tuple[str, str, int], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "methods", tuple(self.methods))
        if self.feature_names is not None:
            object.__setattr__(self, "feature_names", tuple(str(n) for n in self.feature_names))
        if self.classes is not None:
            object.__setattr__(self, "classes", tuple(np.asarray(c) for c in self.classes))
        object.__setattr__(self, "library_versions", tuple(tuple(v) for v in self.library_versions))
        object.__setattr__(self, "blocks", tuple((str(r), int(a), int(b)) for r, a, b in self.blocks))
        object.__setattr__(self, "binary_labels_block",
                           tuple(int(i) for i in self.binary_labels_block))
        object.__setattr__(self, "inf_rejected_features",
                           tuple(int(f) for f in self.inf_rejected_features))
        object.__setattr__(self, "output_names", tuple(str(n) for n in self.output_names))
        object.__setattr__(self, "frame_columns",
                           tuple((str(n), str(r)) for n, r in self.frame_columns))
        object.__setattr__(self, "input_blocks",
                           tuple((str(n), str(e), int(w)) for n, e, w in self.input_blocks))

    @property
    def class_groups(self) -> Tuple[int, ...]:
        return tuple(len(c) for c in self.classes) if self.classes is not None else ()

    @property
    def is_multi_output_classifier(self) -> bool:
        return self.classes is not None and len(self.classes) > 1

    def block(self, role):
        """(start, stop) of ``role``'s columns in the transformed output, or None."""
        for name, start, stop in self.blocks:
            if name == role:
                return start, stop
        return None

    def replace(self, **changes) -> "Head":
        return dataclasses.replace(self, **changes)

    def validate(self) -> "Head":
        def fail(message):
            raise InvalidModelError(f"Head of {self.estimator}: {message}")

        if self.task not in TASKS:
            fail(f"task {self.task!r} not in {TASKS}")
        unknown = [m for m in self.methods if m not in METHODS]
        if unknown:
            fail(f"methods {unknown} not in {METHODS}")
        if self.decision_rule not in DECISION_RULES:
            fail(f"decision_rule {self.decision_rule!r} not in {DECISION_RULES}")
        if self.task == "classification" and not self.classes:
            fail("a classifier needs its classes")
        bad = [r for r, a, b in self.blocks if r not in BLOCK_ROLES or not 0 <= a < b]
        if bad:
            fail(f"blocks {bad} are not (role in {BLOCK_ROLES}, start < stop)")
        if self.feature_names is not None and len(self.feature_names) != self.n_features:
            fail(f"{len(self.feature_names)} feature names for {self.n_features} features")
        return self
