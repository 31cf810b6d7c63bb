/* cq_q8.h: CQ matrix products in the makers' engine numerics: int8 weights
 * against int8 activations, summed exactly in integers.
 *
 * The makers' engine does not run the A8 numerics Needle 2 was trained with
 * (a8.h); per the public port that reproduced it bit for bit (needle-rs,
 * docs/engine-rules.md, "NUMERICS") it multiplies a CQ matrix like this:
 * - the activation, rotated per group of the weights (nd_cq_rotate: the
 *   normalised Walsh-Hadamard; 128 wide in the released archives), becomes
 *   int8 per group by the engine's quantiser:
 *   scale sx = amax * ND_K127 (1 when the group is all zero; the engine never
 *   divides by 127), q = x * (1 / sx) rounded half away from zero and
 *   saturated to [-128, 127] (a NaN is 0);
 * - the matrix's levels become int8 by the same quantiser under one codebook
 *   scale cbs (nd_q8_levels);
 * - per (row, group) the sum of lv[idx] * q is exact in int32 (at most 256 *
 *   127 * 128 < 2^22, so also exact as a float);
 * - y[r] = sum over groups, ascending from 0, of (float)sum * ((norm * cbs) *
 *   sx): the engine's prefill combine, with a multiply and an add where the
 *   engine fuses them (wasm SIMD128 has no fused multiply-add).
 * Every kernel computes those integers and that combine, so decode (one
 * activation) and prefill (many), scalar and SIMD128, one thread and two give
 * the same bits by construction.
 *
 * A quantised activation is int16 (widened once, so the SIMD kernels need
 * not widen it per row), padded columns in natural order, then one float
 * scale per group (4-byte aligned); n activations lie one after the other
 * (nd_q8_bytes each).
 *
 * The kernels read the tiled layout (cq.h) and compute its tiled rows; the
 * dispatch adds the tail rows. Each `_ref` is the specification; its
 * `_simd128` twin gives the same bits:
 * - GEMM (n activations): each tile's group is decoded once into int16
 *   level pairs and dotted (i32x4.dot_i16x8_s) with every activation;
 * - GEMV (one activation, decode): integer lookup tables, built once per
 *   activation and shared by the matrices with the same levels
 *   (nd_cq_lut_shared): T[code][e] = the code's levels times its int8
 *   activations, exact in int16 and kept as two byte planes (T = 256 * high
 *   + low, the low byte unsigned), each looked up with i8x16.swizzle. */
#ifndef ND_CQ_Q8_H
#define ND_CQ_Q8_H
#include "kernels/cq.h"

/* 1/127 as the engine rounds it to f32. */
#define ND_K127 0x1.020408p-7f

/* The engine's int8 quantiser of x[n] into q[n]; returns the scale. */
float nd_q8_quantise(const float *x, uint32_t n, int16_t *q);

/* m's levels as int8 (entries past 2^bits are 0); returns their scale cbs. */
float nd_q8_levels(const nd_cq *m, int8_t lv[16]);

/* Bytes of one quantised activation of m: the int16 columns rounded up to 4
 * bytes, then the group scales. */
static inline size_t nd_q8_bytes(const nd_cq *m) {
    return (nd_cq_padded(m) * sizeof(int16_t) + 3) / 4 * 4 + (size_t)m->groups * sizeof(float);
}
static inline const float *nd_q8_scales(const nd_cq *m, const void *q) {
    return (const float *)((const uint8_t *)q + (nd_cq_padded(m) * sizeof(int16_t) + 3) / 4 * 4);
}

/* 1 when a quantised activation of a serves b too (the same groups; the
 * levels are each matrix's own). */
static inline int nd_q8_shared(const nd_cq *a, const nd_cq *b) {
    return a->group == b->group && a->groups == b->groups;
}

/* Quantises the rotated activation xr[padded] of m into q (nd_q8_bytes). */
void nd_q8_activation_ref(const nd_cq *m, const float *xr, void *q);

/* Y[t][rows] for the tiled rows [16 t0, 16 t1) of m, from n quantised
 * activations q (nd_q8_bytes apart). */
void nd_cqt_q8_gemm_ref(const nd_cq *m, const void *q, uint32_t n, float *y, uint32_t t0, uint32_t t1);

/* The GEMV's tables of one quantised activation (nd_q8_tables_bytes). */
static inline size_t nd_q8_tables_bytes(const nd_cq *m) { return (size_t)m->groups * nd_cq_codes(m) * 32; }
void nd_q8_tables_ref(const nd_cq *m, const void *q, int8_t *tables);

#ifdef ND_SIMD128
void nd_q8_activation_simd128(const nd_cq *m, const float *xr, void *q);
void nd_q8_tables_simd128(const nd_cq *m, const void *q, int8_t *tables);
/* The SIMD products take m's int8 levels and their scale (nd_q8_levels),
 * worked out once per product rather than once per piece of it. */
void nd_cqt_q8_gemm_simd128(const nd_cq *m, const int8_t lv[16], float cbs, const void *q, uint32_t n, float *y,
                            uint32_t t0, uint32_t t1);
/* y[rows] for tiles [t0, t1) of one activation: q for its scales, tables
 * built from it. */
void nd_cqt_q8_gemv_simd128(const nd_cq *m, float cbs, const void *q, const int8_t *tables, float *y, uint32_t t0,
                            uint32_t t1);
#define nd_q8_activation nd_q8_activation_simd128
#define nd_q8_tables nd_q8_tables_simd128
#else
/* The same product without SIMD, as fast as scalar code goes (cq_q8_scalar.c). */
void nd_cqt_q8_gemm_scalar(const nd_cq *m, const int8_t lv[16], float cbs, const void *q, uint32_t n, float *y,
                           uint32_t t0, uint32_t t1);
#define nd_q8_activation nd_q8_activation_ref
#define nd_q8_tables nd_q8_tables_ref
#endif

/* Y[t][rows] = W X[t] of `count` matrices reading the same n quantised
 * activations q (same group and width), every row: the tiled rows split
 * across the thread pool by tiles, the tail rows after (the reference). `tables`:
 * for n == 1, the activation's tables, which serve every matrix
 * (nd_cq_lut_shared), or NULL. */
void nd_cq_matmul_q8(const nd_cq *const *ms, float *const *ys, uint32_t count, const void *q, uint32_t n,
                     const int8_t *tables);

#endif
