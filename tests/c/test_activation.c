/* test_activation.c: the sigmoid of src/kernels/activation.c against float64 on a
 * dense sweep and at extreme inputs, and its array form (the SIMD128 twin in
 * the WASI build) bit for bit against the scalar one, for the gate form and
 * in place as SiLU, on many lengths and alignments. */
#include <float.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/activation.h"
#include "check.h"
#include "rng.h"

/* Within 2 ulp of exp (nd_attn_exp) and three roundings (1 + e, the
 * quotient, and e's own relative error passing through e / (1 + e)): under
 * 5e-7 of the result. Below -87.3 the result is 0 for a true one under
 * exp(-87.3) < 1.25e-38, hence the absolute term: the error beyond the
 * relative bound, at most TINY. */
#define TINY 1.25e-38
static double sigmoid_error(float x, float got) {
    double want = 1.0 / (1.0 + exp(-(double)x));
    return fabs((double)got - want) - 5e-7 * want;
}

static void test_sigmoid_float64(void) {
    double worst = -1, worst_x = 0;
    for (int i = -400000; i <= 400000; i++) {
        float x = (float)i * 2.5e-4f; /* [-100, 100] */
        double e = sigmoid_error(x, nd_sigmoid(x));
        if (e > worst) worst = e, worst_x = x;
    }
    CHECK(worst <= TINY, "sigmoid beyond 5e-7 relative by %g at x = %g", worst, worst_x);
    const float extreme[] = {0.0f, -0.0f, 1e-8f, -1e-8f, 1e-45f, -1e-45f, 20.0f, -20.0f, 87.3f, -87.3f,
                             88.0f, -88.0f, 100.0f, -100.0f, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY};
    for (size_t i = 0; i < sizeof extreme / sizeof *extreme; i++) {
        float x = extreme[i], got = nd_sigmoid(x);
        CHECK(sigmoid_error(x, got) <= TINY && got >= 0.0f && got <= 1.0f, "sigmoid(%g) = %.9g", x, got);
    }
    CHECK(nd_sigmoid(0.0f) == 0.5f && nd_sigmoid(-0.0f) == 0.5f, "sigmoid(0) = %g", nd_sigmoid(0.0f));
    CHECK(nd_sigmoid(100.0f) == 1.0f && nd_sigmoid(INFINITY) == 1.0f, "sigmoid(100), sigmoid(inf)");
    CHECK(nd_sigmoid(-100.0f) == 0.0f && nd_sigmoid(-INFINITY) == 0.0f, "sigmoid(-100), sigmoid(-inf)");
    CHECK(nd_sigmoid(NAN) == 0.0f, "sigmoid(NaN) = %g", nd_sigmoid(NAN));
}

/* SiLU in place, x * sigmoid(x), against float64: the sigmoid's bound and
 * one more rounding. */
static void test_silu_float64(void) {
    float z[2001];
    for (int i = 0; i < 2001; i++) z[i] = (float)(i - 1000) * 0.05f; /* [-50, 50] */
    nd_sigmoid_mul(z, z, 2001);
    double worst = -1;
    for (int i = 0; i < 2001; i++) {
        double x = (double)(float)((float)(i - 1000) * 0.05f), want = x / (1.0 + exp(-x));
        worst = fmax(worst, fabs(z[i] - want) - 6e-7 * fabs(want));
    }
    CHECK(worst <= TINY, "silu beyond 6e-7 relative by %g", worst);
}

/* A gate input: mostly moderate, some extreme, at random. */
static float gate_input(uint64_t *rng) {
    static const float extreme[] = {0.0f, -0.0f, 1e-8f, -1e-8f, 20.0f, -20.0f, 88.0f, -88.0f,
                                    100.0f, -100.0f, INFINITY, -INFINITY, 87.3f, -87.3f};
    uint64_t r = rng_next(rng);
    if (r % 8 == 0) return extreme[(r >> 8) % (sizeof extreme / sizeof *extreme)];
    return (float)(rng_unit(rng) * 60.0 - 30.0);
}

/* The dispatched array form equals the scalar one bit for bit, and both
 * equal o * nd_sigmoid(g) element by element. */
static void test_sigmoid_mul_bits(void) {
    uint64_t rng = 7;
    float g[520], o0[520], a[520], b[520];
    for (size_t n = 0; n <= 516; n = n < 70 ? n + 1 : n + 149) {
        for (size_t off = 0; off < 4; off++) {
            for (size_t i = 0; i < n; i++) g[off + i] = gate_input(&rng), o0[off + i] = (float)(rng_unit(&rng) * 4 - 2);
            memcpy(a, o0, sizeof a), memcpy(b, o0, sizeof b);
            nd_sigmoid_mul_ref(a + off, g + off, n);
            nd_sigmoid_mul(b + off, g + off, n);
            CHECK(!memcmp(a, b, sizeof a), "gate n %zu offset %zu: SIMD != scalar", n, off);
            for (size_t i = 0; i < n; i++)
                CHECK(a[off + i] == o0[off + i] * nd_sigmoid(g[off + i]), "gate n %zu value %zu", n, i);
            memcpy(a, g, sizeof a), memcpy(b, g, sizeof b); /* in place: SiLU */
            nd_sigmoid_mul_ref(a + off, a + off, n);
            nd_sigmoid_mul(b + off, b + off, n);
            CHECK(!memcmp(a, b, sizeof a), "silu n %zu offset %zu: SIMD != scalar", n, off);
        }
    }
}

int main(void) {
    RUN(test_sigmoid_float64);
    RUN(test_silu_float64);
    RUN(test_sigmoid_mul_bits);
    return check_report();
}
