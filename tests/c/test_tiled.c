/* test_tiled.c: the tiled CQ layout (cq_tiled.c): the in-place repack keeps
 * every index and norm; the exact kernels on it match nd_cq_gemv_ref on the
 * archive layout bit for bit; row gathers read it; and (SIMD128 builds) every
 * simd128 kernel matches its scalar reference bit for bit (the int8 kernels
 * that also read it: test_q8.c). Random matrices: bits 2,
 * 3, 4 and ternary, groups 8..256, row counts with and without a tail,
 * padded widths (splitmix64, fixed seeds). */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "check.h"
#include "cq_random.h"
#include "format/fp16.h"

static int same_bits(const float *a, const float *b, size_t n) { return memcmp(a, b, n * sizeof(float)) == 0; }

static void test_repack_keeps_indices(void) {
    uint64_t s = 11;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        CHECK(p.repack == 0, "repack failed");
        const nd_cq *m = &p.m, *t = &p.t;
        int tileable = m->rows >= 16; /* every width the tests make: bits 2 to 4, groups of 8 and up */
        CHECK(t->tiles == (tileable ? m->rows / 16 : 0), "bits %u rows %u: %u tiles", m->bits, m->rows, t->tiles);
        if (!tileable) CHECK(memcmp(p.a, p.b, (size_t)m->rows * (m->row_bytes + 2 * m->groups)) == 0, "untileable bytes changed");
        uint32_t bad = 0;
        for (uint32_t r = 0; r < m->rows; r++) {
            for (uint32_t k = 0; k < nd_cq_padded(m); k++) bad += nd_cqt_index(t, r, k) != nd_cq_index(m, r, k);
            for (uint32_t g = 0; g < m->groups; g++)
                bad += nd_cqt_norm(t, r, g) != nd_load_fp16(m->norms + 2 * ((size_t)r * m->groups + g));
        }
        CHECK(bad == 0, "bits %u group %u rows %u: %u indices or norms moved", m->bits, m->group, m->rows, bad);
        cq_pair_free(&p);
    }
}

/* Exact mode on the tiled layout is the archive reference, bit for bit (the
 * tail rows run the archive kernel, so they match it). */
static void test_exact_matches_reference(void) {
    uint64_t s = 12;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        CHECK(p.repack == 0, "repack failed");
        uint32_t rows = p.m.rows, tr = p.t.tiles * 16, pad = nd_cq_padded(&p.m);
        float *want = malloc(3 * rows * sizeof(float)), *tail = malloc(rows * sizeof(float));
        float *got = malloc(3 * rows * sizeof(float)), *one = malloc(rows * sizeof(float));
        nd_cq_matmul(&p.t, p.xr, 3, got);
        int ok = 1;
        if (!p.t.tiles) { /* untouched: the archive kernels, as before */
            float *g2 = malloc(3 * rows * sizeof(float));
            nd_cq_gemm(&p.m, p.xr, 3, g2);
            ok &= same_bits(g2, got, 3 * rows);
            free(g2);
        }
        for (uint32_t k = 0; k < 3; k++) {
            nd_cq_gemv_ref(&p.m, p.xr + k * pad, want + k * rows);
            ok &= same_bits(got + k * rows, want + k * rows, tr);
            if (p.t.tiles) { /* the tail runs the archive GEMV per activation */
                nd_cq_gemv(&p.m, p.xr + k * pad, tail);
                ok &= same_bits(got + k * rows + tr, tail + tr, rows - tr);
            }
        }
        if (p.t.tiles) {
            nd_cq_matmul(&p.t, p.xr, 1, one);
            ok &= same_bits(one, got, rows);
            nd_cqt_gemv_ref(&p.t, p.xr, one);
            ok &= same_bits(one, want, tr);
        }
        CHECK(ok, "bits %u group %u rows %u cols %u: exact tiled differs", p.m.bits, p.m.group, rows, p.m.cols);
        free(want), free(tail), free(got), free(one);
        cq_pair_free(&p);
    }
}

/* Gathering a row of the repacked matrix gives nd_cq_row_ref's row. */
static void test_gather(void) {
    uint64_t s = 15;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        CHECK(p.repack == 0, "repack failed");
        const nd_cq *m = &p.m;
        float *want = malloc((m->cols + 1) * sizeof(float)), *got = malloc((m->cols + 1) * sizeof(float));
        float scratch[ND_CQ_MAX_GROUP];
        int ok = 1;
        for (uint32_t r = 0; r < m->rows; r++) {
            got[m->cols] = 7.0f;
            nd_cq_row_ref(m, r, want, scratch);
            nd_cq_gather(&p.t, r, got, scratch);
            ok &= same_bits(want, got, m->cols) && got[m->cols] == 7.0f;
        }
        CHECK(ok, "bits %u group %u rows %u: gathered rows differ", m->bits, m->group, m->rows);
        free(want), free(got);
        cq_pair_free(&p);
    }
}

#ifdef ND_SIMD128
/* Each simd128 kernel against its scalar twin, bit for bit, with up to 5 batched
 * activations plus odd batch sizes. */
static void test_simd_twins(void) {
    uint64_t s = 16;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        CHECK(p.repack == 0, "repack failed");
        if (!p.t.tiles) { cq_pair_free(&p); continue; }
        uint32_t rows = p.m.rows, tr = p.t.tiles * 16;
        float *a = malloc(5 * rows * sizeof(float)), *b = malloc(5 * rows * sizeof(float));
        nd_cqt_gemv_ref(&p.t, p.xr, a);
        nd_cqt_gemv_simd128(&p.t, p.xr, b);
        int ok = same_bits(a, b, tr);
        for (uint32_t n = 2; n <= 4; n++) {
            nd_cqt_gemm_ref(&p.t, p.xr, n, a);
            nd_cqt_gemm_simd128(&p.t, p.xr, n, b);
            for (uint32_t k = 0; k < n; k++) ok &= same_bits(a + k * rows, b + k * rows, tr);
        }
        CHECK(ok, "bits %u group %u rows %u cols %u: simd128 differs", p.m.bits, p.m.group, rows, p.m.cols);
        free(a), free(b);
        cq_pair_free(&p);
    }
}
#endif

int main(void) {
    RUN(test_repack_keeps_indices);
    RUN(test_exact_matches_reference);
    RUN(test_gather);
#ifdef ND_SIMD128
    RUN(test_simd_twins);
#endif
    return check_report();
}
