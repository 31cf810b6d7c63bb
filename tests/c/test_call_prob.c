/* test_call_prob.c: the makers' call-token probability (src/agent/call_prob.c)
 * against a plain reference of the rule: every candidate sorted once, the
 * visit walked in that order. Random logits, random grammar masks, vocabularies
 * large and small, sparse and dense steps, sampled tokens that are not the
 * first that fits. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "agent/call_prob.h"
#include "check.h"
#include "needle.h"
#include "rng.h"

#define CALL_END 7
#define IM_END 5

typedef struct { float l; int32_t id; } cand;

static int by_visit(const void *x, const void *y) {
    const cand *a = x, *b = y;
    if (a->l != b->l) return a->l > b->l ? -1 : 1;
    return a->id < b->id ? -1 : a->id > b->id;
}

/* The rule as engine-rules.md words it, written the slow way. */
static double reference(uint32_t vocab, const int16_t *first, const float *logits, const float *fits, int32_t token) {
    int next[256] = {0};
    size_t scored = 0;
    for (uint32_t i = 0; i < vocab; i++)
        if (first[i] >= 0 && fits[i] > -INFINITY) next[first[i]] = 1;
    for (uint32_t i = 0; i < vocab; i++) scored += first[i] >= 0 && next[first[i]];
    int sparse = 2 * scored < vocab;
    cand *c = malloc(vocab * sizeof *c);
    uint32_t live = 0;
    double max = -1e300, z = 0;
    for (uint32_t i = 0; i < vocab; i++) {
        int banned = i == 4 || i == 8 || i == 9 || i == 12 || i == 13;
        int kept = !sparse || (first[i] >= 0 && next[first[i]]) || i == CALL_END || i == IM_END;
        if (banned || !kept) continue;
        c[live++] = (cand){logits[i], (int32_t)i};
        if (logits[i] > max) max = logits[i];
    }
    for (uint32_t i = 0; i < live; i++) z += exp((double)c[i].l - max);
    qsort(c, live, sizeof *c, by_visit);
    double mass = 0, valid = 0, mine = 0;
    int found = 0, more = 0;
    for (uint32_t i = 0; i < live; i++) {
        if (found) {
            if (mass >= 0.99 || more >= 24) break;
            more++;
        }
        double p = exp((double)c[i].l - max) / z;
        mass += p;
        if (fits[c[i].id] > -INFINITY) valid += p;
        if (c[i].id == token) found = 1, mine = p;
    }
    free(c);
    return valid > 0 ? mine / valid : 1.0;
}

/* One random step: logits of spread `spread`, fits_share of the tokens
 * fitting, first bytes from `bytes` values; the token is a fitting one
 * (the best, or a random one as a sampler might take). */
static void one_step(uint64_t *s, uint32_t vocab, double spread, double fits_share, int bytes, int best) {
    int16_t *first = malloc(vocab * sizeof *first);
    float *logits = malloc(vocab * sizeof *logits), *fits = malloc(vocab * sizeof *fits);
    for (uint32_t i = 0; i < vocab; i++) {
        first[i] = i < 14 ? -1 : (int16_t)(rng_next(s) % (uint64_t)bytes);
        logits[i] = (float)((rng_unit(s) - 0.5) * spread);
        if (rng_unit(s) < 0.05) logits[i] = logits[(uint32_t)(rng_next(s) % (i + 1))]; /* ties with an earlier token */
    }
    /* Fitting tokens share their first bytes, as a grammar's do. */
    int allowed_byte[256] = {0};
    for (int b = 0; b < bytes; b++) allowed_byte[b] = rng_unit(s) < fits_share;
    int32_t token = -1;
    for (uint32_t i = 0; i < vocab; i++) {
        int fit = first[i] >= 0 && allowed_byte[first[i]] && rng_unit(s) < 0.5;
        fits[i] = fit ? logits[i] : -INFINITY;
        if (fit && (token < 0 || (best ? logits[i] > logits[token] : rng_unit(s) < 0.2))) token = (int32_t)i;
    }
    if (token < 0) { /* nothing fits: make one */
        token = 20;
        fits[token] = logits[token];
    }
    nd_call_prob p;
    CHECK(nd_call_prob_init(&p, first, vocab, CALL_END, IM_END) == NEEDLE_OK, "init");
    double got = nd_call_prob_of(&p, logits, fits, token);
    double want = reference(vocab, first, logits, fits, token);
    CHECK(fabs(got - want) <= 1e-12 * (want > 1 ? want : 1), "vocab %u spread %g fits %g: %.15g, reference %.15g",
          vocab, spread, fits_share, got, want);
    CHECK(got > 0 && got <= 1 + 1e-12, "a probability: %g", got);
    nd_call_prob_free(&p);
    free(first), free(logits), free(fits);
}

static void test_matches_reference(void) {
    uint64_t s = 42;
    const uint32_t vocabs[] = {32, 300, 2048, 8192};
    const double spreads[] = {0.5, 8, 40};
    const double shares[] = {0.02, 0.3, 0.9};
    for (size_t v = 0; v < 4; v++)
        for (size_t k = 0; k < 3; k++)
            for (size_t f = 0; f < 3; f++)
                for (int rep = 0; rep < 4; rep++) one_step(&s, vocabs[v], spreads[k], shares[f], rep % 2 ? 96 : 256, rep < 2);
}

/* A token nothing else fits scores 1 (the engine's structural tokens); one
 * with a likelier rival that fits scores its share of the two. */
static void test_only_fit_scores_one(void) {
    enum { V = 64 };
    int16_t first[V];
    float logits[V], fits[V];
    for (int i = 0; i < V; i++) first[i] = i < 14 ? -1 : (int16_t)('a' + i % 20), logits[i] = (float)(i % 7), fits[i] = -INFINITY;
    fits[30] = logits[30];
    nd_call_prob p;
    CHECK(nd_call_prob_init(&p, first, V, CALL_END, IM_END) == NEEDLE_OK, "init");
    CHECK(nd_call_prob_of(&p, logits, fits, 30) == 1.0, "the only fitting token: %g", nd_call_prob_of(&p, logits, fits, 30));
    fits[31] = logits[31]; /* a likelier rival that fits, visited first */
    double q = nd_call_prob_of(&p, logits, fits, 30);
    double share = exp(logits[30]) / (exp(logits[30]) + exp(logits[31]));
    CHECK(fabs(q - share) < 1e-9, "two fitting tokens: %g, their softmax share %g", q, share);
    nd_call_prob_free(&p);
}

int main(void) {
    RUN(test_matches_reference);
    RUN(test_only_fit_scores_one);
    return check_report();
}
