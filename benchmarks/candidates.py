"""The things timed: woodstar routes (every registered tree strategy x every
available backend, plus the router's own choice) and peers (the native library,
ONNX Runtime, treelite/TL2cgen, lleaves). Each candidate builds, per thread count, a
``predict_proba``-like callable from float32 NumPy to NumPy; a candidate that cannot
be built records why ("not supported", "not installed", ...) and is not timed."""

import contextlib
import dataclasses
import time
from typing import Callable, Optional

import numpy as np

from .models import CACHE_DIR, ModelSpec

__all__ = ["Candidate", "Built", "NotAvailable", "candidates_for", "as_proba"]


class NotAvailable(Exception):
    """The candidate cannot run here or cannot take this model; the message says why."""


@dataclasses.dataclass
class Built:
    fn: Callable[[np.ndarray], np.ndarray]
    compile_s: float
    detail: str = ""          # e.g. the strategy the router chose


@dataclasses.dataclass
class Candidate:
    name: str                 # "woodstar[perf_tree_trav/torch]", "onnxruntime", ...
    kind: str                 # "woodstar" or "peer"
    build: Callable[[int], Built]   # threads -> Built; raises NotAvailable
    strategy: Optional[str] = None
    backend: Optional[str] = None


def as_proba(out, n_classes: int) -> np.ndarray:
    """Every runtime's probability output as (n, n_classes) float64."""
    out = np.asarray(out, dtype=np.float64)
    out = out.reshape(out.shape[0], -1)
    if n_classes == 2 and out.shape[1] == 1:
        return np.hstack([1.0 - out, out])
    return out


def _timed(make):
    start = time.perf_counter()
    result = make()
    return result, time.perf_counter() - start


@contextlib.contextmanager
def _limits(threads):
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:
        yield
        return
    with threadpool_limits(limits=threads):
        yield


# ------------------------------------------------------------------ woodstar
def _woodstar_candidates(spec, model, backends=None, routed_only=False):
    """Each backend's routed candidate ("auto": what convert picks, CPU routes included)
    and, unless ``routed_only``, one per forced tree strategy."""
    import woodstar
    from woodstar.backends import all_backends
    from woodstar.lowering import strategy_names

    from woodstar._options import parse_options
    from woodstar.frontends import find_frontend

    try:
        has_trees = find_frontend(model)(model, parse_options(None)).ensemble is not None
    except Exception:  # noqa: BLE001  (each candidate records the conversion error)
        has_trees = True
    out = []
    for backend, cls in sorted(all_backends().items()):
        if backends is not None and backend not in backends:
            continue
        available, reason = cls.is_available()
        forced = () if routed_only or not has_trees else strategy_names()
        for strategy in (None, *forced):
            label = strategy or "auto"

            def build(threads, backend=backend, strategy=strategy, available=available,
                      reason=reason):
                if not available:
                    raise NotAvailable(f"backend {backend} not available: {reason}")
                config = {"n_threads": threads}
                if strategy is not None:
                    config["tree_implementation"] = strategy
                try:
                    converted, seconds = _timed(lambda: woodstar.convert(
                        model, backend, extra_config=config))
                except Exception as error:  # recorded, never fatal
                    raise NotAvailable(f"not supported: {type(error).__name__}: {error}") from None
                detail = converted.strategy
                return Built(lambda X: converted.predict_proba(X), seconds, detail)

            out.append(Candidate(f"woodstar[{label}/{backend}]", "woodstar", build,
                                 strategy=label, backend=backend))
    return out


# ------------------------------------------------------------------ peers
def _native(spec: ModelSpec, model):
    def build(threads):
        if spec.library == "sklearn":
            est = model[-1] if hasattr(model, "steps") else model
            if "n_jobs" in est.get_params():
                est.set_params(n_jobs=threads)

            def fn(X):
                with _limits(threads):
                    return model.predict_proba(X)
        elif spec.library == "lightgbm":
            def fn(X):
                return model.predict_proba(X, num_threads=threads)
        elif spec.library == "xgboost":
            model.set_params(n_jobs=threads)

            def fn(X):
                return model.predict_proba(X)
        elif spec.library == "catboost":
            def fn(X):
                return model.predict_proba(X, thread_count=threads)
        else:
            raise NotAvailable(spec.library)
        return Built(fn, 0.0)

    return Candidate(f"native[{spec.library}]", "peer", build)


def _onnx_model(spec, model):
    if spec.library == "sklearn":
        import skl2onnx
        from skl2onnx.common.data_types import FloatTensorType

        final = model[-1] if hasattr(model, "steps") else model
        return skl2onnx.convert_sklearn(
            model, initial_types=[("input", FloatTensorType([None, spec.n_features]))],
            options={id(final): {"zipmap": False}}, target_opset={"": 17, "ai.onnx.ml": 3})
    if spec.library == "catboost":
        return _catboost_onnx(model)
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType

    types = [("input", FloatTensorType([None, spec.n_features]))]
    if spec.library == "lightgbm":
        # onnxmltools' converters pick their own opset (17 is refused by 1.16's LightGBM one)
        return onnxmltools.convert_lightgbm(model, initial_types=types, zipmap=False)
    if spec.library == "xgboost":
        return onnxmltools.convert_xgboost(model, initial_types=types)
    raise NotAvailable(spec.library)


def _catboost_onnx(model):
    """CatBoost's own ONNX export (onnxmltools has no CatBoost converter), its ZipMap
    removed so that ONNX Runtime returns the probability tensor, as the other peers'
    graphs do (zipmap=False)."""
    import tempfile

    import onnx

    with tempfile.TemporaryDirectory(prefix="woodstar-bench-") as directory:
        path = f"{directory}/model.onnx"
        model.save_model(path, format="onnx")
        onx = onnx.load(path)
    graph = onx.graph
    for node in [n for n in graph.node if n.op_type == "ZipMap"]:
        graph.node.remove(node)
        for output in [o for o in graph.output if o.name == node.output[0]]:
            graph.output.remove(output)
        graph.output.append(onnx.helper.make_tensor_value_info(
            node.input[0], onnx.TensorProto.FLOAT, [None, None]))
    return onx


def _onnxruntime(spec, model):
    def build(threads):
        try:
            import onnxruntime as ort
        except ImportError:
            raise NotAvailable("onnxruntime not installed") from None
        start = time.perf_counter()
        try:
            onx = _onnx_model(spec, model)
        except ImportError as error:
            raise NotAvailable(f"converter not installed: {error}") from None
        except Exception as error:
            raise NotAvailable(f"conversion failed: {type(error).__name__}: {error}") from None
        so = ort.SessionOptions()
        so.intra_op_num_threads = threads
        so.inter_op_num_threads = 1
        # ONNX Runtime's pool threads spin after each call, holding cores the next
        # candidate of an interleaved run needs: on 2 cores that halved the next
        # candidate's speed while ORT gained nothing from it (docs/benchmarks.md,
        # "Method"). Candidates are timed with every pool waiting passively (OpenMP's
        # through OMP_WAIT_POLICY=passive).
        so.add_session_config_entry("session.intra_op.allow_spinning", "0")
        sess = ort.InferenceSession(onx.SerializeToString(), so,
                                    providers=["CPUExecutionProvider"])
        seconds = time.perf_counter() - start
        name = sess.get_inputs()[0].name
        outputs = [o.name for o in sess.get_outputs()]
        proba = outputs[1] if len(outputs) > 1 else outputs[0]

        def fn(X):
            return sess.run([proba], {name: X})[0]
        return Built(fn, seconds)

    return Candidate("onnxruntime", "peer", build)


def _treelite_model(spec, model):
    import treelite

    if spec.library == "sklearn":
        if hasattr(model, "steps"):
            raise NotAvailable("treelite imports trees only")
        return treelite.sklearn.import_model(model)
    if spec.library == "lightgbm":
        return treelite.frontend.from_lightgbm(model.booster_)
    if spec.library == "xgboost":
        return treelite.frontend.from_xgboost(model.get_booster())
    raise NotAvailable(spec.library)


def _tl2cgen(spec, model):
    def build(threads):
        try:
            import tl2cgen
        except ImportError:
            raise NotAvailable("treelite/tl2cgen not installed") from None
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        libpath = CACHE_DIR / f"{spec.name}-{spec.key()}-tl2cgen.so"
        start = time.perf_counter()
        try:
            tl_model = _treelite_model(spec, model)
            if not libpath.exists():
                tl2cgen.export_lib(tl_model, toolchain="gcc", libpath=str(libpath),
                                   params={"parallel_comp": 16}, verbose=False)
        except NotAvailable:
            raise
        except Exception as error:
            raise NotAvailable(f"compile failed: {type(error).__name__}: {error}") from None
        seconds = time.perf_counter() - start
        predictor = tl2cgen.Predictor(str(libpath), nthread=threads, verbose=False)

        def fn(X):
            return as_proba(predictor.predict(tl2cgen.DMatrix(X)), spec.n_classes)
        return Built(fn, seconds, "compile time excludes a cached .so" if seconds < 1 else "")

    return Candidate("treelite+tl2cgen", "peer", build)


def _lleaves(spec, model):
    def build(threads):
        if spec.library != "lightgbm":
            raise NotAvailable("lleaves compiles LightGBM models only")
        try:
            import lleaves
        except ImportError:
            raise NotAvailable("lleaves not installed") from None
        CACHE_DIR.mkdir(parents=True, exist_ok=True)
        text = CACHE_DIR / f"{spec.name}-{spec.key()}.lgb.txt"
        cache = CACHE_DIR / f"{spec.name}-{spec.key()}-lleaves.o"
        start = time.perf_counter()
        try:
            model.booster_.save_model(str(text))
            compiled = lleaves.Model(model_file=str(text))
            compiled.compile(cache=str(cache))
        except Exception as error:
            raise NotAvailable(f"compile failed: {type(error).__name__}: {error}") from None
        seconds = time.perf_counter() - start

        def fn(X):
            return as_proba(compiled.predict(X, n_jobs=threads), spec.n_classes)
        return Built(fn, seconds)

    return Candidate("lleaves", "peer", build)


def _onedal(spec, model):
    def build(threads):
        if spec.library not in ("xgboost", "lightgbm", "catboost"):
            raise NotAvailable("oneDAL's model builders take XGBoost, LightGBM and CatBoost")
        try:
            import daal4py
            import daal4py.mb
        except ImportError as error:
            raise NotAvailable(f"daal4py not installed (scikit-learn-intelex): {error}") from None
        booster = (model.get_booster() if spec.library == "xgboost"
                   else model.booster_ if spec.library == "lightgbm" else model)
        start = time.perf_counter()
        try:
            converted = daal4py.mb.convert_model(booster)
        except Exception as error:
            raise NotAvailable(f"conversion failed: {type(error).__name__}: {error}") from None
        seconds = time.perf_counter() - start
        daal4py.daalinit(threads)  # oneDAL's thread count is process-wide

        def fn(X):
            if spec.n_classes:
                return as_proba(converted.predict_proba(X), spec.n_classes)
            return converted.predict(X)
        return Built(fn, seconds)

    return Candidate("onedal", "peer", build)


PEERS = {"native": _native, "onnxruntime": _onnxruntime, "tl2cgen": _tl2cgen,
         "lleaves": _lleaves, "onedal": _onedal}


def candidates_for(spec: ModelSpec, model, peers=tuple(PEERS), woodstar_only=False,
                   backends=None, routed_only=False):
    """Native first (the reference), then the other peers, then woodstar's routes
    (``backends``: only those; ``routed_only``: only each backend's routed candidate)."""
    out = [_native(spec, model)]
    if not woodstar_only:
        out += [PEERS[p](spec, model) for p in peers if p != "native"]
    return out + _woodstar_candidates(spec, model, backends, routed_only)
