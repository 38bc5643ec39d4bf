"""``docs/supported.md``: one row per class woodstar converts, generated from the
frontend registry (``python -m woodstar.supported_table > docs/supported.md``; a test
keeps the file current)."""

import importlib

from .frontends import supported_models
from .frontends.registry import _FRONTENDS

__all__ = ["markdown"]

METHODS = ("predict", "predict_proba", "predict_log_proba", "decision_function",
           "score_samples", "transform")
_SKLEARN_MODULES = ("ensemble", "tree", "linear_model", "svm", "neighbors", "neural_network",
                    "naive_bayes", "cluster", "mixture", "decomposition", "cross_decomposition",
                    "discriminant_analysis", "random_projection", "preprocessing", "impute",
                    "compose", "pipeline", "feature_selection", "model_selection",
                    "calibration", "multioutput", "multiclass", "experimental")


def _sklearn_class(name):
    for module in _SKLEARN_MODULES:
        try:
            mod = importlib.import_module(f"sklearn.{module}")
        except ImportError:
            continue
        try:
            return getattr(mod, name)
        except (AttributeError, ImportError):  # experimental classes raise ImportError
            continue
    return None


# classes whose methods differ from the estimator API's
_DESCRIBED = {("prophet", "Prophet"): "predict (a DataFrame: ds, trend, each component, yhat; "
                                      "no uncertainty intervals)",
              ("onnx", "ModelProto"): "an ONNX-ML graph (or a path to a .onnx file): predict, "
                                      "and predict_proba for a classifier; its operators "
                                      "are listed below"}


def _methods(package, name):
    if (package, name) in _DESCRIBED:
        return _DESCRIBED[(package, name)]
    if package == "pyspark":
        from .frontends.spark_ml import spark_methods

        return spark_methods(name)
    if package != "sklearn":
        return "as the library's own model"
    cls = _sklearn_class(name)
    if cls is None:
        return "(experimental: see the class)"
    return ", ".join(m for m in METHODS if hasattr(cls, m))


def markdown() -> str:
    lines = ["# Supported models", "",
             "Generated from the frontend registry by `python -m woodstar.supported_table`. "
             "Options each frontend refuses are named in its error message and in the "
             "README's table. Methods: those the class defines (some exist only for some "
             "fitted options, as in the source library).", "",
             "| library | class | methods | frontend |", "|---|---|---|---|"]
    for package, name in supported_models():
        module = _FRONTENDS[(package, name)].__module__.replace("woodstar.frontends.", "")
        lines.append(f"| {package} | `{name}` | {_methods(package, name)} | `{module}` |")
    lines += _onnx_operators()
    from .frontends.spark_ml import supported_notes

    lines += supported_notes()
    return "\n".join(lines) + "\n"


def _onnx_operators():
    from .frontends.onnx_ml import supported_operators

    return ["", "## ONNX-ML input", "",
            "`woodstar.convert(onnx_model_or_path, backend)` reads these operators; any other "
            "is refused by name, domain and node (one or several float, double, int64 or "
            "string input tensors, given as a dict {input name: array}, a DataFrame of "
            "their columns (a wider input x as x_0, x_1, ...) or one array; one model node, "
            "or plain operators read as a regressor, or an encoder's int64/string column "
            "read by predict; OneHotEncoder with zeros=0 on computed or float values and "
            "Casts to or from strings are refused; PROBIT goes through glibc's logf; "
            "LinearClassifier's SOFTMAX takes ONNX Runtime's float32 loop "
            "or MLAS's softmax by the call's size, as it does; MIN/MAX tree aggregation is "
            "read (on a float input for the opset-5 "
            "TreeEnsemble); SVMClassifier/SVMRegressor read the libsvm layout skl2onnx writes "
            "for SVC, NuSVC, SVR and NuSVR, every kernel but POLY of degree other than 2 or 3 "
            "(`predict_proba` gives the graph's second output: decision scores, the "
            "one-vs-rest graph's per-class scores, or with prob_a/prob_b ONNX Runtime's "
            "Platt-scaled, pairwise-coupled probabilities), and refuse one_class; Softmax "
            "(float, over each row) is MLAS's AVX-512F kernel, as ONNX Runtime runs it on an "
            "x86-64 CPU with AVX-512F; the opset-5 TreeEnsemble, alone or as a classifier's "
            "body (Softmax or Sigmoid, ArgMax and a label lookup after it), reads "
            "post_transform numbers as ONNX "
            "Runtime does, 1 LOGISTIC and 2 SOFTMAX, only NONE on a double input, and "
            "BRANCH_MEMBER members 0..65535, sets of one kind per graph; Exp is MLAS's "
            "kernel, Sqrt correctly rounded, Log is Eigen's packets of four and glibc's logf "
            "on a tensor's last size % 4 elements (a call is then never split), Pow other "
            "than by a scalar 2 or 3 is glibc's powf, by constant exponents (both refused "
            "on onnx and tvm: their export takes minutes), "
            "ReduceSum takes Eigen's packet order, ReduceSumSquare and ReduceLogSumExp add "
            "term after term (glibc's expf and logf), ReduceMax takes Eigen's packet order, "
            "MatMul by a constant vector adds each row's products in ONNX Runtime's order "
            "(runs of four, a pair, a single term), Gemm with beta 0 is MLAS's packed SGEMM "
            "without C, Sign gives 1, -1, +0 or NaN, and KMeans' ArgMin and distances give "
            "predict and transform). skl2onnx's graphs of "
            "PoissonRegressor, GammaRegressor and TweedieRegressor, OneClassSVM (predict: "
            "the (n, 1) int64 labels of Cast(Sign(score)), int64's smallest value for a NaN "
            "score, as ONNX Runtime on x86-64; decision_function: the scores), "
            "VotingRegressor (Flatten, Sum), GaussianMixture (every covariance type) and "
            "BayesianGaussianMixture (predict: the (n, 1) ArgMax labels; predict_proba; "
            "refused on tvm by their ReduceLogSumExp or Gemm), "
            "KNeighborsClassifier/Regressor (euclidean or manhattan, uniform or distance "
            "weights: the distance Scan, TopK with ties by index and NaN last, the vote or "
            "mean), LocalOutlierFactor with novelty=True (predict: the (n, 1) labels, "
            "decision_function, score_samples: the same Scan and TopK, the training rows' "
            "k-distances and densities gathered), IsolationForest with float32 input "
            "(predict: the (n, 1) labels, decision_function, score_samples: each tree's "
            "leaf id, its term per leaf with Eigen's and glibc's Log by the row's place in "
            "the call, the Sum, glibc's powf of 2; refused on onnx and tvm), "
            "RadiusNeighborsClassifier/Regressor (every "
            "training row in index order: ONNX Runtime answers a call only when every "
            "training row lies within the radius of every row, and rejects it otherwise, "
            "as woodstar does with a ValueError), KernelPCA with the rbf kernel (the same Scan, MLAS's exp), the linear "
            "and sigmoid kernels (Tanh is MLAS's kernel), cosine and poly of degree 2 or 3 "
            "(Pow by an int64 2 or 3 is x*x or x*x*x), "
            "PolynomialFeatures (ReduceProd, Shape, ConstantOfShape), PowerTransformer "
            "(Yeo-Johnson and Box-Cox: Log and Pow of computed blocks, Less of two), "
            "GaussianProcessRegressor's predict (RBF, times a ConstantKernel, plus a "
            "WhiteKernel: the distance Scan as a block, then MLAS's Exp and the MatMul), "
            "BaggingClassifier "
            "(stacked probabilities averaged), CalibratedClassifierCV (sigmoid), "
            "AdaBoostClassifier (SAMME), StackingClassifier, OneVsRestClassifier (Slice, "
            "LpNormalization p=1), MultiOutputRegressor and MultiOutputClassifier (predict: "
            "the (n, n_outputs) label matrix; predict_proba: a list of per-output "
            "probability matrices, as scikit-learn gives, where ONNX Runtime returns a "
            "sequence), OneVsOneClassifier with or without ZipMap (predict: the graph's "
            "(n, 1) ArgMax index, which its Cast keeps, as ONNX Runtime gives it whatever "
            "the classes), QuantileTransformer with uniform output (the binary search "
            "over Gathered tables and the interpolation read as one op; skl2onnx writes no "
            "graph for normal output) are read; other Scan bodies (Minkowski p other than "
            "1 or 2) are refused by their operators, the nearest-neighbours and "
            "LocalOutlierFactor graphs on tvm (an onnx export holds the graph's own TopK); a call whose row sums or maxima depend on a row's place in it "
            "(Eigen's SSE packets) is never split into batches. Every output is "
            "equal to ONNX Runtime's to the bit, one-row calls included: MLAS's SGEMM with "
            "its one-row kernel and K slices, and glibc's expf behind LOGISTIC, SOFTMAX and "
            "SOFTMAX_ZERO, are mirrored operation by operation. A classifier's `predict_proba` "
            "is the plain probability matrix, also where the graph ends in ZipMap (ONNX "
            "Runtime returns a list of dicts there).", "",
            "| domain | operator |", "|---|---|"] + [
        f"| {domain} | `{op}` |" for domain, op in supported_operators()]


if __name__ == "__main__":
    print(markdown(), end="")
