"""``onnx_isolation_forest``: what follows the trees in skl2onnx's IsolationForest
graph, as ONNX Runtime computes it (1.32, x86-64).

Each tree's leaf id (its TreeEnsembleRegressor's output) selects the tree's depth term,
which the frontend (``frontends/onnx_ml/isolation.py``) evaluated per leaf with the
graph's own float32 steps. A ``Log`` of an (n, 1) tensor runs Eigen's packets of four
on the first ``n - n % 4`` rows and glibc's logf on the rest, so each tree has two
tables: ``packet_terms`` and ``tail_terms`` (equal unless a logarithm differs). The
terms are added tree after tree in float32 (ONNX ``Sum``), divided by ``divisor``,
negated, raised as ``base ** x`` (glibc's powf of a constant base: ``powf_of_base``)
and negated again (``score_samples``); ``offset`` is added (the decision). A row is an
outlier (label -1) where the decision is below ``threshold``."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op
from .onnx_math import (_EXP2F_POLY, _EXP2F_SHIFT, _EXP2F_TABLE, _POWF_INVC, _POWF_LOG2C,
                        _POWF_LOG2_POLY, _POWF_OVERFLOW, PositionNumpyMath)
from .onnx_ops import NumpyMath, logf_reduction

__all__ = ["OnnxIsolationForest", "isolation_forest_outputs", "powf_of_base", "ISOLATION_LABELS"]

ISOLATION_LABELS = (-1, 1)  # the label index 0 is an outlier


def _log2_of_constant(base):
    """glibc powf's float64 ``log2 base`` for a positive finite float32 constant, with
    the steps ``glibc_powf`` takes for its column."""
    x = np.array([base], np.float32)
    z, k, index = logf_reduction(NumpyMath, x)
    a0, a1, a2, a3, a4 = _POWF_LOG2_POLY
    r = z * np.asarray(_POWF_INVC, np.float64)[index.astype(np.int64)] - 1.0
    y0 = np.asarray(_POWF_LOG2C, np.float64)[index.astype(np.int64)] + k
    r2 = r * r
    p0 = a0 * r + a1
    p = a2 * r + a3
    r4 = r2 * r2
    q = a4 * r + y0
    q = p * r2 + q
    return float((p0 * r4 + q)[0])


def powf_of_base(math, base, y):
    """float32 ``powf(base, y)`` for a positive finite float32 constant ``base`` other
    than 1 and a float32 column ``y``, as glibc computes it (``glibc_powf`` with the
    roles swapped: ``y * log2 base`` in double, then the same 2^(k/32) table step). An
    infinite y gives inf or 0 as C's pow, a NaN y NaN, y == 0 gives 1."""
    y = math.cast(y, "float32")
    zero, inf = math.scalar32(0.0, y), math.scalar32(np.inf, y)
    finite = (y == y) & (math.abs(y) < inf)
    ys = math.cast(math.where(finite, y, zero), "float64")
    shift, c0, c1, c2, log2x, overflow = (
        math.full(y, v, "float64") for v in (_EXP2F_SHIFT, *_EXP2F_POLY,
                                             _log2_of_constant(base), _POWF_OVERFLOW))
    ylogx = ys * log2x
    kd = (ylogx + shift) - shift  # k / 32, rounded to nearest (even)
    r = ylogx - kd
    m = kd * 32.0
    high = math.floor(m / 32.0)
    safe_high = math.where(ylogx > overflow, high * 0.0, high)
    safe_high = math.where(ylogx <= math.full(y, -150.0, "float64"), high * 0.0, safe_high)
    scale = math.take(_EXP2F_TABLE, m - high * 32.0) * math.pow2(safe_high - 1.0) * 2.0
    poly = c0 * r + c1
    rr = r * r
    e = c2 * r + 1.0
    e = poly * rr + e
    out = math.cast(e * scale, "float32")
    out = math.where(ylogx > overflow, inf, out)
    out = math.where(ylogx <= math.full(y, -150.0, "float64"), zero, out)
    grows = base > 1.0  # y = +inf: inf above 1, 0 below; y = -inf the other way
    out = math.where(y == inf, inf if grows else zero, out)
    out = math.where(y == -inf, zero if grows else inf, out)
    return math.where(y != y, math.scalar32(np.nan, y), out)


def isolation_forest_outputs(op, X, packet, tail, offsets, math=NumpyMath):
    """(n, 3) float32: the decision, ``score_samples`` and the label index (0 for an
    outlier) of each row of the (n, n_trees) leaf ids ``X``; ``packet``, ``tail`` and
    ``offsets`` are ``op.flat_tables()`` (a leaf's term is at its id plus its tree's
    offset). ``math`` must count a row's place in the call (``rows_from_end``) when
    ``op.whole_call``."""
    index = math.cast(X, "float64") + offsets
    terms = math.cast(math.take(packet, index), "float32")
    if op.whole_call:
        from_end = math.rows_from_end(index)  # 0 on the last row
        rows = from_end + math.rows_from_start(index) + 1.0
        in_tail = from_end < rows - math.floor(rows / 4.0) * 4.0  # glibc's logf there
        tail_terms = math.cast(math.take(tail, index), "float32")
    total = None
    for t in range(op.n_trees):
        term = math.column(terms, t)
        if op.whole_call:
            term = math.where(in_tail, math.column(tail_terms, t), term)
        total = term if total is None else total + term
    one = math.scalar32(1.0, total)
    scaled = total / math.scalar32(op.divisor, total)
    score = -powf_of_base(math, op.base, -scaled)
    decision = score + math.scalar32(op.offset, total)
    inlier = math.where(decision < math.scalar32(op.threshold, total), one * 0.0, one)
    return math.stack([decision, score, inlier])


@register_op
@dataclass(frozen=True, eq=False)
class OnnxIsolationForest(Op):
    """skl2onnx's IsolationForest graph after its trees (``isolation_forest_outputs``):
    ``packet_terms``/``tail_terms`` (n_trees, max leaf id + 1) each tree's depth term by
    leaf id (NaN where no leaf has that id), ``divisor`` the average path length of the
    training sample times the tree count, ``base`` the power's base (2), ``offset`` the
    decision's (``-offset_``) and ``threshold`` the labels' (0)."""

    kind = "onnx_isolation_forest"

    packet_terms: np.ndarray
    tail_terms: np.ndarray
    divisor: float
    base: float
    offset: float
    threshold: float = 0.0

    def __post_init__(self):
        for name in ("packet_terms", "tail_terms"):
            value = np.ascontiguousarray(getattr(self, name), dtype=np.float32)
            value.flags.writeable = False
            object.__setattr__(self, name, value)
        for name in ("divisor", "base", "offset", "threshold"):
            object.__setattr__(self, name, float(np.float32(getattr(self, name))))

    @property
    def n_trees(self):
        return self.packet_terms.shape[0]

    @property
    def width(self):
        return self.n_trees

    @property
    def whole_call(self):
        """Whether a row's term depends on its place in the call (a logarithm whose
        Eigen and glibc values differ): then a call is never split into batches."""
        same = (self.packet_terms == self.tail_terms) | \
            (np.isnan(self.packet_terms) & np.isnan(self.tail_terms))
        return not bool(same.all())

    def validate(self):
        self.expect(self.packet_terms.ndim == 2 and self.packet_terms.shape[0] >= 1,
                    "packet_terms must be (n_trees, n_ids)")
        self.expect(self.tail_terms.shape == self.packet_terms.shape,
                    "tail_terms must have packet_terms' shape")
        self.expect(np.isfinite(self.base) and self.base > 0 and self.base != 1,
                    "base must be positive, finite and not 1")
        self.expect(np.isfinite(self.divisor) and np.isfinite(self.offset),
                    "divisor and offset must be finite")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_trees)
        return [ValueType.floats(3)]

    def output_dtypes(self, input_dtypes):
        return [np.dtype(np.float32)]

    def reference(self, inputs):
        with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
            return [isolation_forest_outputs(self, inputs[0], *self.flat_tables(),
                                             PositionNumpyMath)]

    def flat_tables(self):
        """The packet and tail tables as flat float64 arrays (tree after tree) and each
        tree's offset in them."""
        packet, tail = (np.ascontiguousarray(table, np.float64).reshape(-1)
                        for table in (self.packet_terms, self.tail_terms))
        return packet, tail, np.arange(self.n_trees, dtype=np.float64) * self.packet_terms.shape[1]

    def to_saved(self):
        return ({"divisor": self.divisor, "base": self.base, "offset": self.offset,
                 "threshold": self.threshold},
                {"packet_terms": self.packet_terms, "tail_terms": self.tail_terms})

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(packet_terms=arrays["packet_terms"], tail_terms=arrays["tail_terms"], **meta)
