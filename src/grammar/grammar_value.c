/* grammar_value.c: where the call's text stands relative to an argument
 * value, for the decoding the makers' Needle 3 engine does at a value's start
 * (agent/value_search.h): whether the next byte starts one, what kind of
 * value it is, whether the value has closed, and which string options an
 * open literal still allows.
 *
 * Depths: the call array is 0, a call object 1, its arguments object 2, so
 * an argument's value is written at depth 3 and deeper. */
#include "grammar/grammar.h"
#include "grammar/grammar_internal.h"

#define ARGUMENTS_DEPTH 2

/* The node a head waits to start, or -1 when it is not at a value's start
 * inside the arguments. *grounded: its key is grounded. */
static int32_t pending_value(const needle_grammar *g, const frame *w, int *grounded) {
    const gnode *n = &g->gr.v[w->node];
    *grounded = 0;
    if (n->kind == K_OBJ && w->ph == O_VALSTART && w->depth >= ARGUMENTS_DEPTH) {
        *grounded = (int)(n->grounded >> (int)w->y & 1);
        return n->kids[w->y];
    }
    if (n->kind == K_ARR && (w->ph == A_FIRST || w->ph == A_NEXT) && w->depth > ARGUMENTS_DEPTH) return n->items;
    return -1;
}

/* 1 when every alternative of node is a literal set and one of them holds a
 * string. */
static int string_options(const needle_grammar *g, int32_t node) {
    const gnode *n = &g->gr.v[node];
    uint32_t nk = n->kind == K_ALT ? n->nkids : 1;
    int strings = 0;
    for (uint32_t i = 0; i < nk; i++) {
        const gnode *m = &g->gr.v[n->kind == K_ALT ? n->kids[i] : node];
        if (m->kind != K_LIT) return 0;
        for (uint32_t k = 0; k < m->nlits; k++) strings |= m->lits[k].n && m->lits[k].s[0] == '"';
    }
    return strings;
}

unsigned nd_grammar_value_start(const needle_grammar *g) {
    if (g->cur.n == 0) return 0;
    unsigned flags = ND_VALUE_START | ND_VALUE_OPTIONS;
    for (int i = 0; i < g->cur.n; i++) {
        int32_t h = g->cur.h[i], grounded;
        int32_t node = h >= 0 ? pending_value(g, &g->fr[h], &grounded) : -1;
        if (node < 0) return 0;
        if (!string_options(g, node)) flags &= ~ND_VALUE_OPTIONS;
        if (grounded) flags |= ND_VALUE_GROUNDED;
    }
    return flags;
}

/* 1 when literal frame w has written the whole of a literal that needs no
 * byte after it to end (a string's closing quote, true, false, null; a
 * number's digits may go on). The matcher ends a literal at the next byte. */
static int literal_written(const needle_grammar *g, const frame *w) {
    const gnode *n = &g->gr.v[w->node];
    if (n->kind != K_LIT || w->a >= w->b || n->lits[w->a].n != (size_t)w->c || w->c < 1) return 0;
    char last = n->lits[w->a].s[w->c - 1];
    return last < '0' || last > '9';
}

int nd_grammar_value_closed(const needle_grammar *g) {
    for (int i = 0; i < g->cur.n; i++) {
        int32_t h = g->cur.h[i];
        if (h < 0) return 1; /* the call array closed */
        const frame *w = &g->fr[h];
        if (w->depth < ARGUMENTS_DEPTH) return 1;
        if (w->depth == ARGUMENTS_DEPTH && g->gr.v[w->node].kind == K_OBJ && w->ph == O_AFTER) return 1;
        if (w->depth == ARGUMENTS_DEPTH + 1 && literal_written(g, w)) return 1;
    }
    return 0;
}

uint32_t nd_grammar_open_options(const needle_grammar *g, const char **texts, size_t *lens, uint32_t cap) {
    uint32_t n = 0;
    if (g->len == 0 || g->text[g->len - 1] != '"' || g->cur.n == 0) return 0;
    for (int i = 0; i < g->cur.n; i++) {
        int32_t h = g->cur.h[i];
        if (h < 0) return 0;
        const frame *w = &g->fr[h];
        const gnode *m = &g->gr.v[w->node];
        if (m->kind != K_LIT || w->c != 1 || w->depth <= ARGUMENTS_DEPTH) return 0;
        uint64_t used = m->nlits <= 64 ? nd_used_mask(g, w) : 0;
        for (int32_t k = w->a; k < w->b && n < cap; k++) {
            if (used >> k & 1 || m->lits[k].n < 2) continue;
            texts[n] = m->lits[k].s + 1, lens[n] = m->lits[k].n - 1;
            n++;
        }
    }
    return n;
}
