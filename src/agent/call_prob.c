/* call_prob.c: the makers' Needle 3 engine's probability of a call token
 * (call_prob.h). Facts from ddrscott/needle-rs docs/engine-rules.md
 * ("Sparse logits", CONFIDENCE) and its agent.rs; the engine's own exp (a
 * four-lane f32 Cephes expf) is not reproduced: the softmax here sums in
 * double, which moves a probability in its seventh digit. */
#ifdef ND_NEEDLE3
#include "agent/call_prob.h"

#include <math.h>
#include <stdlib.h>

#include "needle.h"

/* What the engine writes for a logit it does not compute. */
#define UNSCORED -1e30f
/* The visit stops this much mass, or this many candidates, past the token. */
#define VISIT_MASS 0.99
#define VISIT_MORE 24

/* Ids the engine masks at every step: <|im_start|>, the tools and the
 * tool-result markers of the Needle 3 vocabulary. */
static const int32_t BASE_BANS[] = {4, 8, 9, 12, 13};

int nd_call_prob_init(nd_call_prob *p, const int16_t *first_byte, uint32_t vocab, int32_t call_end,
                      int32_t im_end) {
    *p = (nd_call_prob){.vocab = vocab, .first_byte = first_byte, .always = {call_end, im_end}};
    for (uint32_t id = 0; id < vocab; id++)
        if (first_byte[id] >= 0) p->by_byte[first_byte[id]]++;
    p->step = malloc(vocab * sizeof *p->step);
    return p->step ? NEEDLE_OK : NEEDLE_E_NOMEM;
}

void nd_call_prob_free(nd_call_prob *p) {
    free(p->step);
    p->step = NULL;
}

/* The logits the engine holds at a call step: only the tokens that can
 * start what the grammar allows next (their first byte is one a fitting
 * token starts with: every byte has a byte-fallback token) when those are
 * under half the vocabulary; then the base bans. */
const float *nd_call_prob_step(nd_call_prob *p, const float *logits, const float *fits) {
    uint8_t next[256] = {0};
    uint64_t scored = 0;
    for (uint32_t id = 0; id < p->vocab; id++) {
        int b = p->first_byte[id];
        if (b >= 0 && fits[id] > -INFINITY && !next[b]) next[b] = 1, scored += p->by_byte[b];
    }
    int sparse = !p->dense && 2 * scored < p->vocab;
    for (uint32_t id = 0; id < p->vocab; id++) {
        int b = p->first_byte[id];
        p->step[id] = !sparse || (b >= 0 && next[b]) ? logits[id] : UNSCORED;
    }
    for (int i = 0; i < 2; i++)
        if (p->always[i] >= 0 && (uint32_t)p->always[i] < p->vocab) p->step[p->always[i]] = logits[p->always[i]];
    for (size_t i = 0; i < sizeof BASE_BANS / sizeof *BASE_BANS; i++)
        if ((uint32_t)BASE_BANS[i] < p->vocab) p->step[BASE_BANS[i]] = UNSCORED;
    return p->step;
}

/* Visit order: by logit, the lower id first on a tie. */
static int before(float la, int32_t a, float lb, int32_t b) { return la > lb || (la == lb && a < b); }

/* The next live candidate after (l, id) in visit order; -1 when none. */
static int32_t next_after(const nd_call_prob *p, float l, int32_t id) {
    int32_t best = -1;
    for (uint32_t c = 0; c < p->vocab; c++) {
        float lc = p->step[c];
        if (lc <= UNSCORED || !before(l, id, lc, (int32_t)c)) continue;
        if (best < 0 || before(lc, (int32_t)c, p->step[best], best)) best = (int32_t)c;
    }
    return best;
}

double nd_call_prob_of(nd_call_prob *p, const float *logits, const float *fits, int32_t token) {
    nd_call_prob_step(p, logits, fits);
    float max = UNSCORED;
    for (uint32_t id = 0; id < p->vocab; id++) max = p->step[id] > max ? p->step[id] : max;
    double z = 0;
    for (uint32_t id = 0; id < p->vocab; id++)
        if (p->step[id] > UNSCORED) z += exp((double)p->step[id] - max);
    const float *s = p->step;
#define PROB(c) (s[c] > UNSCORED ? exp((double)s[c] - max) / z : 0.0)
    /* Every candidate before the token is visited: no order needed. */
    double mass = 0, valid = 0, mine = PROB(token);
    for (uint32_t c = 0; c < p->vocab; c++) {
        if (s[c] <= UNSCORED || !before(s[c], (int32_t)c, s[token], token)) continue;
        mass += PROB(c);
        if (fits[c] > -INFINITY) valid += PROB(c);
    }
    mass += mine, valid += mine;
    /* Then on in order until the mass or the count stops the visit. */
    float l = s[token];
    for (int32_t c = token, more = 0; mass < VISIT_MASS && more < VISIT_MORE; more++) {
        if ((c = next_after(p, l, c)) < 0) break;
        l = s[c];
        mass += PROB(c);
        if (fits[c] > -INFINITY) valid += PROB(c);
    }
#undef PROB
    return valid > 0 ? mine / valid : 1.0;
}
#endif
