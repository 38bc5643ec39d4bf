"""Lowerings of the naive Bayes ops: the joint log-likelihoods (``gaussian_nb``,
``discrete_nb``, ``categorical_nb``) and the posterior (``nb_posterior``), with the
elementwise steps of scikit-learn's expressions in the same order and dtypes; only
the sums (over features, over classes) reduce in Torch's order."""

import numpy as np
import torch
from torch import nn

from ..ops import register_lowering

__all__ = ["GaussianNBNode", "DiscreteNBNode", "CategoricalNBNode", "NBPosteriorNode"]


def _torch_dtype(dtype):
    return getattr(torch, np.dtype(dtype).name)


class GaussianNBNode(nn.Module):
    def __init__(self, op, input_dtype):
        super().__init__()
        dtype = op.output_dtypes([input_dtype])[0]
        joint, norm = op.constants()
        self.dtype = _torch_dtype(dtype)
        # (1, n_classes, n_features): every class at once, not one class at a time
        self.register_buffer("theta", torch.from_numpy(op.theta.astype(dtype)).unsqueeze(0))
        self.register_buffer("var", torch.from_numpy(op.var.astype(dtype)).unsqueeze(0))
        self.register_buffer("joint", torch.from_numpy(np.asarray(joint, dtype=dtype)))
        self.register_buffer("norm", torch.from_numpy(np.asarray(norm, dtype=dtype)))
        size = op.n_classes * op.n_features
        self.estimate_bytes = lambda n_rows: 3 * 8 * n_rows * size

    def forward(self, x):
        d = x.to(self.dtype).unsqueeze(1) - self.theta
        n_ij = self.norm - 0.5 * torch.sum((d * d) / self.var, dim=2)
        return (self.joint + n_ij,)


@register_lowering("gaussian_nb")
def _gaussian_nb(op, input_dtypes, context):
    return GaussianNBNode(op, input_dtypes[0])


class DiscreteNBNode(nn.Module):
    def __init__(self, op, input_dtype):
        super().__init__()
        input_dtype = np.dtype(input_dtype)
        dtype = op.output_dtypes([input_dtype])[0]
        self.dtype = _torch_dtype(dtype)
        self.register_buffer("weights_t", torch.from_numpy(
            np.ascontiguousarray(op.weights.T.astype(dtype))))
        self.has_bias = op.bias is not None
        if self.has_bias:
            self.register_buffer("bias", torch.from_numpy(op.bias.astype(dtype)))
        self.binarize = op.threshold is not None
        if self.binarize:
            # NumPy compares in X's float dtype with a Python threshold (rounded to it),
            # in the wider of the two with a NumPy scalar
            threshold = op.threshold_value()
            kinds = [input_dtype if input_dtype.kind == "f" else np.dtype(np.float64)]
            if op.threshold_dtype is not None:
                kinds.append(np.dtype(op.threshold_dtype))
            compare = np.result_type(*kinds)
            with np.errstate(over="ignore"):
                value = np.asarray(threshold, dtype=compare)
            self.compare_dtype = _torch_dtype(compare)
            self.register_buffer("threshold", torch.from_numpy(value.reshape(1)))
        width = op.n_features + op.n_classes
        self.estimate_bytes = lambda n_rows: 16 * n_rows * width

    def forward(self, x):
        if self.binarize:
            x = (x.to(self.compare_dtype) > self.threshold).to(self.dtype)
        jll = torch.matmul(x.to(self.dtype), self.weights_t)
        if self.has_bias:
            jll = jll + self.bias
        return (jll,)


@register_lowering("discrete_nb")
def _discrete_nb(op, input_dtypes, context):
    return DiscreteNBNode(op, input_dtypes[0])


class CategoricalNBNode(nn.Module):
    """Per feature: the table's row of category ``int(x)`` (a row of NaN for an
    index outside the table), added feature after feature as scikit-learn does."""

    def __init__(self, op, input_dtype):
        super().__init__()
        dtype = op.output_dtypes([input_dtype])[0]
        self.dtype = _torch_dtype(dtype)
        self.n_categories = op.n_categories
        input_dtype = np.dtype(input_dtype)
        # the index of each table's NaN row, in the input's dtype; constants are buffers
        # (TVM does not legalize full_like)
        index_dtype = input_dtype if input_dtype.kind == "f" else np.dtype(np.float64)
        self.register_buffer("past_end", torch.from_numpy(
            np.asarray(op.n_categories, dtype=index_dtype)))
        self.register_buffer("zero", torch.zeros((), dtype=self.dtype))
        for i, table in enumerate(op.tables):
            rows = np.full((table.shape[1] + 1, op.n_classes), np.nan, dtype=dtype)
            rows[:-1] = table.T
            self.register_buffer(f"table_{i}", torch.from_numpy(rows))
        self.register_buffer("class_log_prior", torch.from_numpy(op.class_log_prior.astype(dtype)))
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (op.n_features + 3 * op.n_classes)

    def forward(self, x):
        jll = None
        for i, n in enumerate(self.n_categories):
            column = x[:, i]
            known = (column > -1) & (column < n)
            # the cast truncates toward zero, as NumPy's astype(int) does
            index = torch.where(known, column, self.past_end[i]).to(torch.int64)
            values = torch.index_select(getattr(self, f"table_{i}"), 0, index)
            jll = self.zero + values if jll is None else jll + values
        return (jll + self.class_log_prior,)


@register_lowering("categorical_nb")
def _categorical_nb(op, input_dtypes, context):
    return CategoricalNBNode(op, input_dtypes[0])


class NBPosteriorNode(nn.Module):
    """scikit-learn's ``_logsumexp`` over the classes, then ``[exp(log_proba) |
    log_proba]``."""

    def __init__(self, op, input_dtype):
        super().__init__()
        self.dtype = _torch_dtype(input_dtype)
        self.register_buffer("minus_inf", torch.tensor(-np.inf, dtype=self.dtype))
        self.register_buffer("zero", torch.zeros((), dtype=self.dtype))
        self.estimate_bytes = lambda n_rows: 8 * 8 * n_rows * op.n_classes

    def forward(self, jll):
        array_max = torch.max(jll, dim=1, keepdim=True).values
        index_max = jll == array_max
        array = torch.where(index_max, self.minus_inf, jll)
        m = torch.sum(index_max.to(self.dtype), dim=1, keepdim=True)
        finite = torch.abs(array_max) < -self.minus_inf  # isfinite (which TVM does not compile)
        shift = torch.where(finite, array_max, self.zero)
        s = torch.sum(torch.exp(array - shift), dim=1, keepdim=True)
        s = torch.where(s == 0, s, s / m)
        log_prob_x = torch.log1p(s) + torch.log(m) + array_max
        log_proba = jll - log_prob_x
        return (torch.cat([torch.exp(log_proba), log_proba], dim=1),)


@register_lowering("nb_posterior")
def _nb_posterior(op, input_dtypes, context):
    return NBPosteriorNode(op, input_dtypes[0])
