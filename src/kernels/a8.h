/* a8.h: the activation quantisation Needle 2 was trained with ("W-CQ A8",
 * spec section 5): one vector at a time, scale = max|x| / 127, each value
 * rounded half to even to an integer in [-128, 127] and multiplied back.
 * Fast mode applies it exactly where training did (the attention input after
 * norm_in, the gated attention output before Wo, the engram e before Wkey and
 * Wval, the final x before the logits), so the default mode runs the model
 * as trained; exact mode leaves it out and runs the float model. */
#ifndef ND_A8_H
#define ND_A8_H

#include <stdint.h>

/* x[n] = its A8 value in place. An all-zero x stays zero; a NaN stays NaN. */
void nd_a8(float *x, uint32_t n);

#endif
