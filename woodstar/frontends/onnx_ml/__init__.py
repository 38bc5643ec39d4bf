"""ONNX-ML graphs (``onnx.ModelProto``, as skl2onnx and onnxmltools write them) -> IR.

The graph is read node by node; each supported operator (``HANDLERS``, by domain and
type) adds woodstar ops, and any other operator is refused by name, domain and node.
Inputs (``inputs.py``): one or several float, double, int64 or string tensors of
shape (n, k) or (n,), side by side in woodstar's input matrix; string columns are
codes in the schema's vocabulary, so no tensor holds a string (``tensors.py``). The
container takes a dict {input name: array} as ONNX Runtime does, a DataFrame of the
inputs' columns (an input of width 1 is the column of its name, a wider input ``x``
the columns ``x_0``, ``x_1``, ...) or an array of every column
(``woodstar/_onnx_feeds.py``). ``OneHotEncoder`` and ``LabelEncoder`` (opsets 1, 2
and 4) become the ``one_hot`` and ``ordinal`` ops (``encoders.py``); ``Concat``,
``Reshape``, ``Gather``, ``ArrayFeatureExtractor``, ``Identity`` and ``Cast`` (int64
to float) also move int64, string and higher-rank tensors. A graph whose one output
is an int64 or string column a LabelEncoder wrote gives it as ``predict``.
Supported after those: one model node
(``TreeEnsembleRegressor``/``TreeEnsembleClassifier``, ``LinearRegressor``/
``LinearClassifier``, ``SVMRegressor``/``SVMClassifier``; an SVMClassifier's pair
scores may go on through ``Less``/``Greater``, ``Where``, ``Neg``, ``Abs``, ``Sum`` and
elementwise ``Add``/``Sub``/``Mul``/``Div``, skl2onnx's one-vs-rest graph, whose per-class scores
become its probabilities: ``plain_ops.py``) whose outputs are the graph's, after
``Scaler``, ``Imputer``,
``Normalizer``, ``Cast``, ``Add``/``Sub``/``Mul``/``Div`` by a constant, ``Concat``,
``FeatureVectorizer``, ``ArrayFeatureExtractor`` and ``Binarizer`` on its input,
or no model node but ``MatMul``/``Gemm`` by constants, ``Relu``, ``Sigmoid``,
``Softmax`` (float, over each row: MLAS's kernels, see ``plain_ops.py``) and
``Reshape`` (a multi-layer perceptron's graph, read as a regressor; with ``ArgMax``
and an ``ArrayFeatureExtractor`` of constant classes, a classifier deciding by the
first largest probability; an opset-5 ``TreeEnsemble``'s scores may start such a
classifier), and ``Normalizer``, ``Cast``, ``Identity`` and ``ZipMap`` on its outputs.
The math operators of skl2onnx's PCA (whiten), KMeans, naive Bayes, QDA and
KBinsDiscretizer graphs (Exp, Sqrt, Log and Pow of constants, the reductions, ArgMin, a
Gemm over a computed bias, broadcasting over (n, a, b) tensors) are ``math_ops.py``'s.

skl2onnx's graphs of KNeighborsClassifier/Regressor (a ``Scan`` of pairwise distances
and what follows it, read as one op: ``scan.py``, ``neighbors.py``, RadiusNeighbors
graphs too), LocalOutlierFactor(novelty=True) (the same
Scan: ``outlier_factor.py``), IsolationForest (the trees' leaf ids, their
LabelEncoders and Log per leaf, Sum and Pow as one op: ``isolation.py``), KernelPCA
(``kernel_pca.py``), PolynomialFeatures (``shapes.py``), PowerTransformer (Log and Pow
of computed blocks, Less of two: ``power.py``), GaussianProcessRegressor (shape
arithmetic on constants folded, the RBF kernel's distance Scan as a block:
``gaussian_process.py``), BaggingClassifier and
StackingClassifier (``meta.py``), CalibratedClassifierCV (``calibration.py``),
AdaBoostClassifier (``adaboost.py``), OneVsRestClassifier and OneVsOneClassifier
with or without ZipMap (``multiclass.py``), QuantileTransformer (uniform output: the
whole graph from its ``IsNaN`` as one op, ``quantile.py``),
MultiOutputRegressor and MultiOutputClassifier (``multioutput.py``: ``predict`` gives
the (n, n_outputs) label matrix, ``predict_proba`` a list of per-output matrices, as
scikit-learn does, where ONNX Runtime returns a sequence), PoissonRegressor,
GammaRegressor and TweedieRegressor (MatMul by a constant vector: ``glm.py``),
OneClassSVM (``Sign`` and its Cast to int64 as labels, ``decision_function`` the
scores: ``sign.py``), VotingRegressor (``Flatten``: ``flatten.py``) and
GaussianMixture/BayesianGaussianMixture (Gemm with beta 0, the ArgMax labels beside
the probabilities: ``mixture.py``) are read too; nodes a multi-node reader matched
are marked in ``state.consumed`` and skipped here.

A classifier's container gives ``predict`` (the graph's labels) and
``predict_proba``: the plain probability matrix, also where the graph ends in ZipMap
(ONNX Runtime returns a list of dicts there). A regressor's ``predict`` gives ONNX
Runtime's (n, n_targets) matrix. The answers are ONNX Runtime's own, to the bit (see
``woodstar/ir/families/onnx_ops.py``, ``onnx_math.py`` and ``onnx_neighbors.py`` for the
kernels' arithmetic).
"""

import dataclasses

import numpy as np

from ...exceptions import MissingConverter, unsupported_message
from ...ir import INPUT, ColumnOps, Concat, GraphBuilder, Head, ModelIR, SchemaBuilder, Select
from ...ir.families.onnx_ops import (NORMS, OnnxBinarizer, OnnxCast, OnnxLinear, OnnxNormalizer,
                                     OnnxSigmoid)
from ..registry import register_frontend
from ._attributes import attributes, node_label, refuse
from .adaboost import constant_branches, handle_equal, integer_casts
from .calibration import (constant_divisions, handle_not, handle_reduce_sum, handle_tanh,
                          truth_casts)
from .encoders import handle_label_encoder, handle_one_hot_encoder
from .inputs import (bind_inputs, feature_names, graph_inputs, input_blocks, schema_columns,
                     single_float_input)
from .kernel_pca import transposing_constants
from .linear import linear_op
from .math_ops import (casting_labels, concatenating_rows, gemm_reading_a_bias, handle_argmin,
                       handle_exp, handle_log, handle_pow, handle_reduce, handle_reduce_max,
                       handle_sqrt, handle_transpose, reading_argmax, reduce_sum_folding,
                       reading_vector_products, reshape_to_inner)
from .meta import handle_reduce_mean, relabel_scored_results, stacking
from .multiclass import (casting_argmax, casting_label_columns, concatenating_row_count,
                         gathering_row_count, handle_lp_normalization, handle_slice,
                         reshaping_to_rows, zipmap_beside_argmax)
from .multioutput import (MULTI_OUTPUT_ROLES, concatenating_labels, handle_sequence_construct,
                          multi_output_head, reshaping_outputs)
from .gaussian_process import (folding_constant_shapes, keeping_row_blocks,
                               reading_kernel_distances, row_and_width_shapes)
from .quantile import quantile_reader
from .power import (comparison_negations, computed_comparisons, computed_logs,
                    computed_powers)
from .plain_ops import (handle_binary, handle_compare, handle_softmax, handle_sum, handle_unary,
                        handle_where, labels_beside_features, reading_blocks)
from .scan import handle_scan
from .shapes import handle_constant_of_shape, handle_reduce_prod, handle_shape
from .flatten import handle_flatten
from .mixture import argmax_beside_probabilities
from .sign import casting_signs, handle_sign
from .svm import svm_op
from .tensors import HANDLER_PAIRS, handle_gather, table_index, typed
from .trees import tree_ensemble_ops
from .isolation import isolation_forest_trees
from .tree_ensemble5 import handle_tree_ensemble5

__all__ = ["from_onnx", "HANDLERS", "supported_operators"]

ML = "ai.onnx.ml"
_FLOAT, _INT64, _STRING, _DOUBLE = 1, 7, 8, 11  # onnx.TensorProto element types


class _Features:
    """A block of numeric columns: the woodstar value and the ONNX tensor's dtype."""

    def __init__(self, value, dtype, width):
        self.value, self.dtype, self.width = value, np.dtype(dtype), width


class _Result:
    """A model node's woodstar values: ``transformed`` holds a classifier's
    probabilities (``proba_width`` columns) then its label index, or a regressor's
    values."""

    def __init__(self, node, raw, transformed, labels, proba_width):
        self.node, self.raw, self.transformed = node, raw, transformed
        self.labels, self.proba_width = labels, proba_width


class _State:
    def __init__(self, builder):
        self.builder = builder
        self.values = {}  # ONNX value name -> (role, payload)
        self.constants = {}  # ONNX value name -> array (initializers, Constant nodes)
        self.refuses_nan = False  # ONNX Runtime rejects a NaN input (Binarizer)
        self.ort_threads = 1  # the intra-op threads of the session whose sums to repeat
        self.results = []

    def read(self, node, index, roles):
        name = node.input[index] if index < len(node.input) else ""
        if name not in self.values:
            refuse(node, "an input that no supported node writes", name, "the graph's input "
                   "or the outputs of supported nodes")
        role, payload = self.values[name]
        if role not in roles:
            refuse(node, f"input {name!r} holding", role, roles)
        return role, payload

    def add(self, op, inputs, node, suffix=""):
        return self.builder.add(op, inputs, name=f"{node.name or node.op_type}{suffix}")

    def rounded(self, features, node):
        """``features`` as the ONNX tensor holds them: a float input is rounded to float32
        first (the caller may pass float64 rows)."""
        if features.value == INPUT and features.dtype == np.float32:
            (value,) = self.add(OnnxCast(width=features.width, dtype="float32"),
                                [INPUT], node, ":input")
            return _Features(value, np.float32, features.width)
        return features

    def result(self, node, raw, transformed, labels, proba_width):
        result = _Result(node, raw, transformed, labels, proba_width)
        self.results.append(result)
        if labels is None:
            self.values[node.output[0]] = ("values", result)
        else:
            self.values[node.output[0]] = ("labels", result)
            if len(node.output) > 1 and node.output[1]:
                self.values[node.output[1]] = ("probabilities", result)


def _tree_ensemble(node, state):
    _, features = state.read(node, 0, ("features",))
    ensemble, scores, labels = tree_ensemble_ops(node, features.dtype.type, features.width)
    scores = dataclasses.replace(scores, ort_threads=state.ort_threads)
    (per_tree, _) = state.add(ensemble, [features.value], node, ":trees")
    raw, transformed = state.add(scores, [per_tree], node)
    state.result(node, raw, transformed, labels, max(scores.n_targets, 2))


def _linear(node, state):
    _, features = state.read(node, 0, ("features",))
    op, labels, proba_width = linear_op(node, features.width)
    raw, transformed = state.add(op, [features.value], node)
    state.result(node, raw, transformed, labels, proba_width)


def _svm(node, state):
    _, features = state.read(node, 0, ("features",))
    if node.op_type == "SVMRegressor" and features.dtype != np.float32:
        refuse(node, "input of dtype", str(features.dtype),
               "float (ONNX Runtime's kernel reads float only)")
    op, labels = svm_op(node, features.width)
    raw, transformed = state.add(op, [features.value], node)
    state.result(node, raw, transformed, labels, op.output_width - 1 if labels is not None else 1)


def _scaler(node, state):
    _, features = state.read(node, 0, ("features",))
    features = state.rounded(features, node)
    a = attributes(node)
    ops, operands = [], []
    for name, op in (("offset", "sub"), ("scale", "mul")):
        values = a.get(name, np.zeros(0, np.float32))
        if len(values) == 0:
            continue
        if len(values) not in (1, features.width):
            refuse(node, f"{name} of length", len(values), f"1 or {features.width}")
        ops.append(op)
        operands.append(np.broadcast_to(values, (features.width,)).astype(np.float32))
    value = features.value
    if ops:
        (value,) = state.add(ColumnOps(name="Scaler", n_features=features.width, ops=tuple(ops),
                                       operands=tuple(operands),
                                       cast_operand=(False,) * len(ops)), [value], node)
    if features.dtype != np.float32:  # computed in double, written as float
        (value,) = state.add(OnnxCast(width=features.width, dtype="float32"), [value], node, ":float")
    state.values[node.output[0]] = ("features", _Features(value, np.float32, features.width))


def _imputer(node, state):
    _, features = state.read(node, 0, ("features",))
    if features.dtype != np.float32:
        refuse(node, "input of dtype", str(features.dtype), "float")
    features = state.rounded(features, node)
    a = attributes(node)
    imputed = a.get("imputed_value_floats", np.zeros(0, np.float32))
    if len(imputed) not in (1, features.width):
        refuse(node, "imputed_value_floats of length", len(imputed), f"1 or {features.width}")
    imputed = np.broadcast_to(imputed, (features.width,)).astype(np.float32)
    replaced = np.float32(a.get("replaced_value_float", np.float32(0.0)))
    if np.isnan(replaced):
        op, operand = "fill_nan", imputed
    else:
        op, operand = "fill_value", np.stack([np.full(features.width, replaced, np.float32), imputed])
    (value,) = state.add(ColumnOps(name="Imputer", n_features=features.width, ops=(op,),
                                   operands=(operand,), cast_operand=(False,)),
                         [features.value], node)
    state.values[node.output[0]] = ("features", _Features(value, np.float32, features.width))


def _normalizer(node, state):
    role, payload = state.read(node, 0, ("features", "probabilities"))
    norm = attributes(node).get("norm", "MAX")
    if norm not in NORMS:
        refuse(node, "norm", norm, NORMS)
    if role == "features" and payload.dtype != np.float32:
        # the kernel squares a double before rounding it (L2); only float is mirrored
        refuse(node, "input of dtype", str(payload.dtype), "float")
    if role == "features":
        (value,) = state.add(OnnxNormalizer(norm=norm, width=payload.width), [payload.value], node)
        state.values[node.output[0]] = ("features", _Features(value, np.float32, payload.width))
        return
    (transformed,) = state.add(OnnxNormalizer(norm=norm, width=payload.proba_width, passthrough=1),
                               [payload.transformed], node)
    result = _Result(node, payload.raw, transformed, payload.labels, payload.proba_width)
    result.model = getattr(payload, "model", payload.node)
    state.results.append(result)
    state.values[node.output[0]] = ("probabilities", result)
    # the labels the model node wrote still come from the same result
    for name, (r, p) in list(state.values.items()):
        if r == "labels" and p is payload:
            state.values[name] = ("labels", result)


_ARITHMETIC = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div"}


def _arithmetic(node, state):
    """features (op) constant, elementwise in the features' dtype: the constant is an
    initializer or a Constant node's value, one number or one per column. Add, Mul and
    Sub also read constant (op) features (``1 - p`` in a binary classifier's graph)."""
    if node.op_type in ("Add", "Mul", "Sub") and len(node.input) == 2 and \
            node.input[0] in state.constants and node.input[1] not in state.constants:
        return _constant_first(node, state)
    _, features = state.read(node, 0, ("features",))
    constant = state.constants.get(node.input[1]) if len(node.input) > 1 else None
    if constant is None:
        refuse(node, "a second input that is not a constant", node.input[1:],
               "features (op) an initializer or a Constant")
    if constant.size not in (1, features.width) or constant.dtype != features.dtype:
        refuse(node, f"a constant of shape {constant.shape} and dtype", str(constant.dtype),
               f"1 or {features.width} values of the features' dtype {features.dtype}")
    features = state.rounded(features, node)
    operand = np.broadcast_to(constant.reshape(-1), (features.width,)).astype(features.dtype)
    (value,) = state.add(ColumnOps(name=node.op_type, n_features=features.width,
                                   ops=(_ARITHMETIC[node.op_type],), operands=(operand,),
                                   cast_operand=(False,)), [features.value], node)
    state.values[node.output[0]] = ("features", _Features(value, features.dtype, features.width))


def _constant_first(node, state):
    """constant (op) features: Add and Mul commute; ``c - x`` is ``(-x) + c`` (the
    negation is exact, so both round the same exact difference once)."""
    swapped = type(node)()
    swapped.CopyFrom(node)
    del swapped.input[:]
    swapped.input.extend([node.input[1], node.input[0]])
    if node.op_type != "Sub":
        return _arithmetic(swapped, state)
    _, features = state.read(swapped, 0, ("features",))
    features = state.rounded(features, node)
    (negated,) = state.add(ColumnOps(name="Neg", n_features=features.width, ops=("mul",),
                                     operands=(np.full(features.width, -1, features.dtype),),
                                     cast_operand=(False,)), [features.value], node, ":neg")
    name = f"{node.output[0]}:negated"
    state.values[name] = ("features", _Features(negated, features.dtype, features.width))
    del swapped.input[:]
    swapped.input.extend([name, node.input[0]])
    swapped.op_type = "Add"
    _arithmetic(swapped, state)


def _argmax(node, state):
    """ArgMax over the columns of a probability block: kept aside until an
    ArrayFeatureExtractor looks the index up in constant class labels."""
    _, features = state.read(node, 0, ("features",))
    a = attributes(node)
    if a.get("axis", 0) not in (1, -1) or a.get("keepdims", 1) != 1 or a.get("select_last_index", 0):
        refuse(node, "attributes (axis, keepdims, select_last_index)",
               (a.get("axis", 0), a.get("keepdims", 1), a.get("select_last_index", 0)),
               "(1, 1, 0): the first largest column of each row")
    state.values[node.output[0]] = ("argmax", features)


def _labels_by_argmax(node, state, features):
    """ArrayFeatureExtractor(classes, ArgMax(p)): the classifier's labels, the first
    largest of ``p`` (the head's ``argmax`` rule); ``p`` becomes its probabilities."""
    classes = state.constants.get(node.input[0])
    if classes is None or classes.ndim != 1 or len(classes) != features.width:
        refuse(node, "class labels", None if classes is None else classes.shape,
               f"a constant list of {features.width} labels, one per probability column")
    labels = classes.astype(str) if classes.dtype.kind in "OSU" else classes.astype(np.int64)
    result = _Result(node, features.value, features.value, labels, features.width)
    result.decided_by_argmax = True
    state.results.append(result)
    state.values[node.output[0]] = ("labels", result)
    for name, (role, payload) in list(state.values.items()):
        if payload is features and role in ("features", "zipmap"):
            state.values[name] = ("probabilities" if role == "features" else role, result)
    relabel_scored_results(state, features, result)


def _constant(node, state):
    value = attributes(node).get("value")
    if value is None:
        refuse(node, "a Constant without a tensor value", "other attribute", "value")
    state.constants[node.output[0]] = np.asarray(value)


def _concat(node, state):
    """Concat (axis 1) or FeatureVectorizer: feature blocks side by side. Concat keeps
    one dtype; FeatureVectorizer writes float (its inputs rounded to float32)."""
    parts = [state.rounded(state.read(node, i, ("features",))[1], node)
             for i in range(len(node.input))]
    a = attributes(node)
    if node.op_type == "Concat":
        if a.get("axis") not in (1, -1):
            refuse(node, "axis", a.get("axis"), "1 or -1 (columns)")
        if len({p.dtype for p in parts}) != 1:
            refuse(node, "inputs of several dtypes", sorted(str(p.dtype) for p in parts),
                   "one dtype")
    else:
        dims = list(a.get("inputdimensions", []))
        if dims != [p.width for p in parts]:
            refuse(node, "inputdimensions", dims, f"the inputs' widths {[p.width for p in parts]}")
        parts = [p if p.dtype == np.float32 else _Features(
            state.add(OnnxCast(width=p.width, dtype="float32"), [p.value], node, f":{i}")[0],
            np.float32, p.width) for i, p in enumerate(parts)]
    width = sum(p.width for p in parts)
    (value,) = state.add(Concat(widths=tuple(p.width for p in parts)), [p.value for p in parts], node)
    state.values[node.output[0]] = ("features", _Features(value, parts[0].dtype, width))


def _array_feature_extractor(node, state):
    """The columns at constant indices (ONNX Runtime refuses an index out of range),
    or a classifier's labels: constant classes at an ArgMax's index."""
    if len(node.input) == 2 and node.input[0] in state.constants and \
            state.values.get(node.input[1], ("",))[0] == "argmax":
        return _labels_by_argmax(node, state, state.values[node.input[1]][1])
    _, features = state.read(node, 0, ("features",))
    features = state.rounded(features, node)
    indices = state.constants.get(node.input[1]) if len(node.input) > 1 else None
    if indices is None or indices.dtype.kind not in "iu" or indices.size == 0:
        refuse(node, "indices that are not a constant list of integers", node.input[1:],
               "an int64 initializer or Constant")
    indices = tuple(int(i) for i in indices.reshape(-1))
    if min(indices) < 0 or max(indices) >= features.width:
        refuse(node, "indices", indices, f"0..{features.width - 1}")
    (value,) = state.add(Select(n_features=features.width, indices=indices), [features.value], node)
    state.values[node.output[0]] = ("features", _Features(value, features.dtype, len(indices)))


def _binarizer(node, state):
    """On the graph's float input only: ONNX Runtime refuses a NaN there, and so does
    the container (``allows_nan``); after other steps a NaN's fate would differ."""
    _, features = state.read(node, 0, ("features",))
    if features.value != INPUT or features.dtype != np.float32:
        refuse(node, "input", "computed columns or a double tensor",
               "the graph's float input (where a NaN is refused up front, as ONNX Runtime does)")
    state.refuses_nan = True
    threshold = float(np.float32(attributes(node).get("threshold", np.float32(1.0))))
    (value,) = state.add(OnnxBinarizer(width=features.width, threshold=threshold),
                         [features.value], node)
    state.values[node.output[0]] = ("features", _Features(value, np.float32, features.width))


def _float_features(node, state):
    _, features = state.read(node, 0, ("features",))
    if features.dtype != np.float32:
        refuse(node, "input of dtype", str(features.dtype), "float")
    return state.rounded(features, node)


def _matmul(node, state):
    """MatMul / Gemm of the features by a constant matrix (plus a constant bias for
    Gemm): MLAS's packed SGEMM (``onnx_linear`` with ``packed``)."""
    features = _float_features(node, state)
    a = attributes(node)
    weights = state.constants.get(node.input[1]) if len(node.input) > 1 else None
    if weights is None or weights.ndim != 2 or weights.dtype != np.float32:
        refuse(node, "a second input that is not a constant float matrix", node.input[1:],
               "a float initializer")
    if node.op_type == "Gemm":
        if a.get("transA", 0) or float(a.get("alpha", 1.0)) != 1.0 or float(a.get("beta", 1.0)) != 1.0:
            refuse(node, "attributes (transA, alpha, beta)",
                   (a.get("transA", 0), a.get("alpha", 1.0), a.get("beta", 1.0)), "(0, 1.0, 1.0)")
        if a.get("transB", 0):
            weights = weights.T
    if weights.shape[0] != features.width:
        refuse(node, f"a {weights.shape} matrix for", features.width, "features x outputs")
    n_out = weights.shape[1]
    bias = np.zeros(n_out, np.float32)
    if node.op_type == "Gemm" and len(node.input) > 2 and node.input[2]:
        c = state.constants.get(node.input[2])
        if c is None or c.dtype != np.float32 or c.size not in (1, n_out):
            refuse(node, "a bias that is not 1 or n_outputs float constants", node.input[2],
                   "a float initializer of shape (n_outputs,) or (1, n_outputs)")
        bias = np.broadcast_to(c.reshape(-1), (n_out,)).astype(np.float32)
    # a constant matrix: the session packs it once, so MLAS takes its packed path
    op = OnnxLinear(coefficients=np.ascontiguousarray(weights.T), intercepts=bias, role="regressor",
                    packed=True)
    (value, _) = state.add(op, [features.value], node)
    state.values[node.output[0]] = ("features", _Features(value, np.float32, n_out))


def _relu(node, state):
    features = _float_features(node, state)
    (value,) = state.add(ColumnOps(name="Relu", n_features=features.width, ops=("maximum",),
                                   operands=(np.zeros(features.width, np.float32),),
                                   cast_operand=(False,)), [features.value], node)
    state.values[node.output[0]] = ("features", _Features(value, np.float32, features.width))


def _sigmoid(node, state):
    features = _float_features(node, state)
    (value,) = state.add(OnnxSigmoid(width=features.width), [features.value], node)
    state.values[node.output[0]] = ("features", _Features(value, np.float32, features.width))


def _reshape(node, state):
    """A reshape that keeps each row's columns: (-1, width) or, for one column, (-1,);
    labels to (-1,)."""
    role, payload = state.read(node, 0, ("features", "labels"))
    shape = state.constants.get(node.input[1]) if len(node.input) > 1 else None
    shape = None if shape is None else [int(d) for d in shape.reshape(-1)]
    if role == "labels":
        if shape != [-1]:
            refuse(node, "a reshape of labels to", shape, "[-1]")
        state.values[node.output[0]] = (role, payload)
        return
    if shape not in ([-1, payload.width], [-1] if payload.width == 1 else None):
        refuse(node, "shape", shape, f"[-1, {payload.width}]" + (" or [-1]" if payload.width == 1 else ""))
    flat = _Features(payload.value, payload.dtype, payload.width)
    flat.one_dimensional = shape == [-1]
    state.values[node.output[0]] = ("features", flat)


def _identity(node, state):
    state.values[node.output[0]] = state.read(node, 0, ("features", "labels", "probabilities",
                                                        "values", "zipmap"))


def _cast(node, state):
    role, payload = state.read(node, 0, ("features", "labels", "probabilities", "values"))
    to = attributes(node).get("to")
    if role == "features" and to in (_FLOAT, _DOUBLE):
        dtype = "float32" if to == _FLOAT else "float64"
        (value,) = state.add(OnnxCast(width=payload.width, dtype=dtype), [payload.value], node)
        state.values[node.output[0]] = ("features", _Features(value, dtype, payload.width))
        return
    if role == "labels":
        keeps = (payload.labels.dtype.kind == "i" and to == _INT64) or \
                (payload.labels.dtype.kind != "i" and to == _STRING)
    else:  # float32 values: float and double hold them exactly
        keeps = to in (_FLOAT, _DOUBLE) and role != "features"
    if not keeps:
        refuse(node, f"a Cast of the {role} to element type", to,
               "the type they already have (labels) or float/double (numbers)")
    state.values[node.output[0]] = (role, payload)


def _zipmap(node, state):
    # features: a probability block whose labels an ArgMax lookup gives later
    _, payload = state.read(node, 0, ("probabilities", "features"))
    state.values[node.output[0]] = ("zipmap", payload)


HANDLERS = {
    (ML, "TreeEnsembleRegressor"): isolation_forest_trees(_tree_ensemble),
    (ML, "TreeEnsembleClassifier"): _tree_ensemble,
    (ML, "TreeEnsemble"): handle_tree_ensemble5,
    (ML, "LinearClassifier"): _linear,
    (ML, "LinearRegressor"): _linear,
    (ML, "SVMClassifier"): _svm,
    (ML, "SVMRegressor"): _svm,
    (ML, "Scaler"): _scaler,
    (ML, "Imputer"): _imputer,
    (ML, "Normalizer"): _normalizer,
    (ML, "ZipMap"): _zipmap,
    (ML, "Binarizer"): _binarizer,
    (ML, "FeatureVectorizer"): _concat,
    (ML, "ArrayFeatureExtractor"): typed(reading_blocks(_array_feature_extractor),
                                         HANDLER_PAIRS["ArrayFeatureExtractor"]),
    ("", "Concat"): folding_constant_shapes(row_and_width_shapes(concatenating_row_count(concatenating_labels(
        stacking(typed(concatenating_rows(reading_blocks(_concat)), HANDLER_PAIRS["Concat"])))))),
    ("", "Identity"): typed(_identity, HANDLER_PAIRS["Identity"]),
    ("", "MatMul"): reading_vector_products(_matmul),
    ("", "Gemm"): gemm_reading_a_bias(_matmul),
    ("", "Relu"): _relu,
    ("", "Sigmoid"): reading_blocks(_sigmoid),
    ("", "Softmax"): handle_softmax,
    ("", "Neg"): handle_unary,
    ("", "Abs"): handle_unary,
    ("", "Less"): computed_comparisons(handle_compare),
    ("", "Greater"): computed_comparisons(handle_compare),
    ("", "Where"): constant_branches(reading_blocks(handle_where)),
    ("", "Sum"): handle_sum,
    ("", "Reshape"): reshaping_to_rows(reshaping_outputs(stacking(typed(
        reshape_to_inner(_reshape), HANDLER_PAIRS["Reshape"])))),
    ("", "Constant"): _constant,
    ("", "Add"): handle_binary,
    ("", "Sub"): handle_binary,
    ("", "Mul"): handle_binary,
    ("", "Div"): constant_divisions(handle_binary),
    ("", "Cast"): casting_argmax(casting_label_columns(casting_signs(integer_casts(truth_casts(typed(
        casting_labels(_cast), HANDLER_PAIRS["Cast"])))))),
    ("", "Sign"): handle_sign,
    ("", "Flatten"): handle_flatten,
    ("", "ArgMax"): reading_blocks(_argmax),
    (ML, "OneHotEncoder"): reading_argmax(handle_one_hot_encoder),
    (ML, "LabelEncoder"): handle_label_encoder,
    ("", "Gather"): folding_constant_shapes(keeping_row_blocks(gathering_row_count(handle_gather))),
    ("", "Sqrt"): handle_sqrt,
    ("", "Log"): computed_logs(handle_log),
    ("", "Pow"): computed_powers(handle_pow),
    ("", "ReduceSumSquare"): handle_reduce,
    ("", "ReduceLogSumExp"): handle_reduce,
    ("", "ArgMin"): handle_argmin,
    ("", "ReduceMax"): handle_reduce_max,
    ("", "Transpose"): transposing_constants(handle_transpose),
    ("", "Scan"): reading_kernel_distances(handle_scan),
    ("", "Shape"): folding_constant_shapes(reading_blocks(handle_shape)),
    ("", "ConstantOfShape"): folding_constant_shapes(handle_constant_of_shape),
    ("", "ReduceProd"): handle_reduce_prod,
    ("", "ReduceMean"): handle_reduce_mean,
    ("", "Exp"): handle_exp,
    ("", "ReduceSum"): reduce_sum_folding(handle_reduce_sum),
    ("", "Not"): comparison_negations(handle_not),
    ("", "Tanh"): handle_tanh,
    ("", "Equal"): handle_equal,
    ("", "Slice"): handle_slice,
    ("", "LpNormalization"): handle_lp_normalization,
    ("", "SequenceConstruct"): handle_sequence_construct,
    ("", "IsNaN"): quantile_reader,
}


def supported_operators():
    """(domain, op type) of every ONNX operator this frontend reads."""
    return tuple(sorted((domain or "ai.onnx", op) for domain, op in HANDLERS))


def _input(graph):
    """The graph's input tensors (``inputs.py``)."""
    return graph_inputs(graph)


def _versions():
    import onnx

    return (("onnx", onnx.__version__),)


def _head(result, n_features, allows_nan):
    estimator = f"onnx.ModelProto({result.node.op_type})"
    common = dict(estimator=estimator, n_features=n_features, allows_nan=allows_nan,
                  library_versions=_versions(),
                  nan_scores_error=getattr(result, "nan_scores_error", ""))
    if result.labels is None:
        return Head(task="regression", methods=("predict",), squeeze_output=False, **common)
    width = result.proba_width
    if getattr(result, "decided_by_argmax", False):
        return Head(task="classification", methods=("predict", "predict_proba"),
                    classes=(result.labels,), decision_rule="argmax", **common)
    if getattr(result, "head_layout", None):  # LocalOutlierFactor (``outlier_factor.py``)
        methods, blocks = result.head_layout
        return Head(task="classification", methods=methods, classes=(result.labels,),
                    labels_as_column=True, blocks=blocks, **common)
    # KMeans: transform; OneClassSVM: decision_function (``sign.py``)
    second = getattr(result, "second_method", "predict_proba")
    block = {"predict_proba": "proba", "decision_function": "decision"}.get(second, second)
    extra = getattr(result, "extra_blocks", ())  # GaussianMixture: score_samples
    return Head(task="classification", methods=("predict", second) + tuple(e[0] for e in extra),
                classes=(result.labels,),
                labels_as_column=getattr(result, "labels_as_column", False),
                blocks=((block, 0, width), ("label_index", width, width + 1)) + tuple(extra),
                **common)


@register_frontend("onnx", "ModelProto")
def from_onnx(model, options):
    graph = model.graph
    inputs = _input(graph)
    n_features = sum(i.width for i in inputs)
    schema = SchemaBuilder(*schema_columns(inputs))
    builder = GraphBuilder(schema.value_type)
    state = _State(builder)
    state.schema = schema  # string inputs' vocabularies, grown as encoders ask
    state.ml_opset = {o.domain: o.version for o in model.opset_import}.get(ML, 1)
    state.graph, state.consumed = graph, set()  # a reader of several nodes marks them consumed
    state.ort_threads = options.onnx_runtime_threads if options is not None else 1
    if single_float_input(inputs):  # read straight from woodstar's input, as before
        dtype = np.float32 if inputs[0].element == "float" else np.float64
        state.values[inputs[0].name] = ("features", _Features(INPUT, dtype, n_features))
    else:
        bind_inputs(state, inputs, n_features)
    from onnx import numpy_helper

    for initializer in graph.initializer:
        state.constants[initializer.name] = numpy_helper.to_array(initializer)
    for node in graph.node:
        if node.output and set(node.output) <= state.consumed:
            continue
        handler = HANDLERS.get((node.domain if node.domain != "ai.onnx" else "", node.op_type))
        if handler is None:
            raise MissingConverter(unsupported_message(
                "the ONNX graph", f"operator {node_label(node)}", node.op_type,
                ", ".join(f"{d}.{o}" for d, o in supported_operators())))
        handler(node, state)
    outputs = []
    for out in graph.output:
        if out.name not in state.values:
            raise MissingConverter(unsupported_message(
                "the ONNX graph", "output", out.name, "outputs written by supported nodes"))
        outputs.append(state.values[out.name])
    outputs = labels_beside_features(
        state, argmax_beside_probabilities(state, zipmap_beside_argmax(outputs)))

    def model_ir(head, raw, transformed):
        head = head.replace(feature_names=feature_names(inputs), input_blocks=input_blocks(inputs))
        return ModelIR(head=head, graph=builder.build(raw, transformed),
                       schema=schema.build()).validate()

    if any(role in MULTI_OUTPUT_ROLES for role, _ in outputs):
        # a multi-output classifier: a label matrix and a list of probability matrices
        head, transformed = multi_output_head(
            state, outputs, [o.name for o in graph.output],
            estimator=f"onnx.ModelProto({graph.node[-1].op_type})", n_features=n_features,
            allows_nan=not state.refuses_nan, library_versions=_versions())
        return model_ir(head, transformed, transformed)
    if any(role == "tensor" for role, _ in outputs):
        if len(outputs) != 1:
            raise MissingConverter(unsupported_message(
                "the ONNX graph", "outputs", [o.name for o in graph.output],
                "one int64 or string output, or a model's outputs"))
        # an encoder's int64 or string output: the index of each row's value in the
        # values it can hold, read back by ``predict``
        tensor = outputs[0][1]
        index, labels = table_index(state, graph.output[0].name, tensor)
        head = Head(estimator=f"onnx.ModelProto({graph.node[-1].op_type})", task="classification",
                    n_features=n_features, methods=("predict",), classes=(labels,),
                    blocks=(("label_index", 0, 1),), labels_as_column=tensor.shape == (1,),
                    allows_nan=not state.refuses_nan, library_versions=_versions())
        return model_ir(head, index, index)
    if len(outputs) == 1 and outputs[0][0] == "features" and outputs[0][1].value != INPUT:
        # a graph of plain operators (e.g. an MLP's MatMul, Add, Relu): a regressor
        features = outputs[0][1]
        head = Head(estimator=f"onnx.ModelProto({graph.node[-1].op_type})", task="regression",
                    n_features=n_features, methods=("predict",),
                    squeeze_output=getattr(features, "one_dimensional", False),
                    allows_nan=not state.refuses_nan, library_versions=_versions())
        return model_ir(head, features.value, features.value)
    if any(isinstance(p, _Features) and role != "features" for role, p in outputs):
        raise MissingConverter(unsupported_message(
            "the ONNX graph", "a ZipMap of columns no classifier's labels", "follow",
            "ZipMap over a classifier's probabilities"))
    models = {id(getattr(p, "model", p.node)) for role, p in outputs if role != "features"}
    if len(models) != 1 or any(role == "features" for role, _ in outputs):
        raise MissingConverter(unsupported_message(
            "the ONNX graph", "number of models behind its outputs", len(models),
            "exactly one classifier or regressor node (tree ensemble or linear model), "
            "whose outputs are the graph's"))
    roles = {role for role, _ in outputs}
    result = [p for role, p in outputs if role in ("probabilities", "zipmap")] or \
             [p for role, p in outputs]
    result = result[0]
    if result.labels is not None and "labels" not in roles:
        raise MissingConverter(unsupported_message(
            f"onnx.ModelProto({result.node.op_type})", "a classifier graph whose outputs hold "
            "no labels", sorted(roles), "graphs returning the classifier's labels"))
    head = _head(result, n_features, allows_nan=not state.refuses_nan)
    return model_ir(head, result.raw, result.transformed)
