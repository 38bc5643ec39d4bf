/* The k nearest rows as scikit-learn's brute-force search (ArgKmin, scikit-learn 1.9)
 * keeps and orders them, replayed over reduced distances computed beforehand: its
 * fixed-size max-heap (sklearn/utils/_heap.pyx heap_push), the order its strategies
 * push candidates in, and its final introsort (sklearn/utils/_sorting.pyx
 * simultaneous_sort, two-way partition). Which rows survive a tie at the k-th distance
 * and the order of tied rows both follow from these steps, so each is repeated as is.
 * Built with -ffp-contract=off; only comparisons and copies of doubles happen here. */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

/* heap_push: a candidate enters only when strictly below the root, replaces it, and
 * descends towards the larger child (the left one when both are equal). */
static void heap_push(double *values, int64_t *indices, int64_t size, double val,
                      int64_t val_idx) {
    int64_t current, left, right, swap_idx;
    if (val >= values[0]) return;
    values[0] = val;
    indices[0] = val_idx;
    current = 0;
    for (;;) {
        left = 2 * current + 1;
        right = left + 1;
        if (left >= size) break;
        if (right >= size) {
            if (values[left] > val) swap_idx = left;
            else break;
        } else if (values[left] >= values[right]) {
            if (val < values[left]) swap_idx = left;
            else break;
        } else {
            if (val < values[right]) swap_idx = right;
            else break;
        }
        values[current] = values[swap_idx];
        indices[current] = indices[swap_idx];
        current = swap_idx;
    }
    values[current] = val;
    indices[current] = val_idx;
}

static void swap(double *values, int64_t *indices, int64_t i, int64_t j) {
    double v = values[i];
    int64_t x = indices[i];
    values[i] = values[j];
    values[j] = v;
    indices[i] = indices[j];
    indices[j] = x;
}

static void insertion_sort(double *values, int64_t *indices, int64_t n) {
    for (int64_t i = 1; i < n; i++) {
        double temp_val = values[i];
        int64_t temp_idx = indices[i], j = i;
        while (j > 0 && values[j - 1] > temp_val) {
            values[j] = values[j - 1];
            indices[j] = indices[j - 1];
            j--;
        }
        values[j] = temp_val;
        indices[j] = temp_idx;
    }
}

static void sift_down(double *values, int64_t *indices, int64_t start, int64_t end) {
    int64_t child, maxind, root = start;
    for (;;) {
        child = root * 2 + 1;
        maxind = root;
        if (child < end && values[maxind] < values[child]) maxind = child;
        if (child + 1 < end && values[maxind] < values[child + 1]) maxind = child + 1;
        if (maxind == root) break;
        swap(values, indices, root, maxind);
        root = maxind;
    }
}

static void heapsort(double *values, int64_t *indices, int64_t n) {
    int64_t start = (n - 2) / 2, end = n;
    for (;;) {
        sift_down(values, indices, start, end);
        if (start == 0) break;
        start--;
    }
    end = n - 1;
    while (end > 0) {
        swap(values, indices, 0, end);
        sift_down(values, indices, 0, end);
        end--;
    }
}

static double inplace_median3(double *values, int64_t *indices, int64_t n) {
    int64_t pivot_idx = n / 2;
    if (values[0] > values[n - 1]) swap(values, indices, 0, n - 1);
    if (values[n - 1] > values[pivot_idx]) {
        swap(values, indices, n - 1, pivot_idx);
        if (values[0] > values[n - 1]) swap(values, indices, 0, n - 1);
    }
    return values[n - 1];
}

static void introsort_2way(double *values, int64_t *indices, int64_t n, int64_t maxd) {
    while (n > 15) {
        if (maxd <= 0) {
            heapsort(values, indices, n);
            return;
        }
        maxd--;
        double pivot = inplace_median3(values, indices, n);
        int64_t i = 1, j = n - 2;
        for (;;) {
            while (i <= j && values[i] < pivot) i++;
            while (i <= j && values[j] > pivot) j--;
            if (i >= j) break;
            swap(values, indices, i, j);
            i++;
            j--;
        }
        int64_t pivot_idx = i;
        swap(values, indices, pivot_idx, n - 1);
        introsort_2way(values, indices, pivot_idx, maxd);
        values += pivot_idx + 1;
        indices += pivot_idx + 1;
        n -= pivot_idx + 1;
    }
    insertion_sort(values, indices, n);
}

static void simultaneous_sort(double *values, int64_t *indices, int64_t n) {
    if (n == 0) return;
    introsort_2way(values, indices, n, 2 * (int64_t)log2((double)n));
}

/* For each of n_rows rows of rdist (n_rows, n_train), the k kept (reduced distance,
 * training index) pairs in scikit-learn's final order, into values and indices
 * (n_rows, k).
 *
 * on_y_threads == 0: "parallel on X": each row's candidates pushed in training-index
 * order into the row's heap (distances DBL_MAX, indices 0 to begin with).
 * on_y_threads == T > 0: "parallel on Y" with T threads in scikit-learn's team: the
 * training rows in chunks of chunk rows, the chunks split statically over
 * min(T, n_chunks) threads (OpenMP's static schedule: contiguous shares, the first
 * n_chunks % threads threads one chunk more); each thread fills its own heaps
 * (DBL_MAX, -1), then every thread's heap is pushed, thread after thread and in its
 * array order, into the row's heap. Returns 0, or -1 when scratch space is missing. */
int64_t woodstar_knn_argkmin(const double *rdist, int64_t n_rows, int64_t n_train, int64_t k,
                             int64_t chunk, int64_t on_y_threads, double *values,
                             int64_t *indices) {
    int64_t y_chunk = n_train < chunk ? n_train : chunk;
    int64_t n_chunks = y_chunk > 0 ? (n_train + y_chunk - 1) / y_chunk : 0;
    int64_t threads = on_y_threads < n_chunks ? on_y_threads : n_chunks;
    double *scratch_values = NULL;
    int64_t *scratch_indices = NULL;
    if (on_y_threads > 0 && threads > 0) {
        scratch_values = malloc(sizeof(double) * threads * k);
        scratch_indices = malloc(sizeof(int64_t) * threads * k);
        if (!scratch_values || !scratch_indices) {
            free(scratch_values);
            free(scratch_indices);
            return -1;
        }
    }
    for (int64_t r = 0; r < n_rows; r++) {
        const double *row = rdist + r * n_train;
        double *heap_values = values + r * k;
        int64_t *heap_indices = indices + r * k;
        for (int64_t j = 0; j < k; j++) {
            heap_values[j] = DBL_MAX;
            heap_indices[j] = 0;
        }
        if (on_y_threads <= 0 || threads <= 0) {
            for (int64_t j = 0; j < n_train; j++)
                heap_push(heap_values, heap_indices, k, row[j], j);
        } else {
            int64_t share = n_chunks / threads, extra = n_chunks % threads;
            for (int64_t t = 0; t < threads; t++) {
                double *thread_values = scratch_values + t * k;
                int64_t *thread_indices = scratch_indices + t * k;
                for (int64_t j = 0; j < k; j++) {
                    thread_values[j] = DBL_MAX;
                    thread_indices[j] = -1;
                }
                int64_t count = share + (t < extra), first = share * t + (t < extra ? t : extra);
                int64_t start = first * y_chunk, stop = (first + count) * y_chunk;
                if (stop > n_train) stop = n_train;
                for (int64_t j = start; j < stop; j++)
                    heap_push(thread_values, thread_indices, k, row[j], j);
            }
            for (int64_t t = 0; t < threads; t++)
                for (int64_t j = 0; j < k; j++)
                    heap_push(heap_values, heap_indices, k, scratch_values[t * k + j],
                              scratch_indices[t * k + j]);
        }
        simultaneous_sort(heap_values, heap_indices, k);
    }
    free(scratch_values);
    free(scratch_indices);
    return 0;
}

/* simultaneous_sort alone, for tests against scikit-learn's own. */
void woodstar_simultaneous_sort(double *values, int64_t *indices, int64_t n) {
    simultaneous_sort(values, indices, n);
}

/* ------------------------------------------------------------------ trees
 * The KD tree's and the ball tree's depth-first query (sklearn/neighbors/
 * _binary_tree.pxi.tp, _query_single_depthfirst) over the fitted tree's arrays: a node
 * is skipped when its lower bound exceeds the heap's largest value, a leaf pushes its
 * rows in the tree's order, and of two children the one with the smaller bound (the
 * left one on equal bounds) is searched first. Distances, bounds and their conversions
 * as scikit-learn's DistanceMetric and tree modules compute them, libm's pow included. */
enum { EUCLIDEAN = 0, MANHATTAN = 1, CHEBYSHEV = 2, MINKOWSKI = 3 };
enum { KD_TREE = 0, BALL_TREE = 1 };

typedef struct {
    const double *data;       /* (n_train, n_features) */
    const int64_t *idx_array; /* the tree's permutation of the training rows */
    const int64_t *nodes;     /* (n_nodes, 3): idx_start, idx_end, is_leaf */
    const double *radius;     /* (n_nodes,) */
    const double *bounds;     /* kd: (2, n_nodes, F) lower, upper; ball: (n_nodes, F) centroids */
    int64_t n_nodes, n_features, kind, metric, k;
    double p;
} tree_t;

static double rdist(const tree_t *t, const double *x1, const double *x2) {
    double d = 0.0, tmp;
    for (int64_t j = 0; j < t->n_features; j++) {
        switch (t->metric) {
        case EUCLIDEAN:
            tmp = x1[j] - x2[j];
            d += tmp * tmp;
            break;
        case MANHATTAN:
            d += fabs(x1[j] - x2[j]);
            break;
        case CHEBYSHEV:
            d = fmax(d, fabs(x1[j] - x2[j]));
            break;
        default:
            d += pow(fabs(x1[j] - x2[j]), t->p);
        }
    }
    return d;
}

static double min_rdist(const tree_t *t, int64_t node, const double *pt) {
    int64_t F = t->n_features;
    if (t->kind == KD_TREE) {
        const double *lower = t->bounds + node * F, *upper = t->bounds + (t->n_nodes + node) * F;
        double d, d_lo, d_hi, result = 0.0;
        for (int64_t j = 0; j < F; j++) {
            d_lo = lower[j] - pt[j];
            d_hi = pt[j] - upper[j];
            d = (d_lo + fabs(d_lo)) + (d_hi + fabs(d_hi));
            if (t->p == INFINITY) result = fmax(result, 0.5 * d);
            else result += pow(0.5 * d, t->p);
        }
        return result;
    }
    double dist = rdist(t, pt, t->bounds + node * F), min_dist;
    if (t->metric == EUCLIDEAN) dist = sqrt(dist);
    else if (t->metric == MINKOWSKI) dist = pow(dist, 1. / t->p);
    min_dist = fmax(0, dist - t->radius[node]);
    if (t->metric == EUCLIDEAN) return min_dist * min_dist;
    if (t->metric == MINKOWSKI) return pow(min_dist, t->p);
    return min_dist;
}

static void query_depthfirst(const tree_t *t, int64_t node, const double *pt, double *values,
                             int64_t *indices, double bound) {
    const int64_t *info = t->nodes + 3 * node;
    if (bound > values[0]) return;
    if (info[2]) {
        for (int64_t i = info[0]; i < info[1]; i++) {
            int64_t row = t->idx_array[i];
            heap_push(values, indices, t->k, rdist(t, pt, t->data + row * t->n_features), row);
        }
        return;
    }
    int64_t i1 = 2 * node + 1, i2 = i1 + 1;
    double bound_1 = min_rdist(t, i1, pt), bound_2 = min_rdist(t, i2, pt);
    if (bound_1 <= bound_2) {
        query_depthfirst(t, i1, pt, values, indices, bound_1);
        query_depthfirst(t, i2, pt, values, indices, bound_2);
    } else {
        query_depthfirst(t, i2, pt, values, indices, bound_2);
        query_depthfirst(t, i1, pt, values, indices, bound_1);
    }
}

/* For each of n_rows query rows X (n_rows, n_features): the k kept (reduced distance,
 * training index) pairs in scikit-learn's final order, into values and indices. */
void woodstar_knn_tree_query(const double *X, int64_t n_rows, const double *data,
                             int64_t n_features, const int64_t *idx_array, const int64_t *nodes,
                             const double *radius, const double *bounds, int64_t n_nodes,
                             int64_t kind, int64_t metric, double p, int64_t k, double *values,
                             int64_t *indices) {
    tree_t t = {data, idx_array, nodes, radius, bounds, n_nodes, n_features, kind, metric, k, p};
    for (int64_t r = 0; r < n_rows; r++) {
        const double *pt = X + r * n_features;
        double *heap_values = values + r * k;
        int64_t *heap_indices = indices + r * k;
        for (int64_t j = 0; j < k; j++) {
            heap_values[j] = INFINITY;
            heap_indices[j] = 0;
        }
        query_depthfirst(&t, 0, pt, heap_values, heap_indices, min_rdist(&t, 0, pt));
        simultaneous_sort(heap_values, heap_indices, k);
    }
}

/* Reduced distances (n_rows, n_train) as scikit-learn's DistanceMetric.rdist computes
 * them, feature after feature (the brute-force search's "surrogate" distances). */
void woodstar_knn_rdist(const double *X, int64_t n_rows, const double *data, int64_t n_train,
                        int64_t n_features, int64_t metric, double p, double *out) {
    tree_t t = {data, NULL, NULL, NULL, NULL, 0, n_features, KD_TREE, metric, 0, p};
    for (int64_t r = 0; r < n_rows; r++)
        for (int64_t j = 0; j < n_train; j++)
            out[r * n_train + j] = rdist(&t, X + r * n_features, data + j * n_features);
}

/* out = pow(x, e) with libm's pow (DistanceMetric's _rdist_to_dist for Minkowski). */
void woodstar_libm_pow(const double *x, int64_t n, double e, double *out) {
    for (int64_t i = 0; i < n; i++) out[i] = pow(x[i], e);
}
