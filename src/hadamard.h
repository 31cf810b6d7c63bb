/* hadamard.h: the normalised fast Walsh-Hadamard transform (Sylvester order).
 * Used by the CQ kernels (per weight group), the Hadamard MLP (N points) and
 * the CQ KV-cache quantiser (64 points). */
#ifndef ND_HADAMARD_H
#define ND_HADAMARD_H
#include <stdint.h>

/* v <- H_n v / sqrt(n) in place, n a power of two; O(n log n). */
void nd_fwht(float *v, uint32_t n);

#endif
