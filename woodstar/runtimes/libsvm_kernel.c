/* libsvm's prediction arithmetic for dense rows, as scikit-learn's build runs it:
 * kernel values through the BLAS ddot that scikit-learn hands libsvm (passed in as a
 * function pointer), libm's exp and tanh, libsvm's powi, and decision values summed one
 * support vector at a time. Built with -ffp-contract=off: no fused multiply-adds, as
 * in scikit-learn's portable x86-64 build. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

typedef double (*ddot_fn)(int *n, double *x, int *incx, double *y, int *incy);

enum { LINEAR = 0, POLY = 1, RBF = 2, SIGMOID = 3 };

static double powi(double base, int64_t times) {
    double tmp = base, ret = 1.0;
    for (int64_t t = times; t > 0; t /= 2) {
        if (t % 2 == 1) ret *= tmp;
        tmp = tmp * tmp;
    }
    return ret;
}

/* out[r, s] = K(X[r], sv[s]); returns 0, or -1 when scratch space is missing. */
int64_t woodstar_svm_kernel(ddot_fn ddot, int64_t kernel, const double *X, int64_t n_rows,
                            const double *sv, int64_t n_sv, int64_t n_features, double gamma,
                            double coef0, int64_t degree, double *out) {
    int dim = (int)n_features, one = 1;
    double *diff = malloc(sizeof(double) * (n_features > 0 ? n_features : 1));
    if (!diff) return -1;
    for (int64_t r = 0; r < n_rows; r++) {
        double *x = (double *)X + r * n_features;
        for (int64_t s = 0; s < n_sv; s++) {
            double *y = (double *)sv + s * n_features;
            double value;
            if (kernel == RBF) {
                for (int64_t f = 0; f < n_features; f++) diff[f] = x[f] - y[f];
                double sum = ddot(&dim, diff, &one, diff, &one);
                value = exp(-gamma * sum);
            } else {
                double dot = ddot(&dim, x, &one, y, &one);
                if (kernel == LINEAR) value = dot;
                else if (kernel == POLY) value = powi(gamma * dot + coef0, degree);
                else value = tanh(gamma * dot + coef0);
            }
            out[r * n_sv + s] = value;
        }
    }
    free(diff);
    return 0;
}

/* out[r, o] = (sum over t in order of coef[o, t] * K[r, t]) + intercept[o]. */
void woodstar_in_order_scores(const double *K, int64_t n_rows, int64_t n_terms,
                              const double *coef, const double *intercept, int64_t n_out,
                              double *out) {
    for (int64_t r = 0; r < n_rows; r++) {
        const double *k = K + r * n_terms;
        for (int64_t o = 0; o < n_out; o++) {
            const double *c = coef + o * n_terms;
            double sum = 0.0;
            for (int64_t t = 0; t < n_terms; t++) sum += c[t] * k[t];
            out[r * n_out + o] = sum + intercept[o];
        }
    }
}

/* out[i] = exp(x[i]) by libm, as libsvm's sigmoid_predict calls it. */
void woodstar_libm_exp(const double *x, int64_t n, double *out) {
    for (int64_t i = 0; i < n; i++) out[i] = exp(x[i]);
}
