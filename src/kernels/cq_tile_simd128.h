/* cq_tile_simd128.h: reading the tiled layout (cq.h) in SIMD128, shared by
 * the f32 kernels (cq_tiled_simd128.c) and the int8 ones (cq_q8_simd128.c):
 * a tile's norms and index vectors, and exact small integers as floats. */
#ifndef ND_CQ_TILE_SIMD128_H
#define ND_CQ_TILE_SIMD128_H
#include <wasm_simd128.h>
#include "kernels/cq.h"

#ifndef INLINE
#define INLINE static inline __attribute__((always_inline))
#endif

/* 16 fp16 norms as four f32x4. Moving the exponent/mantissa bits into an f32
 * and multiplying by 2^112 is exact for every finite half, subnormals
 * included (the archive rejects inf and nan norms). */
INLINE void norms16(const uint8_t *p, v128_t out[4]) {
    v128_t h0 = wasm_v128_load(p), h1 = wasm_v128_load(p + 16);
    v128_t w[4] = {wasm_u32x4_extend_low_u16x8(h0), wasm_u32x4_extend_high_u16x8(h0),
                   wasm_u32x4_extend_low_u16x8(h1), wasm_u32x4_extend_high_u16x8(h1)};
    const v128_t mag = wasm_i32x4_splat(0x7fff), sgn = wasm_i32x4_splat(0x8000);
    const v128_t scale = wasm_f32x4_splat(0x1p112f);
    for (int i = 0; i < 4; i++) {
        v128_t f = wasm_f32x4_mul(wasm_i32x4_shl(wasm_v128_and(w[i], mag), 13), scale);
        out[i] = wasm_v128_or(f, wasm_i32x4_shl(wasm_v128_and(w[i], sgn), 16));
    }
}

/* The i32 lanes of v (|v| < 2^22) as floats: the integer added to the bits
 * of 1.5 * 2^23 lands in the mantissa, and subtracting 1.5 * 2^23 leaves it,
 * exactly. f32x4.convert_i32x4 gives the same, but LLVM 14 may fold it with
 * an i16 widening before it into a conversion from i16 lanes that it then
 * splits into one scalar conversion per lane. */
INLINE v128_t small_to_f32(v128_t v) {
    return wasm_f32x4_sub(wasm_i32x4_add(v, wasm_i32x4_splat(0x4B400000)), wasm_f32x4_splat(12582912.0f));
}

static inline const uint8_t *tile_norms(const nd_cq *m, uint32_t t, uint32_t g) {
    return m->norms + ((size_t)t * m->groups + g) * ND_CQ_TILE * 2;
}

static inline const uint8_t *tile_codes(const nd_cq *m, uint32_t t, uint32_t g) {
    return m->packed + ((size_t)t * m->row_bytes + (size_t)g * m->group * m->bits / 8) * ND_CQ_TILE;
}

/* The eight 3-bit indices of 16 rows in three tile vectors (one byte of
 * each row's little-endian stream apiece): idx[i] holds index i of each row
 * in its lanes. Shifts run on u16 lanes: a byte's high bits from its
 * neighbour are masked off before they could land in an index. */
INLINE void unpack3(const uint8_t *c, v128_t idx[8]) {
    v128_t b0 = wasm_v128_load(c), b1 = wasm_v128_load(c + ND_CQ_TILE), b2 = wasm_v128_load(c + 2 * ND_CQ_TILE);
    const v128_t m1 = wasm_i8x16_splat(1), m3 = wasm_i8x16_splat(3), m7 = wasm_i8x16_splat(7);
    idx[0] = wasm_v128_and(b0, m7);
    idx[1] = wasm_v128_and(wasm_u16x8_shr(b0, 3), m7);
    idx[2] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(b0, 6), m3), wasm_i16x8_shl(wasm_v128_and(b1, m1), 2));
    idx[3] = wasm_v128_and(wasm_u16x8_shr(b1, 1), m7);
    idx[4] = wasm_v128_and(wasm_u16x8_shr(b1, 4), m7);
    idx[5] = wasm_v128_or(wasm_v128_and(wasm_u16x8_shr(b1, 7), m1), wasm_i16x8_shl(wasm_v128_and(b2, m3), 1));
    idx[6] = wasm_v128_and(wasm_u16x8_shr(b2, 2), m7);
    idx[7] = wasm_v128_and(wasm_u16x8_shr(b2, 5), m7);
}

#endif
