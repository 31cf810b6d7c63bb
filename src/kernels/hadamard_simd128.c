/* hadamard_simd128.c: the SIMD128 twin of nd_fwht_ref (hadamard.c).
 *
 * Every output of a butterfly stage is one addition or subtraction of two
 * values of the previous stage, whatever the order stages are walked in, so
 * the twin is bit-identical as long as it runs the same stages on the same
 * pairs. It does spans 1 and 2 inside each vector (shuffles), then pairs of
 * spans (h, 2h) on four vectors held in registers, which halves the loads and
 * stores of the in-memory stages; a last single stage when their count is odd.
 * The 1/sqrt(n) scale is applied once at the end, as in the reference. */
#ifdef ND_SIMD128
#include <math.h>
#include <wasm_simd128.h>
#include "kernels/hadamard.h"

/* Spans 1 and 2 of the four values of one vector. a - b is computed as
 * a + (-1 * b), which is exact, so it equals the reference's subtraction. */
static inline v128_t butterfly4(v128_t x) {
    const v128_t s1 = wasm_f32x4_const(1, -1, 1, -1), s2 = wasm_f32x4_const(1, 1, -1, -1);
    x = wasm_f32x4_add(wasm_i32x4_shuffle(x, x, 0, 0, 2, 2), wasm_f32x4_mul(wasm_i32x4_shuffle(x, x, 1, 1, 3, 3), s1));
    return wasm_f32x4_add(wasm_i32x4_shuffle(x, x, 0, 1, 0, 1), wasm_f32x4_mul(wasm_i32x4_shuffle(x, x, 2, 3, 2, 3), s2));
}

/* Spans h and 2h together on v[j], v[j+h], v[j+2h], v[j+3h] (4 floats each). */
static inline void radix4(float *v, uint32_t j, uint32_t h) {
    v128_t a = wasm_v128_load(v + j), b = wasm_v128_load(v + j + h);
    v128_t c = wasm_v128_load(v + j + 2 * h), d = wasm_v128_load(v + j + 3 * h);
    v128_t ab = wasm_f32x4_add(a, b), ad = wasm_f32x4_sub(a, b);
    v128_t cd = wasm_f32x4_add(c, d), cs = wasm_f32x4_sub(c, d);
    wasm_v128_store(v + j, wasm_f32x4_add(ab, cd));
    wasm_v128_store(v + j + h, wasm_f32x4_add(ad, cs));
    wasm_v128_store(v + j + 2 * h, wasm_f32x4_sub(ab, cd));
    wasm_v128_store(v + j + 3 * h, wasm_f32x4_sub(ad, cs));
}

void nd_fwht_simd128(float *v, uint32_t n) {
    if (n < 4) {
        nd_fwht_ref(v, n);
        return;
    }
    for (uint32_t i = 0; i < n; i += 4) wasm_v128_store(v + i, butterfly4(wasm_v128_load(v + i)));
    uint32_t h = 4;
    for (; 4 * h <= n; h *= 4)
        for (uint32_t i = 0; i < n; i += 4 * h)
            for (uint32_t j = i; j < i + h; j += 4) radix4(v, j, h);
    if (h < n) /* one stage left: span n / 2 */
        for (uint32_t j = 0; j < h; j += 4) {
            v128_t a = wasm_v128_load(v + j), b = wasm_v128_load(v + j + h);
            wasm_v128_store(v + j, wasm_f32x4_add(a, b));
            wasm_v128_store(v + j + h, wasm_f32x4_sub(a, b));
        }
    const v128_t scale = wasm_f32x4_splat((float)(1.0 / sqrt((double)n)));
    for (uint32_t j = 0; j < n; j += 4) wasm_v128_store(v + j, wasm_f32x4_mul(wasm_v128_load(v + j), scale));
}
#endif
