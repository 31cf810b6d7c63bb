/* rint_simd128.h: (int32_t)rintf(x) on four lanes, for |x| < 2^22. Adding
 * 1.5 * 2^23 rounds to an integer, half to even, and leaves it in the low
 * mantissa bits; subtracting the bits of 1.5 * 2^23 reads it out. Two
 * instructions, where V8 makes f32x4.nearest and i32x4.trunc_sat_f32x4 a
 * dozen each on x64. */
#ifndef ND_RINT_SIMD128_H
#define ND_RINT_SIMD128_H
#include <wasm_simd128.h>

static inline __attribute__((always_inline)) v128_t nd_rint4(v128_t x) {
    return wasm_i32x4_sub(wasm_f32x4_add(x, wasm_f32x4_splat(12582912.0f)), wasm_i32x4_splat(0x4B400000));
}

#endif
