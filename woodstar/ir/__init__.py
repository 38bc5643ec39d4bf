"""Woodstar's intermediate representations: plain data, no torch."""

from dataclasses import dataclass

from .head import Head
from .tree_ensemble import LE, LT, TreeEnsemble

__all__ = ["Head", "TreeEnsemble", "ModelIR", "LE", "LT"]


@dataclass(frozen=True, eq=False)
class ModelIR:
    """What a frontend returns: the function (``ensemble``) and the estimator API
    around it (``head``)."""

    head: Head
    ensemble: TreeEnsemble

    def validate(self) -> "ModelIR":
        self.head.validate()
        self.ensemble.validate()
        if self.ensemble.n_features != self.head.n_features:
            from ..exceptions import InvalidModelError
            raise InvalidModelError(
                f"{self.head.estimator}: the trees read {self.ensemble.n_features} features "
                f"but the estimator takes {self.head.n_features}")
        return self
