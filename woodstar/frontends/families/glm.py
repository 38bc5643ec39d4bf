"""scikit-learn generalised linear models (PoissonRegressor, GammaRegressor,
TweedieRegressor) -> ``linear`` and ``glm_inverse_link``.

``predict`` is ``_base_loss.link.inverse(X @ coef_ + intercept_)``: the log link's
inverse is ``np.exp``; the identity link (TweedieRegressor with ``power <= 0`` and
``link="auto"``, or ``link="identity"``) returns the linear predictor itself.
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, GraphBuilder, LinearModel, ModelIR, ValueType
from ...ir.families.glm import GLMInverseLink
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend
from ..sklearn_linear import _coef_arrays

__all__ = ["GLMS"]

GLMS = ("PoissonRegressor", "GammaRegressor", "TweedieRegressor")
_LINK_CLASSES = {"IdentityLink": "identity", "LogLink": "log"}


def _link(model):
    """The link ``predict`` inverts: the fitted loss's own, else the parameters'."""
    name = type(model).__name__
    loss = getattr(model, "_base_loss", None)
    if loss is not None:
        link = type(loss.link).__name__
        if link not in _LINK_CLASSES:
            raise MissingConverter(unsupported_message(name, "link", link, ", ".join(_LINK_CLASSES)))
        return _LINK_CLASSES[link]
    if name != "TweedieRegressor":
        return "log"
    if model.link == "auto":
        return "identity" if model.power <= 0 else "log"
    return model.link


@register_frontend("sklearn", *GLMS)
def _glm(model, options):
    check_fitted(model, "coef_")
    coef, intercept = _coef_arrays(model)
    if coef.ndim != 1:
        raise MissingConverter(unsupported_message(type(model).__name__, "coef_ shape",
                                                   coef.shape, "(n_features,)"))
    builder = GraphBuilder(ValueType.floats(int(model.n_features_in_)))
    raw, predicted = builder.add(LinearModel(coef=coef, intercept=intercept, vector_coef=True),
                                 [INPUT], "linear")
    if _link(model) == "log":
        (predicted,) = builder.add(GLMInverseLink("log"), [raw], "inverse_link")
    head = sklearn_head(model, "regression", ("predict",), allows_inf=False)
    return ModelIR(head=head, graph=builder.build(raw, predicted)).validate()
