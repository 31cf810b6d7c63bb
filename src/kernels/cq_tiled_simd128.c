/* cq_tiled_simd128.c: SIMD128 twins of the tiled-layout kernels in
 * cq_tiled.c, bit-identical to them (see cq.h for the layout).
 *
 * Rows live in lanes: one 16-byte vector of a tile is one byte of 16 rows,
 * so no kernel needs a horizontal sum. The int8 table kernel does, per vector
 * and table (each code has two, cq.h), two i8x16.swizzle lookups (the low
 * and the high nibble codes, i.e. 2 codes x 16 rows), interleaves the two
 * results byte by byte and widens them with one i16x8.extadd_pairwise per 8
 * rows: per row and group the sum of at most 256 entries of |v| <= 127 fits
 * an i16. The GEMMs decode each vector once for four activations (exact) or
 * two (tables). Inner loops are unrolled because V8 checks the stack
 * on every loop back-edge. */
#ifdef ND_SIMD128
#include <string.h>
#include <wasm_simd128.h>
#include "kernels/cq.h"
#include "kernels/cq_levels_simd128.h"
#include "kernels/cq_range.h"
#include "kernels/cq_tile_simd128.h"

#define INLINE static inline __attribute__((always_inline))
#define OUTLINE static __attribute__((noinline)) /* the 3-bit paths: one copy each, not one per caller */
#define TOKENS 4u     /* activations the exact GEMM runs per decoded weight vector */
#define LUT_TOKENS 2u /* the table GEMM's: its two tables' sums of more would not stay in registers */

/* ---- exact f32 ------------------------------------------------------------ */

typedef nd_level_planes level_planes;

/* d[16 rows] += levels(idx) * x, as the reference's `dot += level * x`. */
INLINE void mac16(const level_planes *lp, v128_t idx, float x, v128_t d[4]) {
    v128_t l[4], xs = wasm_f32x4_splat(x);
    nd_lookup16(lp, idx, l);
    for (int q = 0; q < 4; q++) d[q] = wasm_f32x4_add(d[q], wasm_f32x4_mul(l[q], xs));
}

OUTLINE void exact_group3(const level_planes *lp, const uint8_t *c, uint32_t bytes, const float *x, size_t stride,
                         uint32_t tokens, v128_t d[][4]);

/* One group of one tile: d[16 rows] = levels . x in index order. */
INLINE void exact_group(const nd_cq *m, const level_planes *lp, const uint8_t *c, const float *x,
                        v128_t d[4]) {
    uint32_t bytes = m->group * m->bits / 8;
    for (int q = 0; q < 4; q++) d[q] = wasm_f32x4_splat(0.0f);
    if (m->bits == 2) {
        const v128_t mask = wasm_i8x16_splat(3);
        for (uint32_t b = 0; b < bytes; b++, x += 4) {
            v128_t v = wasm_v128_load(c + (size_t)b * ND_CQ_TILE);
            mac16(lp, wasm_v128_and(v, mask), x[0], d);
            mac16(lp, wasm_v128_and(wasm_u16x8_shr(v, 2), mask), x[1], d);
            mac16(lp, wasm_v128_and(wasm_u16x8_shr(v, 4), mask), x[2], d);
            mac16(lp, wasm_v128_and(wasm_u16x8_shr(v, 6), mask), x[3], d);
        }
    } else if (m->bits == 3) {
        exact_group3(lp, c, bytes, x, 0, 1, (v128_t(*)[4])d);
    } else {
        const v128_t mask = wasm_i8x16_splat(15);
        for (uint32_t b = 0; b < bytes; b++, x += 2) {
            v128_t v = wasm_v128_load(c + (size_t)b * ND_CQ_TILE);
            mac16(lp, wasm_v128_and(v, mask), x[0], d);
            mac16(lp, wasm_v128_and(wasm_u16x8_shr(v, 4), mask), x[1], d);
        }
    }
}

void nd_cqt_gemv_range_simd128(const nd_cq *m, const float *xr, float *y, uint32_t t0, uint32_t t1) {
    level_planes lp = nd_level_planes_of(m);
    for (uint32_t t = t0; t < t1; t++) {
        v128_t acc[4], d[4], nv[4];
        for (int q = 0; q < 4; q++) acc[q] = wasm_f32x4_splat(0.0f);
        for (uint32_t g = 0; g < m->groups; g++) {
            exact_group(m, &lp, tile_codes(m, t, g), xr + (size_t)g * m->group, d);
            norms16(tile_norms(m, t, g), nv);
            for (int q = 0; q < 4; q++) acc[q] = wasm_f32x4_add(acc[q], wasm_f32x4_mul(nv[q], d[q]));
        }
        for (int q = 0; q < 4; q++) wasm_v128_store(y + (size_t)t * ND_CQ_TILE + 4 * q, acc[q]);
    }
}

void nd_cqt_gemv_simd128(const nd_cq *m, const float *xr, float *y) { nd_cqt_gemv_range_simd128(m, xr, y, 0, m->tiles); }

/* d[k][16 rows] += levels(idx) * x[k * stride] for `tokens` activations:
 * one lookup, then mac16's products per activation. */
INLINE void mac16_n(const level_planes *lp, v128_t idx, const float *x, size_t stride, uint32_t tokens,
                    v128_t d[][4]) {
    v128_t l[4];
    nd_lookup16(lp, idx, l);
    for (uint32_t k = 0; k < tokens; k++) {
        v128_t xs = wasm_f32x4_splat(x[k * stride]);
        for (int q = 0; q < 4; q++) d[k][q] = wasm_f32x4_add(d[k][q], wasm_f32x4_mul(l[q], xs));
    }
}

/* The 3-bit exact group for `tokens` activations (d zeroed by the caller). */
OUTLINE void exact_group3(const level_planes *lp, const uint8_t *c, uint32_t bytes, const float *x, size_t stride,
                         uint32_t tokens, v128_t d[][4]) {
    for (uint32_t b = 0; b < bytes; b += 3, x += 8) {
        v128_t idx[8];
        unpack3(c + (size_t)b * ND_CQ_TILE, idx);
        for (int i = 0; i < 8; i++) mac16_n(lp, idx[i], x + i, stride, tokens, d);
    }
}

/* exact_group for `tokens` activations stride floats apart. */
INLINE void exact_group_n(const nd_cq *m, const level_planes *lp, const uint8_t *c, const float *x,
                          size_t stride, uint32_t tokens, v128_t d[][4]) {
    uint32_t bytes = m->group * m->bits / 8, per = 8 / m->bits;
    const v128_t mask = wasm_i8x16_splat(m->bits == 2 ? 3 : 15);
    for (uint32_t k = 0; k < tokens; k++)
        for (int q = 0; q < 4; q++) d[k][q] = wasm_f32x4_splat(0.0f);
    if (m->bits == 3) {
        exact_group3(lp, c, bytes, x, stride, tokens, d);
        return;
    }
    for (uint32_t b = 0; b < bytes; b++, x += per) {
        v128_t v = wasm_v128_load(c + (size_t)b * ND_CQ_TILE);
        for (uint32_t i = 0; i < per; i++)
            mac16_n(lp, wasm_v128_and(wasm_u16x8_shr(v, i * m->bits), mask), x + i, stride, tokens, d);
    }
}

/* Tile t for `tokens` activations from x0 (stride floats apart): y rows of
 * each activation at stride m->rows. */
INLINE void exact_tile_n(const nd_cq *m, const level_planes *lp, uint32_t t, const float *x0, size_t stride,
                         uint32_t tokens, float *y) {
    v128_t acc[TOKENS][4], d[TOKENS][4], nv[4];
    for (uint32_t k = 0; k < tokens; k++)
        for (int q = 0; q < 4; q++) acc[k][q] = wasm_f32x4_splat(0.0f);
    for (uint32_t g = 0; g < m->groups; g++) {
        exact_group_n(m, lp, tile_codes(m, t, g), x0 + (size_t)g * m->group, stride, tokens, d);
        norms16(tile_norms(m, t, g), nv);
        for (uint32_t k = 0; k < tokens; k++)
            for (int q = 0; q < 4; q++) acc[k][q] = wasm_f32x4_add(acc[k][q], wasm_f32x4_mul(nv[q], d[k][q]));
    }
    for (uint32_t k = 0; k < tokens; k++)
        for (int q = 0; q < 4; q++)
            wasm_v128_store(y + (size_t)k * m->rows + (size_t)t * ND_CQ_TILE + 4 * q, acc[k][q]);
}

/* TOKENS activations per decoded index vector; per activation the products
 * and order of nd_cqt_gemv_simd128 (so of nd_cqt_gemv_ref). */
void nd_cqt_gemm_simd128(const nd_cq *m, const float *xr, uint32_t n, float *y) {
    level_planes lp = nd_level_planes_of(m);
    size_t padded = nd_cq_padded(m);
    for (uint32_t t0 = 0; t0 < n; t0 += TOKENS) {
        uint32_t count = n - t0 < TOKENS ? n - t0 : TOKENS;
        const float *x0 = xr + t0 * padded;
        float *y0 = y + (size_t)t0 * m->rows;
        /* Constant token counts, so each copy keeps its sums in registers. */
        for (uint32_t t = 0; t < m->tiles; t++)
            if (count == TOKENS) exact_tile_n(m, &lp, t, x0, padded, TOKENS, y0);
            else for (uint32_t k = 0; k < count; k++) exact_tile_n(m, &lp, t, x0 + k * padded, padded, 1, y0 + (size_t)k * m->rows);
    }
}

/* ---- int8 tables (two per code) ------------------------------------------ */

/* The maxima below take f32x4.pmax (b if a < b, else a): one maxps, where
 * f32x4.max costs V8 nine instructions for NaN and signed-zero rules that
 * magnitudes do not need. pmax(most, a) skips a NaN a, as fmaxf does. */
static float hmax(v128_t v) {
    v = wasm_f32x4_pmax(v, wasm_i32x4_shuffle(v, v, 2, 3, 0, 1));
    v = wasm_f32x4_pmax(v, wasm_i32x4_shuffle(v, v, 1, 0, 3, 2));
    return wasm_f32x4_extract_lane(v, 0);
}

/* The largest sum of |x| one code reads (see tables_ref in cq_tiled.c). */
static float code_most(const nd_cq *m, const float *x) {
    v128_t most = wasm_f32x4_splat(0.0f);
    for (uint32_t k = 0; k < m->group; k += 4) {
        v128_t a = wasm_f32x4_abs(wasm_v128_load(x + k));
        if (m->bits == 2) a = wasm_f32x4_add(a, wasm_i32x4_shuffle(a, a, 1, 0, 3, 2)); /* pair sums */
        most = wasm_f32x4_pmax(most, a);
    }
    return hmax(most);
}

/* Adding 1.5 * 2^23 rounds |v| < 2^22 to an integer (half to even, as rintf)
 * and leaves it in the low bits: the low byte is the int8. */
#define MAGIC 12582912.0f

/* Bytes 0, 4, 8, 12 of each of four i32x4: sixteen int8 in order. */
INLINE v128_t low_bytes(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_i8x16_shuffle(a, b, 0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    v128_t cd = wasm_i8x16_shuffle(c, d, 0, 4, 8, 12, 16, 20, 24, 28, 0, 0, 0, 0, 0, 0, 0, 0);
    return wasm_i64x2_shuffle(ab, cd, 0, 2);
}

/* The 16 entries v of one code (four f32x4 lanes) into its two tables:
 * hi = rint(v), lo = rint(127 (v - hi)), as tables_ref rounds them. */
INLINE void store_code(const v128_t v[4], int8_t *hi, int8_t *lo) {
    const v128_t magic = wasm_f32x4_splat(MAGIC), k127 = wasm_f32x4_splat(127.0f);
    v128_t h[4], l[4];
    for (int q = 0; q < 4; q++) {
        h[q] = wasm_f32x4_add(v[q], magic);
        v128_t rest = wasm_f32x4_sub(v[q], wasm_f32x4_sub(h[q], magic)); /* v - rint(v), exact */
        l[q] = wasm_f32x4_add(wasm_f32x4_mul(rest, k127), magic);
    }
    wasm_v128_store(hi, low_bytes(h[0], h[1], h[2], h[3]));
    wasm_v128_store(lo, low_bytes(l[0], l[1], l[2], l[3]));
}

/* tb[2][codes][16] int8 tables of the group activation x, as tables_ref
 * builds them; returns the scale. xs: scratch of group floats. */
static float tables(const nd_cq *m, float lmax, const float *x, int8_t *tb, float *xs) {
    uint32_t codes = nd_cq_codes(m);
    int8_t *lo = tb + (size_t)codes * 16;
    float amax = lmax * code_most(m, x);
    if (!(amax > 0.0f)) {
        memset(tb, 0, (size_t)codes * 32);
        return 0.0f;
    }
    v128_t inv = wasm_f32x4_splat(127.0f / amax);
    for (uint32_t k = 0; k < m->group; k += 4) wasm_v128_store(xs + k, wasm_f32x4_mul(wasm_v128_load(x + k), inv));
    v128_t l[4];
    for (int q = 0; q < 4; q++) l[q] = q < (1 << m->bits) / 4 ? wasm_v128_load(m->levels + 4 * q) : wasm_f32x4_splat(0.0f);
    if (m->bits != 2) { /* one index a code; 3 bits: entries 8..15 are 0, as tables_ref's */
        for (uint32_t j = 0; j < codes; j++) {
            v128_t xj = wasm_v128_load32_splat(xs + j), e[4];
            for (int q = 0; q < 4; q++) e[q] = wasm_f32x4_mul(l[q], xj);
            store_code(e, tb + 16 * j, lo + 16 * j);
        }
    } else { /* entry 4q+i: levels[i] * xs[2j] + levels[q] * xs[2j+1] */
        v128_t lq[4];
        for (int q = 0; q < 4; q++) lq[q] = wasm_f32x4_splat(m->levels[q]);
        for (uint32_t j = 0; j < codes; j++) {
            v128_t pa = wasm_f32x4_mul(l[0], wasm_v128_load32_splat(xs + 2 * j));
            v128_t xb = wasm_v128_load32_splat(xs + 2 * j + 1), e[4];
            for (int q = 0; q < 4; q++) e[q] = wasm_f32x4_add(pa, wasm_f32x4_mul(lq[q], xb));
            store_code(e, tb + 16 * j, lo + 16 * j);
        }
    }
    return amax / (127.0f * 127.0f);
}

static float level_max(const nd_cq *m) {
    v128_t a = wasm_f32x4_splat(0.0f);
    for (uint32_t q = 0; q < (1u << m->bits); q += 4) a = wasm_f32x4_pmax(a, wasm_f32x4_abs(wasm_v128_load(m->levels + q)));
    return hmax(a);
}

/* Two codes x 16 rows (index vectors a and b, their tables at tbl and tbl +
 * 16): acc[0] += rows 0..7, acc[1] += 8..15. */
INLINE void lut_pair(v128_t a, v128_t b, const int8_t *tbl, v128_t acc[2]) {
    v128_t s0 = wasm_i8x16_swizzle(wasm_v128_load(tbl), a);
    v128_t s1 = wasm_i8x16_swizzle(wasm_v128_load(tbl + 16), b);
    acc[0] = wasm_i16x8_add(acc[0], wasm_i16x8_extadd_pairwise_i8x16(
        wasm_i8x16_shuffle(s0, s1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23)));
    acc[1] = wasm_i16x8_add(acc[1], wasm_i16x8_extadd_pairwise_i8x16(
        wasm_i8x16_shuffle(s0, s1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31)));
}

/* lut_tile's 3-bit walk: three vectors, eight codes, per iteration. */
OUTLINE void lut_tile3(const uint8_t *c, uint32_t bytes, size_t lo, const int8_t *tb, size_t tb_stride,
                       uint32_t tokens, v128_t acc[][4]) {
    for (uint32_t b = 0; b < bytes; b += 3, c += 3 * ND_CQ_TILE, tb += 8 * 16) {
        v128_t idx[8];
        unpack3(c, idx);
        for (uint32_t t = 0; t < tokens; t++)
            for (int p = 0; p < 4; p++) {
                const int8_t *at = tb + t * tb_stride + 32 * p;
                lut_pair(idx[2 * p], idx[2 * p + 1], at, acc[t]);
                lut_pair(idx[2 * p], idx[2 * p + 1], at + lo, acc[t] + 2);
            }
    }
}

/* acc[t][4]: integer sums of one tile and group for `tokens` activations
 * whose tables lie tb_stride bytes apart, [0..1] of the first tables, [2..3]
 * of the second (the group's codes * 16 bytes on). c: the group's first tile
 * vector; two vectors (nibbles) or three (3-bit indices) per iteration. */
INLINE void lut_tile(const nd_cq *m, const uint8_t *c, const int8_t *tb, size_t tb_stride, uint32_t tokens,
                     v128_t acc[][4]) {
    const v128_t m15 = wasm_i8x16_splat(15);
    const size_t lo = (size_t)nd_cq_codes(m) * 16;
    uint32_t bytes = m->group * m->bits / 8;
    for (uint32_t t = 0; t < tokens; t++) acc[t][0] = acc[t][1] = acc[t][2] = acc[t][3] = wasm_i16x8_splat(0);
    if (m->bits == 3) {
        lut_tile3(c, bytes, lo, tb, tb_stride, tokens, acc);
        return;
    }
    for (uint32_t b = 0; b < bytes; b += 2, c += 2 * ND_CQ_TILE, tb += 4 * 16) {
        v128_t v0 = wasm_v128_load(c), v1 = wasm_v128_load(c + ND_CQ_TILE);
        v128_t lo0 = wasm_v128_and(v0, m15), hi0 = wasm_v128_and(wasm_u16x8_shr(v0, 4), m15);
        v128_t lo1 = wasm_v128_and(v1, m15), hi1 = wasm_v128_and(wasm_u16x8_shr(v1, 4), m15);
        for (uint32_t t = 0; t < tokens; t++) {
            const int8_t *at = tb + t * tb_stride;
            lut_pair(lo0, hi0, at, acc[t]);
            lut_pair(lo1, hi1, at + 32, acc[t]);
            lut_pair(lo0, hi0, at + lo, acc[t] + 2);
            lut_pair(lo1, hi1, at + lo + 32, acc[t] + 2);
        }
    }
}

/* The i32 lanes of v (|v| < 2^22) as floats: the integer added to the bits
 * of 1.5 * 2^23 lands in the mantissa, and subtracting 1.5 * 2^23 leaves it,
 * exactly. f32x4.convert_i32x4 gives the same, but LLVM 14 folds it with the
 * i16 widening before it into a conversion from i16 lanes that it then
 * splits into one scalar conversion per lane. */
INLINE v128_t small_to_f32(v128_t v) {
    return wasm_f32x4_sub(wasm_i32x4_add(v, wasm_i32x4_splat(0x4B400000)), wasm_f32x4_splat(MAGIC));
}

/* The i32 lanes 127 * hi + lo of 8 rows' i16 sums (|result| < 2^22, cq.h). */
INLINE v128_t combined(v128_t hi, v128_t lo, int high) {
    v128_t h = high ? wasm_i32x4_extend_high_i16x8(hi) : wasm_i32x4_extend_low_i16x8(hi);
    v128_t l = high ? wasm_i32x4_extend_high_i16x8(lo) : wasm_i32x4_extend_low_i16x8(lo);
    return wasm_i32x4_add(wasm_i32x4_mul(h, wasm_i32x4_splat(127)), l);
}

/* out[16 rows] += (norm * scale) * sum, as the reference does it. */
INLINE void lut_add(const v128_t nv[4], float scale, const v128_t acc[4], v128_t out[4]) {
    v128_t s = wasm_f32x4_splat(scale);
    v128_t i[4] = {combined(acc[0], acc[2], 0), combined(acc[0], acc[2], 1), combined(acc[1], acc[3], 0),
                   combined(acc[1], acc[3], 1)};
    for (int q = 0; q < 4; q++)
        out[q] = wasm_f32x4_add(out[q], wasm_f32x4_mul(wasm_f32x4_mul(nv[q], s), small_to_f32(i[q])));
}

/* y[16 rows] += (norm * scale) * sum. */
INLINE void lut_finish(const v128_t nv[4], float scale, const v128_t acc[4], float *y) {
    v128_t out[4];
    for (int q = 0; q < 4; q++) out[q] = wasm_v128_load(y + 4 * q);
    lut_add(nv, scale, acc, out);
    for (int q = 0; q < 4; q++) wasm_v128_store(y + 4 * q, out[q]);
}

/* Group g for `tokens` activations (tables already built), tiles [t0, t1). */
INLINE void lut_group(const nd_cq *m, uint32_t g, const int8_t *tb, size_t tb_stride,
                      const float *scale, uint32_t tokens, float *y, uint32_t t0, uint32_t t1) {
    for (uint32_t t = t0; t < t1; t++) {
        v128_t acc[LUT_TOKENS][4], nv[4];
        lut_tile(m, tile_codes(m, t, g), tb, tb_stride, tokens, acc);
        norms16(tile_norms(m, t, g), nv);
        for (uint32_t k = 0; k < tokens; k++)
            lut_finish(nv, scale[k], acc[k], y + (size_t)k * m->rows + (size_t)t * ND_CQ_TILE);
    }
}

void nd_cq_lut_build_simd128(const nd_cq *m, const float *xr, int8_t *tb, float *scales) {
    _Alignas(16) float xs[ND_CQ_MAX_GROUP];
    float lmax = level_max(m);
    size_t step = (size_t)nd_cq_codes(m) * 32;
    for (uint32_t g = 0; g < m->groups; g++)
        scales[g] = tables(m, lmax, xr + (size_t)g * m->group, tb + g * step, xs);
}

/* With every group's tables at hand, a tile runs all its groups with its 16
 * sums in registers: the weights are read in order and y is written once
 * (the same sum per row, groups ascending from 0, as lut_finish's). */
void nd_cqt_gemv_lut_tables_range_simd128(const nd_cq *m, const int8_t *tb, const float *scales, float *y,
                                          uint32_t t0, uint32_t t1) {
    size_t step = (size_t)nd_cq_codes(m) * 32;
    for (uint32_t t = t0; t < t1; t++) {
        v128_t out[4] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
        for (uint32_t g = 0; g < m->groups; g++) {
            v128_t acc[1][4], nv[4];
            lut_tile(m, tile_codes(m, t, g), tb + g * step, 0, 1, acc);
            norms16(tile_norms(m, t, g), nv);
            lut_add(nv, scales[g], acc[0], out);
        }
        for (int q = 0; q < 4; q++) wasm_v128_store(y + (size_t)t * ND_CQ_TILE + 4 * q, out[q]);
    }
}

void nd_cqt_gemv_lut_tables_simd128(const nd_cq *m, const int8_t *tb, const float *scales, float *y) {
    nd_cqt_gemv_lut_tables_range_simd128(m, tb, scales, y, 0, m->tiles);
}

/* LUT_TOKENS activations per decoded code vector; per activation the same sums
 * and order as nd_cqt_gemv_lut_tables_simd128, which runs the last few. */
void nd_cqt_gemm_lut_tables_simd128(const nd_cq *m, const int8_t *tb, const float *scales, uint32_t n,
                                    float *y) {
    size_t bytes = nd_cq_lut_bytes(m), step = (size_t)nd_cq_codes(m) * 32;
    for (uint32_t t0 = 0; t0 < n; t0 += LUT_TOKENS) {
        uint32_t count = n - t0 < LUT_TOKENS ? n - t0 : LUT_TOKENS;
        const int8_t *tb0 = tb + t0 * bytes;
        const float *sc0 = scales + (size_t)t0 * m->groups;
        float *yt = y + (size_t)t0 * m->rows;
        if (count < LUT_TOKENS) {
            for (uint32_t k = 0; k < count; k++)
                nd_cqt_gemv_lut_tables_simd128(m, tb0 + k * bytes, sc0 + (size_t)k * m->groups, yt + (size_t)k * m->rows);
            continue;
        }
        for (uint32_t k = 0; k < LUT_TOKENS; k++) memset(yt + (size_t)k * m->rows, 0, (size_t)m->tiles * ND_CQ_TILE * sizeof(float));
        for (uint32_t g = 0; g < m->groups; g++) {
            float scale[LUT_TOKENS];
            for (uint32_t k = 0; k < LUT_TOKENS; k++) scale[k] = sc0[(size_t)k * m->groups + g];
            lut_group(m, g, tb0 + g * step, bytes, scale, LUT_TOKENS, yt, 0, m->tiles);
        }
    }
}
#endif
