"""Frontends: read a fitted model into IR. Never import torch."""

from . import sklearn_compose, sklearn_linear, sklearn_pipeline, sklearn_trees  # noqa: F401  (scikit-learn)
from . import catboost, lightgbm, xgboost  # noqa: F401  (import their libraries lazily)
from . import families  # noqa: F401  (frontends of frontends/families/)
from . import onnx_ml  # noqa: F401  (ONNX-ML graphs; imports onnx lazily)
from . import prophet  # noqa: F401  (Prophet forecasters; imports prophet lazily)
from . import spark_ml  # noqa: F401  (fitted pyspark.ml models; never imports pyspark)
from .registry import find_frontend, register_frontend, supported_models

__all__ = ["find_frontend", "register_frontend", "supported_models"]
