/* exp_simd128.h: nd_attn_exp (attention.c) on four lanes, the same values,
 * for the SIMD128 kernels that share that exponential (attention's softmax,
 * activation's sigmoid). Two steps differ in form only (V8 makes both
 * several instructions longer otherwise): the clamp is f32x4.pmax, the same
 * for every input but NaN (which the mask still takes to 0); and k + 127 is
 * read from the bits of x * log2(e) + 1.5 * 2^23, whose last mantissa bits
 * hold the integer k exactly (|k| < 2^22). */
#ifndef ND_EXP_SIMD128_H
#define ND_EXP_SIMD128_H

#include <wasm_simd128.h>

static inline __attribute__((always_inline)) v128_t nd_exp4(v128_t x) {
    const v128_t magic = wasm_f32x4_splat(12582912.0f), lowest = wasm_f32x4_splat(-87.3f);
    v128_t ok = wasm_f32x4_ge(x, lowest);
    x = wasm_f32x4_pmax(x, lowest);
    v128_t kt = wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504088896341f)), magic);
    v128_t k = wasm_f32x4_sub(kt, magic);
    v128_t r = wasm_f32x4_sub(wasm_f32x4_sub(x, wasm_f32x4_mul(k, wasm_f32x4_splat(0.693359375f))),
                              wasm_f32x4_mul(k, wasm_f32x4_splat(-2.12194440e-4f)));
    v128_t p = wasm_f32x4_splat(1.9875691500e-4f);
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.3981999507e-3f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(8.3334519073e-3f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(4.1665795894e-2f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.6666665459e-1f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(5.0000001201e-1f));
    p = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_mul(p, wasm_f32x4_mul(r, r)), r), wasm_f32x4_splat(1.0f));
    v128_t e = wasm_i32x4_shl(wasm_i32x4_add(kt, wasm_i32x4_splat(127 - 0x4B400000)), 23);
    return wasm_v128_and(wasm_f32x4_mul(p, e), ok);
}

#endif
