"""The container: what the user holds after ``convert``.

It exposes the source estimator's own methods and nothing else, checks the input
once at the edge, and carries out the execution plan (woodstar/plan.py): the route,
the precision and the batches of each call; raw scores become labels in NumPy.
Programs are built when a call first needs them.
"""

import os

import numpy as np
import torch

from . import plan
from ._input import all_finite, feature_matrix_function, labels_1d, labels_are_binary
from ._options import Options
from .ir import LinearModel, ModelIR
from .lowering import choose_strategy, lower_model
from .runtimes import NumpyGraph, tree_runtime

__all__ = ["ConvertedModel", "make_container"]

# Calls of up to this many NumPy rows on the compiled walk take its one native call
# (runtimes/c_walk.py, SmallBatchEntry; its own ceiling is 255 rows, up to which it was
# measured to pay); 0 turns it off. Read once, for A/B timing.
SMALL_BATCH_ROWS = int(os.environ.get("WOODSTAR_SMALL_BATCH_ROWS", "255"))


class ConvertedModel:
    """Base of every container; subclasses add the estimator's methods."""

    def __init__(self, model_ir: ModelIR, backend_cls, options: Options, device="cpu",
                 programs=None):
        self.ir = model_ir
        self.backend = backend_cls.name
        self._backend_cls = backend_cls
        self.options = options  # also empties the caches below
        self.device = torch.device(device)
        self._programs = dict(programs or {})  # precision -> the backend's runner
        self._cpu_runners = {}  # (route, precision) -> a NumPy graph runner
        self._routes = plan.choose_routes(model_ir, self.backend, self.device.type, options)
        # scikit-learn's linear models refuse NaN and infinity; after other steps (an
        # encoder, a scaler that overflows) only their scores can show one.
        self._scores_must_be_finite = isinstance(model_ir.final, LinearModel) \
            and len(model_ir.graph.nodes) > 1
        head = model_ir.head
        # What every call reads, looked up once: a one-row call is mostly this overhead.
        self._to_features = feature_matrix_function(head, model_ir.schema,
                                                    model_ir.input_precision)
        self._whole_call = plan.needs_whole_call(model_ir)
        if self._whole_call:
            self._to_features = _dense_rows_only(self._to_features, head.estimator)
        self._nan_scores_error = head.nan_scores_error
        self.n_features_in_ = head.n_features
        if head.feature_names is not None:
            self.feature_names_in_ = np.asarray(head.feature_names, dtype=object)
        if head.classes is not None:
            self.classes_ = head.classes[0] if len(head.classes) == 1 else list(head.classes)

    @property
    def options(self) -> Options:
        return self._options

    @options.setter
    def options(self, options: Options):
        # What is derived from the options is derived again (e.g. Spark's executors
        # set the thread count after loading).
        self._options = options
        self._batch_rows = {}  # (route, precision) -> rows per batch
        self._side_by_side = {}  # (route, precision) -> threads running parts concurrently
        self._precision_by_dtype = {}  # a NumPy input's dtype -> precision_for's answer
        self._small_batch = {}  # precision -> SmallBatchEntry, or False where none applies

    # ---------------------------------------------------------------- programs
    def _default_precision(self):
        return self.options.precision or "float32"

    @property
    def route(self) -> str:
        """The route of a large call (woodstar/plan.py): "program", "numpy" or a tree
        runtime."""
        return self._routes.for_rows(2)

    def _strategy_chooser(self, precision):
        """The routing table's strategy for this model, device, backend and threads
        (lowering/routing.py), unless the user named one."""
        threads = self.options.n_threads or torch.get_num_threads()

        def choose(ens, dtype):
            return choose_strategy(ens, self.options.tree_implementation, dtype,
                                   self.options.memory_budget_bytes, self.ir.head.estimator,
                                   n_threads=threads, device=self.device.type,
                                   backend=self.backend)
        return choose

    def _program(self, precision):
        program = self._programs.get(precision)
        if program is None:
            module = lower_model(self.ir, self._strategy_chooser(precision), precision)
            example = torch.zeros((2, module.n_features), dtype=module.input_dtype)
            program = self._backend_cls.compile(module, example, self.options, self.device)
            self._programs[precision] = program
        return program

    def _cpu_runner(self, route, precision):
        runner = self._cpu_runners.get((route, precision))
        if runner is None:
            runtime = None if route == "numpy" else tree_runtime(route)
            threads = self.options.n_threads or torch.get_num_threads()
            graph = NumpyGraph(self.ir, precision, runtime, threads)
            runner = self._cpu_runners[(route, precision)] = graph.direct or graph
        return runner

    def _runner(self, route, precision):
        return self._program(precision) if route == "program" else self._cpu_runner(route, precision)

    def _prepare(self):
        """Build what the default call needs now: a model that cannot be lowered, or a
        backend that cannot compile it, fails at convert time, not at the first call."""
        self._runner(self.route, self._default_precision())
        return self

    @property
    def strategy(self) -> str:
        """The tree strategy of the default program."""
        return self._program(self._default_precision()).module.strategy

    @property
    def model(self):
        """The backend's own model object (e.g. the torch.nn.Module)."""
        return self._program(self._default_precision()).model

    def to(self, device):
        """Move every program to ``device`` ("cpu", "cuda", "cuda:N"); returns self."""
        device = _checked_device(device, self._backend_cls)
        self._programs = {p: program.to(device) for p, program in self._programs.items()}
        self.device = device
        self._routes = plan.choose_routes(self.ir, self.backend, device.type, self.options)
        self._batch_rows = {}
        self._side_by_side = {}
        self._small_batch = {}
        return self

    def save(self, path):
        """Write a zip: JSON manifest, IR arrays (.npy, no pickle), backend artifacts.
        ``woodstar.load(path)`` reads it back; see docs/backends.md for the format."""
        from ._saving import save

        self._program(self._default_precision())
        save(self, path)
        return path

    def __reduce__(self):
        # pickle, cloudpickle, joblib: through the saved format (woodstar/_pickling.py)
        from ._pickling import from_saved_bytes, saved_bytes

        return from_saved_bytes, (saved_bytes(self),)

    def __repr__(self):
        route = f", route={self.route!r}" if self.route != "program" else ""
        return (f"{type(self).__name__}({self.ir.head.estimator}, backend={self.backend!r}, "
                f"strategy={self.strategy!r}, device={str(self.device)!r}{route})")

    # ---------------------------------------------------------------- running
    def _rows_per_batch(self, route, precision):
        key = (route, precision)
        rows = self._batch_rows.get(key)
        if rows is None:
            if self._whole_call:  # NMF's transform solves over all rows of the call
                rows = self._batch_rows[key] = plan.EVERY_SIZE
                return rows
            if route == "program" and self.options.batch_size is None:
                program = self._program(precision)
                cache_sized = plan.takes_cache_sized_parts(
                    self.ir, self.options, self.device.type,
                    getattr(program, "runs_tensor_ops", True))
                rows = plan.program_rows_per_batch(self.options, program.module.estimate_bytes(1),
                                                   cache_sized)
                if cache_sized:
                    self._side_by_side[key] = getattr(program, "parallel_parts", 1)
            else:
                rows = plan.rows_per_batch(self.options, plan.cpu_bytes_per_row(self.ir))
            self._batch_rows[key] = rows
        return rows

    def _precision(self, X):
        """plan.precision_for, remembered per dtype for NumPy arrays (where the dtype
        is all it reads of the input)."""
        if type(X) is np.ndarray:
            precision = self._precision_by_dtype.get(X.dtype)
            if precision is None:
                precision = plan.precision_for(self.ir, self._options, X)
                self._precision_by_dtype[X.dtype] = precision
            return precision
        return plan.precision_for(self.ir, self._options, X)

    def _small_batch_entry(self, precision):
        """The one-call native entry for NumPy batches at ``precision`` (the compiled
        walk's, for small ones; or a linear model's: runtimes/linear_entry.py), or
        False: only for calls that would run on that route alone, in one batch, on input
        that needs no encoding."""
        entry = False
        to_features, routes = self._to_features, self._routes
        rows = min(SMALL_BATCH_ROWS, routes.cpu_rows)
        if rows > 0 and self.device.type == "cpu" and to_features.plain \
                and routes.for_rows(1) == "c-walk" \
                and (rows == 1 or routes.for_rows(2) == "c-walk"):
            rows = min(rows, self._rows_per_batch("c-walk", precision))
            walk = getattr(self._cpu_runner("c-walk", precision), "program", None)
            from .runtimes.c_walk import CTreeWalk, SmallBatchEntry

            if type(walk) is CTreeWalk and not walk.round_to_float32:
                entry = SmallBatchEntry(walk, rows, to_features.refuse_nan,
                                        to_features.refuse_inf, self.ir.input_precision)
        elif rows > 0 and self.device.type == "cpu" and to_features.plain \
                and routes.for_rows(1) == "numpy" \
                and (rows == 1 or routes.for_rows(2) == "numpy"):
            from .runtimes.linear_entry import linear_entry

            entry = linear_entry(self.ir, self._cpu_runner("numpy", precision), precision,
                                 to_features.refuse_nan, to_features.refuse_inf) or False
            if entry:  # every call the NumPy route would run in one batch
                entry.max_rows = min(entry.max_rows, routes.cpu_rows,
                                     self._rows_per_batch("numpy", precision))
        self._small_batch[precision] = entry
        return entry

    def _run(self, X):
        """(raw scores, transformed scores) as NumPy arrays of the route's dtype."""
        precision = self._precision(X)
        result = None
        if type(X) is np.ndarray and X.ndim == 2:
            entry = self._small_batch.get(precision)
            if entry is None:
                entry = self._small_batch_entry(precision)
            if entry:
                result = entry(X)  # None: not a batch it takes; the full path below
        if result is None:
            X = self._to_features(X, precision)
            result = self._run_rows(X, precision)
        raw, transformed = result
        if self._nan_scores_error and np.isnan(raw).any():
            raise ValueError(f"{self.ir.head.estimator}: {self._nan_scores_error}.")
        if self._scores_must_be_finite and not all_finite(raw):
            what = "NaN" if np.isnan(raw).any() else "infinity or a value too large for " \
                f"{X.dtype}"
            raise ValueError(
                f"{self.ir.head.estimator}: the input of the linear model holds {what} "
                f"(after the steps before it); it does not accept them.")
        return raw, transformed

    def _run_rows(self, X, precision):
        n = X.shape[0]
        route = self._routes.for_rows(n)
        if route == "program" and not X.flags.c_contiguous and not self._whole_call:
            X = np.ascontiguousarray(X)  # Fortran-ordered rows (a whole-call solve, NMF's,
            # reads them in the caller's order: only the torch backend's eager program
            # takes such a model, and it takes any layout)
        runner = self._cpu_runners.get((route, precision)) if route != "program" else None
        if runner is None:
            runner = self._runner(route, precision)
        step = self._batch_rows.get((route, precision)) or self._rows_per_batch(route, precision)
        parts = plan.part_count(n, step, self._side_by_side.get((route, precision), 1))
        if parts == 1 and route != "program":
            return runner(X)
        pad = route == "program" and self._options.tvm_pad_input \
            and self._options.batch_size is not None
        if parts == 1 and not (pad and n < step):
            return runner(X)
        if self._options.batch_size is None:
            # Parts of equal size (within a row), none much smaller than ``step``: a
            # part's answers then match the whole call's even where an op's arithmetic
            # depends on the call's row count (ONNX Runtime's tree sums with several
            # threads change from 51 rows).
            starts = [i * n // parts for i in range(parts + 1)]
        else:
            starts = list(range(0, n, step)) + [n]
        batches = []
        for start, stop in zip(starts, starts[1:]):
            batch = X[start:stop]
            if pad and stop - start < step:
                # Hummingbird's tvm_pad_prediction_inputs: a short batch is padded with
                # zero rows to the batch size; the padding's outputs are dropped.
                batch = np.concatenate([batch, np.zeros((step - batch.shape[0], X.shape[1]), X.dtype)])
            batches.append(batch)
        run_parts = getattr(runner, "run_parts", None)
        results = run_parts(batches) if run_parts else [runner(batch) for batch in batches]
        rows = [stop - start for start, stop in zip(starts, starts[1:])]
        return (np.concatenate([raw[:r] for (raw, _), r in zip(results, rows)]),
                np.concatenate([transformed[:r] for (_, transformed), r in zip(results, rows)]))

    def _labels(self, raw, proba):
        head = self.ir.head
        if head.is_multi_output_classifier:
            columns, start = [], 0
            for classes in head.classes:
                block = proba[:, start:start + len(classes)]
                columns.append(classes.take(np.argmax(block, axis=1)))
                start += len(classes)
            return np.stack(columns, axis=1)
        if head.decision_rule == "multilabel":  # LabelBinarizer's indicator matrix
            return (proba > 0.5).astype(int)
        classes = head.classes[0]
        if head.decision_rule == "raw_argmax":
            return classes.take(np.argmax(raw, axis=1))
        if head.decision_rule == "raw_ge_zero":
            return classes.take((raw[:, 0] >= 0).astype(np.int64))
        if head.decision_rule == "raw_gt_zero":
            return classes.take((raw[:, 0] > 0).astype(np.int64))
        return classes.take(np.argmax(proba, axis=1))


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


def _block(values, head, role, default=None):
    """The columns of ``role`` (Head.blocks) in ``values``, else ``default``."""
    span = head.block(role)
    if span is None:
        return default
    return values[:, span[0]:span[1]]


class _Regressor:
    def predict(self, X):
        _, values = self._run(X)
        values = _block(values, self.ir.head, "value", values)
        if self.ir.head.squeeze_output and values.shape[1] == 1:
            return values[:, 0]
        return values


class _Classifier:
    def predict(self, X):
        raw, transformed = self._run(X)
        head = self.ir.head
        index = _block(transformed, head, "label_index")
        if index is not None and head.is_multi_output_classifier:  # one column per output
            labels = np.stack([c.take(index[:, j].astype(np.int64))
                               for j, c in enumerate(head.classes)], axis=1)
        elif index is not None:
            labels = head.classes[0].take(index[:, 0].astype(np.int64))
        else:
            labels = self._labels(raw, _block(transformed, head, "proba", transformed))
        return labels.reshape(-1, 1) if head.labels_as_column else labels


class _Proba:
    def predict_proba(self, X):
        _, transformed = self._run(X)
        head = self.ir.head
        proba = _block(transformed, head, "proba", transformed)
        if head.is_multi_output_classifier:
            bounds = np.cumsum([0, *head.class_groups])
            return [proba[:, a:b] for a, b in zip(bounds[:-1], bounds[1:])]
        return proba


class _LogProba:
    def predict_log_proba(self, X):
        head = self.ir.head
        if head.block("log_proba") is not None:
            _, transformed = self._run(X)
            return _block(transformed, head, "log_proba")
        proba = self.predict_proba(X)
        with np.errstate(divide="ignore"):  # log(0) is -inf, as in scikit-learn
            return [np.log(p) for p in proba] if isinstance(proba, list) else np.log(proba)


class _DecisionFunction:
    def decision_function(self, X):
        raw, transformed = self._run(X)
        raw = _block(transformed, self.ir.head, "decision", raw)
        return raw[:, 0] if raw.shape[1] == 1 else raw


class _Transformer:
    def transform(self, X):
        head = self.ir.head
        if head.input_1d:
            return self._transform_labels(X)
        _, values = self._run(X)
        values = _block(values, head, "transform", values)
        return values.astype(head.transform_dtype) if head.transform_dtype else values

    def _transform_labels(self, y):
        """A 1-D label transformer (LabelEncoder, LabelBinarizer): the labels are the one
        input column; the result is 1-D where ``squeeze_output`` says so."""
        head = self.ir.head
        y = labels_1d(y, head)
        if not len(y):  # scikit-learn: LabelEncoder gives an empty float array, while
            if head.labels_target_check:  # label_binarize refuses no samples
                raise ValueError(f"Found array with 0 sample(s) (shape={y.shape}) while a "
                                 f"minimum of 1 is required.")
            return np.asarray([])
        _, values = self._run(y)
        if head.binary_labels_block and labels_are_binary(y):
            start, stop = head.binary_labels_block
            values = values[:, start:stop]
        else:
            values = _block(values, head, "transform", values)
        dtype = head.transform_dtype
        if dtype == "labels_int":  # label_binarize: the labels' signed integer dtype, else int64
            dtype = y.dtype if y.dtype.kind == "i" else np.dtype(np.int64)
        if dtype:
            values = values.astype(dtype)
        return values[:, 0] if head.squeeze_output and values.shape[1] == 1 else values


class _ScoreSamples:
    def score_samples(self, X):
        _, values = self._run(X)
        return _block(values, self.ir.head, "score_samples")[:, 0]


class _Anomaly:
    def score_samples(self, X):
        _, scores = self._run(X)
        return _block(scores, self.ir.head, "score_samples", scores)[:, 0]

    def decision_function(self, X):
        if self.ir.head.decision_rule == "raw_gt_zero":  # the source's own decision values
            raw, _ = self._run(X)
            return raw[:, 0]
        return self.score_samples(X) - self.ir.head.anomaly_offset

    def predict(self, X):
        decision = self.decision_function(X)
        if self.ir.head.decision_rule == "raw_gt_zero":  # libsvm: an inlier above zero
            return np.where(decision > 0, 1, -1)
        return np.where(decision < 0, -1, 1)  # IsolationForest: an outlier below zero


class _Forecast:
    """Prophet's ``predict(df)``: a DataFrame of the point forecast (woodstar/_forecast.py)."""

    def _default_precision(self):
        return "float64"  # the dates enter as float64 day/tick counts

    def predict(self, df=None, intervals=False):
        from ._forecast import predict_frame

        return predict_frame(self, df, intervals)

    def predictive_samples(self, df=None):
        from ._forecast import refuse_intervals

        refuse_intervals(self.ir.head)


_CONTAINER_CLASSES = {}


_OPTIONAL_MIXINS = (("predict_proba", _Proba), ("predict_log_proba", _LogProba),
                    ("decision_function", _DecisionFunction), ("score_samples", _ScoreSamples),
                    ("transform", _Transformer))


def _container_class(head):
    if head.task == "anomaly":
        mixins = (_Anomaly,)
    elif head.task == "transform":
        mixins = (_Transformer,)
    elif head.task == "forecast":
        mixins = (_Forecast,)
    else:
        first = _Classifier if head.task == "classification" else _Regressor
        mixins = (first,) + tuple(m for method, m in _OPTIONAL_MIXINS if method in head.methods)
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
    container = cls(model_ir, backend_cls, options, device, programs)
    return container if programs else container._prepare()


def _dense_rows_only(to_features, estimator):
    """The input edge of a model whose transform solves over the whole call (NMF):
    scikit-learn solves sparse rows with its sparse products, which sum in another
    order, so sparse rows are refused rather than made dense."""

    def run(X, dtype):
        if type(X).__module__.startswith("scipy.sparse") and hasattr(X, "toarray"):
            raise TypeError(f"{estimator}: sparse input is not reproduced here (scikit-learn "
                            f"solves sparse rows with its sparse products, summed in another "
                            f"order); pass dense rows.")
        return to_features(X, dtype)

    run.plain, run.refuse_nan, run.refuse_inf = (to_features.plain, to_features.refuse_nan,
                                                 to_features.refuse_inf)
    return run
