"""NumPy definitions of the post-transforms named in the IR (the reference)."""

import math

import numpy as np

__all__ = ["apply_post_transform", "transformed_width"]


def _own_sigmoid(z):
    # exp of a non-positive number never overflows: 1 / (1 + e) for z >= 0, else
    # e / (1 + e), with e = exp(-|z|); one division for both halves.
    e = np.exp(-np.abs(z))
    return np.where(z >= 0, 1.0, e) / (1.0 + e)


def _scipy_expit():
    try:
        from scipy.special import expit
    except ImportError:  # scipy comes with scikit-learn; without it, the formula above
        return _own_sigmoid
    return expit


def _libm(fn):
    """``fn``, a ``math`` function (it calls the C library's), element-wise in float64:
    the answer of a C program that calls it; an overflow is inf, as in C."""
    def one(v):
        try:
            return fn(v)
        except OverflowError:
            return math.inf
    ufunc = np.frompyfunc(one, 1, 1)
    return lambda z: ufunc(z).astype(np.float64)


# NumPy's exp can differ from the C library's in the last bit (its SIMD kernels), so the
# links of sources that call std::exp (LightGBM) take the C library's through ``math``.
_libm_exp, _libm_log1p = _libm(math.exp), _libm(math.log1p)


def _libm_softmax(z):
    """LightGBM's Common::Softmax in double: the row's maximum as std::max folds it,
    std::exp of each difference, their sum from left to right, each divided by it."""
    top = z[:, 0]
    for k in range(1, z.shape[1]):
        top = np.where(z[:, k] < top, top, z[:, k])  # std::max(z_k, top)
    e = _libm_exp(z - top[:, None])
    total = np.zeros(len(z))
    for k in range(z.shape[1]):
        total = total + e[:, k]
    return e / total[:, None]


# scikit-learn computes its sigmoids with scipy's expit (linear models, GradientBoosting,
# HistGradientBoosting); calling the same function gives its answer to the bit.
_sigmoid = _scipy_expit()


def _binary(p):
    """(1 - p, p) side by side, written into one array (no concatenate)."""
    out = np.empty((p.shape[0], 2), dtype=p.dtype)
    out[:, 1:] = p
    np.subtract(1.0, p, out=out[:, :1])
    return out


def apply_post_transform(name: str, raw: np.ndarray, scale: float = 1.0) -> np.ndarray:
    """Transform raw scores of shape (n, n_outputs), in float64."""
    z = raw * scale if scale != 1.0 else raw
    if name == "identity":
        return z
    if name == "sigmoid":
        return _sigmoid(z)
    if name == "sigmoid_binary":
        return _binary(_sigmoid(z[:, :1]))
    if name == "identity_binary":
        return _binary(z[:, :1])
    if name == "step":
        return (z > 0).astype(z.dtype)
    if name == "step_binary":
        s = (z[:, :1] > 0).astype(z.dtype)
        return np.concatenate([1.0 - s, s], axis=1)
    if name == "argmax":
        return np.argmax(z, axis=1).astype(z.dtype).reshape(-1, 1)
    if name == "softplus":  # LightGBM's std::log1p(std::exp(z))
        return _libm_log1p(_libm_exp(z))
    if name == "softmax_libm":
        return _libm_softmax(z)
    if name == "exp_libm":
        return _libm_exp(z)
    if name == "softmax":
        e = np.exp(z - z.max(axis=1, keepdims=True))
        return e / e.sum(axis=1, keepdims=True)
    if name == "sigmoid_ovr":  # one-vs-rest sigmoids, normalised (SGDClassifier log_loss)
        p = _sigmoid(z)
        total = p.sum(axis=1, keepdims=True)
        zero = total == 0  # all sigmoids rounded to 0: uniform, as scikit-learn does
        if zero.any():
            p = np.where(zero, 1.0, p)
            total = np.where(zero, p.shape[1], total)
        return p / total
    if name == "modified_huber_binary":  # SGDClassifier(loss="modified_huber"), 2 classes
        p = np.clip(z[:, :1], -1, 1)
        p += 1.0
        p /= 2.0
        return _binary(p)
    if name == "modified_huber":  # its multiclass rule: normalised, uniform when all 0
        p = np.clip(z, -1, 1)
        p += 1.0
        p /= 2.0
        total = p.sum(axis=1)
        zero = total == 0
        if zero.any():
            p[zero, :] = 1
            total[zero] = p.shape[1]
        p /= total.reshape((p.shape[0], -1))
        return p
    if name == "exp":
        return np.exp(z)
    if name == "isolation_forest":
        return -np.exp2(-z)
    raise ValueError(f"unknown post_transform {name!r}")


_TWO_COLUMNS = ("sigmoid_binary", "identity_binary", "step_binary", "modified_huber_binary")


def transformed_width(name: str, n_outputs: int) -> int:
    """Columns of ``apply_post_transform(name, raw)`` for ``n_outputs`` raw columns."""
    if name in _TWO_COLUMNS:
        return 2
    if name == "argmax":
        return 1
    return n_outputs
