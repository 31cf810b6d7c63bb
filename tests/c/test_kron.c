/* test_kron.c: the Kronecker stage of Needle 3's MLP (src/kernels/kron.c) against
 * float64 on the splits N = 1..1024 give and on uneven ones, its SIMD128 twin
 * (the WASI build) bit for bit against it, and Walsh factors against the
 * Hadamard transform, which ties the flattening to the one Needle 2 uses. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "kernels/hadamard.h"
#include "kernels/kron.h"
#include "rng.h"

#define MAX_N 1024

static void fill(float *v, uint32_t n, uint64_t *rng) {
    for (uint32_t i = 0; i < n; i++) v[i] = (float)(rng_unit(rng) * 2 - 1);
}

/* |got - want| within the forward bound of two float sums: for each output,
 * (ba + bb + 2) units of 2^-24 times the sum of |products| through both passes. */
static void check_float64(uint32_t ba, uint32_t bb, uint64_t *rng) {
    static float a[64 * 64], b[64 * 64], z[MAX_N], out[MAX_N], t[MAX_N];
    static double tw[MAX_N], tabs[MAX_N];
    uint32_t n = ba * bb;
    fill(a, ba * ba, rng), fill(b, bb * bb, rng), fill(z, n, rng);
    nd_kron_ref(a, b, ba, bb, z, out, t);
    double worst = 0;
    for (uint32_t i = 0; i < ba; i++)
        for (uint32_t l = 0; l < bb; l++) {
            double s = 0, m = 0;
            for (uint32_t j = 0; j < bb; j++) s += (double)z[i * bb + j] * b[j * bb + l], m += fabs((double)z[i * bb + j] * b[j * bb + l]);
            tw[i * bb + l] = s, tabs[i * bb + l] = m;
        }
    for (uint32_t k = 0; k < ba; k++)
        for (uint32_t l = 0; l < bb; l++) {
            double s = 0, m = 0;
            for (uint32_t i = 0; i < ba; i++) s += a[i * ba + k] * tw[i * bb + l], m += fabs(a[i * ba + k]) * tabs[i * bb + l];
            double bound = (ba + bb + 2) * ldexp(1, -24) * m;
            worst = fmax(worst, fabs(out[k * bb + l] - s) / (bound > 0 ? bound : 1));
        }
    CHECK(worst <= 1, "%u x %u: error %.3g of the bound", ba, bb, worst);
}

static void test_float64(void) {
    uint64_t rng = 3;
    for (uint32_t n = 1; n <= MAX_N; n *= 2) {
        uint32_t bits = 0;
        while ((n - 1) >> bits) bits++;
        uint32_t ba = 1u << (bits / 2);
        check_float64(ba, n / ba, &rng); /* the spec's split: 32 x 32 for 1024, 16 x 32 for 512 */
    }
    const uint32_t uneven[][2] = {{3, 5}, {7, 2}, {1, 9}, {5, 13}, {9, 6}, {2, 31}};
    for (size_t i = 0; i < sizeof uneven / sizeof *uneven; i++) check_float64(uneven[i][0], uneven[i][1], &rng);
}

/* The dispatched stage (SIMD128 in the WASI build) equals the scalar one bit for bit. */
static void test_simd_bits(void) {
    static float a[64 * 64], b[64 * 64], z[MAX_N], x[MAX_N], y[MAX_N], t[MAX_N];
    uint64_t rng = 11;
    for (uint32_t ba = 1; ba <= 32; ba += ba < 8 ? 1 : 8)
        for (uint32_t bb = 1; bb <= 32; bb += bb < 9 ? 1 : 7) {
            fill(a, ba * ba, &rng), fill(b, bb * bb, &rng), fill(z, ba * bb, &rng);
            nd_kron_ref(a, b, ba, bb, z, x, t);
            nd_kron(a, b, ba, bb, z, y, t);
            CHECK(!memcmp(x, y, ba * bb * sizeof *x), "%u x %u: SIMD != scalar", ba, bb);
        }
}

static void walsh(float *h, uint32_t n) {
    for (uint32_t i = 0; i < n; i++)
        for (uint32_t j = 0; j < n; j++) h[i * n + j] = (__builtin_popcount(i & j) & 1 ? -1.0f : 1.0f) / sqrtf((float)n);
}

/* Walsh factors make the stage the Sylvester Hadamard transform of N points
 * (measured within 4.8e-7 for values in [-1, 1]). */
static void test_walsh_is_hadamard(void) {
    static float a[32 * 32], b[32 * 32], z[MAX_N], out[MAX_N], t[MAX_N], h[MAX_N];
    uint64_t rng = 5;
    const uint32_t splits[][2] = {{2, 2}, {4, 4}, {4, 8}, {16, 32}, {32, 32}};
    for (size_t s = 0; s < sizeof splits / sizeof *splits; s++) {
        uint32_t ba = splits[s][0], bb = splits[s][1], n = ba * bb;
        walsh(a, ba), walsh(b, bb), fill(z, n, &rng);
        memcpy(h, z, n * sizeof *z);
        nd_fwht_ref(h, n);
        nd_kron(a, b, ba, bb, z, out, t);
        double worst = 0;
        for (uint32_t i = 0; i < n; i++) worst = fmax(worst, fabs(out[i] - h[i]));
        CHECK(worst < 2e-6, "%u x %u: %.3g from the Hadamard transform", ba, bb, worst);
    }
}

int main(void) {
    RUN(test_float64);
    RUN(test_simd_bits);
    RUN(test_walsh_is_hadamard);
    return check_report();
}
