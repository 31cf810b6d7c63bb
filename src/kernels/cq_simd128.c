/* cq_simd128.c: wasm SIMD128 twins of the CQ kernels in cq.c, plus a dense
 * f32 GEMV. Same results as the references up to float summation order.
 *
 * Decoding works on units of 32 weights (8, 12 or 16 packed bytes). A unit's
 * indices are first spread into two vectors of 16 byte lanes (unit_indices),
 * then turned into f32 levels by four i8x16.swizzle lookups into "byte
 * planes" of the level table (plane b holds byte b of every level) and
 * re-interleaving the bytes into floats (nd_lookup16, cq_levels_simd128.h). Any table of up to 16
 * levels costs the same, so 2, 3 and 4 bits share one path.
 *
 * The cheapest way to spread indices leaves them in a fixed, bit-width
 * dependent lane order (unit_order). The GEMV permutes each activation group
 * into that order once per block of rows instead of fixing the order per
 * weight; the GEMM and the row gather transpose levels back to natural order
 * (unit_levels_natural), and the GEMM then dots each decoded group with four
 * activations per pass.
 * Groups smaller than a unit fall back to the scalar references. */
#ifdef ND_SIMD128
#include <math.h>
#include <string.h>
#include <wasm_simd128.h>
#include "kernels/cq.h"
#include "format/fp16.h"
#include "kernels/cq_levels_simd128.h"
#include "kernels/hadamard.h"

#define UNIT 32u      /* weights decoded per step */
#define ROW_BLOCK 64u /* rows that share one permuted activation group */
#define INLINE static inline __attribute__((always_inline))

typedef struct {
    nd_level_planes lv; /* the levels, see cq_levels_simd128.h */
    v128_t mul3;        /* 3-bit decoding multipliers, see crumbs3 */
} level_planes;

static int simd_fits(const nd_cq *m) {
    return m->bits >= 2 && m->bits <= 4 && m->group >= UNIT && m->group <= ND_CQ_MAX_GROUP &&
           m->group % UNIT == 0;
}

static float norm_at(const nd_cq *m, uint32_t row, uint32_t g) {
    return nd_load_fp16(m->norms + 2 * ((size_t)row * m->groups + g));
}

static level_planes make_planes(const nd_cq *m) {
    level_planes lp;
    lp.lv = nd_level_planes_of(m);
    /* Read back through volatile: seeing constant powers of two, LLVM turns the
     * multiply into per-lane shifts, which SIMD128 lacks, and scalarises them. */
    volatile v128_t mul3 = wasm_i16x8_const(8192, 1024, 128, 4096, 512, 64, 2048, 256);
    lp.mul3 = mul3;
    return lp;
}


/* 3 bits: each 16-bit lane takes the two bytes holding its index, a multiply
 * by 2^(13 - shift) moves the index to the top three bits, a shift brings it
 * down (a per-lane variable shift SIMD128 lacks). */
INLINE v128_t crumbs3(v128_t w, v128_t mul3) {
    return wasm_u16x8_shr(wasm_i16x8_mul(w, mul3), 13);
}

/* The 32 indices of one unit as two vectors of byte lanes, in the order
 * unit_order() gives. 16-bit shifts are fine: the mask drops what crosses. */
INLINE void unit_indices(const uint8_t *p, uint32_t bits, v128_t mul3, v128_t idx[2]) {
    if (bits == 2) {
        const v128_t m = wasm_i8x16_splat(3);
        v128_t v = wasm_v128_load64_zero(p);
        v128_t c0 = wasm_v128_and(v, m), c1 = wasm_v128_and(wasm_u16x8_shr(v, 2), m);
        v128_t c2 = wasm_v128_and(wasm_u16x8_shr(v, 4), m), c3 = wasm_v128_and(wasm_u16x8_shr(v, 6), m);
        idx[0] = wasm_i8x16_shuffle(c0, c1, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
        idx[1] = wasm_i8x16_shuffle(c2, c3, 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19, 20, 21, 22, 23);
    } else if (bits == 4) {
        const v128_t m = wasm_i8x16_splat(15);
        v128_t v = wasm_v128_load(p);
        idx[0] = wasm_v128_and(v, m);
        idx[1] = wasm_v128_and(wasm_u16x8_shr(v, 4), m);
    } else { /* 12 bytes, read exactly: the unit may end the matrix */
        v128_t v = wasm_v128_load32_lane(p + 8, wasm_v128_load64_zero(p), 2);
        v128_t w0 = wasm_i8x16_shuffle(v, v, 0, 1, 0, 1, 0, 1, 1, 2, 1, 2, 1, 2, 2, 3, 2, 3);
        v128_t w1 = wasm_i8x16_shuffle(v, v, 3, 4, 3, 4, 3, 4, 4, 5, 4, 5, 4, 5, 5, 6, 5, 6);
        v128_t w2 = wasm_i8x16_shuffle(v, v, 6, 7, 6, 7, 6, 7, 7, 8, 7, 8, 7, 8, 8, 9, 8, 9);
        v128_t w3 = wasm_i8x16_shuffle(v, v, 9, 10, 9, 10, 9, 10, 10, 11, 10, 11, 10, 11, 11, 12, 11, 12);
        idx[0] = wasm_u8x16_narrow_i16x8(crumbs3(w0, mul3), crumbs3(w1, mul3));
        idx[1] = wasm_u8x16_narrow_i16x8(crumbs3(w2, mul3), crumbs3(w3, mul3));
    }
}

/* Which weight of its unit lane p (0..31) of the decoded unit holds: decoded
 * vector q = p/4 comes from idx[q/4], byte lane l = p % 16. */
static void unit_order(uint32_t bits, uint8_t src[UNIT]) {
    for (uint32_t p = 0; p < UNIT; p++) {
        uint32_t h = p / 16, l = p % 16;
        if (bits == 2) src[p] = (uint8_t)(4 * (l % 8) + 2 * h + l / 8); /* crumb 2h + l/8 of byte l%8 */
        else if (bits == 4) src[p] = (uint8_t)(2 * l + h);             /* nibble h of byte l */
        else src[p] = (uint8_t)p;                                       /* 3 bits: natural */
    }
}

/* One unit's 32 levels as eight f32x4, in unit_order. */
INLINE void unit_levels(const level_planes *lp, const uint8_t *p, uint32_t bits, v128_t lv[8]) {
    v128_t idx[2];
    unit_indices(p, bits, lp->mul3, idx);
    nd_lookup16(&lp->lv, idx[0], lv);
    nd_lookup16(&lp->lv, idx[1], lv + 4);
}

static float hsum(v128_t a0, v128_t a1, v128_t a2, v128_t a3) {
    v128_t v = wasm_f32x4_add(wasm_f32x4_add(a0, a1), wasm_f32x4_add(a2, a3));
    v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_f32x4_add(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(v, 0);
}

#define MAC(acc, a, ptr) acc = wasm_f32x4_add(acc, wasm_f32x4_mul(a, wasm_v128_load(ptr)))

/* levels . xp for one group whose activation xp is already in unit_order. */
INLINE float group_dot(const level_planes *lp, const uint8_t *p, uint32_t bits, uint32_t units,
                       const float *xp) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    for (uint32_t u = 0; u < units; u++, p += 4 * bits, xp += UNIT) {
        v128_t lv[8];
        unit_levels(lp, p, bits, lv);
        MAC(a0, lv[0], xp), MAC(a1, lv[1], xp + 4), MAC(a2, lv[2], xp + 8), MAC(a3, lv[3], xp + 12);
        MAC(a0, lv[4], xp + 16), MAC(a1, lv[5], xp + 20), MAC(a2, lv[6], xp + 24), MAC(a3, lv[7], xp + 28);
    }
    return hsum(a0, a1, a2, a3);
}

INLINE void gemv_bits(const nd_cq *m, const float *xr, float *y, uint32_t bits) {
    level_planes lp = make_planes(m);
    uint8_t src[UNIT];
    float xp[ND_CQ_MAX_GROUP];
    uint32_t units = m->group / UNIT;
    size_t group_bytes = (size_t)units * 4 * bits;
    unit_order(bits, src);
    memset(y, 0, m->rows * sizeof(float));
    for (uint32_t r0 = 0; r0 < m->rows; r0 += ROW_BLOCK) {
        uint32_t r1 = m->rows - r0 < ROW_BLOCK ? m->rows : r0 + ROW_BLOCK;
        for (uint32_t g = 0; g < m->groups; g++) {
            const float *xg = xr + (size_t)g * m->group;
            for (uint32_t k = 0; k < m->group; k++) xp[k] = xg[k - k % UNIT + src[k % UNIT]];
            const uint8_t *p = m->packed + (size_t)r0 * m->row_bytes + g * group_bytes;
            for (uint32_t r = r0; r < r1; r++, p += m->row_bytes)
                y[r] += norm_at(m, r, g) * group_dot(&lp, p, bits, units, xp);
        }
    }
}

void nd_cq_gemv_simd128(const nd_cq *m, const float *xr, float *y) {
    if (!simd_fits(m)) {
        nd_cq_gemv_ref(m, xr, y);
        return;
    }
    /* One copy of the loop per width, so the index decoding has no branches. */
    if (m->bits == 2) gemv_bits(m, xr, y, 2);
    else if (m->bits == 3) gemv_bits(m, xr, y, 3);
    else gemv_bits(m, xr, y, 4);
}

/* Four f32x4 rows r[0..3] transposed into out[0..3]. */
INLINE void transpose4(const v128_t *r, v128_t *out) {
    v128_t t0 = wasm_i32x4_shuffle(r[0], r[1], 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(r[0], r[1], 2, 6, 3, 7);
    v128_t t2 = wasm_i32x4_shuffle(r[2], r[3], 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(r[2], r[3], 2, 6, 3, 7);
    out[0] = wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5), out[1] = wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7);
    out[2] = wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5), out[3] = wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7);
}

/* One unit's levels in natural weight order (undoing unit_order). */
INLINE void unit_levels_natural(const level_planes *lp, const uint8_t *p, uint32_t bits, v128_t out[8]) {
    v128_t v[8];
    unit_levels(lp, p, bits, out);
    if (bits == 3) return;
    for (int q = 0; q < 8; q++) v[q] = out[q];
    if (bits == 4) { /* v[m] lane t: weight 8m+2t; v[4+m]: 8m+2t+1 */
        for (int m = 0; m < 4; m++) {
            out[2 * m] = wasm_i32x4_shuffle(v[m], v[4 + m], 0, 4, 1, 5);
            out[2 * m + 1] = wasm_i32x4_shuffle(v[m], v[4 + m], 2, 6, 3, 7);
        }
    } else { /* v[2j+s] lane t: weight 16s+4t+j, a 4x4 transpose per s */
        v128_t r0[4] = {v[0], v[2], v[4], v[6]}, r1[4] = {v[1], v[3], v[5], v[7]};
        transpose4(r0, out);
        transpose4(r1, out + 4);
    }
}

/* Group g of row r as levels in natural order (lv[group]). */
static void group_levels(const nd_cq *m, const level_planes *lp, uint32_t r, uint32_t g, float *lv) {
    const uint8_t *p = m->packed + (size_t)r * m->row_bytes + (size_t)g * m->group * m->bits / 8;
    for (uint32_t u = 0; u < m->group / UNIT; u++, p += 4 * m->bits, lv += UNIT) {
        v128_t v[8];
        unit_levels_natural(lp, p, m->bits, v);
        for (int q = 0; q < 8; q++) wasm_v128_store(lv + 4 * q, v[q]);
    }
}

/* lv . x[t] for four activations x[t] = x + t*stride, sharing the lv loads;
 * n a multiple of 8. */
static void dot_x4(const float *lv, const float *x, size_t stride, uint32_t n, float out[4]) {
    v128_t a[4][2];
    for (int t = 0; t < 4; t++) a[t][0] = a[t][1] = wasm_f32x4_splat(0);
    for (uint32_t k = 0; k < n; k += 8) {
        v128_t l0 = wasm_v128_load(lv + k), l1 = wasm_v128_load(lv + k + 4);
        for (int t = 0; t < 4; t++) {
            MAC(a[t][0], l0, x + t * stride + k);
            MAC(a[t][1], l1, x + t * stride + k + 4);
        }
    }
    for (int t = 0; t < 4; t++) out[t] = hsum(a[t][0], a[t][1], wasm_f32x4_splat(0), wasm_f32x4_splat(0));
}

/* a . b for n a multiple of 16. */
static float dot16(const float *a, const float *b, uint32_t n) {
    v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
    for (uint32_t k = 0; k < n; k += 16, a += 16, b += 16) {
        MAC(a0, wasm_v128_load(a), b), MAC(a1, wasm_v128_load(a + 4), b + 4);
        MAC(a2, wasm_v128_load(a + 8), b + 8), MAC(a3, wasm_v128_load(a + 12), b + 12);
    }
    return hsum(a0, a1, a2, a3);
}

void nd_cq_gemm_simd128(const nd_cq *m, const float *xr, uint32_t n, float *y) {
    if (!simd_fits(m)) {
        nd_cq_gemm_ref(m, xr, n, y);
        return;
    }
    level_planes lp = make_planes(m);
    float lv[ND_CQ_MAX_GROUP], d[4];
    size_t padded = nd_cq_padded(m);
    for (uint32_t t = 0; t < n; t++) memset(y + (size_t)t * m->rows, 0, m->rows * sizeof(float));
    /* Group-major: the n activation slices of group g stay in cache across rows. */
    for (uint32_t g = 0; g < m->groups; g++) {
        const float *xg = xr + (size_t)g * m->group;
        for (uint32_t r = 0; r < m->rows; r++) {
            group_levels(m, &lp, r, g, lv); /* once, for all n activations */
            float norm = norm_at(m, r, g);
            uint32_t t = 0;
            for (; t + 4 <= n; t += 4) {
                dot_x4(lv, xg + t * padded, padded, m->group, d);
                for (int i = 0; i < 4; i++) y[(size_t)(t + i) * m->rows + r] += norm * d[i];
            }
            for (; t < n; t++) y[(size_t)t * m->rows + r] += norm * dot16(lv, xg + t * padded, m->group);
        }
    }
}

void nd_cq_row_simd128(const nd_cq *m, uint32_t row, float *out, float *scratch) {
    if (!simd_fits(m)) {
        nd_cq_row_ref(m, row, out, scratch);
        return;
    }
    level_planes lp = make_planes(m);
    for (uint32_t g = 0; g < m->groups; g++) {
        uint32_t base = g * m->group, width = m->cols - base < m->group ? m->cols - base : m->group;
        v128_t norm = wasm_f32x4_splat(norm_at(m, row, g));
        group_levels(m, &lp, row, g, scratch);
        for (uint32_t k = 0; k < m->group; k += 4)
            wasm_v128_store(scratch + k, wasm_f32x4_mul(wasm_v128_load(scratch + k), norm));
        nd_fwht(scratch, m->group);
        memcpy(out + base, scratch, width * sizeof(float));
    }
}

void nd_f32_gemv_simd128(const float *w, uint32_t rows, uint32_t cols, const float *x, float *y) {
    for (uint32_t r = 0; r < rows; r++) {
        const float *wr = w + (size_t)r * cols;
        v128_t a0 = wasm_f32x4_splat(0), a1 = a0, a2 = a0, a3 = a0;
        uint32_t c = 0;
        for (; c + 16 <= cols; c += 16) {
            MAC(a0, wasm_v128_load(wr + c), x + c), MAC(a1, wasm_v128_load(wr + c + 4), x + c + 4);
            MAC(a2, wasm_v128_load(wr + c + 8), x + c + 8), MAC(a3, wasm_v128_load(wr + c + 12), x + c + 12);
        }
        for (; c + 4 <= cols; c += 4) MAC(a0, wasm_v128_load(wr + c), x + c);
        float acc = hsum(a0, a1, a2, a3);
        for (; c < cols; c++) acc += wr[c] * x[c];
        y[r] = acc;
    }
}
#endif
