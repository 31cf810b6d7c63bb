/* test_attention.c: the attention kernels (src/kernels/attention.c, and their
 * SIMD128 twins in the WASI build) against a float64 softmax attention over
 * the same stored rows, on many head dims, query counts, run lengths, runs
 * and visibility windows; the int8 SIMD kernel must equal the scalar one bit
 * for bit, the f32 one up to summation order. The row and query quantisers
 * against their float64 reading, and SIMD against scalar bit for bit, on
 * every head dim to 100 and extreme inputs; the one-scale-per-vector
 * quantisers (Needle 3's trained numerics) against theirs. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/attention.h"
#include "check.h"

static uint32_t rng_state = 12345;
static float frand(void) { /* uniform in [-1, 1) */
    rng_state = rng_state * 1664525u + 1013904223u;
    return (float)(rng_state >> 8) / 8388608.0f - 1.0f;
}
static uint32_t urand(uint32_t n) {
    rng_state = rng_state * 1664525u + 1013904223u;
    return (rng_state >> 8) % n;
}

/* One int8 row (format of attention.h) of x[hd], padded to hdp. */
static void store_i8(const float *x, uint32_t hd, uint32_t hdp, uint8_t *row) {
    uint32_t nb = hdp / 32;
    int8_t *q = (int8_t *)(row + nb * 4);
    for (uint32_t b = 0; b < nb; b++) {
        float amax = 0, scale;
        for (uint32_t i = b * 32; i < b * 32 + 32 && i < hd; i++) amax = fmaxf(amax, fabsf(x[i]));
        scale = amax / 127.0f;
        memcpy(row + 4 * b, &scale, 4);
        for (uint32_t i = b * 32; i < b * 32 + 32; i++) q[i] = i < hd && amax > 0 ? (int8_t)rintf(x[i] / scale) : 0;
    }
}

/* Value k of a stored row as the kernels read it. */
static double row_value(const uint8_t *row, int i8, uint32_t hdp, uint32_t k) {
    float f;
    if (!i8) { memcpy(&f, row + 4 * k, 4); return f; }
    memcpy(&f, row + 4 * (k / 32), 4);
    return (double)f * ((const int8_t *)(row + hdp / 32 * 4))[k];
}

typedef struct {
    uint32_t hd, hdp, n, runs, count[3], pos[3];
    int i8;
    uint8_t *rows[3];   /* per run: [count][2][row] (K then V of each position) */
    size_t row_bytes;
    float *q, *qscale;  /* [n][hdp], [n][hdp/32] */
    int16_t *q8;
    uint32_t *lo, *hi;
} scene;

static void make_scene(scene *sc, uint32_t hd, uint32_t n, int i8, const uint32_t *count, uint32_t runs) {
    memset(sc, 0, sizeof *sc);
    sc->hd = hd, sc->n = n, sc->i8 = i8, sc->runs = runs;
    sc->hdp = i8 ? (hd + 31) / 32 * 32 : (hd + 3) / 4 * 4;
    sc->row_bytes = i8 ? sc->hdp / 32 * 4 + sc->hdp : sc->hdp * 4;
    float *x = calloc(sc->hdp, sizeof(float));
    uint32_t pos = urand(5), mul = 1 + urand(3); /* larger magnitudes sharpen the softmax */
    for (uint32_t r = 0; r < runs; r++) {
        sc->count[r] = count[r], sc->pos[r] = pos;
        pos += count[r] + urand(3);
        sc->rows[r] = calloc((size_t)count[r] * 2 + 1, sc->row_bytes);
        for (uint32_t j = 0; j < 2 * count[r]; j++) {
            uint8_t *row = sc->rows[r] + j * sc->row_bytes;
            memset(x, 0, sc->hdp * sizeof(float));
            for (uint32_t k = 0; k < hd; k++) x[k] = frand() * (float)mul;
            if (i8) store_i8(x, hd, sc->hdp, row);
            else memcpy(row, x, sc->hdp * sizeof(float));
        }
    }
    sc->q = calloc((size_t)n * sc->hdp, sizeof(float));
    sc->q8 = calloc((size_t)n * sc->hdp, sizeof(int16_t));
    sc->qscale = calloc((size_t)n * (sc->hdp / 32 + 1), sizeof(float));
    sc->lo = calloc(n, sizeof(uint32_t));
    sc->hi = calloc(n, sizeof(uint32_t));
    float mul_q = 1.0f / sqrtf((float)hd);
    for (uint32_t i = 0; i < n; i++) {
        float *q = sc->q + (size_t)i * sc->hdp;
        for (uint32_t k = 0; k < hd; k++) q[k] = frand() * 3.0f;
        if (i8) nd_attn_quantise(q, hd, sc->hdp, mul_q, sc->q8 + (size_t)i * sc->hdp, sc->qscale + (size_t)i * (sc->hdp / 32));
        for (uint32_t k = 0; k < hd; k++) q[k] *= mul_q;
        /* a window [lo, hi] somewhere over the positions, sometimes empty */
        sc->lo[i] = urand(pos + 2);
        sc->hi[i] = urand(4) == 0 ? pos + 5 : sc->lo[i] + urand(pos + 2);
    }
    free(x);
}

static void free_scene(scene *sc) {
    for (uint32_t r = 0; r < sc->runs; r++) free(sc->rows[r]);
    free(sc->q), free(sc->q8), free(sc->qscale), free(sc->lo), free(sc->hi);
}

/* o[n][hd] by every kernel in `which` (0 ref, 1 the dispatched one). */
static void run_kernel(const scene *sc, int which, float *o) {
    float *mx = malloc(sc->n * sizeof(float)), *sum = malloc(sc->n * sizeof(float));
    float *acc = malloc((size_t)sc->n * sc->hdp * sizeof(float));
    void *work = aligned_alloc(16, (nd_attn_work_bytes(sc->hdp) + 15) / 16 * 16);
    nd_attn a = {.n = sc->n, .hdp = sc->hdp, .q = sc->q, .q8 = sc->q8, .qscale = sc->qscale,
                 .lo = sc->lo, .hi = sc->hi, .max = mx, .sum = sum, .acc = acc, .work = work};
    nd_attn_reset(&a);
    for (uint32_t r = 0; r < sc->runs; r++) {
        nd_kv_run run = {sc->rows[r], sc->rows[r] + sc->row_bytes, 2 * sc->row_bytes, sc->pos[r], sc->count[r]};
        if (sc->i8) (which ? nd_attn_i8 : nd_attn_i8_ref)(&a, &run);
        else (which ? nd_attn_f32 : nd_attn_f32_ref)(&a, &run);
    }
    for (uint32_t i = 0; i < sc->n; i++) nd_attn_finish(&a, i, sc->hd, o + (size_t)i * sc->hd);
    free(mx), free(sum), free(acc), free(work);
}

/* The float64 attention of query i over the stored rows; returns max |o|. */
static double reference(const scene *sc, uint32_t i, double *o) {
    double m = -INFINITY, sum = 0, big = 0;
    for (int pass = 0; pass < 2; pass++) {
        for (uint32_t k = 0; k < sc->hd; k++) o[k] = 0;
        for (uint32_t r = 0; r < sc->runs; r++)
            for (uint32_t j = 0; j < sc->count[r]; j++) {
                uint32_t p = sc->pos[r] + j;
                if (p < sc->lo[i] || p > sc->hi[i]) continue;
                const uint8_t *kr = sc->rows[r] + 2 * j * sc->row_bytes, *vr = kr + sc->row_bytes;
                double s = 0;
                for (uint32_t k = 0; k < sc->hd; k++) {
                    double q = sc->i8 ? (double)sc->q8[(size_t)i * sc->hdp + k] * sc->qscale[(size_t)i * (sc->hdp / 32) + k / 32]
                                      : sc->q[(size_t)i * sc->hdp + k];
                    s += q * row_value(kr, sc->i8, sc->hdp, k);
                }
                if (pass == 0) { m = fmax(m, s); continue; }
                double w = exp(s - m);
                sum += w;
                for (uint32_t k = 0; k < sc->hd; k++) o[k] += w * row_value(vr, sc->i8, sc->hdp, k);
            }
    }
    for (uint32_t k = 0; k < sc->hd; k++) o[k] = sum > 0 ? o[k] / sum : 0;
    for (uint32_t r = 0; r < sc->runs; r++) /* the largest stored value: the scale of any output */
        for (uint32_t j = 0; j < sc->count[r]; j++)
            for (uint32_t k = 0; k < sc->hd; k++)
                big = fmax(big, fabs(row_value(sc->rows[r] + (2 * j + 1) * sc->row_bytes, sc->i8, sc->hdp, k)));
    return big > 0 ? big : 1;
}

static void check_scene(uint32_t hd, uint32_t n, int i8, const uint32_t *count, uint32_t runs) {
    scene sc;
    make_scene(&sc, hd, n, i8, count, runs);
    float *ref = calloc((size_t)n * hd, sizeof(float)), *fast = calloc((size_t)n * hd, sizeof(float));
    double *want = calloc(hd, sizeof(double));
    run_kernel(&sc, 0, ref);
    run_kernel(&sc, 1, fast);
    double worst = 0, worst_fast = 0;
    for (uint32_t i = 0; i < n; i++) {
        double scale = reference(&sc, i, want);
        for (uint32_t k = 0; k < hd; k++) {
            worst = fmax(worst, fabs(ref[(size_t)i * hd + k] - want[k]) / scale);
            worst_fast = fmax(worst_fast, fabs(fast[(size_t)i * hd + k] - want[k]) / scale);
            if (i8) CHECK(ref[(size_t)i * hd + k] == fast[(size_t)i * hd + k], "hd %u n %u query %u value %u: %g != %g",
                          hd, n, i, k, ref[(size_t)i * hd + k], fast[(size_t)i * hd + k]);
        }
    }
    /* f32 rounding, plus for int8 rows the 15-bit coefficients (attention.h):
     * per block each key's coefficient is off by at most half a step, the
     * block's largest / 65534, times |v| <= 127 * its scale <= `scale`; the
     * block's largest weight is at most the final sum, so all blocks together
     * stay under ND_ATTN_I8_BLOCK / 65534 of `scale`. */
    double tolerance = 2e-5 + (i8 ? ND_ATTN_I8_BLOCK / 65534.0 : 0.0);
    CHECK(worst < tolerance, "ref: hd %u n %u i8 %d runs %u: error %g", hd, n, i8, runs, worst);
    CHECK(worst_fast < tolerance, "kernel: hd %u n %u i8 %d runs %u: error %g", hd, n, i8, runs, worst_fast);
    free(ref), free(fast), free(want);
    free_scene(&sc);
}

static void test_shapes(void) {
    const uint32_t hds[] = {2, 8, 16, 30, 32, 64, 96, 128};
    const uint32_t ns[] = {1, 2, 5, 33};
    const uint32_t counts[][3] = {{1, 0, 0}, {3, 0, 0}, {16, 0, 0}, {17, 0, 0}, {40, 0, 0},
                                  {300, 0, 0}, {3, 250, 7}, {16, 33, 1}};
    for (int i8 = 0; i8 < 2; i8++)
        for (size_t h = 0; h < sizeof hds / sizeof *hds; h++)
            for (size_t n = 0; n < sizeof ns / sizeof *ns; n++)
                for (size_t c = 0; c < sizeof counts / sizeof *counts; c++) {
                    uint32_t runs = counts[c][2] ? 3 : counts[c][1] ? 2 : 1;
                    check_scene(hds[h], ns[n], i8, counts[c], runs);
                }
}

/* A query that sees no key gets zeros; the state stays empty. */
static void test_nothing_visible(void) {
    const uint32_t count[] = {20};
    scene sc;
    make_scene(&sc, 64, 3, 1, count, 1);
    for (uint32_t i = 0; i < 3; i++) sc.lo[i] = 100, sc.hi[i] = 200;
    float o[3 * 64];
    for (int which = 0; which < 2; which++) {
        memset(o, 0x7f, sizeof o);
        run_kernel(&sc, which, o);
        for (uint32_t k = 0; k < 3 * 64; k++) CHECK(o[k] == 0.0f, "kernel %d value %u is %g", which, k, o[k]);
    }
    free_scene(&sc);
}

static void test_exp(void) {
    double worst = 0;
    for (int i = 0; i <= 200000; i++) {
        float x = -87.3f * (float)i / 200000.0f;
        double want = exp((double)x), got = nd_attn_exp(x);
        worst = fmax(worst, fabs(got - want) / want);
    }
    CHECK(worst < 3e-7, "nd_attn_exp relative error %g", worst);
    CHECK(nd_attn_exp(0.0f) == 1.0f, "exp(0) = %g", nd_attn_exp(0.0f));
    CHECK(nd_attn_exp(-INFINITY) == 0.0f, "exp(-inf) = %g", nd_attn_exp(-INFINITY));
    CHECK(nd_attn_exp(-100.0f) == 0.0f, "exp(-100) = %g", nd_attn_exp(-100.0f));
}

static void test_quantise(void) {
    float x[70];
    int16_t q[96];
    float qs[3];
    for (uint32_t k = 0; k < 70; k++) x[k] = frand() * (k < 32 ? 0.01f : 5.0f);
    nd_attn_quantise(x, 70, 96, 0.5f, q, qs);
    for (uint32_t k = 0; k < 96; k++) {
        CHECK(q[k] >= -127 && q[k] <= 127, "q[%u] = %d", k, q[k]);
        if (k >= 70) { CHECK(q[k] == 0, "padding q[%u] = %d", k, q[k]); continue; }
        double back = (double)q[k] * qs[k / 32] / 0.5;
        CHECK(fabs(back - x[k]) <= qs[k / 32] / 0.5 * 0.5001, "x[%u] %g back %g", k, x[k], back);
    }
}

/* x[hd] for the quantiser tests. kind 0: uniform; 1: each block of its own
 * magnitude (1e-30 .. 1e30, some blocks zero); 2: exact halves, x / scale =
 * k + 0.5 with scale 1 (amax 127 first in each block); 3: quotients within
 * a few ulp of a half, where a product by 1 / scale would round otherwise
 * (amax first in each block); 4: non-finite and subnormal values scattered
 * over moderate ones. */
#define QUANTISE_KINDS 5
static void quantise_input(float *x, uint32_t hd, int kind) {
    static const float odd[] = {NAN, -NAN, INFINITY, -INFINITY, 1e-40f, -1e-42f, 3e38f, -3e38f, 0.0f, -0.0f};
    float mag = 1, scale = 1;
    for (uint32_t k = 0; k < hd; k++) {
        if (k % 32 == 0) mag = urand(5) == 0 ? 0.0f : powf(10.0f, (float)urand(61) - 30.0f);
        if (k % 32 == 0) scale = (1.0f + frand() * 0.5f) / 127.0f;
        if (kind == 0) x[k] = frand() * 4.0f;
        else if (kind == 1) x[k] = frand() * mag;
        else if (kind == 2) x[k] = k % 32 == 0 ? 127.0f : (float)((int)urand(254) - 127) + 0.5f;
        else if (kind == 3) {
            float h = k % 32 == 0 ? 127.0f : (float)((int)urand(254) - 127) + 0.5f, v = h * scale;
            int steps = (int)urand(7) - 3; /* ulp off the half */
            for (int i = 0; i < abs(steps); i++) v = nextafterf(v, steps > 0 ? INFINITY : -INFINITY);
            x[k] = k % 32 == 0 ? 127.0f * scale : v;
        } else x[k] = urand(6) == 0 ? odd[urand(sizeof odd / sizeof *odd)] : frand();
    }
}

/* The float64 reading of one quantised block: scale = amax / 127 (float
 * division, as exact as double's then rounded), every q the nearest integer
 * to x / scale, ties to even, unless the quotient is within 1e-5 of a tie
 * (float's division may land either side); padding 0. */
static void check_block(const float *x, uint32_t hd, uint32_t b, const int16_t *q, float scale) {
    double amax = 0;
    for (uint32_t k = b * 32; k < b * 32 + 32 && k < hd; k++) amax = fmax(amax, fabs(x[k]));
    CHECK(scale == (float)(amax / 127.0), "block %u scale %g for amax %g", b, scale, amax);
    for (uint32_t k = b * 32; k < b * 32 + 32; k++) {
        double t = k < hd && scale > 0 ? x[k] / (double)scale : 0.0, want = nearbyint(t);
        int near_tie = fabs(fabs(t - floor(t)) - 0.5) < 1e-5;
        CHECK(q[k - b * 32] == want || (near_tie && fabs(q[k - b * 32] - t) <= 0.5 + 1e-5),
              "hd %u value %u: x %.9g / scale %.9g = %.9g quantised %d", hd, k, x[k], scale, t, q[k - b * 32]);
    }
}

/* Both quantisers, row (int8, for the cache) and query (int16, scales times
 * mul): the dispatched ones equal the scalar ones bit for bit on every hd
 * and kind, NaN and infinities included; on finite inputs the scalar ones
 * match the float64 reading. */
static void test_quantisers(void) {
    enum { MAX_HD = 200, MAX_HDP = 256 };
    float x[MAX_HD], qs_ref[MAX_HDP / 32], qs_fast[MAX_HDP / 32];
    int16_t q_ref[MAX_HDP], q_fast[MAX_HDP], block[32];
    uint8_t row_ref[MAX_HDP / 32 * 4 + MAX_HDP], row_fast[sizeof row_ref];
    for (uint32_t hd = 1; hd <= MAX_HD; hd += hd < 100 ? 1 : 27)
        for (uint32_t extra = 0; extra <= 32; extra += 32) {
            uint32_t hdp = (hd + 31) / 32 * 32 + extra, nb = hdp / 32;
            if (hdp > MAX_HDP) continue;
            size_t row_bytes = (size_t)nb * 4 + hdp;
            for (int kind = 0; kind < QUANTISE_KINDS; kind++) {
                float mul = 0.125f + frand() * 0.1f;
                quantise_input(x, hd, kind);
                memset(row_ref, 0xAA, sizeof row_ref), memset(row_fast, 0x55, sizeof row_fast);
                nd_attn_quantise_row_ref(x, hd, hdp, row_ref);
                nd_attn_quantise_row(x, hd, hdp, row_fast);
                CHECK(!memcmp(row_ref, row_fast, row_bytes), "row hd %u hdp %u kind %d: SIMD != scalar", hd, hdp, kind);
                nd_attn_quantise_ref(x, hd, hdp, mul, q_ref, qs_ref);
                nd_attn_quantise(x, hd, hdp, mul, q_fast, qs_fast);
                CHECK(!memcmp(q_ref, q_fast, hdp * sizeof *q_ref) && !memcmp(qs_ref, qs_fast, nb * sizeof *qs_ref),
                      "query hd %u hdp %u kind %d: SIMD != scalar", hd, hdp, kind);
                for (uint32_t b = 0; b < nb; b++) {
                    float scale;
                    memcpy(&scale, row_ref + 4 * b, 4);
                    CHECK(qs_ref[b] == scale * mul, "hd %u block %u: query scale %g", hd, b, qs_ref[b]);
                    for (uint32_t k = 0; k < 32; k++) {
                        block[k] = ((const int8_t *)(row_ref + nb * 4))[b * 32 + k];
                        CHECK(q_ref[b * 32 + k] == block[k], "hd %u value %u: query %d row %d", hd, b * 32 + k,
                              q_ref[b * 32 + k], block[k]);
                    }
                    if (kind < QUANTISE_KINDS - 1) check_block(x, hd, b, block, scale);
                }
            }
        }
}

/* Ties round to even; an all-zero block is scale 0 and zeros, as is one
 * whose scale underflows (padding too); NaN values (which amax skips) give
 * -127. */
static void test_quantise_edges(void) {
    float x[64] = {127.0f, 2.5f, 3.5f, -2.5f, -3.5f, 0.5f, -0.5f, 126.5f, -126.5f, 1.5f};
    x[40] = NAN, x[41] = 1.01f, x[42] = -2.0f;
    uint8_t row[2 * 4 + 64];
    const int8_t *q = (const int8_t *)(row + 8);
    const int8_t want[] = {127, 2, 4, -2, -4, 0, 0, 126, -126, 2};
    for (int which = 0; which < 2; which++) {
        (which ? nd_attn_quantise_row : nd_attn_quantise_row_ref)(x, 64, 64, row);
        for (int k = 0; k < 10; k++) CHECK(q[k] == want[k], "kernel %d: %g -> %d", which, x[k], q[k]);
        float s0, s1;
        memcpy(&s0, row, 4), memcpy(&s1, row + 4, 4);
        CHECK(s0 == 1.0f && s1 == 2.0f / 127.0f, "kernel %d: scales %g %g", which, s0, s1);
        CHECK(q[40] == -127 && q[41] == 64 && q[42] == -127, "kernel %d: NaN block %d %d %d", which, q[40], q[41],
              q[42]);
        memset(x + 32, 0, sizeof(float) * 32);
        (which ? nd_attn_quantise_row : nd_attn_quantise_row_ref)(x, 64, 64, row);
        memcpy(&s1, row + 4, 4);
        int zeros = 1;
        for (int k = 32; k < 64; k++) zeros &= q[k] == 0;
        CHECK(s1 == 0.0f && zeros, "kernel %d: zero block scale %g", which, s1);
        x[40] = NAN, x[41] = 1.01f, x[42] = -2.0f;
    }
    float tiny[40] = {0};
    for (int k = 32; k < 40; k++) tiny[k] = (k % 2 ? 1 : -1) * 1e-44f; /* amax / 127 rounds to 0 */
    for (int which = 0; which < 2; which++) {
        memset(row, 0x55, sizeof row);
        (which ? nd_attn_quantise_row : nd_attn_quantise_row_ref)(tiny, 40, 64, row);
        float s0, s1;
        memcpy(&s0, row, 4), memcpy(&s1, row + 4, 4);
        int zeros = 1;
        for (int k = 0; k < 64; k++) zeros &= q[k] == 0;
        CHECK(s0 == 0.0f && s1 == 0.0f && zeros, "kernel %d: underflowing scale %g", which, s1);
    }
}

/* nd_attn_quantise_row_a8 and nd_attn_quantise_a8: every block carries the
 * vector's scale, max |x| / 127, and every value is the nearest integer to
 * x / scale (ties to even, unless within 1e-5 of a tie); padding 0. Blocks
 * of very different magnitudes, so a block's own scale would differ. */
static void test_quantise_a8(void) {
    enum { MAX_HDP = 128 };
    float x[MAX_HDP], qs[MAX_HDP / 32];
    int16_t q[MAX_HDP];
    uint8_t row[MAX_HDP / 32 * 4 + MAX_HDP];
    for (uint32_t hd = 1; hd <= 100; hd++) {
        uint32_t hdp = (hd + 31) / 32 * 32;
        for (uint32_t k = 0; k < hd; k++) x[k] = frand() * (k / 32 % 2 ? 100.0f : 0.01f);
        double amax = 0;
        for (uint32_t k = 0; k < hd; k++) amax = fmax(amax, fabs(x[k]));
        float scale = (float)(amax / 127.0);
        nd_attn_quantise_row_a8(x, hd, hdp, row);
        nd_attn_quantise_a8(x, hd, hdp, 0.5f, q, qs);
        const int8_t *qv = (const int8_t *)(row + hdp / 32 * 4);
        for (uint32_t b = 0; b < hdp / 32; b++) {
            float stored;
            memcpy(&stored, row + 4 * b, 4);
            CHECK(stored == scale && qs[b] == scale * 0.5f, "hd %u block %u: scales %g %g, want %g", hd, b, stored,
                  qs[b], scale);
        }
        for (uint32_t k = 0; k < hdp; k++) {
            double t = k < hd ? x[k] / (double)scale : 0.0, want = nearbyint(t);
            int near_tie = fabs(fabs(t - floor(t)) - 0.5) < 1e-5;
            CHECK(q[k] == qv[k], "hd %u value %u: row %d, query %d", hd, k, qv[k], q[k]);
            CHECK(q[k] == want || (near_tie && fabs(q[k] - t) <= 0.5 + 1e-5), "hd %u value %u: %g quantised %d", hd,
                  k, t, q[k]);
        }
    }
}

int main(void) {
    RUN(test_exp);
    RUN(test_quantise_a8);
    RUN(test_quantise);
    RUN(test_quantisers);
    RUN(test_quantise_edges);
    RUN(test_nothing_visible);
    RUN(test_shapes);
    return check_report();
}
