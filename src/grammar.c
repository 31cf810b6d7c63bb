/* grammar.c: the tool-call grammar (JSON-schema constrained decoding): its
 * lifetime, feeding tokens, and the entry points of grammar.h. Declared tool
 * schemas compile to a graph of value nodes (grammar_schema.c); a matcher
 * walks the output one byte at a time (grammar_match.c); a byte trie of the
 * vocabulary's pieces is walked against the matcher to mask logits
 * (grammar_mask.c); the shortest completion closes every open value
 * (grammar_complete.c); patterns and formats run as DFAs (regex.c). The
 * types they share are in grammar_internal.h.
 *
 * Every accepted byte keeps the output a prefix that can still be completed
 * into a value valid under the schemas, so the mask never dead-ends and the
 * result always validates. The decisions taken on JSON Schema are listed in
 * the file each concerns. */
#include "grammar.h"

#include <stdlib.h>
#include <string.h>

#include "archive.h" /* nd_fail */
#include "grammar_internal.h"
#include "json.h"

/* ---- lifetime ---- */
void needle_grammar_reset(needle_grammar *g) {
    if (!g) return;
    g->nfr = g->nsp = 0, g->len = g->pos = 0, g->done = 0, g->oom = 0;
    frame w;
    memset(&w, 0, sizeof w);
    w.parent = -1, w.node = g->gr.root, w.c = -1;
    g->cur.n = 0;
    nd_heads_add(&g->cur, nd_frame_push(g, &w));
}

needle_grammar *needle_grammar_new_shared(const needle_vocab *vocab, const char *tools_json, size_t len,
                                          int32_t end_token, needle_error *err) {
    return nd_grammar_new_calls(vocab, tools_json, len, end_token, 0, err);
}

needle_grammar *nd_grammar_new_calls(const needle_vocab *vocab, const char *tools_json, size_t len,
                                     int32_t end_token, uint32_t min_calls, needle_error *err) {
    if (!vocab) { nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: NULL vocabulary"); return NULL; }
    nd_json *doc = nd_json_parse(tools_json, len, 64, err);
    if (!doc) {
        if (err) err->code = NEEDLE_E_SCHEMA;
        return NULL;
    }
    needle_grammar *g = calloc(1, sizeof *g);
    if (!g) { nd_json_free(doc); nd_fail(err, NEEDLE_E_NOMEM, "grammar: out of memory"); return NULL; }
    g->vocab = vocab, g->end_token = end_token;
    int rc = nd_build_graph(&g->gr, nd_json_root(doc), min_calls, err);
    nd_json_free(doc);
    if (rc) { needle_grammar_free(g); return NULL; }
    g->ctext = ND_MAX_OUTPUT + ND_MAX_PIECE + 1;
    g->text = malloc(g->ctext);
    g->hs = malloc((ND_MAX_PIECE + 2) * sizeof *g->hs);
    g->allowed = calloc((vocab->size + 63) / 64, sizeof *g->allowed);
    if (!g->text || !g->hs || !g->allowed || nd_node_costs(g)) {
        needle_grammar_free(g);
        nd_fail(err, NEEDLE_E_NOMEM, "grammar: out of memory");
        return NULL;
    }
    needle_grammar_reset(g);
    if (g->oom) { needle_grammar_free(g); nd_fail(err, NEEDLE_E_NOMEM, "grammar: out of memory"); return NULL; }
    if (err) err->code = NEEDLE_OK, err->message[0] = 0;
    return g;
}

needle_grammar *needle_grammar_new(const needle_tokenizer *tok, const char *tools_json, size_t len,
                                   int32_t end_token, needle_error *err) {
    needle_vocab *v = needle_vocab_new(tok, err);
    if (!v) return NULL;
    needle_grammar *g = needle_grammar_new_shared(v, tools_json, len, end_token, err);
    if (!g) { needle_vocab_free(v); return NULL; }
    g->own_vocab = v;
    return g;
}

void needle_grammar_free(needle_grammar *g) {
    if (!g) return;
    nd_graph_free(&g->gr);
    free(g->fr), free(g->sp), free(g->text), free(g->hs), free(g->allowed), free(g->cost);
    needle_vocab_free(g->own_vocab);
    free(g);
}

/* ---- feeding: tokens, and raw bytes for tests ---- */
int nd_grammar_feed(needle_grammar *g, const char *bytes, size_t n, needle_error *err) {
    if (g->done || nd_match_complete(g) || n > ND_MAX_OUTPUT - g->len)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: no bytes may follow here");
    size_t mf = g->nfr, ms = g->nsp;
    heads out;
    if (!nd_feed_bytes(g, (const uint8_t *)bytes, n, &out)) {
        g->nfr = mf, g->nsp = ms;
        return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: bytes at output offset %zu break the grammar", g->len);
    }
    g->cur = out;
    g->len += n;
    if (g->nfr > 4096) nd_arena_compact(g);
    return NEEDLE_OK;
}

size_t nd_grammar_completion_after(needle_grammar *g, int32_t token) {
    const needle_vocab *v = g->vocab;
    if (token < 0 || (uint32_t)token >= v->size || !v->len[token] || g->done || nd_match_complete(g) ||
        v->len[token] > ND_MAX_OUTPUT - g->len)
        return SIZE_MAX;
    size_t mf = g->nfr, ms = g->nsp, len = g->len;
    heads saved = g->cur, out;
    size_t n = SIZE_MAX;
    if (nd_feed_bytes(g, v->bytes + v->off[token], v->len[token], &out)) {
        g->cur = out, g->len += v->len[token];
        n = needle_grammar_completion(g, NULL, 0);
    }
    g->cur = saved, g->len = len, g->nfr = mf, g->nsp = ms;
    return n;
}

int needle_grammar_accept(needle_grammar *g, int32_t token, needle_error *err) {
    if (!g) return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: NULL");
    const needle_vocab *v = g->vocab;
    if (token < 0 || (uint32_t)token >= v->size)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: token %d out of range", (int)token);
    if (token == g->end_token) {
        if (g->done || !nd_match_complete(g))
            return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: end token before the call array is complete");
        g->done = 1;
        return NEEDLE_OK;
    }
    if (!v->len[token]) return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: token %d is never allowed", (int)token);
    if (nd_grammar_feed(g, (const char *)v->bytes + v->off[token], v->len[token], NULL))
        return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: token %d not allowed at output offset %zu", (int)token, g->len);
    return NEEDLE_OK;
}

/* ---- the state; the regex compiler on its own (for tests) ---- */
int needle_grammar_done(const needle_grammar *g) { return g && g->done; }
int nd_grammar_complete(const needle_grammar *g) { return g && nd_match_complete(g); }
const char *nd_grammar_text(const needle_grammar *g, size_t *len) {
    *len = g->len;
    return g->text;
}

int nd_regex_test(const char *pattern, const char *s, size_t n, needle_error *err) {
    const char *why = NULL;
    nd_dfa *d = nd_regex_compile(pattern, strlen(pattern), &why);
    if (!d) return nd_fail(err, NEEDLE_E_SCHEMA, "pattern: %s", why ? why : "invalid"), -1;
    size_t k;
    uint32_t *cp = nd_utf8_to_cps(s, n, &k);
    int32_t st = 0;
    for (size_t i = 0; cp && i < k && st >= 0; i++) st = d->next[st * d->nclasses + nd_dfa_class(d, cp[i])];
    int ok = cp && st >= 0 && d->accept[st];
    free(cp);
    nd_dfa_free(d);
    return ok;
}
