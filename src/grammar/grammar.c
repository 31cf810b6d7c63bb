/* grammar.c: the tool-call grammar (JSON-schema constrained decoding): its
 * lifetime, feeding tokens, and the entry points of grammar.h. Declared tool
 * schemas compile to a graph of value nodes (grammar_schema.c); a matcher
 * walks the output one byte at a time (grammar_match.c); a byte trie of the
 * vocabulary's pieces is walked against the matcher to mask logits
 * (grammar_mask.c); the shortest completion closes every open value
 * (grammar_complete.c); patterns and formats run as DFAs (regex.c). With
 * ND_GRAMMAR_NEEDLE3 the makers' engine's rules join the schemas
 * (grammar_v3_rules.c) and grounded values are checked against the
 * conversation (grammar_ground.c). The types they share are in
 * grammar_internal.h.
 *
 * Every accepted byte keeps the output a prefix that can still be completed
 * into a value valid under the schemas, so the mask never dead-ends and the
 * result always validates. Every schema is decided when it compiles: it has
 * a shortest value the completion finds, or the error names the tool and
 * the pointer of the part that has none. No part recurses with the input.
 * The decisions taken on JSON Schema are listed in the file each concerns. */
#include "grammar/grammar.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h" /* nd_fail */
#include "grammar/grammar_internal.h"
#include "format/json.h"

/* Nesting the tools JSON may have: a tool the agent accepted (its JSON
 * compacts at depth 128) inside the tools array always parses, so its
 * schema errors come from the compiler, naming the tool and the pointer. */
#define ND_TOOLS_JSON_DEPTH 130

/* The tools JSON nests deeper than ND_TOOLS_JSON_DEPTH: names the tool
 * holding the deep part (its "name" when the element has one, wherever it
 * stands) in err. A byte scan with a depth counter, not a parse: it never
 * recurses. Returns 0 when the text is not too deep (the parse failed for
 * another reason, and its message stands). */
static int too_deep(const char *s, size_t n, needle_error *err) {
    int depth = 0, deep = 0, after_name = 0, key_is_name = 0;
    size_t tool = 0, deep_at = 0, name = SIZE_MAX, name_end = 0;
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (ch == '"') { /* a string: skip it; at the tool object's level it is a key or a value */
            size_t st = i;
            for (i++; i < n && s[i] != '"'; i++)
                if (s[i] == '\\') i++;
            if (depth == 2 && after_name && name == SIZE_MAX) name = st, name_end = i + 1;
            else if (depth == 2) key_is_name = i - st == 5 && !memcmp(s + st, "\"name", 5);
            after_name = 0;
            continue;
        }
        if (ch == ' ' || ch == '\t' || ch == '\n' || ch == '\r') continue;
        if (ch == ':' && depth == 2) { after_name = key_is_name, key_is_name = 0; continue; }
        after_name = 0;
        if (ch == '{' || ch == '[') {
            if (++depth > ND_TOOLS_JSON_DEPTH && !deep) deep = 1, deep_at = i;
        } else if (ch == '}' || ch == ']') {
            if (--depth <= 1 && deep) break;
        } else if (ch == ',' && depth == 1) {
            tool++, name = SIZE_MAX;
        }
    }
    if (!deep) return 0;
    nd_json *d = name != SIZE_MAX ? nd_json_parse(s + name, name_end - name, 1, NULL) : NULL;
    const nd_jv *v = d ? nd_json_root(d) : NULL;
    if (v && v->type == ND_JSTRING) {
        char shown[200];
        size_t w = 0;
        for (size_t i = 0; i < v->len && w + 8 < sizeof shown; i++) {
            unsigned char c = (unsigned char)v->str[i];
            if (i == 60) { memcpy(shown + w, "...", 3), w += 3; break; }
            if (c == '"' || c == '\\') shown[w++] = '\\', shown[w++] = (char)c;
            else if (c < 0x20 || c == 0x7F) w += (size_t)snprintf(shown + w, sizeof shown - w, "\\u%04x", c);
            else shown[w++] = (char)c;
        }
        shown[w] = 0;
        nd_fail(err, NEEDLE_E_SCHEMA, "tool \"%s\": its JSON nests deeper than %d levels (byte %zu)", shown,
                ND_TOOLS_JSON_DEPTH, deep_at);
    } else
        nd_fail(err, NEEDLE_E_SCHEMA, "tools[%zu]: its JSON nests deeper than %d levels (byte %zu)", tool,
                ND_TOOLS_JSON_DEPTH, deep_at);
    nd_json_free(d);
    return 1;
}

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
    return nd_grammar_new_calls(vocab, tools_json, len, end_token, 0, ND_GRAMMAR_ASCII, err);
}

needle_grammar *nd_grammar_new_calls(const needle_vocab *vocab, const char *tools_json, size_t len,
                                     int32_t end_token, uint32_t min_calls, unsigned flags, needle_error *err) {
    if (!vocab) { nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: NULL vocabulary"); return NULL; }
    nd_json *doc = nd_json_parse(tools_json, len, ND_TOOLS_JSON_DEPTH, err);
    if (!doc) {
        if (err && err->code == NEEDLE_E_ARGUMENT && strstr(err->message, "nesting too deep")) too_deep(tools_json, len, err);
        if (err) err->code = err->code == NEEDLE_E_NOMEM ? NEEDLE_E_NOMEM : NEEDLE_E_SCHEMA;
        return NULL;
    }
    needle_grammar *g = calloc(1, sizeof *g);
    if (!g) { nd_json_free(doc); nd_fail(err, NEEDLE_E_NOMEM, "grammar: out of memory"); return NULL; }
    g->vocab = vocab, g->end_token = end_token;
    int rc = nd_build_graph(&g->gr, nd_json_root(doc), min_calls, flags, err);
    nd_json_free(doc);
    if (rc) { needle_grammar_free(g); return NULL; }
    for (size_t i = 0; i < g->gr.n; i++) g->grounds |= g->gr.v[i].grounded != 0;
    g->ctext = ND_MAX_OUTPUT + ND_MAX_PIECE + 1;
    g->text = malloc(g->ctext);
    g->hs = malloc((ND_MAX_PIECE + 2) * sizeof *g->hs);
    g->allowed = calloc((vocab->size + 63) / 64, sizeof *g->allowed);
    if (!g->text || !g->hs || !g->allowed) {
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
    free(g->fr), free(g->sp), free(g->text), free(g->hs), free(g->allowed);
    nd_context_free(&g->cx);
    nd_mask_cache_free(&g->cache);
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
