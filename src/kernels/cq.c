/* cq.c: scalar reference kernels for packed Cactus Quants matrices (see cq.h).
 * These are the specification the SIMD128 twins in cq_simd128.c are tested
 * against: each group's dot product is accumulated in float in index order,
 * then y[r] += norm * dot, groups in ascending order. Also the dense f32 GEMV
 * reference used as the benchmark's baseline. */
#include <string.h>
#include "kernels/cq.h"
#include "format/fp16.h"
#include "kernels/hadamard.h"

uint32_t nd_cq_index(const nd_cq *m, uint32_t row, uint32_t k) {
    const uint8_t *p = m->packed + (size_t)row * m->row_bytes;
    size_t bit = (size_t)k * m->bits;
    uint32_t shift = (uint32_t)(bit & 7), v = p[bit >> 3];
    /* Only a 3-bit index can straddle two bytes; never read past the row. */
    if (shift + m->bits > 8) v |= (uint32_t)p[(bit >> 3) + 1] << 8;
    return (v >> shift) & ((1u << m->bits) - 1);
}

static float norm_at(const nd_cq *m, uint32_t row, uint32_t g) {
    return nd_load_fp16(m->norms + 2 * ((size_t)row * m->groups + g));
}

/* Logical columns of group g (the last group may be partly padding). */
static uint32_t group_width(const nd_cq *m, uint32_t g) {
    uint32_t base = g * m->group;
    return m->cols - base < m->group ? m->cols - base : m->group;
}

void nd_cq_row_ref(const nd_cq *m, uint32_t row, float *out, float *scratch) {
    for (uint32_t g = 0; g < m->groups; g++) {
        float norm = norm_at(m, row, g);
        uint32_t base = g * m->group;
        for (uint32_t k = 0; k < m->group; k++)
            scratch[k] = m->levels[nd_cq_index(m, row, base + k)] * norm;
        nd_fwht(scratch, m->group); /* Hg is symmetric: (l*n) @ Hg = Hg (l*n) */
        memcpy(out + base, scratch, group_width(m, g) * sizeof(float));
    }
}

void nd_cq_rotate(const nd_cq *m, const float *x, float *xr) {
    for (uint32_t g = 0; g < m->groups; g++) {
        uint32_t base = g * m->group, w = group_width(m, g);
        memcpy(xr + base, x + base, w * sizeof(float));
        memset(xr + base + w, 0, (m->group - w) * sizeof(float));
        nd_fwht(xr + base, m->group);
    }
}

/* levels[idx] for the group's indices: what a dot product multiplies. */
static void unpack_levels(const nd_cq *m, uint32_t row, uint32_t g, float *lv) {
    for (uint32_t k = 0; k < m->group; k++)
        lv[k] = m->levels[nd_cq_index(m, row, g * m->group + k)];
}

static float dot(const float *a, const float *b, uint32_t n) {
    float acc = 0.0f;
    for (uint32_t k = 0; k < n; k++) acc += a[k] * b[k];
    return acc;
}

void nd_cq_gemv_ref(const nd_cq *m, const float *xr, float *y) {
    float lv[ND_CQ_MAX_GROUP];
    for (uint32_t r = 0; r < m->rows; r++) {
        float acc = 0.0f;
        for (uint32_t g = 0; g < m->groups; g++) {
            unpack_levels(m, r, g, lv);
            acc += norm_at(m, r, g) * dot(lv, xr + (size_t)g * m->group, m->group);
        }
        y[r] = acc;
    }
}

void nd_cq_gemm_ref(const nd_cq *m, const float *xr, uint32_t n, float *y) {
    float lv[ND_CQ_MAX_GROUP];
    size_t padded = nd_cq_padded(m);
    for (uint32_t t = 0; t < n; t++) memset(y + (size_t)t * m->rows, 0, m->rows * sizeof(float));
    for (uint32_t r = 0; r < m->rows; r++) {
        for (uint32_t g = 0; g < m->groups; g++) {
            unpack_levels(m, r, g, lv);  /* once, for all n activations */
            float norm = norm_at(m, r, g);
            const float *xg = xr + (size_t)g * m->group;
            for (uint32_t t = 0; t < n; t++)
                y[(size_t)t * m->rows + r] += norm * dot(lv, xg + t * padded, m->group);
        }
    }
}

void nd_f32_gemv_ref(const float *w, uint32_t rows, uint32_t cols, const float *x, float *y) {
    for (uint32_t r = 0; r < rows; r++) y[r] = dot(w + (size_t)r * cols, x, cols);
}
