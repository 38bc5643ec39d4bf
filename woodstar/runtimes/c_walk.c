/* woodstar's compiled tree walk: the CPU route's kernel (see c_walk.py).
 *
 * One generic kernel, compiled once per machine; the model is data, not code. Nodes are
 * laid out so that a tree's left child sits just before its right sibling
 * (sibling_adjacent_layout), so a step is  node = right - go_left.
 *
 * Exactness: comparisons are made in the route's type (float or double) against
 * thresholds already rounded for that type (le_thresholds); a missing value (NaN, or a
 * value inside the model's missing range at nodes that treat it so) goes to the side the
 * node learned; leaves are added in float64, tree after tree, to an accumulator that
 * the caller zeroes (base scores are folded into the first tree beforehand), which is
 * the order the IR's reference and the source libraries use.
 *
 * Rows are taken in blocks, and within a block trees are the outer loop, so a tree's
 * nodes stay in cache while every row of the block walks it; each row still receives
 * its trees in order. Models without a missing range get a kernel without its test.
 * Large calls split their rows over threads (run_ranges).
 *
 * No -ffast-math: it would break the NaN tests.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>

#define ROW_BLOCK 64
#define FEW_ROWS 8      /* below this, trees are overlapped instead of rows */
#define TREE_LANES 16
#define DEFAULT_LEFT 1
#define MISSING_IN_RANGE 2

typedef struct {
    int32_t feature;
    int32_t right;     /* the right child; the left child is right - 1 */
    int32_t flags;     /* DEFAULT_LEFT | MISSING_IN_RANGE */
    float threshold;   /* go left when x <= threshold */
} node32;

typedef struct {
    double threshold;
    int32_t feature;
    int32_t right;
    int32_t flags;
    int32_t unused;
} node64;

/* Walks advance in lockstep, one level at a time over many independent lanes, so the
 * processor overlaps their memory loads (a walk alone waits on each load). A lane is a
 * row of a block in one tree, or, below FEW_ROWS rows, a (tree, row) pair over a group
 * of trees. A leaf reads feature 0 against +inf and is default-left, so it always goes
 * "left" to itself; the lanes stop at the tree's depth, or as soon as no lane moved. */
#define STEP_NAN_ONLY(T)                                                                   \
    const int go_left = (v <= node->threshold) | ((v != v) & node->flags);
#define STEP_WITH_RANGE(T)                                                                 \
    const int missing = (v != v) | ((node->flags >> 1) & (v >= lo) & (v <= hi));         \
    const int go_left = missing ? (node->flags & DEFAULT_LEFT) : (v <= node->threshold);

/* Advance lane i, reading row ROW: */
#define ADVANCE(NODE, T, STEP, ROW, i)                                                     \
    {                                                                                      \
        const NODE *node = nodes + at[i];                                                  \
        const T v = (ROW)[node->feature];                                                  \
        STEP(T)                                                                            \
        const int32_t next = node->right - go_left;                                        \
        moved |= next ^ at[i];                                                             \
        at[i] = next;                                                                      \
    }

#define DEFINE_WALK(NAME, NODE, T, STEP)                                                  \
static void NAME(const T *x, int64_t n_rows, int64_t n_cols, const NODE *nodes,            \
                 const int32_t *roots, const int32_t *depths, const int32_t *out_start,    \
                 int64_t n_trees, const double *leaf_value, int64_t width,                 \
                 double range_lo, double range_hi, double *out, int64_t n_out)             \
{                                                                                          \
    const T lo = (T)range_lo, hi = (T)range_hi;                                            \
    int32_t at[ROW_BLOCK > TREE_LANES ? ROW_BLOCK : TREE_LANES];                           \
    (void)lo; (void)hi;                                                                    \
    if (n_rows < FEW_ROWS) {                                                               \
        const int64_t group = TREE_LANES / n_rows; /* trees per group; lanes = group x rows */ \
        for (int64_t t0 = 0; t0 < n_trees; t0 += group) {                                  \
            const int64_t g = n_trees - t0 < group ? n_trees - t0 : group;                 \
            int32_t depth = 0;                                                             \
            for (int64_t j = 0; j < g; ++j) {                                              \
                depth = depths[t0 + j] > depth ? depths[t0 + j] : depth;                   \
                for (int64_t r = 0; r < n_rows; ++r)                                       \
                    at[j * n_rows + r] = roots[t0 + j];                                    \
            }                                                                              \
            for (int32_t level = 0; level < depth; ++level) {                              \
                int32_t moved = 0;                                                         \
                for (int64_t j = 0; j < g; ++j)                                            \
                    for (int64_t r = 0; r < n_rows; ++r)                                   \
                        ADVANCE(NODE, T, STEP, x + r * n_cols, j * n_rows + r)                            \
                if (!moved) break;                                                         \
            }                                                                              \
            for (int64_t j = 0; j < g; ++j) /* each row gets the group's trees in order */ \
                for (int64_t r = 0; r < n_rows; ++r) {                                     \
                    const double *leaf = leaf_value + (int64_t)at[j * n_rows + r] * width; \
                    double *acc = out + r * n_out + out_start[t0 + j];                     \
                    for (int64_t k = 0; k < width; ++k)                                    \
                        acc[k] += leaf[k];                                                 \
                }                                                                          \
        }                                                                                  \
        return;                                                                            \
    }                                                                                      \
    for (int64_t block = 0; block < n_rows; block += ROW_BLOCK) {                          \
        const int64_t rows = n_rows - block < ROW_BLOCK ? n_rows - block : ROW_BLOCK;      \
        const T *xb = x + block * n_cols;                                                  \
        for (int64_t t = 0; t < n_trees; ++t) {                                            \
            for (int64_t r = 0; r < rows; ++r)                                             \
                at[r] = roots[t];                                                          \
            for (int32_t level = 0; level < depths[t]; ++level) {                          \
                int32_t moved = 0;                                                         \
                for (int64_t r = 0; r < rows; ++r)                                         \
                    ADVANCE(NODE, T, STEP, xb + r * n_cols, r)                                            \
                if (!moved) break;                                                         \
            }                                                                              \
            double *acc = out + block * n_out + out_start[t];                              \
            for (int64_t r = 0; r < rows; ++r) {                                           \
                const double *leaf = leaf_value + (int64_t)at[r] * width;                  \
                for (int64_t k = 0; k < width; ++k)                                        \
                    acc[r * n_out + k] += leaf[k];                                         \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
}

DEFINE_WALK(walk_f32, node32, float, STEP_NAN_ONLY)
DEFINE_WALK(walk_f32_range, node32, float, STEP_WITH_RANGE)
DEFINE_WALK(walk_f64, node64, double, STEP_NAN_ONLY)
DEFINE_WALK(walk_f64_range, node64, double, STEP_WITH_RANGE)

/* A converted model's arrays and sizes, filled once by c_walk.py (one pointer per call
 * instead of fifteen arguments: ctypes converts each argument on every call). */
typedef struct {
    const void *nodes;
    const int32_t *roots, *depths, *out_start;
    const double *leaf_value;
    int64_t n_trees, width, n_cols, n_out, has_range;
    double range_lo, range_hi;
} model;

/* Row ranges on threads. Each thread walks whole rows into its own rows of ``out``, so
 * every row still adds its trees in order: the answer does not depend on the thread
 * count. Threads are created per call (tens of microseconds; the caller asks for them
 * only above a work threshold), which avoids a pool's lifetime and fork hazards. */
#define MAX_THREADS 64

typedef struct {
    const model *m;
    const char *x;
    int64_t n_rows;
    double *out;
    void (*walk)(const model *, const char *, int64_t, double *);
} range_job;

static void *run_job(void *arg)
{
    const range_job *job = (const range_job *)arg;
    job->walk(job->m, job->x, job->n_rows, job->out);
    return NULL;
}

/* Returns the number of threads that ran (the caller's tests read it). */
static int64_t run_ranges(const model *m, const char *x, int64_t n_rows, double *out,
                          int64_t n_threads, size_t value_size,
                          void (*walk)(const model *, const char *, int64_t, double *))
{
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    if (n_threads > n_rows) n_threads = n_rows;
    if (n_threads <= 1) {
        walk(m, x, n_rows, out);
        return 1;
    }
    range_job jobs[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    const int64_t chunk = (n_rows + n_threads - 1) / n_threads;
    int64_t used = 1;
    for (int64_t i = 0; i < n_threads; ++i) {
        const int64_t start = i * chunk;
        const int64_t stop = start + chunk < n_rows ? start + chunk : n_rows;
        jobs[i].m = m;
        jobs[i].x = x + (size_t)start * (size_t)m->n_cols * value_size;
        jobs[i].n_rows = stop > start ? stop - start : 0;
        jobs[i].out = out + start * m->n_out;
        jobs[i].walk = walk;
    }
    for (int64_t i = 1; i < n_threads; ++i) {
        if (jobs[i].n_rows == 0) continue;
        started[i] = pthread_create(&threads[i], NULL, run_job, &jobs[i]) == 0;
        if (!started[i]) run_job(&jobs[i]);  /* no thread to be had: do it here */
        else ++used;
    }
    run_job(&jobs[0]);
    for (int64_t i = 1; i < n_threads; ++i)
        if (started[i]) pthread_join(threads[i], NULL);
    return used;
}

#define DEFINE_ENTRY(NAME, NODE, T, PLAIN, RANGED)                                        \
static void NAME##_range(const model *m, const char *x, int64_t n_rows, double *out)       \
{                                                                                          \
    (m->has_range ? RANGED : PLAIN)((const T *)x, n_rows, m->n_cols,                       \
                                    (const NODE *)m->nodes, m->roots, m->depths,           \
                                    m->out_start, m->n_trees, m->leaf_value, m->width,     \
                                    m->range_lo, m->range_hi, out, m->n_out);              \
}                                                                                          \
int64_t NAME(const model *m, const T *x, int64_t n_rows, double *out, int64_t n_threads)   \
{                                                                                          \
    return run_ranges(m, (const char *)x, n_rows, out, n_threads, sizeof(T), NAME##_range); \
}

DEFINE_ENTRY(woodstar_walk_f32, node32, float, walk_f32, walk_f32_range)
DEFINE_ENTRY(woodstar_walk_f64, node64, double, walk_f64, walk_f64_range)

/* The layouts the Python side must match, checked when the library is loaded. */
int64_t woodstar_layout(void)
{
    return (int64_t)sizeof(node32) * 1000000 + (int64_t)sizeof(node64) * 1000 + (int64_t)sizeof(model);
}
