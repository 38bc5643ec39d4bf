"""A whole graph run in NumPy, node by node: the CPU route of every model.

Each op kind has a NumPy implementation: by default its IR reference; the column-wise
steps, linear models and trees have their own (in place on one copy; the source's own
BLAS call; a tree runtime). Values keep the dtypes NumPy gives them, which are the
source's: a float32 scaler output stays float32, a one-hot block is float64, and
their concatenation float64, exactly as in scikit-learn.
"""

import numpy as np

from ..ir import INPUT, ModelIR
from ..ir.column_ops import NUMPY_OPS
from ..ir.transforms import apply_post_transform

__all__ = ["NumpyGraph", "register_cpu_op", "cpu_op_kinds"]


def _is_chain(graph) -> bool:
    """Each node reads exactly what the one before wrote (the first, the input), and
    the last writes the raw and the transformed results, in that order."""
    previous = (INPUT,)
    for node in graph.nodes:
        if tuple(node.inputs) != tuple(previous):
            return False
        previous = node.outputs
    return bool(graph.nodes) and tuple(previous) == (graph.raw, graph.transformed)


_CPU_OPS = {}


def register_cpu_op(kind):
    """Decorator: ``fn(op, context) -> callable(*inputs) -> tuple of outputs``, the
    NumPy implementation of ``kind`` (kinds without one run their IR reference)."""

    def decorate(fn):
        _CPU_OPS[kind] = fn
        return fn

    return decorate


def cpu_op_kinds():
    return tuple(sorted(_CPU_OPS))


class _Context:
    def __init__(self, tree_runtime, dtype, n_threads, value_dtypes):
        self.tree_runtime = tree_runtime
        self.dtype = dtype
        self.n_threads = n_threads
        self.value_dtypes = value_dtypes


def _dense(value):
    return value.toarray() if hasattr(value, "toarray") else value


def _by_reference(op, context):
    return lambda *inputs: op.reference([_dense(v) for v in inputs])


@register_cpu_op("column_ops")
def _column_ops(op, context):
    ops = []
    for name, operand, cast in zip(op.ops, op.operands, op.cast_operand):
        ops.append((NUMPY_OPS[name], operand, cast))
    # The operands rounded to the dtype the rows come in, once, not on every call.
    expected = np.dtype(context.dtype) if context.dtype in ("float32", "float64") else None
    cast_ops = [(ufunc, operand.astype(expected) if cast else operand)
                for ufunc, operand, cast in ops] if expected is not None else None

    def run(X):
        X = np.array(_dense(X), copy=True)  # the caller's rows are never written
        if X.dtype == expected:
            for ufunc, operand in cast_ops:  # an overflow warns, as in scikit-learn
                ufunc(X, operand, out=X)
            return (X,)
        for ufunc, operand, cast in ops:
            ufunc(X, operand.astype(X.dtype) if cast else operand, out=X)
        return (X,)

    return run


@register_cpu_op("linear")
def _linear(op, context):
    vector = op.coef[0] if op.vector_coef else None
    coef_t = op.coef_as_source.T  # the source's memory order: the same BLAS call
    intercept, post_transform = op.intercept, op.post_transform

    if op.summation == "in_order":  # libsvm's decision values: compiled, else the reference
        from .families.svm import in_order_scores

        def run_in_order(X):
            raw = in_order_scores(X, op.coef, intercept)
            if raw is None:
                raw = op.scores(X)
            return raw, apply_post_transform(post_transform, raw)

        return run_in_order

    def run(X):  # X may be sparse: the product is then scipy's, as in scikit-learn
        if vector is not None:
            raw = (X @ vector + intercept).reshape(-1, 1)
        else:
            raw = X @ coef_t + intercept
        if type(raw) is not np.ndarray:
            raw = np.asarray(raw)
        return raw, apply_post_transform(post_transform, raw)

    return run


@register_cpu_op("trees")
def _trees(op, context):
    dtype = context.dtype if context.dtype in ("float32", "float64") else "float64"
    program = context.tree_runtime.build(op, dtype, context.n_threads)

    def run(X):
        return program(_dense(X))

    run.program = program  # the tree runtime's own object, for inspection
    return run


@register_cpu_op("concat")
def _concat(op, context):
    if not op.sparse:
        return lambda *values: (np.hstack([_dense(v) for v in values]),)

    def run(*values):  # scikit-learn's ColumnTransformer stacks into a CSR matrix
        from scipy import sparse

        return (sparse.csr_matrix(np.hstack([_dense(v) for v in values])),)

    return run


@register_cpu_op("one_hot")
def _one_hot(op, context):
    if not op.sparse:
        return _by_reference(op, context)

    def run(X):  # a sparse encoder output feeds the next estimator as a CSR matrix
        from scipy import sparse

        return (sparse.csr_matrix(op.reference([_dense(X)])[0]),)

    return run


class NumpyGraph:
    """Callable ``X -> (raw, transformed)`` for ``ir`` on rows of ``dtype``."""

    def __init__(self, ir: ModelIR, dtype: str, tree_runtime=None, n_threads: int = 1):
        graph = ir.graph
        dtypes = graph.dtypes(dtype)
        self.steps = []
        for node in graph.nodes:
            node_dtype = np.dtype(dtypes[node.inputs[0]]).name if node.inputs else dtype
            context = _Context(tree_runtime, node_dtype, n_threads, dtypes)
            build = _CPU_OPS.get(node.kind, _by_reference)
            self.steps.append((build(node.op, context), node.inputs, node.outputs))
        self.raw, self.transformed = graph.raw, graph.transformed
        # A graph that is one node reading the input (a bare tree ensemble, a linear
        # model) runs that node's callable directly: no bookkeeping per call; a chain
        # runs its callables in turn.
        only = graph.nodes[0] if len(graph.nodes) == 1 else None
        self.direct = (self.steps[0][0] if only is not None and only.inputs == (INPUT,)
                       and only.outputs == (self.raw, self.transformed) else None)
        self._is_chain = _is_chain(graph)
        if self.direct is None and self._is_chain:
            self.direct = self._chain
        # Outputs of these kinds are never sparse: no conversion at the end of a chain.
        self._dense_result = bool(graph.nodes) and graph.nodes[-1].kind in ("linear", "trees")

    def _chain(self, X: np.ndarray):
        """A chain (each node reads what the one before wrote, the last writes both
        results): its callables in turn, without a table of named values."""
        values = (X,)
        for run, _, _ in self.steps:
            values = run(*values)
        if self._dense_result:
            return values
        raw, transformed = values
        return _dense(raw), _dense(transformed)

    def __call__(self, X: np.ndarray):
        if self._is_chain:
            return self._chain(X)
        values = {INPUT: X}
        for run, inputs, outputs in self.steps:
            values.update(zip(outputs, run(*[values[v] for v in inputs])))
        return _dense(values[self.raw]), _dense(values[self.transformed])
