/* grammar_ground.c: values grounded in the conversation (Needle 3). The
 * makers' engine lets a string value of a property named "id" or "*_id", or
 * declared "grounded": true, grow only while it is a substring of the
 * conversation text, and a number value likewise (ddrscott/needle-rs
 * docs/engine-rules.md, "The byte grammar"; runtime.rs, the grounded
 * modes). The schema compiler marks such keys on their object
 * (gnode.grounded); the matcher (grammar_match.c) starts their values with
 * frame.ground set and steps them here at every byte.
 *
 * The context is held as its suffix automaton: every substring of the text
 * is a path from the root, and a state stands for the substrings that end
 * at the same places (so they continue alike). A grounded value's frame
 * keeps its state; a byte is one transition, not a search of the text,
 * which keeps a mask inside a grounded value as cheap as any other. The
 * automaton has at most 2n states and 3n transitions (n bytes of context).
 *
 * Where this grammar is stricter than the engine it keeps its promise that
 * every prefix can be completed:
 * - only strings whose own schema takes every string (no pattern, format
 *   or minLength; a maxLength is fine) are grounded: "" always closes them.
 *   A constrained id keeps its schema and is not grounded;
 * - a string is written raw or with short escapes (\n, \", ...); a \u
 *   escape cannot be checked before its last digit and is refused;
 * - bytes of the context that are no valid UTF-8 are held as NUL (which no
 *   grounded value can hold), so every character a value begins in the
 *   context can be finished there;
 * - a number grows only while the context continues it to a number its
 *   schema accepts (the engine checks bounds only at the end);
 * - an optional key none of whose values the context holds (a number id in
 *   a text with no fitting number: the engine's "needs a digit") is closed;
 *   a required one is written unchecked rather than leave no call at all.
 * An empty context grounds nothing. */
#include "grammar/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#ifdef ND_NEEDLE3

#define ND_MAX_CONTEXT (64u << 10) /* bytes of context kept: the last ones */
#define ND_NUM_WORK 65536          /* steps of one number search; past them it reports none */

/* ---- the suffix automaton ---- */
/* The state after byte b from state s, or -1 (the text leaves the context). */
static int32_t go(const nd_context *x, int32_t s, uint8_t b) {
    if (s < 0 || s >= x->nnode) return -1; /* a frame begun in another context */
    for (int32_t e = x->node[s].edges; e >= 0; e = x->edge[e].next)
        if (x->edge[e].byte == b) return x->edge[e].to;
    return -1;
}

static void add_edge(nd_context *x, int32_t from, uint8_t b, int32_t to) {
    x->edge[x->nedge] = (nd_sam_edge){to, x->node[from].edges, b};
    x->node[from].edges = x->nedge++;
}

static void set_edge(nd_context *x, int32_t from, uint8_t b, int32_t to) {
    for (int32_t e = x->node[from].edges; e >= 0; e = x->edge[e].next)
        if (x->edge[e].byte == b) { x->edge[e].to = to; return; }
}

/* A state that ends where q does, for the shorter text len: q's copy. */
static int32_t clone(nd_context *x, int32_t q, int32_t len) {
    int32_t c = x->nnode++;
    x->node[c] = (nd_sam_node){len, x->node[q].link, x->node[q].first, -1};
    for (int32_t e = x->node[q].edges; e >= 0; e = x->edge[e].next) add_edge(x, c, x->edge[e].byte, x->edge[e].to);
    return c;
}

/* The automaton of x->text, built a byte at a time (the textbook online
 * construction): the new byte's state, its suffix link found by walking
 * the links of the previous one, a state cloned where a link would join
 * texts of different lengths. */
static void build(nd_context *x) {
    x->node[0] = (nd_sam_node){0, -1, -1, -1};
    x->nnode = 1, x->nedge = 0;
    int32_t last = 0;
    for (size_t i = 0; i < x->n; i++) {
        uint8_t b = x->text[i];
        int32_t cur = x->nnode++, p = last;
        x->node[cur] = (nd_sam_node){x->node[last].len + 1, 0, (int32_t)i, -1};
        for (; p >= 0 && go(x, p, b) < 0; p = x->node[p].link) add_edge(x, p, b, cur);
        if (p >= 0) {
            int32_t q = go(x, p, b);
            if (x->node[p].len + 1 == x->node[q].len) x->node[cur].link = q;
            else {
                int32_t c = clone(x, q, x->node[p].len + 1);
                for (; p >= 0 && go(x, p, b) == q; p = x->node[p].link) set_edge(x, p, b, c);
                x->node[q].link = x->node[cur].link = c;
            }
        }
        last = cur;
    }
}

/* The length of the valid UTF-8 character at s (the ones the matcher
 * takes: no overlong forms, no surrogates, none past U+10FFFF), or 0. */
static size_t whole_char(const uint8_t *s, size_t n) {
    unsigned c = s[0];
    size_t k = c < 0x80 ? 1 : c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 0;
    if (!k || k > n) return 0;
    unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
    if (k > 1 && (s[1] < lo || s[1] > hi)) return 0;
    for (size_t j = 2; j < k; j++)
        if ((s[j] & 0xC0) != 0x80) return 0;
    return k;
}

/* ---- steps ---- */
int32_t nd_ground_step(const needle_grammar *g, int32_t state, uint8_t b) { return go(&g->cx, state, b); }

int nd_ground_esc_ok(const needle_grammar *g, int32_t state) {
    static const char decoded[] = "\"\\/\b\f\n\r\t";
    for (int i = 0; i < 8; i++)
        if (go(&g->cx, state, (uint8_t)decoded[i]) >= 0) return 1;
    return 0;
}

const uint8_t *nd_ground_after(const needle_grammar *g, int32_t state, size_t *avail) {
    size_t at = state >= 0 && state < g->cx.nnode ? (size_t)(g->cx.node[state].first + 1) : g->cx.n;
    *avail = g->cx.n - at;
    return g->cx.text + at;
}

/* A number's continuations in the context, depth first in a fixed order
 * (digits, '.', '-'), an explicit stack of at most one level per byte. */
int nd_ground_num_rest(const needle_grammar *g, const frame *w, const gnode *n, char *out, size_t *len) {
    static const char order[] = "0123456789.-";
    enum { LEVELS = ND_NUM_DIGITS + 4 }; /* sign, digits, point */
    struct { frame f; int i; } st[LEVELS];
    long work = ND_NUM_WORK;
    if (nd_num_end_ok(g, w, n)) { if (len) *len = 0; return 1; }
    int top = 0;
    st[0].f = *w, st[0].i = 0;
    while (top >= 0 && --work >= 0) {
        if (st[top].i == (int)sizeof order - 1) { top--; continue; }
        uint8_t b = (uint8_t)order[st[top].i++];
        frame f = st[top].f;
        int32_t to = go(&g->cx, f.c, b);
        if (to < 0 || !nd_num_step(n, &f, b)) continue;
        f.c = to;
        if (out) out[top] = (char)b;
        if (nd_num_end_ok(g, &f, n)) { if (len) *len = (size_t)top + 1; return 1; }
        if (top + 1 < LEVELS) top++, st[top].f = f, st[top].i = 0;
    }
    return 0; /* none, or past the work bound: refused alike by the matcher and the completion */
}

/* ---- which values are grounded ---- */
int nd_ground_leaf(const needle_grammar *g, int32_t leaf, int required) {
    const gnode *n = &g->gr.v[leaf];
    if (!g->cx.n) return ND_G_FREE;
    if (n->kind == K_STR) return n->dfa->any[0] && n->minlen == 0 ? ND_G_SUB : ND_G_FREE;
    if (n->kind == K_NUM) return g->cx.num_ok[leaf] ? ND_G_SUB : required ? ND_G_FREE : ND_G_NONE;
    return ND_G_FREE; /* enums and literals win over grounding, as in the engine */
}

uint64_t nd_ground_closed(const needle_grammar *g, const gnode *n, int *reads) {
    uint64_t optional = n->grounded & ~n->required, closed = 0;
    for (uint32_t i = 0; i < n->nlits; i++) {
        if (!(optional >> i & 1)) continue;
        uint32_t nl;
        const int32_t *lv = nd_leaves_of(&g->gr, &n->kids[i], &nl);
        int some = 0;
        for (uint32_t k = 0; k < nl; k++) {
            *reads |= g->gr.v[lv[k]].kind == K_NUM; /* only a number can be closed by the context */
            some |= nd_ground_leaf(g, lv[k], 0) != ND_G_NONE;
        }
        if (!some) closed |= 1ull << i;
    }
    return closed;
}

/* Which grounded number leaves have a value in the context: a fresh number
 * of each, run from the automaton's root. */
static void mark_numbers(needle_grammar *g) {
    memset(g->cx.num_ok, 0, g->gr.n ? g->gr.n : 1);
    for (size_t i = 0; i < g->gr.n; i++) {
        const gnode *o = &g->gr.v[i];
        for (uint32_t k = 0; o->kind == K_OBJ && k < o->nlits; k++) {
            if (!(o->grounded >> k & 1)) continue;
            uint32_t nl;
            const int32_t *lv = nd_leaves_of(&g->gr, &o->kids[k], &nl);
            for (uint32_t j = 0; j < nl; j++) {
                if (g->gr.v[lv[j]].kind != K_NUM || g->cx.num_ok[lv[j]]) continue;
                frame f;
                memset(&f, 0, sizeof f);
                f.parent = -1, f.node = lv[j], f.ph = N_START; /* c = 0: the root */
                g->cx.num_ok[lv[j]] = (uint8_t)nd_ground_num_rest(g, &f, &g->gr.v[lv[j]], NULL, NULL);
            }
        }
    }
}

void nd_context_free(nd_context *x) {
    free(x->text), free(x->node), free(x->edge), free(x->num_ok);
    memset(x, 0, sizeof *x);
}

void nd_grammar_set_context(needle_grammar *g, const char *text, size_t len) {
    nd_context *x = g ? &g->cx : NULL;
    if (!x) return;
    if (!text) len = 0;
    if (len > ND_MAX_CONTEXT) text += len - ND_MAX_CONTEXT, len = ND_MAX_CONTEXT;
    if (len == x->n && (!len || !memcmp(x->text + len, text, len))) return; /* the same text: its masks stay */
    x->gen++; /* masks that read the old text are never served again */
    x->n = 0, x->nnode = 0;
    if (!len || !g->grounds) return; /* nothing to ground, or nothing grounded */
    uint8_t *t = realloc(x->text, 2 * len); /* the text as held, then as given */
    nd_sam_node *nodes = t ? realloc(x->node, (2 * len + 2) * sizeof *nodes) : NULL;
    nd_sam_edge *edges = nodes ? realloc(x->edge, (3 * len + 8) * sizeof *edges) : NULL; /* < 2n states, < 3n edges */
    if (t) x->text = t;
    if (nodes) x->node = nodes;
    if (edges) x->edge = edges;
    if (!x->num_ok) x->num_ok = malloc(g->gr.n ? g->gr.n : 1);
    if (!t || !nodes || !edges || !x->num_ok) return; /* out of memory: grounding off until the next text */
    memcpy(x->text + len, text, len);
    memcpy(x->text, text, len);
    for (size_t i = 0; i < len;) { /* bytes of no valid character become NUL */
        size_t k = whole_char(x->text + i, len - i);
        if (!k) x->text[i++] = 0;
        else i += k;
    }
    x->n = len;
    build(x);
    mark_numbers(g);
}
#else
/* Needle 2 modules ground nothing (grammar_internal.h). */
void nd_grammar_set_context(needle_grammar *g, const char *text, size_t len) {}
#endif
