/* json.c: JSON parsing into an arena-backed tree, and Python-compatible
 * compact rendering (json.dumps(x, separators=(",", ":")), ensure_ascii).
 *
 * Input is hostile: recursion is bounded by the caller's depth, every read is
 * bounds-checked, sizes are overflow-checked, UTF-8 is validated. The tree
 * lives in a chunked arena so pointers stay stable while it grows. */
#include "format/json.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h" /* nd_fail */

/* ---- arena: a list of blocks, never moved ------------------------------- */
typedef struct nd_block {
    struct nd_block *next;
    size_t used, cap;
    max_align_t data[];
} nd_block;

struct nd_json {
    nd_block *blocks;
    nd_jv root;
};

static void *arena_alloc(nd_json *doc, size_t size) {
    size = (size + 15u) & ~(size_t)15u;
    if (size == 0 || size > SIZE_MAX / 2) return NULL;
    nd_block *b = doc->blocks;
    if (!b || b->cap - b->used < size) {
        size_t cap = size > 65536 ? size : 65536;
        b = malloc(sizeof(nd_block) + cap);
        if (!b) return NULL;
        b->next = doc->blocks, b->used = 0, b->cap = cap;
        doc->blocks = b;
    }
    void *p = (char *)b->data + b->used;
    b->used += size;
    return p;
}

void nd_json_free(nd_json *doc) {
    if (!doc) return;
    for (nd_block *b = doc->blocks, *next; b; b = next) next = b->next, free(b);
    free(doc);
}

const nd_jv *nd_json_root(const nd_json *doc) { return &doc->root; }

/* ---- parser ---------------------------------------------------------- */
typedef struct {
    const char *s;
    size_t n, i;
    int depth;
    nd_json *doc;
    needle_error *err;
    char *buf; /* scratch for decoding strings */
    size_t bcap;
} parser;

static int perr(parser *p, const char *what) {
    return nd_fail(p->err, NEEDLE_E_ARGUMENT, "json: offset %zu: %s", p->i, what);
}

static void skip_ws(parser *p) {
    while (p->i < p->n && (p->s[p->i] == ' ' || p->s[p->i] == '\t' || p->s[p->i] == '\n' ||
                           p->s[p->i] == '\r'))
        p->i++;
}

static int hexval(int c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

/* Length of the valid UTF-8 sequence at s[0..n), or 0 when ill-formed. */
static size_t utf8_len(const unsigned char *s, size_t n) {
    unsigned c = s[0];
    if (c < 0x80) return 1;
    size_t k = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 ? 2 : 0;
    if (k == 0 || c > 0xF4 || n < k) return 0;
    unsigned lo = 0x80, hi = 0xBF;
    if (c == 0xE0) lo = 0xA0;
    if (c == 0xED) hi = 0x9F;
    if (c == 0xF0) lo = 0x90;
    if (c == 0xF4) hi = 0x8F;
    if (s[1] < lo || s[1] > hi) return 0;
    for (size_t j = 2; j < k; j++)
        if ((s[j] & 0xC0) != 0x80) return 0;
    return k;
}

static size_t put_utf8(char *o, uint32_t cp) { /* generalised: surrogates allowed */
    if (cp < 0x80) { o[0] = (char)cp; return 1; }
    if (cp < 0x800) { o[0] = (char)(0xC0 | cp >> 6); o[1] = (char)(0x80 | (cp & 63)); return 2; }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12), o[1] = (char)(0x80 | (cp >> 6 & 63));
        o[2] = (char)(0x80 | (cp & 63));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18), o[1] = (char)(0x80 | (cp >> 12 & 63));
    o[2] = (char)(0x80 | (cp >> 6 & 63)), o[3] = (char)(0x80 | (cp & 63));
    return 4;
}

static int read_hex4(parser *p, uint32_t *v) {
    if (p->n - p->i < 4) return perr(p, "truncated \\u escape");
    *v = 0;
    for (int k = 0; k < 4; k++) {
        int h = hexval((unsigned char)p->s[p->i + k]);
        if (h < 0) return perr(p, "bad hex digit in \\u escape");
        *v = *v << 4 | (uint32_t)h;
    }
    p->i += 4;
    return 0;
}

static int read_escape(parser *p, char *o, size_t *w) {
    if (p->i >= p->n) return perr(p, "truncated escape");
    char c = p->s[p->i++];
    const char *from = "\"\\/bfnrt", *to = "\"\\/\b\f\n\r\t";
    const char *f = strchr(from, c);
    if (c && f) { o[(*w)++] = to[f - from]; return 0; }
    if (c != 'u') { p->i--; return perr(p, "bad escape"); }
    uint32_t cp;
    if (read_hex4(p, &cp)) return -1;
    if (cp >= 0xD800 && cp < 0xDC00 && p->n - p->i >= 6 && p->s[p->i] == '\\' &&
        p->s[p->i + 1] == 'u') {
        size_t save = p->i;
        uint32_t lo;
        p->i += 2;
        if (read_hex4(p, &lo)) return -1;
        if (lo >= 0xDC00 && lo < 0xE000) cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
        else p->i = save; /* a lone high surrogate, then another escape */
    }
    *w += put_utf8(o + *w, cp);
    return 0;
}

/* Parses a string at p->i (the opening quote); returns its decoded bytes in
 * the arena. */
static int parse_string(parser *p, const char **out, size_t *olen) {
    size_t start = ++p->i, end = start;
    while (end < p->n && p->s[end] != '"') end += p->s[end] == '\\' ? 2 : 1;
    if (end >= p->n) return perr(p, "unterminated string");
    /* decoded never longer than the source (escapes shrink or keep size) */
    char *o = arena_alloc(p->doc, end - start + 1);
    if (!o) return nd_fail(p->err, NEEDLE_E_NOMEM, "json: out of memory");
    size_t w = 0;
    while (p->s[p->i] != '"') {
        unsigned char c = (unsigned char)p->s[p->i];
        if (c < 0x20) return perr(p, "control character in string");
        if (c == '\\') {
            p->i++;
            if (read_escape(p, o, &w)) return -1;
            continue;
        }
        size_t k = utf8_len((const unsigned char *)p->s + p->i, p->n - p->i);
        if (!k) return perr(p, "invalid UTF-8");
        memcpy(o + w, p->s + p->i, k);
        w += k, p->i += k;
    }
    p->i++;
    o[w] = 0;
    *out = o, *olen = w;
    return 0;
}

static int parse_number(parser *p, nd_jv *v) {
    size_t st = p->i;
    const char *s = p->s;
    if (p->i < p->n && s[p->i] == '-') p->i++;
    if (p->i >= p->n || s[p->i] < '0' || s[p->i] > '9') return perr(p, "bad number");
    if (s[p->i] == '0') p->i++;
    else while (p->i < p->n && s[p->i] >= '0' && s[p->i] <= '9') p->i++;
    if (p->i < p->n && s[p->i] == '.') {
        p->i++;
        if (p->i >= p->n || s[p->i] < '0' || s[p->i] > '9') return perr(p, "bad fraction");
        while (p->i < p->n && s[p->i] >= '0' && s[p->i] <= '9') p->i++;
    }
    if (p->i < p->n && (s[p->i] == 'e' || s[p->i] == 'E')) {
        p->i++;
        if (p->i < p->n && (s[p->i] == '+' || s[p->i] == '-')) p->i++;
        if (p->i >= p->n || s[p->i] < '0' || s[p->i] > '9') return perr(p, "bad exponent");
        while (p->i < p->n && s[p->i] >= '0' && s[p->i] <= '9') p->i++;
    }
    size_t len = p->i - st;
    char *t = arena_alloc(p->doc, len + 1);
    if (!t) return nd_fail(p->err, NEEDLE_E_NOMEM, "json: out of memory");
    memcpy(t, s + st, len);
    t[len] = 0;
    v->type = ND_JNUMBER, v->str = t, v->len = len, v->num = strtod(t, NULL);
    return 0;
}

static int parse_value(parser *p, nd_jv *v, int depth);

/* Arrays and objects: children gather in a malloc'd vector, then move to the
 * arena once (linear time whatever the shape). */
static int parse_container(parser *p, nd_jv *v, int depth) {
    int obj = p->s[p->i] == '{';
    char close = obj ? '}' : ']';
    if (depth >= p->depth) return perr(p, "nesting too deep");
    p->i++;
    nd_jv *kids = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == close) goto done;
    for (;;) {
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 8;
            nd_jv *nk = nc < SIZE_MAX / sizeof *nk ? realloc(kids, nc * sizeof *nk) : NULL;
            if (!nk) { rc = nd_fail(p->err, NEEDLE_E_NOMEM, "json: out of memory"); goto out; }
            kids = nk, cap = nc;
        }
        nd_jv *k = &kids[n];
        memset(k, 0, sizeof *k);
        skip_ws(p);
        if (obj) {
            if (p->i >= p->n || p->s[p->i] != '"') { rc = perr(p, "expected a key"); goto out; }
            if ((rc = parse_string(p, &k->key, &k->klen))) goto out;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':') { rc = perr(p, "expected ':'"); goto out; }
            p->i++;
        }
        if ((rc = parse_value(p, k, depth + 1))) goto out;
        n++;
        skip_ws(p);
        if (p->i < p->n && p->s[p->i] == ',') { p->i++; continue; }
        if (p->i < p->n && p->s[p->i] == close) break;
        rc = perr(p, obj ? "expected ',' or '}'" : "expected ',' or ']'");
        goto out;
    }
done:
    p->i++;
    v->type = obj ? ND_JOBJECT : ND_JARRAY;
    v->n = n;
    if (n) {
        v->kids = arena_alloc(p->doc, n * sizeof *kids);
        if (!v->kids) { rc = nd_fail(p->err, NEEDLE_E_NOMEM, "json: out of memory"); goto out; }
        memcpy(v->kids, kids, n * sizeof *kids);
    }
out:
    free(kids);
    return rc;
}

static int parse_value(parser *p, nd_jv *v, int depth) {
    skip_ws(p);
    if (p->i >= p->n) return perr(p, "unexpected end of input");
    char c = p->s[p->i];
    if (c == '{' || c == '[') return parse_container(p, v, depth);
    if (c == '"') {
        v->type = ND_JSTRING;
        return parse_string(p, &v->str, &v->len);
    }
    if (c == '-' || (c >= '0' && c <= '9')) return parse_number(p, v);
    static const char *const words[] = {"null", "false", "true"};
    for (int t = 0; t < 3; t++) {
        size_t wl = strlen(words[t]);
        if (p->n - p->i >= wl && memcmp(p->s + p->i, words[t], wl) == 0) {
            p->i += wl;
            v->type = t; /* ND_JNULL, ND_JFALSE, ND_JTRUE in that order */
            return 0;
        }
    }
    return perr(p, "unexpected character");
}

nd_json *nd_json_parse(const char *text, size_t len, int depth, needle_error *err) {
    nd_json *doc = calloc(1, sizeof *doc);
    if (!doc) { nd_fail(err, NEEDLE_E_NOMEM, "json: out of memory"); return NULL; }
    parser p = {text, len, 0, depth, doc, err, NULL, 0};
    if (!text && len) { perr(&p, "NULL text"); nd_json_free(doc); return NULL; }
    if (parse_value(&p, &doc->root, 0)) { nd_json_free(doc); return NULL; }
    skip_ws(&p);
    if (p.i != len) { perr(&p, "trailing characters"); nd_json_free(doc); return NULL; }
    return doc;
}

const nd_jv *nd_jv_get(const nd_jv *obj, const char *key) {
    if (!obj || obj->type != ND_JOBJECT) return NULL;
    size_t kl = strlen(key);
    const nd_jv *hit = NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (obj->kids[i].klen == kl && memcmp(obj->kids[i].key, key, kl) == 0) hit = &obj->kids[i];
    return hit;
}

/* ---- compact rendering ------------------------------------------------- */
typedef struct {
    char *out;
    size_t cap, len;
    int oom;
    int ascii; /* Python's ensure_ascii: everything past 0x7E as \\uXXXX (Needle 2) */
} sink;

static void emit(sink *k, const char *s, size_t n) {
    if (k->len < k->cap) memcpy(k->out + k->len, s, n < k->cap - k->len ? n : k->cap - k->len);
    k->len = n > SIZE_MAX - k->len ? SIZE_MAX : k->len + n;
}

/* Decodes one generalised-UTF-8 code point (our own strings are valid). */
static uint32_t next_cp(const unsigned char *s, size_t n, size_t *i) {
    unsigned c = s[*i];
    size_t k = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
    if (k > n - *i) k = n - *i;
    uint32_t cp = k == 1 ? c : k == 2 ? c & 31 : k == 3 ? c & 15 : c & 7;
    for (size_t j = 1; j < k; j++) cp = cp << 6 | (s[*i + j] & 63);
    *i += k;
    return cp;
}

static void emit_string(sink *k, const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    emit(k, "\"", 1);
    for (size_t i = 0; i < n;) {
        size_t run = i; /* copy plain printable ASCII in runs */
        while (run < n && (unsigned char)s[run] >= 0x20 && (unsigned char)s[run] < 0x7F &&
               s[run] != '"' && s[run] != '\\')
            run++;
        if (run > i) { emit(k, s + i, run - i); i = run; continue; }
        size_t at = i;
        uint32_t cp = next_cp((const unsigned char *)s, n, &i);
        if (!k->ascii && cp >= 0x7F && (cp < 0xD800 || cp > 0xDFFF)) { emit(k, s + at, i - at); continue; }
        const char *sh = cp == '"' ? "\\\"" : cp == '\\' ? "\\\\" : cp == '\n' ? "\\n"
                       : cp == '\r' ? "\\r" : cp == '\t' ? "\\t" : cp == '\b' ? "\\b"
                       : cp == '\f' ? "\\f" : NULL;
        if (sh) { emit(k, sh, 2); continue; }
        uint32_t units[2] = {cp, 0};
        int nu = 1;
        if (cp >= 0x10000) {
            units[0] = 0xD800 + ((cp - 0x10000) >> 10), units[1] = 0xDC00 + ((cp - 0x10000) & 0x3FF);
            nu = 2;
        }
        for (int u = 0; u < nu; u++) {
            char e[6] = {'\\', 'u', hex[units[u] >> 12 & 15], hex[units[u] >> 8 & 15],
                         hex[units[u] >> 4 & 15], hex[units[u] & 15]};
            emit(k, e, 6);
        }
    }
    emit(k, "\"", 1);
}

size_t nd_json_string(const char *s, size_t len, int ascii, char *out, size_t cap) {
    sink k = {out, cap, 0, 0, ascii};
    emit_string(&k, s, len);
    return k.len;
}

static int cmp_member(const void *a, const void *b) {
    const nd_jv *x = *(const nd_jv *const *)a, *y = *(const nd_jv *const *)b;
    size_t m = x->klen < y->klen ? x->klen : y->klen;
    int c = memcmp(x->key, y->key, m);
    if (c) return c;
    if (x->klen != y->klen) return x->klen < y->klen ? -1 : 1;
    return x < y ? -1 : x > y; /* stable: by position */
}

static void emit_value(sink *k, const nd_jv *v);

/* Python dict semantics for repeated keys: the first position, the last value. */
static void emit_object(sink *k, const nd_jv *v) {
    const nd_jv **order = v->n ? malloc(v->n * sizeof *order) : NULL;
    const nd_jv **value = v->n ? malloc(v->n * sizeof *value) : NULL;
    if (v->n && (!order || !value)) { k->oom = 1; free(order); free(value); return; }
    for (size_t i = 0; i < v->n; i++) order[i] = &v->kids[i], value[i] = NULL;
    if (v->n) qsort(order, v->n, sizeof *order, cmp_member);
    for (size_t i = 0; i < v->n;) {
        size_t j = i;
        while (j + 1 < v->n && order[j + 1]->klen == order[i]->klen &&
               memcmp(order[j + 1]->key, order[i]->key, order[i]->klen) == 0)
            j++;
        value[order[i] - v->kids] = order[j]; /* first position gets last value */
        i = j + 1;
    }
    emit(k, "{", 1);
    int first = 1;
    for (size_t i = 0; i < v->n; i++) {
        if (!value[i]) continue;
        if (!first) emit(k, ",", 1);
        first = 0;
        emit_string(k, v->kids[i].key, v->kids[i].klen);
        emit(k, ":", 1);
        emit_value(k, value[i]);
    }
    emit(k, "}", 1);
    free(order);
    free(value);
}

static void emit_value(sink *k, const nd_jv *v) {
    switch (v->type) {
    case ND_JNULL: emit(k, "null", 4); break;
    case ND_JFALSE: emit(k, "false", 5); break;
    case ND_JTRUE: emit(k, "true", 4); break;
    case ND_JNUMBER: emit(k, v->str, v->len); break;
    case ND_JSTRING: emit_string(k, v->str, v->len); break;
    case ND_JARRAY:
        emit(k, "[", 1);
        for (size_t i = 0; i < v->n; i++) {
            if (i) emit(k, ",", 1);
            emit_value(k, &v->kids[i]);
        }
        emit(k, "]", 1);
        break;
    default: emit_object(k, v); break;
    }
}

size_t nd_jv_compact(const nd_jv *v, int ascii, char *out, size_t cap) {
    sink k = {out, cap, 0, 0, ascii};
    emit_value(&k, v);
    return k.oom ? SIZE_MAX : k.len;
}

/* Public: caller JSON text to compact text. Depth 128 is far beyond any tool
 * result and keeps recursion on a 1 MiB wasm stack safe. */
size_t nd_json_compact(const char *json, size_t len, int ascii, char *out, size_t cap, needle_error *err) {
    nd_json *doc = nd_json_parse(json, len, 128, err);
    if (!doc) return 0;
    size_t n = nd_jv_compact(&doc->root, ascii, out, cap);
    nd_json_free(doc);
    if (n == SIZE_MAX) { nd_fail(err, NEEDLE_E_NOMEM, "json: out of memory"); return 0; }
    if (n < cap) out[n] = 0;
    if (err) err->code = NEEDLE_OK, err->message[0] = 0;
    return n;
}

size_t needle_json_compact(const char *json, size_t len, char *out, size_t cap, needle_error *err) {
    return nd_json_compact(json, len, 1, out, cap, err);
}

/* Renders s[0..n) for an error message: JSON escapes for '"', '\\' and
 * control characters, cut (with "...") after max bytes of s or when out
 * fills up, always between UTF-8 characters. */
void nd_escape(char *out, size_t cap, const char *s, size_t n, size_t max) {
    size_t w = 0;
    for (size_t i = 0; i < n;) {
        unsigned char ch = (unsigned char)s[i];
        size_t len = ch < 0x80 ? 1 : ch >= 0xF0 ? 4 : ch >= 0xE0 ? 3 : 2;
        if (len > n - i) len = n - i;
        int quote = ch == '"' || ch == '\\', ctrl = ch < 0x20 || ch == 0x7F;
        size_t need = quote ? 2 : ctrl ? 6 : len;
        if (i + len > max || w + need + 4 > cap) { memcpy(out + w, "...", 3), w += 3; break; }
        if (quote) out[w++] = '\\', out[w++] = (char)ch;
        else if (ctrl) w += (size_t)snprintf(out + w, cap - w, "\\u%04x", ch);
        else memcpy(out + w, s + i, len), w += len;
        i += len;
    }
    out[w] = 0;
}
