/* CPU kernels of the operators woodstar::perfect_tree_walk and woodstar::node_tree_walk
 * (lowering/trees/walk_op.py): the strategies' own arrays in, the trees' float64 leaf
 * sums out, equal to the operators' tensor bodies bit for bit (see walk_ops.py).
 *
 * A block of ROWS rows walks one tree at a time, level by level, the rows in lockstep
 * so that their loads overlap; each row's leaves are added tree after tree from -0.0
 * (x + -0.0 is x, the sign of zero included), which is the running sum of the tensor
 * program. A comparison with NaN is false, as torch.le's is. Large calls split their
 * rows over threads.
 *
 * No -ffast-math: it would break the NaN comparisons.
 */
#include <pthread.h>
#include <stdint.h>

#define ROWS 16
#define MAX_THREADS 256
#define MIN_ROWS_PER_THREAD 64

typedef struct {  /* ``walk_spec`` in walk_ops.py */
    const void *wide;
    int64_t n_cols;
    const int32_t *columns;
    const void *thresholds;
    const double *leaves;
    int64_t width;
    int64_t n_trees;
    int64_t steps;
    const int64_t *roots;      /* node walk only */
    const int32_t *rights;     /* node walk only */
} walk_spec;

typedef void (*walk_rows)(const walk_spec *, int64_t, int64_t, double *);

static void start_sums(double *out, int64_t n, int64_t width)
{
    for (int64_t i = 0; i < n * width; ++i) out[i] = -0.0;
}

static void add_leaves(double *out, int64_t rows, int64_t width, const double *leaves,
                       const int64_t *leaf)
{
    for (int64_t r = 0; r < rows; ++r) {
        const double *value = leaves + leaf[r] * width;
        for (int64_t w = 0; w < width; ++w) out[r * width + w] += value[w];
    }
}

/* One block of ``lanes`` rows in lockstep, ``rows`` of them stored; full blocks pass the
 * constant ROWS (the loops unroll), the last block its own row count, so a short call
 * walks no padding rows. */
#define DEFINE_BLOCKS(NAME, T, WALK_BLOCK)                                                \
static void NAME(const walk_spec *s, int64_t start, int64_t stop, double *out)           \
{                                                                                         \
    int64_t b = start;                                                                    \
    for (; b + ROWS <= stop; b += ROWS) WALK_BLOCK(s, b, ROWS, out);                      \
    if (b < stop) WALK_BLOCK(s, b, stop - b, out);                                        \
}

/* A walk from position t of level 0 steps to 2 i + (x <= t) on each level; level d's
 * nodes begin at n_trees (2^d - 1). */
#define DEFINE_PERFECT(NAME, T)                                                           \
static inline void NAME##_block(const walk_spec *s, int64_t b, int64_t lanes, double *out) \
{                                                                                         \
    const T *thresholds = (const T *)s->thresholds;                                       \
    const T *row[ROWS];                                                                   \
    int64_t index[ROWS];                                                                  \
    for (int64_t r = 0; r < lanes; ++r) row[r] = (const T *)s->wide + (b + r) * s->n_cols; \
    double *sums = out + b * s->width;                                                    \
    start_sums(sums, lanes, s->width);                                                    \
    for (int64_t t = 0; t < s->n_trees; ++t) {                                            \
        for (int64_t r = 0; r < lanes; ++r) index[r] = t;                                 \
        for (int64_t d = 0; d < s->steps; ++d) {                                          \
            const int64_t level = s->n_trees * ((INT64_C(1) << d) - 1);                   \
            for (int64_t r = 0; r < lanes; ++r) {                                         \
                const int64_t node = level + index[r];                                    \
                index[r] = 2 * index[r] + (row[r][s->columns[node]] <= thresholds[node]); \
            }                                                                             \
        }                                                                                 \
        add_leaves(sums, lanes, s->width, s->leaves, index);                              \
    }                                                                                     \
}                                                                                         \
DEFINE_BLOCKS(NAME, T, NAME##_block)

/* Nodes in the sibling-adjacent layout: node = rights[node] - (x <= t), ``steps`` times
 * from the tree's root (a leaf's step keeps it in place). */
#define DEFINE_NODE(NAME, T)                                                              \
static inline void NAME##_block(const walk_spec *s, int64_t b, int64_t lanes, double *out) \
{                                                                                         \
    const T *thresholds = (const T *)s->thresholds;                                       \
    const T *row[ROWS];                                                                   \
    int64_t node[ROWS];                                                                   \
    for (int64_t r = 0; r < lanes; ++r) row[r] = (const T *)s->wide + (b + r) * s->n_cols; \
    double *sums = out + b * s->width;                                                    \
    start_sums(sums, lanes, s->width);                                                    \
    for (int64_t t = 0; t < s->n_trees; ++t) {                                            \
        for (int64_t r = 0; r < lanes; ++r) node[r] = s->roots[t];                        \
        for (int64_t d = 0; d < s->steps; ++d)                                            \
            for (int64_t r = 0; r < lanes; ++r) {                                         \
                const int64_t at = node[r];                                               \
                node[r] = s->rights[at] - (row[r][s->columns[at]] <= thresholds[at]);     \
            }                                                                             \
        add_leaves(sums, lanes, s->width, s->leaves, node);                               \
    }                                                                                     \
}                                                                                         \
DEFINE_BLOCKS(NAME, T, NAME##_block)

DEFINE_PERFECT(perfect_f32, float)
DEFINE_PERFECT(perfect_f64, double)
DEFINE_NODE(node_f32, float)
DEFINE_NODE(node_f64, double)

typedef struct {
    const walk_spec *s;
    int64_t start, stop;
    double *out;
    walk_rows walk;
} job;

static void *run_job(void *arg)
{
    const job *j = (const job *)arg;
    j->walk(j->s, j->start, j->stop, j->out);
    return NULL;
}

/* Rows split into one contiguous range per thread, in whole blocks; returns the
 * number of threads that ran. */
static int64_t run(const walk_spec *s, int64_t n_rows, double *out, int64_t n_threads,
                   walk_rows walk)
{
    const int64_t most = n_rows / MIN_ROWS_PER_THREAD;
    if (n_threads > most) n_threads = most;
    if (n_threads > MAX_THREADS) n_threads = MAX_THREADS;
    if (n_threads <= 1) {
        walk(s, 0, n_rows, out);
        return 1;
    }
    const int64_t blocks = (n_rows + ROWS - 1) / ROWS;
    const int64_t chunk = (blocks + n_threads - 1) / n_threads * ROWS;
    job jobs[MAX_THREADS];
    pthread_t threads[MAX_THREADS];
    int started[MAX_THREADS] = {0};
    int64_t used = 1;
    for (int64_t i = 0; i < n_threads; ++i) {
        const int64_t start = i * chunk < n_rows ? i * chunk : n_rows;
        jobs[i] = (job){s, start, start + chunk < n_rows ? start + chunk : n_rows, out, walk};
    }
    for (int64_t i = 1; i < n_threads; ++i) {
        if (jobs[i].start == jobs[i].stop) continue;
        started[i] = pthread_create(&threads[i], NULL, run_job, &jobs[i]) == 0;
        if (!started[i]) run_job(&jobs[i]);  /* no thread to be had: run it here */
        else ++used;
    }
    run_job(&jobs[0]);
    for (int64_t i = 1; i < n_threads; ++i)
        if (started[i]) pthread_join(threads[i], NULL);
    return used;
}

int64_t woodstar_perfect_walk(const walk_spec *s, int64_t f64, int64_t n_rows, double *out,
                              int64_t n_threads)
{
    return run(s, n_rows, out, n_threads, f64 ? perfect_f64 : perfect_f32);
}

int64_t woodstar_node_walk(const walk_spec *s, int64_t f64, int64_t n_rows, double *out,
                           int64_t n_threads)
{
    return run(s, n_rows, out, n_threads, f64 ? node_f64 : node_f32);
}

int64_t woodstar_walk_spec_size(void) { return (int64_t)sizeof(walk_spec); }
