/* MLAS's SGEMM accumulation, one K slice at a time: per row and output, the first
 * product rounded to float, then one fused multiply-add per next column (fmaf: rounded
 * once, as the FMA instruction MLAS issues). woodstar/ir/families/onnx_ops.py mirrors
 * the same chain in float64 steps for Torch programs; this is its fast form for NumPy
 * arrays, with the same answers. Built with -ffp-contract=off: no other fusing. */
#include <math.h>
#include <stdint.h>

/* A: (n, K) float32, B: (N, K) float32, both C order; out: (n_slices, n, N) float32. */
void woodstar_fma_slices(const float *A, int64_t n, int64_t K, const float *B, int64_t N,
                         int64_t stride, float *out) {
    int64_t slice = 0;
    for (int64_t k0 = 0; k0 < K; k0 += stride, slice++) {
        const int64_t k1 = k0 + stride < K ? k0 + stride : K;
        float *o = out + slice * n * N;
        for (int64_t i = 0; i < n; i++) {
            const float *a = A + i * K;
            for (int64_t c = 0; c < N; c++) {
                const float *b = B + c * K;
                float acc = a[k0] * b[k0];
                for (int64_t k = k0 + 1; k < k1; k++) acc = fmaf(a[k], b[k], acc);
                o[i * N + c] = acc;
            }
        }
    }
}
