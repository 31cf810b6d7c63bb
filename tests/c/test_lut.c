/* test_lut.c: the tiled CQ layout (cq_tiled.c): the in-place repack keeps
 * every index and norm; the exact kernels on it match nd_cq_gemv_ref on the
 * archive layout bit for bit; the int8 table kernels stay within their
 * rounding bound of float64 arithmetic; tables built once and shared give
 * the fused kernels' bits; and (SIMD128 builds) every simd128
 * kernel matches its scalar reference bit for bit. Random matrices: bits 2,
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

/* y of the table kernel against float64 levels . xr: within the table
 * rounding (scale/2 per code, scale = bound / 127^2, times norm) plus float
 * slack; and the error is
 * small in relative terms for random data. */
static void test_lut_error_bound(void) {
    uint64_t s = 13;
    double worst_rel = 0, sq_err = 0, sq_ref = 0;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        CHECK(p.repack == 0, "repack failed");
        const nd_cq *m = &p.m;
        if (!p.t.tiles) { cq_pair_free(&p); continue; }
        uint32_t tr = p.t.tiles * 16, codes = m->group * m->bits / 4;
        float *y = malloc(m->rows * sizeof(float));
        nd_cqt_gemv_lut_ref(&p.t, p.xr, y);
        int ok = 1;
        for (uint32_t r = 0; r < tr; r++) {
            double exact = 0, bound = 1e-30;
            for (uint32_t g = 0; g < m->groups; g++) {
                const float *x = p.xr + (size_t)g * m->group;
                double amax = 0, lmax = 0, dot = 0, mag = 0; /* scale = lmax * max |x| a code reads / 127^2 */
                for (uint32_t i = 0; i < (1u << m->bits); i++) lmax = fmax(lmax, fabs(m->levels[i]));
                for (uint32_t j = 0; j < codes; j++)
                    amax = fmax(amax, lmax * (m->bits == 4 ? fabs(x[j]) : fabs(x[2 * j]) + fabs(x[2 * j + 1])));
                for (uint32_t k = 0; k < m->group; k++) {
                    double v = (double)m->levels[nd_cq_index(m, r, g * m->group + k)] * x[k];
                    dot += v, mag += fabs(v);
                }
                double norm = nd_load_fp16(m->norms + 2 * ((size_t)r * m->groups + g));
                exact += norm * dot;
                bound += norm * (0.5 * amax / (127 * 127) * codes * (1 + 1e-5) + 1e-5 * (mag + amax * codes));
            }
            double err = fabs(y[r] - exact);
            ok &= err <= bound;
            sq_err += err * err, sq_ref += exact * exact;
            if (err / bound > worst_rel) worst_rel = err / bound;
        }
        CHECK(ok, "bits %u group %u rows %u: error above the rounding bound", m->bits, m->group, m->rows);
        free(y);
        cq_pair_free(&p);
    }
    double rel = sqrt(sq_err / sq_ref);
    printf("  two int8 tables: rms error %.3g of rms output; worst %.2f of the bound\n", rel, worst_rel);
    CHECK(rel < 1e-4 && rel > 0, "rms relative error %g", rel); /* measured 5.1e-5 */
}

/* Tables of n activations built one after the other, then the batched table
 * product: each activation gets the single-activation kernel's bits (tail
 * rows: the exact kernel's); zero x gives 0. */
static void test_lut_gemm_and_zero(void) {
    uint64_t s = 14;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        CHECK(p.repack == 0, "repack failed");
        if (!p.t.tiles) { cq_pair_free(&p); continue; }
        uint32_t rows = p.m.rows, tr = p.t.tiles * 16, pad = nd_cq_padded(&p.m);
        size_t bytes = nd_cq_lut_bytes(&p.t);
        int8_t *tb = malloc(5 * bytes);
        float *sc = malloc(5 * p.t.groups * sizeof(float));
        float *y = malloc(5 * rows * sizeof(float)), *one = malloc(rows * sizeof(float));
        int ok = 1;
        for (uint32_t k = 0; k < 5; k++) nd_cq_lut_build(&p.t, p.xr + k * pad, tb + k * bytes, sc + k * p.t.groups);
        for (uint32_t n = 1; n <= 5; n++) {
            nd_cq_matmul_lut(&p.t, p.xr, n, tb, sc, y);
            for (uint32_t k = 0; k < n; k++) {
                nd_cqt_gemv_lut_ref(&p.t, p.xr + k * pad, one);
                ok &= same_bits(y + k * rows, one, tr);
                nd_cq_matmul(&p.t, p.xr + k * pad, 1, one);
                ok &= same_bits(y + k * rows + tr, one + tr, rows - tr);
            }
        }
        CHECK(ok, "bits %u group %u rows %u: batched tables differ", p.m.bits, p.m.group, rows);
        /* Three products from one set of tables give three times the bits of one. */
        const nd_cq *ms[] = {&p.t, &p.t, &p.t};
        float *many = malloc(3 * 5 * rows * sizeof(float)), *ys[] = {many, many + 5 * rows, many + 10 * rows};
        for (uint32_t n = 1; n <= 5; n += 4) {
            nd_cq_matmul_lut(&p.t, p.xr, n, tb, sc, y);
            nd_cq_matmul_lut_many(ms, ys, 3, p.xr, n, tb, sc);
            for (uint32_t i = 0; i < 3; i++) ok &= same_bits(ys[i], y, (size_t)n * rows);
        }
        CHECK(ok, "bits %u group %u rows %u: several products differ from one", p.m.bits, p.m.group, rows);
        free(many);
        memset(p.xr, 0, pad * sizeof(float));
        nd_cq_lut_build(&p.t, p.xr, tb, sc);
        nd_cq_matmul_lut(&p.t, p.xr, 1, tb, sc, y);
        float zero = 0;
        for (uint32_t r = 0; r < rows; r++) zero = fmaxf(zero, fabsf(y[r]));
        CHECK(zero == 0, "zero activation gives %g", zero);
        free(tb), free(sc), free(y), free(one);
        cq_pair_free(&p);
    }
}

/* Tables built once (from the archive-layout twin, which shares them) and
 * read by the split kernels give the fused kernels' bits; a level, bits or
 * group change is not shared. */
static void test_lut_split_matches_fused(void) {
    uint64_t s = 17;
    CQ_FOR_SHAPES {
        cq_pair p = cq_pair_make(&s, CQ_SHAPE);
        CHECK(p.repack == 0, "repack failed");
        if (!p.t.tiles) { cq_pair_free(&p); continue; }
        uint32_t rows = p.m.rows, tr = p.t.tiles * 16;
        int8_t *tb = malloc(nd_cq_lut_bytes(&p.m));
        float *sc = malloc(p.m.groups * sizeof(float));
        float *a = malloc(rows * sizeof(float)), *b = malloc(rows * sizeof(float));
        CHECK(nd_cq_lut_shared(&p.m, &p.t), "a matrix and its repacked copy must share tables");
        nd_cq other = p.m;
        other.levels[1] = other.levels[1] * 0.5f + 0.25f;
        CHECK(!nd_cq_lut_shared(&p.m, &other), "a different level must not share tables");
        other = p.m, other.group *= 2, other.groups = (other.groups + 1) / 2;
        CHECK(!nd_cq_lut_shared(&p.m, &other), "a different group must not share tables");
        nd_cq_lut_build_ref(&p.m, p.xr, tb, sc);
        nd_cqt_gemv_lut_ref(&p.t, p.xr, a);
        nd_cqt_gemv_lut_tables_ref(&p.t, tb, sc, b);
        int ok = same_bits(a, b, tr);
        nd_cq_lut_build(&p.m, p.xr + nd_cq_padded(&p.m), tb, sc); /* the dispatching one */
        nd_cqt_gemv_lut_ref(&p.t, p.xr + nd_cq_padded(&p.m), a);
        nd_cq_matmul_lut(&p.t, p.xr + nd_cq_padded(&p.m), 1, tb, sc, b);
        ok &= same_bits(a, b, tr);
        CHECK(ok, "bits %u group %u rows %u: split tables differ from fused", p.m.bits, p.m.group, rows);
        free(tb), free(sc), free(a), free(b);
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
        uint32_t rows = p.m.rows, tr = p.t.tiles * 16, pad = nd_cq_padded(&p.m);
        float *a = malloc(5 * rows * sizeof(float)), *b = malloc(5 * rows * sizeof(float));
        nd_cqt_gemv_ref(&p.t, p.xr, a);
        nd_cqt_gemv_simd128(&p.t, p.xr, b);
        int ok = same_bits(a, b, tr);
        for (uint32_t n = 2; n <= 4; n++) {
            nd_cqt_gemm_ref(&p.t, p.xr, n, a);
            nd_cqt_gemm_simd128(&p.t, p.xr, n, b);
            for (uint32_t k = 0; k < n; k++) ok &= same_bits(a + k * rows, b + k * rows, tr);
        }
        size_t bytes = nd_cq_lut_bytes(&p.t);
        int8_t *ta = malloc(5 * bytes), *tbs = malloc(5 * bytes);
        float *sa = malloc(5 * p.t.groups * sizeof(float)), *sb = malloc(5 * p.t.groups * sizeof(float));
        for (uint32_t k = 0; k < 5; k++) {
            nd_cq_lut_build_ref(&p.t, p.xr + k * pad, ta + k * bytes, sa + k * p.t.groups);
            nd_cq_lut_build_simd128(&p.t, p.xr + k * pad, tbs + k * bytes, sb + k * p.t.groups);
        }
        ok &= memcmp(ta, tbs, 5 * bytes) == 0 && same_bits(sa, sb, 5 * p.t.groups);
        nd_cqt_gemv_lut_tables_ref(&p.t, ta, sa, a);
        nd_cqt_gemv_lut_tables_simd128(&p.t, ta, sa, b);
        ok &= same_bits(a, b, tr);
        for (uint32_t n = 2; n <= 5; n++) {
            nd_cqt_gemm_lut_tables_ref(&p.t, ta, sa, n, a);
            nd_cqt_gemm_lut_tables_simd128(&p.t, ta, sa, n, b);
            for (uint32_t k = 0; k < n; k++) ok &= same_bits(a + k * rows, b + k * rows, tr);
        }
        free(ta), free(tbs), free(sa), free(sb);
        CHECK(ok, "bits %u group %u rows %u cols %u: simd128 differs", p.m.bits, p.m.group, rows, p.m.cols);
        free(a), free(b);
        cq_pair_free(&p);
    }
}
#endif

int main(void) {
    RUN(test_repack_keeps_indices);
    RUN(test_exact_matches_reference);
    RUN(test_lut_error_bound);
    RUN(test_lut_gemm_and_zero);
    RUN(test_lut_split_matches_fused);
    RUN(test_gather);
#ifdef ND_SIMD128
    RUN(test_simd_twins);
#endif
    return check_report();
}
