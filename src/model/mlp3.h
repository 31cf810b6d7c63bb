/* mlp3.h: Needle 3's MLP for one position (needle3-model.md section 4):
 *
 *   cond = 1 + softmax(x cond_v) cond_u
 *   z    = F1(d1 (.) pad(x)) gathered by p1
 *   z    = F2(silu(d2 (.) cond (.) z + b2)) gathered by p2
 *   out  = first d of d4 (.) F3(d3 (.) z)
 *
 * F_s the Kronecker stages of kron.h. Built with ND_NEEDLE3 only. */
#ifndef ND_MLP3_H
#define ND_MLP3_H
#include "model/model.h"

/* Floats of scratch nd_mlp3 needs for a model of MLP width N. */
#define ND_MLP3_SCRATCH(N) (4u * (N))

/* out[d] = mlp_l(x[d]) of layer l of model m. */
void nd_mlp3(const needle_model *m, const nd_layer *l, const float *x, float *out, float *scratch);

#endif
