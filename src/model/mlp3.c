/* mlp3.c: Needle 3's MLP (mlp3.h). */
#ifdef ND_NEEDLE3
#include "model/mlp3.h"

#include <math.h>

#include "kernels/activation.h"
#include "kernels/kron.h"

/* cond[N] = 1 + softmax(x cond_v) cond_u: a rank-8 gain on the hidden units. */
static void conditioning(const nd_layer *l, const float *x, uint32_t d, uint32_t N, float *cond) {
    float w[ND_COND_RANK] = {0}, top = -INFINITY, sum = 0;
    for (uint32_t c = 0; c < d; c++)
        for (uint32_t r = 0; r < ND_COND_RANK; r++) w[r] += x[c] * l->cond_v[c * ND_COND_RANK + r];
    for (uint32_t r = 0; r < ND_COND_RANK; r++) top = fmaxf(top, w[r]);
    for (uint32_t r = 0; r < ND_COND_RANK; r++) sum += w[r] = expf(w[r] - top);
    for (uint32_t m = 0; m < N; m++) cond[m] = 1.0f;
    for (uint32_t r = 0; r < ND_COND_RANK; r++) {
        const float *u = l->cond_u + (size_t)r * N;
        float p = w[r] / sum;
        for (uint32_t m = 0; m < N; m++) cond[m] += p * u[m];
    }
}

void nd_mlp3(const needle_model *m, const nd_layer *l, const float *x, float *out, float *scratch) {
    const nd_geometry *g = &m->archive.geometry;
    uint32_t d = g->hidden, N = g->hadamard_dim, ba = m->kron_a, bb = m->kron_b;
    const uint32_t *p1 = m->perms, *p2 = m->perms + N;
    float *z = scratch, *y = z + N, *t = y + N, *cond = t + N;
    conditioning(l, x, d, N, cond);
    for (uint32_t i = 0; i < N; i++) z[i] = i < d ? l->d1[i] * x[i] : 0.0f;
    nd_kron(l->w[0], l->w[1], ba, bb, z, y, t);
    for (uint32_t i = 0; i < N; i++) z[i] = l->d2[i] * cond[i] * y[p1[i]] + l->b2[i];
    nd_sigmoid_mul(z, z, N); /* silu */
    nd_kron(l->w[2], l->w[3], ba, bb, z, y, t);
    for (uint32_t i = 0; i < N; i++) z[i] = l->d3[i] * y[p2[i]];
    nd_kron(l->w[4], l->w[5], ba, bb, z, y, t);
    for (uint32_t i = 0; i < d; i++) out[i] = l->d4[i] * y[i];
}
#endif
