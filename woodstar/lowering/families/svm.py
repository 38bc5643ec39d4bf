"""Torch lowerings of the kernel-SVM ops (NumPy references: woodstar/ir/families/svm.py).

Everything runs in float64, as libsvm does. The probability iterations run up to
libsvm's ``max_iter`` (``max(100, n_classes)``) with a per-row "still iterating"
mask: a row that libsvm stops for takes zero steps from then on, which leaves its
values exactly as they were, so no branch depends on the data. Eager calls stop once
every row has stopped. An exported program (ONNX) holds the iteration once, as a
loop (``while_loop``, ONNX ``Loop``) that stops when every row has; a traced one
(TorchScript, torch.compile) holds all of them unrolled: ``max_iter * (18 k + 10)``
operations. TVM does not import the loop and takes minutes of CPU time to compile
the unrolled form (more than two minutes for a three-class model, unfinished), so
the TVM backend refuses these at convert time (``refused_by``).
"""

import numpy as np
import torch
from torch import nn

from ...exceptions import unsupported_message
from ...ir.families.svm import MIN_PROB, pairs_of
from ..ops import register_lowering

__all__ = ["SVMKernelNode", "SVMOvoVoteNode", "SVMPairwiseProbaNode"]

F64 = torch.float64


class SVMKernelNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        self.kernel = op.kernel
        self.degree = op.degree
        # float64 buffers, not Python floats: exporters write those as float32 constants
        self.register_buffer("neg_gamma", torch.tensor(-op.gamma, dtype=F64))
        self.register_buffer("gamma", torch.tensor(op.gamma, dtype=F64))
        self.register_buffer("coef0", torch.tensor(op.coef0, dtype=F64))
        sv = torch.from_numpy(op.support_vectors.copy())
        self.register_buffer("sv", sv)
        self.register_buffer("sv_t", sv.T.contiguous())
        n_sv, n_features = op.support_vectors.shape
        per_row = n_sv * (2 * n_features + 3) if op.kernel == "rbf" else 3 * n_sv + n_features
        self.estimate_bytes = lambda n_rows: 8 * n_rows * per_row

    def forward(self, x):
        x = x.to(F64)
        if self.kernel == "rbf":
            diff = x.unsqueeze(1) - self.sv.unsqueeze(0)
            return (torch.exp((diff * diff).sum(dim=2) * self.neg_gamma),)
        dot = torch.matmul(x, self.sv_t)
        if self.kernel == "linear":
            return (dot,)
        base = dot * self.gamma + self.coef0
        if self.kernel == "sigmoid":
            return (torch.tanh(base),)
        ret, tmp, t = None, base, self.degree  # libsvm's powi, unrolled
        while t > 0:
            if t % 2 == 1:
                ret = tmp if ret is None else ret * tmp
            t //= 2
            if t > 0:
                tmp = tmp * tmp
        return (torch.ones_like(base) if ret is None else ret,)


@register_lowering("svm_kernel")
def _kernel(op, input_dtypes, context):
    return SVMKernelNode(op)


def _pair_matrices(n_classes):
    """(n_pairs, k) one-hot of each pair's first and second class."""
    pairs = pairs_of(n_classes)
    first = np.zeros((len(pairs), n_classes))
    second = np.zeros((len(pairs), n_classes))
    for p, (i, j) in enumerate(pairs):
        first[p, i] = 1.0
        second[p, j] = 1.0
    return torch.from_numpy(first), torch.from_numpy(second)


class SVMOvoVoteNode(nn.Module):
    def __init__(self, op):
        super().__init__()
        first, second = _pair_matrices(op.n_classes)
        self.register_buffer("first", first)
        self.register_buffer("second", second)
        self.sign = -1.0 if op.negated else 1.0
        self.ovr, self.break_ties = op.ovr, op.break_ties
        k, n_pairs = op.n_classes, op.n_pairs
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (4 * n_pairs + 6 * k)

    def forward(self, dec):
        dec = dec.to(F64)
        wins = ((dec * self.sign) > 0).to(F64)  # libsvm: pair (i, j) votes i when > 0
        votes = torch.matmul(wins, self.first) + torch.matmul(1.0 - wins, self.second)
        if self.ovr:
            # scikit-learn's _ovr_decision_function(dec < 0, -dec, k)
            negative = (dec < 0).to(F64)
            ovr_votes = torch.matmul(1.0 - negative, self.first) + torch.matmul(negative, self.second)
            confidences = torch.matmul(dec, self.first) - torch.matmul(dec, self.second)
            decision = ovr_votes + confidences / (3 * (torch.abs(confidences) + 1))
        else:
            decision = dec
        chosen = decision if (self.ovr and self.break_ties) else votes
        index = torch.argmax(chosen, dim=1, keepdim=True).to(F64)  # first maximum
        return decision, index


@register_lowering("svm_ovo_vote")
def _vote(op, input_dtypes, context):
    return SVMOvoVoteNode(op)


def _traced():
    """Whether this call builds a graph (TorchScript trace, torch.compile, export),
    where no branch may depend on the data."""
    return torch.jit.is_tracing() or torch.compiler.is_compiling() \
        or torch.compiler.is_exporting()


class SVMPairwiseProbaNode(nn.Module):
    """``force_unroll``: run all of libsvm's ``max_iter`` iterations even in eager mode
    (what a traced program always does); otherwise eager calls stop once every row
    has met libsvm's stopping test, after which the iterations change nothing."""

    # backend -> why it refuses a program holding this node (checked at convert time)
    refused_by = {"tvm": unsupported_message(
        "a kernel SVM with probability=True", "backend", "tvm",
        "'torch', 'torch.jit', 'onnx', 'torch.compile' (TVM does not import libsvm's "
        "probability loop and takes minutes to compile it unrolled; the model without "
        "probability=True converts to TVM)")}

    def __init__(self, op, force_unroll=False):
        super().__init__()
        k = op.n_classes
        self.k = k
        self.force_unroll = force_unroll
        self.sign = -1.0 if op.negated else 1.0
        self.register_buffer("prob_a", torch.from_numpy(op.prob_a.copy()))
        self.register_buffer("prob_b", torch.from_numpy(op.prob_b.copy()))
        # r[i][j] = s_p, r[j][i] = 1 - s_p, by scatter matrices (n_pairs, k*k)
        upper = np.zeros((op.n_pairs, k * k))
        lower = np.zeros((op.n_pairs, k * k))
        for p, (i, j) in enumerate(pairs_of(k)):
            upper[p, i * k + j] = 1.0
            lower[p, j * k + i] = 1.0
        self.register_buffer("upper", torch.from_numpy(upper))
        self.register_buffer("lower", torch.from_numpy(lower))
        self.register_buffer("off_diagonal", torch.from_numpy(1.0 - np.eye(k)))
        self.register_buffer("upper_mask", torch.from_numpy(np.triu(np.ones((k, k)), 1)))
        self.register_buffer("eye", torch.from_numpy(np.eye(k)))
        self.max_iter = max(100, k)
        # Scalars as float64 buffers: exporters write Python floats as float32
        # constants, which would move libsvm's stopping test and clamp.
        self.register_buffer("eps", torch.tensor(0.005 / k, dtype=F64))
        self.register_buffer("min_prob", torch.tensor(MIN_PROB, dtype=F64))
        self.register_buffer("max_prob", torch.tensor(1 - MIN_PROB, dtype=F64))
        self.register_buffer("start", torch.tensor(1.0 / k, dtype=F64))
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (12 * k * k + 4 * op.n_pairs + 16 * k)

    def forward(self, dec):
        k = self.k
        f = dec.to(F64) * self.sign * self.prob_a + self.prob_b
        s = torch.where(f >= 0, torch.exp(-f) / (1.0 + torch.exp(-f)), 1.0 / (1 + torch.exp(f)))
        s = torch.minimum(torch.maximum(s, self.min_prob), self.max_prob)
        # r (n, k, k); the diagonal is never read
        r = (torch.matmul(s, self.upper) + torch.matmul(1 - s, self.lower)).reshape(-1, k, k)
        rt = r.transpose(1, 2)  # rt[:, t, j] = r[:, j, t]
        q_diag = (rt * rt * self.off_diagonal).sum(dim=2)  # Q[t][t] = sum_{j != t} r[j][t]^2
        off_upper = -(rt * r) * self.upper_mask  # Q[t][j] = -r[j][t] * r[t][j], j > t
        Q = off_upper + off_upper.transpose(1, 2) + q_diag.unsqueeze(2) * self.eye
        zero = torch.zeros_like(q_diag[:, :1])
        p = torch.zeros_like(q_diag) + self.start
        active = zero == zero

        def iteration(p, active):
            """One pass of libsvm's loop: its stopping test, then a step for every row
            still iterating (a stopped row's step is zero: its values stay exact)."""
            Qp = torch.matmul(Q, p.unsqueeze(2)).squeeze(2)
            pQp = (p * Qp).sum(dim=1, keepdim=True)
            error = torch.abs(Qp - pQp)
            max_error = torch.where(error > 0, error, zero).max(dim=1, keepdim=True).values
            active = active & ~(max_error < self.eps)
            for t in range(k):  # views taken here: a loop body may not capture aliases
                qp_t, q_tt = Qp[:, t:t + 1], q_diag[:, t:t + 1]
                diff = torch.where(active, (pQp - qp_t) / q_tt, zero)
                step = 1 + diff
                p = (p + diff * self.eye[t]) / step
                pQp = (pQp + diff * (diff * q_tt + 2 * qp_t)) / step / step
                Qp = (Qp + diff * Q[:, t, :]) / step
            return p, active

        if torch.compiler.is_exporting() and not self.force_unroll:
            # one loop in the exported graph (ONNX Loop), not max_iter copies of the
            # body: an export in seconds instead of minutes, and it stops when libsvm does
            from torch._higher_order_ops.while_loop import while_loop

            count = torch.zeros((), dtype=torch.int64, device=p.device)
            _, p, _ = while_loop(
                lambda i, p, active: (i < self.max_iter) & active.any(),
                lambda i, p, active: (i + 1, *iteration(p, active)), (count, p, active))
            return (p,)
        may_stop = not (self.force_unroll or _traced())
        for _ in range(self.max_iter):
            p, active = iteration(p, active)
            if may_stop and not bool(active.any()):
                break
        return (p,)


@register_lowering("svm_pairwise_proba")
def _proba(op, input_dtypes, context):
    return SVMPairwiseProbaNode(op)
