/* A linear model's small calls in one native call: the input check, the column-wise
 * steps before it (a scaler's subtractions and divisions), the product with the
 * coefficients, the intercept and the logistic link.
 *
 * The product is the BLAS routine NumPy calls for ``X @ coef.T`` on these shapes, called
 * through the addresses NumPy's own BLAS library gives (linear_entry.py finds them), with
 * NumPy's arguments: one row and one output is ``?dot``; several rows and one output, or
 * one row and several outputs, is ``?gemv`` (column-major, transposed); several rows of
 * several outputs is ``?gemm`` (row-major). So the sums are
 * the ones NumPy computes, in the same order, whatever kernel that library picks.
 *
 * Every other step is one IEEE operation per value, in the dtype NumPy uses for it: a
 * float32 operation is computed in double and rounded, which gives the same float for
 * +, -, * and / (a double holds more than twice a float's digits). Built with
 * -ffp-contract=off so that no multiply and add are fused. On a CPU with AVX-512 or AVX2
 * (asked at run time) the steps take eight or four values of a row at a time with the
 * same operations, which lets the entry pay up to 255 rows instead of 64
 * (linear_entry.py). Rows with no step before the product, already of its dtype, are
 * not copied: they are checked (check_rows) and the product reads them where they lie,
 * as NumPy's own product would.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include "cpu_simd.h"

#define LINEAR_LAYOUT 2

typedef float (*sdot_fn)(int64_t, const float *, int64_t, const float *, int64_t);
typedef double (*ddot_fn)(int64_t, const double *, int64_t, const double *, int64_t);
typedef void (*sgemv_fn)(int, int, int64_t, int64_t, float, const float *, int64_t,
                         const float *, int64_t, float, float *, int64_t);
typedef void (*dgemv_fn)(int, int, int64_t, int64_t, double, const double *, int64_t,
                         const double *, int64_t, double, double *, int64_t);
typedef void (*sgemm_fn)(int, int, int, int64_t, int64_t, int64_t, float, const float *,
                         int64_t, const float *, int64_t, float, float *, int64_t);
typedef void (*dgemm_fn)(int, int, int, int64_t, int64_t, int64_t, double, const double *,
                         int64_t, const double *, int64_t, double, double *, int64_t);

enum { ROW_MAJOR = 101, COL_MAJOR = 102, NO_TRANS = 111, TRANS = 112 };  /* CBLAS's */
enum { OP_ADD = 1, OP_SUB = 2, OP_MUL = 3, OP_DIV = 4 };
enum { CHECK_NAN = 1, CHECK_RANGE = 2 };
enum { LINK_NUMPY = 0, LINK_IDENTITY = 1, LINK_SIGMOID_BINARY = 2 };
#define MAX_CELLS 16384                                  /* rows x features in the scratch */

typedef struct {
    int64_t n_features, n_outputs;
    int64_t rows_double;       /* the rows, and the steps' results, are float64 */
    int64_t check;             /* CHECK_NAN | CHECK_RANGE */
    double limit;              /* the source dtype's largest finite value */
    int64_t n_steps;
    const int64_t *step_ops;   /* OP_* per step */
    const double *operands;    /* n_steps x n_features, the values each step applies */
    int64_t product_double;    /* the product's dtype */
    const void *coef;          /* (n_outputs, n_features), the product's dtype */
    int64_t coef_fortran;      /* the coefficients are in Fortran order, as the source's */
    int64_t raw_double;        /* the dtype of product + intercept */
    const double *intercept;   /* n_outputs values, exact in the raw dtype */
    int64_t link;              /* LINK_* */
    void *dot, *gemv;          /* the BLAS routines of the product's dtype */
    int64_t steps_float;       /* float32 rows whose step operands are all float32
                                * values: the SIMD forms step in float32 (below) */
    const double *tiled_operands; /* n_steps x period: the operands repeated along the
                                   * rows' run (prepare_rows_avx512) */
    const float *float_operands;  /* the same as float32, where steps_float */
    int64_t period;
    void *gemm;                /* the BLAS matrix product of the product's dtype */
} linear_spec;

int64_t woodstar_linear_layout(void) { return LINEAR_LAYOUT * 1000 + (int64_t)sizeof(linear_spec); }

static double step(int64_t op, double x, double operand) {
    switch (op) {
    case OP_ADD: return x + operand;
    case OP_SUB: return x - operand;
    case OP_MUL: return x * operand;
    default: return x / operand;
    }
}

/* The rows after the steps, in the product's dtype, into ``scratch``; 0 where a value
 * is refused or a step overflows or turns a number into NaN (NumPy warns there: the
 * caller's full path runs the call instead). */
static int prepare_rows(const linear_spec *s, const void *X, int64_t n, void *scratch) {
    const int64_t d = s->n_features;
    for (int64_t r = 0; r < n; r++) {
        for (int64_t j = 0; j < d; j++) {
            const int64_t i = r * d + j;
            double v = s->rows_double ? ((const double *)X)[i] : (double)((const float *)X)[i];
            if (isnan(v)) {
                if (s->check & CHECK_NAN) return 0;
            } else if ((s->check & CHECK_RANGE) && fabs(v) > s->limit) {
                return 0;
            }
            for (int64_t k = 0; k < s->n_steps; k++) {
                const double before = v;
                v = step(s->step_ops[k], v, s->operands[k * d + j]);
                if (!s->rows_double) v = (double)(float)v;
                if (isfinite(before) && !isfinite(v)) return 0;
            }
            if (s->product_double) ((double *)scratch)[i] = v;
            else ((float *)scratch)[i] = (float)v;
        }
    }
    return 1;
}

#ifdef HAVE_AVX512_DISPATCH
/* prepare_rows, eight values at a time: the same IEEE operations on each value (a float32
 * step computed in double and rounded, as (double)(float) does), the same refusals. The
 * rows are read as one run of n x n_features values: the operands come repeated to
 * ``period`` values (a multiple of n_features and of 16), so that no vector straddles a
 * repetition and only the run's last vector is masked (masked stores are slow on some
 * CPUs); its lanes past the run's end compute nothing. */
__attribute__((target("avx512f")))
static int prepare_rows_avx512(const linear_spec *s, const void *X, int64_t n, void *scratch) {
    const int64_t total = n * s->n_features, period = s->period;
    const __m512d limit = _mm512_set1_pd(s->limit), infinity = _mm512_set1_pd(INFINITY);
    int64_t at = 0;  /* the position in the operands' period */
    for (int64_t i = 0; i < total; i += 8) {
        const __mmask8 lanes = total - i >= 8 ? 0xFF : (__mmask8)((1u << (total - i)) - 1u);
        __m512d v = s->rows_double
            ? _mm512_maskz_loadu_pd(lanes, (const double *)X + i)
            : _mm512_cvtps_pd(_mm512_castps512_ps256(
                  _mm512_maskz_loadu_ps(lanes, (const float *)X + i)));
        const __mmask8 nan = _mm512_mask_cmp_pd_mask(lanes, v, v, _CMP_UNORD_Q);
        if (nan && (s->check & CHECK_NAN)) return 0;
        if ((s->check & CHECK_RANGE)
            && _mm512_mask_cmp_pd_mask(lanes, _mm512_abs_pd(v), limit, _CMP_GT_OQ))
            return 0;
        for (int64_t k = 0; k < s->n_steps; k++) {
            const __m512d before = v;
            const __m512d operand = _mm512_loadu_pd(s->tiled_operands + k * period + at);
            switch (s->step_ops[k]) {
            case OP_ADD: v = _mm512_add_pd(v, operand); break;
            case OP_SUB: v = _mm512_sub_pd(v, operand); break;
            case OP_MUL: v = _mm512_mul_pd(v, operand); break;
            default: v = _mm512_div_pd(v, operand); break;
            }
            if (!s->rows_double) v = _mm512_cvtps_pd(_mm512_cvtpd_ps(v));
            const __mmask8 finite_before =
                _mm512_mask_cmp_pd_mask(lanes, _mm512_abs_pd(before), infinity, _CMP_LT_OQ);
            if (finite_before & ~_mm512_cmp_pd_mask(_mm512_abs_pd(v), infinity, _CMP_LT_OQ))
                return 0;
        }
        if (s->product_double) {
            if (lanes == 0xFF) _mm512_storeu_pd((double *)scratch + i, v);
            else _mm512_mask_storeu_pd((double *)scratch + i, lanes, v);
        } else {
            const __m256 floats = _mm512_cvtpd_ps(v);
            if (lanes == 0xFF) _mm256_storeu_ps((float *)scratch + i, floats);
            else _mm512_mask_storeu_ps((float *)scratch + i, (__mmask16)lanes,
                                       _mm512_castps256_ps512(floats));
        }
        at = at + 8 == period ? 0 : at + 8;
    }
    return 1;
}

/* The low 32 bits of each 64-bit lane: a float mask from a double one. */
__attribute__((target("avx2")))
static inline __m128i float_lanes(__m256i wide) {
    return _mm256_castsi256_si128(_mm256_permutevar8x32_epi32(wide, _mm256_setr_epi32(0, 2, 4, 6, 0, 0, 0, 0)));
}

/* prepare_rows_avx512 with AVX2, four values at a time (the last vector's lanes past the
 * run's end load zeros and are left out of every test). */
__attribute__((target("avx2")))
static int prepare_rows_avx2(const linear_spec *s, const void *X, int64_t n, void *scratch) {
    const int64_t total = n * s->n_features, period = s->period;
    const __m256d limit = _mm256_set1_pd(s->limit), infinity = _mm256_set1_pd(INFINITY);
    const __m256d sign = _mm256_set1_pd(-0.0);
    int64_t at = 0;
    for (int64_t i = 0; i < total; i += 4) {
        const int64_t left = total - i < 4 ? total - i : 4;
        const int lanes = (1 << left) - 1;  /* movemask bits of the run's values */
        const __m256i wide = _mm256_cmpgt_epi64(_mm256_set1_epi64x(left),
                                                _mm256_setr_epi64x(0, 1, 2, 3));
        __m256d v;
        if (s->rows_double)
            v = left == 4 ? _mm256_loadu_pd((const double *)X + i)
                          : _mm256_maskload_pd((const double *)X + i, wide);
        else
            v = _mm256_cvtps_pd(left == 4 ? _mm_loadu_ps((const float *)X + i)
                                          : _mm_maskload_ps((const float *)X + i,
                                                            float_lanes(wide)));
        if ((s->check & CHECK_NAN)
            && (_mm256_movemask_pd(_mm256_cmp_pd(v, v, _CMP_UNORD_Q)) & lanes))
            return 0;
        if ((s->check & CHECK_RANGE) && (_mm256_movemask_pd(
                _mm256_cmp_pd(_mm256_andnot_pd(sign, v), limit, _CMP_GT_OQ)) & lanes))
            return 0;
        for (int64_t k = 0; k < s->n_steps; k++) {
            const __m256d before = v;
            const __m256d operand = _mm256_loadu_pd(s->tiled_operands + k * period + at);
            switch (s->step_ops[k]) {
            case OP_ADD: v = _mm256_add_pd(v, operand); break;
            case OP_SUB: v = _mm256_sub_pd(v, operand); break;
            case OP_MUL: v = _mm256_mul_pd(v, operand); break;
            default: v = _mm256_div_pd(v, operand); break;
            }
            if (!s->rows_double) v = _mm256_cvtps_pd(_mm256_cvtpd_ps(v));
            const int finite_before = _mm256_movemask_pd(
                _mm256_cmp_pd(_mm256_andnot_pd(sign, before), infinity, _CMP_LT_OQ));
            const int finite_after = _mm256_movemask_pd(
                _mm256_cmp_pd(_mm256_andnot_pd(sign, v), infinity, _CMP_LT_OQ));
            if (finite_before & ~finite_after & lanes) return 0;
        }
        if (s->product_double) {
            if (left == 4) _mm256_storeu_pd((double *)scratch + i, v);
            else _mm256_maskstore_pd((double *)scratch + i, wide, v);
        } else if (left == 4) {
            _mm_storeu_ps((float *)scratch + i, _mm256_cvtpd_ps(v));
        } else {
            _mm_maskstore_ps((float *)scratch + i, float_lanes(wide), _mm256_cvtpd_ps(v));
        }
        at = at + 4 == period ? 0 : at + 4;
    }
    return 1;
}

/* The rows of a float32 chain stepped in float32 itself, sixteen values at a time, as one
 * run like prepare_rows_avx512. The same answers as stepping in double and rounding (as
 * the forms above do): every operand is a float32 value (linear_entry.py checks), and a
 * float32 +, -, * or / is the double one rounded, since a double holds more than twice a
 * float's digits; float32 division takes a fraction of double division's time. The range
 * check reads "beyond float32's largest value": the source's limit is that large or
 * larger (float32's or float64's), which no finite float32 exceeds. */
__attribute__((target("avx512f")))
static int prepare_floats_avx512(const linear_spec *s, const float *X, int64_t n,
                                 void *scratch) {
    const int64_t total = n * s->n_features, period = s->period;
    const __m512 infinity = _mm512_set1_ps(INFINITY);
    int64_t at = 0;  /* the position in the operands' period */
    for (int64_t i = 0; i < total; i += 16) {
        const __mmask16 lanes =
            total - i >= 16 ? 0xFFFF : (__mmask16)((1u << (total - i)) - 1u);
        __m512 v = _mm512_maskz_loadu_ps(lanes, X + i);
        if ((s->check & CHECK_NAN) && _mm512_mask_cmp_ps_mask(lanes, v, v, _CMP_UNORD_Q))
            return 0;
        if ((s->check & CHECK_RANGE)
            && _mm512_mask_cmp_ps_mask(lanes, _mm512_abs_ps(v), infinity, _CMP_EQ_OQ))
            return 0;
        for (int64_t k = 0; k < s->n_steps; k++) {
            const __m512 before = v;
            const __m512 operand = _mm512_loadu_ps(s->float_operands + k * period + at);
            switch (s->step_ops[k]) {
            case OP_ADD: v = _mm512_add_ps(v, operand); break;
            case OP_SUB: v = _mm512_sub_ps(v, operand); break;
            case OP_MUL: v = _mm512_mul_ps(v, operand); break;
            default: v = _mm512_div_ps(v, operand); break;
            }
            const __mmask16 finite_before =
                _mm512_mask_cmp_ps_mask(lanes, _mm512_abs_ps(before), infinity, _CMP_LT_OQ);
            if (finite_before & ~_mm512_cmp_ps_mask(_mm512_abs_ps(v), infinity, _CMP_LT_OQ))
                return 0;
        }
        if (s->product_double) {
            double *out = (double *)scratch + i;
            const __m512d low = _mm512_cvtps_pd(_mm512_castps512_ps256(v));
            const __m512d high = _mm512_cvtps_pd(_mm256_castpd_ps(
                _mm512_extractf64x4_pd(_mm512_castps_pd(v), 1)));
            if (lanes == 0xFFFF) {
                _mm512_storeu_pd(out, low);
                _mm512_storeu_pd(out + 8, high);
            } else {
                _mm512_mask_storeu_pd(out, (__mmask8)lanes, low);
                _mm512_mask_storeu_pd(out + 8, (__mmask8)(lanes >> 8), high);
            }
        } else if (lanes == 0xFFFF) {
            _mm512_storeu_ps((float *)scratch + i, v);
        } else {
            _mm512_mask_storeu_ps((float *)scratch + i, lanes, v);
        }
        at = at + 16 == period ? 0 : at + 16;
    }
    return 1;
}

/* prepare_floats_avx512 with AVX2, eight values at a time; the last vector's lanes past
 * the run's end load zeros and are left out of every test. */
__attribute__((target("avx2")))
static int prepare_floats_avx2(const linear_spec *s, const float *X, int64_t n,
                               void *scratch) {
    const int64_t total = n * s->n_features, period = s->period;
    const __m256 infinity = _mm256_set1_ps(INFINITY), sign = _mm256_set1_ps(-0.0f);
    int64_t at = 0;
    for (int64_t i = 0; i < total; i += 8) {
        const int64_t left = total - i < 8 ? total - i : 8;
        const int lanes = (1 << left) - 1;  /* movemask bits of the run's values */
        const __m256i mask = _mm256_cmpgt_epi32(_mm256_set1_epi32((int)left),
                                                _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
        __m256 v = left == 8 ? _mm256_loadu_ps(X + i) : _mm256_maskload_ps(X + i, mask);
        if ((s->check & CHECK_NAN)
            && (_mm256_movemask_ps(_mm256_cmp_ps(v, v, _CMP_UNORD_Q)) & lanes))
            return 0;
        if ((s->check & CHECK_RANGE) && (_mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, v), infinity, _CMP_EQ_OQ)) & lanes))
            return 0;
        for (int64_t k = 0; k < s->n_steps; k++) {
            const __m256 before = v;
            const __m256 operand = _mm256_loadu_ps(s->float_operands + k * period + at);
            switch (s->step_ops[k]) {
            case OP_ADD: v = _mm256_add_ps(v, operand); break;
            case OP_SUB: v = _mm256_sub_ps(v, operand); break;
            case OP_MUL: v = _mm256_mul_ps(v, operand); break;
            default: v = _mm256_div_ps(v, operand); break;
            }
            const int finite_before = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, before), infinity, _CMP_LT_OQ));
            const int finite_after = _mm256_movemask_ps(
                _mm256_cmp_ps(_mm256_andnot_ps(sign, v), infinity, _CMP_LT_OQ));
            if (finite_before & ~finite_after & lanes) return 0;
        }
        if (s->product_double) {
            double *out = (double *)scratch + i;
            const __m256d low = _mm256_cvtps_pd(_mm256_castps256_ps128(v));
            const __m256d high = _mm256_cvtps_pd(_mm256_extractf128_ps(v, 1));
            if (left == 8) {
                _mm256_storeu_pd(out, low);
                _mm256_storeu_pd(out + 4, high);
            } else {
                const __m256i low_lanes = _mm256_cvtepi32_epi64(_mm256_castsi256_si128(mask));
                const __m256i high_lanes =
                    _mm256_cvtepi32_epi64(_mm256_extracti128_si256(mask, 1));
                _mm256_maskstore_pd(out, low_lanes, low);
                _mm256_maskstore_pd(out + 4, high_lanes, high);
            }
        } else if (left == 8) {
            _mm256_storeu_ps((float *)scratch + i, v);
        } else {
            _mm256_maskstore_ps((float *)scratch + i, mask, v);
        }
        at = at + 8 == period ? 0 : at + 8;
    }
    return 1;
}
#endif

/* The form this CPU prepares rows with (SIMD_*; tests read it). */
int64_t woodstar_linear_simd(void) { return simd_form(); }

/* Prepare rows with at most ``level`` (tests check every form on one CPU); returns the
 * form now taken. */
int64_t woodstar_linear_limit_simd(int64_t level) { return simd_limit(level); }

static int prepare(const linear_spec *s, const void *X, int64_t n, void *scratch) {
#ifdef HAVE_AVX512_DISPATCH
    const int64_t simd = simd_form();
    if (simd == SIMD_AVX512)
        return s->steps_float ? prepare_floats_avx512(s, X, n, scratch)
                              : prepare_rows_avx512(s, X, n, scratch);
    if (simd == SIMD_AVX2)
        return s->steps_float ? prepare_floats_avx2(s, X, n, scratch)
                              : prepare_rows_avx2(s, X, n, scratch);
#endif
    return prepare_rows(s, X, n, scratch);
}

/* The input check alone, for rows the product takes where they lie (no step before it,
 * already of the product's dtype): the refusals of prepare_rows, as flags (CHECK_NAN:
 * a NaN; CHECK_RANGE: a value above the limit) over the whole run. The limit is a
 * dtype's largest finite value: a float value exceeds float64's only if it is infinite,
 * which is what exceeding float32's means too, so floats compare in float. */
#define DEFINE_CHECK_SCALAR(NAME, T, ABS)                                                  \
static int NAME(const T *x, int64_t count, T limit) {                                      \
    int nan = 0, large = 0;                                                                \
    for (int64_t i = 0; i < count; i++) {                                                  \
        nan |= x[i] != x[i];                                                               \
        large |= ABS(x[i]) > limit;  /* false for NaN */                                   \
    }                                                                                      \
    return (nan ? CHECK_NAN : 0) | (large ? CHECK_RANGE : 0);                              \
}
DEFINE_CHECK_SCALAR(check_doubles, double, fabs)
DEFINE_CHECK_SCALAR(check_floats, float, fabsf)

#ifdef HAVE_AVX512_DISPATCH
/* Vector forms: whether every value v has |v| <= limit (false for NaN as for a large
 * value), four vectors at a time so that no test waits on the last; where one fails,
 * the scalar loop says which refusal it is. */
#define DEFINE_CHECK_AVX512(NAME, T, LANES, MASK, VEC, SUFFIX, SCALAR)                     \
__attribute__((target("avx512f")))                                                         \
static int NAME(const T *x, int64_t count, T limit) {                                      \
    const VEC top = _mm512_set1_##SUFFIX(limit);                                           \
    MASK bad[4] = {0, 0, 0, 0};                                                            \
    int64_t i = 0;                                                                         \
    for (; i + 4 * LANES <= count; i += 4 * LANES)                                         \
        for (int k = 0; k < 4; k++)                                                        \
            bad[k] |= _mm512_cmp_##SUFFIX##_mask(                                          \
                _mm512_abs_##SUFFIX(_mm512_loadu_##SUFFIX(x + i + k * LANES)), top, _CMP_NLE_UQ);\
    for (; i < count; i += LANES) {                                                        \
        const MASK lanes = count - i >= LANES ? (MASK)~0u                                  \
                                              : (MASK)((1u << (count - i)) - 1u);          \
        bad[0] |= _mm512_mask_cmp_##SUFFIX##_mask(                                         \
            lanes, _mm512_abs_##SUFFIX(_mm512_maskz_loadu_##SUFFIX(lanes, x + i)), top,    \
            _CMP_NLE_UQ);                                                                  \
    }                                                                                      \
    return (bad[0] | bad[1] | bad[2] | bad[3]) ? SCALAR(x, count, limit) : 0;              \
}
DEFINE_CHECK_AVX512(check_doubles_avx512, double, 8, __mmask8, __m512d, pd, check_doubles)
DEFINE_CHECK_AVX512(check_floats_avx512, float, 16, __mmask16, __m512, ps, check_floats)

/* AVX2: whole vectors, then the scalar loop for the rest. */
#define DEFINE_CHECK_AVX2(NAME, T, LANES, VEC, SUFFIX, SCALAR)                             \
__attribute__((target("avx2")))                                                            \
static int NAME(const T *x, int64_t count, T limit) {                                      \
    const VEC top = _mm256_set1_##SUFFIX(limit), sign = _mm256_set1_##SUFFIX(-0.0);        \
    VEC bad[4];                                                                            \
    for (int k = 0; k < 4; k++) bad[k] = _mm256_setzero_##SUFFIX();                        \
    int64_t i = 0;                                                                         \
    for (; i + 4 * LANES <= count; i += 4 * LANES)                                         \
        for (int k = 0; k < 4; k++)                                                        \
            bad[k] = _mm256_or_##SUFFIX(bad[k], _mm256_cmp_##SUFFIX(_mm256_andnot_##SUFFIX(\
                sign, _mm256_loadu_##SUFFIX(x + i + k * LANES)), top, _CMP_NLE_UQ));       \
    const VEC any = _mm256_or_##SUFFIX(_mm256_or_##SUFFIX(bad[0], bad[1]),                 \
                                       _mm256_or_##SUFFIX(bad[2], bad[3]));                \
    return _mm256_movemask_##SUFFIX(any) ? SCALAR(x, count, limit)                         \
                                         : SCALAR(x + i, count - i, limit);                \
}
DEFINE_CHECK_AVX2(check_doubles_avx2, double, 4, __m256d, pd, check_doubles)
DEFINE_CHECK_AVX2(check_floats_avx2, float, 8, __m256, ps, check_floats)
#endif

static int check_rows(const linear_spec *s, const void *X, int64_t n) {
    if (!s->check) return 1;
    const int64_t count = n * s->n_features;
    const float float_limit = s->limit >= (double)FLT_MAX ? FLT_MAX : (float)s->limit;
    int found;
#ifdef HAVE_AVX512_DISPATCH
    const int64_t simd = simd_form();
    if (simd == SIMD_AVX512)
        found = s->rows_double ? check_doubles_avx512(X, count, s->limit)
                               : check_floats_avx512(X, count, float_limit);
    else if (simd == SIMD_AVX2)
        found = s->rows_double ? check_doubles_avx2(X, count, s->limit)
                               : check_floats_avx2(X, count, float_limit);
    else
#endif
    found = s->rows_double ? check_doubles(X, count, s->limit)
                           : check_floats(X, count, float_limit);
    return !(found & s->check);
}

/* ``X @ coef.T`` as NumPy's matmul computes it for these shapes, into ``sums`` (values of
 * the product's dtype). */
static int product(const linear_spec *s, const void *rows, int64_t n, void *sums) {
    const int64_t d = s->n_features, k = s->n_outputs;
    if (k == 1 && n == 1) {  /* row @ column: NumPy's dot */
        if (s->product_double) ((double *)sums)[0] = ((ddot_fn)s->dot)(d, rows, 1, s->coef, 1);
        else ((float *)sums)[0] = ((sdot_fn)s->dot)(d, rows, 1, s->coef, 1);
        return 1;
    }
    /* matrix @ column (A = the rows) or row @ matrix (A = the coefficients): gemv.
     * NumPy passes a C-ordered A as column-major with lda = d, and the transpose of a
     * Fortran-ordered one as row-major with lda = its number of rows. */
    if (k > 1 && n > 1) {
        /* matrix @ matrix: NumPy's gemm, row-major, the rows untransposed (lda = d); the
         * coefficients' transpose is C-ordered for a Fortran-ordered matrix (no
         * transpose, ldb = k), else Fortran-ordered (transposed, ldb = d). */
        const int trans = s->coef_fortran ? NO_TRANS : TRANS;
        const int64_t ldb = s->coef_fortran ? k : d;
        if (s->product_double)
            ((dgemm_fn)s->gemm)(ROW_MAJOR, NO_TRANS, trans, n, k, d, 1.0, rows, d, s->coef,
                                ldb, 0.0, sums, k);
        else
            ((sgemm_fn)s->gemm)(ROW_MAJOR, NO_TRANS, trans, n, k, d, 1.0f, rows, d, s->coef,
                                ldb, 0.0f, sums, k);
        return 1;
    }
    const void *a = k == 1 ? rows : s->coef, *x = k == 1 ? s->coef : rows;
    const int64_t m = k == 1 ? n : k;
    const int row_major = k > 1 && s->coef_fortran;
    const int order = row_major ? ROW_MAJOR : COL_MAJOR;
    const int64_t lda = row_major ? k : d;
    if (s->product_double)
        ((dgemv_fn)s->gemv)(order, TRANS, d, m, 1.0, a, lda, x, 1, 0.0, sums, 1);
    else
        ((sgemv_fn)s->gemv)(order, TRANS, d, m, 1.0f, a, lda, x, 1, 0.0f, sums, 1);
    return 1;
}

/* raw (n x n_outputs) and, for the links computed here, the transformed scores, each in
 * the raw dtype. ``rows`` (n x n_features) and ``sums`` (n x n_outputs values of the
 * product's dtype) are the caller's buffers, or NULL for buffers on the stack, which
 * hold up to MAX_CELLS row values and 256 scores (rows with no step to take, already of
 * the product's dtype, need no buffer: the product reads them from X). Returns -1 when
 * done, 0 when the caller's full path must run the call. */
int64_t woodstar_linear_predict(const linear_spec *s, const void *X, int64_t n, void *raw,
                                void *transformed, void *rows, void *sums) {
    const int64_t d = s->n_features, k = s->n_outputs;
    double row_cells[rows ? 1 : MAX_CELLS], score_cells[sums ? 1 : 256];
    if (n < 1) return 0;
    if (s->n_steps == 0 && s->rows_double == s->product_double) {
        if (!check_rows(s, X, n)) return 0;
        rows = (void *)X;  /* the values prepare_rows would copy, bit for bit */
    } else if (!rows) {
        if (n * d > MAX_CELLS) return 0;
        rows = row_cells;
    }
    if (!sums) {
        if (n * k > 256) return 0;
        sums = score_cells;
    }
    if (rows != X && !prepare(s, X, n, rows)) return 0;
    if (!product(s, rows, n, sums)) return 0;
    for (int64_t i = 0; i < n * k; i++) {
        const double sum = s->product_double ? ((const double *)sums)[i]
                                             : (double)((const float *)sums)[i];
        const double z = sum + s->intercept[i % k];  /* exact in double, then rounded */
        if (s->raw_double) ((double *)raw)[i] = z;
        else ((float *)raw)[i] = (float)z;
    }
    if (s->link != LINK_SIGMOID_BINARY) return -1;
    for (int64_t i = 0; i < n; i++) {  /* scipy's expit, then (1 - p, p) */
        if (s->raw_double) {
            const double z = ((const double *)raw)[i * k], p = 1.0 / (1.0 + exp(-z));
            ((double *)transformed)[2 * i] = 1.0 - p;
            ((double *)transformed)[2 * i + 1] = p;
        } else {
            const float z = ((const float *)raw)[i * k], p = 1.0f / (1.0f + expf(-z));
            ((float *)transformed)[2 * i] = 1.0f - p;
            ((float *)transformed)[2 * i + 1] = p;
        }
    }
    return -1;
}
