/* cq_random.h: random CQ matrices for the kernel tests (test_cq, test_lut,
 * test_a8): the header fields and levels, and random packed bytes and norms
 * for the tests that need no list of the indices. */
#ifndef TEST_CQ_RANDOM_H
#define TEST_CQ_RANDOM_H
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cq.h"
#include "format/fp16.h"
#include "rng.h"

/* marker 2, 3 or 4 bits, or 5 for ternary levels (0, +c, 0, -c on 2-bit
 * crumbs); levels past 2^bits are NaN, so a kernel that read one shows it. */
static inline void cq_random_shape(nd_cq *m, uint64_t *s, uint32_t marker, uint32_t group, uint32_t rows, uint32_t cols) {
    memset(m, 0, sizeof *m);
    m->rows = rows, m->cols = cols, m->group = group;
    m->groups = (cols + group - 1) / group;
    m->bits = marker == 5 ? 2 : marker;
    m->row_bytes = m->groups * group * m->bits / 8;
    for (uint32_t i = 0; i < 16; i++)
        m->levels[i] = i < (1u << m->bits) ? (float)((2 * rng_unit(s) - 1) * 2.5 / sqrt(group)) : NAN;
    if (marker == 5) {
        float c = (float)(1.2240064 / sqrt((double)group));
        m->levels[0] = 0, m->levels[1] = c, m->levels[2] = 0, m->levels[3] = -c;
    }
}

/* Bytes for m: random packed indices, then fp16 norms in [0.05, 4.05), about
 * 2% of them subnormal (3e-6). m->packed and m->norms point into them; the
 * caller frees them. */
static inline uint8_t *cq_random_bytes(nd_cq *m, uint64_t *s) {
    size_t packed = (size_t)m->rows * m->row_bytes, norms = (size_t)m->rows * m->groups;
    uint8_t *b = malloc(packed + 2 * norms);
    for (size_t i = 0; i < packed; i++) b[i] = (uint8_t)rng_next(s);
    for (size_t i = 0; i < norms; i++) {
        uint16_t h = nd_f32_to_fp16((float)(rng_unit(s) < 0.02 ? 3e-6 : 0.05 + 4.0 * rng_unit(s)));
        b[packed + 2 * i] = (uint8_t)h, b[packed + 2 * i + 1] = (uint8_t)(h >> 8);
    }
    m->packed = b, m->norms = b + packed;
    return b;
}

#endif
