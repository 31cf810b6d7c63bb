/* test_grammar.c: the tool-call grammar. A test tokenizer (all 256 byte
 * pieces plus many multi-byte JSON pieces) drives random walks that pick a
 * uniformly random allowed token at every step; every walk must end in done
 * and its text must pass a small JSON Schema validator written here (it
 * parses with json.c but shares nothing with the matcher). Unit tests cover
 * bounds, escapes, patterns, formats, enums, uniqueItems, $ref, anyOf, oneOf
 * and schema errors, and the hostile-input regressions (long strings, wide
 * number bounds, unsatisfiable and recursive schemas, errors naming the
 * tool), also run with a 256 KB stack. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "grammar/grammar.h"
#include "format/json.h"
#include "needle.h"
#include "platform.h"
#include "random_vocab.h"
#include "grammar/regex.h"

/* ---- a test tokenizer blob (spec section 6) ---- */
typedef struct { uint8_t *p; size_t n, cap; } buf;
static void put(buf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) { b->cap = (b->n + n) * 2; b->p = realloc(b->p, b->cap); }
    memcpy(b->p + b->n, s, n), b->n += n;
}
static void put_u32(buf *b, uint32_t v) { put(b, &v, 4); }
static void piece(buf *b, const char *s, size_t n, int type) {
    float score = -1.0f;
    uint8_t t = (uint8_t)type;
    uint16_t len = (uint16_t)n;
    put(b, &score, 4), put(b, &t, 1), put(b, &len, 2), put(b, s, n);
}

static const char *const extra[] = {"{\"", "\":\"", "\",\"", "\"}", "\"}]", "\":", ",\"", "name", "arguments",
    "\":{\"", "}}", "}]", "[{\"", "[]", "\"name\":\"", "\"arguments\":{", "true", "false", "null", "\u2581",
    "\u2581the", "0", "1", "2", "10", "12", "100", "-1", ".5", "\\n", "\\\"", "\\u00", "\\ud83d", "e9", "00",
    "set", "light", "_", "level", "color", "red", "green", "blue", "abc", "ab", "a", "b", "c", "x", "@", ".com",
    "http", "://", "2024", "-0", "-12-", "T1", ":00", "Z", "\u00e9", "\xf0\x9f\x98\x80", "\"]", "\",", "],\"",
    "[\"", "\":[", "\":[\"", "\":1", "\":true", "5", "9", "99", "3.1", "-", ".", "e", "E+", "{}", "\"\"", "[1",
    "aaaaaaaaaaaaaaaa", "<think>"};
enum { N_SPECIAL = 4, N_USER_END = 4 }; /* id 4 = </tool_call> (user-defined) */
/* User-defined besides </tool_call>: a marker and the word boundary. */
static int user_defined(const char *s) { return !strcmp(s, "<think>") || !strcmp(s, "\u2581"); }

static needle_tokenizer *test_tokenizer(int32_t *end_id) {
    buf b = {0};
    uint32_t n = 5 + 256 + (uint32_t)(sizeof extra / sizeof extra[0]);
    put_u32(&b, n), put_u32(&b, 0), put_u32(&b, 1), put_u32(&b, 2), put_u32(&b, 3);
    uint8_t flags[4] = {1, 1, 0, 0};
    put(&b, flags, 4);
    piece(&b, "<pad>", 5, 2), piece(&b, "</s>", 4, 2), piece(&b, "<s>", 3, 2), piece(&b, "<unk>", 5, 1);
    piece(&b, "</tool_call>", 12, 3);
    for (int i = 0; i < 256; i++) {
        char s[8];
        snprintf(s, sizeof s, "<0x%02X>", i);
        piece(&b, s, 6, 4);
    }
    for (size_t i = 0; i < sizeof extra / sizeof extra[0]; i++)
        piece(&b, extra[i], strlen(extra[i]), user_defined(extra[i]) ? 3 : 0);
    needle_error err;
    needle_tokenizer *tok = needle_tokenizer_load(b.p, b.n, &err);
    if (!tok) printf("tokenizer: %s\n", err.message);
    free(b.p);
    *end_id = N_USER_END;
    return tok;
}

/* ---- an independent validator ----
 * open = 0: objects hold declared keys only (what the grammar promises);
 * open = 1: JSON Schema's own reading (undeclared keys are valid unless
 * additionalProperties is false), used to count the oneOf branches a value
 * matches: exactly one must. */
static int valid(const nd_jv *v, const nd_jv *s, const nd_jv *root, int depth, int open);
static int valid_some(const nd_jv *v, const nd_jv *list, const nd_jv *root, int depth);

static size_t cps(const char *s, size_t n) {
    size_t k = 0;
    for (size_t i = 0; i < n; i++) k += ((unsigned char)s[i] & 0xC0) != 0x80;
    return k;
}
static int is_int(double x) { return x == floor(x); }
static int digits(const char *s, int n) {
    for (int i = 0; i < n; i++) if (s[i] < '0' || s[i] > '9') return 0;
    return 1;
}
static int valid_date(const char *s, size_t n) {
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (n != 10 || s[4] != '-' || s[7] != '-' || !digits(s, 4) || !digits(s + 5, 2) || !digits(s + 8, 2)) return 0;
    int y = atoi(s), m = atoi(s + 5), d = atoi(s + 8);
    int leap = (y % 4 == 0 && y % 100) || y % 400 == 0;
    return m >= 1 && m <= 12 && d >= 1 && d <= (m == 2 && !leap ? 28 : mdays[m - 1]);
}
static int valid_time(const char *s, size_t n) {
    if (n < 9 || s[2] != ':' || s[5] != ':' || !digits(s, 2) || !digits(s + 3, 2) || !digits(s + 6, 2)) return 0;
    if (atoi(s) > 23 || atoi(s + 3) > 59 || atoi(s + 6) > 59) return 0;
    size_t i = 8;
    if (s[i] == '.') { i++; size_t st = i; while (i < n && s[i] >= '0' && s[i] <= '9') i++; if (i == st) return 0; }
    if (i < n && s[i] == 'Z') return i + 1 == n;
    return i + 6 == n && (s[i] == '+' || s[i] == '-') && s[i + 3] == ':' && digits(s + i + 1, 2) && digits(s + i + 4, 2);
}
static int valid_format(const char *f, const char *s, size_t n) {
    if (!strcmp(f, "date")) return valid_date(s, n);
    if (!strcmp(f, "time")) return valid_time(s, n);
    if (!strcmp(f, "date-time")) return n > 11 && s[10] == 'T' && valid_date(s, 10) && valid_time(s + 11, n - 11);
    if (!strcmp(f, "email")) { const char *at = memchr(s, '@', n); return at && at > s && memchr(at, '.', n - (size_t)(at - s)) && !memchr(at + 1, '@', n - (size_t)(at - s) - 1); }
    if (!strcmp(f, "uri")) return (n > 7 && !memcmp(s, "http://", 7)) || (n > 8 && !memcmp(s, "https://", 8));
    if (!strcmp(f, "uuid")) {
        if (n != 36) return 0;
        for (size_t i = 0; i < 36; i++)
            if ((i == 8 || i == 13 || i == 18 || i == 23) ? s[i] != '-' : !strchr("0123456789abcdef", s[i])) return 0;
        return 1;
    }
    return 0;
}
static int jeq(const nd_jv *a, const nd_jv *b) {
    if (a->type != b->type) return 0;
    if (a->type == ND_JNUMBER) return a->num == b->num;
    if (a->type == ND_JSTRING) return a->len == b->len && !memcmp(a->str, b->str, a->len);
    if (a->type == ND_JARRAY || a->type == ND_JOBJECT) {
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++) {
            const nd_jv *o = a->type == ND_JARRAY ? &b->kids[i] : nd_jv_get(b, a->kids[i].key);
            if (!o || !jeq(&a->kids[i], o)) return 0;
        }
    }
    return 1;
}
static int type_ok(const nd_jv *v, const char *t) {
    if (!strcmp(t, "string")) return v->type == ND_JSTRING;
    if (!strcmp(t, "number")) return v->type == ND_JNUMBER;
    if (!strcmp(t, "integer")) return v->type == ND_JNUMBER && is_int(v->num);
    if (!strcmp(t, "boolean")) return v->type == ND_JTRUE || v->type == ND_JFALSE;
    if (!strcmp(t, "null")) return v->type == ND_JNULL;
    if (!strcmp(t, "object")) return v->type == ND_JOBJECT;
    return v->type == ND_JARRAY;
}
static double num(const nd_jv *s, const char *k, double dflt) { const nd_jv *x = nd_jv_get(s, k); return x && x->type == ND_JNUMBER ? x->num : dflt; }

static int valid(const nd_jv *v, const nd_jv *s, const nd_jv *root, int depth, int open) {
    if (depth > 60) return 0;
    if (s->type == ND_JTRUE) return 1;
    const nd_jv *x;
    if ((x = nd_jv_get(s, "$ref"))) {
        const char *p = x->str + 1;
        const nd_jv *t = root;
        while (*p == '/') {
            char seg[128]; size_t n = 0;
            for (p++; *p && *p != '/'; p++) seg[n++] = *p;
            seg[n] = 0;
            t = nd_jv_get(t, seg);
            if (!t) return 0;
        }
        return valid(v, t, root, depth + 1, open);
    }
    if ((x = nd_jv_get(s, "anyOf"))) {
        for (size_t i = 0; i < x->n; i++) if (valid(v, &x->kids[i], root, depth + 1, open)) return 1;
        return 0;
    }
    if ((x = nd_jv_get(s, "oneOf"))) {
        int matches = 0;
        for (size_t i = 0; i < x->n; i++) matches += valid(v, &x->kids[i], root, depth + 1, 1);
        return matches == 1 && (open || valid_some(v, x, root, depth));
    }
    if ((x = nd_jv_get(s, "type"))) {
        int ok = 0;
        if (x->type == ND_JSTRING) ok = type_ok(v, x->str);
        for (size_t i = 0; x->type == ND_JARRAY && i < x->n; i++) ok |= type_ok(v, x->kids[i].str);
        if (!ok) return 0;
    }
    if ((x = nd_jv_get(s, "const")) && !jeq(v, x)) return 0;
    if ((x = nd_jv_get(s, "enum"))) {
        int ok = 0;
        for (size_t i = 0; i < x->n; i++) ok |= jeq(v, &x->kids[i]);
        if (!ok) return 0;
    }
    if (v->type == ND_JNUMBER) {
        if (v->num < num(s, "minimum", -INFINITY) || v->num > num(s, "maximum", INFINITY)) return 0;
        if (v->num <= num(s, "exclusiveMinimum", -INFINITY) || v->num >= num(s, "exclusiveMaximum", INFINITY)) return 0;
        if ((x = nd_jv_get(s, "multipleOf")) && !is_int(v->num / x->num)) return 0;
    }
    if (v->type == ND_JSTRING) {
        size_t n = cps(v->str, v->len);
        if (n < num(s, "minLength", 0) || n > num(s, "maxLength", INFINITY)) return 0;
        if ((x = nd_jv_get(s, "pattern")) && nd_regex_test(x->str, v->str, v->len, NULL) != 1) return 0;
        if ((x = nd_jv_get(s, "format")) && !valid_format(x->str, v->str, v->len)) return 0;
    }
    if (v->type == ND_JARRAY) {
        if (v->n < num(s, "minItems", 0) || v->n > num(s, "maxItems", INFINITY)) return 0;
        x = nd_jv_get(s, "items");
        for (size_t i = 0; i < v->n; i++) {
            if (x && !valid(&v->kids[i], x, root, depth + 1, open)) return 0;
            if (nd_jv_get(s, "uniqueItems") && nd_jv_get(s, "uniqueItems")->type == ND_JTRUE)
                for (size_t j = 0; j < i; j++) if (jeq(&v->kids[i], &v->kids[j])) return 0;
        }
    }
    if (v->type == ND_JOBJECT) {
        const nd_jv *props = nd_jv_get(s, "properties"), *ap = nd_jv_get(s, "additionalProperties");
        for (size_t i = 0; i < v->n; i++) {
            const nd_jv *ps = NULL;
            for (size_t k = 0; props && k < props->n; k++) /* keys may hold NUL: compare lengths */
                if (props->kids[k].klen == v->kids[i].klen && !memcmp(props->kids[k].key, v->kids[i].key, v->kids[i].klen)) ps = &props->kids[k];
            if (!ps && open && !(ap && ap->type == ND_JFALSE)) continue;
            if (!ps || !valid(&v->kids[i], ps, root, depth + 1, open)) return 0;
            for (size_t j = 0; j < i; j++) if (!strcmp(v->kids[i].key, v->kids[j].key)) return 0;
        }
        for (size_t i = 0; (x = nd_jv_get(s, "required")) && i < x->n; i++) {
            int has = 0;
            for (size_t k = 0; k < v->n; k++) has |= v->kids[k].klen == x->kids[i].len && !memcmp(v->kids[k].key, x->kids[i].str, x->kids[i].len);
            if (!has) return 0;
        }
    }
    return 1;
}

/* The strict check of a oneOf: the value is valid (declared keys only)
 * under some branch. */
static int valid_some(const nd_jv *v, const nd_jv *list, const nd_jv *root, int depth) {
    for (size_t i = 0; i < list->n; i++) if (valid(v, &list->kids[i], root, depth + 1, 0)) return 1;
    return 0;
}

/* Validates a produced call array against the tools. */
static int valid_calls(const char *text, size_t n, const char *tools) {
    nd_json *doc = nd_json_parse(text, n, 100, NULL), *td = nd_json_parse(tools, strlen(tools), 100, NULL);
    int ok = doc && td && nd_json_root(doc)->type == ND_JARRAY;
    for (size_t i = 0; ok && i < nd_json_root(doc)->n; i++) {
        const nd_jv *call = &nd_json_root(doc)->kids[i], *name = nd_jv_get(call, "name"), *args = nd_jv_get(call, "arguments");
        ok = call->type == ND_JOBJECT && call->n == 2 && name && args && name->type == ND_JSTRING;
        const nd_jv *tool = NULL;
        for (size_t t = 0; ok && t < nd_json_root(td)->n; t++) {
            const nd_jv *tn = nd_jv_get(&nd_json_root(td)->kids[t], "name");
            if (tn->len == name->len && !memcmp(tn->str, name->str, tn->len)) tool = &nd_json_root(td)->kids[t];
        }
        const nd_jv *params = tool ? nd_jv_get(tool, "parameters") : NULL;
        ok = ok && tool && (params ? valid(args, params, params, 0, 0) : args->type == ND_JOBJECT && args->n == 0);
    }
    nd_json_free(doc), nd_json_free(td);
    return ok;
}

/* ---- random walks ---- */
static uint64_t rng_state;
static uint32_t rnd(void) { rng_state = rng_state * 6364136223846793005ull + 1442695040888963407ull; return (uint32_t)(rng_state >> 33); }

static needle_tokenizer *tok;
static int32_t end_id;
static needle_vocab *vocab;

/* The completion from g's state: fed back it must complete the array into
 * valid calls; the state is then restored by re-feeding the prefix. */
static int completion_ok(needle_grammar *g, const char *tools, char *why) {
    size_t len;
    const char *t = nd_grammar_text(g, &len);
    char *prefix = malloc(len + 1);
    size_t plen = len;
    memcpy(prefix, t, len), prefix[len] = 0;
    size_t n = needle_grammar_completion(g, NULL, 0);
    int ok = n != SIZE_MAX;
    char *c = ok ? malloc(n + 1) : NULL;
    needle_error err;
    if (ok) ok = needle_grammar_completion(g, c, n + 1) == n && strlen(c) == n;
    if (ok && n) ok = nd_grammar_feed(g, c, n, &err) == NEEDLE_OK;
    if (ok) ok = nd_grammar_complete(g);
    t = nd_grammar_text(g, &len);
    if (ok) ok = valid_calls(t, len, tools);
    if (!ok) sprintf(why, "bad completion %.120s after %.200s", c ? c : "(none)", prefix);
    needle_grammar_reset(g);
    if (plen && nd_grammar_feed(g, prefix, plen, &err)) ok = 0;
    free(prefix), free(c);
    return ok;
}

static int32_t *trace; /* when set, walk appends the tokens it accepts */
static int ntrace;

/* Picks uniformly among allowed tokens, but leans towards closing bytes
 * every few steps so walks finish within the bound. Returns 1 when done. */
static int walk(needle_grammar *g, const char *tools, int steps, uint64_t seed, char *why) {
    uint32_t V = needle_tokenizer_size(tok);
    float *logits = malloc(V * sizeof *logits), *walked = malloc(V * sizeof *walked);
    int32_t *ids = malloc(V * sizeof *ids);
    rng_state = seed;
    needle_grammar_reset(g);
    int done = 0;
    for (int s = 0; s < steps && !done; s++) {
        if ((s + (int)seed) % 7 == 0 && !nd_grammar_complete(g) && !completion_ok(g, tools, why)) break;
        for (uint32_t i = 0; i < V; i++) logits[i] = 0;
        uint32_t n = needle_grammar_mask(g, logits), k = 0;
        for (uint32_t i = 0; i < V; i++) walked[i] = 0;
        if (nd_grammar_mask_walked(g, walked) != n || memcmp(walked, logits, V * sizeof *logits)) {
            size_t len; const char *t = nd_grammar_text(g, &len);
            sprintf(why, "the remembered mask differs from the walked one at step %d after %.*s", s,
                    (int)(len > 300 ? 300 : len), t);
            break;
        }
        for (uint32_t i = 0; i < V; i++) if (logits[i] == 0) ids[k++] = (int32_t)i;
        if (n == 0 || k != n) {
            size_t len; const char *t = nd_grammar_text(g, &len);
            sprintf(why, "dead end at step %d (n=%u k=%u) after %.*s", s, n, k, (int)(len > 300 ? 300 : len), t);
            break;
        }
        int32_t pick = ids[rnd() % k];
        if (s > steps / 2) /* prefer short, closing pieces late in the walk */
            for (uint32_t i = 0; i < k; i++) {
                size_t len; const char *t = nd_grammar_text(g, &len); (void)t;
                if (ids[i] == end_id) { pick = ids[i]; break; }
                if (ids[i] >= 5 && ids[i] < 261 && strchr("\"]}", ids[i] - 5) && rnd() % 2) { pick = ids[i]; break; }
            }
        needle_error err;
        if (needle_grammar_accept(g, pick, &err)) { sprintf(why, "accept failed: %s", err.message); break; }
        if (trace) trace[ntrace++] = pick;
        done = needle_grammar_done(g);
    }
    size_t len;
    const char *text = nd_grammar_text(g, &len);
    if (done && !valid_calls(text, len, tools)) { sprintf(why, "invalid output: %.*s", (int)(len > 300 ? 300 : len), text); done = 0; }
    else if (!done && !*why) sprintf(why, "not done: %.*s", (int)(len > 300 ? 300 : len), text);
    free(logits), free(walked), free(ids);
    return done;
}

static const char *const schemas[] = {
    "[{\"name\":\"set_light\",\"description\":\"d\",\"parameters\":{\"type\":\"object\",\"properties\":{\"level\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":10},\"color\":{\"type\":\"string\",\"enum\":[\"red\",\"green\",\"blue\"]}},\"required\":[\"level\"]}}]",
    "[{\"name\":\"a\",\"parameters\":{\"type\":\"object\",\"properties\":{\"x\":{\"type\":\"integer\",\"minimum\":-12,\"maximum\":-3}},\"required\":[\"x\"]}},{\"name\":\"b\",\"parameters\":{\"type\":\"object\",\"properties\":{\"y\":{\"type\":\"number\",\"exclusiveMinimum\":0.5,\"exclusiveMaximum\":3.1}},\"required\":[\"y\"]}}]",
    "[{\"name\":\"m\",\"parameters\":{\"type\":\"object\",\"properties\":{\"k\":{\"type\":\"integer\",\"multipleOf\":7,\"minimum\":-30,\"maximum\":100},\"f\":{\"type\":\"number\",\"multipleOf\":0.25,\"maximum\":2}},\"required\":[\"k\",\"f\"]}}]",
    "[{\"name\":\"s\",\"parameters\":{\"type\":\"object\",\"properties\":{\"t\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":5},\"p\":{\"type\":\"string\",\"pattern\":\"^[a-c]{2,4}(x|yz)?$\"},\"q\":{\"type\":\"string\",\"pattern\":\"\\\\d\"}},\"required\":[\"t\",\"p\",\"q\"]}}]",
    "[{\"name\":\"f\",\"parameters\":{\"type\":\"object\",\"properties\":{\"d\":{\"type\":\"string\",\"format\":\"date\"},\"t\":{\"type\":\"string\",\"format\":\"time\"},\"dt\":{\"type\":\"string\",\"format\":\"date-time\"},\"e\":{\"type\":\"string\",\"format\":\"email\"},\"u\":{\"type\":\"string\",\"format\":\"uri\"},\"id\":{\"type\":\"string\",\"format\":\"uuid\"}},\"required\":[\"d\",\"t\",\"dt\",\"e\",\"u\",\"id\"]}}]",
    "[{\"name\":\"arr\",\"parameters\":{\"type\":\"object\",\"properties\":{\"xs\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":1,\"maximum\":4},\"minItems\":2,\"maxItems\":6,\"uniqueItems\":true},\"cs\":{\"type\":\"array\",\"items\":{\"enum\":[\"a\",\"ab\",1,null]},\"uniqueItems\":true,\"minItems\":1},\"ss\":{\"type\":\"array\",\"items\":{\"type\":\"string\",\"maxLength\":2},\"uniqueItems\":true,\"maxItems\":3}},\"required\":[\"xs\",\"cs\"]}}]",
    "[{\"name\":\"ref\",\"parameters\":{\"type\":\"object\",\"$defs\":{\"Node\":{\"type\":\"object\",\"properties\":{\"v\":{\"type\":\"integer\",\"minimum\":0,\"maximum\":9},\"next\":{\"anyOf\":[{\"$ref\":\"#/$defs/Node\"},{\"type\":\"null\"}]}},\"required\":[\"v\"]}},\"properties\":{\"head\":{\"$ref\":\"#/$defs/Node\"},\"o\":{\"anyOf\":[{\"type\":\"string\",\"maxLength\":3},{\"type\":\"integer\"},{\"type\":\"object\",\"properties\":{\"z\":{\"type\":\"boolean\"}},\"required\":[\"z\"]}]}},\"required\":[\"head\"]}}]",
    "[{\"name\":\"misc\",\"parameters\":{\"type\":\"object\",\"properties\":{\"n\":{\"type\":[\"string\",\"null\"],\"maxLength\":4},\"c\":{\"const\":\"fixed\"},\"any\":{},\"nest\":{\"type\":\"object\",\"properties\":{\"deep\":{\"type\":\"array\",\"items\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"maxItems\":2},\"maxItems\":2}}},\"add\":{\"type\":\"object\",\"additionalProperties\":true}},\"required\":[\"c\"]}},{\"name\":\"noargs\"}]",
    "[{\"name\":\"p\",\"parameters\":{\"type\":\"object\",\"properties\":{\"u\":{\"type\":\"string\",\"pattern\":\"^[\\u00e0-\\u00ff]+$\",\"maxLength\":3},\"e\":{\"type\":\"string\",\"pattern\":\"^(\\\\ud83d\\\\ude00|[^a-z\\\\s]){1,2}$\"}},\"required\":[\"u\",\"e\"]}}]",
};

static void test_random_walks(void) {
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
        needle_error err;
        needle_grammar *g = needle_grammar_new_shared(vocab, schemas[i], strlen(schemas[i]), end_id, &err);
        CHECK(g, "schema %zu: %s", i, err.message);
        if (!g) continue;
        for (int w = 0; w < 40; w++) {
            char why[400] = "";
            int d = walk(g, schemas[i], 1500, 1000 * i + (uint64_t)w, why);
            CHECK(d, "schema %zu walk %d: %s", i, w, why);
            if (!d) break;
        }
        needle_grammar_free(g);
    }
}

/* Replays tokens from a reset grammar, masking before each: the masks
 * served from memory, or -1 when a token is refused. */
static long replay(needle_grammar *g, const int32_t *ids, int n) {
    uint32_t V = needle_tokenizer_size(tok);
    float *logits = malloc(V * sizeof *logits);
    uint64_t before, after, walked;
    nd_grammar_mask_counts(g, &before, &walked);
    needle_grammar_reset(g);
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        for (uint32_t k = 0; k < V; k++) logits[k] = 0;
        needle_grammar_mask(g, logits);
        needle_error err;
        ok = logits[ids[i]] == 0 && needle_grammar_accept(g, ids[i], &err) == NEEDLE_OK;
    }
    free(logits);
    nd_grammar_mask_counts(g, &after, &walked);
    return ok ? (long)(after - before) : -1;
}

/* The second time a grammar meets the same states (the same call, say, in
 * the next turn), every mask comes from memory; the walks check each
 * against the one walked. */
static void test_remembered_masks(void) {
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
        if (strstr(schemas[i], "uniqueItems")) continue; /* unique arrays read the text: never kept */
        needle_error err;
        needle_grammar *g = needle_grammar_new_shared(vocab, schemas[i], strlen(schemas[i]), end_id, &err);
        if (!g) { CHECK(0, "schema %zu: %s", i, err.message); continue; }
        int32_t ids[1500];
        trace = ids, ntrace = 0;
        char why[400] = "";
        int done = walk(g, schemas[i], 1500, 77 + i, why);
        trace = NULL;
        CHECK(done, "schema %zu: %s", i, why);
        long first = replay(g, ids, ntrace), second = replay(g, ids, ntrace);
        /* The last token is the end token, masked once the array is complete: never kept. */
        CHECK(first >= 0 && second == ntrace - 1, "schema %zu: %ld then %ld of %d masks remembered", i,
              first, second, ntrace - 1);
        needle_grammar_free(g);
    }
}

/* Feeds a whole text through the byte-level matcher: 1 accepted in full
 * (and complete when it ends with "]"), 0 rejected. */
static int accepts(const char *tools, const char *text) {
    needle_error err;
    needle_grammar *g = needle_grammar_new_shared(vocab, tools, strlen(tools), end_id, &err);
    if (!g) { printf("  compile failed: %s\n", err.message); return -1; }
    int ok = nd_grammar_feed(g, text, strlen(text), &err) == NEEDLE_OK;
    if (ok && text[strlen(text) - 1] == ']') ok = nd_grammar_complete(g);
    needle_grammar_free(g);
    return ok;
}

#define ONE(props, req) "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":" props ",\"required\":" req "}}]"
#define CALL(args) "[{\"name\":\"t\",\"arguments\":" args "}]"

/* The completion after prefix (checked like the walks) into out. */
static int complete_from(const char *tools, const char *prefix, char *out, size_t cap) {
    needle_error err;
    needle_grammar *g = needle_grammar_new_shared(vocab, tools, strlen(tools), end_id, &err);
    if (!g) { printf("  compile failed: %s\n", err.message); return 0; }
    int ok = !*prefix || nd_grammar_feed(g, prefix, strlen(prefix), &err) == NEEDLE_OK;
    char why[400] = "";
    size_t n = ok ? needle_grammar_completion(g, out, cap) : SIZE_MAX;
    ok = ok && n < cap && completion_ok(g, tools, why);
    if (!ok) printf("  %s: %s\n", prefix, why);
    needle_grammar_free(g);
    return ok;
}

#define EXPECT(tools, prefix, want) do { char got[256] = ""; \
    CHECK(complete_from(tools, prefix, got, sizeof got) && !strcmp(got, want), "after %s: got %s, want %s", prefix, got, want); } while (0)
#define ARGS "[{\"name\":\"t\",\"arguments\":"

static void test_completion(void) {
    const char *light = "[{\"name\":\"set_light\",\"parameters\":{\"type\":\"object\",\"properties\":{\"room\":{\"type\":\"string\"},"
                        "\"on\":{\"type\":\"boolean\"}},\"required\":[\"room\",\"on\"]}}]";
    EXPECT(light, "[{\"name\":\"set_light\",\"arg", "uments\":{\"on\":true,\"room\":\"\"}}]");
    EXPECT(light, "", "[]");
    EXPECT(light, "[{", "\"name\":\"set_light\",\"arguments\":{\"on\":true,\"room\":\"\"}}]");
    EXPECT(light, "[{\"name\":\"set_light\",\"arguments\":{\"room\":\"ki", "\",\"on\":true}}]");
    EXPECT(light, "[{\"name\":\"set_light\",\"arguments\":{\"on\":t", "rue,\"room\":\"\"}}]");
    EXPECT(light, "[{\"name\":\"set_light\",\"arguments\":{\"on\":true,\"room\":\"\"}}", "]");
    EXPECT(ONE("{\"v\":{\"type\":\"string\",\"minLength\":3}}", "[\"v\"]"), ARGS "{\"v\":", "\"aaa\"}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"string\",\"minLength\":3,\"maxLength\":4}}", "[\"v\"]"), ARGS "{\"v\":\"\\u00e", "0aa\"}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"string\",\"pattern\":\"^[0-9]{5}$\"}}", "[\"v\"]"), ARGS "{\"v\":\"1", "0000\"}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"string\",\"format\":\"date\"}}", "[\"v\"]"), ARGS "{", "\"v\":\"0000-01-01\"}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"integer\",\"minimum\":10,\"maximum\":12,\"exclusiveMinimum\":10}}", "[\"v\"]"), ARGS "{\"v\":", "11}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"integer\",\"multipleOf\":7,\"minimum\":8}}", "[\"v\"]"), ARGS "{\"v\":", "14}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"integer\",\"minimum\":-12,\"maximum\":-3}}", "[\"v\"]"), ARGS "{\"v\":-1", "0}}]"); /* nearest zero first */
    EXPECT(ONE("{\"v\":{\"type\":\"number\",\"exclusiveMinimum\":0.5}}", "[\"v\"]"), ARGS "{\"v\":0.", "6}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"number\",\"minimum\":100.25,\"maximum\":100.5}}", "[\"v\"]"), ARGS "{\"v\":", "100.3}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"array\",\"items\":{\"type\":\"integer\"},\"minItems\":2,\"uniqueItems\":true}}", "[\"v\"]"),
           ARGS "{\"v\":[", "0,1]}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":3,\"uniqueItems\":true}}", "[\"v\"]"),
           ARGS "{\"v\":[\"a\",", "\"\",\"b\"]}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"minItems\":2,\"uniqueItems\":true}}", "[\"v\"]"),
           ARGS "{\"v\":[\"\",\"", "a\"]}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"array\",\"items\":{\"enum\":[\"xy\",\"z\"]},\"minItems\":2,\"uniqueItems\":true}}", "[\"v\"]"),
           ARGS "{\"v\":[\"z\"", ",\"xy\"]}}]");
    EXPECT(ONE("{\"a\":{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"object\",\"properties\":{\"c\":{\"type\":\"null\"},"
               "\"d\":{\"type\":\"integer\"}},\"required\":[\"c\"]}},\"required\":[\"b\"]}}", "[\"a\"]"), ARGS "{", "\"a\":{\"b\":{\"c\":null}}}}]");
    EXPECT(ONE("{\"v\":{\"anyOf\":[{\"type\":\"string\",\"minLength\":5},{\"type\":\"integer\",\"minimum\":100}]}}", "[\"v\"]"), ARGS "{\"v\":", "100}}]");
    EXPECT(ONE("{\"v\":{\"anyOf\":[{\"type\":\"string\",\"minLength\":5},{\"type\":\"integer\",\"minimum\":100}]}}", "[\"v\"]"), ARGS "{\"v\":\"ab", "aaa\"}}]");
    EXPECT(ONE("{\"v\":{\"anyOf\":[{\"type\":\"integer\",\"minimum\":15},{\"type\":\"number\",\"minimum\":1.5}]}}", "[\"v\"]"), ARGS "{\"v\":1", "5}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"string\",\"pattern\":\"^\xf0\x9f\x98\x80+$\"}}", "[\"v\"]"), ARGS "{\"v\":\"\\ud83d", "\\ude00\"}}]");
    /* every schema of the walks completes from scratch and from "[{" */
    for (size_t i = 0; i < sizeof schemas / sizeof schemas[0]; i++) {
        char got[1024];
        CHECK(complete_from(schemas[i], "", got, sizeof got), "schema %zu from scratch", i);
        CHECK(complete_from(schemas[i], "[{", got, sizeof got), "schema %zu from [{", i);
    }
}

static void test_bounds(void) {
    const char *t = ONE("{\"v\":{\"type\":\"integer\",\"maximum\":10}}", "[\"v\"]");
    CHECK(accepts(t, CALL("{\"v\":10}")) == 1, "10 <= 10");
    CHECK(accepts(t, CALL("{\"v\":11}")) == 0, "11 > 10");
    CHECK(accepts(t, "[{\"name\":\"t\",\"arguments\":{\"v\":1") == 1, "prefix 1");
    CHECK(accepts(t, "[{\"name\":\"t\",\"arguments\":{\"v\":10") == 1, "prefix 10");
    CHECK(accepts(t, "[{\"name\":\"t\",\"arguments\":{\"v\":100") == 0, "prefix 100");
    CHECK(accepts(t, "[{\"name\":\"t\",\"arguments\":{\"v\":01") == 0, "leading zero");
    CHECK(accepts(t, CALL("{\"v\":-99999}")) == 1, "no minimum");
    CHECK(accepts(t, CALL("{\"v\":1.5}")) == 0, "integer has no fraction");
    const char *neg = ONE("{\"v\":{\"type\":\"integer\",\"minimum\":-20,\"exclusiveMaximum\":-5}}", "[\"v\"]");
    CHECK(accepts(neg, CALL("{\"v\":-5}")) == 0, "exclusive -5");
    CHECK(accepts(neg, CALL("{\"v\":-6}")) == 1, "-6");
    CHECK(accepts(neg, CALL("{\"v\":-21}")) == 0, "-21 < -20");
    CHECK(accepts(neg, "[{\"name\":\"t\",\"arguments\":{\"v\":-3") == 0, "-3x can't reach [-20,-6]");
    CHECK(accepts(neg, "[{\"name\":\"t\",\"arguments\":{\"v\":-1") == 1, "-1x can");
    CHECK(accepts(neg, "[{\"name\":\"t\",\"arguments\":{\"v\":5") == 0, "positive");
    const char *mul = ONE("{\"v\":{\"type\":\"integer\",\"multipleOf\":5,\"minimum\":12,\"maximum\":31}}", "[\"v\"]");
    CHECK(accepts(mul, CALL("{\"v\":15}")) == 1, "15");
    CHECK(accepts(mul, CALL("{\"v\":10}")) == 0, "10 < 12");
    CHECK(accepts(mul, CALL("{\"v\":16}")) == 0, "16 not a multiple");
    CHECK(accepts(mul, "[{\"name\":\"t\",\"arguments\":{\"v\":4") == 0, "4x: none in range");
    const char *fl = ONE("{\"v\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":1.5}}", "[\"v\"]");
    CHECK(accepts(fl, CALL("{\"v\":0}")) == 0, "exclusive 0");
    CHECK(accepts(fl, CALL("{\"v\":0.001}")) == 1, "0.001");
    CHECK(accepts(fl, CALL("{\"v\":1.5}")) == 1, "1.5");
    CHECK(accepts(fl, CALL("{\"v\":1.51}")) == 0, "1.51");
    CHECK(accepts(fl, "[{\"name\":\"t\",\"arguments\":{\"v\":2") == 0, "2x > 1.5");
}

static void test_strings(void) {
    const char *t = ONE("{\"s\":{\"type\":\"string\",\"minLength\":2,\"maxLength\":3}}", "[\"s\"]");
    CHECK(accepts(t, CALL("{\"s\":\"ab\"}")) == 1, "2 chars");
    CHECK(accepts(t, CALL("{\"s\":\"a\"}")) == 0, "too short");
    CHECK(accepts(t, CALL("{\"s\":\"abcd\"}")) == 0, "too long");
    CHECK(accepts(t, CALL("{\"s\":\"\\u00e9\\n\\\"\"}")) == 1, "escapes count as one code point each");
    CHECK(accepts(t, CALL("{\"s\":\"\\ud83d\\ude00x\"}")) == 1, "surrogate pair is one code point");
    CHECK(accepts(t, CALL("{\"s\":\"\xc3\xa9\xc3\xa9\"}")) == 1, "raw UTF-8");
    CHECK(accepts(t, "[{\"name\":\"t\",\"arguments\":{\"s\":\"\\ude00") == 0, "lone low surrogate");
    CHECK(accepts(t, "[{\"name\":\"t\",\"arguments\":{\"s\":\"\\x") == 0, "bad escape");
    CHECK(accepts(t, "[{\"name\":\"t\",\"arguments\":{\"s\":\"\x01") == 0, "raw control");
    CHECK(accepts(t, "[{\"name\":\"t\",\"arguments\":{\"s\":\"\xc0\x80") == 0, "overlong UTF-8");
    const char *p = ONE("{\"s\":{\"type\":\"string\",\"pattern\":\"^a(b|cd)*e$\"}}", "[\"s\"]");
    CHECK(accepts(p, CALL("{\"s\":\"abcde\"}")) == 1, "pattern match");
    CHECK(accepts(p, CALL("{\"s\":\"acbe\"}")) == 0, "pattern mismatch");
    CHECK(accepts(p, "[{\"name\":\"t\",\"arguments\":{\"s\":\"ac") == 1, "pattern prefix");
    CHECK(accepts(p, "[{\"name\":\"t\",\"arguments\":{\"s\":\"\\u0061") == 1, "escaped a matches");
    const char *f = ONE("{\"d\":{\"type\":\"string\",\"format\":\"date\"}}", "[\"d\"]");
    CHECK(accepts(f, CALL("{\"d\":\"2024-02-28\"}")) == 1, "date");
    CHECK(accepts(f, CALL("{\"d\":\"2024-02-30\"}")) == 0, "Feb 30");
    CHECK(accepts(f, CALL("{\"d\":\"2024-13-01\"}")) == 0, "month 13");
    const char *u = ONE("{\"d\":{\"type\":\"string\",\"format\":\"uuid\"}}", "[\"d\"]");
    CHECK(accepts(u, CALL("{\"d\":\"123e4567-e89b-12d3-a456-426614174000\"}")) == 1, "uuid");
    CHECK(accepts(u, CALL("{\"d\":\"123e4567-e89b-12d3-a456-42661417400\"}")) == 0, "short uuid");
    needle_error err;
    CHECK(nd_regex_test("[^\\d]{2}", "x9ab", 4, &err) == 1, "unanchored search");
    CHECK(nd_regex_test("^\\w+@\\w+\\.(com|org)$", "me@x.org", 8, &err) == 1, "alternation");
    CHECK(nd_regex_test("^a{2,3}$", "aaaa", 4, &err) == 0, "counted repeat");
    CHECK(nd_regex_test("(?=a)", "a", 1, &err) == -1 && err.code == NEEDLE_E_SCHEMA, "lookahead rejected");
}

/* d->any marks the states from which every text matches: there a mask
 * takes the free-string fast path (grammar_mask.c). */
static void test_pattern_any_states(void) {
    static const struct { const char *pattern, *text; int any; } cases[] = {
        {"", "", 1}, {"", "abc", 1},                        /* a free string: any from the start */
        {"^ab", "", 0}, {"^ab", "a", 0}, {"^ab", "ab", 1}, {"^ab", "abz", 1},
        {"b", "", 0},
        {"^a*$", "", 0}, {"^[0-9]{2}$", "12", 0},          /* accepting, but a class is dead */
        {"^.*$", "", 0},                                    /* '.' leaves out line terminators */
        {"^([^a]|a[^a])*$", "x", 0},                        /* every class lives, but 'a' leads to a dead one */
        {"^[\\s\\S]*$", "", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *why = NULL;
        nd_dfa *d = nd_regex_compile(cases[i].pattern, strlen(cases[i].pattern), &why);
        CHECK(d && nd_dfa_reach(d, 0, UINT32_MAX, &why) == 0, "%s: %s", cases[i].pattern, why ? why : "");
        if (!d) continue;
        int32_t st = 0;
        for (const char *c = cases[i].text; *c && st >= 0; c++) st = d->next[st * d->nclasses + nd_dfa_class(d, (uint8_t)*c)];
        CHECK(st >= 0 && d->any[st] == cases[i].any, "/%s/ after \"%s\": any %d", cases[i].pattern, cases[i].text,
              st >= 0 ? d->any[st] : -1);
        nd_dfa_free(d);
    }
}

/* An escaped surrogate pair in a pattern is one code point, as in
 * ECMAScript's u mode (what JSON Schema validators in JS use), in an atom
 * and in a class: the matcher works on decoded code points. */
static void test_pattern_surrogates(void) {
    const char *p = ONE("{\"s\":{\"type\":\"string\",\"pattern\":\"^\\\\ud83d\\\\ude00$\"}}", "[\"s\"]");
    CHECK(accepts(p, CALL("{\"s\":\"\xf0\x9f\x98\x80\"}")) == 1, "U+1F600 as raw UTF-8");
    CHECK(accepts(p, CALL("{\"s\":\"\\ud83d\\ude00\"}")) == 1, "U+1F600 as a JSON escape pair");
    CHECK(accepts(p, CALL("{\"s\":\"\xf0\x9f\x98\x81\"}")) == 0, "U+1F601");
    CHECK(accepts(p, CALL("{\"s\":\"\\ud83d\\ude01\"}")) == 0, "escaped U+1F601");
    CHECK(accepts(p, CALL("{\"s\":\"a\"}")) == 0, "other text");
    CHECK(accepts(p, CALL("{\"s\":\"\xf0\x9f\x98\x80\xf0\x9f\x98\x80\"}")) == 0, "two of them");
    EXPECT(p, ARGS "{\"s\":\"", "\xf0\x9f\x98\x80\"}}]");
    needle_error err;
    needle_grammar *g = needle_grammar_new_shared(vocab, p, strlen(p), end_id, &err);
    CHECK(g && nd_grammar_feed(g, ARGS "{\"s\":\"", strlen(ARGS) + 6, &err) == NEEDLE_OK, "prefix");
    if (g) { /* the mask offers the emoji, raw and escaped, and nothing else starts */
        uint32_t V = needle_tokenizer_size(tok);
        float *l = calloc(V, sizeof *l);
        needle_grammar_mask(g, l);
        CHECK(l[needle_tokenizer_piece_id(tok, "\xf0\x9f\x98\x80", 4)] == 0, "raw emoji piece allowed");
        CHECK(l[needle_tokenizer_piece_id(tok, "\\ud83d", 6)] == 0, "escaped high surrogate allowed");
        CHECK(l[needle_tokenizer_piece_id(tok, "a", 1)] == -INFINITY, "a refused");
        CHECK(l[needle_tokenizer_piece_id(tok, "\\u00", 4)] == -INFINITY, "BMP escape refused");
        free(l);
        needle_grammar_free(g);
    }
    const char *c = ONE("{\"s\":{\"type\":\"string\",\"pattern\":\"^[\\\\ud83d\\\\ude00-\\\\ud83d\\\\ude4fa]{2}$\"}}", "[\"s\"]");
    CHECK(accepts(c, CALL("{\"s\":\"\xf0\x9f\x98\x80\xf0\x9f\x99\x8f\"}")) == 1, "class range U+1F600-U+1F64F");
    CHECK(accepts(c, CALL("{\"s\":\"a\\ud83d\\ude4f\"}")) == 1, "class: a and escaped U+1F64F");
    CHECK(accepts(c, CALL("{\"s\":\"\xf0\x9f\x99\x90" "a\"}")) == 0, "U+1F650 outside the class");
    CHECK(accepts(c, CALL("{\"s\":\"ab\"}")) == 0, "b outside the class");
    CHECK(nd_regex_test("^\\ud83d\\ude00+$", "\xf0\x9f\x98\x80\xf0\x9f\x98\x80", 8, &err) == 1, "quantifier applies to the code point");
    CHECK(nd_regex_test("^[^\\ud83d\\ude00]$", "\xf0\x9f\x98\x80", 4, &err) == 0, "negated class");
    CHECK(nd_regex_test("^[^\\ud83d\\ude00]$", "\xf0\x9f\x98\x81", 4, &err) == 1, "negated class, other emoji");
    /* a lone surrogate never occurs in decoded text: refused, not a dead end */
    const char *lone = ONE("{\"s\":{\"type\":\"string\",\"pattern\":\"^\\\\ud83d$\"}}", "[\"s\"]");
    g = needle_grammar_new_shared(vocab, lone, strlen(lone), end_id, &err);
    CHECK(!g && err.code == NEEDLE_E_SCHEMA && strstr(err.message, "no string satisfies"), "lone surrogate: %s", err.message);
    needle_grammar_free(g);
    const char *opt = ONE("{\"s\":{\"type\":\"string\",\"pattern\":\"^x[\\\\ud800-\\\\udfff]?$\"}}", "[\"s\"]");
    EXPECT(opt, ARGS "{\"s\":\"", "x\"}}]");
}

static void test_objects_enums(void) {
    const char *t = ONE("{\"a\":{\"enum\":[\"x\",\"xy\",3,30]},\"b\":{\"type\":\"boolean\"}}", "[\"a\"]");
    CHECK(accepts(t, CALL("{\"b\":true,\"a\":\"xy\"}")) == 1, "any key order");
    CHECK(accepts(t, CALL("{\"a\":3}")) == 1, "enum number");
    CHECK(accepts(t, CALL("{\"a\":30}")) == 1, "enum number prefix");
    CHECK(accepts(t, CALL("{\"a\":300}")) == 0, "not in enum");
    CHECK(accepts(t, CALL("{\"b\":true}")) == 0, "required missing");
    CHECK(accepts(t, CALL("{\"a\":3,\"a\":3}")) == 0, "key twice");
    CHECK(accepts(t, CALL("{\"a\":3,\"c\":1}")) == 0, "undeclared key");
    CHECK(accepts(t, CALL("{\"a\": 3}")) == 0, "no whitespace");
    CHECK(accepts(t, "[]") == 1, "refusal");
    CHECK(accepts(t, "[{\"name\":\"u\"") == 0, "undeclared tool");
    const char *uq = ONE("{\"v\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"uniqueItems\":true}}", "[\"v\"]");
    CHECK(accepts(uq, CALL("{\"v\":[\"a\",\"b\"]}")) == 1, "unique");
    CHECK(accepts(uq, CALL("{\"v\":[\"a\",\"a\"]}")) == 0, "duplicate");
    CHECK(accepts(uq, CALL("{\"v\":[\"a\",\"\\u0061\"]}")) == 0, "duplicate after decoding");
    const char *bu = ONE("{\"v\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"uniqueItems\":true}}", "[\"v\"]");
    CHECK(accepts(bu, "[{\"name\":\"t\",\"arguments\":{\"v\":[true,false,") == 0, "no third unique boolean");
    CHECK(accepts(bu, "[{\"name\":\"t\",\"arguments\":{\"v\":[true,t") == 0, "used literal excluded");
}

/* ascii 0 (Needle 3): names, keys and enum values are literals with their
 * non-ASCII characters as themselves, as the tools block shows them; with
 * ascii 1 (Needle 2) as \\uXXXX escapes. A free string takes either. */
static int accepts_ascii(const char *tools, const char *text, int ascii) {
    needle_error err;
    needle_grammar *g = nd_grammar_new_calls(vocab, tools, strlen(tools), end_id, 0, ascii, &err);
    if (!g) { printf("  compile failed: %s\n", err.message); return -1; }
    int ok = nd_grammar_feed(g, text, strlen(text), &err) == NEEDLE_OK && nd_grammar_complete(g);
    needle_grammar_free(g);
    return ok;
}

static void test_non_ascii_literals(void) {
    const char *t = "[{\"name\":\"caf\u00e9\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                    "\"pi\u00e8ce\":{\"enum\":[\"s\u00e9jour\"]},\"note\":{\"type\":\"string\"}}}}]";
    const char *raw = "[{\"name\":\"caf\xc3\xa9\",\"arguments\":{\"pi\xc3\xa8" "ce\":\"s\xc3\xa9jour\",\"note\":\"\xc3\xa9\\u00e9\"}}]";
    const char *escaped = "[{\"name\":\"caf\\u00e9\",\"arguments\":{\"pi\\u00e8" "ce\":\"s\\u00e9jour\",\"note\":\"\xc3\xa9\\u00e9\"}}]";
    CHECK(accepts_ascii(t, raw, 0) == 1, "Needle 3: raw literals");
    CHECK(accepts_ascii(t, escaped, 0) == 0, "Needle 3: escaped literals refused");
    CHECK(accepts_ascii(t, escaped, 1) == 1, "Needle 2: escaped literals");
    CHECK(accepts_ascii(t, raw, 1) == 0, "Needle 2: raw literals refused");
}

static void test_schema_errors(void) {
    needle_error err;
    const char *bad = "[{\"name\":\"set_light\",\"parameters\":{\"type\":\"object\",\"properties\":{\"level\":{\"type\":\"integer\",\"foo\":1}}}}]";
    needle_grammar *g = needle_grammar_new_shared(vocab, bad, strlen(bad), end_id, &err);
    CHECK(!g && err.code == NEEDLE_E_SCHEMA, "unsupported keyword");
    CHECK(strstr(err.message, "tool \"set_light\": /properties/level/foo: unsupported keyword") != NULL, "message: %s", err.message);
    const char *cases[] = {
        "[{\"name\":\"a\",\"parameters\":{\"type\":\"string\",\"format\":\"ipv4\"}}]",
        "[{\"name\":\"a\",\"parameters\":{\"type\":\"string\",\"pattern\":\"(a\"}}]",
        "[{\"name\":\"a\",\"parameters\":{\"$ref\":\"#/$defs/missing\"}}]",
        "[{\"name\":\"a\",\"parameters\":{\"type\":\"integer\",\"minimum\":5,\"maximum\":4}}]",
        "[{\"name\":\"a\",\"parameters\":{\"type\":\"object\",\"required\":[\"x\"]}}]",
        "[{\"name\":\"a\"},{\"name\":\"a\"}]",
        "{\"name\":\"a\"}",
        "[{\"name\":\"a\",\"parameters\":{\"type\":\"array\",\"items\":{\"type\":\"boolean\"},\"uniqueItems\":true,\"minItems\":3}}]",
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        g = needle_grammar_new_shared(vocab, cases[i], strlen(cases[i]), end_id, &err);
        CHECK(!g && err.code == NEEDLE_E_SCHEMA, "case %zu compiled", i);
        needle_grammar_free(g);
    }
    /* a self-loop used to compile to nothing (no call, no error): now refused */
    const char *rec = "[{\"name\":\"r\",\"parameters\":{\"$defs\":{\"A\":{\"$ref\":\"#/$defs/A\"}},\"$ref\":\"#/$defs/A\"}}]";
    g = needle_grammar_new_shared(vocab, rec, strlen(rec), end_id, &err);
    CHECK(!g && err.code == NEEDLE_E_SCHEMA && strstr(err.message, "$ref cycle"), "self-loop: %s", err.message);
    needle_grammar_free(g);
}

static void test_end_token(void) {
    needle_error err;
    const char *t = ONE("{}", "[]");
    needle_grammar *g = needle_grammar_new_shared(vocab, t, strlen(t), end_id, &err);
    uint32_t V = needle_tokenizer_size(tok);
    float *l = malloc(V * sizeof *l);
    for (uint32_t i = 0; i < V; i++) l[i] = 0;
    needle_grammar_mask(g, l);
    CHECK(l[end_id] == -INFINITY, "end token not allowed before the array");
    int32_t think = needle_tokenizer_piece_id(tok, "<think>", 7);
    CHECK(think > 0 && l[think] == -INFINITY, "user marker never allowed");
    int32_t space = needle_tokenizer_piece_id(tok, "\u2581", 3);
    CHECK(space > 0 && l[space] == -INFINITY, "no space before the array");
    CHECK(l[0] == -INFINITY && l[3] == -INFINITY, "control/unknown never allowed");
    CHECK(needle_grammar_accept(g, needle_tokenizer_piece_id(tok, "[]", 2), &err) == NEEDLE_OK, "[]");
    for (uint32_t i = 0; i < V; i++) l[i] = 0;
    CHECK(needle_grammar_mask(g, l) == 1 && l[end_id] == 0, "only the end token after ]");
    CHECK(needle_grammar_accept(g, end_id, &err) == NEEDLE_OK && needle_grammar_done(g), "done");
    needle_grammar_free(g);
    /* Inside a string a user-defined word boundary is a space; a marker is still refused. */
    const char *s = ONE("{\"s\":{\"type\":\"string\"}}", "[\"s\"]");
    const char *prefix = ARGS "{\"s\":\"a";
    g = needle_grammar_new_shared(vocab, s, strlen(s), end_id, &err);
    CHECK(g && nd_grammar_feed(g, prefix, strlen(prefix), &err) == NEEDLE_OK, "string prefix");
    for (uint32_t i = 0; i < V; i++) l[i] = 0;
    needle_grammar_mask(g, l);
    CHECK(l[space] == 0 && l[think] == -INFINITY, "a space in a string, no marker");
    CHECK(needle_grammar_accept(g, space, &err) == NEEDLE_OK, "accept the space piece");
    CHECK(nd_grammar_feed(g, "b\"}}]", 5, &err) == NEEDLE_OK && nd_grammar_complete(g), "a b");
    free(l);
    needle_grammar_free(g);
}

static void test_compact(void) {
    needle_error err;
    char out[256];
    const char *in = " { \"b\" : [1.0, 1e-07,true ,null], \"a\":\"\xc3\xa9/\\u0001\\t\xf0\x9f\x98\x80\x7f\", \"b\":2 } ";
    size_t n = needle_json_compact(in, strlen(in), out, sizeof out, &err);
    const char *want = "{\"b\":2,\"a\":\"\\u00e9/\\u0001\\t\\ud83d\\ude00\\u007f\"}";
    CHECK(n == strlen(want) && !strcmp(out, want), "got %s", out);
    CHECK(needle_json_compact("[1,]", 4, out, sizeof out, &err) == 0 && strstr(err.message, "offset 3"), "%s", err.message);
    CHECK(needle_json_compact("[\"\xff\"]", 4, out, sizeof out, &err) == 0, "bad UTF-8");
    char deep[300];
    memset(deep, '[', 200), memset(deep + 200, ']', 100);
    CHECK(needle_json_compact(deep, 300, out, sizeof out, &err) == 0 && strstr(err.message, "deep"), "depth");
    CHECK(needle_json_compact("[1,[2]]", 7, out, 3, &err) == 7, "full length when cap is small");
}

/* Mask cost per step over a synthetic 8192-piece vocabulary (256 bytes plus
 * random pieces of 1-8 characters): median and p99 over random walks. */
static void test_mask_timing(void) {
    uint32_t n = 8192;
    needle_error err;
    needle_tokenizer *big = random_tokenizer(n, 7, &err);
    CHECK(big, "big tokenizer: %s", err.message);
    if (!big) return;
    needle_vocab *bv = needle_vocab_new(big, &err);
    const char *t = schemas[6];
    needle_grammar *g = needle_grammar_new_shared(bv, t, strlen(t), 4, &err);
    float *l = malloc(n * sizeof *l);
    int32_t *ids = malloc(n * sizeof *ids);
    double times[4000];
    int nt = 0;
    for (int w = 0; w < 20 && nt < 4000; w++) {
        needle_grammar_reset(g);
        for (int s = 0; s < 200 && nt < 4000 && !needle_grammar_done(g); s++) {
            for (uint32_t i = 0; i < n; i++) l[i] = 0;
            double t0 = nd_now_ms();
            uint32_t k = needle_grammar_mask(g, l);
            times[nt++] = nd_now_ms() - t0;
            if (!k) break;
            uint32_t m = 0;
            for (uint32_t i = 0; i < n; i++) if (l[i] == 0) ids[m++] = (int32_t)i;
            int32_t pick = ids[rnd() % m];
            for (uint32_t i = 0; s > 100 && i < m; i++) if (ids[i] == 4 || (ids[i] >= 5 && ids[i] < 261 && strchr("\"]}", ids[i] - 5))) { pick = ids[i]; break; }
            CHECK(needle_grammar_accept(g, pick, &err) == NEEDLE_OK, "%s", err.message);
        }
    }
    qsort(times, (size_t)nt, sizeof *times, cmp_double);
    printf("  mask, 8192 pieces: median %.4f ms, p99 %.4f ms over %d steps\n", times[nt / 2], times[nt * 99 / 100], nt);
    CHECK(nt > 100, "enough steps");
    free(l), free(ids);
    needle_grammar_free(g);
    needle_vocab_free(bv);
    needle_tokenizer_free(big);
}

/* ---- hostile-input regressions ---- */

/* Compiles tools and expects a schema error whose message holds every
 * given piece (NULL-terminated). */
static int refused(const char *tools, const char *const *pieces) {
    needle_error err;
    needle_grammar *g = needle_grammar_new_shared(vocab, tools, strlen(tools), end_id, &err);
    int ok = !g && err.code == NEEDLE_E_SCHEMA;
    for (const char *const *p = pieces; ok && *p; p++) ok = strstr(err.message, *p) != NULL;
    if (!ok) printf("  %s\n  -> %s\n", tools, g ? "compiled" : err.message);
    needle_grammar_free(g);
    return ok;
}
#define REFUSED(tools, ...) do { static const char *const pieces_[] = {__VA_ARGS__, NULL}; \
    CHECK(refused(tools, pieces_), "refused with the right message"); } while (0)

/* Bug 1: a string of minLength 10000 (and 8000) used to recurse once per
 * code point in the completion; the nesting limits are errors, not stack. */
static void test_long_strings(void) {
    static const uint32_t lens[] = {10000, 8000};
    for (int k = 0; k < 2; k++) {
        char tools[256], *got = malloc(lens[k] + 256);
        snprintf(tools, sizeof tools, ONE("{\"a\":{\"type\":\"string\",\"minLength\":%u}}", "[\"a\"]"), lens[k]);
        CHECK(complete_from(tools, "[{", got, lens[k] + 256), "minLength %u completes", lens[k]);
        size_t want = strlen("\"name\":\"t\",\"arguments\":{\"a\":\"") + lens[k] + strlen("\"}}]");
        CHECK(strlen(got) == want, "completion length %zu, want %zu", strlen(got), want);
        char *prefix = malloc(lens[k] + 64);
        int n = snprintf(prefix, lens[k] + 64, ARGS "{\"a\":\"");
        memset(prefix + n, 'x', lens[k] / 2), prefix[n + lens[k] / 2] = 0;
        CHECK(complete_from(tools, prefix, got, lens[k] + 256) && strlen(got) == lens[k] - lens[k] / 2 + 4, "half written");
        free(prefix), free(got);
    }
    /* a pattern DFA with several states, long minLength */
    EXPECT(ONE("{\"a\":{\"type\":\"string\",\"pattern\":\"^(ab)*$\",\"minLength\":4,\"maxLength\":5}}", "[\"a\"]"), ARGS "{", "\"a\":\"abab\"}}]");
    /* nesting: 40 levels of arrays compile and complete; 64 and 100 name the tool and the limit */
    for (int depth = 40; depth <= 100; depth += depth == 40 ? 24 : 36) {
        char *t = malloc(64 + (size_t)depth * 40);
        int w = sprintf(t, "[{\"name\":\"deep\",\"parameters\":{\"type\":\"object\",\"properties\":{\"v\":");
        for (int i = 0; i < depth; i++) w += sprintf(t + w, "{\"type\":\"array\",\"items\":");
        w += sprintf(t + w, "{\"type\":\"integer\"}");
        for (int i = 0; i < depth; i++) t[w++] = '}';
        sprintf(t + w, "}}}]");
        if (depth == 40) {
            char got[256];
            CHECK(complete_from(t, "[{", got, sizeof got), "40 nested arrays complete");
        } else
            REFUSED(t, "tool \"deep\": /properties/v/items/", "deeper than 64 levels");
        free(t);
    }
    /* JSON deeper than the parser's limit: the tool is still named */
    char *t = malloc(4096);
    int w = sprintf(t, "[{\"name\":\"ok\"},{\"parameters\":{\"type\":\"object\",\"properties\":{\"v\":");
    for (int i = 0; i < 150; i++) t[w++] = '[';
    for (int i = 0; i < 150; i++) t[w++] = ']';
    sprintf(t + w, "}},\"name\":\"too\\u0000deep\"}]");
    REFUSED(t, "tool \"too\\u0000deep\": its JSON nests deeper than 130 levels");
    free(t);
    /* regex.c: an empty class (and its complement) has no ranges at all */
    needle_error err;
    CHECK(nd_regex_test("^[]$", "a", 1, &err) == 0, "[] matches nothing");
    CHECK(nd_regex_test("^[^]$", "a", 1, &err) == 1, "[^] matches anything");
    CHECK(nd_regex_test("^[^]{2}$", "ab", 2, &err) == 1, "[^]{2}");
    /* a class with many ranges is complemented on the heap */
    char *pat = malloc(4 * 3000 + 8);
    w = sprintf(pat, "^[^");
    for (int i = 0; i < 3000; i++) w += sprintf(pat + w, "%c", 'A' + i % 26);
    sprintf(pat + w, "]$");
    CHECK(nd_regex_test(pat, "a", 1, &err) == 1 && nd_regex_test(pat, "B", 1, &err) == 0, "big negated class");
    free(pat);
}

/* Bug 2: oneOf means exactly one branch: overlapping branches are refused,
 * disjoint ones keep working, and walks check "exactly one". */
static void test_oneof(void) {
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"type\":\"integer\"},{\"type\":\"number\"}]}}", "[\"v\"]"),
            "tool \"t\": /properties/v/oneOf: branches 0 and 1 overlap (both accept integers); oneOf needs disjoint branches");
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"const\":1},{\"const\":1}]}}", "[\"v\"]"), "branches 0 and 1 overlap (both accept 1)");
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"enum\":[1,\"x\"]},{\"type\":\"null\"},{\"enum\":[2,\"x\"]}]}}", "[\"v\"]"),
            "branches 0 and 2 overlap (both accept \\\"x\\\")");
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"type\":\"integer\",\"maximum\":5},{\"type\":\"integer\",\"minimum\":5}]}}", "[\"v\"]"), "both accept integers");
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"type\":\"string\",\"pattern\":\"^a\"},{\"type\":\"string\",\"pattern\":\"b$\"}]}}", "[\"v\"]"), "both accept strings");
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"type\":\"string\",\"format\":\"date\"},{\"type\":\"string\",\"format\":\"email\"}]}}", "[\"v\"]"),
            "cannot prove that no string matches both (format)");
    /* a format's language differs between validators: only another type is disjoint from it */
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"type\":\"string\",\"pattern\":\"^a\"},{\"type\":\"string\",\"format\":\"date\"}]}}", "[\"v\"]"),
            "branches 0 and 1 overlap (cannot prove");
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"type\":\"string\"},{\"const\":\"x\"}]}}", "[\"v\"]"), "both may accept \\\"x\\\"");
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"type\":\"number\",\"minimum\":0},{\"const\":2.5}]}}", "[\"v\"]"), "both may accept 2.5");
    /* open objects: {"a":1} is valid under a branch that only declares b */
    REFUSED(ONE("{\"v\":{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"integer\"}},\"required\":[\"a\"]},"
                "{\"type\":\"object\",\"properties\":{\"b\":{\"type\":\"integer\"}}}]}}", "[\"v\"]"), "both accept objects");
    /* disjoint: types, literals, ranges, lengths, patterns, required consts, required keys */
    const char *ok = "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":{"
        "\"a\":{\"oneOf\":[{\"type\":\"string\"},{\"type\":\"integer\"},{\"type\":\"null\"}]},"
        "\"b\":{\"oneOf\":[{\"const\":\"x\"},{\"const\":\"y\"},{\"enum\":[1,2]}]},"
        "\"c\":{\"oneOf\":[{\"type\":\"number\",\"maximum\":0},{\"type\":\"number\",\"exclusiveMinimum\":0,\"maximum\":9},{\"type\":\"integer\",\"minimum\":10}]},"
        "\"d\":{\"oneOf\":[{\"type\":\"string\",\"maxLength\":2},{\"type\":\"string\",\"minLength\":3,\"pattern\":\"^[a-c]+$\"}]},"
        "\"e\":{\"oneOf\":[{\"type\":\"string\",\"pattern\":\"^a\"},{\"type\":\"string\",\"pattern\":\"^b\"},{\"type\":\"integer\"}]},"
        "\"f\":{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"circle\"},\"r\":{\"type\":\"number\"}},\"required\":[\"kind\",\"r\"]},"
        "{\"type\":\"object\",\"properties\":{\"kind\":{\"const\":\"square\"},\"side\":{\"type\":\"number\"}},\"required\":[\"kind\",\"side\"]}]},"
        "\"g\":{\"oneOf\":[{\"type\":\"object\",\"properties\":{\"r\":{\"type\":\"number\"}},\"required\":[\"r\"]},"
        "{\"type\":\"object\",\"properties\":{\"w\":{\"type\":\"number\"},\"h\":{\"type\":\"number\"}},\"required\":[\"w\",\"h\"]}]},"
        "\"h\":{\"oneOf\":[{\"type\":\"integer\",\"multipleOf\":2,\"maximum\":-1},{\"const\":3}]}"
        "},\"required\":[\"a\",\"b\",\"c\",\"d\",\"e\",\"f\",\"g\",\"h\"]}}]";
    needle_error err;
    needle_grammar *g = needle_grammar_new_shared(vocab, ok, strlen(ok), end_id, &err);
    CHECK(g, "disjoint oneOf: %s", err.message);
    if (!g) return;
    CHECK(accepts(ok, "[{\"name\":\"t\",\"arguments\":{\"a\":1,\"b\":2,\"c\":0.5,\"d\":\"abc\",\"e\":\"b\","
                      "\"f\":{\"kind\":\"square\",\"side\":1},\"g\":{\"w\":1,\"h\":2},\"h\":-2}}]") == 1, "a valid call");
    CHECK(accepts(ok, ARGS "{\"c\":10.5") == 0, "10.5 is in no branch of c");
    CHECK(accepts(ok, ARGS "{\"d\":\"abd") == 0, "abd is in no branch of d");
    for (int w = 0; w < 30; w++) {
        char why[400] = "";
        int d = walk(g, ok, 1500, 777 + (uint64_t)w, why);
        CHECK(d, "oneOf walk %d: %s", w, why);
        if (!d) break;
    }
    needle_grammar_free(g);
}

/* Bug 3: satisfiable bounds of any size work (a value is written and
 * accepted, the completion finds one); numbers beyond 37 digits are refused
 * naming the limit; big integers compare exactly. */
static void test_wide_numbers(void) {
    EXPECT(ONE("{\"v\":{\"type\":\"number\",\"minimum\":1e12,\"maximum\":1e13}}", "[\"v\"]"), ARGS "{", "\"v\":1000000000000}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"number\",\"minimum\":1e-7,\"maximum\":2e-7}}", "[\"v\"]"), ARGS "{", "\"v\":0.0000001}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"number\",\"minimum\":1e17,\"maximum\":1e18}}", "[\"v\"]"), ARGS "{", "\"v\":100000000000000000}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"integer\",\"minimum\":1e18,\"maximum\":1e19}}", "[\"v\"]"), ARGS "{", "\"v\":1000000000000000000}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"number\",\"minimum\":1e-15,\"maximum\":2e-15}}", "[\"v\"]"), ARGS "{", "\"v\":0.000000000000001}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"number\",\"exclusiveMinimum\":1e-15,\"exclusiveMaximum\":2e-15}}", "[\"v\"]"), ARGS "{", "\"v\":0.0000000000000011}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"number\",\"minimum\":-1e30,\"maximum\":-1e29}}", "[\"v\"]"), ARGS "{", "\"v\":-100000000000000000000000000000}}]");
    const char *big = ONE("{\"v\":{\"type\":\"integer\",\"minimum\":1e18,\"maximum\":1e19}}", "[\"v\"]");
    CHECK(accepts(big, CALL("{\"v\":10000000000000000000}")) == 1, "1e19 itself");
    CHECK(accepts(big, CALL("{\"v\":10000000000000000001}")) == 0, "1e19 + 1");
    CHECK(accepts(big, CALL("{\"v\":999999999999999999}")) == 0, "1e18 - 1");
    CHECK(accepts(big, CALL("{\"v\":1234567890123456789}")) == 1, "19 digits, exactly");
    const char *ex = ONE("{\"v\":{\"type\":\"integer\",\"minimum\":9007199254740993,\"maximum\":9007199254740995}}", "[\"v\"]");
    CHECK(accepts(ex, CALL("{\"v\":9007199254740994}")) == 1, "2^53 + 2");
    CHECK(accepts(ex, CALL("{\"v\":9007199254740992}")) == 0, "2^53 is below 2^53 + 1, exactly");
    CHECK(accepts(ex, CALL("{\"v\":9007199254740996}")) == 0, "2^53 + 4");
    /* exclusive beyond 2^53: JS reads the bound as 2^53, so 2^53 itself fails there */
    const char *xm = ONE("{\"v\":{\"type\":\"integer\",\"exclusiveMaximum\":9007199254740993}}", "[\"v\"]");
    CHECK(accepts(xm, CALL("{\"v\":9007199254740991}")) == 1, "2^53 - 1");
    CHECK(accepts(xm, CALL("{\"v\":9007199254740992}")) == 0, "2^53 equals the bound in doubles");
    /* uniqueItems beyond 2^53: 9007199254740999 and 9007199254741000 are one double (one JSON value
     * for JS validators), so [2^53 - 2, 2^53 + 8] holds 7 distinct values, not 11 */
    const char *uq = ONE("{\"v\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":9007199254740990,"
                         "\"maximum\":9007199254741000},\"uniqueItems\":true,\"minItems\":7}}", "[\"v\"]");
    CHECK(accepts(uq, ARGS "{\"v\":[9007199254741000,9007199254740999") == 0, "a repeat in doubles is refused while typing");
    CHECK(accepts(uq, ARGS "{\"v\":[9007199254741000,9007199254740998,9007199254740997,9007199254740994,9007199254740992,"
                      "9007199254740991,9007199254740990,") == 0, "no eighth distinct value");
    char got[512];
    CHECK(complete_from(uq, ARGS "{\"v\":[9007199254740993,", got, sizeof got), "seven distinct values complete");
    REFUSED(ONE("{\"v\":{\"type\":\"array\",\"items\":{\"type\":\"integer\",\"minimum\":9007199254740990,"
                "\"maximum\":9007199254741000},\"uniqueItems\":true,\"minItems\":8}}", "[\"v\"]"), "minItems exceeds the number of distinct values");
    /* multipleOf as validators compute it: 0.3 / 0.1 is 2.9999999999999996 */
    const char *m = ONE("{\"v\":{\"type\":\"number\",\"multipleOf\":0.1,\"minimum\":0.25,\"maximum\":0.35}}", "[\"v\"]");
    REFUSED(m, "no number satisfies the bounds and multipleOf");
    const char *m2 = ONE("{\"v\":{\"type\":\"number\",\"multipleOf\":0.1,\"minimum\":0.25,\"maximum\":0.45}}", "[\"v\"]");
    CHECK(accepts(m2, ARGS "{\"v\":0.3") == 0, "0.3 is no multiple of 0.1 for a validator, and no prefix dead-ends");
    CHECK(accepts(m2, CALL("{\"v\":0.4}")) == 1, "0.4 / 0.1 is 4");
    EXPECT(m2, ARGS "{", "\"v\":0.4}}]");
    EXPECT(ONE("{\"v\":{\"type\":\"integer\",\"multipleOf\":0.5,\"minimum\":3}}", "[\"v\"]"), ARGS "{", "\"v\":3}}]");
    /* what cannot be written is refused, naming the pointer and the limit */
    REFUSED(ONE("{\"v\":{\"type\":\"number\",\"minimum\":1e40}}", "[\"v\"]"), "tool \"t\": /properties/v/minimum: 1e40 is beyond", "37 digits");
    REFUSED(ONE("{\"v\":{\"type\":\"integer\",\"maximum\":-1e38}}", "[\"v\"]"), "/properties/v/maximum: -1e38 is beyond", "37 digits");
    REFUSED(ONE("{\"v\":{\"type\":\"number\",\"exclusiveMinimum\":0,\"exclusiveMaximum\":1e-40}}", "[\"v\"]"),
            "/properties/v: no number satisfies the bounds", "37 digits");
    /* large but loose bounds are no restriction */
    EXPECT(ONE("{\"v\":{\"type\":\"integer\",\"minimum\":-1e300,\"maximum\":1e300}}", "[\"v\"]"), ARGS "{", "\"v\":0}}]");
    const char *walks = "[{\"name\":\"n\",\"parameters\":{\"type\":\"object\",\"properties\":{"
        "\"a\":{\"type\":\"integer\",\"minimum\":1e18,\"maximum\":1e19},\"b\":{\"type\":\"number\",\"minimum\":1e-7,\"maximum\":2e-7},"
        "\"c\":{\"type\":\"number\",\"exclusiveMinimum\":1e12,\"maximum\":1e13},\"d\":{\"type\":\"number\",\"multipleOf\":0.1}},"
        "\"required\":[\"a\",\"b\",\"c\",\"d\"]}}]";
    needle_error err;
    needle_grammar *g = needle_grammar_new_shared(vocab, walks, strlen(walks), end_id, &err);
    CHECK(g, "%s", err.message);
    for (int w = 0; g && w < 30; w++) {
        char why[400] = "";
        int d = walk(g, walks, 1500, 4242 + (uint64_t)w, why);
        CHECK(d, "number walk %d: %s", w, why);
        if (!d) break;
    }
    needle_grammar_free(g);
}

/* Bug 4: every schema is decided at compile time. */
static void test_unsatisfiable(void) {
    REFUSED("[{\"name\":\"t\",\"parameters\":{\"$ref\":\"#\"}}]", "tool \"t\": /$ref: $ref cycle with no base case (# -> #)");
    REFUSED("[{\"name\":\"t\",\"parameters\":{\"$ref\":\"#/$defs/A\",\"$defs\":{\"A\":{\"$ref\":\"#/$defs/B\"},\"B\":{\"$ref\":\"#/$defs/A\"}}}}]",
            "$ref cycle with no base case (#/$defs/A -> #/$defs/B -> #/$defs/A)");
    REFUSED("[{\"name\":\"t\",\"parameters\":{\"$defs\":{\"A\":{\"$ref\":\"#/$defs/A\"}},\"$ref\":\"#/$defs/A\"}}]", "$ref cycle with no base case");
    const char *req = "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/n\"}},"
                      "\"required\":[\"next\"]}},\"properties\":{\"head\":{\"$ref\":\"#/$defs/n\"}},\"required\":[\"head\"]}}]";
    REFUSED(req, "tool \"t\": /$defs/n/properties/next: required recursion never ends");
    /* a cycle through anyOf with a base case is fine, and optional unwritable parts are left out */
    const char *base = "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":{\"p\":{\"anyOf\":[{\"$ref\":\"#/properties/p\"},{\"type\":\"null\"}]},"
                       "\"q\":{\"$ref\":\"#/$defs/n\"},\"r\":{\"type\":\"string\"}},\"required\":[\"p\"],"
                       "\"$defs\":{\"n\":{\"type\":\"object\",\"properties\":{\"next\":{\"$ref\":\"#/$defs/n\"}},\"required\":[\"next\"]}}}}]";
    EXPECT(base, ARGS "{", "\"p\":null}}]");
    CHECK(accepts(base, ARGS "{\"q\"") == 0, "an optional property with no value is never offered");
    CHECK(accepts(base, ARGS "{\"p\":null,\"r\":\"\"") == 1, "the others are");
    CHECK(accepts(base, ARGS "{\"p\":null,\"r\":\"\",") == 0, "no ',' when only unwritable keys are left");
    /* required nesting past the matcher's depth bound */
    char *t = malloc(4096);
    int w = sprintf(t, "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":{\"v\":");
    for (int i = 0; i < 47; i++) w += sprintf(t + w, "{\"type\":\"array\",\"minItems\":1,\"items\":");
    w += sprintf(t + w, "{\"type\":\"integer\"}");
    for (int i = 0; i < 47; i++) t[w++] = '}';
    sprintf(t + w, "},\"required\":[\"v\"]}}]");
    REFUSED(t, "/properties/v/items/items/", "required nesting goes deeper than the 48-level limit");
    free(t);
    /* optional recursion stays: schema 6 of the walks, and a tree */
    EXPECT(schemas[6], "[{\"name\":\"ref\",\"arguments\":{\"head\":{\"v\":1,\"next\":{\"v\":2,\"next\":", "null}}}}]");
    /* the output limit */
    REFUSED(ONE("{\"v\":{\"type\":\"array\",\"minItems\":900000,\"items\":{\"type\":\"string\",\"minLength\":3}}}", "[\"v\"]"),
            "/properties/v: its shortest value exceeds the 1048576-byte output limit");
}

/* Bug 5: errors name the tool, the pointer and what is wrong; keys are
 * compared with their full length; parameters are object schemas. */
static void test_error_names(void) {
    const char *nul = ONE("{\"a\\u0000b\":{\"type\":\"string\"},\"a\\u0000c\":{\"type\":\"integer\"}}", "[\"a\\u0000b\",\"a\\u0000c\"]");
    CHECK(accepts(nul, CALL("{\"a\\u0000c\":1,\"a\\u0000b\":\"x\"}")) == 1, "keys with NUL are distinct keys");
    REFUSED(ONE("{\"a\\u0000b\":{\"type\":\"string\"},\"a\\u0000b\":{\"type\":\"integer\"}}", "[]"),
            "tool \"t\": /properties: duplicate property \"a\\u0000b\"");
    REFUSED(ONE("{\"x\\u0001y\":{\"type\":\"string\",\"format\":\"date\\u0000x\"}}", "[]"),
            "tool \"t\": /properties/x\\u0001y/format: unsupported format \"date\\u0000x\"");
    REFUSED(ONE("{\"a\":{\"type\":\"string\"}}", "[\"a\\u0000\"]"), "required property \"a\\u0000\" is not declared");
    const char *two = "[{\"name\":\"a\\u0000b\"},{\"name\":\"a\\u0000c\"}]";
    needle_error err;
    needle_grammar *g = needle_grammar_new_shared(vocab, two, strlen(two), end_id, &err);
    CHECK(g, "tool names with NUL are distinct: %s", err.message);
    needle_grammar_free(g);
    REFUSED("[{\"name\":\"a\\u0000b\"},{\"name\":\"a\\u0000b\"}]", "tool \"a\\u0000b\": declared twice");
    /* names of at most 64 bytes, as OpenAI's function names */
    char named[160];
    snprintf(named, sizeof named, "[{\"name\":\"%.64s\"}]", "n123456789012345678901234567890123456789012345678901234567890123456789");
    g = needle_grammar_new_shared(vocab, named, strlen(named), end_id, &err);
    CHECK(g, "a 64-byte name: %s", err.message);
    needle_grammar_free(g);
    snprintf(named, sizeof named, "[{\"name\":\"%.65s\"}]", "n123456789012345678901234567890123456789012345678901234567890123456789");
    REFUSED(named, "tools[0]: \"name\" is 65 bytes, over the limit of 64");
    REFUSED("[{\"name\":\"s\",\"parameters\":{\"type\":\"string\"}}]", "tool \"s\": /: parameters must be an object schema", "strings");
    REFUSED("[{\"name\":\"s\",\"parameters\":true}]", "tool \"s\": /: parameters must be an object schema", "any value");
    REFUSED("[{\"name\":\"s\",\"parameters\":{}}]", "tool \"s\": /: parameters must be an object schema", "any value");
    REFUSED("[{\"name\":\"s\",\"parameters\":{\"type\":[\"object\",\"null\"]}}]", "parameters must be an object schema");
    REFUSED("[{\"name\":\"s\",\"parameters\":{\"anyOf\":[{\"type\":\"object\"},{\"type\":\"integer\"}]}}]", "also accepts numbers");
    const char *objs = "[{\"name\":\"s\",\"parameters\":{\"anyOf\":[{\"type\":\"object\",\"properties\":{\"a\":{\"const\":1}},\"required\":[\"a\"]},"
                       "{\"properties\":{\"b\":{\"const\":2}},\"required\":[\"b\"]}]}}]";
    g = needle_grammar_new_shared(vocab, objs, strlen(objs), end_id, &err);
    CHECK(g, "objects only: %s", err.message);
    needle_grammar_free(g);
    /* an error inside a $ref target names the target's pointer */
    REFUSED("[{\"name\":\"r\",\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"$ref\":\"#/$defs/X\"}},"
            "\"$defs\":{\"X\":{\"type\":\"integer\",\"minimum\":3,\"maximum\":2}}}}]", "tool \"r\": /$defs/X: no integer satisfies the bounds");
}

int main(void) {
    tok = test_tokenizer(&end_id);
    needle_error err;
    vocab = tok ? needle_vocab_new(tok, &err) : NULL;
    if (!vocab) { printf("no vocab\n"); return 1; }
    RUN(test_compact);
    RUN(test_bounds);
    RUN(test_strings);
    RUN(test_pattern_surrogates);
    RUN(test_pattern_any_states);
    RUN(test_objects_enums);
    RUN(test_non_ascii_literals);
    RUN(test_schema_errors);
    RUN(test_end_token);
    RUN(test_completion);
    RUN(test_random_walks);
    RUN(test_remembered_masks);
    RUN(test_long_strings);
    RUN(test_oneof);
    RUN(test_wide_numbers);
    RUN(test_unsatisfiable);
    RUN(test_error_names);
    RUN(test_mask_timing);
    needle_vocab_free(vocab);
    needle_tokenizer_free(tok);
    return check_report();
}
