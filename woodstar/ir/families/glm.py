"""Generalised linear models: ``glm_inverse_link``, the inverse link after the linear
predictor (``X @ coef_ + intercept_``, a ``linear`` op).

scikit-learn's PoissonRegressor, GammaRegressor and TweedieRegressor predict
``_base_loss.link.inverse(raw_prediction)``: ``np.exp`` for the log link; the
identity link returns the linear predictor itself (no op needed).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..graph import Op, ValueType, register_op

__all__ = ["GLMInverseLink", "GLM_LINKS"]

GLM_LINKS = ("log",)


@register_op
@dataclass(frozen=True, eq=False)
class GLMInverseLink(Op):
    kind = "glm_inverse_link"
    link: str
    n_features: int = 1

    def validate(self):
        self.expect(self.link in GLM_LINKS, f"link {self.link!r} not in {GLM_LINKS}")
        return self

    def output_types(self, input_types):
        self.numeric_input(input_types, self.n_features)
        return [ValueType.floats(self.n_features)]

    def reference(self, inputs):
        return [np.exp(inputs[0])]  # LogLink.inverse

    def to_saved(self):
        return {"link": self.link, "n_features": self.n_features}, {}

    @classmethod
    def from_saved(cls, meta, arrays):
        return cls(link=str(meta["link"]), n_features=int(meta["n_features"]))
