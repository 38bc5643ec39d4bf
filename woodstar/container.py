"""The container: what the user holds after ``convert``.

It exposes the source estimator's own methods and nothing else, checks the input
once at the edge, splits large inputs into batches that fit the memory budget, picks
the float32 or float64 program, and turns raw scores into labels in NumPy.
"""

import numpy as np
import torch

from ._input import to_feature_matrix
from ._options import Options
from .ir import ModelIR
from .lowering import choose_strategy, lower_tree_ensemble
from .lowering.routing import batch_routes

__all__ = ["ConvertedModel", "make_container"]


class ConvertedModel:
    """Base of every container; subclasses add the estimator's methods."""

    def __init__(self, model_ir: ModelIR, backend_cls, options: Options, device="cpu"):
        self.ir = model_ir
        self.backend = backend_cls.name
        self._backend_cls = backend_cls
        self.options = options
        self.device = torch.device(device)
        self._programs = {}
        self._routes = {}      # precision -> [(most rows, strategy class)]
        self._batch_rows = {}  # (precision, strategy name) -> rows per batch
        head = model_ir.head
        self.n_features_in_ = head.n_features
        if head.feature_names is not None:
            self.feature_names_in_ = np.asarray(head.feature_names, dtype=object)
        if head.classes is not None:
            self.classes_ = head.classes[0] if len(head.classes) == 1 else list(head.classes)
        for _, strategy in self._routes_for(self._default_precision()):
            self._program(self._default_precision(), strategy)  # fail at convert, not first call

    # ---------------------------------------------------------------- programs
    def _default_precision(self):
        return self.options.precision or "float32"

    def _precision_for(self, X) -> str:
        """float64 when asked, or when float64 input meets a model that compares in
        float64 (HistGradientBoosting, LightGBM): rounding that input to float32 could
        change a branch."""
        if self.options.precision is not None:
            return self.options.precision
        if getattr(X, "dtype", None) == np.float64 and self.ir.ensemble.input_precision == "float64":
            return "float64"
        return "float32"

    def _routes_for(self, precision):
        """[(most rows, strategy class)]: the user's strategy alone, or the routing
        table's choice per batch size for this model (lowering/routing.py)."""
        routes = self._routes.get(precision)
        if routes is None:
            ens, owner = self.ir.ensemble, self.ir.head.estimator
            budget = self.options.memory_budget_bytes
            if self.options.tree_implementation is not None:
                routes = [(None, choose_strategy(ens, self.options.tree_implementation,
                                                 precision, budget, owner))]
            else:
                threads = self.options.n_threads or torch.get_num_threads()
                routes = batch_routes(ens, precision, budget, owner, threads,
                                      self.device.type, self.backend)
            self._routes[precision] = routes
        return routes

    def _strategy_for(self, precision, n_rows=None):
        routes = self._routes_for(precision)
        if n_rows is not None:
            for most, strategy in routes:
                if most is None or n_rows <= most:
                    return strategy
        return routes[-1][1]

    def _program(self, precision, strategy=None):
        strategy = strategy or self._strategy_for(precision)
        program = self._programs.get((precision, strategy.name))
        if program is None:
            ens = self.ir.ensemble
            module = lower_tree_ensemble(ens, strategy, precision)
            example = torch.zeros((1, ens.n_features), dtype=module.trees.compute_dtype)
            program = self._backend_cls.compile(module, example, self.options, self.device)
            self._programs[(precision, strategy.name)] = program
        return program

    @property
    def strategy(self) -> str:
        """The tree strategy of the default program (the one for large batches)."""
        return self._program(self._default_precision()).module.strategy

    @property
    def strategies_(self):
        """[(most rows, strategy name)]: which strategy runs a call of how many rows."""
        return [(most, s.name) for most, s in self._routes_for(self._default_precision())]

    @property
    def model(self):
        """The backend's own model object (e.g. the torch.nn.Module) for large batches."""
        return self._program(self._default_precision()).model

    def to(self, device):
        device = _checked_device(device)
        self._programs = {key: program.to(device) for key, program in self._programs.items()}
        self.device = device
        self._routes = {}  # the table is per device
        return self

    def __repr__(self):
        return (f"{type(self).__name__}({self.ir.head.estimator}, backend={self.backend!r}, "
                f"strategy={self.strategy!r}, device={str(self.device)!r})")

    # ---------------------------------------------------------------- running
    def _rows_per_batch(self, precision, strategy):
        if self.options.batch_size is not None:
            return self.options.batch_size
        key = (precision, strategy.name)
        rows = self._batch_rows.get(key)  # cached: some estimates walk every tree in Python
        if rows is None:
            per_row = max(1, strategy.estimate_bytes(self.ir.ensemble, 1, precision))
            rows = self._batch_rows[key] = max(1, self.options.memory_budget_bytes // per_row)
        return rows

    def _run(self, X):
        """(raw scores, transformed scores) as NumPy arrays of the route's dtype."""
        precision = self._precision_for(X)
        X = to_feature_matrix(X, self.ir.head, precision, self.ir.ensemble.input_precision)
        n = X.shape[0]
        strategy = self._strategy_for(precision, n)
        step = self._rows_per_batch(precision, strategy)
        if n > step:  # batches of `step` rows: the route for that size runs them
            strategy = self._strategy_for(precision, step)
            step = min(step, self._rows_per_batch(precision, strategy))
        program = self._program(precision, strategy)
        if n <= step:
            raw, transformed = program(torch.from_numpy(X))
            return raw.cpu().numpy(), transformed.cpu().numpy()
        raw_parts, transformed_parts = [], []
        for start in range(0, n, step):
            raw, transformed = program(torch.from_numpy(X[start:start + step]))
            raw_parts.append(raw.cpu().numpy())
            transformed_parts.append(transformed.cpu().numpy())
        return np.concatenate(raw_parts), np.concatenate(transformed_parts)

    def _labels(self, raw, proba):
        head = self.ir.head
        if head.is_multi_output_classifier:
            columns, start = [], 0
            for classes in head.classes:
                block = proba[:, start:start + len(classes)]
                columns.append(classes.take(np.argmax(block, axis=1)))
                start += len(classes)
            return np.stack(columns, axis=1)
        classes = head.classes[0]
        if head.decision_rule == "raw_ge_zero":
            return classes.take((raw[:, 0] >= 0).astype(np.int64))
        if head.decision_rule == "raw_gt_zero":
            return classes.take((raw[:, 0] > 0).astype(np.int64))
        return classes.take(np.argmax(proba, axis=1))


def _checked_device(device):
    device = torch.device(device)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} was asked for, but CUDA is not available here.")
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device {str(device)!r} is not supported; use 'cpu' or 'cuda[:N]'.")
    return device


class _Regressor:
    def predict(self, X):
        _, values = self._run(X)
        if self.ir.head.squeeze_output and values.shape[1] == 1:
            return values[:, 0]
        return values


class _Classifier:
    def predict(self, X):
        raw, proba = self._run(X)
        return self._labels(raw, proba)

    def predict_proba(self, X):
        _, proba = self._run(X)
        head = self.ir.head
        if head.is_multi_output_classifier:
            bounds = np.cumsum([0, *head.class_groups])
            return [proba[:, a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        return proba


class _DecisionFunction:
    def decision_function(self, X):
        raw, _ = self._run(X)
        return raw[:, 0] if raw.shape[1] == 1 else raw


class _Anomaly:
    def score_samples(self, X):
        _, scores = self._run(X)
        return scores[:, 0]

    def decision_function(self, X):
        return self.score_samples(X) - self.ir.head.anomaly_offset

    def predict(self, X):
        return np.where(self.decision_function(X) < 0, -1, 1)


_CONTAINER_CLASSES = {}


def _container_class(head):
    if head.task == "anomaly":
        mixins = (_Anomaly,)
    elif head.task == "classification":
        mixins = (_Classifier,) + ((_DecisionFunction,) if "decision_function" in head.methods else ())
    else:
        mixins = (_Regressor,)
    key = tuple(m.__name__ for m in mixins)
    if key not in _CONTAINER_CLASSES:
        name = "Converted" + "".join(m.__name__.lstrip("_") for m in mixins)
        _CONTAINER_CLASSES[key] = type(name, (*mixins, ConvertedModel), {})
    return _CONTAINER_CLASSES[key]


def make_container(model_ir: ModelIR, backend_cls, options: Options, device) -> ConvertedModel:
    return _container_class(model_ir.head)(model_ir, backend_cls, options, _checked_device(device))
