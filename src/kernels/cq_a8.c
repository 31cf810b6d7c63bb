/* cq_a8.c: the activation quantiser and the scalar reference of the int8
 * kernel for short archive-layout CQ matrices (see cq_a8.h). */
#include <math.h>
#include <string.h>
#include "kernels/cq_a8.h"
#include "format/fp16.h"

int nd_cq_a8_fits(const nd_cq *m) {
    return m->tiles == 0 && (m->bits == 2 || m->bits == 4) && (m->group * m->bits) % 128 == 0;
}

int nd_cq_a8_shared(const nd_cq *a, const nd_cq *b) {
    return a->group == b->group && a->groups == b->groups && a->bits == b->bits;
}

size_t nd_cq_a8_bytes(const nd_cq *m) {
    return nd_cq_padded(m) * sizeof(int16_t) + (size_t)m->groups * (sizeof(float) + sizeof(int32_t));
}

/* Round half to even, clamped to [-max, max]; NaN is 0. */
static int to_int(float v, float max) {
    if (v != v) return 0;
    float r = rintf(v);
    return (int)(r > max ? max : r < -max ? -max : r);
}

float nd_cq_a8_levels(const nd_cq *m, int8_t hi[16], int8_t lo[16]) {
    float lmax = 0.0f;
    for (uint32_t e = 0; e < (1u << m->bits); e++) lmax = fmaxf(lmax, fabsf(m->levels[e]));
    memset(hi, 0, 16);
    memset(lo, 0, 16);
    if (!(lmax > 0.0f)) return 0.0f;
    float inv = 127.0f / lmax;
    for (uint32_t e = 0; e < (1u << m->bits); e++) {
        float t = m->levels[e] * inv;
        hi[e] = (int8_t)to_int(t, 127.0f);
        lo[e] = (int8_t)to_int((t - hi[e]) * 127.0f, 127.0f);
    }
    return lmax / (127.0f * 127.0f);
}

/* Column of lane i, slot j of vector v in a group (cq_a8.h's order). */
static uint32_t column_of(const nd_cq *m, uint32_t v, uint32_t i, uint32_t j) {
    return (16 * v + i) * (8 / m->bits) + j;
}

void nd_cq_a8_quantise_group(const nd_cq *m, const float *x, int16_t *out, float *scale, int32_t *sum) {
    uint32_t per = 8 / m->bits, vectors = m->group * m->bits / 128;
    float amax = 0.0f;
    for (uint32_t k = 0; k < m->group; k++) amax = fmaxf(amax, fabsf(x[k]));
    float inv = amax > 0.0f ? (float)ND_CQ_A8_XMAX / amax : 0.0f;
    int32_t total = 0;
    for (uint32_t v = 0; v < vectors; v++)
        for (uint32_t j = 0; j < per; j++)
            for (uint32_t i = 0; i < 16; i++) {
                int q = to_int(x[column_of(m, v, i, j)] * inv, (float)ND_CQ_A8_XMAX);
                out[(v * per + j) * 16 + i] = (int16_t)q;
                total += q;
            }
    *scale = amax / (float)ND_CQ_A8_XMAX;
    *sum = total;
}

void nd_cq_a8_quantise_ref(const nd_cq *m, const float *xr, void *q) {
    int16_t *xq = q;
    float *scales = (float *)(xq + nd_cq_padded(m));
    int32_t *sums = (int32_t *)(scales + m->groups);
    for (uint32_t g = 0; g < m->groups; g++)
        nd_cq_a8_quantise_group(m, xr + (size_t)g * m->group, xq + (size_t)g * m->group, scales + g, sums + g);
}

void nd_cq_a8_gemv_ref(const nd_cq *m, const void *q, float *y) {
    const int16_t *xq = q;
    const float *scales = nd_cq_a8_scales(m, q);
    int8_t hi[16], lo[16];
    float lscale = nd_cq_a8_levels(m, hi, lo);
    uint32_t per = 8 / m->bits, vectors = m->group * m->bits / 128, mask = (1u << m->bits) - 1;
    for (uint32_t r = 0; r < m->rows; r++) {
        const uint8_t *row = m->packed + (size_t)r * m->row_bytes;
        float acc = 0.0f;
        for (uint32_t g = 0; g < m->groups; g++) {
            const uint8_t *bytes = row + (size_t)g * vectors * 16;
            const int16_t *x = xq + (size_t)g * m->group;
            int32_t sum_hi = 0, sum_lo = 0;
            for (uint32_t v = 0; v < vectors; v++)
                for (uint32_t j = 0; j < per; j++)
                    for (uint32_t i = 0; i < 16; i++) {
                        uint32_t e = (bytes[v * 16 + i] >> (j * m->bits)) & mask;
                        sum_hi += hi[e] * x[(v * per + j) * 16 + i];
                        sum_lo += lo[e] * x[(v * per + j) * 16 + i];
                    }
            float norm = nd_load_fp16(m->norms + 2 * ((size_t)r * m->groups + g));
            acc += (norm * (scales[g] * lscale)) * (127.0f * (float)sum_hi + (float)sum_lo);
        }
        y[r] = acc;
    }
}
