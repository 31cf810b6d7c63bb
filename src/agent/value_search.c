/* value_search.c: the makers' Needle 3 decoding at an argument value's
 * start (value_search.h). */
#ifdef ND_NEEDLE3
#include "agent/value_search.h"
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "grammar/grammar.h"
#include "model/session.h"

/* A branch feeds at most ND_LOOKAHEAD_TOKENS - 1 tokens before it rolls back. */
_Static_assert(ND_LOOKAHEAD_TOKENS <= ND_SESSION_REWIND, "the session cannot take a branch back");

/* Logits at or below this are not scored (the engine's -1e30). */
#define UNSCORED -1e30f
/* The score a branch loses when its value did not close within its tokens. */
#define UNFINISHED_PENALTY 2.0

/* The softmax probability of token t over x (unscored entries left out). */
static double prob_of(const float *x, uint32_t n, int32_t t) {
    double z = 0;
    for (uint32_t v = 0; v < n; v++)
        if (x[v] > UNSCORED) z += exp((double)x[v] - x[t]);
    return z > 0 ? 1 / z : 0;
}

/* The likeliest token of x that is scored, has text and is not taken (the
 * lower id on a tie); -1 when none. */
static int32_t best_token(const nd_value_search *s, const float *x, const int32_t *taken, uint32_t ntaken) {
    int32_t best = -1;
    for (uint32_t v = 0; v < s->vocab; v++) {
        if (x[v] <= UNSCORED || s->first_byte[v] < 0 || (best >= 0 && x[v] <= x[best])) continue;
        uint32_t k = 0;
        while (k < ntaken && taken[k] != (int32_t)v) k++;
        if (k == ntaken) best = (int32_t)v;
    }
    return best;
}

/* x into s->masked with what the grammar refuses and the bans at -inf. */
static void mask_value(nd_value_search *s, const float *x) {
    memcpy(s->masked, x, s->vocab * sizeof *x);
    needle_grammar_mask(s->grammar, s->masked);
    for (uint32_t i = 0; i < s->nbans; i++)
        if (s->bans[i] >= 0 && (uint32_t)s->bans[i] < s->vocab) s->masked[s->bans[i]] = -INFINITY;
}

/* Marks where every branch starts: session position, probe pooling and
 * grammar text. */
static int start(nd_value_search *s, uint32_t branches, int options, needle_error *err) {
    const char *text = nd_grammar_text(s->grammar, &s->text_len);
    s->text = malloc(s->text_len + 1);
    if (!s->text) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory");
    memcpy(s->text, text, s->text_len);
    s->position = needle_session_position(s->session);
    nd_session_pool_save(s->session, s->pool_mark);
    s->branches = branches, s->options = options, s->at = 0, s->branch.n = 0, s->best = -1;
    return NEEDLE_OK;
}

void nd_search_cancel(nd_value_search *s) {
    free(s->text);
    s->text = NULL;
    s->branches = s->added = 0;
}

/* Scores the branch under way, keeps it if it is the best (the first on a
 * tie), and rolls back to where branches start. */
static int end_branch(nd_value_search *s, int closed, needle_error *err) {
    double score = s->options ? s->logp : s->logp / s->branch.n - (closed ? 0 : UNFINISHED_PENALTY);
    s->score[s->at] = score;
    if (score > (s->best < 0 ? -INFINITY : s->score[s->best])) s->best = (int)s->at, s->best_pick = s->branch;
    s->at++, s->branch.n = 0;
    int status = needle_session_rewind(s->session, s->position, err);
    if (status) return status;
    nd_session_pool_restore(s->session, s->pool_mark);
    needle_grammar_reset(s->grammar);
    return nd_grammar_feed(s->grammar, s->text, s->text_len, err);
}

/* A lookahead branch: its candidate, then the greedy grammar token after
 * each until the value closes or the branch is full; scored by the mean log
 * probability, less the penalty when unfinished. A step takes one token. */
static int lookahead_step(nd_value_search *s, needle_error *err) {
    nd_value_pick *b = &s->branch;
    if (b->n == 0) s->next = s->seq[s->at][0], s->next_p = s->first_p[s->at], s->logp = 0;
    int status = needle_grammar_accept(s->grammar, s->next, err);
    if (status) return status;
    b->ids[b->n] = s->next, b->probs[b->n] = s->next_p, b->n++;
    s->logp += log(s->next_p);
    int closed = nd_grammar_value_closed(s->grammar);
    if (closed || b->n == ND_LOOKAHEAD_TOKENS) return end_branch(s, closed, err);
    if ((status = needle_session_feed(s->session, &s->next, 1, s->logits, 0, err))) return status;
    mask_value(s, s->logits);
    if ((s->next = best_token(s, s->masked, NULL, 0)) < 0) return end_branch(s, 0, err);
    s->next_p = prob_of(s->logits, s->vocab, s->next);
    return NEEDLE_OK;
}

int nd_lookahead_begin(nd_value_search *s, const float *scored, int grounded, needle_error *err) {
    int32_t cand[ND_LOOKAHEAD_BRANCHES];
    uint32_t n = 0;
    mask_value(s, scored);
    while (n < ND_LOOKAHEAD_BRANCHES && (cand[n] = best_token(s, s->masked, cand, n)) >= 0) n++;
    if (n < 2 || (prob_of(scored, s->vocab, cand[0]) >= ND_LOOKAHEAD_SURE && !grounded)) return NEEDLE_OK;
    for (uint32_t i = 0; i < n; i++) s->seq[i][0] = cand[i], s->first_p[i] = prob_of(scored, s->vocab, cand[i]);
    return start(s, n, 0, err);
}

/* An option: its tokens teacher-forced, scored by the sum of their log
 * probabilities (the last is not fed: nothing reads what follows it). A
 * step feeds one token. */
static int option_step(nd_value_search *s, needle_error *err) {
    const int32_t *ids = s->seq[s->at];
    uint32_t k = s->branch.n; /* tokens fed */
    if (k == 0) s->logp = log(s->first_p[s->at]);
    if (k + 1 >= s->seq_len[s->at]) return end_branch(s, 1, err);
    int status = needle_session_feed(s->session, &ids[k], 1, s->logits, 0, err);
    if (status) return status;
    s->logp += log(prob_of(s->logits, s->vocab, ids[k + 1]));
    s->branch.n++;
    return NEEDLE_OK;
}

void nd_search_option(nd_value_search *s, const int32_t *ids, size_t n) {
    if (s->added == ND_OPTIONS_MAX || n == 0 || n > ND_LOOKAHEAD_TOKENS) return;
    memcpy(s->seq[s->added], ids, n * sizeof *ids);
    s->seq_len[s->added++] = (uint32_t)n;
}

int nd_options_begin(nd_value_search *s, const float *first, needle_error *err) {
    uint32_t n = s->added;
    s->added = 0;
    for (uint32_t i = 0; i < n; i++) s->first_p[i] = prob_of(first, s->vocab, s->seq[i][0]);
    return n ? start(s, n, 1, err) : NEEDLE_OK;
}

/* What the search commits: the best branch; for options the option whole,
 * its first token with its share of the options' total probability, the
 * rest 1. */
static void commit(const nd_value_search *s, nd_value_pick *pick) {
    pick->n = 0;
    if (s->best < 0) return;
    if (!s->options) {
        *pick = s->best_pick;
        return;
    }
    double z = 0;
    for (uint32_t i = 0; i < s->branches; i++) z += exp(s->score[i] - s->score[s->best]);
    pick->n = s->seq_len[s->best];
    for (uint32_t i = 0; i < pick->n; i++) pick->ids[i] = s->seq[s->best][i], pick->probs[i] = i ? 1.0 : 1 / z;
}

int nd_search_step(nd_value_search *s, nd_value_pick *pick, needle_error *err) {
    pick->n = 0;
    int status = s->options ? option_step(s, err) : lookahead_step(s, err);
    if (status || s->at < s->branches) return status;
    commit(s, pick);
    nd_search_cancel(s);
    return NEEDLE_OK;
}

/* ---- naming an option -------------------------------------------------- */

static int alnum(unsigned char c) { return (c >= '0' && c <= '9') || ((c | 32) >= 'a' && (c | 32) <= 'z'); }

/* text as the engine compares it: " " + words + " ", a word a run of ASCII
 * letters and digits, lowercased; malloc'd, *len its length. */
static char *normalised(const char *text, size_t n, size_t *len) {
    char *out = malloc(n + 3);
    if (!out) return NULL;
    size_t k = 0;
    out[k++] = ' ';
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if (alnum(c)) out[k++] = (char)(c >= 'A' && c <= 'Z' ? c | 32 : c);
        else if (out[k - 1] != ' ') out[k++] = ' ';
    }
    if (out[k - 1] != ' ') out[k++] = ' ';
    *len = k;
    return out;
}

static int contains(const char *h, size_t hn, const char *needle, size_t nn) {
    for (size_t i = 0; i + nn <= hn; i++)
        if (!memcmp(h + i, needle, nn)) return 1;
    return 0;
}

int nd_option_named(const char *conversation, size_t n, const char *option, size_t len) {
    size_t cn, on;
    char *c = normalised(conversation, n, &cn), *o = normalised(option, len, &on);
    int named = 0;
    if (c && o && on > 1) {
        /* o is " words "; a short option keeps its spaces (a whole word), a long one drops them */
        int whole = on - 2 < 5;
        named = contains(c, cn, o + !whole, on - 2 * !whole);
    }
    free(c), free(o);
    return named;
}
#endif
