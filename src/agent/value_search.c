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

/* Where a branch starts, to roll back to. */
typedef struct {
    uint32_t position;
    char *text;
    size_t len;
} mark;

static int mark_here(nd_value_search *s, mark *m, needle_error *err) {
    const char *text = nd_grammar_text(s->grammar, &m->len);
    m->position = needle_session_position(s->session);
    m->text = malloc(m->len + 1);
    if (!m->text) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory");
    memcpy(m->text, text, m->len);
    nd_session_pool_save(s->session, s->pool_mark);
    return NEEDLE_OK;
}

static int back_to(nd_value_search *s, const mark *m, needle_error *err) {
    int status = needle_session_rewind(s->session, m->position, err);
    if (status) return status;
    nd_session_pool_restore(s->session, s->pool_mark);
    needle_grammar_reset(s->grammar);
    return nd_grammar_feed(s->grammar, m->text, m->len, err);
}

/* One branch: token first (its probability p), then the greedy grammar
 * token after each until the value closes or the branch is full. Its score:
 * the mean log probability, less the penalty when unfinished. */
static int branch(nd_value_search *s, int32_t first, double p, nd_value_pick *b, double *score, needle_error *err) {
    b->n = 0;
    int32_t t = first;
    double logp = 0;
    int closed = 0;
    for (;;) {
        int status = needle_grammar_accept(s->grammar, t, err);
        if (status) return status;
        b->ids[b->n] = t, b->probs[b->n] = p, b->n++;
        logp += log(p);
        if ((closed = nd_grammar_value_closed(s->grammar)) || b->n == ND_LOOKAHEAD_TOKENS) break;
        if ((status = needle_session_feed(s->session, &t, 1, s->logits, 0, err))) return status;
        mask_value(s, s->logits);
        if ((t = best_token(s, s->masked, NULL, 0)) < 0) break;
        p = prob_of(s->logits, s->vocab, t);
    }
    *score = logp / b->n - (closed ? 0 : UNFINISHED_PENALTY);
    return NEEDLE_OK;
}

int nd_lookahead(nd_value_search *s, const float *scored, int grounded, nd_value_pick *pick, needle_error *err) {
    int32_t cand[ND_LOOKAHEAD_BRANCHES];
    uint32_t n = 0;
    pick->n = 0;
    mask_value(s, scored);
    while (n < ND_LOOKAHEAD_BRANCHES && (cand[n] = best_token(s, s->masked, cand, n)) >= 0) n++;
    if (n < 2 || (prob_of(scored, s->vocab, cand[0]) >= ND_LOOKAHEAD_SURE && !grounded)) return NEEDLE_OK;
    mark m;
    int status = mark_here(s, &m, err);
    double best = -INFINITY;
    nd_value_pick b;
    for (uint32_t i = 0; i < n && !status; i++) {
        double score;
        status = branch(s, cand[i], prob_of(scored, s->vocab, cand[i]), &b, &score, err);
        if (!status) status = back_to(s, &m, err);
        if (!status && score > best) best = score, *pick = b;
    }
    free(m.text);
    return status;
}

int nd_sequence_logp(nd_value_search *s, const float *first, const int32_t *ids, uint32_t n, double *logp,
                     needle_error *err) {
    mark m;
    int status = mark_here(s, &m, err);
    *logp = n ? log(prob_of(first, s->vocab, ids[0])) : 0;
    for (uint32_t i = 0; i + 1 < n && !status; i++) {
        status = needle_session_feed(s->session, &ids[i], 1, s->logits, 0, err);
        if (!status) *logp += log(prob_of(s->logits, s->vocab, ids[i + 1]));
    }
    if (!status) status = back_to(s, &m, err);
    free(m.text);
    return status;
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
