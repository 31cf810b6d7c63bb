/* activation.c: the scalar sigmoid (see activation.h), the specification
 * of the SIMD128 twin in activation_simd128.c. */
#include "kernels/activation.h"

#include <math.h>

#include "kernels/attention.h"

/* One division either side of 0: the numerator is chosen, not the formula. */
float nd_sigmoid(float x) {
    float e = nd_attn_exp(-fabsf(x));
    return (x >= 0.0f ? 1.0f : e) / (1.0f + e);
}

void nd_sigmoid_mul_ref(float *o, const float *g, size_t n) {
    for (size_t i = 0; i < n; i++) o[i] *= nd_sigmoid(g[i]);
}
