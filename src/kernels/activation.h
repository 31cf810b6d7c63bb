/* activation.h: the logistic sigmoid of the attention gate, the MLP's SiLU
 * and the mHC mixes (spec section 3), in one form every build computes to
 * the same bits.
 *
 * sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) below, e = exp(-|x|)
 * by the softmax's exponential nd_attn_exp (attention.h, within 2 ulp): the
 * exponential never overflows, and a negative x keeps its relative precision
 * where 1 - 1 / (1 + e) would cancel. Below -87.3 the result is 0 (the true
 * one is under FLT_MIN); NaN gives 0.
 *
 * The array form has a scalar `_ref` (the specification) and, in ND_SIMD128
 * builds, a bit-identical `_simd128` twin; nd_sigmoid_mul picks the fastest. */
#ifndef ND_ACTIVATION_H
#define ND_ACTIVATION_H

#include <stddef.h>

/* sigmoid(x) as above. */
float nd_sigmoid(float x);

/* o[i] *= sigmoid(g[i]) for i < n. g may be o itself: then o[i] becomes
 * silu(o[i]) = o[i] * sigmoid(o[i]). */
void nd_sigmoid_mul_ref(float *o, const float *g, size_t n);
#ifdef ND_SIMD128
void nd_sigmoid_mul_simd128(float *o, const float *g, size_t n);
#define nd_sigmoid_mul nd_sigmoid_mul_simd128
#else
#define nd_sigmoid_mul nd_sigmoid_mul_ref
#endif

#endif
