/* CPU kernels of the operators woodstar::perfect_tree_walk and woodstar::node_tree_walk
 * (lowering/trees/walk_op.py): the strategies' own arrays in, the trees' float64 leaf
 * sums out, equal to the operators' tensor bodies bit for bit (see walk_ops.py).
 *
 * A block of ROWS rows walks one tree at a time, level by level, the rows in lockstep
 * so that their loads overlap; each row's leaves are added tree after tree from -0.0
 * (x + -0.0 is x, the sign of zero included), which is the running sum of the tensor
 * program. A comparison with NaN is false, as torch.le's is. Large calls split their
 * rows over threads. On a CPU with AVX-512 or AVX2 (asked at run time; the build needs
 * only the compiler's intrinsics), float32 perfect trees of depth <= SIMD_MAX_DEPTH (8)
 * walk 16 or 8 rows per vector (perfect_f32_avx512_block and _avx2_block below).
 * Besides the operators' arguments the kernels read tables derived from them
 * (walk_tables.py): each tree's depth, at which the node walk stops, and the one leaf
 * column a tree adds, where adding the others' +0.0 would change no sum.
 *
 * No -ffast-math: it would break the NaN comparisons.
 */
#include <pthread.h>
#include <stdint.h>
#include "cpu_simd.h"

#define ROWS 16
#define MAX_THREADS 256
#define MIN_ROWS_PER_THREAD 64

#include "walk_ops.h"

typedef void (*walk_rows)(const walk_spec *, int64_t, int64_t, double *);

static void start_sums(double *out, int64_t n, int64_t width)
{
    for (int64_t i = 0; i < n * width; ++i) out[i] = -0.0;
}

static inline int64_t leaf_column(const walk_spec *s, int64_t t)
{
    return s->tree_columns ? s->tree_columns[t] : -1;
}

/* Adds each row's leaf vector to its sums, or only the tree's own column (>= 0). */
static void add_leaves(double *out, int64_t rows, int64_t width, const double *leaves,
                       const int64_t *leaf, int64_t column)
{
    if (column >= 0) {
        for (int64_t r = 0; r < rows; ++r) out[r * width + column] += leaves[leaf[r] * width + column];
        return;
    }
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
        add_leaves(sums, lanes, s->width, s->leaves, index, leaf_column(s, t));           \
    }                                                                                     \
}                                                                                         \
DEFINE_BLOCKS(NAME, T, NAME##_block)

/* Nodes in the sibling-adjacent layout: node = rights[node] - (x <= t), ``steps`` times
 * from the tree's root. A leaf's step keeps it in place, so a tree whose deepest leaf is
 * fewer steps down stops there with the same node. */
static inline int64_t tree_steps(const walk_spec *s, int64_t t)
{
    return s->depths && s->depths[t] < s->steps ? s->depths[t] : s->steps;
}

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
        const int64_t steps = tree_steps(s, t);                                           \
        for (int64_t d = 0; d < steps; ++d)                                               \
            for (int64_t r = 0; r < lanes; ++r) {                                         \
                const int64_t at = node[r];                                               \
                node[r] = s->rights[at] - (row[r][s->columns[at]] <= thresholds[at]);     \
            }                                                                             \
        add_leaves(sums, lanes, s->width, s->leaves, node, leaf_column(s, t));            \
    }                                                                                     \
}                                                                                         \
DEFINE_BLOCKS(NAME, T, NAME##_block)

DEFINE_PERFECT(perfect_f32, float)
DEFINE_PERFECT(perfect_f64, double)
DEFINE_NODE(node_f32, float)
DEFINE_NODE(node_f64, double)

/* Perfect trees of depth <= SIMD_MAX_DEPTH with float32 input, on a CPU with AVX-512:
 * a block of SIMD_ROWS rows walks one tree at a time as SIMD_VECTORS vectors of 16 rows,
 * walked together so that their gathers overlap. A level's nodes are picked by the rows'
 * positions from registers: up to 16 nodes from one register each for columns and
 * thresholds, larger levels 32 at a time from pairs of registers (as the compiled walk's
 * complete-tree copies do); only the rows' values are gathered. The comparison is
 * ordered (false with NaN, as in the scalar walk), and each row's leaves are added tree
 * after tree to its sum started at -0.0, so the sums are the scalar blocks' bit for bit.
 * The rows of a range past its last full block take the scalar walk. */
#define SIMD_MAX_DEPTH 8
#define SIMD_VECTORS 4
#define SIMD_ROWS (16 * SIMD_VECTORS)
int64_t woodstar_walk_ops_simd(void) { return simd_form(); }

/* Walk with at most ``level`` (tests check both forms on one CPU); returns the form now
 * taken. */
int64_t woodstar_walk_ops_limit_simd(int64_t level) { return simd_limit(level); }

#ifdef HAVE_AVX512_DISPATCH
__attribute__((target("avx512f")))
static void perfect_f32_avx512_block(const walk_spec *s, int64_t b, double *out)
{
    const float *xb = (const float *)s->wide + b * s->n_cols;
    const float *thresholds = (const float *)s->thresholds;
    const int64_t n_trees = s->n_trees, depth = s->steps, width = s->width;
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    __m512i row_at[SIMD_VECTORS], p[SIMD_VECTORS];
    for (int k = 0; k < SIMD_VECTORS; ++k)
        row_at[k] = _mm512_mullo_epi32(_mm512_add_epi32(lanes, _mm512_set1_epi32(16 * k)),
                                       _mm512_set1_epi32((int)s->n_cols));
    double *sums = out + b * width;
    start_sums(sums, SIMD_ROWS, width);
    for (int64_t t = 0; t < n_trees; ++t) {
        for (int k = 0; k < SIMD_VECTORS; ++k) p[k] = _mm512_setzero_si512();
        for (int64_t d = 0; d < depth; ++d) {  /* p: the row's position within the level */
            const int64_t count = INT64_C(1) << d;
            const int64_t first = n_trees * (count - 1) + t * count;
            __m512i column[SIMD_VECTORS];
            __m512 threshold[SIMD_VECTORS];
            if (count <= 16) {  /* the level in one register */
                const __mmask16 level = (__mmask16)((1u << count) - 1);
                const __m512i columns = _mm512_maskz_loadu_epi32(level, s->columns + first);
                const __m512 level_thresholds = _mm512_maskz_loadu_ps(level, thresholds + first);
                for (int k = 0; k < SIMD_VECTORS; ++k) {
                    column[k] = _mm512_permutexvar_epi32(p[k], columns);
                    threshold[k] = _mm512_permutexvar_ps(p[k], level_thresholds);
                }
            } else {  /* 32 nodes per pair of registers, the pair chosen by p / 32 */
                for (int k = 0; k < SIMD_VECTORS; ++k) {
                    column[k] = _mm512_setzero_si512();
                    threshold[k] = _mm512_setzero_ps();
                }
                for (int64_t c = 0; c < count / 32; ++c) {
                    const int32_t *cc = s->columns + first + 32 * c;
                    const float *tc = thresholds + first + 32 * c;
                    const __m512i c0 = _mm512_loadu_si512((const void *)cc);
                    const __m512i c1 = _mm512_loadu_si512((const void *)(cc + 16));
                    const __m512 t0 = _mm512_loadu_ps(tc), t1 = _mm512_loadu_ps(tc + 16);
                    for (int k = 0; k < SIMD_VECTORS; ++k) {
                        const __mmask16 here = _mm512_cmpeq_epi32_mask(
                            _mm512_srli_epi32(p[k], 5), _mm512_set1_epi32((int)c));
                        column[k] = _mm512_mask_mov_epi32(column[k], here,
                                                          _mm512_permutex2var_epi32(c0, p[k], c1));
                        threshold[k] = _mm512_mask_mov_ps(threshold[k], here,
                                                          _mm512_permutex2var_ps(t0, p[k], t1));
                    }
                }
            }
            for (int k = 0; k < SIMD_VECTORS; ++k) {
                const __m512 v = _mm512_i32gather_ps(_mm512_add_epi32(row_at[k], column[k]), xb, 4);
                const __mmask16 le = _mm512_cmp_ps_mask(v, threshold[k], _CMP_LE_OQ);
                const __m512i twice = _mm512_slli_epi32(p[k], 1);
                p[k] = _mm512_mask_add_epi32(twice, le, twice, _mm512_set1_epi32(1));
            }
        }
        const double *leaves = s->leaves + (t << depth) * width;
        if (width == 1) {
            for (int k = 0; k < SIMD_VECTORS; ++k) {
                double *a = sums + 16 * k;
                _mm512_storeu_pd(a, _mm512_add_pd(_mm512_loadu_pd(a),
                    _mm512_i32gather_pd(_mm512_castsi512_si256(p[k]), leaves, 8)));
                _mm512_storeu_pd(a + 8, _mm512_add_pd(_mm512_loadu_pd(a + 8),
                    _mm512_i32gather_pd(_mm512_extracti64x4_epi64(p[k], 1), leaves, 8)));
            }
        } else {
            int64_t leaf[SIMD_ROWS];
            int32_t at[16];
            for (int k = 0; k < SIMD_VECTORS; ++k) {
                _mm512_storeu_si512((void *)at, p[k]);
                for (int r = 0; r < 16; ++r) leaf[16 * k + r] = at[r];
            }
            add_leaves(sums, SIMD_ROWS, width, leaves, leaf, leaf_column(s, t));
        }
    }
}
/* The same walk with AVX2: 8 rows per vector, 8 vectors per block; levels of up to 8
 * nodes permuted from one register, 16 from two (chosen by bit 3 of the position),
 * deeper levels' nodes gathered from the level's table by the position. */
#define AVX2_VECTORS (SIMD_ROWS / 8)
__attribute__((target("avx2")))
static void perfect_f32_avx2_block(const walk_spec *s, int64_t b, double *out)
{
    const float *xb = (const float *)s->wide + b * s->n_cols;
    const float *thresholds = (const float *)s->thresholds;
    const int64_t n_trees = s->n_trees, depth = s->steps, width = s->width;
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    __m256i row_at[AVX2_VECTORS], p[AVX2_VECTORS];
    for (int k = 0; k < AVX2_VECTORS; ++k)
        row_at[k] = _mm256_mullo_epi32(_mm256_add_epi32(lanes, _mm256_set1_epi32(8 * k)),
                                       _mm256_set1_epi32((int)s->n_cols));
    double *sums = out + b * width;
    start_sums(sums, SIMD_ROWS, width);
    for (int64_t t = 0; t < n_trees; ++t) {
        for (int k = 0; k < AVX2_VECTORS; ++k) p[k] = _mm256_setzero_si256();
        for (int64_t d = 0; d < depth; ++d) {
            const int64_t count = INT64_C(1) << d;
            const int32_t *columns = s->columns + n_trees * (count - 1) + t * count;
            const float *level_thresholds = thresholds + n_trees * (count - 1) + t * count;
            __m256i column[AVX2_VECTORS];
            __m256 threshold[AVX2_VECTORS];
            if (count <= 8) {
                const __m256i in_level = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)count), lanes);
                const __m256i c = _mm256_maskload_epi32((const int *)columns, in_level);
                const __m256 th = _mm256_maskload_ps(level_thresholds, in_level);
                for (int k = 0; k < AVX2_VECTORS; ++k) {
                    column[k] = _mm256_permutevar8x32_epi32(c, p[k]);
                    threshold[k] = _mm256_permutevar8x32_ps(th, p[k]);
                }
            } else if (count == 16) {
                const __m256i c0 = _mm256_loadu_si256((const __m256i *)columns);
                const __m256i c1 = _mm256_loadu_si256((const __m256i *)(columns + 8));
                const __m256 t0 = _mm256_loadu_ps(level_thresholds);
                const __m256 t1 = _mm256_loadu_ps(level_thresholds + 8);
                for (int k = 0; k < AVX2_VECTORS; ++k) {
                    const __m256 high = _mm256_castsi256_ps(_mm256_slli_epi32(p[k], 28));
                    column[k] = _mm256_castps_si256(_mm256_blendv_ps(
                        _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(c0, p[k])),
                        _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(c1, p[k])), high));
                    threshold[k] = _mm256_blendv_ps(_mm256_permutevar8x32_ps(t0, p[k]),
                                                    _mm256_permutevar8x32_ps(t1, p[k]), high);
                }
            } else {
                for (int k = 0; k < AVX2_VECTORS; ++k) {
                    column[k] = _mm256_i32gather_epi32((const int *)columns, p[k], 4);
                    threshold[k] = _mm256_i32gather_ps(level_thresholds, p[k], 4);
                }
            }
            for (int k = 0; k < AVX2_VECTORS; ++k) {
                const __m256 v = _mm256_i32gather_ps(xb, _mm256_add_epi32(row_at[k], column[k]), 4);
                const __m256i le = _mm256_castps_si256(_mm256_cmp_ps(v, threshold[k], _CMP_LE_OQ));
                /* 2p + 1 where x <= t (le is -1 in every bit there), else 2p */
                p[k] = _mm256_sub_epi32(_mm256_slli_epi32(p[k], 1), le);
            }
        }
        const double *leaves = s->leaves + (t << depth) * width;
        if (width == 1) {
            for (int k = 0; k < AVX2_VECTORS; ++k) {
                double *a = sums + 8 * k;
                _mm256_storeu_pd(a, _mm256_add_pd(_mm256_loadu_pd(a),
                    _mm256_i32gather_pd(leaves, _mm256_castsi256_si128(p[k]), 8)));
                _mm256_storeu_pd(a + 4, _mm256_add_pd(_mm256_loadu_pd(a + 4),
                    _mm256_i32gather_pd(leaves, _mm256_extracti128_si256(p[k], 1), 8)));
            }
        } else {
            int64_t leaf[SIMD_ROWS];
            int32_t at[8];
            for (int k = 0; k < AVX2_VECTORS; ++k) {
                _mm256_storeu_si256((__m256i *)at, p[k]);
                for (int r = 0; r < 8; ++r) leaf[8 * k + r] = at[r];
            }
            add_leaves(sums, SIMD_ROWS, width, leaves, leaf, leaf_column(s, t));
        }
    }
}
#endif

/* Full blocks on a SIMD walk, then the scalar walk for the rest of the range. */
#define DEFINE_SIMD_ROWS(NAME, BLOCK)                                                      \
static void NAME(const walk_spec *s, int64_t start, int64_t stop, double *out)           \
{                                                                                         \
    int64_t b = start;                                                                    \
    for (; b + SIMD_ROWS <= stop; b += SIMD_ROWS) BLOCK(s, b, out);                       \
    if (b < stop) perfect_f32(s, b, stop, out);                                           \
}
#ifdef HAVE_AVX512_DISPATCH
DEFINE_SIMD_ROWS(perfect_f32_avx512_rows, perfect_f32_avx512_block)
DEFINE_SIMD_ROWS(perfect_f32_avx2_rows, perfect_f32_avx2_block)
#endif

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
    walk_rows walk = f64 ? perfect_f64 : perfect_f32;
#ifdef HAVE_AVX512_DISPATCH
    /* The SIMD walks' gathers index a block's rows with 32-bit offsets. */
    if (!f64 && s->steps <= SIMD_MAX_DEPTH && s->n_cols <= INT32_MAX / SIMD_ROWS) {
        const int64_t simd = simd_form();
        walk = simd == SIMD_AVX512 ? perfect_f32_avx512_rows
               : simd == SIMD_AVX2 ? perfect_f32_avx2_rows : walk;
    }
#endif
    return run(s, n_rows, out, n_threads, walk);
}

int64_t woodstar_node_walk(const walk_spec *s, int64_t f64, int64_t n_rows, double *out,
                           int64_t n_threads)
{
    return run(s, n_rows, out, n_threads, f64 ? node_f64 : node_f32);
}

int64_t woodstar_walk_spec_size(void) { return (int64_t)sizeof(walk_spec); }
