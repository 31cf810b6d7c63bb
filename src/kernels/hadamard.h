/* hadamard.h: the normalised fast Walsh-Hadamard transform (Sylvester order).
 * Used by the CQ kernels (per weight group), the Hadamard MLP (N points) and
 * the CQ KV-cache quantiser (64 points).
 *
 * nd_fwht_ref is the specification; nd_fwht_simd128 performs the same
 * additions and subtractions on the same values, so it is bit-identical.
 * The unsuffixed name picks the fastest available. */
#ifndef ND_HADAMARD_H
#define ND_HADAMARD_H
#include <stdint.h>

/* v <- H_n v / sqrt(n) in place, n a power of two; O(n log n). */
void nd_fwht_ref(float *v, uint32_t n);
#ifdef ND_SIMD128
void nd_fwht_simd128(float *v, uint32_t n);
#define nd_fwht nd_fwht_simd128
#else
#define nd_fwht nd_fwht_ref
#endif

#endif
