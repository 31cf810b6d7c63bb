/* cq_tiled_simd128.c: SIMD128 twins of the tiled-layout kernels in
 * cq_tiled.c, bit-identical to them (see cq.h for the layout).
 *
 * Rows live in lanes: one 16-byte vector of a tile is one byte of 16 rows,
 * so no kernel needs a horizontal sum. The GEMM decodes each vector once for
 * four activations. Inner loops are unrolled because V8 checks the stack on
 * every loop back-edge. */
#ifdef ND_SIMD128
#include <string.h>
#include <wasm_simd128.h>
#include "kernels/cq.h"
#include "kernels/cq_levels_simd128.h"
#include "kernels/cq_range.h"
#include "kernels/cq_tile_simd128.h"

#define INLINE static inline __attribute__((always_inline))
#define OUTLINE static __attribute__((noinline)) /* the 3-bit paths: one copy each, not one per caller */
#define TOKENS 4u /* activations the exact GEMM runs per decoded weight vector */

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

#endif
