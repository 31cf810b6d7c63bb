/* cq_q8.c: the engine's int8 quantiser, the scalar reference of the q8
 * kernels and their dispatch (see cq_q8.h). */
#include <math.h>
#include "kernels/cq_q8.h"
#include "kernels/threads.h"

/* Round half away from zero, saturated to [-128, 127]; NaN is 0. */
static int16_t to_int8(float v) {
    if (v != v) return 0;
    float r = roundf(v);
    return (int16_t)(r > 127.0f ? 127.0f : r < -128.0f ? -128.0f : r);
}

float nd_q8_quantise(const float *x, uint32_t n, int16_t *q) {
    float amax = 0.0f;
    for (uint32_t k = 0; k < n; k++) amax = fmaxf(amax, fabsf(x[k]));
    float scale = amax > 0.0f ? amax * ND_K127 : 1.0f, inv = 1.0f / scale;
    for (uint32_t k = 0; k < n; k++) q[k] = to_int8(x[k] * inv);
    return scale;
}

float nd_q8_levels(const nd_cq *m, int8_t lv[16]) {
    int16_t q[16] = {0};
    uint32_t count = 1u << m->bits;
    float scale = nd_q8_quantise(m->levels, count, q);
    for (uint32_t e = 0; e < 16; e++) lv[e] = (int8_t)(e < count ? q[e] : 0);
    return scale;
}

void nd_q8_activation_ref(const nd_cq *m, const float *xr, void *q) {
    int16_t *xq = q;
    float *scales = (float *)nd_q8_scales(m, q);
    for (uint32_t g = 0; g < m->groups; g++)
        scales[g] = nd_q8_quantise(xr + (size_t)g * m->group, m->group, xq + (size_t)g * m->group);
}

/* Rows [r0, r1) of m in either layout for n activations (the specification). */
static void rows_ref(const nd_cq *m, const void *q, uint32_t n, float *y, uint32_t r0, uint32_t r1) {
    int8_t lv[16];
    float cbs = nd_q8_levels(m, lv);
    for (uint32_t t = 0; t < n; t++) {
        const int16_t *xq = (const int16_t *)((const uint8_t *)q + t * nd_q8_bytes(m));
        const float *sx = nd_q8_scales(m, xq);
        for (uint32_t r = r0; r < r1; r++) {
            float acc = 0.0f;
            for (uint32_t g = 0; g < m->groups; g++) {
                int32_t sum = 0;
                for (uint32_t k = g * m->group; k < (g + 1) * m->group; k++)
                    sum += lv[nd_cqt_index(m, r, k)] * xq[k];
                acc += (float)sum * ((nd_cqt_norm(m, r, g) * cbs) * sx[g]);
            }
            y[(size_t)t * m->rows + r] = acc;
        }
    }
}

void nd_cqt_q8_gemm_ref(const nd_cq *m, const void *q, uint32_t n, float *y, uint32_t t0, uint32_t t1) {
    rows_ref(m, q, n, y, t0 * ND_CQ_TILE, t1 * ND_CQ_TILE);
}

/* Entry e of a code's table: the code's indices (two 2-bit ones, first in
 * the low bits, or one) times the activations the code reads. */
void nd_q8_tables_ref(const nd_cq *m, const void *q, int8_t *tables) {
    const int16_t *xq = q;
    int8_t lv[16];
    nd_q8_levels(m, lv);
    uint32_t codes = nd_cq_codes(m);
    for (uint32_t g = 0; g < m->groups; g++) {
        int8_t *high = tables + (size_t)g * codes * 32, *low = high + codes * 16;
        const int16_t *x = xq + (size_t)g * m->group;
        for (uint32_t j = 0; j < codes; j++)
            for (uint32_t e = 0; e < 16; e++) {
                int32_t v = m->bits == 2 ? lv[e & 3] * x[2 * j] + lv[e >> 2] * x[2 * j + 1] : lv[e] * x[j];
                int32_t low_byte = v & 255; /* |v| <= 32512 = 2 * 127 * 128: v = 256 high + low */
                high[16 * j + e] = (int8_t)((v - low_byte) / 256);
                low[16 * j + e] = (int8_t)(uint8_t)low_byte;
            }
    }
}

/* ---- dispatch ------------------------------------------------------------- */

#ifdef ND_SIMD128
#define SPLIT_TILES 4u /* tiles per chunk: 64 rows */
#else
#define SPLIT_TILES 0x10000u /* one chunk a matrix: no threads, and the scalar kernel's tables are per chunk */
#endif
#define SPLIT_MAX 8u   /* matrices per job */

typedef struct {
    const nd_cq *const *ms;
    float *const *ys;
    const void *q;
    const int8_t *tables;
    uint32_t n, first[SPLIT_MAX + 1]; /* first[i]: the chunks before matrix i */
    int8_t lv[SPLIT_MAX][16];         /* matrix i's int8 levels and their scale */
    float cbs[SPLIT_MAX];
} q8_job;

static void q8_chunk(const void *p, uint32_t c) {
    const q8_job *j = p;
    uint32_t i = 0;
    while (c >= j->first[i + 1]) i++;
    const nd_cq *m = j->ms[i];
    uint32_t t0 = (c - j->first[i]) * SPLIT_TILES, t1 = t0 + SPLIT_TILES < m->tiles ? t0 + SPLIT_TILES : m->tiles;
#ifdef ND_SIMD128
    if (j->n == 1 && j->tables) nd_cqt_q8_gemv_simd128(m, j->cbs[i], j->q, j->tables, j->ys[i], t0, t1);
    else nd_cqt_q8_gemm_simd128(m, j->lv[i], j->cbs[i], j->q, j->n, j->ys[i], t0, t1);
#else
    nd_cqt_q8_gemm_scalar(m, j->lv[i], j->cbs[i], j->q, j->n, j->ys[i], t0, t1);
#endif
}

void nd_cq_matmul_q8(const nd_cq *const *ms, float *const *ys, uint32_t count, const void *q, uint32_t n,
                     const int8_t *tables) {
    for (uint32_t i0 = 0; i0 < count; i0 += SPLIT_MAX) {
        uint32_t k = count - i0 < SPLIT_MAX ? count - i0 : SPLIT_MAX;
        q8_job j = {.ms = ms + i0, .ys = ys + i0, .q = q, .tables = tables, .n = n};
        for (uint32_t i = 0; i < k; i++) {
            j.first[i + 1] = j.first[i] + (ms[i0 + i]->tiles + SPLIT_TILES - 1) / SPLIT_TILES;
            j.cbs[i] = nd_q8_levels(ms[i0 + i], j.lv[i]);
        }
        nd_parallel(q8_chunk, &j, j.first[k]);
    }
    for (uint32_t i = 0; i < count; i++) rows_ref(ms[i], q, n, ys[i], ms[i]->tiles * ND_CQ_TILE, ms[i]->rows);
}
