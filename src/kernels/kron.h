/* kron.h: one stage of Needle 3's MLP (needle3-model.md section 4). A vector
 * z of N = ba*bb values, read as the row-major ba x bb matrix Z, becomes
 * a^T Z b: out[k*bb + l] = sum_i sum_j a[i][k] Z[i][j] b[j][l], in two
 * passes (t = Z b, then a^T t), N*(ba + bb) multiply-adds. The factors are
 * trained freely, so no fast transform applies; with Walsh factors the stage
 * is the N-point Hadamard transform.
 *
 * nd_kron_ref is the specification; nd_kron_simd128 sums the same products
 * in the same order for every output (its vectors run along l), so it is
 * bit-identical. Built with ND_NEEDLE3 only. */
#ifndef ND_KRON_H
#define ND_KRON_H
#include <stdint.h>

/* out[N] = a^T Z b for a [ba][ba], b [bb][bb], z [N]; t is scratch of N floats.
 * out may not alias z or t. */
void nd_kron_ref(const float *a, const float *b, uint32_t ba, uint32_t bb, const float *z, float *out,
                 float *t);
#ifdef ND_SIMD128
void nd_kron_simd128(const float *a, const float *b, uint32_t ba, uint32_t bb, const float *z, float *out,
                     float *t);
#define nd_kron nd_kron_simd128
#else
#define nd_kron nd_kron_ref
#endif

#endif
