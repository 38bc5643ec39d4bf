/* The walk operators' kernel arguments (walk_ops.c), shared with their Torch operator
 * library (walk_ops_torch.cpp) and mirrored by ``_WalkSpec`` in walk_ops.py. */
#ifndef WOODSTAR_WALK_OPS_H
#define WOODSTAR_WALK_OPS_H
#include <stdint.h>

typedef struct {
    const void *wide;
    int64_t n_cols;
    const int32_t *columns;
    const void *thresholds;
    const double *leaves;
    int64_t width;
    int64_t n_trees;
    int64_t steps;
    const int64_t *roots;      /* node walk only, as the next two */
    const int32_t *rights;
    const int32_t *depths;     /* per tree, the steps its deepest leaf needs; NULL: steps */
    const int32_t *tree_columns;  /* per tree, the one leaf column it adds, or -1 for the */
} walk_spec;                      /* whole vector; NULL: whole vectors */

/* Both kernels: rows of float32 (f64 == 0) or float64 in ``s->wide``, their float64 sums
 * into ``out`` (n_rows x s->width); returns the number of threads that ran. */
typedef int64_t (*walk_entry)(const walk_spec *s, int64_t f64, int64_t n_rows, double *out,
                              int64_t n_threads);

#endif
