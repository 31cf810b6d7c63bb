/* test_a8.c: the integer kernel for short archive-layout CQ matrices (cq_a8.c):
 * the quantiser stores each activation where the kernel reads it, with its
 * group's scale and sum; the scalar reference stays within the bound its two
 * roundings allow of float64 arithmetic on the stored weights, and is exact
 * at the integer extremes; (SIMD128 builds) the simd128 quantiser and kernel
 * give the reference's bits, also on activations with infinities, NaNs and
 * tiny maxima, and on zero, subnormal, infinite and NaN norms. Random
 * matrices of bits 2 and 4 (and ternary levels), every group the kernel
 * takes, every row remainder of the kernel's four-row blocks, padded widths,
 * zero activations (splitmix64). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cq_random.h"
#include "kernels/cq_a8.h"
#include "format/fp16.h"

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
    cq_random_shape(m, s, marker, group, rows, cols);
    sc.bytes = cq_random_bytes(m, s);
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
static const uint32_t row_counts[] = {1, 2, 3, 4, 5, 7, 16, 24};
#define FOR_SHAPES                                       \
    for (int mi = 0; mi < 3; mi++)                       \
        for (int gi = 0; gi < 4; gi++)                   \
            for (int ri = 0; ri < 8; ri++)               \
                for (int wi = 0; wi < 3; wi++)
#define SHAPE markers[mi], groups_[gi], row_counts[ri], \
    (wi == 0 ? groups_[gi] : wi == 1 ? 16 * groups_[gi] : 3 * groups_[gi] - 5)
#define TAKES(marker, group) (((marker) == 4 ? 4 : 2) * (group) % 128 == 0)

/* How far a stored activation may be from x / scale in float64: half a step,
 * plus the float32 product x * (XMAX / max) the quantiser rounds (2 ulp). */
#define ROUNDED (0.5 + ND_CQ_A8_XMAX * 0x1p-22)

static float xscale(const scene *sc, uint32_t g) { return nd_cq_a8_scales(&sc->m, sc->q)[g]; }

/* Every stored activation is its column's value over the group scale,
 * rounded, and the group's stored sum is theirs. */
static void test_quantiser_layout(void) {
    uint64_t s = 21;
    FOR_SHAPES {
        if (!TAKES(markers[mi], groups_[gi])) continue;
        scene sc = make_scene(&s, SHAPE);
        const nd_cq *m = &sc.m;
        uint32_t per = 8 / m->bits;
        for (uint32_t g = 0; g < m->groups; g++) {
            float scale = xscale(&sc, g);
            int32_t sum = 0;
            for (uint32_t at = 0; at < m->group; at++) {
                uint32_t v = at / (16 * per), j = at / 16 % per, i = at % 16;
                uint32_t col = g * m->group + (16 * v + i) * per + j;
                int16_t got = ((const int16_t *)sc.q)[g * m->group + at];
                double want = scale > 0 ? sc.xr[col] / scale : 0.0;
                CHECK(fabs(got - want) <= ROUNDED && abs(got) <= ND_CQ_A8_XMAX, "bits %u group %u column %u: %d for %g",
                      m->bits, m->group, col, got, want);
                sum += got;
            }
            CHECK(nd_cq_a8_sums(m, sc.q)[g] == sum, "bits %u group %u: group %u sum %d, stored %d", m->bits,
                  m->group, g, sum, nd_cq_a8_sums(m, sc.q)[g]);
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
        int8_t hi[16], lo[16];
        double sl = nd_cq_a8_levels(m, hi, lo);
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

/* Where column col of group g is stored (cq_a8.h's order). */
static int16_t stored(const scene *sc, uint32_t g, uint32_t col) {
    uint32_t per = 8 / sc->m.bits, v = col / (16 * per), i = col % (16 * per) / per, j = col % per;
    return ((const int16_t *)sc->q)[g * sc->m.group + (v * per + j) * 16 + i];
}

/* Every index at the largest level, every activation at its group's maximum:
 * the integer sums at their extremes (127 * XMAX * group, either sign) are
 * exact in both kernels, and the floats are the reference formula's. */
static void test_extremes(void) {
    uint64_t s = 24;
    for (int mi = 0; mi < 2; mi++)
        for (int gi = 0; gi < 4; gi++)
            for (int case_ = 0; case_ < 8; case_++) {
                uint32_t marker = mi ? 4 : 2, group = groups_[gi];
                if (!TAKES(marker, group)) continue;
                scene sc = make_scene(&s, marker, group, 5, 4 * group);
                nd_cq *m = &sc.m;
                uint32_t mask = (1u << m->bits) - 1, at = case_ & 1 ? mask : 0;
                float wsign = case_ & 2 ? -1.0f : 1.0f, xsign = case_ & 4 ? -1.0f : 1.0f;
                memset(sc.bytes, case_ & 1 ? 0xff : 0x00, (size_t)m->rows * m->row_bytes);
                m->levels[at] = wsign;
                for (uint32_t k = 0; k < m->cols; k++) sc.xr[k] = 0.75f * xsign;
                nd_cq_a8_quantise_ref(m, sc.xr, sc.q);
                int8_t hi[16], lo[16];
                float lscale = nd_cq_a8_levels(m, hi, lo);
                CHECK(hi[at] == (int)(127 * wsign) && lo[at] == 0, "bits %u: level %d %d", m->bits, hi[at], lo[at]);
                float *y = malloc(m->rows * sizeof(float));
                nd_cq_a8_gemv_ref(m, sc.q, y);
                for (uint32_t r = 0; r < m->rows; r++) {
                    float want = 0.0f;
                    for (uint32_t g = 0; g < m->groups; g++) {
                        float norm = nd_load_fp16(m->norms + 2 * ((size_t)r * m->groups + g));
                        int32_t sum = (int32_t)(wsign * xsign) * 127 * ND_CQ_A8_XMAX * (int32_t)group;
                        CHECK(nd_cq_a8_sums(m, sc.q)[g] == (int32_t)xsign * ND_CQ_A8_XMAX * (int32_t)group, "group sum %d",
                              nd_cq_a8_sums(m, sc.q)[g]);
                        want += (norm * (xscale(&sc, g) * lscale)) * (127.0f * (float)sum);
                    }
                    CHECK(y[r] == want, "bits %u group %u case %d row %u: %g, want %g", m->bits, group, case_, r, y[r],
                          want);
                }
#ifdef ND_SIMD128
                void *q = malloc(nd_cq_a8_bytes(m));
                nd_cq_a8_quantise_simd128(m, sc.xr, q);
                CHECK(memcmp(q, sc.q, nd_cq_a8_bytes(m)) == 0, "bits %u group %u: quantisers differ", m->bits, group);
                free(q);
                float *b = malloc(m->rows * sizeof(float));
                nd_cq_a8_gemv_simd128(m, sc.q, b);
                CHECK(memcmp(y, b, m->rows * sizeof(float)) == 0, "bits %u group %u case %d: kernels differ", m->bits,
                      group, case_);
                free(b);
#endif
                free(y);
                free_scene(&sc);
            }
}

/* Activations the fast paths must not meet unawares: an infinity (the
 * group's scale is infinite, every value 0), a NaN (0, the rest scaled by
 * the finite maximum), subnormal values whose XMAX / max overflows (+-XMAX and
 * 0), a maximum under 1e-33 (XMAX / max still finite), negative zeros. */
static void special_activations(scene *sc) {
    float *x = sc->xr;
    uint32_t G = sc->m.group;
    x[3] = INFINITY;
    x[G + 5] = NAN;
    for (uint32_t k = 0; k < G; k++) x[2 * G + k] = (float)((int)(k % 3) - 1) * 1e-39f;
    for (uint32_t k = 0; k < G; k++) x[3 * G + k] *= 1e-33f;
    for (uint32_t k = 0; k < G; k++) x[4 * G + k] = -0.0f;
    x[5 * G + 1] = -INFINITY, x[5 * G + 2] = NAN;
}

static void test_quantiser_specials(void) {
    uint64_t s = 25;
    for (int mi = 0; mi < 2; mi++) {
        scene sc = make_scene(&s, mi ? 4 : 2, 64, 4, 6 * 64);
        special_activations(&sc);
        nd_cq_a8_quantise_ref(&sc.m, sc.xr, sc.q);
        const int32_t *sums = nd_cq_a8_sums(&sc.m, sc.q);
        int inf0 = 1, nan1 = 1, tiny2 = 1, small3 = 1, zero4 = 1, inf5 = 1, tiny_sum = 0;
        double max3 = 0;
        for (uint32_t k = 0; k < 64; k++) max3 = fmax(max3, fabs(sc.xr[192 + k]));
        for (uint32_t k = 0; k < 64; k++) {
            inf0 &= stored(&sc, 0, k) == 0;
            nan1 &= k == 5 ? stored(&sc, 1, k) == 0 : fabs(stored(&sc, 1, k) - sc.xr[64 + k] / xscale(&sc, 1)) <= ROUNDED;
            tiny2 &= stored(&sc, 2, k) == ND_CQ_A8_XMAX * ((int)(k % 3) - 1);
            tiny_sum += ND_CQ_A8_XMAX * ((int)(k % 3) - 1);
            small3 &= fabs(stored(&sc, 3, k) - sc.xr[192 + k] * ND_CQ_A8_XMAX / max3) <= ROUNDED;
            zero4 &= stored(&sc, 4, k) == 0;
            inf5 &= stored(&sc, 5, k) == 0;
        }
        CHECK(inf0 && isinf(xscale(&sc, 0)) && sums[0] == 0, "bits %u: a group with an infinity", sc.m.bits);
        CHECK(nan1 && isfinite(xscale(&sc, 1)) && xscale(&sc, 1) > 0, "bits %u: a group with a NaN", sc.m.bits);
        CHECK(tiny2 && sums[2] == tiny_sum, "bits %u: subnormal activations (sum %d)", sc.m.bits, sums[2]);
        CHECK(small3 && xscale(&sc, 3) > 0 && max3 < 1e-33, "bits %u: activations of 1e-33", sc.m.bits);
        CHECK(zero4 && xscale(&sc, 4) == 0 && sums[4] == 0, "bits %u: negative zeros", sc.m.bits);
        CHECK(inf5 && sums[5] == 0, "bits %u: an infinity and a NaN", sc.m.bits);
        free_scene(&sc);
    }
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

static void set_norm(scene *sc, uint32_t r, uint32_t g, uint16_t h) {
    uint8_t *p = (uint8_t *)sc->m.norms + 2 * ((size_t)r * sc->m.groups + g);
    p[0] = (uint8_t)h, p[1] = (uint8_t)(h >> 8);
}

/* Equal bits, or both NaN (whose payloads wasm leaves open). */
static int same_floats(const float *a, const float *b, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        if (memcmp(a + i, b + i, sizeof *a) && !(isnan(a[i]) && isnan(b[i]))) return 0;
    return 1;
}

static void test_simd_special_activations(void) {
    uint64_t s = 26;
    for (int mi = 0; mi < 2; mi++)
        for (uint32_t rows = 3; rows <= 8; rows += 5) {
            scene sc = make_scene(&s, mi ? 4 : 2, 64, rows, 6 * 64);
            special_activations(&sc);
            nd_cq_a8_quantise_ref(&sc.m, sc.xr, sc.q);
            size_t bytes = nd_cq_a8_bytes(&sc.m);
            void *q = malloc(bytes);
            nd_cq_a8_quantise_simd128(&sc.m, sc.xr, q);
            CHECK(memcmp(q, sc.q, bytes) == 0, "bits %u: quantised activations differ", sc.m.bits);
            float *a = malloc(rows * sizeof(float)), *b = malloc(rows * sizeof(float));
            nd_cq_a8_gemv_ref(&sc.m, sc.q, a);
            nd_cq_a8_gemv_simd128(&sc.m, sc.q, b);
            CHECK(same_floats(a, b, rows), "bits %u rows %u: kernels differ", sc.m.bits, rows);
            free(q), free(a), free(b);
            free_scene(&sc);
        }
}

/* The kernel converts four norms at once: zeros, subnormals, the largest
 * half, infinities and NaNs give the scalar conversion's results. The
 * finite ones come in two sets of similar magnitudes, so that no term is
 * lost in another's rounding. */
static void test_simd_special_norms(void) {
    static const uint16_t tiny[] = {0x0000, 0x8000, 0x0001, 0x8001, 0x03ff, 0x0400};
    static const uint16_t large[] = {0x7bff, 0xfbff, 0x7a00, 0xf800, 0x7b00, 0xfa55};
    static const uint16_t special[] = {0x7c00, 0xfc00, 0x7e00, 0x7c01, 0xfe00, 0x3c00, 0x0001, 0x0000};
    uint64_t s = 27;
    for (int mi = 0; mi < 2; mi++)
        for (uint32_t rows = 4; rows <= 7; rows += 3)
            for (int set = 0; set < 3; set++) {
                scene sc = make_scene(&s, mi ? 4 : 2, 128, rows, 8 * 128);
                for (uint32_t r = 0; r < rows; r++)
                    for (uint32_t g = 0; g < sc.m.groups; g++)
                        set_norm(&sc, r, g, set == 0 ? tiny[(r + g) % 6] : set == 1 ? large[(r + g) % 6]
                                                                                   : special[(r * 3 + g) % 8]);
                float *a = malloc(rows * sizeof(float)), *b = malloc(rows * sizeof(float));
                nd_cq_a8_gemv_ref(&sc.m, sc.q, a);
                nd_cq_a8_gemv_simd128(&sc.m, sc.q, b);
                CHECK(set == 2 ? same_floats(a, b, rows) : memcmp(a, b, rows * sizeof(float)) == 0,
                      "bits %u rows %u set %d: kernels differ", sc.m.bits, rows, set);
                for (uint32_t r = 0; set < 2 && r < rows; r++)
                    CHECK(isfinite(a[r]) && a[r] != 0, "bits %u set %d row %u: %g", sc.m.bits, set, r, a[r]);
                free(a), free(b);
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
    RUN(test_extremes);
    RUN(test_quantiser_specials);
#ifdef ND_SIMD128
    RUN(test_simd_same_bits);
    RUN(test_simd_special_activations);
    RUN(test_simd_special_norms);
#endif
    return check_report();
}
