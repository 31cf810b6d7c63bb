/* hadamard.c: the normalised fast Walsh-Hadamard transform in Sylvester order.
 * Butterfly stages run from span 1 upward and the 1/sqrt(n) scale is applied
 * once at the end; cq_simd128.c mirrors exactly this order so its transform
 * gives bit-identical results. The inner loop of each stage with span >= 4 is
 * contiguous, which lets the compiler vectorise it. */
#include <math.h>
#include "hadamard.h"

void nd_fwht(float *v, uint32_t n) {
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
