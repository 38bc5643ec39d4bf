"""One representative model per model family: woodstar's default route against the
native estimator and ONNX Runtime (through skl2onnx, where it converts the model), at
1 and 1000 rows, one thread, interleaved, answers checked first.

    OMP_WAIT_POLICY=passive python -m benchmarks.families --out benchmarks/results/families.json

The report (``benchmarks/report.py``) turns the JSON into the "Model families" section
of docs/benchmarks.md."""

import argparse
import json
import platform
import time
import warnings
from pathlib import Path

import numpy as np

N_FEATURES = 20
BATCHES = (1, 1000)


def _models():
    from sklearn.cluster import KMeans
    from sklearn.decomposition import NMF, PCA
    from sklearn.discriminant_analysis import LinearDiscriminantAnalysis
    from sklearn.ensemble import VotingClassifier
    from sklearn.feature_selection import SelectKBest
    from sklearn.linear_model import LogisticRegression, PoissonRegressor
    from sklearn.mixture import GaussianMixture
    from sklearn.naive_bayes import GaussianNB
    from sklearn.neighbors import KNeighborsClassifier
    from sklearn.neural_network import MLPClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import QuantileTransformer, StandardScaler
    from sklearn.svm import SVC
    from sklearn.tree import DecisionTreeClassifier

    return {
        "svm: SVC rbf": (SVC(), "decision_function"),
        "neural network: MLPClassifier (64,)": (MLPClassifier((64,), max_iter=200, random_state=0), "predict_proba"),
        "naive Bayes: GaussianNB": (GaussianNB(), "predict_proba"),
        "neighbours: KNeighborsClassifier k=5": (KNeighborsClassifier(), "predict_proba"),
        "clustering: KMeans 8": (KMeans(8, n_init=1, random_state=0), "transform"),
        "mixture: GaussianMixture 4 full": (GaussianMixture(4, random_state=0), "predict_proba"),
        "decomposition: PCA 10": (PCA(10), "transform"),
        "decomposition: NMF 8 (cd, solved per call)": (NMF(8, max_iter=400, random_state=0), "transform"),
        "discriminant: LinearDiscriminantAnalysis": (LinearDiscriminantAnalysis(), "predict_proba"),
        "GLM: PoissonRegressor": (PoissonRegressor(), "predict"),
        "preprocessing: QuantileTransformer": (QuantileTransformer(n_quantiles=100), "transform"),
        "selection: SelectKBest + LogisticRegression": (
            make_pipeline(StandardScaler(), SelectKBest(k=10), LogisticRegression()), "predict_proba"),
        "meta: soft VotingClassifier (LR + tree)": (VotingClassifier(
            [("lr", LogisticRegression()), ("dt", DecisionTreeClassifier(max_depth=6, random_state=0))],
            voting="soft"), "predict_proba"),
    }


def _rows_for(name, X):
    """NMF takes non-negative rows only."""
    return np.abs(X) if "NMF" in name else X


def _per_call(fn, min_seconds=0.05, rounds=5):
    best = float("inf")
    for _ in range(rounds):
        n, start = 0, time.perf_counter()
        while True:
            fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_seconds:
                break
        best = min(best, elapsed / n)
    return best


def _ort(model, X, method):
    try:
        import onnxruntime as ort
        from skl2onnx import to_onnx
    except ImportError:
        return None, "skl2onnx or onnxruntime is not installed"
    try:
        options = {id(model): {"zipmap": False}} if hasattr(model, "predict_proba") else None
        onx = to_onnx(model, X[:1].astype(np.float32), options=options, target_opset=17)
    except Exception as error:  # noqa: BLE001  (skl2onnx raises many kinds)
        return None, f"skl2onnx: {type(error).__name__}: {str(error)[:80]}"
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    session = ort.InferenceSession(onx.SerializeToString(), so, providers=["CPUExecutionProvider"])
    name = session.get_inputs()[0].name
    outputs = [o.name for o in session.get_outputs()]
    pick = {"predict": 0, "predict_proba": 1, "decision_function": 1, "transform": 0}[method]
    pick = min(pick, len(outputs) - 1)
    return (lambda rows: session.run([outputs[pick]], {name: rows.astype(np.float32)})[0]), ""


def run(out, only=()):
    import torch

    import woodstar

    torch.set_num_threads(1)
    rng = np.random.default_rng(0)
    X = rng.normal(size=(2000, N_FEATURES))
    y = (X[:, 0] + X[:, 1] * X[:, 2] > 0).astype(int) + (X[:, 3] > 1)
    results = []
    for name, (model, method) in _models().items():
        if only and not any(name.startswith(prefix) for prefix in only):
            continue
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            target = np.abs(X[:, 0]) * 3 if "Poisson" in name else y
            model.fit(_rows_for(name, X), target)
        converted = woodstar.convert(model, "torch", extra_config={"n_threads": 1})
        ort_run, ort_note = _ort(model, X, method)
        row = {"model": name, "method": method, "route": converted.route, "cells": {},
               "ort": ort_note or "skl2onnx"}
        for batch in BATCHES:
            rows = _rows_for(name, rng.normal(size=(batch, N_FEATURES)))
            expected = np.asarray(getattr(model, method)(rows))
            got = np.asarray(getattr(converted, method)(rows))
            cell = {"max_abs_diff_woodstar": float(np.max(np.abs(got - expected))) if got.size else 0.0}
            candidates = {"woodstar": lambda: getattr(converted, method)(rows),
                          "native": lambda: getattr(model, method)(rows)}
            if ort_run is not None:
                ort_out = np.asarray(ort_run(rows)).reshape(expected.shape) if np.asarray(
                    ort_run(rows)).size == expected.size else None
                cell["max_abs_diff_ort"] = (float(np.max(np.abs(ort_out - expected)))
                                            if ort_out is not None else None)
                candidates["onnxruntime"] = lambda: ort_run(rows)
            times = {k: [] for k in candidates}
            for _ in range(3):  # interleaved
                for key, fn in candidates.items():
                    times[key].append(_per_call(fn))
            cell.update({f"ms_{k}": min(v) * 1e3 for k, v in times.items()})
            row["cells"][str(batch)] = cell
            print(name, batch, {k: round(v, 4) for k, v in cell.items() if k.startswith("ms_")}, flush=True)
        results.append(row)
    meta = {"machine": platform.processor() or platform.machine(), "python": platform.python_version(),
            "woodstar": woodstar.__version__, "threads": 1, "batches": list(BATCHES),
            "date": time.strftime("%Y-%m-%d")}
    if only and Path(out).exists():  # measured rows replace their namesakes; others are kept
        measured = {row["model"] for row in results}
        kept = [row for row in json.loads(Path(out).read_text())["results"]
                if row["model"] not in measured]
        results = kept + results
        meta["partial_rerun"] = {"families": list(only), "date": meta["date"]}
    Path(out).write_text(json.dumps({"meta": meta, "results": results}, indent=1))


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default="woodstar-bench/families.json")
    parser.add_argument("--only", nargs="*", default=(),
                        help="measure only the families whose names start with these prefixes "
                             "(e.g. 'svm'), keeping the other rows of an existing --out file")
    args = parser.parse_args()
    Path(args.out).parent.mkdir(parents=True, exist_ok=True)
    run(args.out, tuple(args.only))


if __name__ == "__main__":
    main()
