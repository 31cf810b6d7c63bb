/* cq_q8_simd128.c: SIMD128 twins of the q8 kernels (cq_q8.h), bit-identical
 * to the references in cq_q8.c: the integer sums are exact in any order, and
 * the float combine is the reference's, rows in lanes.
 *
 * GEMM: a tile's group is decoded once into int16 level pairs, four vectors
 * per pair of columns (rows 0-3, 4-7, 8-11, 12-15, each row's two levels side
 * by side), and each activation's pair of columns, splatted, is dotted with
 * them by i32x4.dot_i16x8_s: 8 products per instruction, rows in lanes.
 * GEMV: the tables of cq_q8.h, looked up as the f32-table kernel does
 * (cq_tiled_simd128.c); the high plane's sums stay in i16 (at most 256
 * entries of |v| <= 127 a row and group) and the low plane's in u16 (at most
 * 256 * 255). Inner loops are unrolled because V8 checks the stack on every
 * loop back-edge. */
#ifdef ND_SIMD128
#include <wasm_simd128.h>
#include "kernels/cq_q8.h"
#include "kernels/cq_tile_simd128.h"

#define PAIR_VECTORS 4u /* int16 vectors per decoded pair of columns */

/* ---- the quantiser -------------------------------------------------------- */

/* Four values of v rounded half away from zero (t + 1 away from zero where
 * the exact remainder v - trunc(v) reaches a half), clamped to [-128, 127],
 * as i32 lanes; NaN gives 0 (trunc_sat). */
INLINE v128_t round_away(v128_t v) {
    v128_t t = wasm_f32x4_trunc(v);
    v128_t away = wasm_f32x4_ge(wasm_f32x4_abs(wasm_f32x4_sub(v, t)), wasm_f32x4_splat(0.5f));
    v128_t one = wasm_v128_or(wasm_v128_and(v, wasm_i32x4_splat((int32_t)0x80000000u)), wasm_f32x4_splat(1.0f));
    v128_t r = wasm_f32x4_add(t, wasm_v128_and(away, one));
    r = wasm_f32x4_pmin(wasm_f32x4_pmax(r, wasm_f32x4_splat(-128.0f)), wasm_f32x4_splat(127.0f)); /* NaN stays */
    return wasm_i32x4_trunc_sat_f32x4(r);
}

/* A 2-bit code byte's nibble holds two indices: entry 4q + i of these is
 * level i (first) or level q (second), so one swizzle by the nibble decodes
 * each. */
static inline v128_t crumb_first(v128_t l8) {
    return wasm_i8x16_shuffle(l8, l8, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3, 0, 1, 2, 3);
}
static inline v128_t crumb_second(v128_t l8) {
    return wasm_i8x16_shuffle(l8, l8, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3);
}

/* nd_q8_quantise of n (a multiple of 8) values. pmax ignores a NaN in its
 * second operand, as fmaxf does. */
static float quantise8(const float *x, uint32_t n, int16_t *q) {
    v128_t m = wasm_f32x4_splat(0.0f);
    for (uint32_t k = 0; k < n; k += 4) m = wasm_f32x4_pmax(m, wasm_f32x4_abs(wasm_v128_load(x + k)));
    /* m holds no NaN (pmax kept the lane), so the two-shuffle maximum is exact */
    m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 2, 3, 0, 1));
    m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
    float amax = wasm_f32x4_extract_lane(m, 0);
    float scale = amax > 0.0f ? amax * ND_K127 : 1.0f;
    v128_t inv = wasm_f32x4_splat(1.0f / scale);
    for (uint32_t k = 0; k < n; k += 8) {
        v128_t a = round_away(wasm_f32x4_mul(wasm_v128_load(x + k), inv));
        v128_t b = round_away(wasm_f32x4_mul(wasm_v128_load(x + k + 4), inv));
        wasm_v128_store(q + k, wasm_i16x8_narrow_i32x4(a, b));
    }
    return scale;
}

void nd_q8_activation_simd128(const nd_cq *m, const float *xr, void *q) {
    if (m->group % 8) {
        nd_q8_activation_ref(m, xr, q);
        return;
    }
    int16_t *xq = q;
    float *scales = (float *)nd_q8_scales(m, q);
    for (uint32_t g = 0; g < m->groups; g++)
        scales[g] = quantise8(xr + (size_t)g * m->group, m->group, xq + (size_t)g * m->group);
}

/* ---- the GEMV's tables ---------------------------------------------------- */

/* Entries 0-7 and 8-15 of a table (int16) into its high and low planes. */
INLINE void store_planes(v128_t e0, v128_t e1, int8_t *high, int8_t *low) {
    wasm_v128_store(high, wasm_i8x16_shuffle(e0, e1, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31));
    wasm_v128_store(low, wasm_i8x16_shuffle(e0, e1, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
}

void nd_q8_tables_simd128(const nd_cq *m, const void *q, int8_t *tables) {
    const int16_t *xq = q;
    int8_t lv[16];
    nd_q8_levels(m, lv);
    uint32_t codes = nd_cq_codes(m);
    v128_t l8 = wasm_v128_load(lv), second = crumb_second(l8);
    v128_t first = wasm_i16x8_extend_low_i8x16(crumb_first(l8));
    v128_t second0 = wasm_i16x8_extend_low_i8x16(second), second1 = wasm_i16x8_extend_high_i8x16(second);
    v128_t all0 = wasm_i16x8_extend_low_i8x16(l8), all1 = wasm_i16x8_extend_high_i8x16(l8);
    for (uint32_t g = 0; g < m->groups; g++) {
        int8_t *high = tables + (size_t)g * codes * 32, *low = high + codes * 16;
        const int16_t *x = xq + (size_t)g * m->group;
        if (m->bits == 2) { /* entry 4q+i: lv[i] x[2j] + lv[q] x[2j+1] */
            for (uint32_t j = 0; j < codes; j++) {
                v128_t a = wasm_i16x8_mul(first, wasm_i16x8_splat(x[2 * j])), b = wasm_i16x8_splat(x[2 * j + 1]);
                store_planes(wasm_i16x8_add(a, wasm_i16x8_mul(second0, b)), wasm_i16x8_add(a, wasm_i16x8_mul(second1, b)),
                             high + 16 * j, low + 16 * j);
            }
        } else {
            for (uint32_t j = 0; j < codes; j++) {
                v128_t a = wasm_i16x8_splat(x[j]);
                store_planes(wasm_i16x8_mul(all0, a), wasm_i16x8_mul(all1, a), high + 16 * j, low + 16 * j);
            }
        }
    }
}

/* ---- the float combine ---------------------------------------------------- */

/* out[16 rows] += (float)sum * ((norm * cbs) * sx), as the reference. */
INLINE void combine(const v128_t nv[4], float cbs, float sx, const v128_t sum[4], v128_t out[4]) {
    v128_t c = wasm_f32x4_splat(cbs), s = wasm_f32x4_splat(sx);
    for (int k = 0; k < 4; k++)
        out[k] = wasm_f32x4_add(out[k], wasm_f32x4_mul(small_to_f32(sum[k]),
                                                       wasm_f32x4_mul(wasm_f32x4_mul(nv[k], c), s)));
}

/* ---- GEMV ----------------------------------------------------------------- */

/* Two codes x 16 rows of one plane: sums[0] += rows 0-7, sums[1] += 8-15. */
INLINE void plane_pair(v128_t a, v128_t b, const int8_t *tbl, int low, v128_t sums[2]) {
    v128_t s0 = wasm_i8x16_swizzle(wasm_v128_load(tbl), a);
    v128_t s1 = wasm_i8x16_swizzle(wasm_v128_load(tbl + 16), b);
    v128_t r0 = wasm_i8x16_shuffle(s0, s1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    v128_t r1 = wasm_i8x16_shuffle(s0, s1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    sums[0] = wasm_i16x8_add(sums[0], low ? wasm_u16x8_extadd_pairwise_u8x16(r0) : wasm_i16x8_extadd_pairwise_i8x16(r0));
    sums[1] = wasm_i16x8_add(sums[1], low ? wasm_u16x8_extadd_pairwise_u8x16(r1) : wasm_i16x8_extadd_pairwise_i8x16(r1));
}

/* Codes a and b (index vectors) through both planes. */
INLINE void lookup_pair(v128_t a, v128_t b, const int8_t *high, size_t low_at, v128_t hs[2], v128_t ls[2]) {
    plane_pair(a, b, high, 0, hs);
    plane_pair(a, b, high + low_at, 1, ls);
}

/* One tile and group: the 16 rows' integer sums as four i32x4. */
INLINE void gemv_tile(const nd_cq *m, const uint8_t *c, const int8_t *tb, v128_t sum[4]) {
    const v128_t m15 = wasm_i8x16_splat(15);
    const size_t low_at = (size_t)nd_cq_codes(m) * 16;
    uint32_t bytes = m->group * m->bits / 8;
    v128_t hs[2] = {wasm_i16x8_splat(0), wasm_i16x8_splat(0)}, ls[2] = {hs[0], hs[0]};
    if (m->bits == 3) {
        for (uint32_t b = 0; b < bytes; b += 3, c += 3 * ND_CQ_TILE, tb += 8 * 16) {
            v128_t idx[8];
            unpack3(c, idx);
            for (int p = 0; p < 4; p++) lookup_pair(idx[2 * p], idx[2 * p + 1], tb + 32 * p, low_at, hs, ls);
        }
    } else {
        for (uint32_t b = 0; b < bytes; b++, c += ND_CQ_TILE, tb += 2 * 16) {
            v128_t v = wasm_v128_load(c);
            lookup_pair(wasm_v128_and(v, m15), wasm_v128_and(wasm_u16x8_shr(v, 4), m15), tb, low_at, hs, ls);
        }
    }
    for (int k = 0; k < 2; k++) {
        sum[2 * k] = wasm_i32x4_add(wasm_i32x4_shl(wasm_i32x4_extend_low_i16x8(hs[k]), 8),
                                    wasm_u32x4_extend_low_u16x8(ls[k]));
        sum[2 * k + 1] = wasm_i32x4_add(wasm_i32x4_shl(wasm_i32x4_extend_high_i16x8(hs[k]), 8),
                                        wasm_u32x4_extend_high_u16x8(ls[k]));
    }
}

void nd_cqt_q8_gemv_simd128(const nd_cq *m, float cbs, const void *q, const int8_t *tables, float *y, uint32_t t0,
                            uint32_t t1) {
    const float *sx = nd_q8_scales(m, q);
    size_t step = (size_t)nd_cq_codes(m) * 32;
    for (uint32_t t = t0; t < t1; t++) {
        v128_t out[4] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
        for (uint32_t g = 0; g < m->groups; g++) {
            v128_t sum[4], nv[4];
            gemv_tile(m, tile_codes(m, t, g), tables + g * step, sum);
            norms16(tile_norms(m, t, g), nv);
            combine(nv, cbs, sx[g], sum, out);
        }
        for (int k = 0; k < 4; k++) wasm_v128_store(y + (size_t)t * ND_CQ_TILE + 4 * k, out[k]);
    }
}

/* ---- GEMM ----------------------------------------------------------------- */

/* Columns a and b of 16 rows (int8 levels in lanes) as one decoded pair. */
INLINE void store_pair(v128_t a, v128_t b, v128_t *pair) {
    v128_t r0 = wasm_i8x16_shuffle(a, b, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    v128_t r1 = wasm_i8x16_shuffle(a, b, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    pair[0] = wasm_i16x8_extend_low_i8x16(r0);
    pair[1] = wasm_i16x8_extend_high_i8x16(r0);
    pair[2] = wasm_i16x8_extend_low_i8x16(r1);
    pair[3] = wasm_i16x8_extend_high_i8x16(r1);
}

/* A tile's group as group / 2 decoded pairs. */
static void decode_tile(const nd_cq *m, const uint8_t *c, const int8_t lv[16], v128_t *pairs) {
    const v128_t m15 = wasm_i8x16_splat(15), l8 = wasm_v128_load(lv);
    uint32_t bytes = m->group * m->bits / 8;
    if (m->bits == 2) { /* a nibble's first index, then its second */
        v128_t first = crumb_first(l8), second = crumb_second(l8);
        for (uint32_t b = 0; b < bytes; b++, c += ND_CQ_TILE, pairs += 2 * PAIR_VECTORS) {
            v128_t v = wasm_v128_load(c), lo = wasm_v128_and(v, m15), hi = wasm_v128_and(wasm_u16x8_shr(v, 4), m15);
            store_pair(wasm_i8x16_swizzle(first, lo), wasm_i8x16_swizzle(second, lo), pairs);
            store_pair(wasm_i8x16_swizzle(first, hi), wasm_i8x16_swizzle(second, hi), pairs + PAIR_VECTORS);
        }
    } else if (m->bits == 4) {
        for (uint32_t b = 0; b < bytes; b++, c += ND_CQ_TILE, pairs += PAIR_VECTORS) {
            v128_t v = wasm_v128_load(c);
            store_pair(wasm_i8x16_swizzle(l8, wasm_v128_and(v, m15)),
                       wasm_i8x16_swizzle(l8, wasm_v128_and(wasm_u16x8_shr(v, 4), m15)), pairs);
        }
    } else {
        for (uint32_t b = 0; b < bytes; b += 3, c += 3 * ND_CQ_TILE, pairs += 4 * PAIR_VECTORS) {
            v128_t idx[8];
            unpack3(c, idx);
            for (int p = 0; p < 4; p++)
                store_pair(wasm_i8x16_swizzle(l8, idx[2 * p]), wasm_i8x16_swizzle(l8, idx[2 * p + 1]),
                           pairs + p * PAIR_VECTORS);
        }
    }
}

/* The 16 rows' sums of activation x against `count` decoded pairs. */
INLINE void dot_pairs1(const v128_t *pairs, uint32_t count, const int16_t *x, v128_t sum[4]) {
    v128_t s0 = wasm_i32x4_splat(0), s1 = s0, s2 = s0, s3 = s0;
    for (uint32_t p = 0; p < count; p++, pairs += PAIR_VECTORS) {
        v128_t xv = wasm_v128_load32_splat(x + 2 * p);
        s0 = wasm_i32x4_add(s0, wasm_i32x4_dot_i16x8(pairs[0], xv));
        s1 = wasm_i32x4_add(s1, wasm_i32x4_dot_i16x8(pairs[1], xv));
        s2 = wasm_i32x4_add(s2, wasm_i32x4_dot_i16x8(pairs[2], xv));
        s3 = wasm_i32x4_add(s3, wasm_i32x4_dot_i16x8(pairs[3], xv));
    }
    sum[0] = s0, sum[1] = s1, sum[2] = s2, sum[3] = s3;
}

/* The same for two activations a and b: each decoded vector is loaded once
 * for both, and the eight sums stay in registers. */
INLINE void dot_pairs2(const v128_t *pairs, uint32_t count, const int16_t *a, const int16_t *b, v128_t sa[4],
                       v128_t sb[4]) {
    v128_t a0 = wasm_i32x4_splat(0), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
    for (uint32_t p = 0; p < count; p++, pairs += PAIR_VECTORS) {
        v128_t xa = wasm_v128_load32_splat(a + 2 * p), xb = wasm_v128_load32_splat(b + 2 * p);
        v128_t w0 = pairs[0], w1 = pairs[1], w2 = pairs[2], w3 = pairs[3];
        a0 = wasm_i32x4_add(a0, wasm_i32x4_dot_i16x8(w0, xa));
        b0 = wasm_i32x4_add(b0, wasm_i32x4_dot_i16x8(w0, xb));
        a1 = wasm_i32x4_add(a1, wasm_i32x4_dot_i16x8(w1, xa));
        b1 = wasm_i32x4_add(b1, wasm_i32x4_dot_i16x8(w1, xb));
        a2 = wasm_i32x4_add(a2, wasm_i32x4_dot_i16x8(w2, xa));
        b2 = wasm_i32x4_add(b2, wasm_i32x4_dot_i16x8(w2, xb));
        a3 = wasm_i32x4_add(a3, wasm_i32x4_dot_i16x8(w3, xa));
        b3 = wasm_i32x4_add(b3, wasm_i32x4_dot_i16x8(w3, xb));
    }
    sa[0] = a0, sa[1] = a1, sa[2] = a2, sa[3] = a3;
    sb[0] = b0, sb[1] = b1, sb[2] = b2, sb[3] = b3;
}

/* y[16 rows] of activation `t` (its row of y) += the group's combine. */
INLINE void add_to(float *y, const v128_t nv[4], float cbs, float sx, const v128_t sum[4]) {
    v128_t out[4];
    for (int k = 0; k < 4; k++) out[k] = wasm_v128_load(y + 4 * k);
    combine(nv, cbs, sx, sum, out);
    for (int k = 0; k < 4; k++) wasm_v128_store(y + 4 * k, out[k]);
}

void nd_cqt_q8_gemm_simd128(const nd_cq *m, const int8_t lv[16], float cbs, const void *q, uint32_t n, float *y,
                            uint32_t t0, uint32_t t1) {
    v128_t pairs[ND_CQ_MAX_GROUP / 2 * PAIR_VECTORS];
    size_t qstride = nd_q8_bytes(m) / sizeof(int16_t);
    const int16_t *xq = q;
    for (uint32_t t = t0; t < t1; t++) {
        for (uint32_t k = 0; k < n; k++)
            for (uint32_t i = 0; i < ND_CQ_TILE; i++) y[(size_t)k * m->rows + t * ND_CQ_TILE + i] = 0.0f;
        for (uint32_t g = 0; g < m->groups; g++) {
            v128_t nv[4];
            decode_tile(m, tile_codes(m, t, g), lv, pairs);
            norms16(tile_norms(m, t, g), nv);
            const int16_t *x = xq + (size_t)g * m->group;
            uint32_t k = 0;
            for (; k + 2 <= n; k += 2) {
                v128_t sa[4], sb[4];
                dot_pairs2(pairs, m->group / 2, x + k * qstride, x + (k + 1) * qstride, sa, sb);
                add_to(y + (size_t)k * m->rows + t * ND_CQ_TILE, nv, cbs, nd_q8_scales(m, xq + k * qstride)[g], sa);
                add_to(y + (size_t)(k + 1) * m->rows + t * ND_CQ_TILE, nv, cbs,
                       nd_q8_scales(m, xq + (k + 1) * qstride)[g], sb);
            }
            if (k < n) {
                v128_t sa[4];
                dot_pairs1(pairs, m->group / 2, x + k * qstride, sa);
                add_to(y + (size_t)k * m->rows + t * ND_CQ_TILE, nv, cbs, nd_q8_scales(m, xq + k * qstride)[g], sa);
            }
        }
    }
}
#endif
