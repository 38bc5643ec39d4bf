"""Ops of the kernel support vector machines (scikit-learn's libsvm estimators).

libsvm predicts in three steps, and so does the graph:

1. ``svm_kernel``: the kernel value of every row with every support vector, as
   libsvm's ``Kernel::k_function`` computes it in float64: ``dot`` (linear),
   ``powi(gamma * dot + coef0, degree)`` by repeated squaring (poly),
   ``exp(-gamma * ||x - sv||^2)`` on the difference vector (rbf),
   ``tanh(gamma * dot + coef0)`` (sigmoid).
2. a ``linear`` op (woodstar/ir/linear.py): the decision values, one per pair of
   classes ``(i, j)`` (``sum_k coef[p, k] * K[:, k] + intercept[p]`` with the pair's
   support vectors only: zeros elsewhere), or one value for the regressors and the
   one-class model.
3. for the classifiers, ``svm_ovo_vote`` (the decision function scikit-learn shows,
   ``"ovo"`` or ``"ovr"``, and the predicted class by libsvm's pairwise votes) and
   ``svm_pairwise_proba`` (Platt's sigmoid per pair with ``probA_``/``probB_``, then
   libsvm's ``multiclass_probability`` iterations).

libsvm sums its dot products with BLAS ``ddot`` and its decision values one support
vector at a time in C (the ``linear`` op's ``summation="in_order"``). The CPU route
does the same, calling the very ``ddot`` scikit-learn hands libsvm and libm's ``exp``
and ``tanh`` (woodstar/runtimes/families/svm.py), so its answers are scikit-learn's bit
for bit. The ops' NumPy references (kernel values by matrix products, NumPy's
``exp``) and the Torch programs sum in their own order: within about 1e-15 relative (the tests hold them to 1e-12 of the
values' scale). Every other step (``powi``, the pairwise votes, the ``"ovr"``
transform, the probability iterations) repeats libsvm's and scikit-learn's own
arithmetic in their order.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["SVMKernel", "SVMOvoVote", "SVMPairwiseProba", "SVM_KERNELS", "pairs_of",
           "powi", "ovr_decision", "multiclass_probability", "pairwise_sigmoid"]

SVM_KERNELS = ("linear", "poly", "rbf", "sigmoid")
DECISION_SHAPES = ("ovo", "ovr")
MIN_PROB = 1e-7  # libsvm's svm_predict_probability clips each pairwise probability


def pairs_of(n_classes):
    """libsvm's order of the class pairs: (0, 1), (0, 2), ..., (1, 2), ..."""
    return [(i, j) for i in range(n_classes) for j in range(i + 1, n_classes)]


def powi(base, times):
    """libsvm's ``powi``: ``base ** times`` by repeated squaring (same multiplications)."""
    tmp, ret = base, np.ones_like(base)
    t = int(times)
    while t > 0:
        if t % 2 == 1:
            ret = ret * tmp
        tmp = tmp * tmp
        t //= 2
    return ret


def ovr_decision(dec, n_classes):
    """scikit-learn's ``_ovr_decision_function(dec < 0, -dec, n_classes)``, in its order."""
    predictions, confidences = dec < 0, -dec
    n_samples = predictions.shape[0]
    votes = np.zeros((n_samples, n_classes))
    sum_of_confidences = np.zeros((n_samples, n_classes))
    for k, (i, j) in enumerate(pairs_of(n_classes)):
        sum_of_confidences[:, i] -= confidences[:, k]
        sum_of_confidences[:, j] += confidences[:, k]
        votes[predictions[:, k] == 0, i] += 1
        votes[predictions[:, k] == 1, j] += 1
    transformed_confidences = sum_of_confidences / (3 * (np.abs(sum_of_confidences) + 1))
    return votes + transformed_confidences


def pairwise_sigmoid(internal, prob_a, prob_b, exp=np.exp):
    """libsvm's ``sigmoid_predict`` of each pair's decision value, clipped to
    [1e-7, 1 - 1e-7] as ``svm_predict_probability`` does. ``exp``: NumPy's here; the
    CPU route passes libm's, which libsvm calls (they differ in the last bit at times)."""
    f = internal * prob_a + prob_b
    with np.errstate(over="ignore", invalid="ignore"):
        positive = exp(-f) / (1.0 + exp(-f))
        negative = 1.0 / (1 + exp(f))
    s = np.where(f >= 0, positive, negative)
    return np.minimum(np.maximum(s, MIN_PROB), 1 - MIN_PROB)


def multiclass_probability(r):
    """libsvm's ``multiclass_probability`` (Wu, Lin and Weng's method 2) for every row:
    ``r`` (n, k, k) pairwise probabilities -> (n, k). Rows iterate in lockstep; a row
    stops at the iteration where libsvm's loop breaks for it (its updates are then
    multiplied by a zero step: exactly no change)."""
    n, k = r.shape[0], r.shape[1]
    max_iter, eps = max(100, k), 0.005 / k
    p = np.full((n, k), 1.0 / k)
    Q = np.zeros((n, k, k))
    for t in range(k):
        qtt = np.zeros(n)
        for j in range(t):
            qtt = qtt + r[:, j, t] * r[:, j, t]
            Q[:, t, j] = Q[:, j, t]
        for j in range(t + 1, k):
            qtt = qtt + r[:, j, t] * r[:, j, t]
            Q[:, t, j] = -r[:, j, t] * r[:, t, j]
        Q[:, t, t] = qtt
    active = np.ones(n, dtype=bool)
    for _ in range(max_iter):
        Qp = np.zeros((n, k))
        pQp = np.zeros(n)
        for t in range(k):
            acc = np.zeros(n)
            for j in range(k):
                acc = acc + Q[:, t, j] * p[:, j]
            Qp[:, t] = acc
            pQp = pQp + p[:, t] * acc
        error = np.abs(Qp - pQp[:, None])
        max_error = np.max(np.where(error > 0, error, 0.0), axis=1)  # NaN never wins
        active &= ~(max_error < eps)
        if not active.any():
            break
        for t in range(k):
            diff = np.where(active, (-Qp[:, t] + pQp) / Q[:, t, t], 0.0)
            p[:, t] = p[:, t] + diff
            step = 1 + diff
            pQp = (pQp + diff * (diff * Q[:, t, t] + 2 * Qp[:, t])) / step / step
            Qp = (Qp + diff[:, None] * Q[:, t, :]) / step[:, None]
            p = p / step[:, None]
    return p


def _floats(value):
    return np.ascontiguousarray(value, dtype=np.float64)


@register_op
@dataclass(frozen=True, eq=False)
class SVMKernel(Op):
    """(n, n_features) -> (n, n_support) kernel values in float64 (scikit-learn converts
    every input to float64 before libsvm reads it)."""

    kind = "svm_kernel"
    kernel: str
    support_vectors: np.ndarray  # (n_support, n_features) float64
    gamma: float = 0.0
    coef0: float = 0.0
    degree: int = 3

    def __post_init__(self):
        object.__setattr__(self, "support_vectors", _floats(self.support_vectors))
        object.__setattr__(self, "gamma", float(self.gamma))
        object.__setattr__(self, "coef0", float(self.coef0))
        object.__setattr__(self, "degree", int(self.degree))

    @property
    def n_features(self):
        return int(self.support_vectors.shape[1])

    @property
    def n_support(self):
        return int(self.support_vectors.shape[0])

    def validate(self):
        self.expect(self.kernel in SVM_KERNELS,
                    f"kernel {self.kernel!r} not in {SVM_KERNELS}")
        self.expect(self.support_vectors.ndim == 2 and self.support_vectors.shape[0] > 0,
                    f"support_vectors has shape {self.support_vectors.shape}; "
                    f"expected (n_support >= 1, n_features)")
        self.expect(np.isfinite(self.support_vectors).all(), "support_vectors holds non-finite values")
        self.expect(np.isfinite([self.gamma, self.coef0]).all(), "gamma or coef0 is not finite")
        self.expect(self.degree >= 0, f"degree {self.degree} is negative")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_support)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def kernel_values(self, X):
        X = np.asarray(X, dtype=np.float64)
        sv = self.support_vectors
        if self.kernel == "rbf":
            # libsvm: ddot of the difference vector with itself; feature by feature
            # here, so that no (n, n_support, n_features) block is ever allocated
            total = np.zeros((X.shape[0], sv.shape[0]))
            for f in range(sv.shape[1]):
                d = X[:, f:f + 1] - sv[:, f]
                total = total + d * d
            return np.exp(-self.gamma * total)
        dot = X @ sv.T
        if self.kernel == "linear":
            return dot
        if self.kernel == "poly":
            return powi(self.gamma * dot + self.coef0, self.degree)
        return np.tanh(self.gamma * dot + self.coef0)

    def reference(self, inputs):
        return [self.kernel_values(inputs[0])]

    def to_saved(self):
        return ({"kernel": self.kernel, "gamma": self.gamma, "coef0": self.coef0,
                 "degree": self.degree}, {"support_vectors": self.support_vectors})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(kernel=str(meta["kernel"]), support_vectors=arrays["support_vectors"],
                   gamma=float(meta["gamma"]), coef0=float(meta["coef0"]),
                   degree=int(meta["degree"]))


class _PairwiseOp(Op):
    """Shared by the ops reading the decision values of a classifier: ``n_classes``
    and ``negated`` (a binary classifier: scikit-learn shows minus libsvm's value)."""

    def _check_classes(self):
        self.expect(self.n_classes >= 2, f"n_classes {self.n_classes} < 2")

    @property
    def n_pairs(self):
        return self.n_classes * (self.n_classes - 1) // 2

    def internal(self, dec):
        """libsvm's own decision values (scikit-learn negates a binary model's)."""
        return -dec if self.negated else dec


@register_op
@dataclass(frozen=True, eq=False)
class SVMOvoVote(_PairwiseOp):
    """One-vs-one decision values (as scikit-learn shows them) -> (the decision function
    scikit-learn returns, the predicted class's index as a float).

    The class is libsvm's: pair ``(i, j)`` votes ``i`` when libsvm's value is > 0, else
    ``j``; the most votes win, ties to the lowest index. With ``break_ties`` (and
    ``"ovr"``, more than two classes) it is the argmax of the ``"ovr"`` function."""

    kind = "svm_ovo_vote"
    n_classes: int
    decision_shape: str = "ovr"
    break_ties: bool = False
    negated: bool = False

    def __post_init__(self):
        object.__setattr__(self, "n_classes", int(self.n_classes))
        object.__setattr__(self, "break_ties", bool(self.break_ties))
        object.__setattr__(self, "negated", bool(self.negated))

    @property
    def ovr(self):
        return self.decision_shape == "ovr" and self.n_classes > 2

    @property
    def decision_width(self):
        return self.n_classes if self.ovr else self.n_pairs

    def validate(self):
        self._check_classes()
        self.expect(self.decision_shape in DECISION_SHAPES,
                    f"decision_shape {self.decision_shape!r} not in {DECISION_SHAPES}")
        self.expect(not (self.break_ties and self.decision_shape == "ovo"),
                    "break_ties needs decision_shape 'ovr'")
        self.expect(not self.negated or self.n_classes == 2, "only a binary model is negated")
        return self

    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_pairs)
        return [ValueType.floats(self.decision_width), ValueType.floats(1)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)] * 2

    def votes(self, dec):
        internal = self.internal(dec)
        votes = np.zeros((dec.shape[0], self.n_classes), dtype=np.int64)
        for p, (i, j) in enumerate(pairs_of(self.n_classes)):
            wins = internal[:, p] > 0
            votes[:, i] += wins
            votes[:, j] += ~wins
        return votes

    def reference(self, inputs):
        dec = np.asarray(inputs[0], dtype=np.float64)
        decision = ovr_decision(dec, self.n_classes) if self.ovr else dec
        if self.break_ties and self.ovr:
            index = np.argmax(decision, axis=1)
        else:
            index = np.argmax(self.votes(dec), axis=1)
        return [decision, index.astype(np.float64).reshape(-1, 1)]

    def to_saved(self):
        return ({"n_classes": self.n_classes, "decision_shape": self.decision_shape,
                 "break_ties": self.break_ties, "negated": self.negated}, {})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_classes=int(meta["n_classes"]), decision_shape=str(meta["decision_shape"]),
                   break_ties=bool(meta["break_ties"]), negated=bool(meta["negated"]))


@register_op
@dataclass(frozen=True, eq=False)
class SVMPairwiseProba(_PairwiseOp):
    """One-vs-one decision values -> class probabilities, as libsvm's
    ``svm_predict_probability``: Platt's sigmoid per pair (``prob_a``, ``prob_b``),
    clipped, then ``multiclass_probability`` (also for two classes, as scikit-learn's
    libsvm does)."""

    kind = "svm_pairwise_proba"
    n_classes: int
    prob_a: np.ndarray  # (n_pairs,) float64
    prob_b: np.ndarray
    negated: bool = False

    def __post_init__(self):
        object.__setattr__(self, "n_classes", int(self.n_classes))
        object.__setattr__(self, "prob_a", _floats(self.prob_a).reshape(-1))
        object.__setattr__(self, "prob_b", _floats(self.prob_b).reshape(-1))
        object.__setattr__(self, "negated", bool(self.negated))

    def validate(self):
        self._check_classes()
        for name in ("prob_a", "prob_b"):
            array = getattr(self, name)
            self.expect(array.shape == (self.n_pairs,),
                        f"{name} has shape {array.shape}; expected ({self.n_pairs},)")
            self.expect(np.isfinite(array).all(), f"{name} holds non-finite values")
        self.expect(not self.negated or self.n_classes == 2, "only a binary model is negated")
        return self

    def output_types(self, input_types):
        (value,) = input_types
        self.expect_width(value, self.n_pairs)
        return [ValueType.floats(self.n_classes)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float64)]

    def pairwise(self, dec, exp=np.exp):
        """(n, k, k) pairwise probabilities r[i][j] (diagonal unused)."""
        s = pairwise_sigmoid(self.internal(np.asarray(dec, dtype=np.float64)),
                             self.prob_a, self.prob_b, exp)
        r = np.zeros((dec.shape[0], self.n_classes, self.n_classes))
        for p, (i, j) in enumerate(pairs_of(self.n_classes)):
            r[:, i, j] = s[:, p]
            r[:, j, i] = 1 - s[:, p]
        return r

    def reference(self, inputs):
        return [multiclass_probability(self.pairwise(inputs[0]))]

    def to_saved(self):
        return ({"n_classes": self.n_classes, "negated": self.negated},
                {"prob_a": self.prob_a, "prob_b": self.prob_b})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_classes=int(meta["n_classes"]), prob_a=arrays["prob_a"],
                   prob_b=arrays["prob_b"], negated=bool(meta["negated"]))
