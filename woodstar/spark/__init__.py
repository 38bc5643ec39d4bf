"""Scoring Spark DataFrames with woodstar models: ``predict_udf`` and ``score``.

The model travels as woodstar's saved format (no pickle), broadcast once and loaded
once per executor Python process. Needs ``pip install "woodstar[spark]"``.
"""

from ._udf import predict_udf, score

__all__ = ["predict_udf", "score"]
