/* cq_q8_scalar.c: the q8 product (cq_q8.h) for builds without SIMD128,
 * compiled for speed. The reference reads every index through nd_cqt_index,
 * which left the no-SIMD engine at about 10 tokens/s on the released
 * geometry; this kernel looks up a code's two (2-bit) or one (4-bit) levels
 * times activations in an int32 table built once per activation and group,
 * and reads the tile bytes in order. The integer sums are exact and the
 * float combine is the reference's, so the result is the reference's, bit
 * for bit (tests/c/test_q8.c). 3-bit matrices take the reference. */
#ifndef ND_SIMD128
#include "kernels/cq_q8.h"
#include "format/fp16.h"

/* table[j][e]: code j's levels (entry e: its indices) times its activations. */
static void group_table(const nd_cq *m, const int8_t lv[16], const int16_t *x, int32_t *table) {
    for (uint32_t j = 0; j < nd_cq_codes(m); j++)
        for (uint32_t e = 0; e < 16; e++)
            table[16 * j + e] = m->bits == 2 ? lv[e & 3] * x[2 * j] + lv[e >> 2] * x[2 * j + 1] : lv[e] * x[j];
}

void nd_cqt_q8_gemm_scalar(const nd_cq *m, const int8_t lv[16], float cbs, const void *q, uint32_t n, float *y,
                           uint32_t t0, uint32_t t1) {
    if (m->bits == 3) {
        nd_cqt_q8_gemm_ref(m, q, n, y, t0, t1);
        return;
    }
    int32_t table[ND_CQ_MAX_GROUP * 16];
    uint32_t bytes = m->group * m->bits / 8; /* a row's bytes per group: two codes each */
    for (uint32_t k = 0; k < n; k++) {
        const int16_t *xq = (const int16_t *)((const uint8_t *)q + k * nd_q8_bytes(m));
        const float *sx = nd_q8_scales(m, xq);
        float *yk = y + (size_t)k * m->rows;
        for (uint32_t r = t0 * ND_CQ_TILE; r < t1 * ND_CQ_TILE; r++) yk[r] = 0.0f;
        for (uint32_t g = 0; g < m->groups; g++) {
            group_table(m, lv, xq + (size_t)g * m->group, table);
            for (uint32_t t = t0; t < t1; t++) {
                const uint8_t *codes = m->packed + ((size_t)t * m->row_bytes + (size_t)g * bytes) * ND_CQ_TILE;
                const uint8_t *norms = m->norms + ((size_t)t * m->groups + g) * ND_CQ_TILE * 2;
                for (uint32_t lane = 0; lane < ND_CQ_TILE; lane++) {
                    int32_t sum = 0;
                    for (uint32_t b = 0; b < bytes; b++) {
                        uint32_t v = codes[b * ND_CQ_TILE + lane];
                        sum += table[32 * b + (v & 15)] + table[32 * b + 16 + (v >> 4)];
                    }
                    float norm = nd_load_fp16(norms + 2 * lane);
                    yk[t * ND_CQ_TILE + lane] += (float)sum * ((norm * cbs) * sx[g]);
                }
            }
        }
    }
}
#endif
