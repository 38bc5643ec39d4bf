/* woodstar's compiled tree walk: the CPU route's kernel (see c_walk.py).
 *
 * One generic kernel, compiled once per machine; the model is data, not code. Nodes are
 * laid out so that a tree's left child sits just before its right sibling
 * (sibling_adjacent_layout), so a step is  node = right - go_left.
 *
 * Exactness: comparisons are made in the route's type (float or double) against
 * thresholds already rounded for that type (le_thresholds); a missing value (NaN, or a
 * value inside the model's missing range at nodes that treat it so) goes to the side the
 * node learned; leaves are added tree after tree to an accumulator that the caller
 * zeroes (base scores are folded into the first tree beforehand), which is the order
 * the IR's reference and the source libraries use. The accumulator is a double, or a
 * float for models that sum in float32 (XGBoost: each += rounds to float as its
 * predictor's does); woodstar_xgb_link then applies XGBoost's float32 links.
 *
 * Rows are taken in blocks, and within a block trees are the outer loop, so a tree's
 * nodes stay in cache while every row of the block walks it; each row still receives
 * its trees in order. Models without a missing range get a kernel without its test;
 * models with categorical splits a kernel that tests a node's bitset where it has one.
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
#define CATEGORICAL 4
#define RULE_TRUNCATE 0     /* the IR's categorical rules (tree_ensemble.py) */
#define RULE_NONNEGATIVE 1
#define RULE_EXACT 2

typedef struct {
    int32_t feature;
    int32_t right;     /* the right child; the left child is right - 1 */
    int32_t flags;     /* DEFAULT_LEFT | MISSING_IN_RANGE | CATEGORICAL */
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
 * "left" to itself. Row blocks walk each tree to its depth (testing whether any lane
 * still moves cost more than it saved, on deep boosted trees too); the few-rows path
 * stops as soon as no lane moved. */
#define STEP_NAN_ONLY(T)                                                                   \
    const int go_left = (v <= node->threshold) | ((v != v) & node->flags);
/* A block without NaN (checked once per block) needs no missing test at all. */
#define STEP_NO_MISSING_OK 1
#define STEP_WITH_RANGE_OK 0  /* no clean step: the range test stays */
#define STEP_CATEGORICAL_OK 0
#define STEP_NO_MISSING(T)                                                                 \
    const int go_left = v <= node->threshold;
#define STEP_WITH_RANGE(T)                                                                 \
    const int missing = (v != v) | ((node->flags >> 1) & (v >= lo) & (v <= hi));         \
    const int go_left = missing ? (node->flags & DEFAULT_LEFT) : (v <= node->threshold);
/* Categorical nodes too (their threshold is +inf; the set is bitset words of the node). */
#define STEP_CATEGORICAL(T)                                                                \
    const int missing = (v != v) | ((node->flags >> 1) & (v >= lo) & (v <= hi));         \
    const int go_left = missing ? (node->flags & DEFAULT_LEFT)                             \
        : (node->flags & CATEGORICAL) ? category_left_##T(v, cat_start[here], cat_size[here], \
                                                          cat_bits, cat_rule)              \
        : (v <= node->threshold);

/* The IR's categorical test: c = trunc(v) must be a category of the bitset (0 <= c <
 * 32 * words; "nonnegative" also wants v >= 0, "exact" v == c) and have its bit set. */
#define DEFINE_CATEGORY_LEFT(T, TRUNC)                                                     \
static inline int category_left_##T(T v, int32_t start, int32_t words,                      \
                                    const uint32_t *bits, int64_t rule)                    \
{                                                                                          \
    const T c = TRUNC(v);                                                                  \
    if (!(c >= 0) || !(c < (T)32 * (T)words)) return 0;                                    \
    if (rule == RULE_NONNEGATIVE && !(v >= 0)) return 0;                                   \
    if (rule == RULE_EXACT && v != c) return 0;                                            \
    const int64_t k = (int64_t)c;                                                          \
    return (int)((bits[start + (k >> 5)] >> (k & 31)) & 1u);                               \
}
DEFINE_CATEGORY_LEFT(float, truncf)
DEFINE_CATEGORY_LEFT(double, trunc)

/* Advance lane i, reading row ROW: */
#define ADVANCE(NODE, T, STEP, ROW, i)                                                     \
    {                                                                                      \
        const int32_t here = at[i];                                                        \
        const NODE *node = nodes + here;                                                   \
        const T v = (ROW)[node->feature];                                                  \
        STEP(T)                                                                            \
        const int32_t next = node->right - go_left;                                        \
        moved |= next ^ at[i];                                                             \
        at[i] = next;                                                                      \
    }

#define DEFINE_WALK(NAME, NODE, T, STEP, ACC, CLEAN_STEP)                                 \
static void NAME(const T *x, int64_t n_rows, int64_t n_cols, const NODE *nodes,            \
                 const int32_t *roots, const int32_t *depths, const int32_t *out_start,    \
                 int64_t n_trees, const ACC *leaf_value, int64_t width,                    \
                 double range_lo, double range_hi, ACC *out, int64_t n_out,                \
                 const int32_t *cat_start, const int32_t *cat_size,                        \
                 const uint32_t *cat_bits, int64_t cat_rule)                               \
{                                                                                          \
    const T lo = (T)range_lo, hi = (T)range_hi;                                            \
    int32_t at[ROW_BLOCK > TREE_LANES ? ROW_BLOCK : TREE_LANES];                           \
    (void)lo; (void)hi; (void)cat_start; (void)cat_size; (void)cat_bits; (void)cat_rule;   \
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
                    const ACC *leaf = leaf_value + (int64_t)at[j * n_rows + r] * width;    \
                    ACC *acc = out + r * n_out + out_start[t0 + j];                        \
                    for (int64_t k = 0; k < width; ++k)                                    \
                        acc[k] += leaf[k];                                                 \
                }                                                                          \
        }                                                                                  \
        return;                                                                            \
    }                                                                                      \
    for (int64_t block = 0; block < n_rows; block += ROW_BLOCK) {                          \
        const int64_t rows = n_rows - block < ROW_BLOCK ? n_rows - block : ROW_BLOCK;      \
        const T *xb = x + block * n_cols;                                                  \
        int clean = CLEAN_STEP##_OK;                                                       \
        for (int64_t i = 0; clean && i < rows * n_cols; ++i)                               \
            clean = xb[i] == xb[i];                                                        \
        for (int64_t t = 0; t < n_trees; ++t) {                                            \
            for (int64_t r = 0; r < rows; ++r)                                             \
                at[r] = roots[t];                                                          \
            for (int32_t level = 0; level < depths[t]; ++level) {                          \
                int32_t moved = 0;                                                         \
                if (clean)                                                                 \
                    for (int64_t r = 0; r < rows; ++r)                                     \
                        ADVANCE(NODE, T, CLEAN_STEP, xb + r * n_cols, r)                   \
                else                                                                       \
                    for (int64_t r = 0; r < rows; ++r)                                     \
                        ADVANCE(NODE, T, STEP, xb + r * n_cols, r)                         \
                (void)moved;  /* no early exit here: see above */                                                         \
            }                                                                              \
            ACC *acc = out + block * n_out + out_start[t];                                 \
            for (int64_t r = 0; r < rows; ++r) {                                           \
                const ACC *leaf = leaf_value + (int64_t)at[r] * width;                     \
                for (int64_t k = 0; k < width; ++k)                                        \
                    acc[r * n_out + k] += leaf[k];                                         \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
}

DEFINE_WALK(walk_f32, node32, float, STEP_NAN_ONLY, double, STEP_NO_MISSING)
DEFINE_WALK(walk_f32_range, node32, float, STEP_WITH_RANGE, double, STEP_WITH_RANGE)
DEFINE_WALK(walk_f64, node64, double, STEP_NAN_ONLY, double, STEP_NO_MISSING)
DEFINE_WALK(walk_f64_range, node64, double, STEP_WITH_RANGE, double, STEP_WITH_RANGE)
DEFINE_WALK(walk_f32_sum32, node32, float, STEP_NAN_ONLY, float, STEP_NO_MISSING)
DEFINE_WALK(walk_f32_range_sum32, node32, float, STEP_WITH_RANGE, float, STEP_WITH_RANGE)
DEFINE_WALK(walk_f64_sum32, node64, double, STEP_NAN_ONLY, float, STEP_NO_MISSING)
DEFINE_WALK(walk_f64_range_sum32, node64, double, STEP_WITH_RANGE, float, STEP_WITH_RANGE)
DEFINE_WALK(walk_f32_cat, node32, float, STEP_CATEGORICAL, double, STEP_CATEGORICAL)
DEFINE_WALK(walk_f64_cat, node64, double, STEP_CATEGORICAL, double, STEP_CATEGORICAL)
DEFINE_WALK(walk_f32_cat_sum32, node32, float, STEP_CATEGORICAL, float, STEP_CATEGORICAL)
DEFINE_WALK(walk_f64_cat_sum32, node64, double, STEP_CATEGORICAL, float, STEP_CATEGORICAL)

/* A converted model's arrays and sizes, filled once by c_walk.py (one pointer per call
 * instead of fifteen arguments: ctypes converts each argument on every call). */
typedef struct {
    const void *nodes;
    const int32_t *roots, *depths, *out_start;
    const void *leaf_value;  /* double, or float where sum32 is set */
    int64_t n_trees, width, n_cols, n_out, has_range, sum32;
    double range_lo, range_hi;
    const int32_t *cat_start, *cat_size;  /* per node: its bitset's first word, words */
    const uint32_t *cat_bits;
    int64_t has_categorical, cat_rule;
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
    char *out;
    void (*walk)(const model *, const char *, int64_t, char *);
} range_job;

static void *run_job(void *arg)
{
    const range_job *job = (const range_job *)arg;
    job->walk(job->m, job->x, job->n_rows, job->out);
    return NULL;
}

/* Returns the number of threads that ran (the caller's tests read it). */
static int64_t run_ranges(const model *m, const char *x, int64_t n_rows, char *out,
                          int64_t n_threads, size_t value_size,
                          void (*walk)(const model *, const char *, int64_t, char *))
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
        jobs[i].out = out + (size_t)start * (size_t)m->n_out
                            * (m->sum32 ? sizeof(float) : sizeof(double));
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

#define DEFINE_ENTRY(NAME, NODE, T, PLAIN, RANGED, CAT, PLAIN32, RANGED32, CAT32)          \
static void NAME##_range(const model *m, const char *x, int64_t n_rows, char *out)         \
{                                                                                          \
    if (m->sum32)                                                                          \
        (m->has_categorical ? CAT32 : m->has_range ? RANGED32 : PLAIN32)(                  \
            (const T *)x, n_rows, m->n_cols, (const NODE *)m->nodes, m->roots, m->depths,  \
            m->out_start, m->n_trees, (const float *)m->leaf_value, m->width, m->range_lo, \
            m->range_hi, (float *)out, m->n_out, m->cat_start, m->cat_size, m->cat_bits,   \
            m->cat_rule);                                                                  \
    else                                                                                   \
        (m->has_categorical ? CAT : m->has_range ? RANGED : PLAIN)(                        \
            (const T *)x, n_rows, m->n_cols, (const NODE *)m->nodes, m->roots, m->depths,  \
            m->out_start, m->n_trees, (const double *)m->leaf_value, m->width, m->range_lo, \
            m->range_hi, (double *)out, m->n_out, m->cat_start, m->cat_size, m->cat_bits,  \
            m->cat_rule);                                                                  \
}                                                                                          \
int64_t NAME(const model *m, const T *x, int64_t n_rows, void *out, int64_t n_threads)     \
{                                                                                          \
    return run_ranges(m, (const char *)x, n_rows, (char *)out, n_threads, sizeof(T),       \
                      NAME##_range);                                                       \
}

DEFINE_ENTRY(woodstar_walk_f32, node32, float, walk_f32, walk_f32_range, walk_f32_cat,
             walk_f32_sum32, walk_f32_range_sum32, walk_f32_cat_sum32)
DEFINE_ENTRY(woodstar_walk_f64, node64, double, walk_f64, walk_f64_range, walk_f64_cat,
             walk_f64_sum32, walk_f64_range_sum32, walk_f64_cat_sum32)

/* XGBoost's links, in its float32 arithmetic with the C library's expf (the one its
 * own build calls), over n_rows x n_out margins z into out:
 *   XGB_SIGMOID  1 / (expf(min(-z, 88.7f)) + 1 + 1e-16f)        binary:logistic
 *   XGB_SOFTMAX  per row: expf(z - max) / (float)(double sum)     multi:softprob
 *   XGB_EXP      expf(z)                              count:poisson, reg:gamma, ... */
#define XGB_SIGMOID 0
#define XGB_SOFTMAX 1
#define XGB_EXP 2

void woodstar_xgb_link(int64_t kind, const float *z, int64_t n_rows, int64_t n_out, float *out)
{
    const int64_t n = n_rows * n_out;
    if (kind == XGB_SIGMOID) {
        for (int64_t i = 0; i < n; ++i) {
            const float neg = -z[i];
            const float e = expf(88.7f < neg ? 88.7f : neg);  /* std::min keeps a NaN */
            out[i] = 1.0f / (e + 1.0f + 1e-16f);
        }
    } else if (kind == XGB_EXP) {
        for (int64_t i = 0; i < n; ++i)
            out[i] = expf(z[i]);
    } else if (kind == XGB_SOFTMAX) {
        for (int64_t r = 0; r < n_rows; ++r) {
            const float *zr = z + r * n_out;
            float *o = out + r * n_out;
            float wmax = zr[0];
            for (int64_t k = 1; k < n_out; ++k)
                wmax = fmaxf(zr[k], wmax);
            double wsum = 0.0;
            for (int64_t k = 0; k < n_out; ++k) {
                o[k] = expf(zr[k] - wmax);
                wsum += o[k];
            }
            const float total = (float)wsum;
            for (int64_t k = 0; k < n_out; ++k)
                o[k] /= total;
        }
    }
}

/* The layouts the Python side must match, checked when the library is loaded. */
int64_t woodstar_layout(void)
{
    return (int64_t)sizeof(node32) * 1000000 + (int64_t)sizeof(node64) * 1000 + (int64_t)sizeof(model);
}
