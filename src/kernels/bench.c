/* bench.c: the benchmark's kernel entry point (needle_bench_gemv, needle.h).
 *
 * Times the GEMV the forward pass runs in its default (fast) mode for every CQ
 * width on a matrix of random packed indices and norms built here (same
 * layout and levels as model.c builds from an archive, repacked into tiles
 * where the model repacks them), and the dense f32 GEMV of the same shape as
 * the baseline CQ is compared with. The activation is rotated once outside
 * the timed loop, as the session shares one rotation between matrices. Not
 * used by inference; js/bench.js reports GMAC/s from it.
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime in platform.h */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h"
#include "kernels/cq.h"
#include "kernels/cq_q8.h"
#include "format/fp16.h"
#include "needle.h"
#include "platform.h"

#define BENCH_TERNARY 1u
#define BENCH_F32 32u

/* xorshift32: deterministic random bytes without hidden state. */
static uint32_t next_random(uint32_t *state) {
    uint32_t x = *state;
    x ^= x << 13, x ^= x >> 17, x ^= x << 5;
    return *state = x;
}

/* A value uniform in [-1, 1). */
static float random_unit(uint32_t *state) { return (float)(next_random(state) >> 8) / 8388608.0f - 1.0f; }

/* Levels like the archive's: evenly spaced and symmetric, or ternary 0,+c,0,-c. */
static void bench_levels(nd_cq *m, uint32_t bits) {
    memset(m->levels, 0, sizeof m->levels);
    if (bits == BENCH_TERNARY) {
        m->levels[1] = 1.0f / sqrtf((float)m->group);
        m->levels[3] = -m->levels[1];
        m->bits = 2;
        return;
    }
    uint32_t count = 1u << bits;
    for (uint32_t i = 0; i < count; i++) m->levels[i] = ((float)i - (count - 1) / 2.0f) / count;
    m->bits = bits;
}

static int bench_args(uint32_t bits, uint32_t rows, uint32_t cols, uint32_t group, needle_error *err) {
    int cq = bits == 2 || bits == 3 || bits == 4 || bits == BENCH_TERNARY;
    if (!cq && bits != BENCH_F32)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "bits %u: expected 2, 3, 4, 1 (ternary) or 32 (f32)", bits);
    /* At most 2^26 weights: every size below then fits 32-bit size_t. */
    if (!rows || !cols || rows > 65536 || cols > 65536 || (uint64_t)rows * cols > (1u << 26))
        return nd_fail(err, NEEDLE_E_ARGUMENT, "shape [%u, %u]: at most 65536 per side and 2^26 weights",
                       rows, cols);
    if (cq && (!group || group > ND_CQ_MAX_GROUP || (group & (group - 1))))
        return nd_fail(err, NEEDLE_E_ARGUMENT, "group %u is not a power of two up to %u", group,
                       ND_CQ_MAX_GROUP);
    return NEEDLE_OK;
}

/* Milliseconds of `iterations` CQ GEMVs over random weights, or -1. */
static double time_cq(uint32_t bits, uint32_t rows, uint32_t cols, uint32_t group,
                      uint32_t iterations, uint32_t *seed, needle_error *err) {
    nd_cq m = {0};
    m.rows = rows, m.cols = cols, m.group = group;
    m.groups = (cols + group - 1) / group;
    bench_levels(&m, bits);
    m.row_bytes = m.groups * group * m.bits / 8;
    size_t packed = (size_t)rows * m.row_bytes, norms = (size_t)rows * m.groups * 2;
    size_t padded = nd_cq_padded(&m);
    uint8_t *bytes = malloc(packed + norms);
    float *x = malloc((padded * 2 + rows) * sizeof(float));
    if (!bytes || !x) {
        free(bytes), free(x);
        nd_fail(err, NEEDLE_E_NOMEM, "no memory for a [%u, %u] benchmark matrix", rows, cols);
        return -1;
    }
    for (size_t i = 0; i < packed; i++) bytes[i] = (uint8_t)next_random(seed);
    for (size_t i = 0; i < norms; i += 2) {
        uint16_t h = nd_f32_to_fp16(0.5f + 0.5f * (random_unit(seed) + 1.0f));
        bytes[packed + i] = (uint8_t)h, bytes[packed + i + 1] = (uint8_t)(h >> 8);
    }
    m.packed = bytes, m.norms = bytes + packed;
    if (nd_cq_tileable(&m) && nd_cq_repack(&m, bytes, bytes + packed)) {
        free(bytes), free(x);
        nd_fail(err, NEEDLE_E_NOMEM, "no memory to tile a [%u, %u] benchmark matrix", rows, cols);
        return -1;
    }
    float *xr = x + padded, *y = xr + padded;
    for (uint32_t i = 0; i < cols; i++) x[i] = random_unit(seed);
    nd_cq_rotate(&m, x, xr);
    /* A decode step's path (session.c matmuls): the activation quantised,
     * the tables built (tiled matrices), then the q8 GEMV. */
    uint8_t *q = malloc(nd_q8_bytes(&m) + nd_q8_tables_bytes(&m));
    if (!q) {
        free(bytes), free(x);
        nd_fail(err, NEEDLE_E_NOMEM, "no memory for the tables of a [%u, %u] benchmark matrix", rows, cols);
        return -1;
    }
    int8_t *tables = (int8_t *)q + nd_q8_bytes(&m);
    const nd_cq *mp = &m;
    double t0 = nd_now_ms();
    for (uint32_t it = 0; it < iterations; it++) {
        nd_q8_activation(&m, xr, q);
        if (m.tiles) nd_q8_tables(&m, q, tables);
        nd_cq_matmul_q8(&mp, &y, 1, q, 1, m.tiles ? tables : NULL);
    }
    double ms = nd_now_ms() - t0;
    free(bytes), free(x), free(q);
    return ms;
}

/* Milliseconds of `iterations` dense f32 GEMVs, or -1. */
static double time_f32(uint32_t rows, uint32_t cols, uint32_t iterations, uint32_t *seed,
                       needle_error *err) {
    size_t count = (size_t)rows * cols; /* <= 2^26 (bench_args) */
    float *w = malloc((count + cols + rows) * sizeof(float));
    if (!w) {
        nd_fail(err, NEEDLE_E_NOMEM, "no memory for a [%u, %u] f32 matrix", rows, cols);
        return -1;
    }
    float *x = w + count, *y = x + cols;
    for (size_t i = 0; i < count + cols; i++) w[i] = random_unit(seed);
    double t0 = nd_now_ms();
    for (uint32_t it = 0; it < iterations; it++) nd_f32_gemv(w, rows, cols, x, y);
    double ms = nd_now_ms() - t0;
    free(w);
    return ms;
}

double needle_bench_gemv(uint32_t bits, uint32_t rows, uint32_t cols, uint32_t group,
                         uint32_t iterations, needle_error *err) {
    if (bench_args(bits, rows, cols, group, err)) return -1;
    uint32_t seed = 0x9E3779B9u ^ (bits * 65599u + rows * 31u + cols);
    if (bits == BENCH_F32) return time_f32(rows, cols, iterations, &seed, err);
    return time_cq(bits, rows, cols, group, iterations, &seed, err);
}
