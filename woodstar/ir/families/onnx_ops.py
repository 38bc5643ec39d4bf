"""Ops that repeat ONNX Runtime's own arithmetic where no woodstar op has it:
``onnx_tree_scores`` (below), ``onnx_linear`` (LinearClassifier/LinearRegressor,
MatMul, Gemm: MLAS's SGEMM), ``onnx_normalizer``, ``onnx_binarizer``, ``onnx_sigmoid``
(MLAS's logistic), ``onnx_cast``, ``onnx_svm`` (SVMRegressor/SVMClassifier: MLAS's
SGEMM, its one-row kernel, its tanh, glibc's expf; Platt scaling and pairwise coupling),
``onnx_softmax`` (MLAS's softmax kernels) and ``onnx_elementwise`` (plain float32
operators); each class says what it repeats.
Every op's arithmetic is written once, over a small set of array operations (``NumpyMath``
here, a Torch twin in the lowering), so the CPU route and the programs agree.

``onnx_tree_scores``: the aggregation and finalization of ONNX-ML
``TreeEnsembleRegressor``/``TreeEnsembleClassifier`` as ONNX Runtime's CPU kernel
computes them. The trees themselves are a ``trees`` op that writes every tree's
leaf vector into its own block of columns (one leaf per block, so those columns are
the float32 leaf weights, exactly); this op adds them up the way the kernel does:

* in the kernel's accumulator type: float32 for a float input, float64 for a double
  one (``accumulate``), tree after tree in the order the trees first appear in the
  node lists, each leaf's weights in their attribute order: one thread's order, or
  the order of a session with ``ort_threads`` intra-op threads, whose kernel splits a
  call's trees over them (from 51 rows; from 81 trees for one row of several outputs)
  and adds the partial sums (``_tree_sums``);
* "average" divides by the number of trees before the base values are added;
* a target no leaf ever writes has no score: the kernel writes 0 for it whatever its
  base value (``has_score``, decided by the frontend per target, never per row);
* the post-transform in float32 (``LOGISTIC``, ``SOFTMAX``, ``SOFTMAX_ZERO``,
  ``PROBIT``, ``NONE``), with the kernel's own formulas (a max-shifted softmax summed
  in class order; ``1 / (1 + exp(-|x|))`` mirrored for negative x; probit through the
  kernel's ``ErfInv`` approximation, which the frontend refuses: its cancellation
  turns the last bit of ``logf`` into many). ``exp`` is glibc's ``expf`` mirrored
  operation by operation (``glibc_expf``), so these are ONNX Runtime's bits; ``log``
  (PROBIT only) is a float64 result rounded to float32;
* a classifier's label from the scores before the transform: the first largest score
  among the classes that have one; with two classes the kernel's binary rules
  (``binary_case`` when every weight names one class: ``> 0.5`` when every weight is
  positive, else ``> 0``; otherwise ``> 0`` and the literal labels 1 and 0).

Outputs: ``raw`` (the scores, float32-rounded) and ``transformed``: a regressor's
values, or a classifier's probabilities followed by one column, the label's index.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["OnnxTreeScores", "OnnxLinear", "OnnxNormalizer", "OnnxCast", "OnnxBinarizer",
           "OnnxSigmoid", "POST_TRANSFORMS", "tree_scores", "linear_scores", "normalize",
           "mlas_logistic", "sigmoid_columns", "OnnxSvm", "svm_scores", "mlas_tanh"]

POST_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO", "PROBIT")
TREE_AGGREGATIONS = ("sum", "average", "min", "max")
ROLES = ("regressor", "classifier")
_ARRAYS = {"column_target": np.int64, "base_values": np.float64, "has_score": np.bool_}


class NumpyMath:
    """The array operations ``tree_scores`` needs, in NumPy (the lowering passes a
    Torch twin, so both routes run one definition)."""

    eager = True  # arrays are values here: a step may look at them (a Torch program may not)

    @staticmethod
    def cast(x, dtype):
        return np.asarray(x).astype(dtype, copy=False)

    @staticmethod
    def column(x, j):
        return x[:, j]

    @staticmethod
    def zeros(like, dtype):
        return np.zeros(like.shape[0], dtype=dtype)

    @staticmethod
    def full(like, value, dtype):
        return np.full(like.shape[0], value, dtype=dtype)

    @staticmethod
    def log32(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return np.log(x.astype(np.float64)).astype(np.float32)

    @staticmethod
    def sqrt(x):
        with np.errstate(invalid="ignore"):
            return np.sqrt(x)

    @staticmethod
    def where(condition, a, b):
        return np.where(condition, a, b)

    @staticmethod
    def abs(x):
        return np.abs(x)

    @staticmethod
    def stack(columns):
        return np.stack(columns, axis=1)

    @staticmethod
    def floor(x):
        return np.floor(x)

    @staticmethod
    def constant64(value, like):
        """A float64 value that broadcasts against ``like``."""
        return np.array([[value]], np.float64)

    @staticmethod
    def take(table, index):
        """``table[index]`` for a float64 array of integral indices."""
        return np.asarray(table, np.float64)[index.astype(np.int64)]

    @staticmethod
    def pow2(e):
        """2.0 ** e exactly, for float64 integral e in the normal range (from the bits)."""
        return ((e.astype(np.int64) + 1023) << 52).view(np.float64)

    @staticmethod
    def single_row(x):
        """Whether ``x`` holds one row (True/False here; a Torch program decides per call)."""
        return x.shape[0] == 1

    @staticmethod
    def scalar32(value, like):
        return np.float32(value)

    @staticmethod
    def frexp(x):
        """(mantissa in [0.5, 1), exponent), both float64, of positive finite x."""
        mantissa, exponent = np.frexp(x)
        return mantissa.astype(np.float64), exponent.astype(np.float64)

    @staticmethod
    def repeat_sweeps(sweep, values, done, most):
        """``values, done = sweep(values, done)`` up to ``most`` times, stopping once
        every row is done (a done row's values no longer change)."""
        for _ in range(most):
            if done.all():
                break
            values, done = sweep(values, done)
        return values

    @staticmethod
    def rows_at_least(x, n):
        """Whether ``x`` holds ``n`` rows or more (True/False here; a Torch program
        decides per call)."""
        return x.shape[0] >= n


def _f32(math, value, like):
    return math.full(like, np.float32(value), "float32")


def _expf(math, x):
    """float32 ``exp`` of a float32 column, as glibc's ``expf`` (``glibc_expf``): the
    ``std::exp`` of ONNX Runtime's post-transforms."""
    return glibc_expf(math, x[:, None])[:, 0]


def _logistic(math, x):
    one = _f32(math, 1.0, x)
    v = one / (one + _expf(math, -math.abs(x)))
    return math.where(x < 0, one - v, v)


def _erfinv(math, x):
    # ONNX Runtime's float ErfInv approximation, step by step in float32; its std::log
    # is glibc's logf (``glibc_logf``): the formula's cancellation near probability 0.5
    # turns one ulp of log into many, so a correctly rounded log would not do
    one = _f32(math, 1.0, x)
    sgn = math.where(x < 0, -one, one)
    x = (one - x) * (one + x)
    log = glibc_logf(math, x)
    a = np.float32(np.float32(np.pi) * np.float32(0.147))
    v = _f32(math, np.float32(2) / a, x) + _f32(math, 0.5, x) * log
    v2 = _f32(math, np.float32(1) / np.float32(0.147), x) * log
    v3 = -v + math.sqrt(v * v - v2)
    return sgn * math.sqrt(v3)


def _probit(math, x):
    two, one = _f32(math, 2.0, x), _f32(math, 1.0, x)
    return _f32(math, np.float32(np.sqrt(2.0)), x) * _erfinv(math, two * x - one)


def _softmax(math, columns, zero_skips):
    v_max = _f32(math, -np.finfo(np.float32).max, columns[0])
    for c in columns:
        v_max = math.where(c > v_max, c, v_max)
    total = _f32(math, 0.0, columns[0])
    out = []
    if zero_skips:
        exp_neg_max = _expf(math, -v_max)
        for c in columns:
            keep = (c > _f32(math, 1e-7, c)) | (c < _f32(math, -1e-7, c))
            e = _expf(math, c - v_max)
            total = total + math.where(keep, e, _f32(math, 0.0, c))
            out.append(math.where(keep, e, c * exp_neg_max))
    else:
        for c in columns:
            e = _expf(math, c - v_max)
            total = total + e
            out.append(e)
    return [e / total for e in out]


def _write_scores(math, columns, post_transform):
    """ONNX Runtime's ``write_scores`` for two or more float32 columns."""
    if post_transform == "PROBIT":
        return [_probit(math, c) for c in columns]
    if post_transform == "LOGISTIC":
        return [_logistic(math, c) for c in columns]
    if post_transform in ("SOFTMAX", "SOFTMAX_ZERO"):
        return _softmax(math, columns, post_transform == "SOFTMAX_ZERO")
    return list(columns)


# ONNX Runtime's tree kernel splits a call's trees over its threads from this many rows
# on (``parallel_N_`` + 1), and a one-row call's with several outputs from this many
# trees on (``parallel_tree_`` + 1).
ORT_SPLIT_FROM_ROWS, ORT_SPLIT_ONE_ROW_FROM_TREES = 51, 81


def thread_parts(n_trees, n_threads):
    """The trees each of ONNX Runtime's ``n_threads`` threads sums (its ``PartitionWork``:
    contiguous runs, the first ``n_trees % parts`` one tree longer)."""
    parts = min(n_threads, n_trees)
    size, extra = divmod(n_trees, parts)
    starts = [i * size + min(i, extra) for i in range(parts + 1)]
    return [range(a, b) for a, b in zip(starts[:-1], starts[1:])]


def _target_sums(op, per_tree, math, trees):
    """Each target's sum of the leaves of ``trees``, in order, in the accumulator's dtype."""
    scores = [math.zeros(per_tree, op.accumulate) for _ in range(op.n_targets)]
    targets = op.column_target.tolist()
    for t in trees:
        for j in range(t * op.width, (t + 1) * op.width):
            if targets[j] >= 0:
                scores[targets[j]] = scores[targets[j]] + math.column(per_tree, j)
    return scores


def _tree_sums(op, per_tree, math):
    """The trees' sums per target as ONNX Runtime's kernel adds them in a session of
    ``op.ort_threads`` intra-op threads: tree after tree on one thread; with more, for a
    call of more than 50 rows (or, with several outputs, one row and more than 80
    trees), each thread's run of trees summed alone and the parts added in thread
    order, which changes the last bit. The call's row count decides, per call."""
    sequential = _target_sums(op, per_tree, math, range(op.n_trees))
    threads, n_trees, several = op.ort_threads, op.n_trees, op.n_targets > 1
    # the kernel's conditions: more trees than threads (as many, with several outputs)
    split_many = threads > 1 and (n_trees >= threads if several else n_trees > threads)
    split_one = threads > 1 and several and n_trees >= ORT_SPLIT_ONE_ROW_FROM_TREES
    if not (split_many or split_one):
        return sequential
    parts = [_target_sums(op, per_tree, math, trees) for trees in thread_parts(n_trees, threads)]
    split = parts[0]
    for part in parts[1:]:
        split = [a + b for a, b in zip(split, part)]
    sums = sequential
    if split_many:
        many = math.rows_at_least(per_tree, ORT_SPLIT_FROM_ROWS)
        sums = [math.where(many, a, b) for a, b in zip(split, sums)]
    if split_one:
        several_rows = math.rows_at_least(per_tree, 2)
        sums = [math.where(several_rows, a, b) for a, b in zip(sums, split)]
    return sums


def tree_scores(op, per_tree, math=NumpyMath):
    """(raw, transformed) of ``op`` for the per-tree leaf columns ``per_tree``."""
    acc = op.accumulate
    per_tree = math.cast(per_tree, acc)
    K = op.n_targets
    scores = _tree_sums(op, per_tree, math)
    # constants as columns in the accumulator's dtype (never a NumPy scalar beside a
    # tensor, whose promotion rules differ)
    base = [math.full(per_tree, b, acc) for b in op.base_values.tolist()]
    has = list(op.has_score.tolist())
    if op.aggregation in ("min", "max"):
        return extreme_tree_scores(op, per_tree, math)
    if op.role == "regressor":
        if op.aggregation == "average":
            n = math.full(per_tree, op.n_trees, acc)
            scores = [s / n for s in scores]
        if K == 1:
            s = scores[0] + (base[0] if len(base) == 1 else math.zeros(per_tree, acc))
            s32 = math.cast(s, "float32")
            value = _probit(math, s32) if op.post_transform == "PROBIT" else s32
            return math.stack([s32]), math.stack([value])
        if len(base) == K:
            scores = [s + b for s, b in zip(scores, base)]
        columns = [math.cast(s, "float32") if h else _f32(math, 0.0, s) for s, h in zip(scores, has)]
        return math.stack(columns), math.stack(_write_scores(math, columns, op.post_transform))
    return _classifier_scores(op, scores, base, has, math)


def _classifier_scores(op, scores, base, has, math):
    acc = op.accumulate
    K = op.n_targets
    like = scores[0]
    if K > 2:
        for k, b in enumerate(base):
            scores[k] = b if not has[k] else scores[k] + b
            has[k] = True
        best = math.full(like, -1.0, acc)
        best_score = math.zeros(like, acc)
        for k in range(K):
            if has[k]:
                better = (best < 0) | (scores[k] > best_score)
                best = math.where(better, math.full(like, float(k), acc), best)
                best_score = math.where(better, scores[k], best_score)
        columns = [math.cast(s, "float32") if h else _f32(math, 0.0, s) for s, h in zip(scores, has)]
        proba = _write_scores(math, columns, op.post_transform)
        return math.stack(columns), math.stack(proba + [math.cast(best, "float32")])
    s0, s1 = scores
    h0, h1 = has
    size = 2
    add_second = -1
    if len(base) == 2:
        if h1:
            s1 = base[1] + s0  # the kernel adds class 0's score here, not class 1's
            s0 = -s1
        else:
            s0, s1 = s0 + base[0], s1 + base[1]
    elif len(base) == 1:
        s0 = s0 + base[0]
        size = 2 if h1 else 1
    else:
        add_second = 3
        size = 2 if h1 else 1
    zero = math.zeros(like, acc)
    pos = s1 if (size == 2 and h1) else (s0 if h0 else zero)
    threshold = 0.5 if (op.binary_case and op.weights_all_positive) else 0.0
    label = math.cast(pos > math.full(like, threshold, acc), "float32")
    if op.binary_case:
        add_second = 0 if op.weights_all_positive else 2
    value0 = s0 if h0 else zero
    if size == 2:
        value1 = s1 if h1 else zero
        columns = [math.cast(value0, "float32"), math.cast(value1, "float32")]
        proba = _write_scores(math, columns, op.post_transform)
    elif add_second in (0, 1):
        one = math.full(like, 1.0, acc)
        columns = [math.cast(value0, "float32")]
        proba = [math.cast(one - value0, "float32"), math.cast(value0, "float32")]
    else:  # mixed weights (2, 3); the frontend refuses the kernel's one-column cases
        columns = [math.cast(value0, "float32")]
        if op.post_transform == "LOGISTIC":
            proba = [_logistic(math, math.cast(-value0, "float32")),
                     _logistic(math, math.cast(value0, "float32"))]
        else:
            proba = [math.cast(-value0, "float32"), math.cast(value0, "float32")]
    return math.stack(columns), math.stack(proba + [label])


def binary_writes_one_column(n_base, has_score, binary_case, post_transform):
    """Whether ONNX Runtime's classifier kernel writes only the first of two
    probability columns (the second is left uninitialized): woodstar refuses these."""
    size = 2 if (n_base == 2 or has_score[1]) else 1
    if size == 2:
        return False
    return post_transform == "PROBIT" or (not binary_case and n_base == 1)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxTreeScores(Op):
    """See the module docstring. ``column_target[j]``: the target (class) the
    per-tree column ``j`` adds to, -1 for padding; ``width`` columns per tree."""

    kind = "onnx_tree_scores"

    n_trees: int
    width: int
    n_targets: int
    column_target: np.ndarray
    base_values: np.ndarray
    has_score: np.ndarray
    role: str = "regressor"
    accumulate: str = "float32"
    aggregation: str = "sum"
    post_transform: str = "NONE"
    binary_case: bool = False
    weights_all_positive: bool = True
    ort_threads: int = 1  # the ONNX Runtime session's intra-op threads (``_tree_sums``)

    def __post_init__(self):
        for name, dtype in _ARRAYS.items():
            value = np.ascontiguousarray(getattr(self, name), dtype=dtype).reshape(-1)
            value.flags.writeable = False
            object.__setattr__(self, name, value)

    @property
    def output_width(self) -> int:
        if self.role == "regressor":
            return self.n_targets
        return max(self.n_targets, 2) + 1

    @property
    def raw_width(self) -> int:
        if self.role == "classifier" and self.n_targets == 2:
            size = 2 if (len(self.base_values) == 2 or self.has_score[1]) else 1
            return size
        return self.n_targets

    def validate(self):
        self.expect(self.role in ROLES, f"role {self.role!r} not in {ROLES}")
        self.expect(self.accumulate in ("float32", "float64"),
                    f"accumulate {self.accumulate!r} is not float32 or float64")
        self.expect(isinstance(self.ort_threads, int) and self.ort_threads >= 1,
                    f"ort_threads {self.ort_threads!r} is not a positive int")
        self.expect(self.aggregation in TREE_AGGREGATIONS,
                    f"aggregation {self.aggregation!r} not in {TREE_AGGREGATIONS}")
        self.expect(self.post_transform in POST_TRANSFORMS,
                    f"post_transform {self.post_transform!r} not in {POST_TRANSFORMS}")
        self.expect(self.n_trees >= 1 and self.width >= 1 and self.n_targets >= 1,
                    "needs at least one tree, one column per tree and one target")
        self.expect(len(self.column_target) == self.n_trees * self.width,
                    f"column_target has {len(self.column_target)} entries; expected "
                    f"{self.n_trees} trees x {self.width}")
        self.expect(bool(np.all(self.column_target < self.n_targets)),
                    "column_target names a target beyond n_targets")
        self.expect(len(self.has_score) == self.n_targets, "has_score needs one flag per target")
        self.expect(len(self.base_values) in (0, 1, self.n_targets),
                    f"{len(self.base_values)} base values for {self.n_targets} targets")
        if self.role == "classifier":
            self.expect(self.n_targets >= 2, "a classifier needs two classes or more")
            self.expect(self.aggregation == "sum", "a classifier sums its trees")
            if self.n_targets == 2:
                self.expect(not binary_writes_one_column(len(self.base_values), self.has_score,
                                                         self.binary_case, self.post_transform),
                            "ONNX Runtime writes one probability column of two here")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_trees * self.width)
        return [ValueType.floats(self.raw_width), ValueType.floats(self.output_width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32), np.dtype(np.float32)]

    def reference(self, inputs):
        raw, transformed = tree_scores(self, inputs[0])
        return [raw, transformed]

    def to_saved(self):
        meta = {name: getattr(self, name) for name in (
            "n_trees", "width", "n_targets", "role", "accumulate", "aggregation",
            "post_transform", "binary_case", "weights_all_positive", "ort_threads")}
        return meta, {name: getattr(self, name) for name in _ARRAYS}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta, **{name: arrays[name] for name in _ARRAYS})


# ------------------------------------------------------------------------ linear
# MLAS's logistic (the rational approximation ONNX Runtime's LinearClassifier applies
# to two or more score columns), with its float32 constants; on x86-64 its kernels fuse
# each multiply-add (an FMA: one rounding), clamp x to [-18, 18] and the result to [0, 1].
MLAS_LOGISTIC = dict(alpha=(4.37031012579801e-11, 1.15627324459942e-07, 6.08574864600143e-05,
                            8.51377133304701e-03, 2.48287947061529e-01),
                     beta=(6.10247389755681e-13, 5.76102136993427e-09, 6.29106785017040e-06,
                           1.70198817374094e-03, 1.16817656904453e-01, 9.93151921023180e-01))
LINEAR_POST_TRANSFORMS = ("NONE", "LOGISTIC", "SOFTMAX", "SOFTMAX_ZERO")


def mlas_logistic(math, x):
    lo, hi = _f32(math, -18.0, x), _f32(math, 18.0, x)
    x = math.where(x < lo, lo, math.where(x > hi, hi, x))
    x2 = x * x
    alpha = [_f32(math, a, x) for a in MLAS_LOGISTIC["alpha"]]
    beta = [_f32(math, b, x) for b in MLAS_LOGISTIC["beta"]]
    p = exact_fma32(math, x2, alpha[0], alpha[1])
    for a in alpha[2:]:
        p = exact_fma32(math, p, x2, a)
    p = p * x
    q = exact_fma32(math, x2, beta[0], beta[1])
    for b in beta[2:]:
        q = exact_fma32(math, q, x2, b)
    y = p / q + _f32(math, 0.5, x)
    zero, one = _f32(math, 0.0, x), _f32(math, 1.0, x)
    return math.where(y < zero, zero, math.where(y > one, one, y))


def linear_scores(op, X, arrays, math=NumpyMath):
    """(raw, transformed) of ``onnx_linear``: see ``OnnxLinear``. ``arrays``: the op's
    coefficients (n_targets, n_features) and intercepts as a (1, n_targets) row, both
    float32 in the caller's array type (a program's constants must keep their bits)."""
    X = math.cast(X, "float32")  # the kernel casts a double input to float
    matrix = sgemm(math, X, arrays["coefficients"], 1.0, arrays["intercepts"],
                   packed=op.packed)
    scores = [math.column(matrix, k) for k in range(op.n_targets)]
    K = len(scores)
    if op.role == "regressor":
        if K > 1:
            scores = _linear_post(math, scores, op.post_transform, X)
        return math.stack(scores), math.stack(scores)
    n_labels = op.n_labels
    if K == 1:
        label = math.cast(scores[0] > _f32(math, 0.0, scores[0]), "float32")
        p = _logistic(math, scores[0]) if op.post_transform == "LOGISTIC" else scores[0]
        proba = [_f32(math, 1.0, p) - p, p] if n_labels == 2 else [p]
        return math.stack(scores), math.stack(proba + [label])
    best = math.zeros(scores[0], "float32")
    best_score = scores[0]
    for k in range(1, K):
        better = scores[k] > best_score  # a NaN never wins, as in the kernel's loop
        best = math.where(better, _f32(math, float(k), best), best)
        best_score = math.where(better, scores[k], best_score)
    proba = _linear_post(math, scores, op.post_transform, X)
    return math.stack(scores), math.stack(proba + [best])


# ONNX Runtime's linear kernels (``batched_update_scores_inplace``) take MLAS's softmax
# for SOFTMAX over five classes or more, and over two to four classes once the call
# holds this many scores (rows x classes); below, their own float32 loop.
MLAS_SOFTMAX_FROM_SCORES = {2: 32 * 1024, 3: 16 * 1024, 4: 16 * 1024}


def _linear_post(math, scores, post_transform, X):
    if post_transform == "LOGISTIC":
        return [mlas_logistic(math, s) for s in scores]
    if post_transform == "SOFTMAX_ZERO":
        return _softmax(math, scores, True)
    if post_transform != "SOFTMAX":
        return list(scores)
    threshold = MLAS_SOFTMAX_FROM_SCORES.get(len(scores))
    if threshold is None:
        return mlas_softmax(math, scores)
    large = math.rows_at_least(X, -(-threshold // len(scores)))  # the call's rows decide
    if large is False:
        return _softmax(math, scores, False)
    if large is True:
        return mlas_softmax(math, scores)
    return [math.where(large, a, b) for a, b in zip(mlas_softmax(math, scores),
                                                    _softmax(math, scores, False))]


@register_op
@dataclass(frozen=True, eq=False)
class OnnxLinear(Op):
    """ONNX-ML ``LinearClassifier`` / ``LinearRegressor`` (and ``MatMul``/``Gemm`` by a
    constant, ``packed``) as ONNX Runtime computes them: the input rounded to float32,
    ``scores = X @ coefficients.T + intercepts`` by MLAS's SGEMM (``sgemm``): per
    output, one fused multiply-add per feature in feature order, from 0, in K slices
    (the first adds the intercept, each next one the running sum); a single row takes
    MLAS's one-row kernel (eight lanes, then the intercept) unless ``packed`` (a
    constant matrix the session packs: K slices of 256, no one-row kernel). A
    classifier's label: with one score column,
    ``score > 0`` (index 1, else 0); with several, the first largest. Its
    probabilities: one column and two labels give ``[1 - p, p]``, ``p`` the score or,
    with LOGISTIC, its logistic by the kernel's ``exp`` formula; several columns take the post-transform:
    LOGISTIC by MLAS's approximation (mirrored operation by operation), SOFTMAX and
    SOFTMAX_ZERO by the kernel's float32 loop (``exp`` as glibc's ``expf``: see the
    module docstring), which it uses for calls below 16384 scores with 3 or 4
    classes and 32768 with 2; above, and for 5 classes or more, SOFTMAX is MLAS's
    softmax (``mlas_softmax``). The call's row count decides, so a program decides
    per call (``batch_size`` splits a call: each part decides for itself). ``transformed``: the
    probabilities then the label's index (classifier) or the values (regressor)."""

    kind = "onnx_linear"

    coefficients: np.ndarray  # (n_targets, n_features) float32
    intercepts: np.ndarray  # (n_targets,) float32
    role: str = "classifier"
    post_transform: str = "NONE"
    n_labels: int = 0
    packed: bool = False

    def __post_init__(self):
        for name in ("coefficients", "intercepts"):
            value = np.ascontiguousarray(getattr(self, name), dtype=np.float32)
            value.flags.writeable = False
            object.__setattr__(self, name, value)

    @property
    def n_targets(self):
        return int(self.coefficients.shape[0])

    @property
    def n_features(self):
        return int(self.coefficients.shape[1])

    def validate(self):
        self.expect(self.role in ROLES, f"role {self.role!r} not in {ROLES}")
        self.expect(self.post_transform in LINEAR_POST_TRANSFORMS,
                    f"post_transform {self.post_transform!r} not in {LINEAR_POST_TRANSFORMS}")
        self.expect(self.coefficients.ndim == 2 and self.intercepts.shape == (self.n_targets,),
                    f"coefficients {self.coefficients.shape} and intercepts "
                    f"{self.intercepts.shape} do not match")
        return self

    @property
    def output_width(self):
        if self.role == "regressor":
            return self.n_targets
        if self.n_targets == 1:
            return (2 if self.n_labels == 2 else 1) + 1
        return self.n_targets + 1

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_targets), ValueType.floats(self.output_width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32), np.dtype(np.float32)]

    def reference(self, inputs):
        arrays = {"coefficients": self.coefficients, "intercepts": self.intercepts.reshape(1, -1)}
        with np.errstate(invalid="ignore", over="ignore"):
            return list(linear_scores(self, inputs[0], arrays))

    def to_saved(self):
        return ({"role": self.role, "post_transform": self.post_transform, "n_labels": self.n_labels,
                 "packed": bool(self.packed)},
                {"coefficients": self.coefficients, "intercepts": self.intercepts})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(coefficients=arrays["coefficients"], intercepts=arrays["intercepts"], **meta)


# ------------------------------------------------------------- elementwise steps
NORMS = ("MAX", "L1", "L2")
# LpNormalization(p=1): L1's sequential sum and division, but a zero norm writes +0
# (Eigen's setZero) where the Normalizer keeps the row
LP_NORMS = ("LP1",)


def normalize(op, X, math=NumpyMath):
    """ONNX Runtime's Normalizer on the first ``width`` columns, in float32 (the rest,
    e.g. a label index riding along, pass through)."""
    X = math.cast(X, "float32")
    columns = [math.column(X, j) for j in range(op.width)]
    rest = [math.column(X, j) for j in range(op.width, op.width + op.passthrough)]
    zero = math.zeros(X, "float32")
    if op.norm == "MAX":
        total = _f32(math, np.finfo(np.float32).min, X)
        for c in columns:  # std::max(max, x): a NaN x leaves max as it is
            total = math.where(c > total, c, total)
        out = [c / total for c in columns]
    elif op.norm in ("L1", "LP1"):
        total = zero
        for c in columns:
            total = total + math.abs(c)
        out = [c / total for c in columns]
    else:
        squares = [c * c for c in columns]
        total = zero
        for s in squares:
            total = total + s
        out = [math.where(c < zero, -math.sqrt(s / total), math.sqrt(s / total))
               for c, s in zip(columns, squares)]
    if op.norm == "LP1":  # ``==``: TVM reads ``!=`` as ordered, false for a NaN norm
        return math.stack([math.where(total == zero, zero, o) for o in out] + rest)
    keep = total != zero
    out = [math.where(keep, o, c) for o, c in zip(out, columns)]
    return math.stack(out + rest)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxNormalizer(Op):
    """ONNX-ML ``Normalizer`` (MAX, L1, L2 per row, float32, a zero norm leaves the
    row as it is) on the first ``width`` columns; ``passthrough`` columns follow."""

    kind = "onnx_normalizer"

    norm: str
    width: int
    passthrough: int = 0

    def validate(self):
        self.expect(self.norm in NORMS + LP_NORMS, f"norm {self.norm!r} not in {NORMS + LP_NORMS}")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.width + self.passthrough)
        return [ValueType.floats(self.width + self.passthrough)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        return [normalize(self, inputs[0])]

    def to_saved(self):
        return {"norm": self.norm, "width": self.width, "passthrough": self.passthrough}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxCast(Op):
    """The value in ``dtype`` (float32 or float64): where an ONNX graph's tensor has a
    type, woodstar's value takes it (a float graph reads float32, whatever the caller
    passes; a Scaler on a double input writes float)."""

    kind = "onnx_cast"

    width: int
    dtype: str = "float32"

    def validate(self):
        self.expect(self.dtype in ("float32", "float64"), f"dtype {self.dtype!r}")
        return self

    def output_types(self, input_types):
        return [self.numeric_input(input_types, self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(self.dtype)]

    def reference(self, inputs):
        return [np.asarray(inputs[0]).astype(self.dtype)]

    def to_saved(self):
        return {"width": self.width, "dtype": self.dtype}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxBinarizer(Op):
    """ONNX-ML ``Binarizer`` on float: 1.0 where ``x > threshold`` (float32), else 0.0.
    ONNX Runtime refuses a NaN input; the frontend makes the container refuse it."""

    kind = "onnx_binarizer"

    width: int
    threshold: float = 1.0

    def output_types(self, input_types):
        return [self.numeric_input(input_types, self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        X = np.asarray(inputs[0]).astype(np.float32)
        return [(X > np.float32(self.threshold)).astype(np.float32)]

    def to_saved(self):
        return {"width": self.width, "threshold": float(self.threshold)}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


def sigmoid_columns(op, X, math=NumpyMath):
    X = math.cast(X, "float32")
    return math.stack([mlas_logistic(math, math.column(X, j)) for j in range(op.width)])


@register_op
@dataclass(frozen=True, eq=False)
class OnnxSigmoid(Op):
    """ONNX ``Sigmoid`` on float, as ONNX Runtime computes it: MLAS's logistic (see
    ``mlas_logistic``)."""

    kind = "onnx_sigmoid"

    width: int

    def output_types(self, input_types):
        return [self.numeric_input(input_types, self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore"):
            return [sigmoid_columns(self, inputs[0])]

    def to_saved(self):
        return {"width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


# --------------------------------------------------------------------------- svm
# MLAS's tanh (Eigen's rational approximation; the SIGMOID kernel): x clamped to
# [-9, 9], fused multiply-adds on x86-64, one division, no clamp of the result.
MLAS_TANH = dict(alpha=(-2.76076847742355e-16, 2.00018790482477e-13, -8.60467152213735e-11,
                        5.12229709037114e-08, 1.48572235717979e-05, 6.37261928875436e-04,
                        4.89352455891786e-03),
                 beta=(1.19825839466702e-06, 1.18534705686654e-04, 2.26843463243900e-03,
                       4.89352518554385e-03))
SVM_KERNELS = ("LINEAR", "POLY", "RBF", "SIGMOID")


def mlas_tanh(math, x):
    """On an (n, m) matrix: its constants are (n, 1) columns."""
    def const(value):
        return _f32(math, value, x[:, 0])[:, None]

    lo, hi = const(-9.0), const(9.0)
    x = math.where(x < lo, lo, math.where(x > hi, hi, x))
    x2 = x * x
    alpha = [const(a) for a in MLAS_TANH["alpha"]]
    beta = [const(b) for b in MLAS_TANH["beta"]]
    p = exact_fma32(math, x2, alpha[0], alpha[1])
    for a in alpha[2:]:
        p = exact_fma32(math, p, x2, a)
    p = p * x
    q = exact_fma32(math, x2, beta[0], beta[1])
    for b in beta[2:]:
        q = exact_fma32(math, q, x2, b)
    return p / q


def sgemm_stride_k(n, k):
    """The K slice MLAS's SGEMM (not transposing A) steps through for an (m, k) x
    (k, n) product: 128, doubled while the N slice halves for a narrow n."""
    stride_n, stride_k = 128, 128
    if n >= k:
        while stride_k // 2 >= k:
            stride_n, stride_k = stride_n * 2, stride_k // 2
    else:
        while stride_n > 16 and stride_n // 2 >= n:
            stride_n, stride_k = stride_n // 2, stride_k * 2
    return stride_k


# A matrix B that is a constant of the graph (MatMul, Gemm) is packed once when the
# session starts; MLAS's packed SGEMM steps through K in slices of this size, whatever
# the shape, and has no one-row kernel.
SGEMM_PACKED_STRIDE_K = 256


def _bias_row(math, bias, column):
    """``bias`` as a (rows, 1) float32 column (a number) or as it is (a (1, N) row)."""
    if isinstance(bias, (int, float)):
        return _f32(math, bias, column)[:, None]
    return bias


# A compiled ``(A, B, stride) -> [(n, N) float32 per slice]`` for NumPy arrays (or None
# where it cannot run), registered by woodstar/runtimes/families/onnx_sgemm.py.
_FMA_SLICES = []


def register_fma_slices(fn):
    _FMA_SLICES[:] = [fn]


def slice_sums(math, A, B, stride):
    """MLAS's SGEMM accumulation of float32 ``A`` (n, K) by ``B`` (N, K): per K slice
    and output, the first product, then one FMA per next column (rounded once:
    ``exact_sum32``); a list of (n, N) float32, one per slice."""
    if math.eager and _FMA_SLICES:
        sums = _FMA_SLICES[0](A, B, stride)
        if sums is not None:
            return sums
    K = A.shape[1]
    A64, B64 = math.cast(A, "float64"), math.cast(B, "float64")
    sums = []
    for k0 in range(0, K, stride):
        acc = None
        for j in range(k0, min(K, k0 + stride)):
            product = A64[:, j:j + 1] * B64[None, :, j]
            acc = math.cast(product, "float32") if acc is None else \
                exact_sum32(math, product, acc)
        sums.append(acc)
    return sums


def _sgemm_slices(math, A, B, alpha, bias, stride):
    """MLAS's SGEMM kernels (x86-64, FMA3): per output, one FMA per column of a K slice
    from 0; the first slice writes ``alpha * acc`` (no bias) or ``fma(acc, alpha,
    bias)``, each next one ``fma(acc, alpha, out)``."""
    column = A[:, 0]
    alpha_c = _f32(math, alpha, column)[:, None]
    out = None
    for acc in slice_sums(math, A, B, stride):
        if out is None and bias is None:
            out = acc if alpha == 1.0 else acc * alpha_c
        else:
            addend = _bias_row(math, bias, column) if out is None else out
            out = acc + addend if alpha == 1.0 else exact_fma32(math, acc, alpha_c, addend)
    return out


def _sgemm_one_row(math, A, B, bias):
    """MLAS's one-row kernel (``SgemmKernelM1TransposeBAvx``, used for a single input
    row when alpha is 1): eight float32 lanes, lane l summing ``a[k] * b[k]`` (a
    multiply, then an add) for k = l mod 8 in order; then a lane reduction whose order
    depends on the output column's place: columns in groups of 4, then 2, then 1."""
    K, N = A.shape[1], B.shape[0]
    lanes = [None] * 8
    for j in range(K):
        product = A[:, j:j + 1] * B[None, :, j]
        lanes[j % 8] = product if lanes[j % 8] is None else lanes[j % 8] + product
    zero = _f32(math, 0.0, A[:, 0])[:, None]  # a lane no column reached (k < 8)
    a = [lane if lane is not None else zero for lane in lanes]
    groups = [((a[0] + a[1]) + a[2] + a[3]) + (((a[4] + a[5]) + a[6]) + a[7]),
              ((a[0] + a[2]) + (a[4] + a[6])) + ((a[1] + a[3]) + (a[5] + a[7])),
              ((a[0] + a[1]) + (a[2] + a[3])) + ((a[4] + a[5]) + (a[6] + a[7]))]
    fours = N - N % 4
    kind = [0] * fours + [1] * (N % 4 & 2) + [2] * (N % 4 & 1)
    out = math.stack([math.column(groups[kind[n]], n) for n in range(N)]) if N > 1 else \
        groups[kind[0]]
    if bias is not None:
        out = out + _bias_row(math, bias, A[:, 0])
    return out


def sgemm(math, A, B, alpha=1.0, bias=None, packed=False):
    """``alpha * A @ B.T (+ bias)`` as ONNX Runtime's Gemm computes it in float32 on one
    thread (A: (n, k) float32, B: (N, k) float32, bias None, a float, or a (1, N)
    float32 row of the caller's array type, one per output): the one-row kernel for a
    single row when alpha is 1, else the sliced kernels. ``packed``: B is a prepacked
    constant (MatMul, Gemm): fixed K slices, never the one-row kernel."""
    K, N = A.shape[1], B.shape[0]
    stride = SGEMM_PACKED_STRIDE_K if packed else sgemm_stride_k(N, K)
    sliced = _sgemm_slices(math, A, B, alpha, bias, stride)
    if alpha != 1.0 or packed:
        return sliced
    single = math.single_row(A)
    if single is False:
        return sliced
    one_row = _sgemm_one_row(math, A, B, bias)
    return one_row if single is True else math.where(single, one_row, sliced)


# glibc's expf (2.28 and later, the one ONNX Runtime calls for ``std::exp(float)``):
# x / ln2 * 32 rounded to an integer k, a degree-3 polynomial in the remainder,
# scaled by 2^(k / 32) from a 32-entry table, all in double, rounded once to float.
_EXPF_TABLE = tuple(float.fromhex(h) for h in (
    "0x1.0000000000000p+0", "0x1.059b0d3158574p+0", "0x1.0b5586cf9890fp+0", "0x1.11301d0125b51p+0",
    "0x1.172b83c7d517bp+0", "0x1.1d4873168b9aap+0", "0x1.2387a6e756238p+0", "0x1.29e9df51fdee1p+0",
    "0x1.306fe0a31b715p+0", "0x1.371a7373aa9cbp+0", "0x1.3dea64c123422p+0", "0x1.44e086061892dp+0",
    "0x1.4bfdad5362a27p+0", "0x1.5342b569d4f82p+0", "0x1.5ab07dd485429p+0", "0x1.6247eb03a5585p+0",
    "0x1.6a09e667f3bcdp+0", "0x1.71f75e8ec5f74p+0", "0x1.7a11473eb0187p+0", "0x1.82589994cce13p+0",
    "0x1.8ace5422aa0dbp+0", "0x1.93737b0cdc5e5p+0", "0x1.9c49182a3f090p+0", "0x1.a5503b23e255dp+0",
    "0x1.ae89f995ad3adp+0", "0x1.b7f76f2fb5e47p+0", "0x1.c199bdd85529cp+0", "0x1.cb720dcef9069p+0",
    "0x1.d5818dcfba487p+0", "0x1.dfc97337b9b5fp+0", "0x1.ea4afa2a490dap+0", "0x1.f50765b6e4540p+0"))
_EXPF_INV_LN2_N = float.fromhex("0x1.71547652b82fep+0") * 32
_EXPF_SHIFT = float.fromhex("0x1.8p+52")
_EXPF_POLY = (float.fromhex("0x1.c6af84b912394p-5") / 32 ** 3,
              float.fromhex("0x1.ebfce50fac4f3p-3") / 32 ** 2,
              float.fromhex("0x1.62e42ff0c52d6p-1") / 32)


def glibc_expf(math, x):
    """float32 ``exp`` of a float32 matrix, operation by operation as glibc computes
    it (no fused multiply-adds: the generic build's order), so every bit matches."""
    xd = math.cast(x, "float64")

    def c64(value):  # a float64 tensor: an exporter rounds a filled value to float32
        return math.constant64(value, xd)

    z = xd * c64(_EXPF_INV_LN2_N)
    kd = (z + _EXPF_SHIFT) - _EXPF_SHIFT  # z rounded to an integer, ties to even
    r = z - kd
    # k for the table, kept finite (NaN, infinities: the special cases below decide)
    finite = math.where(kd == kd, kd, 0.0)
    # (beyond these, overflow or underflow); 2^e as 2^(e - 1) * 2 keeps every power
    # of two a program holds below float32's largest value (2^127)
    finite = math.where(finite > 4127.0, 4127.0, math.where(finite < -8000.0, -8000.0, finite))
    e = math.floor(finite / 32.0)
    s = math.take(_EXPF_TABLE, finite - e * 32.0) * math.pow2(e - 1.0) * 2.0
    c0, c1, c2 = _EXPF_POLY
    y = (r * c64(c2) + 1.0) + (r * c64(c0) + c64(c1)) * (r * r)
    out = math.cast(y * s, "float32")
    # glibc's special cases: overflow, underflow (x < log(2^-150)), NaN and -inf
    big, tiny = float.fromhex("0x1.62e42ep6"), float.fromhex("-0x1.9fe368p6")
    out = math.where(xd > big, x * np.float32(3e38), out)  # +inf, without an inf literal
    out = math.where(xd < tiny, np.float32(0.0), out)
    return math.where(x != x, x, out)


def svm_kernels(op, X, support_vectors, math=NumpyMath):
    """(n, n_vectors) float32 kernel values, as ONNX Runtime's ``batched_kernel_dot``
    computes them. ``support_vectors``: the op's matrix as the caller's array type."""
    X = math.cast(X, "float32")  # a double input is rounded to float
    if op.kernel == "RBF":  # a plain float32 loop: (x - v)^2 summed in feature order
        total = None
        for j in range(op.n_features):
            d = X[:, j:j + 1] - support_vectors[None, :, j]
            total = d * d if total is None else total + d * d
        return glibc_expf(math, _f32(math, -op.gamma, total[:, 0])[:, None] * total)
    if op.kernel == "LINEAR":
        return sgemm(math, X, support_vectors)
    k = sgemm(math, X, support_vectors, op.gamma, op.coef0 if op.coef0 != 0.0 else None)
    if op.kernel == "SIGMOID":
        return mlas_tanh(math, k)
    return k * k if op.degree == 2 else k * k * k


def svm_scores(op, X, arrays, math=NumpyMath):
    """(raw, transformed) of ``onnx_svm``; ``arrays``: the op's support vectors and
    coefficients (a regressor's as a (1, n_vectors) matrix) as the caller's array type
    (see ``OnnxSvm``)."""
    kernels = svm_kernels(op, X, arrays["support_vectors"], math)
    rho = op.rho.tolist()
    if op.role == "regressor":  # a second Gemm over the support vectors, plus rho
        value = sgemm(math, kernels, arrays["coefficients"], 1.0, rho[0])[:, 0]
        return math.stack([value]), math.stack([value])
    # each pair (i, j): float32 products summed in double, class i's vectors then j's
    coef, starts = op.coefficient_rows, op.vector_starts
    columns = [math.column(kernels, v) for v in range(op.n_vectors)]
    scores, votes = [], [math.zeros(kernels, "float32") for _ in range(op.n_classes)]
    one = _f32(math, 1.0, columns[0])
    pair = 0
    for i in range(op.n_classes - 1):
        for j in range(i + 1, op.n_classes):
            total = math.zeros(kernels, "float64")
            for row, cls in ((j - 1, i), (i, j)):
                for v in range(starts[cls], starts[cls + 1]):
                    term = columns[v] * _f32(math, coef[row][v], columns[v])
                    total = total + math.cast(term, "float64")
            total = total + math.full(kernels, float(np.float32(rho[pair])), "float64")
            pair += 1
            scores.append(math.cast(total, "float32"))
            wins = math.cast(total > math.zeros(kernels, "float64"), "float32")
            votes[i] = votes[i] + wins
            votes[j] = votes[j] + (one - wins)
    best = math.zeros(kernels, "float32")
    best_votes = votes[0]
    for k in range(1, op.n_classes):  # std::max_element: the first largest count
        better = votes[k] > best_votes
        best = math.where(better, _f32(math, float(k), best), best)
        best_votes = math.where(better, votes[k], best_votes)
    if len(op.prob_a):
        out = svm_probabilities(op, scores, math)
    else:
        out = [-scores[0], scores[0]] if op.n_classes == 2 else scores
    return math.stack(scores), math.stack(out + [best])


@register_op
@dataclass(frozen=True, eq=False)
class OnnxSvm(Op):
    """ONNX-ML ``SVMRegressor`` / ``SVMClassifier`` (libsvm layout: support vectors,
    no probabilities) as ONNX Runtime computes them, input rounded to float32:

    * kernel values (n, n_vectors): RBF by a float32 loop, ``sum += (x - v)^2`` in
      feature order, then ``exp(-gamma * sum)`` by glibc's ``expf`` (``glibc_expf``);
      LINEAR, POLY and SIGMOID by MLAS's SGEMM (one FMA per feature, from 0), POLY and
      SIGMOID then ``fma(acc, gamma, coef0)``, POLY squared or cubed (``x * x * x``),
      SIGMOID through MLAS's tanh (``mlas_tanh``);
    * a regressor: a second SGEMM over the support vectors (one FMA each, in order),
      then ``+ rho`` in float32;
    * a classifier: for each class pair (i, j) in order, the float32 products
      ``coefficient * kernel`` summed in double (class i's vectors, then class j's),
      plus rho, rounded to float32; a positive sum votes for i, else for j (NaN: j);
      the label is the first class with the most votes. ``transformed``: the pair
      scores (two classes: ``[-score, score]``) then the label's index.
    """

    kind = "onnx_svm"

    support_vectors: np.ndarray  # (n_vectors, n_features) float32
    coefficients: np.ndarray  # regressor (n_vectors,); classifier (n_classes - 1, n_vectors)
    rho: np.ndarray  # float32: one (regressor) or one per class pair
    vectors_per_class: tuple = ()  # classifier only (stored as an int64 array)
    role: str = "regressor"
    kernel: str = "LINEAR"
    gamma: float = 0.0
    coef0: float = 0.0
    degree: float = 3.0
    prob_a: np.ndarray = ()  # classifier with probabilities: one per class pair
    prob_b: np.ndarray = ()

    def __post_init__(self):
        for name, dtype in (("support_vectors", np.float32), ("coefficients", np.float32),
                            ("rho", np.float32), ("vectors_per_class", np.int64),
                            ("prob_a", np.float32), ("prob_b", np.float32)):
            value = np.ascontiguousarray(getattr(self, name), dtype=dtype)
            value.flags.writeable = False
            object.__setattr__(self, name, value)

    @property
    def n_vectors(self):
        return int(self.support_vectors.shape[0])

    @property
    def n_features(self):
        return int(self.support_vectors.shape[1])

    @property
    def n_classes(self):
        return len(self.vectors_per_class)

    @property
    def coefficient_rows(self):
        """A classifier's coefficients as (n_classes - 1) lists of n_vectors floats."""
        return self.coefficients.reshape(max(self.n_classes - 1, 1), -1).tolist()

    @property
    def vector_starts(self):
        """Where each class's support vectors start, then their total."""
        return [0] + np.cumsum(self.vector_counts()).tolist()

    def vector_counts(self):
        return [int(v) for v in self.vectors_per_class]

    @property
    def n_pairs(self):
        return self.n_classes * (self.n_classes - 1) // 2

    @property
    def output_width(self):
        if self.role == "regressor":
            return 1
        if len(self.prob_a):
            return self.n_classes + 1
        return max(self.n_pairs, 2) + 1

    def validate(self):
        self.expect(self.role in ROLES, f"role {self.role!r} not in {ROLES}")
        self.expect(self.kernel in SVM_KERNELS, f"kernel {self.kernel!r} not in {SVM_KERNELS}")
        self.expect(self.support_vectors.ndim == 2 and self.n_vectors >= 1,
                    "support_vectors must be an (n_vectors, n_features) matrix")
        self.expect(self.kernel != "POLY" or self.degree in (2.0, 3.0),
                    f"POLY degree {self.degree} (ONNX Runtime squares or cubes; other "
                    "degrees go through Eigen's pow, not mirrored)")
        if self.role == "regressor":
            self.expect(self.coefficients.shape == (self.n_vectors,) and len(self.rho) == 1,
                        "a regressor needs one coefficient per support vector and one rho")
        else:
            self.expect(self.n_classes >= 2 and int(self.vectors_per_class.sum()) == self.n_vectors,
                        "vectors_per_class must split the support vectors over 2+ classes")
            self.expect(self.coefficients.size == (self.n_classes - 1) * self.n_vectors,
                        "a classifier needs (n_classes - 1) x n_vectors coefficients")
            self.expect(len(self.rho) == self.n_pairs, "a classifier needs one rho per class pair")
            self.expect(len(self.prob_a) == len(self.prob_b) and
                        len(self.prob_a) in (0, self.n_pairs),
                        "prob_a and prob_b need one value each per class pair (or none)")
        self.expect(self.role == "classifier" or len(self.prob_a) == 0,
                    "a regressor has no probabilities")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        raw = 1 if self.role == "regressor" else self.n_pairs
        return [ValueType.floats(raw), ValueType.floats(self.output_width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32), np.dtype(np.float32)]

    def reference(self, inputs):
        arrays = {"support_vectors": self.support_vectors,
                  "coefficients": self.coefficients.reshape(1, -1)}
        with np.errstate(invalid="ignore", over="ignore"):
            return list(svm_scores(self, inputs[0], arrays))

    def to_saved(self):
        meta = {name: getattr(self, name) for name in ("role", "kernel")}
        meta.update({name: float(getattr(self, name)) for name in ("gamma", "coef0", "degree")})
        return meta, {name: getattr(self, name) for name in (
            "support_vectors", "coefficients", "rho", "vectors_per_class", "prob_a", "prob_b")}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta, **arrays)


# ----------------------------------------------------------------------- softmax
# ONNX ``Softmax`` on float: ONNX Runtime calls MLAS's MlasComputeSoftmax, row by row:
# the row's maximum, then each ``exp(x - max)`` by MLAS's vectorized exp and their sum,
# then every exp times ``1 / sum``. These are the x86-64 AVX-512F kernels (the ones
# ONNX Runtime picks on a CPU with AVX-512F): each fused multiply-add rounds once.
# Python floats holding float32 values: TorchDynamo would guard NumPy scalars as tensors
_MLAS_EXP = {name: float(np.float32(value)) for name, value in dict(
    lower=-103.9720840454, rounding_bias=12582912.0, log2_reciprocal=1.44269504088896341,
    log2_high=-6.93145752e-1, log2_low=-1.42860677e-6).items()}
_MLAS_EXP_POLY = tuple(float(np.float32(float.fromhex(h))) for h in (
    "0x1.694000p-10", "0x1.125edcp-7", "0x1.555b5ap-5", "0x1.555450p-3", "0x1.fffff6p-2",
    "0x1.000000p+0"))
# MlasComputeSumExpF32KernelAvx512F adds the exps in 16 lanes (element j in lane j % 16)
SOFTMAX_SUM_LANES = 16


def exact_fma32(math, a, b, c):
    """float32 ``a * b + c`` rounded once, as an FMA instruction, from float64 steps a
    program can export (the product of two float32 values is exact in float64)."""
    return exact_sum32(math, math.cast(a, "float64") * math.cast(b, "float64"), c)


def exact_sum32(math, product, c):
    """float32 ``product + c`` rounded once (``product``: float64, exact; ``c``: float32
    or float64 holding a float32): the float64 sum ``s`` and its rounding error (Knuth's
    two-sum) are exact together. Rounding ``s`` to float32 is the exact sum's rounding
    except where ``s`` falls exactly halfway between two float32 values and the error
    pushes the exact sum off that point: there the answer is the neighbour on the
    error's side. (A tiny addend beside an exactly-halfway product is the usual case.)"""
    addend = math.cast(c, "float64")
    s = product + addend
    back = s - product
    err = (product - (s - back)) + (addend - back)
    rounded = math.cast(s, "float32")
    d = s - math.cast(rounded, "float64")  # exact: s is within half a float32 step
    other = s + d  # the float32 neighbour on s's side when s is halfway
    halfway = (((d - d) == 0) & (d != 0) &
               (math.cast(math.cast(other, "float32"), "float64") == other))
    # the error on d's side (no comparison of two truth values: TVM's LLVM rejects it)
    away = ((err > 0) & (d > 0)) | ((err < 0) & (d < 0))
    return math.where(halfway & away, math.cast(other, "float32"), rounded)


def mlas_exp_avx512(math, d):
    """MLAS's exp of float32 ``d`` (<= 0 in a softmax): clamp below at -103.97 (a NaN
    stays NaN), ``m = round(d / ln 2)`` through the rounding-bias trick, a two-step
    reduction and a degree-6 polynomial by FMAs, then ``p * 2^m`` rounded once
    (``vscalefps``; small results come out subnormal, never flushed). The scaling is
    ``p * 2^(m - 1) * 2``, exact in float64, so m may reach 128 (``mlas_exp``)."""
    c = {name: _f32(math, value, d) for name, value in _MLAS_EXP.items()}
    d = math.where(c["lower"] > d, c["lower"], d)
    biased = exact_fma32(math, d, c["log2_reciprocal"], c["rounding_bias"])
    m = biased - c["rounding_bias"]
    r = exact_fma32(math, m, c["log2_high"], d)
    r = exact_fma32(math, m, c["log2_low"], r)
    poly = [_f32(math, value, d) for value in _MLAS_EXP_POLY]
    p = poly[0]
    for k in poly[1:]:
        p = exact_fma32(math, p, r, k)
    p = exact_fma32(math, p, r, poly[-1])
    m64 = math.cast(m, "float64")
    finite = math.where(m64 == m64, m64, math.zeros(m64, "float64"))
    return math.cast(math.cast(p, "float64") * math.pow2(finite - 1.0) * 2.0, "float32")


def _lane_sum(columns):
    """The AVX-512F kernel's sum: 16 lanes added in element order, then the upper eight
    lanes onto the lower, then pairs, pairs of pairs, and the two halves."""
    lanes = [None] * SOFTMAX_SUM_LANES
    for j, e in enumerate(columns):
        k = j % SOFTMAX_SUM_LANES
        lanes[k] = e if lanes[k] is None else lanes[k] + e
    a = []
    for i in range(8):
        low, high = lanes[i], lanes[i + 8]
        a.append(low if high is None else (high if low is None else high + low))

    def add(x, y):  # a lane no element reached holds 0, and x + 0 is x (every exp >= 0)
        return x if y is None else (y if x is None else x + y)

    return add(add(add(a[0], a[1]), add(a[2], a[3])), add(add(a[4], a[5]), add(a[6], a[7])))


def softmax_columns(op, X, math=NumpyMath):
    """ONNX Runtime's float ``Softmax`` over each row's ``op.width`` columns (see the
    block's comment). A NaN anywhere in a row makes the whole row NaN, as in MLAS
    (its exp is NaN, so is the sum); a row of -inf keeps the kernel's own answer."""
    X = math.cast(X, "float32")
    return math.stack(mlas_softmax(math, [math.column(X, j) for j in range(op.width)]))


def mlas_softmax(math, columns):
    """``MlasComputeSoftmax`` over float32 columns (one list entry per column)."""
    # vmaxps/vmaxss keep the running maximum unless the new value is larger (a NaN is
    # skipped; its row is NaN whatever the maximum), from float32's lowest value
    v_max = _f32(math, np.finfo(np.float32).min, columns[0])
    for c in columns:
        v_max = math.where(v_max > c, v_max, c)
    negative_max = -v_max
    exps = [mlas_exp_avx512(math, c + negative_max) for c in columns]
    scale = _f32(math, 1.0, columns[0]) / _lane_sum(exps)
    return [e * scale for e in exps]


@register_op
@dataclass(frozen=True, eq=False)
class OnnxSoftmax(Op):
    """ONNX ``Softmax`` over the columns of a float block, as ONNX Runtime computes it
    (``softmax_columns``: MLAS's kernels)."""

    kind = "onnx_softmax"

    width: int

    def output_types(self, input_types):
        return [ValueType.floats(self.numeric_input(input_types, self.width).width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [softmax_columns(self, inputs[0])]

    def to_saved(self):
        return {"width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


__all__ += ["OnnxSoftmax", "softmax_columns", "mlas_softmax", "mlas_exp_avx512", "exact_fma32"]


# ------------------------------------------------------------ elementwise operators
# Plain ONNX operators between float blocks (skl2onnx's one-vs-rest SVC graph: Sum,
# Add, Mul, Div, Abs, Neg, Less): each an IEEE float32 operation, which NumPy, Torch
# and ONNX Runtime's kernels all round the same way (once, to nearest).
ELEMENTWISE_BINARY = ("add", "sub", "mul", "div")
ELEMENTWISE_UNARY = ("neg", "abs")
ELEMENTWISE_COMPARE = ("less", "greater")
ELEMENTWISE_SELECT = ("where",)  # (condition, x, y): x where the condition holds, else y
ELEMENTWISE = ELEMENTWISE_BINARY + ELEMENTWISE_UNARY + ELEMENTWISE_COMPARE + ELEMENTWISE_SELECT


def elementwise_columns(op, inputs, math=NumpyMath):
    """``op.function`` over the inputs (float32 (n, width) or (n, 1), broadcast to
    ``op.width``): binary functions fold their inputs left to right (ONNX ``Sum`` of
    several); comparisons give 1.0 where ``x < operand`` (``>``), else 0.0 (NaN: 0.0);
    ``where`` takes the second input where the first (a comparison's) is 1.0, else the
    third."""
    blocks = [math.cast(x, "float32") for x in inputs]
    columns = [[math.column(b, 0 if w == 1 else j) for j in range(op.width)]
               for b, w in zip(blocks, op.widths)]
    out = []
    for j in range(op.width):
        if op.function in ELEMENTWISE_COMPARE:
            x, operand = columns[0][j], _f32(math, float(op.operand[j]), columns[0][j])
            hit = x < operand if op.function == "less" else x > operand
            out.append(math.cast(hit, "float32"))
        elif op.function == "where":  # a selection: exact, NaN passes through
            condition, x, y = (column[j] for column in columns)
            out.append(math.where(condition != 0, x, y))
        elif op.function == "neg":
            out.append(-columns[0][j])
        elif op.function == "abs":
            out.append(math.abs(columns[0][j]))
        else:
            value = columns[0][j]
            for other in columns[1:]:
                other = other[j]
                if op.function == "add":
                    value = value + other
                elif op.function == "sub":
                    value = value - other
                elif op.function == "mul":
                    value = value * other
                else:
                    value = value / other
            out.append(value)
    return math.stack(out)


@register_op
@dataclass(frozen=True, eq=False)
class OnnxElementwise(Op):
    """An ONNX elementwise operator on float32 blocks (``elementwise_columns``):
    ``widths`` gives each input's width (``width`` or 1, broadcast); comparisons read
    a constant ``operand`` per column."""

    kind = "onnx_elementwise"

    function: str
    width: int
    widths: tuple
    operand: np.ndarray = None

    def __post_init__(self):
        object.__setattr__(self, "widths", tuple(int(w) for w in self.widths))
        operand = np.zeros(0, np.float32) if self.operand is None else self.operand
        operand = np.ascontiguousarray(operand, dtype=np.float32).reshape(-1)
        operand.flags.writeable = False
        object.__setattr__(self, "operand", operand)

    def validate(self):
        self.expect(self.function in ELEMENTWISE,
                    f"function {self.function!r} not in {ELEMENTWISE}")
        n = len(self.widths)
        expected = n >= 2 if self.function in ELEMENTWISE_BINARY else \
            n == 3 if self.function in ELEMENTWISE_SELECT else n == 1
        self.expect(expected, f"{n} inputs for {self.function}")
        self.expect(all(w in (1, self.width) for w in self.widths),
                    f"input widths {self.widths} do not broadcast to {self.width}")
        if self.function in ELEMENTWISE_COMPARE:
            self.expect(len(self.operand) == self.width,
                        "a comparison needs one operand per column")
        return self

    def output_types(self, input_types):
        self.expect(len(input_types) == len(self.widths),
                    f"{len(input_types)} inputs; this {self.kind} reads {len(self.widths)}")
        for value, width in zip(input_types, self.widths):
            self.expect_width(value, width)
            self.expect_numeric(value)
        return [ValueType.floats(self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [elementwise_columns(self, inputs)]

    def to_saved(self):
        return {"function": self.function, "width": self.width, "widths": list(self.widths)}, \
            {"operand": self.operand}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta, operand=arrays["operand"])


__all__ += ["OnnxElementwise", "elementwise_columns", "ELEMENTWISE"]


# ------------------------------------------------------- tree scores: MIN and MAX
def extreme_tree_scores(op, per_tree, math=NumpyMath):
    """(raw, transformed) of a regressor's ``onnx_tree_scores`` with ``min``/``max``
    aggregation, as ONNX Runtime's TreeAggregatorMin/Max: the first tree that writes a
    target sets its score, each next one replaces it only when strictly smaller
    (larger), in tree order (a tie keeps the earlier weight); then, in the accumulator
    type, one target: ``score + base`` (base 0 without one); several: ``base + score``
    where there is one base value per target, else ``0 + score``; a target no tree
    writes has no score and is written as 0, whatever its base value. The frontend
    makes sure every tree that writes a target writes it on every leaf, so each of its
    columns is a real weight."""
    acc = op.accumulate
    per_tree = math.cast(per_tree, acc)
    scores = [None] * op.n_targets
    for j, k in enumerate(op.column_target.tolist()):
        if k < 0:
            continue
        w = math.column(per_tree, j)
        if scores[k] is None:
            scores[k] = w
        else:
            better = w < scores[k] if op.aggregation == "min" else w > scores[k]
            scores[k] = math.where(better, w, scores[k])
    base = op.base_values.tolist()
    like = math.column(per_tree, 0)
    if op.n_targets == 1:
        origin = math.full(like, base[0] if len(base) == 1 else 0.0, acc)
        s = origin if scores[0] is None else scores[0] + origin
        s32 = math.cast(s, "float32")
        return math.stack([s32]), math.stack([s32])
    columns = []
    for k, score in enumerate(scores):
        if score is None:  # no score: written as 0, whatever the base value
            columns.append(_f32(math, 0.0, like))
            continue
        value = math.full(like, base[k] if len(base) == op.n_targets else 0.0, acc)
        columns.append(math.cast(value + score, "float32"))
    return math.stack(columns), math.stack(_write_scores(math, columns, op.post_transform))


__all__ += ["extreme_tree_scores", "TREE_AGGREGATIONS"]


# ------------------------------------------------------------- svm probabilities
# SVMClassifier with prob_a/prob_b (scikit-learn's probability=True): ONNX Runtime's
# Platt scaling of each pair score, then libsvm's pairwise coupling (Wu, Lin and Weng's
# second method) written in float32 C++ without fused multiply-adds.
SVM_COUPLING_ITERATIONS = 100


def svm_probabilities(op, scores, math=NumpyMath):
    """Per-class probabilities from the float32 pair scores (class pairs (i, j) in
    order), as ONNX Runtime's ``sigmoid_probability`` and ``multiclass_probability``:
    ``r_ij = 1 - logistic(score * a + b)`` clamped to [1e-7, 1 - 1e-7] (``r_ji = 1 -
    r_ij``); ``Q`` from ``r``; ``p`` from ``1 / K``, updated class by class until the
    largest ``|Qp_i - pQp|`` falls below ``0.005 / K`` (checked before each sweep, at
    most 100 sweeps). Each row stops on its own: a row that has converged keeps its
    ``p`` while the others go on (a NaN score converges at once: NaN errors are never
    larger than 0, so such a row stays at ``1 / K``)."""
    K = op.n_classes
    like = scores[0]

    def f32(value):
        return _f32(math, value, like)

    one, two, zero = f32(1.0), f32(2.0), f32(0.0)
    low, high = f32(1e-7), f32(np.float32(1.0) - np.float32(1e-7))
    r = [[None] * K for _ in range(K)]
    index = 0
    for i in range(K - 1):
        for j in range(i + 1, K):
            val = scores[index] * f32(float(op.prob_a[index])) + f32(float(op.prob_b[index]))
            val1 = one - _logistic(math, val)
            val2 = math.where(val1 < low, low, val1)  # std::max(val1, 1e-7f)
            val2 = math.where(high < val2, high, val2)  # std::min(val2, 1 - 1e-7f)
            r[i][j], r[j][i] = val2, one - val2
            index += 1
    Q = [[None] * K for _ in range(K)]
    for i in range(K):
        Q[i][i] = zero
        for j in range(i):
            Q[i][i] = Q[i][i] + r[j][i] * r[j][i]
            Q[i][j] = Q[j][i]
        for j in range(i + 1, K):
            Q[i][i] = Q[i][i] + r[j][i] * r[j][i]
            Q[i][j] = -r[j][i] * r[i][j]
    p = [f32(np.float32(1.0) / np.float32(K)) for _ in range(K)]
    eps = f32(np.float32(0.005) / np.float32(K))

    def sweep(p, done):
        """One pass: the stopping test, then the updates for the rows not yet done (a
        done row keeps its ``p``, so a pass after every row is done changes nothing)."""
        p = list(p)
        Qp, pQp = [], zero
        for i in range(K):
            q = zero
            for j in range(K):
                q = q + Q[i][j] * p[j]
            Qp.append(q)
            pQp = pQp + p[i] * q
        max_error = zero
        for i in range(K):
            error = math.abs(Qp[i] - pQp)
            max_error = math.where(error > max_error, error, max_error)
        done = done | (max_error < eps)
        before = list(p)
        for i in range(K):
            diff = (-Qp[i] + pQp) / Q[i][i]
            p[i] = p[i] + diff
            grown = one + diff
            pQp = (pQp + diff * (diff * Q[i][i] + two * Qp[i])) / grown / grown
            for j in range(K):
                Qp[j] = (Qp[j] + diff * Q[i][j]) / grown
                p[j] = p[j] / grown
        return [math.where(done, b, a) for a, b in zip(p, before)], done

    return math.repeat_sweeps(sweep, p, zero != zero, SVM_COUPLING_ITERATIONS)


__all__ += ["svm_probabilities", "SVM_COUPLING_ITERATIONS"]


# ----------------------------------------------------------- float to int64 truncation
@register_op
@dataclass(frozen=True, eq=False)
class OnnxTruncateToInt64(Op):
    """ONNX Runtime's float or double -> int64 conversion (``Cast`` to int64, and a
    OneHotEncoder reading a float input): toward zero; NaN, infinities and values
    outside [-2**63, 2**63) become INT64_MIN (x86's conversion result). The integers
    are written as float64, which holds each of them exactly (a float32 or float64
    beyond 2**53 is already an integer)."""

    kind = "onnx_truncate_int64"

    width: int

    def output_types(self, input_types):
        return [self.numeric_input(input_types, self.width)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def reference(self, inputs):
        x = np.asarray(inputs[0], dtype=np.float64)
        with np.errstate(invalid="ignore"):
            return [np.where(np.abs(x) < 2.0 ** 63, np.trunc(x), -(2.0 ** 63))]

    def to_saved(self):
        return {"width": self.width}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(**meta)


__all__ += ["OnnxTruncateToInt64"]


# ------------------------------------------ glibc's logf and MLAS's Exp (float32)
# The scalar routines ONNX Runtime's float Log and Exp kernels reduce to, mirrored
# operation by operation (their users: onnx_math.py, and ErfInv's log above).
MLAS_EXP_UPPER = 88.7762626647950  # MlasComputeExp clamps above here (then +inf)

# glibc's logf (2.28 and later; what ``std::log(float)`` calls): 16 (1/c, log c) pairs,
# ln 2 and a degree-3 polynomial, all in double, rounded once to float at the end.
_LOGF_INVC = tuple(float.fromhex(h) for h in (
    "0x1.661ec79f8f3bep+0", "0x1.571ed4aaf883dp+0", "0x1.49539f0f010b0p+0", "0x1.3c995b0b80385p+0",
    "0x1.30d190c8864a5p+0", "0x1.25e227b0b8ea0p+0", "0x1.1bb4a4a1a343fp+0", "0x1.12358f08ae5bap+0",
    "0x1.0953f419900a7p+0", "0x1.0000000000000p+0", "0x1.e608cfd9a47acp-1", "0x1.ca4b31f026aa0p-1",
    "0x1.b2036576afce6p-1", "0x1.9c2d163a1aa2dp-1", "0x1.886e6037841edp-1", "0x1.767dcf5534862p-1"))
_LOGF_LOGC = tuple(float.fromhex(h) for h in (
    "-0x1.57bf7808caadep-2", "-0x1.2bef0a7c06ddbp-2", "-0x1.01eae7f513a67p-2", "-0x1.b31d8a68224e9p-3",
    "-0x1.6574f0ac07758p-3", "-0x1.1aa2bc79c8100p-3", "-0x1.a4e76ce8c0e5ep-4", "-0x1.1973c5a611cccp-4",
    "-0x1.252f438e10c1ep-5", "0x0.0p+0", "0x1.aa5aa5df25984p-5", "0x1.c5e53aa362eb4p-4",
    "0x1.526e57720db08p-3", "0x1.bc2860d224770p-3", "0x1.1058bc8a07ee1p-2", "0x1.4043057b6ee09p-2"))
_LOGF_POLY = tuple(float.fromhex(h) for h in (
    "-0x1.00ea348b88334p-2", "0x1.5575b0be00b6ap-2", "-0x1.ffffef20a4123p-2"))
_LN2 = float.fromhex("0x1.62e42fefa39efp-1")
_LOGF_OFF_VALUE = 0.69921875  # the float of bits 0x3f330000, where glibc's z starts
_LOGF_OFF_FIELD = 0x330000  # its mantissa field


def logf_reduction(math, finite):
    """(z, k, table index), float64, of positive finite float32 ``finite`` = 2^k z with z
    in [0.699, 1.398), as glibc's logf and powf split it: the index is the four
    mantissa bits of z below 0.699's (read here from frexp, exactly, instead of the
    float's bits)."""
    mantissa, exponent = math.frexp(finite)  # finite = mantissa * 2^exponent, m in [0.5, 1)
    low = mantissa < _LOGF_OFF_VALUE
    z = math.where(low, mantissa * 2.0, mantissa)  # exact
    k = math.where(low, exponent - 1.0, exponent)
    # the mantissa field of ``finite`` as an integer, less that of _LOGF_OFF, modulo 2^23
    field = (mantissa * 2.0 - 1.0) * 2.0 ** 23 - _LOGF_OFF_FIELD
    field = math.where(field < 0.0, field + 2.0 ** 23, field)
    return z, k, math.floor(field / 2.0 ** 19)


def glibc_logf(math, x):
    """float32 ``log`` of float32 ``x`` (a column) as glibc computes it: x = 2^k z with z
    in [0.699, 1.398), a table entry chosen by the four mantissa bits of z below
    0.699's (read here from frexp, exactly, instead of the float's bits), then
    ``log1p(z/c - 1) + log(c) + k ln2`` in double (no fused multiply-adds), rounded once.
    0 gives -inf, +inf itself, below 0 or NaN a NaN."""
    x = math.cast(x, "float32")
    one = math.scalar32(1.0, x)
    finite = math.where((x > math.scalar32(0.0, x)) & (x < math.scalar32(np.inf, x)), x, one)
    z, k, index = logf_reduction(math, finite)
    r = z * math.take(_LOGF_INVC, index) - 1.0
    # float64 columns, not Python floats: an ONNX export writes those as float32
    ln2, a0, a1, a2 = (math.full(x, c, "float64") for c in (_LN2, *_LOGF_POLY))
    y0 = math.take(_LOGF_LOGC, index) + k * ln2
    r2 = r * r
    y = r * a1 + a2
    y = r2 * a0 + y
    y = y * r2 + (y0 + r)
    out = math.cast(y, "float32")
    zero = math.scalar32(0.0, x)
    out = math.where(x == zero, -math.scalar32(np.inf, x), out)
    out = math.where(x == math.scalar32(np.inf, x), x, out)
    nan = math.scalar32(np.nan, x)
    return math.where((x < zero) | (x != x), nan, out)


def mlas_exp(math, x):
    """ONNX Runtime's float ``Exp`` (MLAS's MlasComputeExp on AVX-512F) of a column:
    clamped above at ``MLAS_EXP_UPPER`` (a NaN stays NaN), then ``mlas_exp_avx512``."""
    upper = math.scalar32(MLAS_EXP_UPPER, x)
    return mlas_exp_avx512(math, math.where(x > upper, upper, x))


__all__ += ["glibc_logf", "logf_reduction", "mlas_exp", "MLAS_EXP_UPPER"]
