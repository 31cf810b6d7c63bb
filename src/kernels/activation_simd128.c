/* activation_simd128.c: the SIMD128 twin of nd_sigmoid_mul (activation.c),
 * four lanes at a time with the same operations in the same order, so the
 * same bits; a tail of fewer than four goes through nd_sigmoid. */
#ifdef ND_SIMD128
#include <wasm_simd128.h>

#include "kernels/activation.h"
#include "kernels/exp_simd128.h"

/* nd_sigmoid on four lanes: -|x| by setting the sign bit, the numerator
 * chosen by x >= 0 (false for NaN, whose e is 0, as in the scalar). */
static inline __attribute__((always_inline)) v128_t sigmoid4(v128_t x) {
    const v128_t one = wasm_f32x4_splat(1.0f);
    v128_t e = nd_exp4(wasm_v128_or(x, wasm_f32x4_splat(-0.0f)));
    v128_t num = wasm_v128_bitselect(one, e, wasm_f32x4_ge(x, wasm_f32x4_splat(0.0f)));
    return wasm_f32x4_div(num, wasm_f32x4_add(one, e));
}

void nd_sigmoid_mul_simd128(float *o, const float *g, size_t n) {
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        wasm_v128_store(o + i, wasm_f32x4_mul(wasm_v128_load(o + i), sigmoid4(wasm_v128_load(g + i))));
    for (; i < n; i++) o[i] *= nd_sigmoid(g[i]);
}
#endif
