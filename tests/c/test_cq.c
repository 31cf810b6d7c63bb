/* test_cq.c: the CQ kernels and the FWHT against float64 dense arithmetic
 * with an explicit Hadamard matrix, and (in SIMD128 builds) every simd128
 * kernel against its scalar reference. Matrices are packed here, bit by bit,
 * from random indices and fp16 norms (splitmix64, fixed seeds). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cq_random.h"
#include "format/fp16.h"
#include "kernels/hadamard.h"

static float rng_sym(uint64_t *s) { return (float)(2.0 * rng_unit(s) - 1.0); }

/* Entry (i, j) of the normalised Sylvester Hadamard matrix of size n. */
static double hadamard(uint32_t i, uint32_t j, uint32_t n) {
    return (__builtin_popcount(i & j) & 1 ? -1.0 : 1.0) / sqrt((double)n);
}

typedef struct {
    nd_cq m;
    uint8_t *idx;   /* [rows][padded] the indices that were packed */
    double *w;      /* [rows][cols] dense weights in float64 */
    double *terms;  /* [rows][padded] |level * norm| for error bounds */
} test_matrix;

/* marker: 2, 3, 4, or 5 for ternary (2-bit crumbs, levels 0,+c,0,-c). */
static test_matrix make_matrix(uint64_t *s, uint32_t marker, uint32_t group, uint32_t rows,
                               uint32_t cols) {
    test_matrix t;
    nd_cq *m = &t.m;
    memset(&t, 0, sizeof t);
    cq_random_shape(m, s, marker, group, rows, cols);
    uint32_t padded = nd_cq_padded(m), count = 1u << m->bits;
    uint8_t *packed = calloc((size_t)rows * m->row_bytes + 1, 1);
    uint8_t *norms = malloc((size_t)rows * m->groups * 2 + 1);
    t.idx = malloc((size_t)rows * padded);
    for (size_t i = 0; i < (size_t)rows * padded; i++) {
        uint32_t v = (uint32_t)(rng_next(s) % count);
        t.idx[i] = (uint8_t)v;
        size_t bit = (i % padded) * m->bits;
        for (uint32_t b = 0; b < m->bits; b++, bit++)
            if (v >> b & 1) packed[(i / padded) * m->row_bytes + bit / 8] |= (uint8_t)(1u << bit % 8);
    }
    /* Norms misaligned by one byte, as archive bytes may be. */
    for (size_t i = 0; i < (size_t)rows * m->groups; i++) {
        uint16_t h = nd_f32_to_fp16((float)(0.05 + 4.0 * rng_unit(s)));
        norms[1 + 2 * i] = (uint8_t)h, norms[2 + 2 * i] = (uint8_t)(h >> 8);
    }
    m->packed = packed, m->norms = norms + 1;
    double *h = malloc((size_t)group * group * sizeof(double));
    for (uint32_t k = 0; k < group; k++)
        for (uint32_t j = 0; j < group; j++) h[k * group + j] = hadamard(k, j, group);
    t.w = calloc((size_t)rows * cols, sizeof(double));
    t.terms = malloc((size_t)rows * padded * sizeof(double));
    for (uint32_t r = 0; r < rows; r++)
        for (uint32_t g = 0; g < m->groups; g++) {
            double norm = nd_load_fp16(m->norms + 2 * ((size_t)r * m->groups + g));
            for (uint32_t k = 0; k < group; k++) {
                double q = m->levels[t.idx[(size_t)r * padded + g * group + k]] * norm;
                t.terms[(size_t)r * padded + g * group + k] = fabs(q);
                for (uint32_t j = 0; j < group && g * group + j < cols; j++)
                    t.w[(size_t)r * cols + g * group + j] += q * h[k * group + j];
            }
        }
    free(h);
    return t;
}

static void free_matrix(test_matrix *t) {
    free((void *)t->m.packed), free((void *)(t->m.norms - 1));
    free(t->idx), free(t->w), free(t->terms);
}

static const uint32_t markers[] = {2, 3, 4, 5};
static const uint32_t groups_[] = {16, 32, 64, 128, 256};
static const uint32_t row_counts[] = {1, 3, 15, 16, 17, 100};

/* Input widths for a group: exact, padded, narrower than one group. */
static uint32_t width_case(uint32_t group, int which) {
    return which == 0 ? 2 * group : which == 1 ? 3 * group - 5 : 3;
}

static void test_index(void) {
    uint64_t s = 1;
    for (int mi = 0; mi < 4; mi++)
        for (int gi = 0; gi < 5; gi++)
            for (int wi = 0; wi < 3; wi++) {
                test_matrix t = make_matrix(&s, markers[mi], groups_[gi], 17, width_case(groups_[gi], wi));
                uint32_t padded = nd_cq_padded(&t.m), bad = 0;
                for (uint32_t r = 0; r < 17; r++)
                    for (uint32_t k = 0; k < padded; k++)
                        bad += nd_cq_index(&t.m, r, k) != t.idx[(size_t)r * padded + k];
                CHECK(bad == 0, "bits %u group %u: %u wrong indices", markers[mi], groups_[gi], bad);
                free_matrix(&t);
            }
}

/* Every row of out[] against the dense float64 weights. */
static void check_rows(test_matrix *t, void (*row)(const nd_cq *, uint32_t, float *, float *),
                       const char *name) {
    nd_cq *m = &t->m;
    float *out = malloc((m->cols + 1) * sizeof(float)), scratch[ND_CQ_MAX_GROUP];
    double worst = 0;
    for (uint32_t r = 0; r < m->rows; r++) {
        out[m->cols] = 12345.0f; /* sentinel: padding must be dropped */
        row(m, r, out, scratch);
        CHECK(out[m->cols] == 12345.0f, "%s wrote past cols", name);
        for (uint32_t c = 0; c < m->cols; c++) {
            uint32_t g = c / m->group;
            double scale = 0;
            for (uint32_t k = 0; k < m->group; k++) scale += t->terms[(size_t)r * nd_cq_padded(m) + g * m->group + k];
            double err = fabs(out[c] - t->w[(size_t)r * m->cols + c]) / (scale / sqrt(m->group) + 1e-30);
            if (err > worst) worst = err;
        }
    }
    CHECK(worst < 4e-6, "%s bits %u group %u cols %u: relative error %g", name, m->bits, m->group,
          m->cols, worst);
    free(out);
}

static void test_row(void) {
    uint64_t s = 2;
    for (int mi = 0; mi < 4; mi++)
        for (int gi = 0; gi < 5; gi++)
            for (int wi = 0; wi < 3; wi++) {
                test_matrix t = make_matrix(&s, markers[mi], groups_[gi], 5, width_case(groups_[gi], wi));
                check_rows(&t, nd_cq_row_ref, "row_ref");
#ifdef ND_SIMD128
                check_rows(&t, nd_cq_row_simd128, "row_simd128");
#endif
                free_matrix(&t);
            }
}

typedef struct {
    float *x, *xr;  /* [n][cols] activations, [n][padded] rotated */
    double *want;   /* [n][rows] float64 W x */
    double *scale;  /* [n][rows] sum |level * norm * (Hg x)|: the size of the rounding */
} test_inputs;

static test_inputs make_inputs(uint64_t *s, const test_matrix *t, uint32_t n) {
    const nd_cq *m = &t->m;
    uint32_t padded = nd_cq_padded(m);
    test_inputs in;
    in.x = malloc((size_t)n * m->cols * sizeof(float));
    in.xr = malloc((size_t)n * padded * sizeof(float));
    in.want = calloc((size_t)n * m->rows, sizeof(double));
    in.scale = calloc((size_t)n * m->rows, sizeof(double));
    double *xd = malloc(padded * sizeof(double));
    for (uint32_t i = 0; i < n; i++) {
        float *x = in.x + (size_t)i * m->cols;
        for (uint32_t c = 0; c < m->cols; c++) x[c] = rng_sym(s);
        nd_cq_rotate(m, x, in.xr + (size_t)i * padded);
        for (uint32_t k = 0; k < padded; k++) { /* float64 rotation, for the bound only */
            uint32_t base = k / m->group * m->group;
            xd[k] = 0;
            for (uint32_t j = base; j < base + m->group && j < m->cols; j++)
                xd[k] += hadamard(k - base, j - base, m->group) * x[j];
        }
        for (uint32_t r = 0; r < m->rows; r++) {
            double *want = in.want + (size_t)i * m->rows + r, *scale = in.scale + (size_t)i * m->rows + r;
            for (uint32_t c = 0; c < m->cols; c++) *want += t->w[(size_t)r * m->cols + c] * x[c];
            for (uint32_t k = 0; k < padded; k++) *scale += t->terms[(size_t)r * padded + k] * fabs(xd[k]);
        }
    }
    free(xd);
    return in;
}

static void free_inputs(test_inputs *in) { free(in->x), free(in->xr), free(in->want), free(in->scale); }

/* Worst |got - want| / scale over n*rows outputs. */
static double worst_error(const float *got, const double *want, const double *scale, size_t count) {
    double worst = 0;
    for (size_t i = 0; i < count; i++) {
        double e = fabs(got[i] - want[i]) / (scale[i] + 1e-30);
        if (!(e <= worst)) worst = e; /* NaN counts as worst */
    }
    return worst;
}

/* A CQ matrix from the products below, with its GEMV and GEMM checked. */
static void check_products(uint64_t *s, uint32_t marker, uint32_t group, uint32_t rows, uint32_t cols) {
    enum { N = 5 };
    test_matrix t = make_matrix(s, marker, group, rows, cols);
    test_inputs in = make_inputs(s, &t, N);
    uint32_t padded = nd_cq_padded(&t.m);
    float *y = malloc(((size_t)N * rows + 1) * sizeof(float));
    float *y1 = malloc(((size_t)N * rows + 1) * sizeof(float));
    double e;
    for (uint32_t i = 0; i < N; i++) {
        y[rows] = 777.0f;
        nd_cq_gemv_ref(&t.m, in.xr + (size_t)i * padded, y);
        e = worst_error(y, in.want + (size_t)i * rows, in.scale + (size_t)i * rows, rows);
        CHECK(e < 1e-5 && y[rows] == 777.0f, "gemv_ref bits %u group %u %ux%u: %g", marker, group, rows, cols, e);
        memcpy(y1 + (size_t)i * rows, y, rows * sizeof(float));
    }
    y[(size_t)N * rows] = 777.0f;
    nd_cq_gemm_ref(&t.m, in.xr, N, y);
    e = worst_error(y, in.want, in.scale, (size_t)N * rows);
    CHECK(e < 1e-5 && y[N * rows] == 777.0f, "gemm_ref bits %u group %u %ux%u: %g", marker, group, rows, cols, e);
    /* The reference GEMM is the reference GEMV applied n times, term for term. */
    CHECK(memcmp(y, y1, (size_t)N * rows * 4) == 0,
          "gemm_ref differs from gemv_ref, bits %u group %u", marker, group);
#ifdef ND_SIMD128
    for (uint32_t i = 0; i < N; i++) {
        y[rows] = 777.0f;
        nd_cq_gemv_simd128(&t.m, in.xr + (size_t)i * padded, y);
        e = worst_error(y, in.want + (size_t)i * rows, in.scale + (size_t)i * rows, rows);
        double d = 0;
        for (uint32_t r = 0; r < rows; r++)
            d = fmax(d, fabs(y[r] - y1[(size_t)i * rows + r]) / in.scale[(size_t)i * rows + r]);
        CHECK(e < 1e-5 && d < 2e-6 && y[rows] == 777.0f, "gemv_simd128 bits %u group %u %ux%u: %g, vs ref %g",
              marker, group, rows, cols, e, d);
    }
    y[(size_t)N * rows] = 777.0f;
    nd_cq_gemm_simd128(&t.m, in.xr, N, y);
    double d = 0;
    for (size_t i = 0; i < (size_t)N * rows; i++) d = fmax(d, fabs(y[i] - y1[i]) / in.scale[i]);
    CHECK(d < 2e-6 && y[N * rows] == 777.0f, "gemm_simd128 bits %u group %u %ux%u: vs ref %g", marker, group,
          rows, cols, d);
#endif
    free(y), free(y1);
    free_inputs(&in);
    free_matrix(&t);
}

static void test_products(void) {
    uint64_t s = 3;
    for (int mi = 0; mi < 4; mi++)
        for (int gi = 0; gi < 5; gi++)
            for (int ri = 0; ri < 6; ri++)
                for (int wi = 0; wi < 3; wi++)
                    check_products(&s, markers[mi], groups_[gi], row_counts[ri], width_case(groups_[gi], wi));
    /* More rows than one SIMD row block, and a wide input. */
    check_products(&s, 2, 128, 200, 512);
    check_products(&s, 3, 64, 70, 1000);
}

/* nd_fwht against the explicit matrix, and H (H v) = v. */
static void test_fwht(void) {
    uint64_t s = 4;
    for (uint32_t n = 1; n <= 4096; n *= 2) {
        float *v = malloc(n * sizeof(float)), *x = malloc(n * sizeof(float));
        for (uint32_t i = 0; i < n; i++) v[i] = x[i] = rng_sym(&s);
        nd_fwht(v, n);
        double worst = 0, back = 0, sum_abs = 0;
        for (uint32_t i = 0; i < n; i++) sum_abs += fabs(x[i]);
        for (uint32_t i = 0; i < n; i++) {
            double want = 0;
            for (uint32_t j = 0; j < n; j++) want += (__builtin_popcount(i & j) & 1 ? -x[j] : x[j]);
            want /= sqrt((double)n);
            worst = fmax(worst, fabs(v[i] - want) / (sum_abs / sqrt((double)n)));
        }
        nd_fwht(v, n);
        for (uint32_t i = 0; i < n; i++) back = fmax(back, fabs(v[i] - x[i]));
        CHECK(worst < 2e-6, "n %u: error %g relative to sum|x|/sqrt(n)", n, worst);
        CHECK(back < 1e-5, "n %u: applying twice is off by %g", n, back);
#ifdef ND_SIMD128 /* the SIMD twin runs the same butterflies: the same bits */
        memcpy(v, x, n * sizeof(float));
        nd_fwht_ref(x, n);
        nd_fwht_simd128(v, n);
        CHECK(memcmp(v, x, n * sizeof(float)) == 0, "n %u: nd_fwht_simd128 differs from nd_fwht_ref", n);
#endif
        free(v), free(x);
    }
}

static void test_dense_f32(void) {
    uint64_t s = 5;
    static const uint32_t rows_[] = {1, 3, 17, 100}, cols_[] = {1, 5, 16, 17, 100, 512};
    for (int ri = 0; ri < 4; ri++)
        for (int ci = 0; ci < 6; ci++) {
            uint32_t rows = rows_[ri], cols = cols_[ci];
            float *w = malloc((size_t)rows * cols * sizeof(float)), *x = malloc(cols * sizeof(float));
            float *y = malloc((rows + 1) * sizeof(float));
            double *want = calloc(rows, sizeof(double)), *scale = calloc(rows, sizeof(double));
            for (size_t i = 0; i < (size_t)rows * cols; i++) w[i] = rng_sym(&s);
            for (uint32_t c = 0; c < cols; c++) x[c] = rng_sym(&s);
            for (uint32_t r = 0; r < rows; r++)
                for (uint32_t c = 0; c < cols; c++) {
                    want[r] += (double)w[(size_t)r * cols + c] * x[c];
                    scale[r] += fabs((double)w[(size_t)r * cols + c] * x[c]);
                }
            y[rows] = 777.0f;
            nd_f32_gemv_ref(w, rows, cols, x, y);
            double e = worst_error(y, want, scale, rows);
            CHECK(e < 1e-5 && y[rows] == 777.0f, "f32_gemv_ref %ux%u: %g", rows, cols, e);
#ifdef ND_SIMD128
            nd_f32_gemv_simd128(w, rows, cols, x, y);
            e = worst_error(y, want, scale, rows);
            CHECK(e < 1e-5 && y[rows] == 777.0f, "f32_gemv_simd128 %ux%u: %g", rows, cols, e);
#endif
            free(w), free(x), free(y), free(want), free(scale);
        }
}

int main(void) {
    RUN(test_index);
    RUN(test_row);
    RUN(test_products);
    RUN(test_fwht);
    RUN(test_dense_f32);
    return check_report();
}
