"""scikit-learn's ``SplineTransformer``, alone (``transform``) and as a pipeline step.

The fitted ``bsplines_`` give the knots and coefficients; the boundary values and
slopes that ``constant`` and ``linear`` extrapolation use are read off them here, as
``transform`` computes them. Refused: ``extrapolation="error"`` (scikit-learn raises
on values beyond the knots, a check on the data that the input edge cannot repeat) and
``sparse_output=True`` (the model that follows would read a sparse matrix).
"""

import numpy as np

from ...exceptions import InvalidModelError, MissingConverter, unsupported_message
from ...ir.families.spline import EXTRAPOLATIONS, SplineBasis
from .._sklearn import check_fitted
from .preprocessing import family_transformer

__all__ = ["spline_op"]

OWNER = "SplineTransformer"


def _accepts(model):
    """``transform`` takes NaN and infinity only with ``handle_missing="zeros"``."""
    zeros = getattr(model, "handle_missing", "error") == "zeros"
    return zeros, zeros


def spline_op(model, n_features):
    check_fitted(model, "bsplines_")
    if model.extrapolation not in EXTRAPOLATIONS:
        raise MissingConverter(unsupported_message(
            OWNER, "extrapolation", model.extrapolation,
            "'continue', 'periodic', 'constant', 'linear' (with 'error', scikit-learn "
            "raises on values beyond the knots, a check woodstar's input edge cannot "
            "repeat)"))
    if getattr(model, "sparse_output", False):
        raise MissingConverter(unsupported_message(OWNER, "sparse_output", True, "False"))
    if model.extrapolation == "constant" and int(model.degree) == 0:
        raise MissingConverter(unsupported_message(
            OWNER, "degree 0 with constant extrapolation", 0,
            "degree >= 1 (scikit-learn's transform fails on values above the knots)"))
    handle_missing = getattr(model, "handle_missing", "error")
    if handle_missing not in ("error", "zeros"):
        raise MissingConverter(unsupported_message(OWNER, "handle_missing", handle_missing,
                                                   "'error', 'zeros'"))
    splines = list(model.bsplines_)
    if len(splines) != n_features:
        raise InvalidModelError(f"{OWNER}: {len(splines)} bsplines_ for {n_features} columns")
    degree = int(model.degree)
    extrapolate = model.extrapolation in ("continue", "periodic")
    n_splines = splines[0].c.shape[1]
    for i, spl in enumerate(splines):
        if (int(spl.k) != degree or bool(spl.extrapolate) is not extrapolate
                or spl.c.ndim != 2 or spl.c.shape[1] != n_splines
                or spl.t.shape != splines[0].t.shape):
            raise InvalidModelError(f"{OWNER}: bsplines_[{i}] is not as fit builds it "
                                    f"(k, extrapolate, c or t shape)")
    F = n_features
    xmin, xmax = np.zeros(F), np.zeros(F)
    values = {name: np.zeros((F, n_splines)) for name in ("f_min", "f_max", "fp_min", "fp_max")}
    n_linear = np.zeros(F, dtype=np.int64)
    if model.extrapolation in ("constant", "linear"):
        current = degree  # transform's ``degree``: linear raises it once at degree <= 1
        for i, spl in enumerate(splines):
            xmin[i], xmax[i] = spl.t[current], spl.t[-current - 1]
            values["f_min"][i], values["f_max"][i] = spl(xmin[i]), spl(xmax[i])
            if model.extrapolation == "linear":
                values["fp_min"][i], values["fp_max"][i] = spl(xmin[i], nu=1), spl(xmax[i], nu=1)
                if current <= 1:
                    current += 1
                if current > n_splines:
                    raise MissingConverter(unsupported_message(
                        OWNER, "linear extrapolation of more basis functions than a column "
                        "has", current, f"at most n_splines ({n_splines})"))
                n_linear[i] = current
    return SplineBasis(
        n_features=F, degree=degree, extrapolation=str(model.extrapolation),
        include_bias=bool(model.include_bias), handle_missing=str(handle_missing),
        extrapolate=extrapolate,
        knots=np.stack([np.asarray(s.t, dtype=np.float64) for s in splines]),
        coef=np.stack([np.asarray(s.c, dtype=np.float64) for s in splines]),
        xmin=xmin, xmax=xmax, n_linear=n_linear, **values).validate()


@family_transformer(OWNER, accepts=_accepts)
def _spline(model, composer, value):
    op = spline_op(model, composer.width(value))
    (out,) = composer.add(op, [value], OWNER)
    return out
