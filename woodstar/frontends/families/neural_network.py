"""scikit-learn's multilayer perceptrons -> the ``mlp`` op.

``MLPClassifier`` and ``MLPRegressor`` (losses ``squared_error`` and ``poisson``)
predict with ``_forward_pass_fast``: one matrix product per layer (``coefs_``,
``intercepts_``), the hidden ``activation`` between layers, ``out_activation_`` after
the last (identity, or exp for the poisson loss, for a regressor). A classifier's
labels come from its label binarizer: a threshold at 0.5 on one logistic output (two
classes; the same label as the argmax of ``(1 - p, p)``), the argmax of a softmax
(several classes), or one threshold per label (multilabel targets: ``predict`` gives
the indicator matrix).
"""

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, GraphBuilder, ModelIR, ValueType
from ...ir.families.neural_network import HIDDEN_ACTIVATIONS, MultilayerPerceptron
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend

__all__ = []

# the label binarizer's target type -> the output activation scikit-learn fits for it
_OUTPUTS = {"binary": "logistic", "multiclass": "softmax", "multilabel-indicator": "logistic"}


def _network(model, out_activation, binary=False):
    name = type(model).__name__
    check_fitted(model, "coefs_")
    if model.activation not in HIDDEN_ACTIVATIONS:
        raise MissingConverter(unsupported_message(name, "activation", model.activation,
                                                   HIDDEN_ACTIVATIONS))
    if model.out_activation_ != out_activation:
        raise MissingConverter(unsupported_message(
            name, "out_activation_", model.out_activation_,
            f"{out_activation!r}, the one scikit-learn fits for this target"))
    coefs = [np.asarray(c) for c in model.coefs_]
    intercepts = [np.asarray(b) for b in model.intercepts_]
    dtypes = sorted({str(a.dtype) for a in coefs + intercepts})
    if not set(dtypes) <= {"float32", "float64"}:
        raise MissingConverter(unsupported_message(name, "weights of dtype", dtypes,
                                                   "float32, float64"))
    return MultilayerPerceptron(coefs=tuple(coefs), intercepts=tuple(intercepts),
                                activation=model.activation, out_activation=out_activation,
                                binary=binary)


def _model_ir(head, mlp):
    builder = GraphBuilder(ValueType.floats(head.n_features))
    (out,) = builder.add(mlp, [INPUT], "mlp")
    return ModelIR(head=head, graph=builder.build(out, out)).validate()


@register_frontend("sklearn", "MLPClassifier")
def _mlp_classifier(model, options):
    check_fitted(model, "coefs_")
    name = type(model).__name__
    binarizer = getattr(model, "_label_binarizer", None)
    y_type = str(getattr(binarizer, "y_type_", ""))
    if y_type not in _OUTPUTS:
        raise MissingConverter(unsupported_message(name, "targets of type", y_type,
                                                   ", ".join(_OUTPUTS)))
    binary = y_type == "binary"
    mlp = _network(model, _OUTPUTS[y_type], binary=binary)
    classes = np.asarray(model.classes_)
    if mlp.width != len(classes):
        raise MissingConverter(unsupported_message(
            name, "a network whose outputs do not match its classes",
            (mlp.n_outputs, len(classes)), "one output per class, or one for two classes"))
    rule = "multilabel" if y_type == "multilabel-indicator" else "argmax"
    head = sklearn_head(model, "classification", ("predict", "predict_proba", "predict_log_proba"),
                        classes=(classes,), allows_inf=False, decision_rule=rule)
    return _model_ir(head, mlp)


# MLPRegressor's loss -> its output activation
_REGRESSION_OUTPUTS = {"squared_error": "identity", "poisson": "exp"}


@register_frontend("sklearn", "MLPRegressor")
def _mlp_regressor(model, options):
    check_fitted(model, "coefs_")
    loss = getattr(model, "loss", "squared_error")
    if loss not in _REGRESSION_OUTPUTS:
        raise MissingConverter(unsupported_message(type(model).__name__, "loss", loss,
                                                   ", ".join(_REGRESSION_OUTPUTS)))
    mlp = _network(model, _REGRESSION_OUTPUTS[loss])
    head = sklearn_head(model, "regression", ("predict",), squeeze_output=mlp.n_outputs == 1,
                        allows_inf=False)
    return _model_ir(head, mlp)
