"""scikit-learn's feature selectors as column selections (``select``, from
``get_support()``), alone and as pipeline steps; RFE and RFECV also predict through
their ``estimator_`` on the selected columns (its own frontend's graph, spliced after
the selection).

A selector's ``transform`` accepts NaN and infinity exactly when its tags allow NaN
(``ensure_all_finite=not allow_nan``)."""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import Concat, GraphBuilder, ModelIR, Select, ValueType
from .._sklearn import check_fitted
from ..registry import find_frontend, register_frontend
from .preprocessing import family_transformer

__all__ = ["SELECTORS"]

SELECTORS = ("VarianceThreshold", "SelectKBest", "SelectPercentile", "SelectFpr", "SelectFdr",
             "SelectFwe", "GenericUnivariateSelect", "SelectFromModel", "RFE", "RFECV",
             "SequentialFeatureSelector")


def _accepts(model):
    allow_nan = bool(model.__sklearn_tags__().input_tags.allow_nan)
    return allow_nan, allow_nan


def _support(model):
    name = type(model).__name__
    check_fitted(model, "n_features_in_")
    support = np.flatnonzero(np.asarray(model.get_support()))
    if not len(support):
        raise MissingConverter(unsupported_message(
            name, "a selection of no features", "get_support() all False",
            "selectors that keep at least one feature"))
    return support


def _selector(model, composer, value):
    # a node even when every column is kept: NumPy's X[:, mask] is then a copy in
    # another memory order, and the matrix product after it rounds by that order
    support = _support(model)
    origins = [composer.origins[value][i] for i in support]
    (out,) = composer.add(Select(composer.width(value), tuple(int(i) for i in support)), [value],
                          type(model).__name__, origins)
    return out


family_transformer(*SELECTORS[:-3], SELECTORS[-1], accepts=_accepts)(_selector)
family_transformer("RFE", "RFECV", accepts=_accepts, bare=False)(_selector)


_DEFAULT_ROLE = {"classification": "proba", "regression": "value", "anomaly": "score_samples"}


@register_frontend("sklearn", "RFE", "RFECV")
def _recursive_elimination(model, options):
    """The selection, then ``estimator_``'s graph on it. ``transform`` reads the
    selected columns from a block beside the estimator's outputs."""
    name = type(model).__name__
    check_fitted(model, "estimator_")
    support = _support(model)
    inner = find_frontend(model.estimator_)(model.estimator_, options)
    if inner.schema.string_columns or inner.head.task not in _DEFAULT_ROLE:
        raise MissingConverter(unsupported_message(
            name, "this inner estimator", type(model.estimator_).__name__,
            "classifiers, regressors and anomaly detectors on numeric features"))
    n = int(model.n_features_in_)
    builder = GraphBuilder(ValueType.floats(n))
    (selected,) = builder.add(Select(n, tuple(support)), ["input"], "support")
    raw, transformed = builder.splice(inner.graph, selected, prefix=f"{name}:")
    head = inner.head
    width = builder.type_of(transformed).width
    blocks = head.blocks or ((_DEFAULT_ROLE[head.task], 0, width),)
    (both,) = builder.add(Concat((width, len(support))), [transformed, selected], "with_selected")
    allow_nan, allow_inf = _accepts(model)
    inf_rejected = tuple(int(support[i]) for i in head.inf_rejected_features)
    head = head.replace(
        estimator=name, n_features=n,
        feature_names=(tuple(model.feature_names_in_) if hasattr(model, "feature_names_in_")
                       else None),
        methods=tuple(head.methods) + ("transform",),
        blocks=tuple(blocks) + (("transform", width, width + len(support)),),
        # RFE's transform refuses NaN and infinity in every column unless its estimator
        # takes NaN; the estimator then checks the selected columns itself.
        allows_nan=allow_nan and head.allows_nan,
        allows_inf=allow_inf and head.allows_inf,
        inf_rejected_features=inf_rejected)
    return ModelIR(head=head, graph=builder.build(raw, both)).validate()
