/* cq_random.h: random CQ matrices for the kernel tests (test_cq, test_tiled, test_q8,
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

/* A random matrix in the archive layout (m, bytes a) and a copy repacked into
 * tiles (t, bytes b; repack: nd_cq_repack's result), with five activations
 * xr[5][padded] uniform in [-1, 1). */
typedef struct {
    nd_cq m, t;
    uint8_t *a, *b;
    float *xr;
    int repack;
} cq_pair;

/* marker 2, 3, 4, or 5 for ternary. */
static inline cq_pair cq_pair_make(uint64_t *s, uint32_t marker, uint32_t group, uint32_t rows, uint32_t cols) {
    cq_pair p;
    memset(&p, 0, sizeof p);
    cq_random_shape(&p.m, s, marker, group, rows, cols);
    uint32_t padded = nd_cq_padded(&p.m);
    size_t packed = (size_t)rows * p.m.row_bytes, bytes = packed + (size_t)rows * p.m.groups * 2;
    p.a = cq_random_bytes(&p.m, s);
    p.b = malloc(bytes);
    memcpy(p.b, p.a, bytes);
    p.t = p.m;
    p.t.packed = p.b, p.t.norms = p.b + packed;
    p.repack = nd_cq_repack(&p.t, p.b, p.b + packed);
    p.xr = malloc((size_t)5 * padded * sizeof(float));
    for (size_t i = 0; i < (size_t)5 * padded; i++) p.xr[i] = (float)(2 * rng_unit(s) - 1);
    return p;
}

static inline void cq_pair_free(cq_pair *p) { free(p->a), free(p->b), free(p->xr); }

/* The shapes the tiled-kernel tests run: every width, groups 8..256, row
 * counts with and without a tail, padded widths. */
static const uint32_t cq_markers[] = {2, 3, 4, 5};
static const uint32_t cq_groups[] = {8, 16, 32, 64, 128, 256};
static const uint32_t cq_row_counts[] = {5, 16, 17, 33, 100};
#define CQ_FOR_SHAPES                                                 \
    for (int mi = 0; mi < 4; mi++)                                    \
        for (int gi = 0; gi < 6; gi++)                                \
            for (int ri = 0; ri < 5; ri++)                            \
                for (int wi = 0; wi < 3; wi++)
#define CQ_SHAPE cq_markers[mi], cq_groups[gi], cq_row_counts[ri], \
    (wi == 0 ? 2 * cq_groups[gi] : wi == 1 ? 3 * cq_groups[gi] - 5 : 3)

#endif
