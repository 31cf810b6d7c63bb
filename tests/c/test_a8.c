/* test_a8.c: the int8 kernel for short archive-layout CQ matrices (cq_a8.c):
 * the quantiser stores each activation where the kernel reads it; the
 * scalar reference stays within the bound its two roundings allow of float64
 * arithmetic on the stored weights; (SIMD128 builds) the simd128 quantiser
 * and kernel give the reference's bits. Random matrices of bits 2 and 4 (and
 * ternary levels), every group the kernel takes, rows with and without a
 * four-row remainder, padded widths, zero activations (splitmix64). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "rng.h"
#include "cq_a8.h"
#include "fp16.h"

typedef struct {
    nd_cq m;
    uint8_t *bytes; /* packed then norms */
    float *xr;      /* [padded] rotated activation */
    void *q;        /* its quantised form */
} scene;

/* marker 2 or 4, or 5 for ternary levels on 2 bits. */
static scene make_scene(uint64_t *s, uint32_t marker, uint32_t group, uint32_t rows, uint32_t cols) {
    scene sc;
    nd_cq *m = &sc.m;
    memset(&sc, 0, sizeof sc);
    m->rows = rows, m->cols = cols, m->group = group;
    m->groups = (cols + group - 1) / group;
    m->bits = marker == 5 ? 2 : marker;
    m->row_bytes = m->groups * group * m->bits / 8;
    for (uint32_t i = 0; i < (1u << m->bits); i++) m->levels[i] = (float)((2 * rng_unit(s) - 1) * 2.5 / sqrt(group));
    if (marker == 5) m->levels[0] = 0, m->levels[1] = 0.1f, m->levels[2] = 0, m->levels[3] = -0.1f;
    size_t packed = (size_t)rows * m->row_bytes;
    sc.bytes = malloc(packed + (size_t)rows * m->groups * 2);
    for (size_t i = 0; i < packed; i++) sc.bytes[i] = (uint8_t)rng_next(s);
    for (size_t i = 0; i < (size_t)rows * m->groups; i++) {
        uint16_t h = nd_f32_to_fp16((float)(0.05 + 4.0 * rng_unit(s)));
        sc.bytes[packed + 2 * i] = (uint8_t)h, sc.bytes[packed + 2 * i + 1] = (uint8_t)(h >> 8);
    }
    m->packed = sc.bytes, m->norms = sc.bytes + packed;
    uint32_t padded = nd_cq_padded(m);
    sc.xr = calloc(padded, sizeof(float));
    for (uint32_t k = 0; k < cols; k++) sc.xr[k] = (float)(2 * rng_unit(s) - 1);
    if (m->groups > 1) memset(sc.xr, 0, group * sizeof(float)); /* an all-zero group: scale 0 */
    sc.q = malloc(nd_cq_a8_bytes(m));
    nd_cq_a8_quantise_ref(m, sc.xr, sc.q);
    return sc;
}

static void free_scene(scene *sc) { free(sc->bytes), free(sc->xr), free(sc->q); }

static const uint32_t markers[] = {2, 4, 5};
static const uint32_t groups_[] = {32, 64, 128, 256};
static const uint32_t row_counts[] = {1, 4, 7, 16, 24};
#define FOR_SHAPES                                       \
    for (int mi = 0; mi < 3; mi++)                       \
        for (int gi = 0; gi < 4; gi++)                   \
            for (int ri = 0; ri < 5; ri++)               \
                for (int wi = 0; wi < 3; wi++)
#define SHAPE markers[mi], groups_[gi], row_counts[ri], \
    (wi == 0 ? groups_[gi] : wi == 1 ? 16 * groups_[gi] : 3 * groups_[gi] - 5)
#define TAKES(marker, group) (((marker) == 4 ? 4 : 2) * (group) % 128 == 0)

static float xscale(const scene *sc, uint32_t g) {
    float v;
    memcpy(&v, (const int8_t *)sc->q + nd_cq_padded(&sc->m) + g * sizeof(float), sizeof v);
    return v;
}

/* Every stored activation is its column's value over the group scale, rounded. */
static void test_quantiser_layout(void) {
    uint64_t s = 21;
    FOR_SHAPES {
        if (!TAKES(markers[mi], groups_[gi])) continue;
        scene sc = make_scene(&s, SHAPE);
        const nd_cq *m = &sc.m;
        uint32_t per = 8 / m->bits;
        for (uint32_t g = 0; g < m->groups; g++) {
            float scale = xscale(&sc, g);
            for (uint32_t at = 0; at < m->group; at++) {
                uint32_t v = at / (16 * per), j = at / 16 % per, i = at % 16;
                uint32_t col = g * m->group + (16 * v + i) * per + j;
                int8_t got = ((const int8_t *)sc.q)[g * m->group + at];
                double want = scale > 0 ? sc.xr[col] / scale : 0.0;
                CHECK(fabs(got - want) <= 0.5 + 1e-4 && abs(got) <= 127, "bits %u group %u column %u: %d for %g",
                      m->bits, m->group, col, got, want);
            }
        }
        free_scene(&sc);
    }
}

/* |y - W x| <= sum over groups of norm * sum_k (|level| sx/2 + |x| sl/2 + sx sl/4), W from the stored indices. */
static void test_reference_bound(void) {
    uint64_t s = 22;
    int checked = 0;
    FOR_SHAPES {
        if (!TAKES(markers[mi], groups_[gi])) continue;
        scene sc = make_scene(&s, SHAPE);
        const nd_cq *m = &sc.m;
        float *y = malloc(m->rows * sizeof(float));
        nd_cq_a8_gemv_ref(m, sc.q, y);
        int8_t lq[16];
        double sl = nd_cq_a8_levels(m, lq);
        for (uint32_t r = 0; r < m->rows; r++) {
            double want = 0, bound = 0;
            for (uint32_t g = 0; g < m->groups; g++) {
                double norm = nd_load_fp16(m->norms + 2 * ((size_t)r * m->groups + g)), sx = xscale(&sc, g);
                double dot = 0, slack = 0;
                for (uint32_t k = g * m->group; k < (g + 1) * m->group; k++) {
                    double level = m->levels[nd_cq_index(m, r, k)];
                    dot += level * sc.xr[k];
                    slack += fabs(level) * sx / 2 + fabs(sc.xr[k]) * sl / 2 + sx * sl / 4;
                }
                want += norm * dot;
                bound += norm * slack;
            }
            CHECK(fabs(y[r] - want) <= bound * 1.001 + 1e-5, "bits %u group %u row %u: %g vs %g (bound %g)",
                  m->bits, m->group, r, y[r], want, bound);
            checked++;
        }
        free(y);
        free_scene(&sc);
    }
    CHECK(checked > 500, "only %d rows checked", checked);
}

#ifdef ND_SIMD128
static void test_simd_same_bits(void) {
    uint64_t s = 23;
    FOR_SHAPES {
        if (!TAKES(markers[mi], groups_[gi])) continue;
        scene sc = make_scene(&s, SHAPE);
        const nd_cq *m = &sc.m;
        size_t bytes = nd_cq_a8_bytes(m);
        void *q = malloc(bytes);
        nd_cq_a8_quantise_simd128(m, sc.xr, q);
        CHECK(memcmp(q, sc.q, bytes) == 0, "bits %u group %u cols %u: quantised activations differ", m->bits,
              m->group, m->cols);
        float *a = malloc(m->rows * sizeof(float)), *b = malloc(m->rows * sizeof(float));
        nd_cq_a8_gemv_ref(m, sc.q, a);
        nd_cq_a8_gemv_simd128(m, sc.q, b);
        CHECK(memcmp(a, b, m->rows * sizeof(float)) == 0, "bits %u group %u rows %u: kernels differ", m->bits,
              m->group, m->rows);
        free(q), free(a), free(b);
        free_scene(&sc);
    }
}
#endif

static void test_fits(void) {
    nd_cq m = {0};
    m.bits = 4, m.group = 32;
    CHECK(nd_cq_a8_fits(&m), "4-bit group 32");
    m.bits = 2;
    CHECK(!nd_cq_a8_fits(&m), "2-bit group 32 is half a vector");
    m.group = 64;
    CHECK(nd_cq_a8_fits(&m), "2-bit group 64");
    m.bits = 3;
    CHECK(!nd_cq_a8_fits(&m), "3-bit");
    m.bits = 2, m.tiles = 1;
    CHECK(!nd_cq_a8_fits(&m), "tiled");
}

int main(void) {
    RUN(test_fits);
    RUN(test_quantiser_layout);
    RUN(test_reference_bound);
#ifdef ND_SIMD128
    RUN(test_simd_same_bits);
#endif
    return check_report();
}
