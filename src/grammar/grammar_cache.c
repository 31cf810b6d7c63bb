/* grammar_cache.c: the tool-call grammar's masks, remembered per matcher
 * state. A mask depends only on the heads' frame chains (the vocabulary and
 * the graph never change), so the chains, written out canonically, key a
 * table of masks. A state met before costs a hash and a copy instead of a
 * trie walk: every step inside a free string is one state, and the next call
 * or turn meets the same names, keys and number prefixes again.
 *
 * Canonical: a frame is written by content, not by arena index (parents
 * follow it); fields its phase never reads are zeroed, and a string's length
 * and an unbounded number's digits are folded when no bound can see them.
 * States where the matcher reads the output text (a unique array compares
 * its items) or nears the output limit are not kept. The table has sets of
 * four slots; a new state takes an empty slot of its set, else the next in
 * turn.
 *
 * Grounded values (grammar_ground.c) make a mask depend on the context too.
 * A walk that read it (g->ctx_read) keeps its mask under the state's key
 * followed by the context's number, so another turn's context never meets
 * it; a walk that did not keeps it under the key alone, for every context.
 * Whether a walk reads the context depends on the state alone (the matcher
 * notes the decisions that could, whatever the context says), so a lookup
 * tries the key alone, then the key with the context. */
#include "grammar/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#define KEY_MAX 4096            /* longer states (deep or many heads) are walked every time */
#define CACHE_BYTES (256u << 10) /* masks per grammar: 256 of them for a 8,192-piece vocabulary */
#define FRAME_KEY 57
#define WAYS 4

/* One frame's canonical record into out; 0 when the state cannot be kept. */
static int frame_key(const needle_grammar *g, const frame *f, uint8_t *out) {
    const gnode *n = &g->gr.v[f->node];
    frame w = *f;
    w.parent = 0;
    if (n->kind == K_ARR) {
        if (n->unique) return 0;
        w.b = w.c = 0, w.x = w.y = 0; /* item start and spans: read only by unique arrays */
    }
    if (n->kind == K_STR && (w.ph == S_BODY || w.ph == S_ESC)) {
        w.c = 0, w.sub = 0, w.u = 0; /* set afresh when an escape or UTF-8 starts */
        if (!w.ground) w.x = w.y = 0; /* grounded: where the text stands in the context */
        if (n->maxlen == UINT32_MAX && (uint32_t)w.b >= n->minlen) w.b = (int32_t)n->minlen;
    }
    if (n->kind == K_NUM && n->lo == -ND_MAXMAG && n->hi == ND_MAXMAG && n->mult == 1 && n->dmult == 0)
        w.x = w.x != 0, w.y = 0; /* unbounded: only the digit counts and a leading zero matter (grounded: and c) */
    uint8_t *p = out;
    memcpy(p, &w.node, 4), memcpy(p + 4, &w.depth, 2), p[6] = w.ph, p[7] = w.sub;
    memcpy(p + 8, &w.a, 4), memcpy(p + 12, &w.b, 4), memcpy(p + 16, &w.c, 4), memcpy(p + 20, &w.u, 4);
    memcpy(p + 24, &w.x, 16), memcpy(p + 40, &w.y, 16);
    p[56] = w.ground;
    return 1;
}

static uint64_t fnv(uint64_t h, const uint8_t *s, size_t n) { /* FNV-1a */
    for (size_t i = 0; i < n; i++) h = (h ^ s[i]) * 1099511628211ull;
    return h;
}

/* The key of g->cur into c->key: 0 when the state is not kept. Room is left
 * for the context's number after it. */
static int state_key(needle_grammar *g, nd_mask_cache *c) {
    if (g->len + ND_MAX_PIECE + 1 > ND_MAX_OUTPUT) return 0;
    size_t n = 0;
    for (int i = 0; i < g->cur.n; i++) {
        uint16_t frames = 0; /* each head: its frame count, then its frames from the top */
        for (int32_t f = g->cur.h[i]; f >= 0; f = g->fr[f].parent) frames++;
        if (n + 2 + (size_t)frames * FRAME_KEY + sizeof g->cx.gen > KEY_MAX) return 0;
        memcpy(c->key + n, &frames, 2), n += 2;
        for (int32_t f = g->cur.h[i]; f >= 0; f = g->fr[f].parent, n += FRAME_KEY)
            if (!frame_key(g, &g->fr[f], c->key + n)) return 0;
    }
    c->nkey = (uint32_t)n;
    c->hash = fnv(1469598103934665603ull, c->key, n) | 1;
    return 1;
}

/* Appends the context's number to the key (once): the key of a mask that
 * read the context. */
static void key_with_context(const needle_grammar *g, nd_mask_cache *c) {
    if (c->with_ctx) return;
    memcpy(c->key + c->nkey, &g->cx.gen, sizeof g->cx.gen);
    c->nkey += (uint32_t)sizeof g->cx.gen;
    c->hash = fnv(c->hash, c->key + c->nkey - sizeof g->cx.gen, sizeof g->cx.gen) | 1;
    c->with_ctx = 1;
}

/* Sizes the table for the vocabulary on first use; 0 when out of memory. */
static int cache_open(nd_mask_cache *c, uint32_t vocab) {
    if (c->slots) return 1;
    uint32_t words = (vocab + 63) / 64, slots = CACHE_BYTES / (words * 8) / WAYS * WAYS;
    if (slots < 4 * WAYS) slots = 4 * WAYS;
    if (slots > 1024) slots = 1024;
    c->key = malloc(KEY_MAX);
    c->hashes = calloc(slots, sizeof *c->hashes);
    c->keys = calloc(slots, sizeof *c->keys);
    c->nkeys = calloc(slots, sizeof *c->nkeys);
    c->masks = malloc((size_t)slots * words * sizeof *c->masks);
    if (!c->key || !c->hashes || !c->keys || !c->nkeys || !c->masks) { nd_mask_cache_free(c); return 0; }
    c->slots = slots, c->words = words;
    return 1;
}

/* The first slot of the current key's set: from the hash without its low
 * bit, which is always set (0 marks an empty slot) and would leave half the
 * sets unused. */
static uint32_t set_of(const nd_mask_cache *c) { return (uint32_t)((c->hash >> 1) % (c->slots / WAYS)) * WAYS; }

/* The slot holding the current key, or -1. */
static int32_t find(const nd_mask_cache *c) {
    uint32_t set = set_of(c);
    for (uint32_t s = set; s < set + WAYS; s++)
        if (c->hashes[s] == c->hash && c->nkeys[s] == c->nkey && !memcmp(c->keys[s], c->key, c->nkey))
            return (int32_t)s;
    return -1;
}

int nd_mask_cache_get(needle_grammar *g) {
    nd_mask_cache *c = &g->cache;
    c->with_ctx = 0;
    c->keyed = cache_open(c, g->vocab->size) && state_key(g, c);
    int32_t s = c->keyed ? find(c) : -1;
    if (s < 0 && c->keyed && g->grounds) key_with_context(g, c), s = find(c);
    if (s < 0) return 0;
    memcpy(g->allowed, c->masks + (size_t)s * c->words, c->words * sizeof *g->allowed);
    c->hits++;
    return 1;
}

void nd_mask_cache_put(needle_grammar *g) {
    nd_mask_cache *c = &g->cache;
    if (!c->keyed) return;
    if (c->with_ctx && !g->ctx_read) { /* the lookup tried both: this mask holds for every context */
        c->nkey -= (uint32_t)sizeof g->cx.gen, c->with_ctx = 0;
        c->hash = fnv(1469598103934665603ull, c->key, c->nkey) | 1;
    }
    if (g->ctx_read) key_with_context(g, c);
    uint32_t set = set_of(c), s = set;
    while (s < set + WAYS && c->hashes[s]) s++;
    if (s == set + WAYS) s = set + c->turn++ % WAYS;
    uint8_t *key = realloc(c->keys[s], c->nkey);
    if (!key) return;
    memcpy(key, c->key, c->nkey);
    c->keys[s] = key, c->nkeys[s] = c->nkey, c->hashes[s] = c->hash;
    memcpy(c->masks + (size_t)s * c->words, g->allowed, c->words * sizeof *g->allowed);
}

void nd_mask_cache_free(nd_mask_cache *c) {
    for (uint32_t s = 0; c->keys && s < c->slots; s++) free(c->keys[s]);
    free(c->key), free(c->hashes), free(c->keys), free(c->nkeys), free(c->masks);
    memset(c, 0, sizeof *c);
}
