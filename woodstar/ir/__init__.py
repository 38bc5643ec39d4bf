"""Woodstar's intermediate representations: plain data, no torch."""

from dataclasses import dataclass
from typing import Optional, Tuple

from .column_ops import ColumnOps
from .head import Head
from .linear import LinearModel
from .tree_ensemble import LE, LT, TreeEnsemble

__all__ = ["Head", "TreeEnsemble", "LinearModel", "ColumnOps", "ModelIR", "LE", "LT"]


@dataclass(frozen=True, eq=False)
class ModelIR:
    """What a frontend returns: the estimator API (``head``) around a chain of
    column-wise ``steps`` (a pipeline's scalers, possibly none) feeding one final
    function, the ``ensemble`` or the ``linear`` model. A bare transformer has steps
    and no final function."""

    head: Head
    ensemble: Optional[TreeEnsemble] = None
    linear: Optional[LinearModel] = None
    steps: Tuple[ColumnOps, ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "steps", tuple(self.steps))

    @property
    def final(self):
        """The final function: a TreeEnsemble, a LinearModel, or None (a transformer)."""
        return self.ensemble if self.ensemble is not None else self.linear

    @property
    def follows_input_dtype(self) -> bool:
        """Whether the source computes in the input's float dtype (scalers keep float32
        as float32; linear models multiply in the input's dtype), rather than rounding
        every input to one precision as the tree libraries do."""
        return bool(self.steps) or self.linear is not None

    @property
    def input_precision(self) -> str:
        """The precision the source reads its input in, first thing: the trees' own
        when they come first, else float64 (scalers and linear models keep float64 as
        is; float32 input is float32 to every route)."""
        if self.ensemble is not None and not self.steps:
            return self.ensemble.input_precision
        return "float64"

    def validate(self) -> "ModelIR":
        from ..exceptions import InvalidModelError

        def fail(message):
            raise InvalidModelError(f"{self.head.estimator}: {message}")

        self.head.validate()
        if self.ensemble is not None and self.linear is not None:
            fail("a model has one final function, not both trees and a linear model")
        if self.final is None and (not self.steps or self.head.task != "transform"):
            fail("a model without a final function must be a transformer with steps")
        for step in self.steps:
            step.validate()
            if step.n_features != self.head.n_features:
                fail(f"step {step.name} reads {step.n_features} features but the estimator "
                     f"takes {self.head.n_features}")
        if self.final is not None:
            self.final.validate()
            if self.final.n_features != self.head.n_features:
                what = "the trees read" if self.ensemble is not None else "the linear model reads"
                fail(f"{what} {self.final.n_features} features "
                     f"but the estimator takes {self.head.n_features}")
        return self
