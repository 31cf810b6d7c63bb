/* hadamard.c: the normalised fast Walsh-Hadamard transform in Sylvester order,
 * the scalar reference. Butterfly stages run from span 1 upward and the
 * 1/sqrt(n) scale is applied once at the end (hadamard_simd128.c runs the
 * same stages on the same pairs). */
#include <math.h>
#include "kernels/hadamard.h"

void nd_fwht_ref(float *v, uint32_t n) {
    for (uint32_t h = 1; h < n; h *= 2) {
        for (uint32_t i = 0; i < n; i += 2 * h) {
            float *a = v + i, *b = v + i + h;
            for (uint32_t j = 0; j < h; j++) {
                float s = a[j], d = b[j];
                a[j] = s + d;
                b[j] = s - d;
            }
        }
    }
    /* Correctly rounded in double, then once to float: the same on every target. */
    float scale = (float)(1.0 / sqrt((double)n));
    for (uint32_t j = 0; j < n; j++) v[j] *= scale;
}
