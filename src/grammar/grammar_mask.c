/* grammar_mask.c: the tool-call grammar's vocabulary trie and mask. A byte
 * trie of the vocabulary's pieces is walked depth first against the matcher:
 * a token is allowed when the matcher accepts all its bytes, and a subtree
 * is left as soon as its prefix is refused. One head inside a free string
 * takes a fast path. A vocabulary is built once per tokenizer; grammars made
 * with needle_grammar_new_shared share it. */
#include "grammar/grammar_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h" /* nd_fail */
#include "format/tokenizer.h"

void needle_vocab_free(needle_vocab *v) {
    if (!v) return;
    free(v->nodes), free(v->tok_next), free(v->bytes), free(v->off), free(v->len);
    free(v->plain), free(v->special);
    free(v);
}

/* The child of node along byte, added when missing; -1 when out of memory. */
static int32_t trie_child(needle_vocab *v, int32_t node, uint8_t byte) {
    for (int32_t c = v->nodes[node].child; c >= 0; c = v->nodes[c].sibling)
        if (v->nodes[c].byte == byte) return c;
    if (v->nnodes == v->cnodes) {
        uint32_t nc = v->cnodes * 2;
        tnode *nn = realloc(v->nodes, nc * sizeof *nn);
        if (!nn) return -1;
        v->nodes = nn, v->cnodes = nc;
    }
    int32_t c = (int32_t)v->nnodes++;
    v->nodes[c] = (tnode){-1, v->nodes[node].child, -1, byte};
    v->nodes[node].child = c;
    return c;
}

/* Whole, plain string content: valid complete UTF-8 without '"', '\\' or
 * control characters (the fast path of masking inside free strings). */
static int plain_piece(const uint8_t *s, size_t n) {
    for (size_t i = 0; i < n;) {
        unsigned c = s[i];
        if (c < 0x20 || c == '"' || c == '\\') return 0;
        if (c < 0x80) { i++; continue; }
        int k = c >= 0xF5 ? 0 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
        if (!k || (size_t)k > n - i) return 0;
        unsigned lo = c == 0xE0 ? 0xA0 : c == 0xF0 ? 0x90 : 0x80, hi = c == 0xED ? 0x9F : c == 0xF4 ? 0x8F : 0xBF;
        if (s[i + 1] < lo || s[i + 1] > hi) return 0;
        for (int j = 2; j < k; j++)
            if ((s[i + j] & 0xC0) != 0x80) return 0;
        i += (size_t)k;
    }
    return 1;
}

/* A piece's bytes: byte pieces are their byte, U+2581 is a space. Control
 * and unknown pieces have none (never allowed), and neither has markup, a
 * user-defined piece "<...>" (the chat markers: a call never holds one).
 * Other user-defined pieces are text, as in SentencePiece: a tokenizer that
 * keeps the word boundary "▁" as a piece of its own spells every space with
 * it. */
static size_t piece_bytes(const needle_tokenizer *tok, int32_t id, uint8_t *out) {
    size_t len;
    int type;
    const char *s = nd_tokenizer_piece(tok, id, &len, &type);
    if (!s) return 0;
    if (type == ND_PIECE_BYTE) {
        int b = nd_tokenizer_byte(tok, id);
        if (b < 0) return 0;
        out[0] = (uint8_t)b;
        return 1;
    }
    if (type == ND_PIECE_USER && len && s[0] == '<' && s[len - 1] == '>') return 0;
    if (type != ND_PIECE_NORMAL && type != ND_PIECE_USER) return 0;
    size_t w = 0;
    for (size_t i = 0; i < len; i++) {
        if (w >= ND_MAX_PIECE) return 0;
        if (i + 2 < len && (uint8_t)s[i] == 0xE2 && (uint8_t)s[i + 1] == 0x96 && (uint8_t)s[i + 2] == 0x81)
            out[w++] = ' ', i += 2;
        else out[w++] = (uint8_t)s[i];
    }
    return w;
}

needle_vocab *needle_vocab_new(const needle_tokenizer *tok, needle_error *err) {
    uint32_t n = tok ? needle_tokenizer_size(tok) : 0;
    if (!n) { nd_fail(err, NEEDLE_E_ARGUMENT, "vocab: empty or NULL tokenizer"); return NULL; }
    needle_vocab *v = calloc(1, sizeof *v);
    size_t words = (n + 63) / 64;
    if (v) {
        v->size = n, v->cnodes = 1024;
        v->nodes = malloc(v->cnodes * sizeof *v->nodes);
        v->tok_next = malloc(n * sizeof *v->tok_next);
        v->off = malloc((n + 1) * sizeof *v->off);
        v->len = calloc(n, 1);
        v->plain = calloc(words, sizeof *v->plain);
        v->special = malloc(n * sizeof *v->special);
        v->bytes = malloc((size_t)n * ND_MAX_PIECE > 1u << 26 ? 1u << 26 : (size_t)n * ND_MAX_PIECE);
    }
    if (!v || !v->nodes || !v->tok_next || !v->off || !v->len || !v->plain || !v->special || !v->bytes) goto oom;
    v->nnodes = 1;
    v->nodes[0] = (tnode){-1, -1, -1, 0};
    size_t total = 0, cap = (size_t)n * ND_MAX_PIECE > 1u << 26 ? 1u << 26 : (size_t)n * ND_MAX_PIECE;
    uint8_t buf[ND_MAX_PIECE];
    for (uint32_t id = 0; id < n; id++) {
        size_t len = piece_bytes(tok, (int32_t)id, buf);
        v->off[id] = (uint32_t)total, v->tok_next[id] = -1;
        if (!len || total + len > cap) continue;
        memcpy(v->bytes + total, buf, len);
        total += len;
        v->len[id] = (uint8_t)len;
        int32_t node = 0;
        for (size_t i = 0; i < len && node >= 0; i++) node = trie_child(v, node, buf[i]);
        if (node < 0) goto oom;
        v->tok_next[id] = v->nodes[node].tok, v->nodes[node].tok = (int32_t)id;
        if (plain_piece(buf, len)) v->plain[id / 64] |= 1ull << (id % 64);
        else v->special[v->nspecial++] = (int32_t)id;
    }
    v->off[n] = (uint32_t)total;
    return v;
oom:
    needle_vocab_free(v);
    nd_fail(err, NEEDLE_E_NOMEM, "vocab: out of memory");
    return NULL;
}

/* Allows every token ending below node whose bytes the heads g->hs[depth]
 * accept: a refused byte prunes its whole subtree, and the arena is rewound
 * after each child, so the walk leaves the state as it found it. */
static void dfs(needle_grammar *g, int32_t node, int depth) {
    const needle_vocab *v = g->vocab;
    for (int32_t c = v->nodes[node].child; c >= 0; c = v->nodes[c].sibling) {
        size_t mf = g->nfr, ms = g->nsp;
        g->pos = g->len + (size_t)depth;
        if (nd_feed_byte(g, &g->hs[depth], v->nodes[c].byte, &g->hs[depth + 1])) {
            for (int32_t t = v->nodes[c].tok; t >= 0; t = v->tok_next[t]) g->allowed[t / 64] |= 1ull << (t % 64);
            if (v->nodes[c].child >= 0) dfs(g, c, depth + 1);
        }
        g->nfr = mf, g->nsp = ms;
    }
}

/* Fast path: one head inside a free string (in a pattern's state that
 * accepts anything after it, not near maxLength, not grounded) allows every
 * plain piece; only the few special ones are walked. */
static int mask_fast(needle_grammar *g) {
    if (g->cur.n != 1 || g->cur.h[0] < 0) return 0;
    const frame *f = &g->fr[g->cur.h[0]];
    const gnode *n = &g->gr.v[f->node];
    if (n->kind != K_STR || f->ph != S_BODY || !n->dfa->any[f->a] || f->ground ||
        (n->maxlen != UINT32_MAX && (uint64_t)f->b + ND_MAX_PIECE > n->maxlen))
        return 0;
    const needle_vocab *v = g->vocab;
    memcpy(g->allowed, v->plain, ((v->size + 63) / 64) * sizeof *g->allowed);
    for (uint32_t i = 0; i < v->nspecial; i++) {
        int32_t t = v->special[i];
        size_t mf = g->nfr, ms = g->nsp;
        heads out;
        if (nd_feed_bytes(g, v->bytes + v->off[t], v->len[t], &out)) g->allowed[t / 64] |= 1ull << (t % 64);
        g->nfr = mf, g->nsp = ms;
    }
    return 1;
}

/* g->allowed for g->cur: remembered when the state was met before; with
 * fast 0, always the whole trie walk (the specification the others meet). */
static void allowed_tokens(needle_grammar *g, int remember, int fast) {
    const needle_vocab *v = g->vocab;
    memset(g->allowed, 0, ((v->size + 63) / 64) * sizeof *g->allowed);
    if (g->done) return; /* nothing may follow the end token */
    if (nd_match_complete(g)) {
        if (g->end_token >= 0 && (uint32_t)g->end_token < v->size)
            g->allowed[g->end_token / 64] |= 1ull << (g->end_token % 64);
        return;
    }
    if (remember && nd_mask_cache_get(g)) return;
    g->ctx_read = 0; /* the walk notes whether it reads the context (grammar_cache.c) */
    if (!fast || !mask_fast(g)) {
        g->hs[0] = g->cur;
        dfs(g, 0, 0);
    }
    g->cache.walks++;
    if (g->end_token >= 0 && (uint32_t)g->end_token < v->size)
        g->allowed[g->end_token / 64] &= ~(1ull << (g->end_token % 64));
    if (remember) nd_mask_cache_put(g);
}

/* Sets the logits of refused tokens to -inf: the count allowed. */
static uint32_t apply_mask(const needle_grammar *g, float *logits) {
    uint32_t size = g->vocab->size, count = 0;
    for (uint32_t w = 0; w * 64 < size; w++) {
        uint64_t bits = g->allowed[w];
        uint32_t n = size - w * 64 < 64 ? size - w * 64 : 64;
        if (n == 64 && bits == ~0ull) { count += 64; continue; }
        for (uint32_t i = 0; i < n; i++) {
            if (bits >> i & 1) count++;
            else logits[w * 64 + i] = -INFINITY;
        }
    }
    return count;
}

uint32_t needle_grammar_mask(needle_grammar *g, float *logits) {
    if (!g || !logits) return 0;
    allowed_tokens(g, 1, 1);
    return apply_mask(g, logits);
}

uint32_t nd_grammar_mask_walked(needle_grammar *g, float *logits) {
    allowed_tokens(g, 0, 0);
    return apply_mask(g, logits);
}

void nd_grammar_mask_counts(const needle_grammar *g, uint64_t *remembered, uint64_t *walked) {
    *remembered = g->cache.hits, *walked = g->cache.walks;
}
