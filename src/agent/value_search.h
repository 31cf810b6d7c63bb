/* value_search.h: how the makers' Needle 3 engine decodes an argument value
 * at its start, rather than one sampled token at a time (needle3-engine.md
 * section 2; facts from ddrscott/needle-rs, agent.rs `rollout` and
 * `score_options`, and docs/engine-rules.md "DECODING"):
 *
 * - the lookahead: the four likeliest tokens the grammar allows each
 *   continued greedily under the grammar until the value closes or 24 tokens,
 *   scored by their mean log probability (2 less when the value did not
 *   close); the best continuation is committed whole. The engine runs it
 *   where the likeliest token is under 0.95 or the value is grounded, never
 *   for a value of string options.
 * - whole options: right after the opening quote of a value of string
 *   options, each option the conversation names is teacher-forced as its
 *   text then the closing quote, scored by the sum of its log probabilities,
 *   and the likeliest is committed whole.
 *
 * Every branch runs on the real session and grammar and is rolled back
 * (session position, probe pooling, grammar text), so the caller commits the
 * pick as if it had sampled it. A token's probability is its softmax over the
 * logits as given (the engine's prob_of, not the confidence rule's visit). */
#ifndef ND_VALUE_SEARCH_H
#define ND_VALUE_SEARCH_H

#include <stddef.h>
#include <stdint.h>
#include "needle.h"

#define ND_LOOKAHEAD_TOKENS 24 /* a branch's length, its first token included */
#define ND_LOOKAHEAD_BRANCHES 4
#define ND_LOOKAHEAD_SURE 0.95 /* a likeliest token this probable is taken without a lookahead */
#define ND_OPTIONS_MAX 64      /* named options scored at one value */

typedef struct {
    needle_session *session;
    needle_grammar *grammar;
    uint32_t vocab;
    const int16_t *first_byte; /* [vocab]: -1 for a token with no text, never a candidate */
    const int32_t *bans;       /* tokens never in a value: <|im_end|> <think> </think> <tool_call> </tool_call> */
    uint32_t nbans;
    float *logits, *masked;    /* [vocab] scratch each */
    void *pool_mark;           /* nd_session_pool_bytes of scratch */
} nd_value_search;

/* What a search commits: tokens and the probability the engine records for each. */
typedef struct {
    int32_t ids[ND_LOOKAHEAD_TOKENS];
    double probs[ND_LOOKAHEAD_TOKENS];
    uint32_t n;
} nd_value_pick;

/* The lookahead at a value's start. scored: the step's logits as the engine
 * holds them (sparse after a sampled token, its base bans); grounded: the
 * value's key is. pick->n is 0 when the engine would not run it (fewer than
 * two candidates, or a likeliest one of ND_LOOKAHEAD_SURE or more and the
 * value not grounded). NEEDLE_OK or a status (err set) when the session fails. */
int nd_lookahead(nd_value_search *s, const float *scored, int grounded, nd_value_pick *pick, needle_error *err);

/* The log probability of ids[0..n) after the session's position, the first
 * token read from first (the step's logits), each next one from the logits
 * after the one before; the session is rolled back. NEEDLE_OK or a status. */
int nd_sequence_logp(nd_value_search *s, const float *first, const int32_t *ids, uint32_t n, double *logp,
                     needle_error *err);

/* 1 when the conversation text names option, as the engine matches them:
 * both ASCII-lowercased with every run of characters that are not ASCII
 * letters or digits made one space; an option of fewer than 5 bytes so
 * normalised matches a whole word, a longer one anywhere. */
int nd_option_named(const char *conversation, size_t n, const char *option, size_t len);

#endif
