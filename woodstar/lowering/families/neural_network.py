"""Lowering of the multilayer perceptron (``mlp``): one matrix product per layer, in
the dtype NumPy computes it in, then the activation."""

import numpy as np
import torch
from torch import nn

from ..ops import register_lowering
from ..post_transforms import logistic

__all__ = ["MLPNode"]


def _torch_dtype(dtype):
    return getattr(torch, np.dtype(dtype).name)


def _softmax(x):
    tmp = x - torch.max(x, dim=1, keepdim=True).values
    e = torch.exp(tmp)
    return e / torch.sum(e, dim=1, keepdim=True)


_ACTIVATIONS = {
    "identity": lambda x: x,
    "exp": torch.exp,
    "logistic": logistic,  # below about -709 exp(-x) overflows: 0, as in scikit-learn
    "tanh": torch.tanh,
    "relu": torch.relu,
    "softmax": _softmax,
}


class MLPNode(nn.Module):
    """``forward(x) -> (output,)``: the network's output (a classifier's
    probabilities, ``(1 - p, p)`` for one logistic output; a regressor's values)."""

    def __init__(self, op, input_dtype):
        super().__init__()
        dtypes = op.layer_dtypes(input_dtype)
        self.n_layers = len(op.coefs)
        self.layer_dtypes = tuple(_torch_dtype(d) for d in dtypes)
        self.bias_dtypes = []
        for i, (coef, bias, dtype) in enumerate(zip(op.coefs, op.intercepts, dtypes)):
            # NumPy promotes the weights to the activation's dtype (exactly), and adds a
            # wider bias in its own dtype before rounding to the activation's.
            wide = np.result_type(dtype, bias.dtype)
            self.register_buffer(f"coef_{i}", torch.from_numpy(coef.astype(dtype)))
            self.register_buffer(f"intercept_{i}", torch.from_numpy(bias.astype(wide)))
            self.bias_dtypes.append(None if wide == dtype else _torch_dtype(wide))
        self.hidden = _ACTIVATIONS[op.activation]
        self.output = _ACTIVATIONS[op.out_activation]
        self.binary = op.binary
        widths = [op.n_features] + [c.shape[1] for c in op.coefs]
        self.estimate_bytes = lambda n_rows: 8 * n_rows * (2 * max(widths) + sum(widths))

    def forward(self, x):
        activation = x
        for i in range(self.n_layers):
            dtype = self.layer_dtypes[i]
            activation = torch.matmul(activation.to(dtype), getattr(self, f"coef_{i}"))
            bias = getattr(self, f"intercept_{i}")
            wide = self.bias_dtypes[i]
            if wide is None:
                activation = activation + bias
            else:
                activation = (activation.to(wide) + bias).to(dtype)
            if i != self.n_layers - 1:
                activation = self.hidden(activation)
        activation = self.output(activation)
        if self.binary:
            activation = torch.cat([1 - activation, activation], dim=1)
        return (activation,)


@register_lowering("mlp")
def _mlp(op, input_dtypes, context):
    return MLPNode(op, input_dtypes[0])
