/* cq_a8.h: the fast-mode kernel for short CQ matrices in the archive layout
 * (the mHC Phi_pre, Phi_post and Phi_res rows of one layer: 4 + 4 + 16 rows
 * of 2,048 columns), where the int8 tables of the tiled kernels cost more to
 * build than the product they serve.
 *
 * Both sides become integers and a dot product is exact in integers:
 * - the activation, rotated (nd_cq_rotate), per group g, to 14 bits:
 *   scale_g = max|x| / ND_CQ_A8_XMAX, q = round half to even(x / scale_g),
 *   clamped to [-ND_CQ_A8_XMAX, ND_CQ_A8_XMAX] (a NaN, from a NaN or
 *   infinite activation, is 0). Phi reads the mHC norm, which the model was
 *   not trained to quantise (A8 is elsewhere, a8.h): 14 bits keep this
 *   rounding far below A8's; int8 here cost as much as A8 itself;
 * - the levels, once per matrix, as two int8 parts: with t = level * 127 /
 *   lmax (lmax the largest |level|), hi = round half to even(t) and lo =
 *   round half to even(127 (t - hi)), so level ~ scale * (127 hi + lo),
 *   scale = lmax / 127^2. One int8 level (lo left out) moved the fast mode
 *   further from the model than any other approximation (README);
 * - y[r] = sum over groups, ascending from 0, of (norm[r][g] * (scale_g *
 *   scale)) * (127 * (float)(sum of hi[idx] * q) + (float)(sum of lo[idx] * q)).
 * The error is the two roundings: at most half a step of each scale per
 * weight and activation. A group's integer sums stay below 2^31: at most
 * 256 columns of (|hi| + 128) * |q| <= 255 * 16383.
 *
 * The quantised activation (nd_cq_a8_bytes) is stored in the order the SIMD
 * kernel reads it, so it is built once per position and shared by every
 * matrix of the same width, group and bits (nd_cq_a8_shared):
 * - padded int16 activations, widened once here rather than once per row by
 *   the kernel. A row's group is read as 16-byte vectors v, each byte holding
 *   8 / bits indices (bits 4: the low then the high nibble; bits 2: four
 *   crumbs from the low bits); index slot j of vector v is one block of 16
 *   int16 at g * group + (v * 8 / bits + j) * 16, whose element i is the
 *   activation of byte i's index j: column g * group + (16 v + i) * (8 / bits) + j;
 * - groups float scales (scale_g);
 * - groups int32 sums of the group's q: the kernel looks up lq + 128, which
 *   is unsigned and widens with a zero extension, and takes 128 times the
 *   sum back off.
 *
 * The _ref functions are the specification; their _simd128 twins give the
 * same bits. */
#ifndef ND_CQ_A8_H
#define ND_CQ_A8_H
#include "kernels/cq.h"

/* The activations' integer range (14 bits). */
#define ND_CQ_A8_XMAX 16383

/* Whether the kernel takes m: archive layout, bits 2 or 4, and whole 16-byte
 * vectors per group (group * bits a multiple of 128). */
int nd_cq_a8_fits(const nd_cq *m);

/* Whether an activation quantised for a serves b. */
int nd_cq_a8_shared(const nd_cq *a, const nd_cq *b);

/* Bytes of one quantised activation of m: padded int16, then groups floats
 * and groups int32 (at most 4 bytes a column: groups are 32 columns or more). */
size_t nd_cq_a8_bytes(const nd_cq *m);

/* Quantises the rotated activation xr[padded] of m into q (nd_cq_a8_bytes,
 * 4-byte aligned). */
void nd_cq_a8_quantise_ref(const nd_cq *m, const float *xr, void *q);

/* y[rows] = W x from the quantised activation. */
void nd_cq_a8_gemv_ref(const nd_cq *m, const void *q, float *y);
#ifdef ND_SIMD128
void nd_cq_a8_quantise_simd128(const nd_cq *m, const float *xr, void *q);
void nd_cq_a8_gemv_simd128(const nd_cq *m, const void *q, float *y);
#define nd_cq_a8_quantise nd_cq_a8_quantise_simd128
#define nd_cq_a8_gemv nd_cq_a8_gemv_simd128
#else
#define nd_cq_a8_quantise nd_cq_a8_quantise_ref
#define nd_cq_a8_gemv nd_cq_a8_gemv_ref
#endif

/* The two int8 parts of m's levels and their scale (shared by both kernels). */
float nd_cq_a8_levels(const nd_cq *m, int8_t hi[16], int8_t lo[16]);

/* One group of nd_cq_a8_quantise_ref: x[group] into out[group] in the
 * layout's order, its scale and the sum of its values. The SIMD quantiser
 * calls it for the groups its fast path does not take (infinite or NaN
 * activations, a maximum so small that 127 / max overflows). */
void nd_cq_a8_quantise_group(const nd_cq *m, const float *x, int16_t *out, float *scale, int32_t *sum);

/* Where the group scales and the group sums of a quantised activation start. */
static inline const float *nd_cq_a8_scales(const nd_cq *m, const void *q) {
    return (const float *)((const int16_t *)q + nd_cq_padded(m));
}
static inline const int32_t *nd_cq_a8_sums(const nd_cq *m, const void *q) {
    return (const int32_t *)(nd_cq_a8_scales(m, q) + m->groups);
}

#endif
