/* call_prob.h: the probability the makers' Needle 3 engine gives a call
 * token (needle3-engine.md sections 2 and 3), from which the confidence of
 * a Needle 3 call list is taken: the least of them over its tokens.
 *
 * Two things make it differ from the token's softmax probability:
 * - sparse logits: after a call token the engine scores only the tokens
 *   whose first byte the grammar allows next (and </tool_call>, <|im_end|>)
 *   when those are under half the vocabulary; the rest count as -1e30;
 * - the sampler's visit: candidates in logit order, their softmax mass
 *   summed, until the token is reached and the mass is 0.99 or 24 more were
 *   visited; the token's probability is then renormalised over the visited
 *   candidates that fit the grammar. A token nothing else fits scores 1. */
#ifndef ND_CALL_PROB_H
#define ND_CALL_PROB_H

#include <stdint.h>

typedef struct {
    uint32_t vocab;
    const int16_t *first_byte; /* [vocab]: the first byte of each token's text, -1 for none */
    uint32_t by_byte[256];     /* how many tokens start with each byte */
    int32_t always[2];         /* </tool_call> and <|im_end|>: scored even when sparse */
    float *step;               /* [vocab] scratch: the logits the step scores */
    int dense;                 /* the step after a value search scores every token (the engine fed
                                  its pick with full logits) */
} nd_call_prob;

/* first_byte stays the caller's; returns NEEDLE_OK or NEEDLE_E_NOMEM. */
int nd_call_prob_init(nd_call_prob *p, const int16_t *first_byte, uint32_t vocab, int32_t call_end,
                      int32_t im_end);
void nd_call_prob_free(nd_call_prob *p);

/* The engine's probability of token at a call step. logits: the position's
 * logits; fits: the same with every token the grammar or the call step's
 * bans refuse at -INFINITY (fits[token] is finite). */
double nd_call_prob_of(nd_call_prob *p, const float *logits, const float *fits, int32_t token);

/* The logits the engine holds at this step (sparse or not, its base bans
 * at -1e30), in p->step until the next call. */
const float *nd_call_prob_step(nd_call_prob *p, const float *logits, const float *fits);

#endif
