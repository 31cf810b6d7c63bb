/* cq_a8_simd128.c: the SIMD128 twins of nd_cq_a8_quantise_ref and
 * nd_cq_a8_gemv_ref (cq_a8.c), the same bits.
 *
 * The kernel: per 16-byte vector of a row and index slot, and per part of
 * the levels (hi, lo), one i8x16.swizzle of the part plus 128 (unsigned)
 * gives 16 weights; zero-extended to i16 (a vpmovzxbw and a vpunpckhbw on
 * x64), i32x4.dot_i16x8_s (one pmaddwd) multiplies them with the 16
 * activations the quantiser stored, already int16, in that order. 128 times
 * the group's activation sum is taken back off once per group and part.
 * Four rows share each activation load; their four i32 sums of each part are
 * transposed into one vector per group, and the float combination runs on
 * the four rows at once, lane by lane the reference's operations in its
 * order. */
#ifdef ND_SIMD128
#include <math.h>
#include <string.h>
#include <wasm_simd128.h>
#include "kernels/cq_a8.h"
#include "kernels/rint_simd128.h"

#define INLINE static inline __attribute__((always_inline))

/* acc + the dot of the 16 unsigned bytes u with the 16 int16 at x. */
INLINE v128_t dot16(v128_t acc, v128_t u, const int16_t *x) {
    acc = wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_u16x8_extend_low_u8x16(u), wasm_v128_load(x)));
    return wasm_i32x4_add(acc, wasm_i32x4_dot_i16x8(wasm_u16x8_extend_high_u8x16(u), wasm_v128_load(x + 8)));
}

/* acc[0], acc[1] + one row's 16-byte vector (8 / bits index slots) against
 * the 8 * 16 / bits activations at x, for the hi and lo parts of the levels
 * (plus 128). bits is a constant after inlining. */
INLINE void vector_dot(v128_t acc[2], v128_t bytes, const int16_t *x, uint32_t bits, v128_t hu, v128_t lu) {
    const v128_t mask = wasm_i8x16_splat((int8_t)((1 << bits) - 1));
    for (uint32_t j = 0; j < 8 / bits; j++) {
        v128_t idx = wasm_v128_and(j ? wasm_u16x8_shr(bytes, j * bits) : bytes, mask);
        acc[0] = dot16(acc[0], wasm_i8x16_swizzle(hu, idx), x + 16 * j);
        acc[1] = dot16(acc[1], wasm_i8x16_swizzle(lu, idx), x + 16 * j);
    }
}

/* (sum a, sum b, sum c, sum d) of four i32x4. */
INLINE v128_t reduce4(const v128_t s[4]) {
    v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(s[0], s[1], 0, 4, 1, 5), wasm_i32x4_shuffle(s[0], s[1], 2, 6, 3, 7));
    v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(s[2], s[3], 0, 4, 1, 5), wasm_i32x4_shuffle(s[2], s[3], 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* Four fp16 values as f32, exactly as nd_fp16_to_f32: the magnitude bits
 * shifted into place and scaled by 2^112 (exact for normal and subnormal
 * halves), infinities and NaNs rebuilt, then the sign. */
INLINE v128_t fp16x4(const uint8_t *const p[4]) {
    v128_t h = wasm_i32x4_splat(0);
    h = wasm_v128_load16_lane(p[0], h, 0);
    h = wasm_v128_load16_lane(p[1], h, 2);
    h = wasm_v128_load16_lane(p[2], h, 4);
    h = wasm_v128_load16_lane(p[3], h, 6);
    v128_t em = wasm_v128_and(h, wasm_i32x4_splat(0x7fff)), shifted = wasm_i32x4_shl(em, 13);
    v128_t finite = wasm_f32x4_mul(shifted, wasm_f32x4_splat(0x1p112f));
    v128_t special = wasm_v128_or(shifted, wasm_i32x4_splat(0x7f800000));
    v128_t f = wasm_v128_bitselect(special, finite, wasm_i32x4_gt(em, wasm_i32x4_splat(0x7bff)));
    return wasm_v128_or(f, wasm_i32x4_shl(wasm_v128_and(h, wasm_i32x4_splat(0x8000)), 16));
}

/* Rows r .. r + 3 (the last one repeated past the end) into y. Written out
 * row by row: the four accumulators must stay in registers. */
INLINE void rows4(const nd_cq *m, const void *q, uint32_t r, uint32_t bits, float lscale, v128_t hu, v128_t lu,
                  float *y) {
    const int16_t *x = q;
    const float *scales = nd_cq_a8_scales(m, q);
    const int32_t *sums = nd_cq_a8_sums(m, q);
    uint32_t vectors = m->group * bits / 128, row[4];
    for (uint32_t k = 0; k < 4; k++) row[k] = r + k < m->rows ? r + k : m->rows - 1;
    const uint8_t *b0 = m->packed + (size_t)row[0] * m->row_bytes, *b1 = m->packed + (size_t)row[1] * m->row_bytes;
    const uint8_t *b2 = m->packed + (size_t)row[2] * m->row_bytes, *b3 = m->packed + (size_t)row[3] * m->row_bytes;
    const uint8_t *n[4];
    for (uint32_t k = 0; k < 4; k++) n[k] = m->norms + (size_t)row[k] * m->groups * 2;
    v128_t acc = wasm_f32x4_splat(0.0f);
    for (uint32_t g = 0; g < m->groups; g++) {
        v128_t part[4][2];
        for (int k = 0; k < 4; k++) part[k][0] = part[k][1] = wasm_i32x4_splat(0);
        for (uint32_t v = 0; v < vectors; v++, x += 8 * 16 / bits, b0 += 16, b1 += 16, b2 += 16, b3 += 16) {
            vector_dot(part[0], wasm_v128_load(b0), x, bits, hu, lu);
            vector_dot(part[1], wasm_v128_load(b1), x, bits, hu, lu);
            vector_dot(part[2], wasm_v128_load(b2), x, bits, hu, lu);
            vector_dot(part[3], wasm_v128_load(b3), x, bits, hu, lu);
        }
        v128_t his[4] = {part[0][0], part[1][0], part[2][0], part[3][0]};
        v128_t los[4] = {part[0][1], part[1][1], part[2][1], part[3][1]};
        v128_t offset = wasm_i32x4_splat(128 * sums[g]);
        v128_t sum_hi = wasm_f32x4_convert_i32x4(wasm_i32x4_sub(reduce4(his), offset));
        v128_t sum_lo = wasm_f32x4_convert_i32x4(wasm_i32x4_sub(reduce4(los), offset));
        v128_t sum = wasm_f32x4_add(wasm_f32x4_mul(wasm_f32x4_splat(127.0f), sum_hi), sum_lo);
        v128_t scale = wasm_f32x4_mul(fp16x4(n), wasm_f32x4_splat(scales[g] * lscale));
        acc = wasm_f32x4_add(acc, wasm_f32x4_mul(scale, sum));
        for (int k = 0; k < 4; k++) n[k] += 2;
    }
    _Alignas(16) float out[4];
    wasm_v128_store(out, acc);
    for (uint32_t k = 0; k < 4 && r + k < m->rows; k++) y[r + k] = out[k];
}

void nd_cq_a8_gemv_simd128(const nd_cq *m, const void *q, float *y) {
    int8_t hi[16], lo[16];
    float lscale = nd_cq_a8_levels(m, hi, lo);
    /* each part plus 128, as unsigned */
    v128_t hu = wasm_i8x16_add(wasm_v128_load(hi), wasm_i8x16_splat(-128));
    v128_t lu = wasm_i8x16_add(wasm_v128_load(lo), wasm_i8x16_splat(-128));
    for (uint32_t r = 0; r < m->rows; r += 4) {
        if (m->bits == 4) rows4(m, q, r, 4, lscale, hu, lu, y);
        else rows4(m, q, r, 2, lscale, hu, lu, y);
    }
}

/* ---- the activation quantiser, nd_cq_a8_quantise_ref's twin -------------- */

/* The bits of max |x| over n floats (n a multiple of 8), as an integer max of
 * the magnitude bits: any NaN comes out above the infinity's bits. */
INLINE uint32_t group_max_bits(const float *x, uint32_t n) {
    const v128_t magnitude = wasm_i32x4_splat(0x7fffffff);
    v128_t a = wasm_i32x4_splat(0), b = wasm_i32x4_splat(0);
    for (uint32_t k = 0; k < n; k += 8) {
        a = wasm_i32x4_max(a, wasm_v128_and(wasm_v128_load(x + k), magnitude));
        b = wasm_i32x4_max(b, wasm_v128_and(wasm_v128_load(x + k + 4), magnitude));
    }
    a = wasm_i32x4_max(a, b);
    a = wasm_i32x4_max(a, wasm_i32x4_shuffle(a, a, 2, 3, 0, 1));
    a = wasm_i32x4_max(a, wasm_i32x4_shuffle(a, a, 1, 0, 3, 2));
    return (uint32_t)wasm_i32x4_extract_lane(a, 0);
}

/* round half to even(x * inv) as i32, for |x * inv| < 2^22. */
INLINE v128_t rounded4(const float *x, v128_t inv) { return nd_rint4(wasm_f32x4_mul(wasm_v128_load(x), inv)); }

/* Bits 4: the 32 columns of one vector, slot 0 the even ones, slot 1 the
 * odd; returns their sum in four i32 lanes. */
INLINE v128_t vector_bits4(const float *x, int16_t *out, v128_t inv) {
    v128_t s = wasm_i32x4_splat(0);
    for (int h = 0; h < 2; h++, x += 16, out += 8) {
        v128_t a = rounded4(x, inv), b = rounded4(x + 4, inv), c = rounded4(x + 8, inv), d = rounded4(x + 12, inv);
        v128_t even = wasm_i16x8_narrow_i32x4(wasm_i32x4_shuffle(a, b, 0, 2, 4, 6), wasm_i32x4_shuffle(c, d, 0, 2, 4, 6));
        v128_t odd = wasm_i16x8_narrow_i32x4(wasm_i32x4_shuffle(a, b, 1, 3, 5, 7), wasm_i32x4_shuffle(c, d, 1, 3, 5, 7));
        wasm_v128_store(out, even);
        wasm_v128_store(out + 16, odd);
        s = wasm_i32x4_add(s, wasm_i32x4_add(wasm_i32x4_extadd_pairwise_i16x8(even),
                                             wasm_i32x4_extadd_pairwise_i16x8(odd)));
    }
    return s;
}

/* The 4 x 4 block of i32 rows a[0..3], transposed in place. */
INLINE void transpose4(v128_t a[4]) {
    v128_t t0 = wasm_i32x4_shuffle(a[0], a[1], 0, 4, 1, 5), t1 = wasm_i32x4_shuffle(a[0], a[1], 2, 6, 3, 7);
    v128_t t2 = wasm_i32x4_shuffle(a[2], a[3], 0, 4, 1, 5), t3 = wasm_i32x4_shuffle(a[2], a[3], 2, 6, 3, 7);
    a[0] = wasm_i32x4_shuffle(t0, t2, 0, 1, 4, 5), a[1] = wasm_i32x4_shuffle(t0, t2, 2, 3, 6, 7);
    a[2] = wasm_i32x4_shuffle(t1, t3, 0, 1, 4, 5), a[3] = wasm_i32x4_shuffle(t1, t3, 2, 3, 6, 7);
}

/* Bits 2: the 64 columns of one vector, slot j those of column j mod 4;
 * returns their sum in four i32 lanes. */
INLINE v128_t vector_bits2(const float *x, int16_t *out, v128_t inv) {
    v128_t s = wasm_i32x4_splat(0);
    for (int h = 0; h < 2; h++, x += 32, out += 8) {
        v128_t lo[4], hi[4];
        for (int k = 0; k < 4; k++) lo[k] = rounded4(x + 4 * k, inv), hi[k] = rounded4(x + 16 + 4 * k, inv);
        transpose4(lo), transpose4(hi);
        for (int j = 0; j < 4; j++) {
            v128_t slot = wasm_i16x8_narrow_i32x4(lo[j], hi[j]);
            wasm_v128_store(out + 16 * j, slot);
            s = wasm_i32x4_add(s, wasm_i32x4_extadd_pairwise_i16x8(slot));
        }
    }
    return s;
}

void nd_cq_a8_quantise_simd128(const nd_cq *m, const float *xr, void *q) {
    int16_t *xq = q;
    float *scales = (float *)(xq + nd_cq_padded(m));
    int32_t *sums = (int32_t *)(scales + m->groups);
    uint32_t vectors = m->group * m->bits / 128;
    for (uint32_t g = 0; g < m->groups; g++) {
        const float *x = xr + (size_t)g * m->group;
        int16_t *out = xq + (size_t)g * m->group;
        uint32_t bits = group_max_bits(x, m->group);
        float amax;
        memcpy(&amax, &bits, sizeof amax);
        float inv = amax > 0.0f ? (float)ND_CQ_A8_XMAX / amax : 0.0f;
        /* Off the fast path, the reference: NaN or infinite activations, or
         * XMAX / max overflowing. On it |x * inv| <= XMAX (1 + 2^-24)^2 <
         * XMAX + 0.5, so the rounded values are within [-XMAX, XMAX] unclamped. */
        if (bits >= 0x7f800000u || !isfinite(inv)) {
            nd_cq_a8_quantise_group(m, x, out, scales + g, sums + g);
            continue;
        }
        v128_t vinv = wasm_f32x4_splat(inv), s = wasm_i32x4_splat(0);
        for (uint32_t v = 0; v < vectors; v++)
            s = wasm_i32x4_add(s, m->bits == 4 ? vector_bits4(x + 32 * v, out + 32 * v, vinv)
                                                : vector_bits2(x + 64 * v, out + 64 * v, vinv));
        s = wasm_i32x4_add(s, wasm_i32x4_shuffle(s, s, 2, 3, 0, 1));
        s = wasm_i32x4_add(s, wasm_i32x4_shuffle(s, s, 1, 0, 3, 2));
        scales[g] = amax / (float)ND_CQ_A8_XMAX;
        sums[g] = wasm_i32x4_extract_lane(s, 0);
    }
}
#endif
