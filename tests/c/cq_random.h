/* cq_random.h: the header fields and random levels of a CQ matrix for the
 * kernel tests (test_cq, test_lut, test_a8), which then fill its indices
 * and norms their own way. */
#ifndef TEST_CQ_RANDOM_H
#define TEST_CQ_RANDOM_H
#include <math.h>
#include <string.h>
#include "cq.h"
#include "rng.h"

/* marker 2, 3 or 4 bits, or 5 for ternary levels (0, +c, 0, -c on 2-bit
 * crumbs); levels past 2^bits are NaN, so a kernel that read one shows it. */
static void cq_random_shape(nd_cq *m, uint64_t *s, uint32_t marker, uint32_t group, uint32_t rows, uint32_t cols) {
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

#endif
