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


def _methods(package, name):
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
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    print(markdown(), end="")
