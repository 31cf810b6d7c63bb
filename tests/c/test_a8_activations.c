/* test_a8_activations.c: the A8 quantisation fast mode applies where the
 * model was trained with it (a8.c): against float64 arithmetic on random
 * vectors (every value a multiple of the scale, within half a step of the
 * original, the largest magnitude kept), ties to even, and the edge cases
 * (all zeros, a NaN, an infinity). */
#include <math.h>
#include <string.h>
#include "check.h"
#include "rng.h"
#include "kernels/a8.h"

static void test_random_vectors(void) {
    uint64_t s = 31;
    for (int trial = 0; trial < 200; trial++) {
        uint32_t n = 1 + (uint32_t)(rng_unit(&s) * 600);
        float x[600], y[600];
        double amax = 0;
        for (uint32_t i = 0; i < n; i++) {
            x[i] = (float)((2 * rng_unit(&s) - 1) * pow(10, 4 * rng_unit(&s) - 2));
            amax = fmax(amax, fabs(x[i]));
        }
        memcpy(y, x, sizeof x);
        nd_a8(y, n);
        float scale = (float)amax / 127.0f;
        int ok = 1;
        for (uint32_t i = 0; i < n; i++) {
            double q = y[i] / scale;
            ok &= fabs(q - rint(q)) < 1e-4 && fabs(q) <= 127.0001 && fabs((double)y[i] - x[i]) <= scale * 0.5001;
        }
        CHECK(ok, "trial %d (n %u): a value off the grid or more than half a step away", trial, n);
        double kept = 0;
        for (uint32_t i = 0; i < n; i++) kept = fmax(kept, fabs(y[i]));
        CHECK(fabs(kept - amax) <= 1e-6 * amax, "trial %d: largest magnitude %g, was %g", trial, kept, amax);
    }
}

static void test_ties_and_edges(void) {
    float x[4] = {127.0f, 0.5f, 1.5f, -2.5f}; /* scale 1: halves go to the even integer */
    nd_a8(x, 4);
    CHECK(x[0] == 127.0f && x[1] == 0.0f && x[2] == 2.0f && x[3] == -2.0f, "ties: %g %g %g", x[1], x[2], x[3]);
    float z[3] = {0.0f, -0.0f, 0.0f};
    nd_a8(z, 3);
    CHECK(z[0] == 0.0f && z[1] == 0.0f && z[2] == 0.0f, "zeros change");
    float nan[3] = {NAN, 2.0f, -1.0f};
    nd_a8(nan, 3);
    CHECK(isnan(nan[0]) && nan[1] == 2.0f && fabsf(nan[2] + 1.0f) < 2.0f / 127, "a NaN: %g %g", nan[1], nan[2]);
    float inf[2] = {INFINITY, 1.0f};
    nd_a8(inf, 2);
    CHECK(isinf(inf[0]) && inf[1] == 1.0f, "an infinity: left as it is");
}

int main(void) {
    RUN(test_random_vectors);
    RUN(test_ties_and_edges);
    return check_report();
}
