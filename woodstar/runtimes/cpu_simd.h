/* The SIMD form a library of runtimes/ takes on this CPU, asked at run time so that the
 * library builds with the system's compiler and no -march and runs on any x86-64 CPU
 * (docs/architecture.md). Each library including this keeps its own answer, which
 * tests and benchmarks narrow with simd_limit to check or time a narrower form. */
#ifndef WOODSTAR_CPU_SIMD_H
#define WOODSTAR_CPU_SIMD_H
#include <stdint.h>
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define HAVE_AVX512_DISPATCH 1
#endif

#define SIMD_NONE 0
#define SIMD_AVX2 1
#define SIMD_AVX512 2
#ifndef SIMD_START
#define SIMD_START (-1)  /* unknown until asked; an A/B build may set a form */
#endif
static int simd_support = SIMD_START;

/* The widest form this CPU has (SIMD_*), or the narrower one set by simd_limit. */
static int64_t simd_form(void)
{
#ifdef HAVE_AVX512_DISPATCH
    if (simd_support < 0)
        simd_support = __builtin_cpu_supports("avx512f") ? SIMD_AVX512
                       : __builtin_cpu_supports("avx2") ? SIMD_AVX2 : SIMD_NONE;
#endif
    return simd_support < 0 ? SIMD_NONE : simd_support;
}

/* At most ``level`` from now on, in this process; returns the form now taken. */
static int64_t simd_limit(int64_t level)
{
    simd_support = -1;
    const int64_t widest = simd_form();
    simd_support = (int)(level < widest ? level : widest);
    return simd_support;
}
#endif
