/* kron_simd128.c: the SIMD128 twin of nd_kron_ref (kron.c). Four outputs
 * along l at a time, each the same products added in the same order from 0
 * as the reference's sum (wasm has no fused multiply-add to change the
 * rounding), so the results are bit-identical; columns past the last four
 * run the reference's loop. */
#if defined(ND_NEEDLE3) && defined(ND_SIMD128)
#include <wasm_simd128.h>
#include "kernels/kron.h"

/* y[r][l] = sum_m x[r][m] w[m][l] for r < rows, m < inner, l < cols (row-major). */
static void product(const float *x, uint32_t xs, uint32_t xm, const float *w, uint32_t rows, uint32_t inner,
                    uint32_t cols, float *y) {
    for (uint32_t r = 0; r < rows; r++) {
        uint32_t l = 0;
        for (; l + 4 <= cols; l += 4) {
            v128_t s = wasm_f32x4_splat(0);
            for (uint32_t m = 0; m < inner; m++)
                s = wasm_f32x4_add(s, wasm_f32x4_mul(wasm_f32x4_splat(x[r * xs + m * xm]), wasm_v128_load(w + m * cols + l)));
            wasm_v128_store(y + r * cols + l, s);
        }
        for (; l < cols; l++) {
            float s = 0;
            for (uint32_t m = 0; m < inner; m++) s += x[r * xs + m * xm] * w[m * cols + l];
            y[r * cols + l] = s;
        }
    }
}

void nd_kron_simd128(const float *a, const float *b, uint32_t ba, uint32_t bb, const float *z, float *out,
                     float *t) {
    product(z, bb, 1, b, ba, bb, bb, t);   /* t = Z b */
    product(a, 1, ba, t, ba, ba, bb, out); /* out = a^T t: row k reads column k of a */
}
#endif
