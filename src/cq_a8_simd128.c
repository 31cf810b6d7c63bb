/* cq_a8_simd128.c: the SIMD128 twin of nd_cq_a8_gemv_ref (cq_a8.c), the same
 * bits. Per 16-byte vector of a row and index slot, one i8x16.swizzle of the
 * int8 levels gives 16 weights; i16x8.extmul multiplies them with the 16
 * activations the quantiser stored in that slot's order. The two halves'
 * products (each at most 127 * 127) are added in i16 without overflow, then
 * widened pairwise into i32 sums. Four rows share each activation load; their four
 * sums are transposed into one vector at the end of a group. */
#ifdef ND_SIMD128
#include <string.h>
#include <wasm_simd128.h>
#include "cq_a8.h"
#include "fp16.h"

#define INLINE static inline __attribute__((always_inline))

/* i32x4 sums of w * x over 16 int8 lanes (four products a lane). */
INLINE v128_t mul16(v128_t w, v128_t x) {
    return wasm_i32x4_extadd_pairwise_i16x8(
        wasm_i16x8_add(wasm_i16x8_extmul_low_i8x16(w, x), wasm_i16x8_extmul_high_i8x16(w, x)));
}

/* Integer dot of one row's group (vectors of 16 bytes) with the activation. */
INLINE v128_t group_dot(const uint8_t *bytes, const int8_t *x, uint32_t vectors, uint32_t bits, v128_t lq) {
    v128_t acc = wasm_i32x4_splat(0);
    if (bits == 4) {
        const v128_t m15 = wasm_i8x16_splat(15);
        for (uint32_t v = 0; v < vectors; v++, x += 32) {
            v128_t b = wasm_v128_load(bytes + 16 * v);
            v128_t lo = wasm_i8x16_swizzle(lq, wasm_v128_and(b, m15));
            v128_t hi = wasm_i8x16_swizzle(lq, wasm_v128_and(wasm_u16x8_shr(b, 4), m15));
            acc = wasm_i32x4_add(acc, wasm_i32x4_add(mul16(lo, wasm_v128_load(x)), mul16(hi, wasm_v128_load(x + 16))));
        }
    } else {
        const v128_t m3 = wasm_i8x16_splat(3);
        for (uint32_t v = 0; v < vectors; v++, x += 64) {
            v128_t b = wasm_v128_load(bytes + 16 * v);
            v128_t w0 = wasm_i8x16_swizzle(lq, wasm_v128_and(b, m3));
            v128_t w1 = wasm_i8x16_swizzle(lq, wasm_v128_and(wasm_u16x8_shr(b, 2), m3));
            v128_t w2 = wasm_i8x16_swizzle(lq, wasm_v128_and(wasm_u16x8_shr(b, 4), m3));
            v128_t w3 = wasm_i8x16_swizzle(lq, wasm_v128_and(wasm_u16x8_shr(b, 6), m3));
            v128_t p01 = wasm_i32x4_add(mul16(w0, wasm_v128_load(x)), mul16(w1, wasm_v128_load(x + 16)));
            v128_t p23 = wasm_i32x4_add(mul16(w2, wasm_v128_load(x + 32)), mul16(w3, wasm_v128_load(x + 48)));
            acc = wasm_i32x4_add(acc, wasm_i32x4_add(p01, p23));
        }
    }
    return acc;
}

/* (sum a, sum b, sum c, sum d) of four i32x4. */
INLINE v128_t reduce4(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

void nd_cq_a8_gemv_simd128(const nd_cq *m, const void *q, float *y) {
    const int8_t *xq = q;
    int8_t levels[16];
    float lscale = nd_cq_a8_levels(m, levels);
    v128_t lq = wasm_v128_load(levels);
    uint32_t vectors = m->group * m->bits / 128, gbytes = 16 * vectors, r = 0;
    for (; r + 4 <= m->rows; r += 4) {
        const uint8_t *row = m->packed + (size_t)r * m->row_bytes;
        float acc[4] = {0, 0, 0, 0};
        for (uint32_t g = 0; g < m->groups; g++) {
            const int8_t *x = xq + (size_t)g * m->group;
            const uint8_t *b = row + (size_t)g * gbytes;
            _Alignas(16) int32_t sum[4];
            wasm_v128_store(sum, reduce4(group_dot(b, x, vectors, m->bits, lq),
                                         group_dot(b + m->row_bytes, x, vectors, m->bits, lq),
                                         group_dot(b + 2 * m->row_bytes, x, vectors, m->bits, lq),
                                         group_dot(b + 3 * m->row_bytes, x, vectors, m->bits, lq)));
            float xs;
            memcpy(&xs, xq + nd_cq_padded(m) + g * sizeof(float), sizeof xs);
            float s = xs * lscale;
            for (uint32_t k = 0; k < 4; k++)
                acc[k] += (nd_load_fp16(m->norms + 2 * ((size_t)(r + k) * m->groups + g)) * s) * (float)sum[k];
        }
        for (uint32_t k = 0; k < 4; k++) y[r + k] = acc[k];
    }
    for (; r < m->rows; r++) {
        const uint8_t *row = m->packed + (size_t)r * m->row_bytes;
        float acc = 0.0f;
        for (uint32_t g = 0; g < m->groups; g++) {
            v128_t d = group_dot(row + (size_t)g * gbytes, xq + (size_t)g * m->group, vectors, m->bits, lq);
            d = wasm_i32x4_add(d, wasm_i32x4_shuffle(d, d, 2, 3, 0, 1));
            d = wasm_i32x4_add(d, wasm_i32x4_shuffle(d, d, 1, 0, 3, 2));
            float xs;
            memcpy(&xs, xq + nd_cq_padded(m) + g * sizeof(float), sizeof xs);
            acc += (nd_load_fp16(m->norms + 2 * ((size_t)r * m->groups + g)) * (xs * lscale)) *
                   (float)wasm_i32x4_extract_lane(d, 0);
        }
        y[r] = acc;
    }
}
/* ---- the activation quantiser, nd_cq_a8_quantise's twin -------------------- */

/* 16 floats times inv, rounded half to even, as int8 in order. */
INLINE v128_t int8x16(const float *x, v128_t inv) {
    v128_t i[4];
    for (int k = 0; k < 4; k++)
        i[k] = wasm_i32x4_trunc_sat_f32x4(wasm_f32x4_nearest(wasm_f32x4_mul(wasm_v128_load(x + 4 * k), inv)));
    return wasm_i8x16_narrow_i16x8(wasm_i16x8_narrow_i32x4(i[0], i[1]), wasm_i16x8_narrow_i32x4(i[2], i[3]));
}

/* Lanes j, j+4, .., of 64 int8 (four vectors): index slot j of 2-bit bytes. */
#define CRUMB_SLOT(n, j)                                                                                      \
    wasm_i64x2_shuffle(wasm_i8x16_shuffle(n[0], n[1], j, j + 4, j + 8, j + 12, j + 16, j + 20, j + 24, j + 28, \
                                          0, 0, 0, 0, 0, 0, 0, 0),                                            \
                       wasm_i8x16_shuffle(n[2], n[3], j, j + 4, j + 8, j + 12, j + 16, j + 20, j + 24, j + 28, \
                                          0, 0, 0, 0, 0, 0, 0, 0),                                            \
                       0, 2)

void nd_cq_a8_quantise_simd128(const nd_cq *m, const float *xr, void *q) {
    int8_t *xq = q;
    uint32_t vectors = m->group * m->bits / 128;
    for (uint32_t g = 0; g < m->groups; g++) {
        const float *x = xr + (size_t)g * m->group;
        int8_t *out = xq + (size_t)g * m->group;
        v128_t most = wasm_f32x4_splat(0.0f);
        for (uint32_t k = 0; k < m->group; k += 4) most = wasm_f32x4_max(most, wasm_f32x4_abs(wasm_v128_load(x + k)));
        most = wasm_f32x4_max(most, wasm_i32x4_shuffle(most, most, 2, 3, 0, 1));
        most = wasm_f32x4_max(most, wasm_i32x4_shuffle(most, most, 1, 0, 3, 2));
        float amax = wasm_f32x4_extract_lane(most, 0);
        v128_t inv = wasm_f32x4_splat(amax > 0.0f ? 127.0f / amax : 0.0f);
        for (uint32_t v = 0; v < vectors; v++, x += 128 / m->bits, out += 128 / m->bits) {
            if (m->bits == 4) {
                v128_t a = int8x16(x, inv), b = int8x16(x + 16, inv);
                wasm_v128_store(out, wasm_i8x16_shuffle(a, b, 0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30));
                wasm_v128_store(out + 16, wasm_i8x16_shuffle(a, b, 1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31));
            } else {
                v128_t n[4] = {int8x16(x, inv), int8x16(x + 16, inv), int8x16(x + 32, inv), int8x16(x + 48, inv)};
                wasm_v128_store(out, CRUMB_SLOT(n, 0));
                wasm_v128_store(out + 16, CRUMB_SLOT(n, 1));
                wasm_v128_store(out + 32, CRUMB_SLOT(n, 2));
                wasm_v128_store(out + 48, CRUMB_SLOT(n, 3));
            }
        }
        float scale = amax / 127.0f;
        memcpy(xq + nd_cq_padded(m) + g * sizeof(float), &scale, sizeof scale);
    }
}
#endif
