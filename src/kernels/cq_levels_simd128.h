/* cq_levels_simd128.h: f32 levels of 16 indices at once in SIMD128, shared
 * by the archive-layout and the tiled kernels. Plane b holds byte b of each
 * of the (up to 16) levels; one i8x16.swizzle per plane gathers the bytes of
 * 16 indices and shuffles re-interleave them into four f32x4. Indices must be
 * below 16, which also keeps build.sh's relaxed_swizzle rewrite exact. */
#ifndef ND_CQ_LEVELS_SIMD128_H
#define ND_CQ_LEVELS_SIMD128_H
#include <string.h>
#include <wasm_simd128.h>
#include "kernels/cq.h"

typedef struct { v128_t plane[4]; } nd_level_planes;

static inline nd_level_planes nd_level_planes_of(const nd_cq *m) {
    uint8_t bytes[4][16] = {{0}};
    for (uint32_t i = 0; i < (1u << m->bits); i++) { /* entries past 2^bits are never read */
        uint8_t f[4];
        memcpy(f, &m->levels[i], 4);
        for (int b = 0; b < 4; b++) bytes[b][i] = f[b];
    }
    nd_level_planes lp;
    for (int b = 0; b < 4; b++) lp.plane[b] = wasm_v128_load(bytes[b]);
    return lp;
}

/* 16 byte-lane indices (< 16) -> their levels as four f32x4, in lane order. */
static inline __attribute__((always_inline)) void nd_lookup16(const nd_level_planes *lp, v128_t idx, v128_t out[4]) {
    v128_t b0 = wasm_i8x16_swizzle(lp->plane[0], idx), b1 = wasm_i8x16_swizzle(lp->plane[1], idx);
    v128_t b2 = wasm_i8x16_swizzle(lp->plane[2], idx), b3 = wasm_i8x16_swizzle(lp->plane[3], idx);
    v128_t lo01 = wasm_i8x16_shuffle(b0, b1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    v128_t hi01 = wasm_i8x16_shuffle(b0, b1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    v128_t lo23 = wasm_i8x16_shuffle(b2, b3, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
    v128_t hi23 = wasm_i8x16_shuffle(b2, b3, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
    out[0] = wasm_i16x8_shuffle(lo01, lo23, 0, 8, 1, 9, 2, 10, 3, 11);
    out[1] = wasm_i16x8_shuffle(lo01, lo23, 4, 12, 5, 13, 6, 14, 7, 15);
    out[2] = wasm_i16x8_shuffle(hi01, hi23, 0, 8, 1, 9, 2, 10, 3, 11);
    out[3] = wasm_i16x8_shuffle(hi01, hi23, 4, 12, 5, 13, 6, 14, 7, 15);
}

#endif
