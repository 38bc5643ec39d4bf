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
 * Large calls split their rows over threads (run_ranges). On a CPU with AVX2 or AVX-512
 * (asked at run time; the build needs only the compiler's intrinsics), row blocks without
 * NaN walk the float route's trees of depth <= 8 eight or sixteen rows per vector over
 * complete-tree copies (complete_trees below) and deeper trees step 16 rows at a time over
 * three node arrays (node_arrays); blocks with NaN are widened for both
 * (widened_columns); the node walk over the records takes every other case.
 *
 * No -ffast-math: it would break the NaN tests.
 */
#include <math.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include "cpu_simd.h"

#define ROW_BLOCK 64
/* Trees deeper than AVX2_LEVELS_IN_REGISTERS take the SIMD walk only in blocks of this
 * many rows or more: below it, loading a tree's level tables costs more than the
 * vectors save, and the node walk was faster on depth-8 trees (benchmarks/notes.md,
 * "Short blocks keep the node walk"). Shallower trees' levels sit in registers and gain
 * at any size. */
#define SIMD_MIN_ROWS 24
#define FEW_ROWS 8      /* below this, trees are overlapped instead of rows */
#define TREE_LANES 16
/* Below FEW_ROWS rows, models with a tree deeper than REFILL_MIN_DEPTH refill a lane as
 * soon as its tree is done instead of stepping a group of trees in lockstep to the
 * group's deepest: faster on LightGBM's leaf-wise trees and a depth-20 forest, slower
 * on a full depth-12 forest, whose trees all end on the last level (benchmarks/notes.md,
 * "Few rows: lanes refilled"; depths 13-19 were not measured). REFILL_TREES trees'
 * leaves are kept at a time. */
#define REFILL_MIN_DEPTH 12
#define REFILL_TREES 256
/* In a block without NaN, trees of one output per leaf and depth <= GROUP_MAX_DEPTH
 * walk groups of 8 rows with the lanes in registers and the level loop unrolled over
 * them (the pragma's count); the block's other rows, other blocks and other trees keep
 * the lanes in at[]. It cut 100,000-row calls of XGBoost 300 x 8 to about 0.88 of the
 * time (benchmarks/notes.md, "Tree kernel vs oneDAL"); on LightGBM's deep trees (depth
 * 9-39) it cost 12-20%, and with a loop over a leaf's width (forests' vector leaves)
 * it gained nothing: those keep at[]. Depths 9-15 were not measured. With AVX2 or AVX-512
 * the complete-tree walk takes a clean block's rows 8 or 16 at a time first; the groups and at[]
 * take what is left (and every row on other CPUs). */
#define GROUP_ROWS 8
#define GROUP_MAX_DEPTH 8
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
 * stops a group as soon as no lane moved, or, for deep trees, gives a lane the next
 * (tree, row) as soon as its own reaches a leaf (REFILL_MIN_DEPTH). */
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

/* Complete-tree copies (c_walk.py, _complete_trees) of the float route's trees of depth
 * <= GROUP_MAX_DEPTH: per tree, its internal nodes level by level (node i's children at
 * 2i + 1 and 2i + 2, a leaf above the last level passing every row left against +inf)
 * and its 2^depth leaves. A row's position p within a level names its node, so a
 * level's features and thresholds are small tables that SIMD permutes index by p; only the
 * row's value is gathered from memory. (Gathering each lane's node fields instead, four
 * gathers a level, was slower than the scalar lanes: benchmarks/notes.md, "Tree kernel
 * vs oneDAL".) Each row still adds its trees in order, so the sums are unchanged. */
typedef struct {
    const int32_t *start;   /* per tree: its first slot, or -1 (no copy); NULL: no copies */
    const int32_t *feature; /* per slot */
    const float *threshold; /* per slot */
    const void *leaf;       /* per slot: its leaf's width values, double or float as the sums */
} complete_trees;

#define SIMD_LANES 16
#define SIMD_VECTORS (ROW_BLOCK / SIMD_LANES)  /* a block's vectors, walked together so
                                                  their gathers overlap */
#ifdef HAVE_AVX512_DISPATCH
/* acc[0 .. 16) += the 16 rows' leaves (one output per row): one add per row, as the
 * scalar loop's. */
__attribute__((target("avx512f")))
static inline void add_leaves16(void *acc, const void *leaf, int64_t sum32, __m512i p)
{
    if (sum32) {
        float *a = (float *)acc;
        _mm512_storeu_ps(a, _mm512_add_ps(_mm512_loadu_ps(a),
                                          _mm512_i32gather_ps(p, (const float *)leaf, 4)));
    } else {
        double *a = (double *)acc;
        _mm512_storeu_pd(a, _mm512_add_pd(_mm512_loadu_pd(a),
            _mm512_i32gather_pd(_mm512_castsi512_si256(p), (const double *)leaf, 8)));
        _mm512_storeu_pd(a + 8, _mm512_add_pd(_mm512_loadu_pd(a + 8),
            _mm512_i32gather_pd(_mm512_extracti64x4_epi64(p, 1), (const double *)leaf, 8)));
    }
}

/* Walks rows / 16 vectors of 16 rows of a clean block down one complete tree and
 * returns how many rows it walked. With acc (one output per row, so the rows' sums are
 * contiguous), it adds their leaves there; else it leaves each row's leaf position in
 * leaf_at for the caller's loop. */
__attribute__((target("avx512f"), always_inline))
static inline int64_t complete_walk_avx512_vectors(const float *xb, int64_t vectors, int64_t n_cols,
                                    const int32_t *feature, const float *threshold,
                                    int32_t depth, int32_t *leaf_at, void *acc,
                                    const void *leaf, int64_t sum32)
{
    const __m512i lanes = _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i one = _mm512_set1_epi32(1);
    __m512i p[SIMD_VECTORS], row_at[SIMD_VECTORS], f[SIMD_VECTORS];
    __m512 t[SIMD_VECTORS];
    for (int64_t k = 0; k < vectors; ++k) {
        p[k] = _mm512_setzero_si512();
        row_at[k] = _mm512_mullo_epi32(_mm512_add_epi32(lanes, _mm512_set1_epi32((int)(k * SIMD_LANES))),
                                       _mm512_set1_epi32((int)n_cols));
    }
    for (int32_t level = 0; level < depth; ++level) {
        const int64_t first = ((int64_t)1 << level) - 1, count = (int64_t)1 << level;
        if (count <= SIMD_LANES) {  /* the level in one register */
            const __m512i tf = _mm512_loadu_si512((const void *)(feature + first));
            const __m512 tt = _mm512_loadu_ps(threshold + first);
            for (int64_t k = 0; k < vectors; ++k) {
                f[k] = _mm512_permutexvar_epi32(p[k], tf);
                t[k] = _mm512_permutexvar_ps(p[k], tt);
            }
        } else {  /* 32 nodes per pair of registers, the pair chosen by p / 32 */
            for (int64_t k = 0; k < vectors; ++k) {
                f[k] = _mm512_setzero_si512();
                t[k] = _mm512_setzero_ps();
            }
            for (int64_t c = 0; c < count / 32; ++c) {
                const int32_t *fc = feature + first + 32 * c;
                const float *tc = threshold + first + 32 * c;
                const __m512i f0 = _mm512_loadu_si512((const void *)fc);
                const __m512i f1 = _mm512_loadu_si512((const void *)(fc + 16));
                const __m512 t0 = _mm512_loadu_ps(tc), t1 = _mm512_loadu_ps(tc + 16);
                for (int64_t k = 0; k < vectors; ++k) {
                    const __mmask16 here = _mm512_cmpeq_epi32_mask(_mm512_srli_epi32(p[k], 5),
                                                                   _mm512_set1_epi32((int)c));
                    f[k] = _mm512_mask_mov_epi32(f[k], here, _mm512_permutex2var_epi32(f0, p[k], f1));
                    t[k] = _mm512_mask_mov_ps(t[k], here, _mm512_permutex2var_ps(t0, p[k], t1));
                }
            }
        }
        for (int64_t k = 0; k < vectors; ++k) {
            const __m512 v = _mm512_i32gather_ps(_mm512_add_epi32(row_at[k], f[k]), xb, 4);
            const __mmask16 left = _mm512_cmp_ps_mask(v, t[k], _CMP_LE_OQ);
            const __m512i twice = _mm512_slli_epi32(p[k], 1);
            p[k] = _mm512_mask_add_epi32(twice, (__mmask16)~left, twice, one);
        }
    }
    const size_t acc_size = sum32 ? sizeof(float) : sizeof(double);
    for (int64_t k = 0; k < vectors; ++k) {
        if (acc)
            add_leaves16((char *)acc + (size_t)(k * SIMD_LANES) * acc_size, leaf, sum32, p[k]);
        else
            _mm512_storeu_si512((void *)(leaf_at + k * SIMD_LANES), p[k]);
    }
    return vectors * SIMD_LANES;
}

/* A full block passes its vector count as a constant: the loops over its vectors then
 * unroll and p, row_at, f and t stay in registers instead of going through memory on
 * every level (benchmarks/notes.md, "Constant vector counts"). */
__attribute__((target("avx512f")))
static int64_t complete_walk_avx512(const float *xb, int64_t rows, int64_t n_cols,
                                    const int32_t *feature, const float *threshold,
                                    int32_t depth, int32_t *leaf_at, void *acc,
                                    const void *leaf, int64_t sum32)
{
    if (rows / SIMD_LANES == SIMD_VECTORS)
        return complete_walk_avx512_vectors(xb, SIMD_VECTORS, n_cols, feature, threshold, depth,
                                            leaf_at, acc, leaf, sum32);
    return complete_walk_avx512_vectors(xb, rows / SIMD_LANES, n_cols, feature, threshold, depth,
                                        leaf_at, acc, leaf, sum32);
}

/* The same walk with AVX2, for CPUs without AVX-512: 8 rows per vector, 8 vectors per
 * block; levels of up to 16 nodes permuted from registers, deeper levels' nodes
 * gathered from the level's table by p. One-output trees add their leaves in registers. */
enum { AVX2_LANES = 8, AVX2_VECTORS = ROW_BLOCK / 8 };
__attribute__((target("avx2"), always_inline))
static inline int64_t complete_walk_avx2_vectors(const float *xb, int64_t vectors, int64_t n_cols,
                                  const int32_t *feature, const float *threshold,
                                  int32_t depth, int32_t *leaf_at, void *acc,
                                  const void *leaf, int64_t sum32)
{
    enum { LANES = AVX2_LANES, VECTORS = AVX2_VECTORS };
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    const __m256i one = _mm256_set1_epi32(1);
    __m256i p[VECTORS], row_at[VECTORS], f[VECTORS];
    __m256 t[VECTORS];
    for (int64_t k = 0; k < vectors; ++k) {
        p[k] = _mm256_setzero_si256();
        row_at[k] = _mm256_mullo_epi32(_mm256_add_epi32(lanes, _mm256_set1_epi32((int)(k * LANES))),
                                       _mm256_set1_epi32((int)n_cols));
    }
    for (int32_t level = 0; level < depth; ++level) {
        const int64_t first = ((int64_t)1 << level) - 1, count = (int64_t)1 << level;
        if (count <= 8) {
            const __m256i tf = _mm256_loadu_si256((const __m256i *)(feature + first));
            const __m256 tt = _mm256_loadu_ps(threshold + first);
            for (int64_t k = 0; k < vectors; ++k) {
                f[k] = _mm256_permutevar8x32_epi32(tf, p[k]);
                t[k] = _mm256_permutevar8x32_ps(tt, p[k]);
            }
        } else if (count == 16) {  /* two registers, chosen by bit 3 of p */
            const __m256i f0 = _mm256_loadu_si256((const __m256i *)(feature + first));
            const __m256i f1 = _mm256_loadu_si256((const __m256i *)(feature + first + 8));
            const __m256 t0 = _mm256_loadu_ps(threshold + first);
            const __m256 t1 = _mm256_loadu_ps(threshold + first + 8);
            for (int64_t k = 0; k < vectors; ++k) {
                const __m256 high = _mm256_castsi256_ps(_mm256_slli_epi32(p[k], 28));
                f[k] = _mm256_castps_si256(_mm256_blendv_ps(
                    _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(f0, p[k])),
                    _mm256_castsi256_ps(_mm256_permutevar8x32_epi32(f1, p[k])), high));
                t[k] = _mm256_blendv_ps(_mm256_permutevar8x32_ps(t0, p[k]),
                                        _mm256_permutevar8x32_ps(t1, p[k]), high);
            }
        } else {
            for (int64_t k = 0; k < vectors; ++k) {
                f[k] = _mm256_i32gather_epi32((const int *)(feature + first), p[k], 4);
                t[k] = _mm256_i32gather_ps(threshold + first, p[k], 4);
            }
        }
        for (int64_t k = 0; k < vectors; ++k) {
            const __m256 v = _mm256_i32gather_ps(xb, _mm256_add_epi32(row_at[k], f[k]), 4);
            const __m256i left = _mm256_castps_si256(_mm256_cmp_ps(v, t[k], _CMP_LE_OQ));
            /* 2p + 1 for right, 2p for left (left is -1 in every bit) */
            p[k] = _mm256_add_epi32(_mm256_add_epi32(_mm256_slli_epi32(p[k], 1), one), left);
        }
    }
    for (int64_t k = 0; k < vectors; ++k) {
        if (acc && sum32) {
            float *a = (float *)acc + k * LANES;
            _mm256_storeu_ps(a, _mm256_add_ps(_mm256_loadu_ps(a),
                                              _mm256_i32gather_ps((const float *)leaf, p[k], 4)));
        } else if (acc) {
            double *a = (double *)acc + k * LANES;
            _mm256_storeu_pd(a, _mm256_add_pd(_mm256_loadu_pd(a), _mm256_i32gather_pd(
                (const double *)leaf, _mm256_castsi256_si128(p[k]), 8)));
            _mm256_storeu_pd(a + 4, _mm256_add_pd(_mm256_loadu_pd(a + 4), _mm256_i32gather_pd(
                (const double *)leaf, _mm256_extracti128_si256(p[k], 1), 8)));
        } else {
            _mm256_storeu_si256((__m256i *)(leaf_at + k * LANES), p[k]);
        }
    }
    return vectors * LANES;
}

/* As complete_walk_avx512: a full block's vector count is a constant. */
__attribute__((target("avx2")))
static int64_t complete_walk_avx2(const float *xb, int64_t rows, int64_t n_cols,
                                  const int32_t *feature, const float *threshold,
                                  int32_t depth, int32_t *leaf_at, void *acc,
                                  const void *leaf, int64_t sum32)
{
    if (rows / AVX2_LANES == AVX2_VECTORS)
        return complete_walk_avx2_vectors(xb, AVX2_VECTORS, n_cols, feature, threshold, depth,
                                          leaf_at, acc, leaf, sum32);
    return complete_walk_avx2_vectors(xb, rows / AVX2_LANES, n_cols, feature, threshold, depth,
                                      leaf_at, acc, leaf, sum32);
}
#endif

/* Oblivious trees (CatBoost's symmetric trees: every node of a level tests the same
 * feature against the same threshold and sends NaN the same way) need no node lookups:
 * a row's leaf in the tree's complete copy is the bits of its level comparisons, the
 * first level's the most significant. A block's rows are first copied feature-major
 * (only the features such trees read), so each level is a contiguous load of 8 or 16
 * rows and one comparison, with no gather of the row's value. NaN takes the level's
 * learned side through the comparison's predicate (ordered "greater" sends it left,
 * unordered "not less-or-equal" right), so blocks with NaN take this walk too. The
 * leaves and the order of the sums are those of the complete-tree walk. */
#define OBLIVIOUS_WALK 1    /* 0: oblivious trees take the complete-tree walk (A/B) */
#define OBLIVIOUS_LEVELS 8  /* levels kept per tree (GROUP_MAX_DEPTH) */
typedef struct {
    const int32_t *nan_right; /* per tree: -1, not oblivious; else bit l: level l's NaN goes right */
    const int32_t *column;    /* per tree, OBLIVIOUS_LEVELS each: the level's row in the copy */
    const float *threshold;   /* per tree, OBLIVIOUS_LEVELS each: go right when x > it */
    const int32_t *features;  /* the copy's rows: features read by oblivious trees */
    int64_t n_features;       /* 0: no oblivious trees */
    int64_t all;              /* every tree is oblivious (few rows: oblivious_few_rows) */
} oblivious_trees;

/* xt (n_features x ROW_BLOCK) = the block's values of ob->features. */
static inline void transpose_block(const float *xb, int64_t rows, int64_t n_cols,
                                   const oblivious_trees *ob, float *xt)
{
    for (int64_t c = 0; c < ob->n_features; ++c) {
        const float *src = xb + ob->features[c];
        float *dst = xt + c * ROW_BLOCK;
        for (int64_t r = 0; r < rows; ++r)
            dst[r] = src[r * n_cols];
    }
}

/* One block's rows and what the oblivious walk adds them into. */
typedef struct {
    const float *xt;             /* the block's copy (transpose_block) */
    int64_t rows;
    const oblivious_trees *ob;
    const complete_trees *ct;    /* the trees' leaves: their complete copies' */
    const int32_t *depths, *out_start;
    int64_t width, n_out, sum32;
    void *out;                   /* the block's first row of sums */
    int32_t *leaf_at;            /* ROW_BLOCK positions, for vector leaves */
} oblivious_block;

/* Leaf positions p are kept in vectors of LANES rows; vector leaves (or several
 * outputs) are added from them here, row by row, a tree at a time. */
static inline void add_vector_leaves(const oblivious_block *b, int64_t tree)
{
    const int64_t width = b->width, n_out = b->n_out;
    const int64_t first = b->ct->start[tree] * width;
    if (b->sum32) {
        const float *leaf = (const float *)b->ct->leaf + first;
        float *acc = (float *)b->out + b->out_start[tree];
        for (int64_t q = 0; q < b->rows; ++q)
            for (int64_t k = 0; k < width; ++k)
                acc[q * n_out + k] += leaf[(int64_t)b->leaf_at[q] * width + k];
    } else {
        const double *leaf = (const double *)b->ct->leaf + first;
        double *acc = (double *)b->out + b->out_start[tree];
        for (int64_t q = 0; q < b->rows; ++q)
            for (int64_t k = 0; k < width; ++k)
                acc[q * n_out + k] += leaf[(int64_t)b->leaf_at[q] * width + k];
    }
}

#ifdef HAVE_AVX512_DISPATCH
/* Trees t0 .. t1 - 1, all oblivious, for every row of the block (the last vector
 * masked). One-output sums stay in registers from the first tree to the last, each
 * row still adding its trees in order. */
__attribute__((target("avx512f")))
static void oblivious_run_avx512(const oblivious_block *b, int64_t t0, int64_t t1)
{
    const int64_t vectors = (b->rows + SIMD_LANES - 1) / SIMD_LANES;
    const int one_sum = b->width == 1 && b->n_out == 1;
    const __m512i one = _mm512_set1_epi32(1);
    __mmask16 live[SIMD_VECTORS];
    __m512i p[SIMD_VECTORS];
    __m512d sum[SIMD_VECTORS][2];
    __m512 sum32[SIMD_VECTORS];
    for (int64_t k = 0; k < vectors; ++k) {
        const int64_t left = b->rows - k * SIMD_LANES;
        live[k] = left >= SIMD_LANES ? (__mmask16)0xFFFF : (__mmask16)((1u << left) - 1);
        if (one_sum && b->sum32) {
            sum32[k] = _mm512_maskz_loadu_ps(live[k], (const float *)b->out + k * SIMD_LANES);
        } else if (one_sum) {
            const double *a = (const double *)b->out + k * SIMD_LANES;
            sum[k][0] = _mm512_maskz_loadu_pd((__mmask8)live[k], a);
            sum[k][1] = _mm512_maskz_loadu_pd((__mmask8)(live[k] >> 8), a + 8);
        }
    }
    for (int64_t t = t0; t < t1; ++t) {
        const int32_t *column = b->ob->column + t * OBLIVIOUS_LEVELS;
        const float *threshold = b->ob->threshold + t * OBLIVIOUS_LEVELS;
        const int32_t nan_right = b->ob->nan_right[t], depth = b->depths[t];
        for (int64_t k = 0; k < vectors; ++k)
            p[k] = _mm512_setzero_si512();
        for (int32_t level = 0; level < depth; ++level) {
            const float *v = b->xt + (int64_t)column[level] * ROW_BLOCK;
            const __m512 split = _mm512_set1_ps(threshold[level]);
            const int right_on_nan = (nan_right >> level) & 1;
            for (int64_t k = 0; k < vectors; ++k) {
                const __m512 x = _mm512_maskz_loadu_ps(live[k], v + k * SIMD_LANES);
                const __mmask16 right = right_on_nan ? _mm512_cmp_ps_mask(x, split, _CMP_NLE_UQ)
                                                     : _mm512_cmp_ps_mask(x, split, _CMP_GT_OQ);
                const __m512i twice = _mm512_slli_epi32(p[k], 1);
                p[k] = _mm512_mask_add_epi32(twice, right, twice, one);
            }
        }
        if (!one_sum) {
            for (int64_t k = 0; k < vectors; ++k)
                _mm512_mask_storeu_epi32((void *)(b->leaf_at + k * SIMD_LANES), live[k], p[k]);
            add_vector_leaves(b, t);
        } else if (b->sum32) {
            const float *leaf = (const float *)b->ct->leaf + b->ct->start[t];
            for (int64_t k = 0; k < vectors; ++k)
                sum32[k] = _mm512_add_ps(sum32[k], _mm512_mask_i32gather_ps(
                    _mm512_setzero_ps(), live[k], p[k], leaf, 4));
        } else {
            const double *leaf = (const double *)b->ct->leaf + b->ct->start[t];
            for (int64_t k = 0; k < vectors; ++k) {
                sum[k][0] = _mm512_add_pd(sum[k][0], _mm512_mask_i32gather_pd(
                    _mm512_setzero_pd(), (__mmask8)live[k], _mm512_castsi512_si256(p[k]), leaf, 8));
                sum[k][1] = _mm512_add_pd(sum[k][1], _mm512_mask_i32gather_pd(
                    _mm512_setzero_pd(), (__mmask8)(live[k] >> 8),
                    _mm512_extracti64x4_epi64(p[k], 1), leaf, 8));
            }
        }
    }
    for (int64_t k = 0; one_sum && k < vectors; ++k) {
        if (b->sum32) {
            _mm512_mask_storeu_ps((float *)b->out + k * SIMD_LANES, live[k], sum32[k]);
        } else {
            double *a = (double *)b->out + k * SIMD_LANES;
            _mm512_mask_storeu_pd(a, (__mmask8)live[k], sum[k][0]);
            _mm512_mask_storeu_pd(a + 8, (__mmask8)(live[k] >> 8), sum[k][1]);
        }
    }
}

/* The same with AVX2, 8 rows per vector, in groups of four vectors (their sums fill
 * eight registers). */
__attribute__((target("avx2")))
static void oblivious_run_avx2(const oblivious_block *b, int64_t t0, int64_t t1)
{
    enum { LANES = 8, GROUP = 4 };
    const int one_sum = b->width == 1 && b->n_out == 1;
    if (!one_sum) {  /* positions for every row, then the leaves, a tree at a time */
        for (int64_t t = t0; t < t1; ++t) {
            const int32_t *column = b->ob->column + t * OBLIVIOUS_LEVELS;
            const float *threshold = b->ob->threshold + t * OBLIVIOUS_LEVELS;
            const int32_t nan_right = b->ob->nan_right[t], depth = b->depths[t];
            for (int64_t q = 0; q < b->rows; ++q) {
                int32_t at = 0;
                for (int32_t level = 0; level < depth; ++level) {
                    const float x = b->xt[(int64_t)column[level] * ROW_BLOCK + q];
                    const int right = (x > threshold[level]) | ((x != x) & (nan_right >> level));
                    at = 2 * at + right;
                }
                b->leaf_at[q] = at;
            }
            add_vector_leaves(b, t);
        }
        return;
    }
    const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    for (int64_t g0 = 0; g0 < b->rows; g0 += LANES * GROUP) {
        const int64_t vectors = (b->rows - g0 + LANES - 1) / LANES < GROUP
                                ? (b->rows - g0 + LANES - 1) / LANES : GROUP;
        __m256i live[GROUP], p[GROUP];
        __m256d sum[GROUP][2];
        __m256 sum32[GROUP];
        for (int64_t k = 0; k < vectors; ++k) {
            const int64_t row = g0 + k * LANES;
            live[k] = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)(b->rows - row)), lanes);
            if (b->sum32) {
                sum32[k] = _mm256_maskload_ps((const float *)b->out + row, live[k]);
            } else {
                const double *a = (const double *)b->out + row;
                sum[k][0] = _mm256_maskload_pd(a, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(live[k])));
                sum[k][1] = _mm256_maskload_pd(a + 4, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(live[k], 1)));
            }
        }
        for (int64_t t = t0; t < t1; ++t) {
            const int32_t *column = b->ob->column + t * OBLIVIOUS_LEVELS;
            const float *threshold = b->ob->threshold + t * OBLIVIOUS_LEVELS;
            const int32_t nan_right = b->ob->nan_right[t], depth = b->depths[t];
            for (int64_t k = 0; k < vectors; ++k)
                p[k] = _mm256_setzero_si256();
            for (int32_t level = 0; level < depth; ++level) {
                const float *v = b->xt + (int64_t)column[level] * ROW_BLOCK + g0;
                const __m256 split = _mm256_set1_ps(threshold[level]);
                const int right_on_nan = (nan_right >> level) & 1;
                for (int64_t k = 0; k < vectors; ++k) {
                    const __m256 x = _mm256_maskload_ps(v + k * LANES, live[k]);
                    /* all ones where the row goes right: 2p - (-1) = 2p + 1 */
                    const __m256i right = _mm256_castps_si256(right_on_nan
                        ? _mm256_cmp_ps(x, split, _CMP_NLE_UQ) : _mm256_cmp_ps(x, split, _CMP_GT_OQ));
                    p[k] = _mm256_sub_epi32(_mm256_slli_epi32(p[k], 1), right);
                }
            }
            if (b->sum32) {
                const float *leaf = (const float *)b->ct->leaf + b->ct->start[t];
                for (int64_t k = 0; k < vectors; ++k)
                    sum32[k] = _mm256_add_ps(sum32[k], _mm256_mask_i32gather_ps(
                        _mm256_setzero_ps(), leaf, p[k], _mm256_castsi256_ps(live[k]), 4));
            } else {
                const double *leaf = (const double *)b->ct->leaf + b->ct->start[t];
                for (int64_t k = 0; k < vectors; ++k) {
                    const __m256i lo = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(live[k]));
                    const __m256i hi = _mm256_cvtepi32_epi64(_mm256_extracti128_si256(live[k], 1));
                    sum[k][0] = _mm256_add_pd(sum[k][0], _mm256_mask_i32gather_pd(
                        _mm256_setzero_pd(), leaf, _mm256_castsi256_si128(p[k]),
                        _mm256_castsi256_pd(lo), 8));
                    sum[k][1] = _mm256_add_pd(sum[k][1], _mm256_mask_i32gather_pd(
                        _mm256_setzero_pd(), leaf, _mm256_extracti128_si256(p[k], 1),
                        _mm256_castsi256_pd(hi), 8));
                }
            }
        }
        for (int64_t k = 0; k < vectors; ++k) {
            const int64_t row = g0 + k * LANES;
            if (b->sum32) {
                _mm256_maskstore_ps((float *)b->out + row, live[k], sum32[k]);
            } else {
                double *a = (double *)b->out + row;
                _mm256_maskstore_pd(a, _mm256_cvtepi32_epi64(_mm256_castsi256_si128(live[k])), sum[k][0]);
                _mm256_maskstore_pd(a + 4, _mm256_cvtepi32_epi64(_mm256_extracti128_si256(live[k], 1)), sum[k][1]);
            }
        }
    }
}
#endif

/* On an AVX-512 CPU, trees deeper than this with one output per leaf take the AVX-512
 * walk, whose permutes hold levels of 32 to 128 nodes; shallower trees (every level in
 * one or two AVX2 registers) and vector leaves took the AVX2 walk faster
 * (benchmarks/notes.md, "AVX-512 and AVX2 over complete-tree copies"). */
#define AVX2_LEVELS_IN_REGISTERS 5
/* The complete-tree walk this CPU takes (SIMD_*; tests and benchmarks read it). */
int64_t woodstar_simd_walk(void) { return simd_form(); }

/* Walk with at most ``level`` (tests and benchmarks time and check each form on one
 * CPU); returns the form now taken. Copies made for a wider form stay valid. */
int64_t woodstar_limit_simd_walk(int64_t level) { return simd_limit(level); }

static inline int64_t complete_walk_float(const float *xb, int64_t rows, int64_t n_cols,
                                          const complete_trees *ct, int64_t tree,
                                          int32_t depth, int32_t *leaf_at, void *acc,
                                          const void *leaf, int64_t sum32, int64_t width)
{
    if (!ct->start || ct->start[tree] < 0) return 0;
#ifdef HAVE_AVX512_DISPATCH
    const int64_t simd = simd_form();
    if (simd == SIMD_AVX512 && depth > AVX2_LEVELS_IN_REGISTERS && width == 1)
        return complete_walk_avx512(xb, rows, n_cols, ct->feature + ct->start[tree],
                                    ct->threshold + ct->start[tree], depth, leaf_at, acc,
                                    leaf, sum32);
    if (simd >= SIMD_AVX2)
        return complete_walk_avx2(xb, rows, n_cols, ct->feature + ct->start[tree],
                                  ct->threshold + ct->start[tree], depth, leaf_at, acc, leaf,
                                  sum32);
#endif
    (void)xb; (void)rows; (void)n_cols; (void)depth; (void)leaf_at; (void)acc; (void)leaf;
    (void)sum32; (void)width;
    return 0;
}

static inline int64_t complete_walk_double(const double *xb, int64_t rows, int64_t n_cols,
                                           const complete_trees *ct, int64_t tree,
                                           int32_t depth, int32_t *leaf_at, void *acc,
                                           const void *leaf, int64_t sum32, int64_t width)
{
    (void)xb; (void)rows; (void)n_cols; (void)ct; (void)tree; (void)depth; (void)leaf_at;
    (void)acc; (void)leaf; (void)sum32; (void)width;
    return 0;  /* the double route keeps its node walk */
}

/* Trees deeper than the complete-tree copies take (GROUP_MAX_DEPTH) keep the node walk,
 * but their first levels are usually full: c_walk.py gives each such tree of the float
 * route a complete copy of its top ``levels`` levels (its head: internal nodes level by
 * level, a leaf above the last level passing rows left against +inf) and, per slot of
 * the head's last level, the node a row there has reached (``entry``, an index into the
 * node array; a leaf's own index where the leaf lies above it). A clean block's rows walk
 * the head 8 or 16 at a time as the complete-tree walk does; the node walk then starts
 * them at their entry with ``levels`` fewer steps. Same comparisons, same leaves, same
 * sums. */
#define HEAD_WALK 1  /* 0: deep trees walk from the root (A/B) */
/* Shorter blocks (a call's last, or a call under 64 rows) walk from the root: with few
 * vectors of rows each level's gather waits on the last, and since the node walk steps
 * 16 clean rows in registers, blocks of 32-63 rows were level or faster without heads
 * (benchmarks/notes.md, "Deep trees: heads in whole blocks only"). */
#define HEAD_MIN_ROWS ROW_BLOCK
typedef struct {
    const int32_t *start;     /* per tree: its head's first slot, or -1; NULL: no heads */
    const int32_t *feature;   /* per slot */
    const float *threshold;   /* per slot */
    const int32_t *entry;     /* entry[start + p]: the node a row at position p of the
                                 head's last level has reached */
    int64_t levels;
} tree_heads;

/* The float route's nodes again as three arrays (feature, right child, threshold: 12
 * bytes a node, no flags), for deep trees' steps: a block's rows take them 16 at a time,
 * each 16 rows' nodes held in registers from their entry to the tree's depth, the loops
 * unrolled. Same comparisons and steps as ADVANCE's clean one. Either change alone (the
 * arrays, or 16 rows in registers over the records) gained nothing; together they take
 * 3-16% less time from 1 000 rows (benchmarks/notes.md, "Deep trees: 16 rows in
 * registers over three arrays"). */
#define DEEP_ARRAYS 1  /* 0: deep trees' clean steps read the node records (A/B) */
#define DEEP_LANES 16
/* Calls of fewer rows than one 16-row step (8-15 rows: one clean block) take the arrays
 * only in trees of at most DEEP_SMALL_TREE_NODES nodes. A larger tree's three arrays
 * spread a step over three cache lines to the record's one, and without 16 rows to
 * overlap them the step waits on all three. A larger call's last block keeps the arrays
 * its other blocks have just read; blocks with NaN (widened) keep them too, as they beat
 * the records' missing-value step. benchmarks/notes.md, "Deep trees: few clean rows of
 * large trees keep the node records". */
#define DEEP_MIN_ROWS DEEP_LANES  /* 0: every call takes the arrays (A/B) */
#define DEEP_SMALL_TREE_NODES 512  /* 0: such calls never take them (A/B) */
typedef struct {
    const int32_t *feature;   /* per node; NULL: no arrays (the double route) */
    const int32_t *right;
    const float *threshold;
} node_arrays;

/* A block with NaN has no clean steps; for the complete-tree copies, the heads and the
 * deep steps it is widened instead: each row becomes [x, x with NaN as -inf], and a
 * node or slot whose missing values go left (leaves and leaf-passing slots included)
 * reads its feature in the second half. NaN <= t is false and -inf <= t is true, so
 * every row takes the side STEP_NAN_ONLY gives it, and the clean block's walks walk the
 * widened one with these columns. Models of more than NAN_WIDENED_MAX_COLS columns keep
 * the records (the widened block is 8 bytes a column a row). */
typedef struct {
    const int32_t *node;      /* per node, as node_arrays' feature (NULL: no node arrays) */
    const int32_t *complete;  /* per slot of the complete-tree copies (NULL: none) */
    const int32_t *head;      /* per slot of the heads (NULL: none); all NULL: blocks with
                                 NaN keep the records */
} widened_columns;
#define NAN_WIDENED 1  /* 0: deep trees of blocks with NaN step over the records (A/B) */
#define NAN_WIDENED_MAX_COLS 4096
static inline void widen_block(const float *xb, int64_t rows, int64_t n_cols, float *wide)
{
    for (int64_t r = 0; r < rows; ++r)
        for (int64_t j = 0; j < n_cols; ++j) {
            const float v = xb[r * n_cols + j];
            wide[r * 2 * n_cols + j] = v;
            wide[r * 2 * n_cols + n_cols + j] = v != v ? -INFINITY : v;
        }
}

/* The block widened, on the first walk that needs it. */
static inline const float *widened_once(const float *xb, int64_t rows, int64_t n_cols,
                                        float *wide, int *done)
{
    if (!*done) widen_block(xb, rows, n_cols, wide);
    *done = 1;
    return wide;
}

/* Steps rows [0, rows) of a clean or widened block from their node in at[] (their
 * entry, or the root) through levels [first_level, depth) of a tree. */
static inline void deep_steps_float(const float *xb, int64_t rows, int64_t n_cols,
                                    const node_arrays *na, int32_t first_level,
                                    int32_t depth, int32_t *at)
{
    const int32_t *feature = na->feature, *right = na->right;
    const float *threshold = na->threshold;
    int64_t r = 0;
    for (; r + DEEP_LANES <= rows; r += DEEP_LANES) {
        int64_t node[DEEP_LANES];
        const float *row[DEEP_LANES];
        for (int q = 0; q < DEEP_LANES; ++q) {
            node[q] = at[r + q];
            row[q] = xb + (r + q) * n_cols;
        }
        for (int32_t level = first_level; level < depth; ++level) {
            _Pragma("GCC unroll 16")
            for (int q = 0; q < DEEP_LANES; ++q) {
                const int64_t here = node[q];
                node[q] = right[here] - (row[q][feature[here]] <= threshold[here]);
            }
        }
        for (int q = 0; q < DEEP_LANES; ++q)
            at[r + q] = (int32_t)node[q];
    }
    for (int32_t level = first_level; level < depth; ++level)
        for (int64_t q = r; q < rows; ++q) {
            const int32_t here = at[q];
            at[q] = right[here] - (xb[q * n_cols + feature[here]] <= threshold[here]);
        }
}

/* Walks the clean block's rows through tree's head, 8 or 16 at a time; leaves each
 * walked row's node in at[] and returns how many rows it walked (0: the tree has no
 * head, or this CPU no SIMD walk). */
static inline int64_t head_walk_float(const float *xb, int64_t rows, int64_t n_cols,
                                      const tree_heads *hd, int64_t tree, int32_t *at)
{
    if (!HEAD_WALK || !hd->start || hd->start[tree] < 0) return 0;
    const complete_trees head = {hd->start, hd->feature, hd->threshold, NULL};
    const int64_t walked = complete_walk_float(xb, rows, n_cols, &head, tree,
                                               (int32_t)hd->levels, at, NULL, NULL, 0, 1);
    const int32_t *entry = hd->entry + hd->start[tree];
    for (int64_t r = 0; r < walked; ++r)
        at[r] = entry[at[r]];
    return walked;
}

static inline int64_t head_walk_double(const double *xb, int64_t rows, int64_t n_cols,
                                       const tree_heads *hd, int64_t tree, int32_t *at)
{
    (void)xb; (void)rows; (void)n_cols; (void)hd; (void)tree; (void)at;
    return 0;
}

/* Below FEW_ROWS rows, a group of trees that all have complete-tree copies walks those
 * instead of the nodes (rows with NaN over their widened copy, see widen_block): a
 * lane's step reads its slot's feature and threshold (4 bytes each; a tree's top four
 * levels share one cache line of each table, where its nodes span several) and goes to
 * 2 slot + 1 or 2 slot + 2. Each lane walks its own
 * tree's depth; the leaves are added per row in tree order. Returns 0 where a tree of
 * the group has no copy. */
#define FEW_ROWS_COPIES 1  /* 0: few rows keep the node lanes (A/B) */
#define FEW_ROWS_WIDENED 1  /* 0: few rows with NaN keep the node lanes (A/B) */
static inline int few_rows_copies_float(const float *x, int64_t n_rows, int64_t n_cols,
                                        const complete_trees *ct, const int32_t *depths,
                                        int64_t t0, int64_t g, int32_t *slot)
{
    if (!FEW_ROWS_COPIES || !ct->start) return 0;
    int32_t deepest = 0;
    for (int64_t j = 0; j < g; ++j) {
        if (ct->start[t0 + j] < 0) return 0;
        deepest = depths[t0 + j] > deepest ? depths[t0 + j] : deepest;
    }
    for (int64_t i = 0; i < g * n_rows; ++i) slot[i] = 0;
    for (int32_t level = 0; level < deepest; ++level)
        for (int64_t j = 0; j < g; ++j) {
            if (level >= depths[t0 + j]) continue;
            const int32_t *feature = ct->feature + ct->start[t0 + j];
            const float *threshold = ct->threshold + ct->start[t0 + j];
            for (int64_t r = 0; r < n_rows; ++r) {
                const int32_t at = slot[j * n_rows + r];
                const float v = x[r * n_cols + feature[at]];
                slot[j * n_rows + r] = 2 * at + 2 - (v <= threshold[at]);
            }
        }
    for (int64_t j = 0; j < g; ++j)  /* slots of the last level -> leaf positions */
        for (int64_t r = 0; r < n_rows; ++r)
            slot[j * n_rows + r] -= (1 << depths[t0 + j]) - 1;
    return 1;
}

static inline int few_rows_copies_double(const double *x, int64_t n_rows, int64_t n_cols,
                                         const complete_trees *ct, const int32_t *depths,
                                         int64_t t0, int64_t g, int32_t *slot)
{
    (void)x; (void)n_rows; (void)n_cols; (void)ct; (void)depths; (void)t0; (void)g; (void)slot;
    return 0;  /* the double route has no copies */
}

/* Below FEW_ROWS rows, a model of oblivious trees only: per tree and row, its levels'
 * comparisons in plain C (no loads depend on one another, so they overlap), the leaf
 * from the bits, added to the row's sums in tree order. NaN takes each level's side. */
static int oblivious_few_rows_float(const float *x, int64_t n_rows, int64_t n_cols,
                                     const oblivious_trees *ob, const complete_trees *ct,
                                     const int32_t *depths, const int32_t *out_start,
                                     int64_t n_trees, int64_t width, int64_t n_out,
                                     void *out, int64_t sum32)
{
    for (int64_t t = 0; t < n_trees; ++t) {
        const int32_t *column = ob->column + t * OBLIVIOUS_LEVELS;
        const float *threshold = ob->threshold + t * OBLIVIOUS_LEVELS;
        const int32_t nan_right = ob->nan_right[t], depth = depths[t];
        for (int64_t r = 0; r < n_rows; ++r) {
            const float *row = x + r * n_cols;
            int64_t at = 0;
            for (int32_t level = 0; level < depth; ++level) {
                const float v = row[ob->features[column[level]]];
                at = 2 * at + ((v > threshold[level]) | ((v != v) & (nan_right >> level)));
            }
            const int64_t first = ((int64_t)ct->start[t] + at) * width;
            if (sum32) {
                const float *leaf = (const float *)ct->leaf + first;
                float *acc = (float *)out + r * n_out + out_start[t];
                for (int64_t k = 0; k < width; ++k) acc[k] += leaf[k];
            } else {
                const double *leaf = (const double *)ct->leaf + first;
                double *acc = (double *)out + r * n_out + out_start[t];
                for (int64_t k = 0; k < width; ++k) acc[k] += leaf[k];
            }
        }
    }
    return 1;
}

static inline int oblivious_few_rows_double(const double *x, int64_t n_rows, int64_t n_cols,
                                            const oblivious_trees *ob, const complete_trees *ct,
                                            const int32_t *depths, const int32_t *out_start,
                                            int64_t n_trees, int64_t width, int64_t n_out,
                                            void *out, int64_t sum32)
{
    (void)x; (void)n_rows; (void)n_cols; (void)ob; (void)ct; (void)depths; (void)out_start;
    (void)n_trees; (void)width; (void)n_out; (void)out; (void)sum32;
    return 0;  /* never reached: the double route has no oblivious trees */
}

/* Trees t0 .. t1 - 1 (all oblivious) for every row of a block, on the float route;
 * returns 0 where this CPU has no SIMD walk (the other walks take them). */
static inline int oblivious_run_float(const float *xb, int64_t n_cols, float *xt, int *copied,
                                      oblivious_block *b, int64_t t0, int64_t t1)
{
#ifdef HAVE_AVX512_DISPATCH
    const int64_t simd = simd_form();
    if (simd == SIMD_NONE) return 0;
    if (!*copied) {
        transpose_block(xb, b->rows, n_cols, b->ob, xt);
        *copied = 1;
    }
    b->xt = xt;
    if (simd == SIMD_AVX512)
        oblivious_run_avx512(b, t0, t1);
    else
        oblivious_run_avx2(b, t0, t1);
    return 1;
#else
    (void)xb; (void)n_cols; (void)xt; (void)copied; (void)b; (void)t0; (void)t1;
    return 0;
#endif
}

static inline int oblivious_run_double(const double *xb, int64_t n_cols, float *xt, int *copied,
                                       oblivious_block *b, int64_t t0, int64_t t1)
{
    (void)xb; (void)n_cols; (void)xt; (void)copied; (void)b; (void)t0; (void)t1;
    return 0;  /* the double route keeps its node walk */
}

#define DEFINE_WALK(NAME, NODE, T, STEP, ACC, CLEAN_STEP)                                 \
static void NAME(const T *x, int64_t n_rows, int64_t n_cols, const NODE *nodes,            \
                 const int32_t *roots, const int32_t *depths, const int32_t *out_start,    \
                 int64_t n_trees, const ACC *leaf_value, int64_t width,                    \
                 double range_lo, double range_hi, ACC *out, int64_t n_out,                \
                 const int32_t *cat_start, const int32_t *cat_size,                        \
                 const uint32_t *cat_bits, int64_t cat_rule, const complete_trees *ct,    \
                 const oblivious_trees *ob, const tree_heads *hd, const node_arrays *na,   \
                 const widened_columns *wc)                                                \
{                                                                                          \
    const T lo = (T)range_lo, hi = (T)range_hi;                                            \
    int32_t at[ROW_BLOCK > TREE_LANES ? ROW_BLOCK : TREE_LANES];                           \
    (void)lo; (void)hi; (void)cat_start; (void)cat_size; (void)cat_bits; (void)cat_rule;   \
    if (n_rows < FEW_ROWS) {                                                               \
        if (OBLIVIOUS_WALK && ob->all                                                      \
            && oblivious_few_rows_##T(x, n_rows, n_cols, ob, ct, depths, out_start, n_trees,\
                                      width, n_out, out, sizeof(ACC) == sizeof(float)))    \
            return;                                                                        \
        int32_t deepest = 0;                                                               \
        for (int64_t t = 0; t < n_trees; ++t)                                              \
            deepest = depths[t] > deepest ? depths[t] : deepest;                           \
        if (deepest <= REFILL_MIN_DEPTH) {  /* groups of trees in lockstep */              \
            const int64_t group = TREE_LANES / n_rows; /* trees per group; lanes = group x rows */\
            int clean = CLEAN_STEP##_OK && ct->start != NULL;                              \
            for (int64_t i = 0; clean && i < n_rows * n_cols; ++i)                         \
                clean = x[i] == x[i];                                                      \
            /* rows with NaN walk the copies too, widened as the blocks below are */      \
            float *few_wide = !clean && FEW_ROWS_WIDENED && NAN_WIDENED && CLEAN_STEP##_OK \
                              && sizeof(T) == sizeof(float) && ct->start && wc->complete   \
                              && n_cols <= NAN_WIDENED_MAX_COLS                            \
                ? (float *)malloc((size_t)n_rows * 2 * n_cols * sizeof(float)) : NULL;    \
            const complete_trees few_ct = {ct->start, wc->complete, ct->threshold, ct->leaf};\
            if (few_wide) widen_block((const float *)x, n_rows, n_cols, few_wide);         \
            for (int64_t t0 = 0; t0 < n_trees; t0 += group) {                              \
                const int64_t g = n_trees - t0 < group ? n_trees - t0 : group;             \
                if ((clean && few_rows_copies_##T(x, n_rows, n_cols, ct, depths, t0, g, at))\
                    || (few_wide && few_rows_copies_float(few_wide, n_rows, 2 * n_cols,    \
                                                          &few_ct, depths, t0, g, at))) {  \
                    for (int64_t j = 0; j < g; ++j) /* each row gets the group's trees in order */\
                        for (int64_t r = 0; r < n_rows; ++r) {                             \
                            const ACC *leaf = (const ACC *)ct->leaf + ((int64_t)ct->start[t0 + j]\
                                              + at[j * n_rows + r]) * width;               \
                            ACC *acc = out + r * n_out + out_start[t0 + j];                \
                            for (int64_t k = 0; k < width; ++k)                            \
                                acc[k] += leaf[k];                                         \
                        }                                                                  \
                    continue;                                                              \
                }                                                                          \
                int32_t depth = 0;                                                         \
                for (int64_t j = 0; j < g; ++j) {                                          \
                    depth = depths[t0 + j] > depth ? depths[t0 + j] : depth;               \
                    for (int64_t r = 0; r < n_rows; ++r)                                   \
                        at[j * n_rows + r] = roots[t0 + j];                                \
                }                                                                          \
                for (int32_t level = 0; level < depth; ++level) {                          \
                    int32_t moved = 0;                                                     \
                    for (int64_t j = 0; j < g; ++j)                                        \
                        for (int64_t r = 0; r < n_rows; ++r)                               \
                            ADVANCE(NODE, T, STEP, x + r * n_cols, j * n_rows + r)         \
                    if (!moved) break;                                                     \
                }                                                                          \
                for (int64_t j = 0; j < g; ++j) /* each row gets the group's trees in order */\
                    for (int64_t r = 0; r < n_rows; ++r) {                                 \
                        const ACC *leaf = leaf_value + (int64_t)at[j * n_rows + r] * width;\
                        ACC *acc = out + r * n_out + out_start[t0 + j];                    \
                        for (int64_t k = 0; k < width; ++k)                                \
                            acc[k] += leaf[k];                                             \
                    }                                                                      \
            }                                                                              \
            free(few_wide);                                                                \
            return;                                                                        \
        }                                                                                  \
        /* Deep trees: lanes are (tree, row) items taken in tree order; a lane whose step  \
           stays put is at its leaf, records it and takes the next item, so no lane idles  \
           while a deeper tree of its group finishes. Each row then adds the chunk's leaves\
           in tree order. */                                                               \
        int32_t leaf_of[REFILL_TREES * FEW_ROWS], lane_item[TREE_LANES], lane_row[TREE_LANES];\
        for (int64_t t0 = 0; t0 < n_trees; t0 += REFILL_TREES) {                           \
            const int64_t t1 = n_trees - t0 < REFILL_TREES ? n_trees : t0 + REFILL_TREES;  \
            const int32_t n_items = (int32_t)((t1 - t0) * n_rows);                         \
            int32_t next_item = 0, lanes = 0;                                              \
            for (; lanes < TREE_LANES && next_item < n_items; ++lanes, ++next_item) {      \
                lane_item[lanes] = next_item;                                              \
                lane_row[lanes] = next_item % (int32_t)n_rows;                             \
                at[lanes] = roots[t0 + next_item / n_rows];                                \
            }                                                                              \
            while (lanes > 0)                                                              \
                for (int32_t i = 0; i < lanes;) {                                          \
                    int32_t moved = 0;                                                     \
                    ADVANCE(NODE, T, STEP, x + lane_row[i] * n_cols, i)                    \
                    if (moved) { ++i; continue; }                                          \
                    leaf_of[lane_item[i]] = at[i];                                         \
                    if (next_item < n_items) {  /* the lane's next item */                 \
                        lane_item[i] = next_item;                                          \
                        lane_row[i] = next_item % (int32_t)n_rows;                         \
                        at[i] = roots[t0 + next_item / n_rows];                            \
                        ++next_item;                                                       \
                        ++i;                                                               \
                    } else {  /* none left: the last lane takes this slot */               \
                        --lanes;                                                           \
                        lane_item[i] = lane_item[lanes];                                   \
                        lane_row[i] = lane_row[lanes];                                     \
                        at[i] = at[lanes];                                                 \
                    }                                                                      \
                }                                                                          \
            for (int64_t t = t0; t < t1; ++t)                                              \
                for (int64_t r = 0; r < n_rows; ++r) {                                     \
                    const ACC *leaf = leaf_value + (int64_t)leaf_of[(t - t0) * n_rows + r] * width;\
                    ACC *acc = out + r * n_out + out_start[t];                             \
                    for (int64_t k = 0; k < width; ++k)                                    \
                        acc[k] += leaf[k];                                                 \
                }                                                                          \
        }                                                                                  \
        return;                                                                            \
    }                                                                                      \
    float *xt = OBLIVIOUS_WALK && ob->n_features && sizeof(T) == sizeof(float)             \
        ? (float *)malloc((size_t)ob->n_features * ROW_BLOCK * sizeof(float)) : NULL;     \
    float *wide = NAN_WIDENED && CLEAN_STEP##_OK && sizeof(T) == sizeof(float)             \
                  && (wc->node || wc->complete || wc->head) && n_cols <= NAN_WIDENED_MAX_COLS\
        ? (float *)malloc((size_t)n_cols * 2 * ROW_BLOCK * sizeof(float)) : NULL;         \
    const node_arrays wide_nodes = {wc->node, na->right, na->threshold};                   \
    const complete_trees wide_ct = {wc->complete ? ct->start : NULL, wc->complete,         \
                                    ct->threshold, ct->leaf};                              \
    const tree_heads wide_hd = {wc->head ? hd->start : NULL, wc->head, hd->threshold,      \
                                hd->entry, hd->levels};                                    \
    for (int64_t block = 0; block < n_rows; block += ROW_BLOCK) {                          \
        const int64_t rows = n_rows - block < ROW_BLOCK ? n_rows - block : ROW_BLOCK;      \
        const T *xb = x + block * n_cols;                                                  \
        int clean = CLEAN_STEP##_OK, copied = 0, widened = 0;                              \
        for (int64_t i = 0; clean && i < rows * n_cols; ++i)                               \
            clean = xb[i] == xb[i];                                                        \
        for (int64_t t = 0; t < n_trees; ++t) {                                            \
            const int32_t root = roots[t], depth = depths[t];                              \
            ACC *acc = out + block * n_out + out_start[t];                                 \
            int64_t r0 = 0;                                                                \
            const int one_sum = width == 1 && n_out == 1; /* added in registers */        \
            const ACC *leaf = ct->start && ct->start[t] >= 0                               \
                ? (const ACC *)ct->leaf + (int64_t)ct->start[t] * width : NULL;            \
            if (xt && ob->nan_right[t] >= 0) { /* a run of oblivious trees, NaN or not */  \
                int64_t t1 = t + 1;                                                        \
                while (t1 < n_trees && ob->nan_right[t1] >= 0) ++t1;                       \
                oblivious_block b = {NULL, rows, ob, ct, depths, out_start, width, n_out,  \
                                     sizeof(ACC) == sizeof(float), out + block * n_out, at};\
                if (oblivious_run_##T(xb, n_cols, xt, &copied, &b, t, t1)) {               \
                    t = t1 - 1;                                                            \
                    continue;                                                              \
                }                                                                          \
            }                                                                              \
            const int complete_walks = depth <= GROUP_MAX_DEPTH                            \
                && (depth <= AVX2_LEVELS_IN_REGISTERS || rows >= SIMD_MIN_ROWS);           \
            if (clean && complete_walks)                                                   \
                r0 = complete_walk_##T(xb, rows, n_cols, ct, t, depth, at,                 \
                                       one_sum ? (void *)acc : NULL, leaf,                 \
                                       sizeof(ACC) == sizeof(float), width);               \
            else if (wide && complete_walks && wide_ct.start)                              \
                r0 = complete_walk_float(widened_once((const float *)xb, rows, n_cols, wide,\
                                                      &widened),                           \
                                         rows, 2 * n_cols, &wide_ct, t, depth, at,         \
                                         one_sum ? (void *)acc : NULL, leaf,               \
                                         sizeof(ACC) == sizeof(float), width);             \
            if (r0 && !one_sum) { /* at[]: leaf positions in the tree's copy */            \
                for (int64_t q = 0; q < r0; ++q)                                           \
                    for (int64_t k = 0; k < width; ++k)                                    \
                        acc[q * n_out + k] += leaf[(int64_t)at[q] * width + k];            \
            }                                                                              \
            if (clean && depth <= GROUP_MAX_DEPTH) {                                       \
                for (; width == 1 && r0 + GROUP_ROWS <= rows; r0 += GROUP_ROWS) { /* see GROUP_ROWS */ \
                    int32_t a[GROUP_ROWS];                                                 \
                    for (int q = 0; q < GROUP_ROWS; ++q) a[q] = root;                      \
                    for (int32_t level = 0; level < depth; ++level) {                      \
                        _Pragma("GCC unroll 8")                                            \
                        for (int q = 0; q < GROUP_ROWS; ++q) {                             \
                            const NODE *node = nodes + a[q];                               \
                            const T v = xb[(r0 + q) * n_cols + node->feature];             \
                            a[q] = node->right - (v <= node->threshold);                   \
                        }                                                                  \
                    }                                                                      \
                    for (int q = 0; q < GROUP_ROWS; ++q)                                   \
                        acc[(r0 + q) * n_out] += leaf_value[a[q]];                         \
                }                                                                          \
            }                                                                              \
            /* a deep tree's head: rows below head_rows start that many levels down */  \
            int64_t head_rows = 0;                                                         \
            if (depth > GROUP_MAX_DEPTH && rows >= HEAD_MIN_ROWS && clean)                 \
                head_rows = head_walk_##T(xb, rows, n_cols, hd, t, at);                    \
            else if (depth > GROUP_MAX_DEPTH && rows >= HEAD_MIN_ROWS && wide && wide_hd.start)\
                head_rows = head_walk_float(widened_once((const float *)xb, rows, n_cols, wide,\
                                                         &widened),                        \
                                            rows, 2 * n_cols, &wide_hd, t, at);            \
            const int32_t head_levels = head_rows ? (int32_t)hd->levels : 0;               \
            for (int64_t r = r0 > head_rows ? r0 : head_rows; r < rows; ++r)               \
                at[r] = root;                                                              \
            if (DEEP_ARRAYS && clean && na->feature && sizeof(T) == sizeof(float)          \
                && depth > GROUP_MAX_DEPTH && r0 == 0 && (head_rows == rows || !head_rows) \
                && (n_rows >= DEEP_MIN_ROWS || roots[t + 1] - root <= DEEP_SMALL_TREE_NODES))\
                deep_steps_float((const float *)xb, rows, n_cols, na, head_levels, depth, at);\
            else if (DEEP_ARRAYS && wide && !clean && wide_nodes.feature && depth > GROUP_MAX_DEPTH  \
                     && r0 == 0 && (head_rows == rows || !head_rows))                      \
                deep_steps_float(widened_once((const float *)xb, rows, n_cols, wide, &widened),\
                                 rows, 2 * n_cols, &wide_nodes, head_levels, depth, at);   \
            else                                                                           \
            for (int32_t level = 0; level < depth; ++level) {                              \
                int32_t moved = 0;                                                         \
                const int64_t first = level < head_levels ? head_rows : r0;                \
                if (clean)                                                                 \
                    for (int64_t r = first; r < rows; ++r)                                 \
                        ADVANCE(NODE, T, CLEAN_STEP, xb + r * n_cols, r)                   \
                else                                                                       \
                    for (int64_t r = first; r < rows; ++r)                                 \
                        ADVANCE(NODE, T, STEP, xb + r * n_cols, r)                         \
                (void)moved;  /* no early exit here: see above */                          \
            }                                                                              \
            for (int64_t r = r0; r < rows; ++r) {                                          \
                const ACC *leaf = leaf_value + (int64_t)at[r] * width;                     \
                for (int64_t k = 0; k < width; ++k)                                        \
                    acc[r * n_out + k] += leaf[k];                                         \
            }                                                                              \
        }                                                                                  \
    }                                                                                      \
    free(xt);                                                                              \
    free(wide);                                                                            \
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
    const int32_t *roots;  /* n_trees + 1: tree t's nodes are [roots[t], roots[t + 1]) */
    const int32_t *depths, *out_start;
    const void *leaf_value;  /* double, or float where sum32 is set */
    int64_t n_trees, width, n_cols, n_out, has_range, sum32;
    double range_lo, range_hi;
    const int32_t *cat_start, *cat_size;  /* per node: its bitset's first word, words */
    const uint32_t *cat_bits;
    int64_t has_categorical, cat_rule;
    complete_trees ct;
    oblivious_trees ob;
    tree_heads hd;
    node_arrays na;
    widened_columns wc;
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
            m->cat_rule, &m->ct, &m->ob, &m->hd, &m->na, &m->wc);                                                          \
    else                                                                                   \
        (m->has_categorical ? CAT : m->has_range ? RANGED : PLAIN)(                        \
            (const T *)x, n_rows, m->n_cols, (const NODE *)m->nodes, m->roots, m->depths,  \
            m->out_start, m->n_trees, (const double *)m->leaf_value, m->width, m->range_lo, \
            m->range_hi, (double *)out, m->n_out, m->cat_start, m->cat_size, m->cat_bits,  \
            m->cat_rule, &m->ct, &m->ob, &m->hd, &m->na, &m->wc);                                                          \
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

/* The links of sources that compute in double with the C library's functions
 * (LightGBM's ConvertOutput), over n_rows x n_out raw scores times scale into out:
 *   LIBM_SOFTMAX   per row: the maximum as std::max(z_k, max) folds it, exp(z_k - max),
 *                  their sum from left to right, each divided by it (Common::Softmax)
 *   LIBM_EXP       exp(z)                                   poisson, gamma, tweedie
 *   LIBM_SOFTPLUS  log1p(exp(z))                            cross_entropy_lambda */
#define LIBM_SOFTMAX 0
#define LIBM_EXP 1
#define LIBM_SOFTPLUS 2

void woodstar_libm_link(int64_t kind, const double *raw, int64_t n_rows, int64_t n_out,
                        double scale, double *out)
{
    const int64_t n = n_rows * n_out;
    for (int64_t i = 0; i < n; ++i)
        out[i] = scale != 1.0 ? raw[i] * scale : raw[i];
    if (kind == LIBM_EXP) {
        for (int64_t i = 0; i < n; ++i)
            out[i] = exp(out[i]);
    } else if (kind == LIBM_SOFTPLUS) {
        for (int64_t i = 0; i < n; ++i)
            out[i] = log1p(exp(out[i]));
    } else if (kind == LIBM_SOFTMAX) {
        for (int64_t r = 0; r < n_rows; ++r) {
            double *o = out + r * n_out;
            double wmax = o[0];
            for (int64_t k = 1; k < n_out; ++k)
                wmax = o[k] < wmax ? wmax : o[k];
            double wsum = 0.0;
            for (int64_t k = 0; k < n_out; ++k) {
                o[k] = exp(o[k] - wmax);
                wsum += o[k];
            }
            for (int64_t k = 0; k < n_out; ++k)
                o[k] /= wsum;
        }
    }
}

/* One call for a small batch (c_walk.py, SmallBatchEntry): the finiteness check the
 * container's input check makes, the walk, the mean and base score CpuRoute.raw applies
 * and the links it would apply in NumPy, in the same order and arithmetic:
 *   POST_NONE      raw scores only (the caller applies the link)
 *   POST_IDENTITY  z = raw * scale (scale 1: raw itself)
 *   POST_SIGMOID   1 / (1 + exp(-z)), scipy's expit formula (libm's exp, as it calls it)
 *   POST_SIGMOID_BINARY, POST_IDENTITY_BINARY   (1 - p, p) of the first column
 *   POST_LIBM + k  woodstar_libm_link's link k of z
 *   POST_XGB + k   a float32 sum's XGBoost link (k: XGB_* above, XGB_IDENTITY,
 *                  XGB_SIGMOID_BINARY, XGB_IDENTITY_BINARY), in float32 as c_walk.py
 * Rows of double for a float walk (x_f64 set, rows_f64 not) are rounded to float first,
 * as NumPy's astype rounds them (to nearest; beyond float's range, infinity), and the
 * check reads the rounded values, as the container's check does after its conversion.
 * Returns -1, or the flat index of the first value the check refuses (nothing is
 * written then; the caller's own check words the error); -2 if memory ran out. */
#define POST_NONE 0
#define POST_IDENTITY 1
#define POST_SIGMOID 2
#define POST_SIGMOID_BINARY 3
#define POST_IDENTITY_BINARY 4
#define POST_LIBM 8
#define POST_XGB 16
#define XGB_IDENTITY 3
#define XGB_SIGMOID_BINARY 4
#define XGB_IDENTITY_BINARY 5
#define CHECK_NAN 1
#define CHECK_RANGE 2
#define SMALL_BATCH_ROWS 256  /* the float32 sums' scratch; c_walk.py keeps below it */
#define ROUNDED_ON_STACK 4096  /* values of double rows rounded to float without malloc */

typedef struct {
    const model *m;
    int64_t rows_f64;     /* the rows are double (else float) */
    int64_t check;        /* CHECK_NAN | CHECK_RANGE */
    double limit;         /* |x| above it is refused under CHECK_RANGE */
    int64_t mean_trees;   /* divide the sums by it; 0: a sum */
    const double *base;   /* added after the mean; NULL: nothing to add */
    int64_t post;
    double scale;
    int64_t width;        /* columns of transformed */
    /* Double rows of a model that compares in double may take the float walk of the
     * same trees first (c_walk.py, _FloatRowsFirst; woodstar_round_rows below): */
    const model *float_m;          /* that walk; NULL: every call on m */
    int64_t float_min_rows;        /* calls of at least this many rows take it */
    const int64_t *round_offset;   /* woodstar_round_rows's tables */
    const int64_t *round_log2size;
    const uint32_t *round_tables;
} predict_spec;

static inline double expit(double z) { return 1.0 / (1.0 + exp(-z)); }

static int64_t predict_rows(const predict_spec *s, const void *x, int64_t n_rows, double *raw,
                            double *transformed);
int64_t woodstar_round_rows(const double *x, int64_t n_rows, int64_t n_cols,
                            const int64_t *offset, const int64_t *log2size,
                            const uint32_t *tables, float *x32, uint8_t *unsafe);

int64_t woodstar_predict(const predict_spec *s, const void *x, int64_t x_f64, int64_t n_rows,
                         double *raw, double *transformed)
{
    if (!x_f64 || s->rows_f64)
        return predict_rows(s, x, n_rows, raw, transformed);
    const int64_t n = n_rows * s->m->n_cols;
    float stack[ROUNDED_ON_STACK];
    float *rounded = n > ROUNDED_ON_STACK ? (float *)malloc((size_t)n * sizeof(float)) : stack;
    if (!rounded) return -2;
    for (int64_t i = 0; i < n; ++i)
        rounded[i] = (float)((const double *)x)[i];
    const int64_t result = predict_rows(s, rounded, n_rows, raw, transformed);
    if (rounded != stack) free(rounded);
    return result;
}

/* The sums of double rows (raw zeroed) as the double walk gives them: every row rounded
 * and walked by the float walk, the rows marked unsafe walked again by the double one. */
static int64_t float_rows_first(const predict_spec *s, const double *x, int64_t n_rows,
                                double *raw)
{
    const model *m = s->m;
    const int64_t n_cols = m->n_cols, n_out = m->n_out, n = n_rows * n_cols;
    float stack[ROUNDED_ON_STACK];
    float *x32 = n > ROUNDED_ON_STACK ? (float *)malloc((size_t)n * sizeof(float)) : stack;
    uint8_t unsafe[SMALL_BATCH_ROWS];
    if (!x32) return -2;
    const int64_t marked = woodstar_round_rows(x, n_rows, n_cols, s->round_offset,
                                               s->round_log2size, s->round_tables, x32, unsafe);
    woodstar_walk_f32_range(s->float_m, (const char *)x32, n_rows, (char *)raw);
    for (int64_t r = 0; marked && r < n_rows; ++r) {
        if (!unsafe[r]) continue;
        for (int64_t k = 0; k < n_out; ++k) raw[r * n_out + k] = 0.0;
        woodstar_walk_f64_range(m, (const char *)(x + r * n_cols), 1, (char *)(raw + r * n_out));
    }
    if (x32 != stack) free(x32);
    return 0;
}

static int64_t predict_rows(const predict_spec *s, const void *x, int64_t n_rows, double *raw,
                            double *transformed)
{
    const model *m = s->m;
    const int64_t n_out = m->n_out, n = n_rows * m->n_cols;
    if (s->check) {
        for (int64_t i = 0; i < n; ++i) {
            const double v = s->rows_f64 ? ((const double *)x)[i] : (double)((const float *)x)[i];
            if (v != v) {
                if (s->check & CHECK_NAN) return i;
            } else if ((s->check & CHECK_RANGE) && !(fabs(v) <= s->limit)) {
                return i;
            }
        }
    }
    void (*walk)(const model *, const char *, int64_t, char *) =
        s->rows_f64 ? woodstar_walk_f64_range : woodstar_walk_f32_range;
    if (m->sum32) {
        float sums[SMALL_BATCH_ROWS * 4], *acc = sums;
        float link[SMALL_BATCH_ROWS * 4], *z = link;
        const int64_t cells = n_rows * n_out;
        if (cells > SMALL_BATCH_ROWS * 4) {  /* many outputs: the heap */
            acc = (float *)calloc((size_t)cells * 2, sizeof(float));
            if (!acc) return -2;
            z = acc + cells;
        } else {
            for (int64_t i = 0; i < cells; ++i) acc[i] = 0.0f;
        }
        walk(m, (const char *)x, n_rows, (char *)acc);
        if (s->base)  /* float32 += float64 in NumPy: the double sum, rounded to float */
            for (int64_t r = 0; r < n_rows; ++r)
                for (int64_t k = 0; k < n_out; ++k)
                    acc[r * n_out + k] = (float)((double)acc[r * n_out + k] + s->base[k]);
        for (int64_t i = 0; i < cells; ++i) raw[i] = (double)acc[i];
        const int64_t kind = s->post - POST_XGB;
        if (kind == XGB_SIGMOID || kind == XGB_SOFTMAX || kind == XGB_EXP) {
            woodstar_xgb_link(kind, acc, n_rows, n_out, z);
            for (int64_t i = 0; i < cells; ++i) transformed[i] = (double)z[i];
        } else if (kind == XGB_IDENTITY) {
            for (int64_t i = 0; i < cells; ++i) transformed[i] = (double)acc[i];
        } else if (kind == XGB_SIGMOID_BINARY || kind == XGB_IDENTITY_BINARY) {
            for (int64_t r = 0; r < n_rows; ++r) {
                float p = acc[r * n_out];
                if (kind == XGB_SIGMOID_BINARY) woodstar_xgb_link(XGB_SIGMOID, &p, 1, 1, &p);
                transformed[2 * r] = (double)(1.0f - p);
                transformed[2 * r + 1] = (double)p;
            }
        }
        if (acc != sums) free(acc);
        return -1;
    }
    const int64_t cells = n_rows * n_out;
    for (int64_t i = 0; i < cells; ++i) raw[i] = 0.0;
    if (s->float_m && s->rows_f64 && n_rows >= s->float_min_rows
        && n_rows <= SMALL_BATCH_ROWS) {  /* float_rows_first's flags sit on the stack */
        if (float_rows_first(s, (const double *)x, n_rows, raw) < 0) return -2;
    } else {
        walk(m, (const char *)x, n_rows, (char *)raw);
    }
    if (s->mean_trees)
        for (int64_t i = 0; i < cells; ++i) raw[i] /= (double)s->mean_trees;
    if (s->base)
        for (int64_t r = 0; r < n_rows; ++r)
            for (int64_t k = 0; k < n_out; ++k)
                raw[r * n_out + k] += s->base[k];
    const double scale = s->scale;
    switch (s->post) {
    case POST_IDENTITY:
        for (int64_t i = 0; i < cells; ++i)
            transformed[i] = scale != 1.0 ? raw[i] * scale : raw[i];
        break;
    case POST_SIGMOID:
        for (int64_t i = 0; i < cells; ++i)
            transformed[i] = expit(scale != 1.0 ? raw[i] * scale : raw[i]);
        break;
    case POST_SIGMOID_BINARY:
    case POST_IDENTITY_BINARY:
        for (int64_t r = 0; r < n_rows; ++r) {
            const double z0 = scale != 1.0 ? raw[r * n_out] * scale : raw[r * n_out];
            const double p = s->post == POST_SIGMOID_BINARY ? expit(z0) : z0;
            transformed[2 * r] = 1.0 - p;
            transformed[2 * r + 1] = p;
        }
        break;
    default:
        if (s->post >= POST_LIBM && s->post < POST_XGB)
            woodstar_libm_link(s->post - POST_LIBM, raw, n_rows, n_out, scale, transformed);
        break;
    }
    return -1;
}

/* Float64 rows for the float route (c_walk.py, ``_FloatRowsFirst``): x32 gets every
 * value rounded to float, and unsafe[r] marks a row one of whose values might compare
 * otherwise once rounded. A comparison can change only where a threshold lies between
 * a value and its rounding (inclusive), and such a threshold rounds to the same float,
 * the nearest one to both. So a value is safe when it is a float already (or NaN), or
 * when its rounding is not the rounding of any threshold of its feature. Those
 * roundings are kept per feature as a set of float bit patterns: an open-addressing
 * table of 2^log2size[c] slots from offset[c], at most half full. Out-of-range values
 * round to +-inf (IEEE 754), as do thresholds beyond float's range. */
#define ROUND_EMPTY 0xFFFFFFFFu  /* a NaN's bits: no threshold rounds to it */

static inline uint32_t round_slot(uint32_t bits, int64_t log2size)
{
    return (bits * 2654435761u) >> (32 - log2size);
}

/* A float's bits, -0.0 as +0.0: the set compares values, and the two zeros are equal. */
static inline uint32_t float_bits(float f)
{
    union { float f; uint32_t u; } v = {f == 0.0f ? 0.0f : f};
    return v.u;
}

/* Fills one feature's table (2^log2size slots, log2size >= 1) with n float values. */
void woodstar_round_table(const float *values, int64_t n, uint32_t *table, int64_t log2size)
{
    const uint32_t mask = ((uint32_t)1 << log2size) - 1;
    for (uint32_t i = 0; i <= mask; ++i) table[i] = ROUND_EMPTY;
    for (int64_t k = 0; k < n; ++k) {
        const uint32_t bits = float_bits(values[k]);
        uint32_t i = round_slot(bits, log2size);
        while (table[i] != ROUND_EMPTY && table[i] != bits) i = (i + 1) & mask;
        table[i] = bits;
    }
}

/* Returns the number of rows marked. */
int64_t woodstar_round_rows(const double *x, int64_t n_rows, int64_t n_cols,
                            const int64_t *offset, const int64_t *log2size,
                            const uint32_t *tables, float *x32, uint8_t *unsafe)
{
    int64_t marked = 0;
    for (int64_t r = 0; r < n_rows; ++r) {
        int moves = 0;
        for (int64_t c = 0; c < n_cols; ++c) {
            const double v = x[r * n_cols + c];
            const float f = (float)v;
            x32[r * n_cols + c] = f;
            if ((double)f == v || v != v) continue;
            const uint32_t *table = tables + offset[c];
            const uint32_t bits = float_bits(f), mask = ((uint32_t)1 << log2size[c]) - 1;
            uint32_t i = round_slot(bits, log2size[c]);
            while (table[i] != ROUND_EMPTY && table[i] != bits) i = (i + 1) & mask;
            moves |= table[i] == bits;
        }
        unsafe[r] = (uint8_t)moves;
        marked += moves;
    }
    return marked;
}

/* The layouts the Python side must match, checked when the library is loaded. */
int64_t woodstar_layout(void)
{
    return (int64_t)sizeof(node32) * 1000000 + (int64_t)sizeof(node64) * 1000
           + (int64_t)sizeof(model) + (int64_t)sizeof(predict_spec) * 1000000000;
}
