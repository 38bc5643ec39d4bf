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
from .lowering import choose_strategy, lower_model
from .lowering import c_walk, onnx_ml
from .lowering.numpy_linear import NumpyLinear, NumpySteps, NumpyTransformer, with_steps
from .lowering.numpy_walk import NumpyTreeWalk
from .lowering.routing import small_batch_rows

__all__ = ["ConvertedModel", "make_container"]

# Models without trees run their NumPy route at every size on the torch backend's CPU:
# the source's own expressions, exact to the bit (docs/benchmarks.md, "Linear models").
LINEAR_CPU_ROUTE_ROWS = 2**62


class ConvertedModel:
    """Base of every container; subclasses add the estimator's methods."""

    def __init__(self, model_ir: ModelIR, backend_cls, options: Options, device="cpu"):
        self._init(model_ir, backend_cls, options, device, {})
        self._program(self._default_precision())  # fail at convert time, not first call

    def _init(self, model_ir, backend_cls, options, device, programs):
        self.ir = model_ir
        self.backend = backend_cls.name
        self._backend_cls = backend_cls
        self.options = options
        self.device = torch.device(device)
        self._on_cpu = self.device.type == "cpu"  # read on every call (the CPU routes)
        self._programs = programs
        self._batch_rows = {}  # precision -> rows per batch (some estimates walk every tree)
        self._cpu_programs = {}  # (route, precision) -> a CPU-route program (_cpu_route_limit)
        self._cpu_route = self._choose_cpu_route()
        self._single_row_route = self._choose_single_row_route()
        self._cpu_route_rows = self._cpu_route_limit() if self._cpu_route else 0
        self._scaled_rows_must_be_finite = bool(
            model_ir.steps and model_ir.linear is not None and not model_ir.head.allows_inf)
        head = model_ir.head
        self.n_features_in_ = head.n_features
        if head.feature_names is not None:
            self.feature_names_in_ = np.asarray(head.feature_names, dtype=object)
        if head.classes is not None:
            self.classes_ = head.classes[0] if len(head.classes) == 1 else list(head.classes)

    # ---------------------------------------------------------------- programs
    def _default_precision(self):
        return self.options.precision or "float32"

    def _precision_for(self, X) -> str:
        """float64 when asked, or when the input holds values float32 cannot represent
        (float64, int32/64, lists) and the model compares in float64 (HistGradientBoosting,
        LightGBM): rounding that input to float32 could change a branch."""
        if self.ir.follows_input_dtype:  # the source's own rule; tree_op_precision_dtype
            return _source_float_dtype(X, self.ir.head)  # concerns tree models alone
        if self.options.precision is not None:
            return self.options.precision
        if self.ir.ensemble.input_precision != "float64":
            return "float32"
        if hasattr(X, "dtypes") and not hasattr(X, "dtype"):  # a DataFrame
            exact = all(_exact_in_float32(d) for d in X.dtypes)
        else:
            dtype = getattr(X, "dtype", None)
            exact = dtype is not None and _exact_in_float32(dtype)
        return "float32" if exact else "float64"

    def _lower(self, precision):
        """The routing table's strategy for this model, device, backend and threads
        (lowering/routing.py), unless the user named one."""
        ens = self.ir.ensemble
        strategy = None if ens is None else choose_strategy(
            ens, self.options.tree_implementation, precision, self.options.memory_budget_bytes,
            self.ir.head.estimator, n_threads=self.options.n_threads or torch.get_num_threads(),
            device=self.device.type, backend=self.backend)
        return lower_model(self.ir, strategy, precision)

    def _program(self, precision):
        program = self._programs.get(precision)
        if program is None:
            module = self._lower(precision)
            example = torch.zeros((2, module.n_features), dtype=module.input_dtype)
            program = self._backend_cls.compile(module, example, self.options, self.device)
            self._programs[precision] = program
        return program

    def _choose_cpu_route(self):
        """The CPU route that replaces the Torch program on the torch backend, where the
        benchmark found one faster (docs/benchmarks.md, "CPU routes"), first that takes
        the model: the compiled walk where a C compiler is there; ONNX Runtime's tree
        kernel where onnxruntime is installed and it walks each tree once (one value per
        leaf, or vector leaves in one block); the NumPy walk; else none. A model without
        trees (linear, a bare transformer) runs the source's own NumPy expressions."""
        ens = self.ir.ensemble
        if self.backend != "torch":
            return None  # the other backends were chosen for their own runtime
        if ens is None:
            return "numpy"
        if c_walk.CTreeWalk.supports(ens) and c_walk.available():
            return "c-walk"
        if (onnx_ml.available() and onnx_ml.OnnxMlTrees.supports(ens)
                and onnx_ml.walks_each_tree_once(ens)):
            return "onnx-ml"
        return "numpy" if NumpyTreeWalk.supports(ens) else None

    def _choose_single_row_route(self):
        """The route for one-row calls: the NumPy walk for forest classifiers, whose
        ONNX-ML route hands leaf indices back to NumPy; a single row does not amortise
        that second step (the walk was 8-18% faster at 1 row in all six RF cells and
        slower from 2 rows: docs/benchmarks.md, "CPU routes")."""
        if self._cpu_route == "onnx-ml" and self.ir.ensemble is not None \
                and self.ir.ensemble.leaf_width > 1 \
                and NumpyTreeWalk.supports(self.ir.ensemble):
            return "numpy"
        return self._cpu_route

    def _cpu_route_limit(self) -> int:
        """Rows up to which a call runs the CPU route instead of the Torch program: not
        when the user named a tree strategy (unless they also set ``small_batch_rows``),
        and not with padded batches."""
        options = self.options
        if options.tvm_pad_input and options.batch_size is not None:
            return 0  # every call at one shape was asked for: the program's
        if options.small_batch_rows is not None:
            return options.small_batch_rows
        if self.ir.ensemble is None:
            return LINEAR_CPU_ROUTE_ROWS
        if options.tree_implementation is not None:
            return 0
        return small_batch_rows(self.ir.ensemble, self._cpu_route)

    def _cpu_program(self, precision, route=None):
        route = route or self._cpu_route
        program = self._cpu_programs.get((route, precision))
        if program is None:
            threads = self.options.n_threads or torch.get_num_threads()
            if self.ir.linear is not None:
                program = NumpyLinear(self.ir, precision)
            elif self.ir.ensemble is None:
                program = NumpyTransformer(self.ir, precision)
            elif route == "c-walk":
                program = c_walk.CTreeWalk(self.ir.ensemble, precision, n_threads=threads)
            elif route == "onnx-ml":
                program = onnx_ml.OnnxMlTrees(self.ir.ensemble, precision, n_threads=threads)
            else:
                program = NumpyTreeWalk(self.ir.ensemble, precision)
            if self.ir.ensemble is not None:
                program = with_steps(NumpySteps(self.ir.steps, precision), program)
            self._cpu_programs[(route, precision)] = program
        return program

    @property
    def strategy(self) -> str:
        """The tree strategy of the default program."""
        return self._programs[self._default_precision()].module.strategy

    @property
    def model(self):
        """The backend's own model object (e.g. the torch.nn.Module)."""
        return self._programs[self._default_precision()].model

    def to(self, device):
        """Move every program to ``device`` ("cpu", "cuda", "cuda:N"); returns self."""
        device = _checked_device(device, self._backend_cls)
        self._programs = {p: program.to(device) for p, program in self._programs.items()}
        self.device = device
        self._on_cpu = device.type == "cpu"
        return self

    def save(self, path):
        """Write a zip: JSON manifest, IR arrays (.npy, no pickle), backend artifacts.
        ``woodstar.load(path)`` reads it back; see docs/backends.md for the format."""
        from ._saving import save

        save(self, path)
        return path

    def __reduce__(self):
        # pickle, cloudpickle, joblib: through the saved format (woodstar/_pickling.py)
        from ._pickling import from_saved_bytes, saved_bytes

        return from_saved_bytes, (saved_bytes(self),)

    def __repr__(self):
        route = f", cpu_route={self._cpu_route!r}" if self._cpu_route_rows else ""
        return (f"{type(self).__name__}({self.ir.head.estimator}, backend={self.backend!r}, "
                f"strategy={self.strategy!r}, device={str(self.device)!r}{route})")

    # ---------------------------------------------------------------- running
    def _rows_per_batch(self, precision, n_rows):
        if self.options.batch_size is not None:
            return self.options.batch_size
        rows = self._batch_rows.get(precision)
        if rows is None:
            module = self._program(precision).module
            per_row = max(1, module.core.estimate_bytes(self.ir.final, 1, precision))
            rows = self._batch_rows[precision] = max(1, self.options.memory_budget_bytes // per_row)
        return rows

    def _run(self, X):
        """(raw scores, transformed scores) as NumPy arrays of the route's dtype."""
        precision = self._precision_for(X)
        X = to_feature_matrix(X, self.ir.head, precision, self.ir.input_precision)
        raw, transformed = self._run_rows(X, precision)
        if self._scaled_rows_must_be_finite and not np.isfinite(raw).all():
            # A finite float32 row can overflow in a scaler; the linear model after it
            # then refuses the infinity, and only a non-finite score can carry one.
            raise ValueError(
                f"{self.ir.head.estimator}: a scaler's output holds infinity or a value too "
                f"large for {X.dtype}; the linear model after it does not accept them.")
        return raw, transformed

    def _run_rows(self, X, precision):
        n = X.shape[0]
        if n <= self._cpu_route_rows and self._on_cpu:
            return self._cpu_program(precision, self._single_row_route if n == 1 else None)(X)
        program = self._program(precision)
        step = self._rows_per_batch(precision, n)
        pad = self.options.tvm_pad_input and self.options.batch_size is not None
        if n <= step and not (pad and n < step):
            return program(X)
        raw_parts, transformed_parts = [], []
        for start in range(0, n, step):
            batch = X[start:start + step]
            rows = batch.shape[0]
            if pad and rows < step:
                # Hummingbird's tvm_pad_prediction_inputs: a short batch is padded with
                # zero rows to the batch size; the padding's outputs are dropped.
                batch = np.concatenate([batch, np.zeros((step - rows, X.shape[1]), X.dtype)])
            raw, transformed = program(batch)
            raw_parts.append(raw[:rows])
            transformed_parts.append(transformed[:rows])
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
        if head.decision_rule == "raw_argmax":
            return classes.take(np.argmax(raw, axis=1))
        if head.decision_rule == "raw_ge_zero":
            return classes.take((raw[:, 0] >= 0).astype(np.int64))
        if head.decision_rule == "raw_gt_zero":
            return classes.take((raw[:, 0] > 0).astype(np.int64))
        return classes.take(np.argmax(proba, axis=1))


def _source_float_dtype(X, head) -> str:
    """The float dtype scikit-learn's scalers and linear models compute in for ``X``:
    float32 stays float32 (a DataFrame when all its columns are), anything else
    becomes float64. float16 is refused: the scalers would round to half precision."""
    dtype = getattr(X, "dtype", None)
    if isinstance(dtype, np.dtype) and dtype != np.float16:  # NumPy arrays: the fast path
        return "float32" if dtype == np.float32 else "float64"
    if hasattr(X, "dtypes") and dtype is None:  # a DataFrame
        kinds = {str(d) for d in X.dtypes}
        if "float16" in kinds:
            raise ValueError(f"{head.estimator} does not take float16 input here; "
                             f"pass float32 or float64 (got a float16 column).")
        return "float32" if kinds == {"float32"} else "float64"
    name = str(getattr(X, "dtype", "")).replace("torch.", "")
    if name == "float16":
        raise ValueError(f"{head.estimator} does not take float16 input here: scikit-learn "
                         f"would compute in half precision; pass float32 or float64.")
    return "float32" if name == "float32" else "float64"


def _exact_in_float32(dtype) -> bool:
    """Every value of ``dtype`` is a float32 value (so rounding to float32 is a no-op)."""
    categories = getattr(dtype, "categories", None)  # pandas category: its values' dtype
    try:
        dtype = np.dtype(dtype if categories is None else categories.dtype)
    except TypeError:  # pandas extension dtypes (nullable Int64, ...): values may not fit
        return False
    return dtype.kind == "b" or (dtype.kind in "iuf" and dtype.itemsize <= (4 if dtype.kind == "f" else 2))


def _checked_device(device, backend_cls=None):
    device = torch.device(device)
    if device.type not in ("cpu", "cuda"):
        raise ValueError(f"device {str(device)!r} is not supported; use 'cpu' or 'cuda[:N]'.")
    if backend_cls is not None and device.type not in getattr(backend_cls, "devices", ("cpu",)):
        raise ValueError(
            f"backend {backend_cls.name!r} runs on {', '.join(backend_cls.devices)}; "
            f"got device {str(device)!r}.")
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"device {str(device)!r} was asked for, but CUDA is not available here.")
    if device.type == "cuda" and device.index is not None and device.index >= torch.cuda.device_count():
        raise ValueError(f"device {str(device)!r} was asked for, but there are only "
                         f"{torch.cuda.device_count()} CUDA device(s).")
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
        labels = self._labels(raw, proba)
        return labels.reshape(-1, 1) if self.ir.head.labels_as_column else labels


class _Proba:
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


class _Transformer:
    def transform(self, X):
        _, values = self._run(X)
        return values


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
    elif head.task == "transform":
        mixins = (_Transformer,)
    elif head.task == "classification":
        mixins = (_Classifier,) + ((_Proba,) if "predict_proba" in head.methods else ()) \
            + ((_DecisionFunction,) if "decision_function" in head.methods else ())
    else:
        mixins = (_Regressor,) + ((_DecisionFunction,) if "decision_function" in head.methods else ())
    key = tuple(m.__name__ for m in mixins)
    if key not in _CONTAINER_CLASSES:
        name = "Converted" + "".join(m.__name__.lstrip("_") for m in mixins)
        _CONTAINER_CLASSES[key] = type(name, (*mixins, ConvertedModel), {})
    return _CONTAINER_CLASSES[key]


def make_container(model_ir: ModelIR, backend_cls, options: Options, device,
                   programs=None) -> ConvertedModel:
    """The container for ``model_ir``; ``programs`` (precision -> runner) are ready-made
    ones, e.g. loaded from a file; the others are built when first needed."""
    cls = _container_class(model_ir.head)
    device = _checked_device(device, backend_cls)
    if programs:
        container = cls.__new__(cls)
        container._init(model_ir, backend_cls, options, device, dict(programs))
        return container
    return cls(model_ir, backend_cls, options, device)
