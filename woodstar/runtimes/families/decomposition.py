"""NumPy CPU implementation of ``projection`` for a sparse source matrix
(SparseRandomProjection): scikit-learn multiplies the dense rows by the CSR matrix's
transpose with SciPy, summing each output's nonzeros in their stored order; the same
product here gives its answer to the bit. Dense matrices run the IR reference."""

import numpy as np

from ..numpy_graph import register_cpu_op

__all__ = []


@register_cpu_op("projection")
def _projection(op, context):
    if op.sparse_indptr is None:
        return lambda X: tuple(op.reference([X]))
    from scipy import sparse

    rows = np.repeat(np.arange(op.n_products), np.diff(op.sparse_indptr))
    data = op.matrix[rows, op.sparse_indices]
    matrix = sparse.csr_matrix((data, op.sparse_indices, op.sparse_indptr), shape=op.matrix.shape)

    def run(X):
        X = X.toarray() if hasattr(X, "toarray") else X
        if op.mean is not None:
            X = X - op.mean
        return (op.finish(np.asarray(X @ matrix.T)),)

    return run
