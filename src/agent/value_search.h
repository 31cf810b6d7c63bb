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
 * pick as if it had sampled it. A search takes a forward pass a step
 * (nd_search_step), so a caller's abort waits for one pass, not for up to 64
 * options or 4 branches of 23 tokens. A token's probability is its softmax
 * over the logits as given (the engine's prob_of, not the confidence rule's
 * visit). */
#ifndef ND_VALUE_SEARCH_H
#define ND_VALUE_SEARCH_H

#include <stddef.h>
#include <stdint.h>
#include "needle.h"

#define ND_LOOKAHEAD_TOKENS 24 /* a branch's length, its first token included */
#define ND_LOOKAHEAD_BRANCHES 4
#define ND_LOOKAHEAD_SURE 0.95 /* a likeliest token this probable is taken without a lookahead */
#define ND_OPTIONS_MAX 64      /* named options scored at one value */

/* What a search commits: tokens and the probability the engine records for each. */
typedef struct {
    int32_t ids[ND_LOOKAHEAD_TOKENS];
    double probs[ND_LOOKAHEAD_TOKENS];
    uint32_t n;
} nd_value_pick;

typedef struct {
    needle_session *session;
    needle_grammar *grammar;
    uint32_t vocab;
    const int16_t *first_byte; /* [vocab]: -1 for a token with no text, never a candidate */
    const int32_t *bans;       /* tokens never in a value: <|im_end|> <think> </think> <tool_call> </tool_call> */
    uint32_t nbans;
    float *logits, *masked;    /* [vocab] scratch each */
    void *pool_mark;           /* nd_session_pool_bytes of scratch */
    /* The search under way (branches 0: none): named options or a
     * lookahead's candidates, each branch's tokens (an option's all, a
     * candidate's first) and its first token's probability; where every
     * branch starts; the branch under way (at), its tokens so far and its
     * log probability; each finished branch's score and the best one. */
    uint32_t branches, at, added;
    int options;
    int32_t seq[ND_OPTIONS_MAX][ND_LOOKAHEAD_TOKENS];
    uint32_t seq_len[ND_OPTIONS_MAX];
    double first_p[ND_OPTIONS_MAX], score[ND_OPTIONS_MAX];
    uint32_t position;
    char *text;
    size_t text_len;
    nd_value_pick branch, best_pick;
    int32_t next;              /* the lookahead's next token, and its probability */
    double next_p, logp;
    int best;                  /* -1 until a branch scores above -inf */
} nd_value_search;

/* Starts the lookahead at a value's start. scored: the step's logits as the
 * engine holds them (sparse after a sampled token, its base bans); grounded:
 * the value's key is. Nothing starts when the engine would not run it (fewer
 * than two candidates, or a likeliest one of ND_LOOKAHEAD_SURE or more and
 * the value not grounded). NEEDLE_OK or a status (err set). */
int nd_lookahead_begin(nd_value_search *s, const float *scored, int grounded, needle_error *err);

/* Adds a named option, its ids through the closing quote (one longer than
 * ND_LOOKAHEAD_TOKENS is left out), then starts scoring the options added,
 * each by the log probability of its ids after the session's position, the
 * first read from first (the step's logits). */
void nd_search_option(nd_value_search *s, const int32_t *ids, size_t n);
int nd_options_begin(nd_value_search *s, const float *first, needle_error *err);

/* Whether a search is under way; its next step (at most one forward pass).
 * Once it ends, *pick holds what it commits (n 0: nothing scored above
 * -inf, the caller samples). NEEDLE_OK or a status (err set). */
static inline int nd_searching(const nd_value_search *s) { return s->branches > 0; }
int nd_search_step(nd_value_search *s, nd_value_pick *pick, needle_error *err);

/* Drops the search under way (the caller rolls the session back). */
void nd_search_cancel(nd_value_search *s);

/* 1 when the conversation text names option, as the engine matches them:
 * both ASCII-lowercased with every run of characters that are not ASCII
 * letters or digits made one space; an option of fewer than 5 bytes so
 * normalised matches a whole word, a longer one anywhere. */
int nd_option_named(const char *conversation, size_t n, const char *option, size_t len);

#endif
