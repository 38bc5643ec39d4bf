"""scikit-learn scalers and SimpleImputer -> ColumnOps IR, and Pipelines of them before
any final estimator.

Their ``transform`` works in place on a copy of the input in its float dtype; the
operations below are the ones scikit-learn's dense code path performs, in order, with
the same operands (``ColumnOps`` explains the rounding). The scalers' public fitted
attributes are read (``mean_``, ``scale_``, ``min_``, ``center_``); SimpleImputer's
``statistics_``, rounded as its transform rounds them to the dtype it was fitted on
(``_fill_dtype``, private: the one private read here).
"""

import numpy as np

from ..exceptions import MissingConverter, unsupported_message
from ..ir import ColumnOps, ModelIR
from ._sklearn import check_fitted, sklearn_head
from .registry import find_frontend, register_frontend

__all__ = ["SCALERS", "COLUMN_WISE", "column_wise_ops"]

SCALERS = ("StandardScaler", "MinMaxScaler", "MaxAbsScaler", "RobustScaler")
COLUMN_WISE = SCALERS + ("SimpleImputer",)  # the transformers a pipeline may hold


def _vector(model, values, n_features):
    array = np.asarray(values)
    if array.dtype not in (np.float32, np.float64):
        array = array.astype(np.float64)
    return np.broadcast_to(array, (n_features,)).copy()


def column_wise_ops(model) -> ColumnOps:
    """The ColumnOps of one fitted scaler."""
    name = type(model).__name__
    check_fitted(model, "n_features_in_")
    n = int(model.n_features_in_)
    ops = []  # (op, operand, cast to the working dtype first)
    if name == "StandardScaler":
        if model.with_mean:
            ops.append(("sub", model.mean_, True))
        if model.with_std and model.scale_ is not None:
            ops.append(("div", model.scale_, True))
    elif name == "MinMaxScaler":
        ops += [("mul", model.scale_, False), ("add", model.min_, False)]
        if model.clip:
            low, high = model.feature_range
            ops += [("maximum", np.full(n, float(low)), True),
                    ("minimum", np.full(n, float(high)), True)]
    elif name == "MaxAbsScaler":
        ops.append(("div", model.scale_, False))
    elif name == "RobustScaler":
        if model.with_centering:
            ops.append(("sub", model.center_, False))
        if model.with_scaling:
            ops.append(("div", model.scale_, False))
    elif name == "SimpleImputer":
        ops.append(("fill_nan", _imputer_statistics(model), True))
    else:
        raise MissingConverter(unsupported_message(name, "this transformer", name, COLUMN_WISE))
    return ColumnOps(name=name, n_features=n, ops=tuple(op for op, _, _ in ops),
                     operands=tuple(_vector(model, v, n) for _, v, _ in ops),
                     cast_operand=tuple(c for _, _, c in ops)).validate()


def _imputer_statistics(model):
    """The values SimpleImputer writes over NaN: ``statistics_`` in its fit dtype."""
    def refuse(what, value, supported):
        raise MissingConverter(unsupported_message("SimpleImputer", what, value, supported))

    missing = model.missing_values
    if not (isinstance(missing, float) and np.isnan(missing)):
        refuse("missing_values", missing, "np.nan")
    if model.add_indicator:
        refuse("add_indicator", True, "False")
    statistics = np.asarray(model.statistics_)
    try:  # most_frequent keeps its statistics in an object array, of numbers here
        statistics = statistics.astype(np.float64)
    except (TypeError, ValueError):
        refuse("non-numeric statistics", statistics.tolist()[:5], "numeric features")
    if np.isnan(statistics).any() and not model.keep_empty_features:
        refuse("a feature without any observed value (scikit-learn drops it)",
               [int(i) for i in np.flatnonzero(np.isnan(statistics))],
               "keep_empty_features=True, or features with observed values")
    fill_dtype = np.dtype(getattr(model, "_fill_dtype", np.float64))
    if fill_dtype.kind == "f" and fill_dtype.itemsize == 4:
        statistics = statistics.astype(np.float32)
    return statistics


@register_frontend("sklearn", *COLUMN_WISE)
def _column_wise(model, options):
    step = column_wise_ops(model)
    # The scalers take NaN (they ignore it when fitting), SimpleImputer replaces it;
    # none takes infinity.
    head = sklearn_head(model, "transform", ("transform",), allows_inf=False)
    return ModelIR(head, steps=(step,)).validate()


@register_frontend("sklearn", "Pipeline")
def _pipeline(model, options):
    estimators = [e for _, e in model.steps if e is not None and not (isinstance(e, str)
                                                                    and e == "passthrough")]
    if not estimators:
        raise MissingConverter(unsupported_message(
            "Pipeline", "a pipeline of only 'passthrough' steps", [n for n, _ in model.steps],
            "pipelines that end in a supported estimator or scaler"))
    *transformers, final = estimators
    steps = []
    for transformer in transformers:
        if type(transformer).__name__ not in COLUMN_WISE:
            raise MissingConverter(unsupported_message(
                "Pipeline", "this step before the final estimator", type(transformer).__name__,
                ", ".join(COLUMN_WISE)))
        steps.append(column_wise_ops(transformer))
    # NaN passes through the scalers; an imputer among the steps replaces it, so the
    # final estimator never sees one.
    imputes = any("fill_nan" in step.ops for step in steps)
    final_ir = find_frontend(final)(final, options)
    steps += final_ir.steps
    first = estimators[0]
    names = [type(e).__name__ for e in estimators]
    head = final_ir.head.replace(
        estimator=f"Pipeline({', '.join(names)})",
        n_features=int(first.n_features_in_),
        feature_names=(tuple(first.feature_names_in_) if hasattr(first, "feature_names_in_")
                       else None),
        # A row is refused where any step refuses it; scalers refuse infinity.
        allows_inf=final_ir.head.allows_inf and not transformers,
        allows_nan=final_ir.head.allows_nan or imputes,
    )
    return ModelIR(head, ensemble=final_ir.ensemble, linear=final_ir.linear,
                   steps=tuple(steps)).validate()
