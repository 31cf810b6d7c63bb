/* a8.c: per-vector int8 fake quantisation (see a8.h). */
#include "kernels/a8.h"

#include <math.h>

void nd_a8(float *x, uint32_t n) {
    float amax = 0.0f;
    for (uint32_t i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    if (!(amax > 0.0f) || isinf(amax)) return; /* nothing to scale by */
    float scale = amax / 127.0f;
    for (uint32_t i = 0; i < n; i++) {
        float q = rintf(x[i] / scale); /* the default rounding: half to even */
        x[i] = (q > 127.0f ? 127.0f : q < -128.0f ? -128.0f : q) * scale; /* NaN stays NaN */
    }
}
