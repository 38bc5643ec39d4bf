/* One sweep of NMF's coordinate descent over W (n_samples x n_components), in place,
 * in the order of scikit-learn's _update_cdnmf_fast: the components in the given
 * permutation, the rows in order within each, the gradient's terms in order, the
 * violation summed in the arrays' precision. Built with -ffp-contract=off: a fused
 * multiply-add would round once where the source rounds twice.
 *
 * The source's min(0., grad) and max(x, 0.) are written as Cython writes its builtin
 * min and max: (grad < 0. ? grad : 0.) and (0. > x ? 0. : x).
 */
#include <math.h>
#include <stdint.h>

#define CDNMF_SWEEP(NAME, FLOATING)                                                   \
    double NAME(FLOATING *W, const FLOATING *HHt, const FLOATING *XHt,                \
                const int64_t *permutation, int64_t n_samples, int64_t n_components)  \
    {                                                                                 \
        FLOATING violation = 0;                                                       \
        for (int64_t s = 0; s < n_components; s++) {                                  \
            int64_t t = permutation[s];                                               \
            FLOATING hess = HHt[t * n_components + t];                                \
            for (int64_t i = 0; i < n_samples; i++) {                                 \
                FLOATING *w = W + i * n_components;                                   \
                FLOATING grad = -XHt[i * n_components + t];                           \
                for (int64_t r = 0; r < n_components; r++)                            \
                    grad += HHt[t * n_components + r] * w[r];                         \
                FLOATING pg = w[t] == 0 ? (grad < 0. ? grad : 0.) : grad;             \
                violation += fabs(pg);                                                \
                if (hess != 0) {                                                      \
                    FLOATING updated = w[t] - grad / hess;                            \
                    w[t] = 0. > updated ? 0. : updated;                               \
                }                                                                     \
            }                                                                         \
        }                                                                             \
        return (double)violation;                                                     \
    }

CDNMF_SWEEP(woodstar_cdnmf_sweep_f64, double)
CDNMF_SWEEP(woodstar_cdnmf_sweep_f32, float)
