"""scikit-learn's preprocessing transformers: alone (``transform``) and as pipeline steps.

Normalizer, Binarizer, KBinsDiscretizer, PolynomialFeatures, PowerTransformer,
QuantileTransformer, FunctionTransformer (a NumPy ufunc, or None), TargetEncoder.
LabelEncoder and LabelBinarizer (1-D labels) are in ``labels.py``.

Each transformer says which input it accepts as scikit-learn's own ``transform`` does
(``ACCEPTS``: NaN, infinity); inside a pipeline, a step that refuses NaN records that
on the input columns it reads unchanged, so the input edge refuses them too.
"""

import numpy as np

from ...exceptions import InvalidModelError, MissingConverter, unsupported_message
from ...ir import INPUT, ModelIR, OrdinalEncode
from ...ir.families.preprocessing import (UFUNCS, Binarize, KBinsDiscretize, Normalize,
                                          PolynomialExpand, PowerTransform, QuantileTransform,
                                          Ufunc)
from .._sklearn import check_fitted, sklearn_head
from ..registry import register_frontend
from ..sklearn_compose import (TRANSFORMERS, Composer, _category_codes, _densify, _input_names,
                               transformer)
from ..sklearn_pipeline import column_wise_ops

__all__ = ["ACCEPTS", "family_transformer", "bare_transformer", "refuse_missing"]

# class name -> fn(model) -> (accepts NaN, accepts infinity) in transform
ACCEPTS = {}


def refuse_missing(composer, value, owner):
    """``owner`` refuses NaN: the input columns that reach it unchanged refuse NaN at
    the edge (a bare transformer's head says so itself)."""
    if getattr(composer, "bare", False):
        return
    for origin in composer.origins[value]:
        if origin is not None and not origin[1]:
            composer.schema.set(origin[0], allowed_missing=False, check_owner=owner)


def bare_transformer(model, options):
    """A transformer alone: its graph, and the NaN and infinity its transform accepts."""
    check_fitted(model, "n_features_in_")
    name = type(model).__name__
    composer = Composer(_input_names(model))
    composer.bare = True
    out = TRANSFORMERS[name](model, composer, INPUT)
    if out == INPUT:  # nothing computed: still one node, so the graph has a program
        out = _densify(composer, out)
    graph, schema = composer.build(out, out)
    nan, inf = ACCEPTS[name](model)
    head = sklearn_head(model, "transform", ("transform",), allows_nan=nan, allows_inf=inf)
    return ModelIR(head=head, graph=graph, schema=schema).validate()


def family_transformer(*names, accepts, bare=True):
    """Decorator: ``fn(model, composer, value) -> value`` converts these classes as
    pipeline steps and, with ``bare``, alone; ``accepts(model) -> (nan, inf)``."""

    def decorate(fn):
        def step(model, composer, value):
            owner = type(model).__name__
            composer.refuse_sparse(value, owner)
            if not accepts(model)[0]:
                refuse_missing(composer, value, owner)
            return fn(model, composer, value)

        transformer(*names)(step)
        for name in names:
            ACCEPTS[name] = accepts
        if bare:
            register_frontend("sklearn", *names)(bare_transformer)
        return fn

    return decorate


def _finite_only(model):
    return False, False


def _nan_not_inf(model):
    return True, False


def _one_op(composer, value, op, owner, sparse=False):
    (out,) = composer.add(op, [value], owner, sparse=sparse)
    return out


# ------------------------------------------------------------------ element-wise
@family_transformer("Normalizer", accepts=_finite_only)
def _normalizer(model, composer, value):
    if model.norm not in ("l1", "l2", "max"):
        raise MissingConverter(unsupported_message("Normalizer", "norm", model.norm,
                                                   "'l1', 'l2', 'max'"))
    return _one_op(composer, value, Normalize(composer.width(value), model.norm), "Normalizer")


@family_transformer("Binarizer", accepts=_finite_only)
def _binarizer(model, composer, value):
    threshold = model.threshold
    weak = type(threshold) in (int, float, bool)
    op = Binarize(composer.width(value), float(threshold), weak=weak)
    return _one_op(composer, value, op, "Binarizer")


@family_transformer("KBinsDiscretizer", accepts=_finite_only)
def _kbins(model, composer, value):
    check_fitted(model, "bin_edges_")
    if model.encode not in ("ordinal", "onehot", "onehot-dense"):
        raise MissingConverter(unsupported_message("KBinsDiscretizer", "encode", model.encode,
                                                   "'ordinal', 'onehot', 'onehot-dense'"))
    dtype = "" if model.dtype is None else np.dtype(model.dtype).name
    edges = tuple(np.asarray(e, dtype=np.float64)[1:-1] for e in model.bin_edges_)
    sparse = model.encode == "onehot"
    op = KBinsDiscretize(composer.width(value), edges, onehot=model.encode != "ordinal",
                         sparse=sparse, dtype=dtype)
    if op.onehot and op.n_bins != [int(n) for n in model.n_bins_]:
        raise InvalidModelError("KBinsDiscretizer: bin_edges_ and n_bins_ disagree")
    return _one_op(composer, value, op, "KBinsDiscretizer", sparse=sparse)


def polynomial_plan(n_features, max_degree, interaction_only, include_bias):
    """(parents, factors) of every full output column, as PolynomialFeatures.transform
    computes them (its loop over degrees, with the columns it multiplies)."""
    parents, factors = [], []
    if include_bias:
        parents.append(-1)
        factors.append(-1)
    current = len(parents)
    if max_degree == 0:
        return parents, factors
    parents += [-1] * n_features
    factors += list(range(n_features))
    index = list(range(current, current + n_features))
    current += n_features
    index.append(current)
    for _ in range(2, max_degree + 1):
        new_index = []
        end = index[-1]
        for feature_idx in range(n_features):
            start = index[feature_idx]
            new_index.append(current)
            if interaction_only:
                start += index[feature_idx + 1] - index[feature_idx]
            next_col = current + end - start
            if next_col <= current:
                break
            parents += list(range(start, end))
            factors += [feature_idx] * (end - start)
            current = next_col
        new_index.append(current)
        index = new_index
    return parents, factors


@family_transformer("PolynomialFeatures", accepts=_finite_only)
def _polynomial(model, composer, value):
    check_fitted(model, "n_output_features_")
    n = composer.width(value)
    parents, factors = polynomial_plan(n, model._max_degree, model.interaction_only,
                                       model.include_bias)
    n_full, n_out = len(parents), int(model.n_output_features_)
    if model._min_degree > 1:
        keep = ([0] + list(range(n_full - n_out + 1, n_full)) if model.include_bias
                else list(range(n_full - n_out, n_full)))
    else:
        keep = list(range(n_full))
    # the plan's exponents must be the estimator's own powers_, column by column
    powers = np.zeros((n_full, n), dtype=np.int64)
    for c, (p, f) in enumerate(zip(parents, factors)):
        if p >= 0:
            powers[c] = powers[p]
        if f >= 0:
            powers[c, f] += 1
    if not np.array_equal(powers[keep], np.asarray(model.powers_)):
        raise InvalidModelError("PolynomialFeatures: the product plan disagrees with powers_")
    op = PolynomialExpand(n, np.asarray(parents), np.asarray(factors), np.asarray(keep))
    return _one_op(composer, value, op, "PolynomialFeatures")


def _require_positive(composer, value):
    """Box-Cox refuses values <= 0: the input edge checks the columns it reads."""
    for origin in composer.origins[value]:
        if origin is None:
            raise MissingConverter(unsupported_message(
                "PowerTransformer", "method='box-cox' on a computed column", "box-cox",
                "box-cox on input columns, or 'yeo-johnson'"))
        composer.schema.set(origin[0], positive_only=True, check_owner="PowerTransformer")


@family_transformer("PowerTransformer", accepts=_nan_not_inf)
def _power(model, composer, value):
    check_fitted(model, "lambdas_")
    if model.method not in ("yeo-johnson", "box-cox"):
        raise MissingConverter(unsupported_message("PowerTransformer", "method", model.method,
                                                   "'yeo-johnson', 'box-cox'"))
    if model.method == "box-cox":
        _require_positive(composer, value)
    out = _one_op(composer, value, PowerTransform(composer.width(value), model.method,
                                                  np.asarray(model.lambdas_)), "PowerTransformer")
    if model.standardize:
        # its StandardScaler: X -= mean_, X /= scale_ in the working dtype
        out = _one_op(composer, out, column_wise_ops(model._scaler), "PowerTransformer:standardize")
    return out


@family_transformer("QuantileTransformer", accepts=_nan_not_inf)
def _quantile(model, composer, value):
    check_fitted(model, "quantiles_")
    if model.output_distribution not in ("uniform", "normal"):
        raise MissingConverter(unsupported_message(
            "QuantileTransformer", "output_distribution", model.output_distribution,
            "'uniform', 'normal'"))
    op = QuantileTransform(composer.width(value), model.output_distribution,
                           np.asarray(model.quantiles_), np.asarray(model.references_))
    return _one_op(composer, value, op, "QuantileTransformer")


def _function_accepts(model):
    return (False, False) if model.validate else (True, True)


@family_transformer("FunctionTransformer", accepts=_function_accepts)
def _function_transformer(model, composer, value):
    # func=None is the identity (ColumnTransformer's remainder="passthrough" is one);
    # a NumPy ufunc of one argument is converted; any other function is refused by
    # name, never taken as the identity.
    func = model.func
    if model.kw_args:
        raise MissingConverter(unsupported_message(
            "FunctionTransformer", "kw_args", dict(model.kw_args), "None"))
    if func is None:
        return value
    name = getattr(func, "__name__", repr(func))
    if not (isinstance(func, np.ufunc) and func.nin == 1 and func.nout == 1 and name in UFUNCS):
        raise MissingConverter(unsupported_message(
            "FunctionTransformer", "func", name, f"None or a NumPy ufunc of one argument: "
                                                 f"{', '.join('np.' + u for u in UFUNCS)}"))
    return _one_op(composer, value, Ufunc(composer.width(value), name), "FunctionTransformer")


# ------------------------------------------------------------------ TargetEncoder
@family_transformer("TargetEncoder", accepts=_nan_not_inf)
def _target_encoder(model, composer, value):
    check_fitted(model, "encodings_")
    owner = "TargetEncoder"
    n = composer.width(value)
    if model.target_type_ == "multiclass":
        n_classes = len(model.classes_)
        means = np.asarray(model.target_mean_, dtype=np.float64).reshape(-1)
        columns = [j for j in range(n) for _ in range(n_classes)]
        unknown = [float(means[e % n_classes]) for e in range(len(columns))]
    else:
        columns = list(range(n))
        unknown = [float(model.target_mean_)] * n
    if len(model.encodings_) != len(columns):
        raise InvalidModelError(f"{owner}: {len(model.encodings_)} encodings for "
                                f"{len(columns)} output columns")
    codes = [_category_codes(composer, value, j, c, owner)[0]
             for j, c in enumerate(model.categories_)]
    selected = composer.select(value, columns, "TargetEncoder:columns")
    op = OrdinalEncode(n_features=len(columns), categories=[codes[j] for j in columns],
                       outputs=[np.asarray(e, dtype=np.float64) for e in model.encodings_],
                       unknown=tuple(unknown), dtype="float64")
    return _one_op(composer, selected, op, owner)
