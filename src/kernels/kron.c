/* kron.c: the scalar Kronecker stage (kron.h), the specification its SIMD128
 * twin matches bit for bit. */
#ifdef ND_NEEDLE3
#include "kernels/kron.h"

void nd_kron_ref(const float *a, const float *b, uint32_t ba, uint32_t bb, const float *z, float *out,
                 float *t) {
    for (uint32_t i = 0; i < ba; i++)
        for (uint32_t l = 0; l < bb; l++) {
            float s = 0;
            for (uint32_t j = 0; j < bb; j++) s += z[i * bb + j] * b[j * bb + l];
            t[i * bb + l] = s;
        }
    for (uint32_t k = 0; k < ba; k++)
        for (uint32_t l = 0; l < bb; l++) {
            float s = 0;
            for (uint32_t i = 0; i < ba; i++) s += a[i * ba + k] * t[i * bb + l];
            out[k * bb + l] = s;
        }
}
#endif
