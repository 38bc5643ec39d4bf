"""Lowering of skl2onnx's LocalOutlierFactor graph (``onnx_outlier_factor``): the
IR's ``outlier_factor_outputs`` over Torch tensors."""

from ...ir.families.onnx_neighbors import outlier_factor_outputs
from ..ops import register_lowering
from .onnx_ops import NeighborsTorchMath, TrainingRowsNode

__all__ = ["OnnxOutlierFactorNode"]


class OnnxOutlierFactorNode(TrainingRowsNode):
    def __init__(self, op):
        super().__init__(op, {"k_distances": op.k_distances, "densities": op.densities},
                         "an ONNX LocalOutlierFactor graph (Scan, TopK)")

    def forward(self, x):
        arrays = {"train_columns": self.train_columns(), "k_distances": self.k_distances,
                  "densities": self.densities}
        return (outlier_factor_outputs(self.op, x, arrays, NeighborsTorchMath),)


@register_lowering("onnx_outlier_factor")
def _onnx_outlier_factor(op, input_dtypes, context):
    return OnnxOutlierFactorNode(op)
