/* test_q8.c: CQ products in the makers' engine numerics (cq_q8.c): the
 * engine's quantiser on hand-made values (ties away from zero, NaN, an
 * all-zero group); int8 levels within half a step of the float ones; the
 * reference kernel against float64 arithmetic on the same integers (its
 * float combine) and against the float product (within the error the two
 * quantisations allow, computed per row); the dispatch; and (SIMD128 builds)
 * the quantiser, the tables, the GEMV and the GEMM against the reference
 * bit for bit. Random matrices of every width, groups 8..256, with and
 * without tail rows, padded widths (cq_random.h). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cq_random.h"
#include "kernels/cq_q8.h"

#define ACTIVATIONS 5u

static void test_quantiser(void) {
    CHECK(ND_K127 == (float)(1.0 / 127.0), "K127 is not 1/127 rounded to f32");
    /* amax 127: the scale 127 * K127 rounds to 1, so q is x rounded */
    const float x[12] = {127.0f, 63.5f, -63.5f, 0.5f, -0.5f, 2.5f, -2.5f, 0.49999997f, NAN, 0.0f, -0.0f, 1.5f};
    const int16_t want[12] = {127, 64, -64, 1, -1, 3, -3, 0, 0, 0, 0, 2};
    int16_t q[12];
    float scale = nd_q8_quantise(x, 12, q);
    CHECK(scale == 1.0f, "scale %g", scale);
    for (int i = 0; i < 12; i++) CHECK(q[i] == want[i], "x %g: q %d, want %d", x[i], q[i], want[i]);
    const float zero[8] = {0};
    CHECK(nd_q8_quantise(zero, 8, q) == 1.0f && q[0] == 0 && q[7] == 0, "an all-zero group has scale 1 and zeros");
    const float big[2] = {-3.0f, 1.0f}; /* -amax saturates at -127, not -128: the scale is amax / 127 */
    nd_q8_quantise(big, 2, q);
    CHECK(q[0] == -127 && q[1] == 42, "q %d %d", q[0], q[1]);
}

static void test_levels(void) {
    uint64_t s = 81;
    for (uint32_t marker = 2; marker <= 5; marker++)
        for (int trial = 0; trial < 20; trial++) {
            nd_cq m;
            cq_random_shape(&m, &s, marker, 64, 16, 64);
            int8_t lv[16];
            float cbs = nd_q8_levels(&m, lv);
            int top = 0, bad = 0;
            for (uint32_t e = 0; e < 16; e++) {
                if (e >= (1u << m.bits)) { bad += lv[e] != 0; continue; }
                top = abs(lv[e]) > top ? abs(lv[e]) : top;
                bad += fabs((double)lv[e] * cbs - m.levels[e]) > 0.5 * cbs * (1 + 1e-6);
            }
            CHECK(bad == 0 && top == 127, "marker %u: %d levels off, largest %d", marker, bad, top);
            if (marker == 5) CHECK(lv[0] == 0 && lv[1] == 127 && lv[2] == 0 && lv[3] == -127, "ternary levels");
        }
}

/* n quantised activations of m from the pair's rotated-like xr. */
static void *quantised(const nd_cq *m, const float *xr, uint32_t n) {
    uint8_t *q = malloc(n * nd_q8_bytes(m));
    for (uint32_t t = 0; t < n; t++) nd_q8_activation_ref(m, xr + (size_t)t * nd_cq_padded(m), q + t * nd_q8_bytes(m));
    return q;
}

/* The reference on the archive layout against float64: from the same
 * integers, within the float combine's roundings (three per group, relative
 * 2^-24 each, on the sum of |terms|); and against the float product, within
 * the quantisation error of each weight and activation, bounded per row. */
static void test_reference_bounds(void) {
    uint64_t s = 82;
    double worst_combine = 0, worst_quant = 0;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        const nd_cq *m = &p.m;
        uint32_t padded = nd_cq_padded(m);
        void *q = quantised(m, p.xr, ACTIVATIONS);
        float *y = malloc((size_t)ACTIVATIONS * m->rows * sizeof(float));
        nd_cq_matmul_q8(&m, &y, 1, q, ACTIVATIONS, NULL); /* untiled: every row is a tail row */
        int8_t lv[16];
        double cbs = nd_q8_levels(m, lv);
        int bad = 0;
        for (uint32_t t = 0; t < ACTIVATIONS; t++) {
            const int16_t *xq = (const int16_t *)((uint8_t *)q + t * nd_q8_bytes(m));
            const float *sx = nd_q8_scales(m, xq), *xr = p.xr + (size_t)t * padded;
            for (uint32_t r = 0; r < m->rows; r++) {
                double exact = 0, ints = 0, mass = 0, allowed = 0;
                for (uint32_t g = 0; g < m->groups; g++) {
                    double norm = nd_cqt_norm(m, r, g), sum = 0, part = 0, slack = 0;
                    for (uint32_t k = g * m->group; k < (g + 1) * m->group; k++) {
                        uint32_t e = nd_cq_index(m, r, k);
                        sum += lv[e] * xq[k];
                        part += (double)m->levels[e] * xr[k];
                        slack += fabs(lv[e] * cbs - m->levels[e]) * fabs(xr[k]) +
                                 fabs(lv[e] * cbs) * fabs(xq[k] * (double)sx[g] - xr[k]);
                    }
                    ints += sum * norm * cbs * sx[g];
                    mass += fabs(sum * norm * cbs * sx[g]);
                    exact += norm * part;
                    allowed += norm * slack;
                }
                double got = y[(size_t)t * m->rows + r], combine = fabs(got - ints) / (mass + 1e-30);
                worst_combine = combine > worst_combine ? combine : worst_combine;
                double used = fabs(got - ints - (exact - ints)) / (allowed + mass * 1e-6 + 1e-30);
                worst_quant = used > worst_quant ? used : worst_quant;
                bad += fabs(got - ints) > (m->groups + 3) * 0x1p-24 * mass + 1e-30;
                bad += fabs(got - exact) > allowed + (m->groups + 3) * 0x1p-24 * mass + 1e-30;
            }
        }
        CHECK(bad == 0, "bits %u group %u rows %u cols %u: %d outside the bounds", m->bits, m->group, m->rows,
              m->cols, bad);
        free(q), free(y);
        cq_pair_free(&p);
    }
    printf("  combine error %.3g of the term mass; quantisation error %.3g of its bound\n", worst_combine, worst_quant);
}

/* The tiled rows and the tail rows from the dispatch equal the reference on
 * the archive layout, bit for bit, for 1..5 activations (and, in SIMD
 * builds, so do the GEMV from tables, the GEMM, the quantiser and the
 * tables themselves). */
static void test_tiled_matches_reference(void) {
    uint64_t s = 83;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        CHECK(p.repack == 0, "repack failed");
        const nd_cq *m = &p.m, *tm = &p.t;
        uint32_t padded = nd_cq_padded(m);
        void *q = quantised(m, p.xr, ACTIVATIONS);
        size_t ybytes = (size_t)ACTIVATIONS * m->rows * sizeof(float);
        float *want = malloc(ybytes), *got = malloc(ybytes);
        int8_t *tables = malloc(nd_q8_tables_bytes(m)), *tables2 = malloc(nd_q8_tables_bytes(m));
        int bad = 0;
        for (uint32_t n = 1; n <= ACTIVATIONS; n++) {
            nd_cq_matmul_q8(&m, &want, 1, q, n, NULL);
            memset(got, 0xff, ybytes);
            nd_cq_matmul_q8(&tm, &got, 1, q, n, NULL);
            bad += memcmp(want, got, (size_t)n * m->rows * sizeof(float)) != 0;
        }
        nd_q8_tables_ref(m, q, tables);
        memset(got, 0xff, ybytes);
        nd_cq_matmul_q8(&tm, &got, 1, q, 1, tables);
        nd_cq_matmul_q8(&m, &want, 1, q, 1, NULL);
        bad += memcmp(want, got, m->rows * sizeof(float)) != 0;
#ifdef ND_SIMD128
        uint8_t *q2 = malloc(ACTIVATIONS * nd_q8_bytes(m));
        for (uint32_t t = 0; t < ACTIVATIONS; t++)
            nd_q8_activation_simd128(m, p.xr + (size_t)t * padded, q2 + t * nd_q8_bytes(m));
        bad += memcmp(q, q2, ACTIVATIONS * nd_q8_bytes(m)) != 0;
        nd_q8_tables_simd128(m, q, tables2);
        bad += memcmp(tables, tables2, nd_q8_tables_bytes(m)) != 0;
        if (tm->tiles) {
            memset(got, 0xff, ybytes);
            int8_t lv[16];
            nd_cqt_q8_gemv_simd128(tm, nd_q8_levels(tm, lv), q, tables, got, 0, tm->tiles);
            bad += memcmp(want, got, tm->tiles * ND_CQ_TILE * sizeof(float)) != 0;
        }
        free(q2);
#else
        (void)padded, (void)tables2;
#endif
        CHECK(bad == 0, "bits %u group %u rows %u cols %u: %d mismatches", m->bits, m->group, m->rows, m->cols, bad);
        free(q), free(want), free(got), free(tables), free(tables2);
        cq_pair_free(&p);
    }
}

#ifdef ND_SIMD128
/* The SIMD quantiser on the values that test rounding: ties at every
 * integer, NaN, infinities, subnormal and huge groups. */
static void test_simd_quantiser_edges(void) {
    uint64_t s = 84;
    float x[256];
    int16_t a[256], b[256];
    int bad = 0;
    for (int trial = 0; trial < 400; trial++) {
        uint32_t n = 8u << (trial % 6);
        double magnitude = trial % 7 == 0 ? 1e-40 : trial % 7 == 1 ? 1e30 : 1.0;
        for (uint32_t k = 0; k < n; k++) {
            double u = rng_unit(&s);
            x[k] = u < 0.3 ? (float)(floor(254 * rng_unit(&s)) / 2 - 63.5) : (float)((2 * rng_unit(&s) - 1) * magnitude);
            if (u > 0.97) x[k] = trial % 3 == 0 ? NAN : trial % 3 == 1 ? INFINITY : -0.0f;
        }
        nd_cq m = {.rows = 16, .cols = n, .group = n, .groups = 1, .bits = 2};
        uint8_t qa[256 * 2 + 4], qb[256 * 2 + 4];
        nd_q8_activation_ref(&m, x, qa);
        nd_q8_activation_simd128(&m, x, qb);
        memcpy(a, qa, n * 2), memcpy(b, qb, n * 2);
        bad += memcmp(qa, qb, n * 2 + 4) != 0;
    }
    CHECK(bad == 0, "%d groups quantised differently", bad);
}
#endif

int main(void) {
    RUN(test_quantiser);
    RUN(test_levels);
    RUN(test_reference_bounds);
    RUN(test_tiled_matches_reference);
#ifdef ND_SIMD128
    RUN(test_simd_quantiser_edges);
#endif
    return check_report();
}
