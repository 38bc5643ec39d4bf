"""scikit-learn's ``SplineTransformer`` as one op, ``spline``.

Each input column becomes ``n_splines`` B-spline basis values, from the fitted knots
``t`` and coefficients ``c`` of each ``bsplines_[i]`` (SciPy ``BSpline``), with
scikit-learn's extrapolation beyond the knots: ``continue`` (the polynomial pieces
continued), ``periodic`` (the input wrapped into the knot period), ``constant`` (the
boundary values) and ``linear`` (the boundary values plus the boundary slope times the
distance). ``include_bias=False`` drops each column's last basis function. NaN rows
become zeros where ``handle_missing="zeros"`` (scikit-learn refuses NaN otherwise).

The reference repeats ``SplineTransformer.transform``'s dense branch, NumPy expression
for NumPy expression, and evaluates the splines with SciPy's ``BSpline`` as it does, so
the CPU route gives its bits. The boundary values (``xmin``, ``xmax``, the values and
slopes there) are read off the fitted splines when converting, as scikit-learn computes
them, including its use of ``degree + 1`` boundaries after the first column for linear
extrapolation of degree 0 or 1 (``n_linear``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["SplineBasis", "EXTRAPOLATIONS"]

EXTRAPOLATIONS = ("continue", "periodic", "constant", "linear")


@register_op
@dataclass(frozen=True, eq=False)
class SplineBasis(Op):
    kind = "spline"
    n_features: int
    degree: int
    extrapolation: str
    include_bias: bool
    handle_missing: str  # "error" (NaN refused before) or "zeros"
    extrapolate: bool  # the BSplines' own flag (True for continue and periodic)
    knots: np.ndarray  # (n_features, n_knots_total): each spline's t
    coef: np.ndarray  # (n_features, n_coef, n_splines): each spline's c
    xmin: np.ndarray  # (n_features,) constant/linear: the lower boundary
    xmax: np.ndarray  # (n_features,)
    f_min: np.ndarray  # (n_features, n_splines): spl(xmin)
    f_max: np.ndarray
    fp_min: np.ndarray  # spl(xmin, nu=1)
    fp_max: np.ndarray
    n_linear: np.ndarray  # (n_features,) linear: basis functions continued at each end

    @property
    def n_splines(self):
        return int(self.coef.shape[2])

    @property
    def n_outputs(self):
        return self.n_features * (self.n_splines - (0 if self.include_bias else 1))

    def validate(self):
        self.expect(self.extrapolation in EXTRAPOLATIONS, f"extrapolation {self.extrapolation!r}")
        self.expect(self.handle_missing in ("error", "zeros"),
                    f"handle_missing {self.handle_missing!r}")
        self.expect(self.degree >= 0, f"degree {self.degree} < 0")
        F = self.n_features
        self.expect(self.knots.ndim == 2 and self.knots.shape[0] == F, "knots shape")
        self.expect(self.coef.ndim == 3 and self.coef.shape[0] == F, "coef shape")
        self.expect(self.coef.shape[1] == self.knots.shape[1] - self.degree - 1,
                    "coef rows != len(t) - degree - 1")
        for name in ("f_min", "f_max", "fp_min", "fp_max"):
            self.expect(getattr(self, name).shape == (F, self.n_splines), f"{name} shape")
        self.expect(self.xmin.shape == (F,) and self.xmax.shape == (F,), "xmin/xmax shape")
        self.expect(self.n_linear.shape == (F,) and np.all(self.n_linear <= self.n_splines),
                    "n_linear")
        self.expect(self.include_bias or self.n_splines >= 1, "no basis functions")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_outputs)]

    def output_dtypes(self, input_dtypes):
        dtype = np.dtype(input_dtypes[0])
        return [dtype if dtype in (np.float32, np.float64) else np.dtype(np.float64)]

    def kept_columns(self):
        width = self.n_features * self.n_splines
        if self.include_bias:
            return list(range(width))
        return [j for j in range(width) if (j + 1) % self.n_splines != 0]

    def reference(self, inputs):
        from scipy.interpolate import BSpline

        X = np.asarray(inputs[0])
        if X.dtype not in (np.float32, np.float64):
            X = X.astype(np.float64)
        n_samples, n_features = X.shape
        n_splines = self.n_splines
        degree = self.degree
        dtype = X.dtype
        XBS = np.zeros((n_samples, n_features * n_splines), dtype=dtype)
        for feature_idx in range(n_features):
            t = self.knots[feature_idx]
            spl = BSpline.construct_fast(t, self.coef[feature_idx], degree,
                                         extrapolate=self.extrapolate)
            block = slice(feature_idx * n_splines, (feature_idx + 1) * n_splines)
            nan_row_indices = np.flatnonzero(np.isnan(X[:, feature_idx]))
            if self.extrapolation in ("continue", "periodic"):
                if self.extrapolation == "periodic":
                    n = spl.t.size - spl.k - 1
                    if spl.t[n] - spl.t[spl.k] > 0:
                        x = spl.t[spl.k] + (X[:, feature_idx] - spl.t[spl.k]) % (
                            spl.t[n] - spl.t[spl.k])
                    else:
                        x = np.zeros_like(X[:, feature_idx])
                else:
                    x = X[:, feature_idx]
                XBS[:, block] = spl(x)
                if nan_row_indices.shape[0] > 0:
                    XBS[nan_row_indices, block] = 0
            else:
                xmin, xmax = self.xmin[feature_idx], self.xmax[feature_idx]
                f_min, f_max = self.f_min[feature_idx], self.f_max[feature_idx]
                inside_range_mask = (xmin <= X[:, feature_idx]) & (X[:, feature_idx] <= xmax)
                XBS[inside_range_mask, block] = spl(X[inside_range_mask, feature_idx])
                if self.extrapolation == "constant":
                    below_xmin_mask = X[:, feature_idx] < xmin
                    if np.any(below_xmin_mask):
                        XBS[below_xmin_mask, (feature_idx * n_splines):(
                            feature_idx * n_splines + degree)] = f_min[:degree]
                    above_xmax_mask = X[:, feature_idx] > xmax
                    if np.any(above_xmax_mask):
                        XBS[above_xmax_mask, ((feature_idx + 1) * n_splines - degree):(
                            (feature_idx + 1) * n_splines)] = f_max[-degree:]
                else:
                    fp_min, fp_max = self.fp_min[feature_idx], self.fp_max[feature_idx]
                    for j in range(int(self.n_linear[feature_idx])):
                        below_xmin_mask = X[:, feature_idx] < xmin
                        if np.any(below_xmin_mask):
                            linear_extr = (f_min[j]
                                           + (X[below_xmin_mask, feature_idx] - xmin) * fp_min[j])
                            XBS[below_xmin_mask, feature_idx * n_splines + j] = linear_extr
                        above_xmax_mask = X[:, feature_idx] > xmax
                        if np.any(above_xmax_mask):
                            k = n_splines - 1 - j
                            linear_extr = (f_max[k]
                                           + (X[above_xmax_mask, feature_idx] - xmax) * fp_max[k])
                            XBS[above_xmax_mask, feature_idx * n_splines + k] = linear_extr
        if self.include_bias:
            return [XBS]
        return [XBS[:, self.kept_columns()]]

    _ARRAYS = ("knots", "coef", "xmin", "xmax", "f_min", "f_max", "fp_min", "fp_max", "n_linear")

    def to_saved(self):
        meta = {"n_features": self.n_features, "degree": self.degree,
                "extrapolation": self.extrapolation, "include_bias": self.include_bias,
                "handle_missing": self.handle_missing, "extrapolate": self.extrapolate}
        return meta, {name: np.asarray(getattr(self, name)) for name in self._ARRAYS}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(n_features=int(meta["n_features"]), degree=int(meta["degree"]),
                   extrapolation=str(meta["extrapolation"]),
                   include_bias=bool(meta["include_bias"]),
                   handle_missing=str(meta["handle_missing"]),
                   extrapolate=bool(meta["extrapolate"]),
                   **{name: np.asarray(arrays[name]) for name in cls._ARRAYS})
