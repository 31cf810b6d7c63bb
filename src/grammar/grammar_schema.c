/* grammar_schema.c: the tool-call grammar's schemas -> a graph of value
 * nodes (gnode, grammar_internal.h). The tools array becomes the call array
 * [{"name":<tool>,"arguments":<parameters>},...]; a schema becomes literals
 * (enum, const, booleans, null), a string DFA (pattern, format, lengths), a
 * number with scaled-integer bounds, an array, an object, or alternatives
 * (anyOf, oneOf, several types). A $ref target gets an indirection node
 * first, so a recursive reference finds it. Once every tool is compiled the
 * graph is checked as a whole (nd_build_graph): alternatives are flattened,
 * the cost table is filled, and every tool must have a finite shortest value.
 * Errors name the tool and the JSON pointer (within "parameters") of the
 * offending keyword, and the limit when one is hit.
 *
 * Decisions (documented in the report and README):
 * - additionalProperties: absent/false forbid undeclared keys; true or a
 *   schema are accepted but the output still uses declared keys only (valid
 *   either way). An object schema without properties admits only {}.
 * - enum/const values must be written exactly as Python's json.dumps writes
 *   them.
 * - Numbers are plain decimals (no exponent) of at most 37 digits: 6
 *   fraction digits, more when multipleOf or the bounds need them, fewer
 *   when the bounds need the integer digits. Bounds are read exactly from
 *   the literal and tightened where validators differ: beyond 2^53 Python
 *   compares an integer with the float it read, and JS reads both as doubles
 *   (an exclusive bound is moved to the first value whose double is beyond
 *   the bound's). A bound beyond 37 digits is refused with that limit.
 * - oneOf: the branches must be provably disjoint on what the grammar
 *   writes. For every pair (i, j) no value written by branch i may validate
 *   against branch j's schema (and the reverse); then "exactly one branch"
 *   holds for every output and oneOf compiles like anyOf. A pair the check
 *   cannot prove disjoint (overlapping types or ranges, equal literals,
 *   patterns with a common string, formats, nested objects beyond a few
 *   levels) is refused naming both branches. Branches of different types,
 *   different consts/enums, disjoint numeric ranges, patterns with no common
 *   string, and objects that differ in a required key's const (or that
 *   require a key the other never writes) pass.
 * - parameters must be an object schema: every value it admits is an object.
 * - A schema whose shortest value does not exist ($ref cycle with no base
 *   case, required recursion) or does not fit the matcher's depth bound or
 *   the output limit is refused at compile time, naming its pointer. An
 *   optional recursive property stays allowed (up to ND_MAX_DEPTH frames).
 * - Nesting: the tools JSON may nest ND_TOOLS_JSON_DEPTH levels (grammar.c),
 *   a schema ND_SCHEMA_DEPTH levels of subschemas (counting $ref hops).
 * - "grounded" is an annotation like "description": accepted everywhere,
 *   acted on only with ND_GRAMMAR_NEEDLE3.
 * - ND_GRAMMAR_NEEDLE3 adds the makers' engine's rules (grammar_v3_rules.c):
 *   a number property whose "type" is "integer" or "number", with no bound
 *   of either draft, gets the range its name implies (dropped when
 *   multipleOf leaves no value in it); a string schema (or one without a
 *   type, or with a type list) with no enum or const whose description
 *   lists values becomes the enum of those values that pass its own
 *   pattern, format and lengths (not for "required": true or grounded
 *   properties; nothing passing, it stays as it was); keys named "id" or
 *   "*_id", or declared "grounded": true, are marked grounded on their
 *   object (grammar_ground.c checks their values). A property's name and
 *   grounding reach through $ref and a single allOf, not into anyOf/oneOf
 *   branches, as the engine reads them. */
#include "grammar/grammar_internal.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h" /* nd_fail */

#define ND_MAX_CALLS 32     /* calls per array */
#define ND_SCHEMA_DEPTH 64  /* subschemas nested (and $ref hops) */
#define MAX_NAME_BYTES 64   /* a tool name */

#define E18 ((nd_num)1000000000000000000)
const nd_num nd_pow10s[ND_NUM_DIGITS + 1] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
    1000000000, 10000000000, 100000000000, 1000000000000, 10000000000000, 100000000000000,
    1000000000000000, 10000000000000000, 100000000000000000, E18, E18 * 10, E18 * 100, E18 * 1000,
    E18 * 10000, E18 * 100000, E18 * 1000000, E18 * 10000000, E18 * 100000000, E18 * 1000000000,
    E18 * 10000000000, E18 * 100000000000, E18 * 1000000000000, E18 * 10000000000000,
    E18 * 100000000000000, E18 * 1000000000000000, E18 * 10000000000000000,
    E18 * 100000000000000000, E18 * E18, E18 * E18 * 10};

void nd_graph_free(graph *gr) {
    for (size_t i = 0; i < gr->n; i++) {
        for (uint32_t k = 0; k < gr->v[i].nlits; k++) free(gr->v[i].lits[k].s);
        free(gr->v[i].lits), free(gr->v[i].kids);
        nd_dfa_free(gr->v[i].dfa);
    }
    free(gr->v), free(gr->cost);
}

/* A property's name as its object declares it, and whether its value is
 * grounded (ND_GRAMMAR_NEEDLE3 only). */
typedef struct { const char *s; size_t n; int grounded; } propref;

/* A oneOf whose branches are checked once the graph is complete. */
typedef struct { int32_t *alts; uint32_t n; size_t ptr; size_t tool; } oneof_check;

typedef struct {
    graph *gr;
    needle_error *err;
    char tool[96];          /* the tool's name, escaped for messages */
    size_t tool_index;
    const nd_jv *root;
    struct { const nd_jv *js; int32_t id; } *refs;
    size_t nrefs, crefs;
    char path[1024];        /* the JSON pointer being compiled, escaped for messages */
    size_t plen;
    int32_t any;
    int depth;
    /* per node, for messages after the build: its pointer (offset into
     * pool) and, for a $ref indirection, the $ref and its target node */
    size_t *nptr, *nref;
    int32_t *norig;
    size_t ncap;
    char *pool;
    size_t npool, cpool;
    oneof_check *oneofs;
    size_t noneofs, coneofs;
    const nd_jv *tools;
    int ascii;              /* literals as ensure_ascii writes them (nd_jv_compact) */
    int v3;                 /* ND_GRAMMAR_NEEDLE3: the engine's rules */
    propref prop;           /* the property the next schema compiled is the value of */
} cc;

/* The pointer as shown: long ones keep their head and tail (whole UTF-8
 * characters). */
static const char *show_ptr(const char *p, char *buf, size_t cap) {
    size_t n = strlen(p), head = 40, tail = n - 76;
    if (!n) return "/";
    if (n <= 120) return p;
    while (head && ((unsigned char)p[head] & 0xC0) == 0x80) head--;
    while (tail < n && ((unsigned char)p[tail] & 0xC0) == 0x80) tail++;
    snprintf(buf, cap, "%.*s/...%s", (int)head, p, p + tail);
    return buf;
}

static int tfail(cc *c, const char *tool, const char *ptr, const char *fmt, va_list ap) {
    char msg[200], pb[128];
    vsnprintf(msg, sizeof msg, fmt, ap);
    return nd_fail(c->err, NEEDLE_E_SCHEMA, "tool \"%s\": %s: %s", tool, show_ptr(ptr, pb, sizeof pb), msg);
}

/* An error at the pointer being compiled: -1. */
static int32_t cfail(cc *c, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    tfail(c, c->tool, c->path, fmt, ap);
    va_end(ap);
    return -1;
}

static int32_t oom(cc *c) { nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"); return -1; }

/* Appends a pointer segment (JSON pointer escapes ~0 ~1, message escapes). */
static void path_push(cc *c, const char *seg, size_t n, size_t *save) {
    *save = c->plen;
    char e[1024];
    size_t w = 0;
    for (size_t i = 0; i < n && w + 2 < sizeof e; i++)
        if (seg[i] == '~' || seg[i] == '/') e[w++] = '~', e[w++] = seg[i] == '~' ? '0' : '1';
        else e[w++] = seg[i];
    char shown[1024];
    nd_escape(shown, sizeof shown, e, w, 512);
    int k = snprintf(c->path + c->plen, sizeof c->path - c->plen, "/%s", shown);
    c->plen = k < 0 || (size_t)k >= sizeof c->path - c->plen ? strlen(c->path) : c->plen + (size_t)k;
}
static void path_pop(cc *c, size_t save) { c->plen = save, c->path[save] = 0; }
/* Sets the path to a $ref's pointer (already ~-escaped as written). */
static void path_set(cc *c, const char *ptr, size_t n) {
    nd_escape(c->path, sizeof c->path, ptr, n, 512);
    c->plen = strlen(c->path);
}

/* Copies s into the message pool: its offset, or SIZE_MAX. */
static size_t pool_put(cc *c, const char *s) {
    size_t n = strlen(s) + 1;
    if (c->npool + n > c->cpool) {
        size_t nc = c->cpool ? c->cpool * 2 : 4096;
        while (nc < c->npool + n) nc *= 2;
        char *np = realloc(c->pool, nc);
        if (!np) return SIZE_MAX;
        c->pool = np, c->cpool = nc;
    }
    memcpy(c->pool + c->npool, s, n);
    c->npool += n;
    return c->npool - n;
}
static const char *pool_at(const cc *c, size_t off) { return off == SIZE_MAX || !c->pool ? "" : c->pool + off; }
static size_t pool_put_esc(cc *c, const char *s, size_t n) {
    char shown[600];
    nd_escape(shown, sizeof shown, s, n, 200);
    return pool_put(c, shown);
}

static int32_t new_node(cc *c, int kind) {
    graph *gr = c->gr;
    if (gr->n == gr->cap) {
        size_t nc = gr->cap ? gr->cap * 2 : 32;
        gnode *nv = nc < SIZE_MAX / sizeof *nv ? realloc(gr->v, nc * sizeof *nv) : NULL;
        if (!nv) return oom(c);
        gr->v = nv, gr->cap = nc;
    }
    if (gr->n == c->ncap) {
        size_t nc = c->ncap ? c->ncap * 2 : 32;
        size_t *a = realloc(c->nptr, nc * sizeof *a);
        if (a) c->nptr = a;
        size_t *r = realloc(c->nref, nc * sizeof *r);
        if (r) c->nref = r;
        int32_t *o = realloc(c->norig, nc * sizeof *o);
        if (o) c->norig = o;
        if (!a || !r || !o) return oom(c);
        c->ncap = nc;
    }
    size_t id = gr->n;
    c->nptr[id] = pool_put(c, c->path), c->nref[id] = SIZE_MAX, c->norig[id] = -1;
    if (c->nptr[id] == SIZE_MAX) return oom(c);
    memset(&gr->v[id], 0, sizeof gr->v[0]);
    gr->v[id].kind = kind;
    gr->v[id].items = -1;
    gr->n++;
    return (int32_t)id;
}

/* A literal node from rendered texts (takes ownership; sorts, dedupes). */
static int32_t lit_node(cc *c, lit *ls, uint32_t n) {
    qsort(ls, n, sizeof *ls, nd_lit_cmp);
    uint32_t w = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (w && !nd_lit_cmp(&ls[w - 1], &ls[i])) { free(ls[i].s); continue; }
        ls[w++] = ls[i];
    }
    int32_t id = new_node(c, K_LIT);
    if (id < 0) { for (uint32_t i = 0; i < w; i++) free(ls[i].s); free(ls); return -1; }
    c->gr->v[id].lits = ls, c->gr->v[id].nlits = w;
    return id;
}

static int32_t lit_from_words(cc *c, const char *const *words, uint32_t n) {
    lit *ls = calloc(n, sizeof *ls);
    if (!ls) return oom(c);
    for (uint32_t i = 0; i < n; i++) {
        ls[i].n = strlen(words[i]);
        ls[i].s = malloc(ls[i].n + 1);
        if (!ls[i].s) { while (i--) free(ls[i].s); free(ls); return oom(c); }
        memcpy(ls[i].s, words[i], ls[i].n + 1);
    }
    return lit_node(c, ls, n);
}

enum { T_STRING = 1, T_INTEGER = 2, T_NUMBER = 4, T_BOOLEAN = 8, T_NULL = 16, T_OBJECT = 32, T_ARRAY = 64 };
static const char *const type_names[] = {"string", "integer", "number", "boolean", "null", "object", "array"};

static int jv_types(const nd_jv *v) { /* the types a value has */
    switch (v->type) {
    case ND_JNULL: return T_NULL;
    case ND_JFALSE: case ND_JTRUE: return T_BOOLEAN;
    case ND_JSTRING: return T_STRING;
    case ND_JARRAY: return T_ARRAY;
    case ND_JOBJECT: return T_OBJECT;
    default: return T_NUMBER | (v->num == floor(v->num) && isfinite(v->num) ? T_INTEGER : 0);
    }
}

/* s[0..n) equals the C string w (keys may hold NUL bytes: lengths count). */
static int is_word(const char *s, size_t n, const char *w) { return strlen(w) == n && !memcmp(s, w, n); }

static int32_t compile(cc *c, const nd_jv *s);

/* ---- strings ---- */
static int32_t str_node(cc *c, const char *pat, size_t plen, uint32_t minlen, uint32_t maxlen, int exact) {
    const char *why = NULL;
    nd_dfa *d = nd_regex_compile(pat, plen, &why);
    if (!d) return cfail(c, "pattern: %s", why ? why : "invalid");
    if (nd_dfa_reach(d, minlen, maxlen, &why)) { nd_dfa_free(d); return cfail(c, "%s", why); }
    int ok = 0; /* some accepted length within the bounds from the start state */
    for (uint32_t L = minlen; L <= d->lc && !ok; L++) ok = d->reach[L / 64] >> (L % 64) & 1;
    if (!ok) { nd_dfa_free(d); return cfail(c, "%s", "no string satisfies pattern/format and length"); }
    int32_t id = new_node(c, K_STR);
    if (id < 0) { nd_dfa_free(d); return -1; }
    gnode *n = &c->gr->v[id];
    n->dfa = d, n->minlen = minlen, n->maxlen = maxlen, n->exact = (uint8_t)exact;
    return id;
}

/* Formats as patterns that admit only values every common validator
 * (ajv-formats "full" included) accepts: a safe subset of each format. */
static const char *format_pattern(const char *f, size_t n) {
#define ND_DATE "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
#define ND_TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
    if (is_word(f, n, "date")) return "^" ND_DATE "$";
    if (is_word(f, n, "time")) return "^" ND_TIME "$";
    if (is_word(f, n, "date-time")) return "^" ND_DATE "T" ND_TIME "$";
    if (is_word(f, n, "email"))
        return "^[A-Za-z0-9_+-]{1,32}(\\.[A-Za-z0-9_+-]{1,32}){0,3}@([A-Za-z0-9]{1,30}\\.){1,3}[A-Za-z]{2,10}$";
    if (is_word(f, n, "uri"))
        return "^https?://[A-Za-z0-9-]{1,40}(\\.[A-Za-z0-9-]{1,40}){0,4}(/[A-Za-z0-9._~-]*)*(\\?[A-Za-z0-9._~=&-]*)?$";
    if (is_word(f, n, "uuid"))
        return "^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$";
    return NULL;
}

/* Reads a non-negative integer keyword into *out (absent: keeps *out). */
static int get_count(cc *c, const nd_jv *s, const char *key, uint32_t *out) {
    const nd_jv *v = nd_jv_get(s, key);
    if (!v) return 0;
    size_t save;
    path_push(c, key, strlen(key), &save);
    if (v->type != ND_JNUMBER || v->num < 0 || v->num != floor(v->num) || v->num > 4e9)
        return cfail(c, "%s", "must be a non-negative integer");
    path_pop(c, save);
    *out = (uint32_t)v->num;
    return 0;
}

static int32_t compile_string(cc *c, const nd_jv *s) {
    uint32_t mn = 0, mx = UINT32_MAX;
    if (get_count(c, s, "minLength", &mn) || get_count(c, s, "maxLength", &mx)) return -1;
    if (mn > mx) return cfail(c, "%s", "minLength > maxLength");
    const nd_jv *p = nd_jv_get(s, "pattern"), *f = nd_jv_get(s, "format");
    if ((p && p->type != ND_JSTRING) || (f && f->type != ND_JSTRING))
        return cfail(c, "%s", "pattern and format must be strings");
    if (p && f) return cfail(c, "%s", "pattern together with format is unsupported");
    size_t save;
    if (f) {
        const char *fp = format_pattern(f->str, f->len);
        path_push(c, "format", 6, &save);
        char shown[64];
        nd_escape(shown, sizeof shown, f->str, f->len, 40);
        if (!fp) return cfail(c, "unsupported format \"%s\"", shown);
        int32_t id = str_node(c, fp, strlen(fp), mn, mx, 0);
        path_pop(c, save);
        return id;
    }
    if (p) {
        path_push(c, "pattern", 7, &save);
        int32_t id = str_node(c, p->str, p->len, mn, mx, 1);
        path_pop(c, save);
        return id;
    }
    return str_node(c, "^[^]*$", 6, mn, mx, 1);
}

/* ---- numbers ---- */
/* A number literal as written: (-1)^neg * d[0..nd) * 10^e exactly, d without
 * leading or trailing zeros; sticky: nonzero digits beyond the 40 kept. */
typedef struct { int neg, nd, sticky; long e; char d[40]; } dec;

static void dec_parse(const char *s, size_t n, dec *x) {
    memset(x, 0, sizeof *x);
    size_t i = 0;
    int frac = 0;
    if (i < n && s[i] == '-') x->neg = 1, i++;
    for (; i < n && s[i] != 'e' && s[i] != 'E'; i++) {
        if (s[i] == '.') { frac = 1; continue; }
        int dg = s[i] - '0';
        if (x->nd == 0 && dg == 0) { x->e -= frac; continue; }
        if (x->nd < 40) x->d[x->nd++] = (char)dg, x->e -= frac;
        else x->sticky |= dg != 0, x->e += !frac;
    }
    if (i < n) {
        long ex = 0, sg = 1;
        if (++i < n && (s[i] == '+' || s[i] == '-')) sg = s[i++] == '-' ? -1 : 1;
        for (; i < n; i++) ex = ex < 1000000 ? ex * 10 + (s[i] - '0') : ex;
        x->e += sg * ex;
    }
    while (!x->sticky && x->nd && x->d[x->nd - 1] == 0) x->nd--, x->e++;
    if (!x->nd) x->neg = 0, x->e = 0;
}

static long dec_frac_digits(const dec *x) { return x->sticky ? 1000 : x->e < 0 ? -x->e : 0; }
static long dec_int_digits(const dec *x) { return x->nd + x->e > 0 ? x->nd + x->e : 0; }

/* x * 10^F rounded up (dir > 0) or down into *out: 0, or 1 when the result
 * has more than ND_NUM_DIGITS digits. *exact: nothing was rounded. */
static int dec_scale(const dec *x, int F, int dir, nd_num *out, int *exact) {
    long keep = x->nd + x->e + F; /* digits of the scaled integer part */
    nd_num m = 0;
    *exact = 1;
    if (!x->nd) { *out = 0; return 0; }
    if (keep > ND_NUM_DIGITS) return 1;
    for (long i = 0; i < keep; i++) m = m * 10 + (i < x->nd ? x->d[i] : 0);
    int rem = x->sticky || keep < x->nd;
    nd_num v = x->neg ? -m : m;
    if (rem) v += dir > 0 ? !x->neg : -x->neg;
    *exact = !rem;
    if (v > ND_MAXMAG || v < -ND_MAXMAG) return 1;
    *out = v;
    return 0;
}

/* The exact value of double d (|d| >= 2^53, so an integer) times 10^F, or 1
 * when it has more than ND_NUM_DIGITS digits. */
static int double_scale(double d, int F, nd_num *out) {
    int e;
    double m = frexp(fabs(d), &e);
    nd_num M = (nd_num)(int64_t)ldexp(m, 53);
    if (e - 53 > 70) return 1; /* M < 2^53, so M << 70 < 2^123: no overflow before the check below */
    M <<= e - 53;
    if (M > ND_MAXMAG / nd_pow10s[F]) return 1;
    *out = (d < 0 ? -M : M) * nd_pow10s[F];
    return 0;
}

/* An exclusive bound as JS reads it: the first scaled value from b (moving
 * up for a minimum) whose double is strictly beyond d. The doubles of
 * increasing decimals never decrease, so a doubling search then bisection
 * finds it; beyond the range it returns a value past ND_MAXMAG. */
static nd_num js_exclusive(int F, nd_num b, double d, int is_min) {
    int dir = is_min ? 1 : -1;
#define ND_BEYOND(v) (is_min ? nd_num_double(v, F) > d : nd_num_double(v, F) < d)
    if (b > ND_MAXMAG || b < -ND_MAXMAG || ND_BEYOND(b)) return b;
    nd_num bad = b, good, step = 1;
    for (;; step *= 2) {
        nd_num t = b + dir * step;
        if (step > ((nd_num)1 << 100) || t > ND_MAXMAG || t < -ND_MAXMAG) {
            t = is_min ? ND_MAXMAG : -ND_MAXMAG;
            if (!ND_BEYOND(t)) return t + dir;
            good = t;
            break;
        }
        if (ND_BEYOND(t)) { good = t; break; }
        bad = t;
    }
    while ((good - bad) * dir > 1) {
        nd_num mid = bad + (good - bad) / 2;
        if (ND_BEYOND(mid)) good = mid;
        else bad = mid;
    }
#undef ND_BEYOND
    return good;
}

/* One bound keyword present in the schema. */
typedef struct { const char *key; const nd_jv *v; int is_min, excl; dec x; } nbound;

/* Applies bound b to node n at n->F: 0, or -1 (error) when the bound lies
 * beyond the digits on the side that restricts. */
static int apply_bound(cc *c, gnode *n, const nbound *b) {
    int dir = b->is_min ? 1 : -1, exact;
    nd_num v;
    if (dec_scale(&b->x, n->F, dir, &v, &exact)) {
        if (b->is_min == !b->x.neg) { /* a minimum above the range (or a maximum below it) */
            size_t save;
            path_push(c, b->key, strlen(b->key), &save);
            return cfail(c, "%.40s is beyond the numbers the grammar writes (at most %d digits, %d after the point)",
                         b->v->str, ND_NUM_DIGITS, n->F);
        }
        return 0; /* beyond the range on the other side: no restriction */
    }
    if (b->excl && exact) v += dir;
    if (fabs(b->v->num) >= 9007199254740992.0) { /* Python: an integer against the float it read */
        nd_num D;
        if (!double_scale(b->v->num, n->F, &D)) {
            if (b->excl) D += dir;
            if (dir > 0 ? D > v : D < v) v = D;
        } else if (dir > 0 ? b->v->num > 0 : b->v->num < 0) v = dir > 0 ? ND_MAXMAG + 1 : -ND_MAXMAG - 1; /* beyond: none */
    }
    if (b->excl) v = js_exclusive(n->F, v, b->v->num, b->is_min);
    if (b->is_min && v > n->lo) n->lo = v;
    if (!b->is_min && v < n->hi) n->hi = v;
    return 0;
}

/* Some value a fresh number can start with exists (what the matcher asks
 * before the first byte). */
static int num_exists(const gnode *n) {
    return nd_num_first(n, 0, ND_MAXMAG, 0, NULL) || nd_num_first(n, -ND_MAXMAG, 0, 0, NULL);
}

static nd_num gcd_num(nd_num a, nd_num b) {
    while (b) { nd_num t = a % b; a = b, b = t; }
    return a;
}

/* The number keywords of s: the bounds into bs (their doubles into n, for
 * oneOf's overlap check) and multipleOf into *md (n->dmult). 0 or -1. */
typedef struct { nbound b[4]; int nb; const nd_jv *m; dec md; } numkw;

static int read_num_keywords(cc *c, const nd_jv *s, gnode *n, numkw *kw) {
    static const char *const keys[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"};
    const nd_jv *xmin = nd_jv_get(s, "exclusiveMinimum"), *xmax = nd_jv_get(s, "exclusiveMaximum");
    size_t save;
    for (int k = 0; k < 4; k++) {
        const nd_jv *v = nd_jv_get(s, keys[k]);
        if (!v || v->type == ND_JTRUE || v->type == ND_JFALSE) continue; /* draft-4 flags, read below */
        path_push(c, keys[k], strlen(keys[k]), &save);
        if (v->type != ND_JNUMBER || !isfinite(v->num)) return cfail(c, "%s", "must be a finite number");
        path_pop(c, save);
        nbound *b = &kw->b[kw->nb++];
        b->key = keys[k], b->v = v, b->is_min = k % 2 == 0;
        b->excl = k >= 2 || (k == 0 ? xmin && xmin->type == ND_JTRUE : xmax && xmax->type == ND_JTRUE);
        dec_parse(v->str, v->len, &b->x);
        double d = v->num;
        if (b->is_min && (!n->has_dlo || d > n->dlo || (d == n->dlo && b->excl))) n->dlo = d, n->dlo_ex = (uint8_t)b->excl, n->has_dlo = 1;
        if (!b->is_min && (!n->has_dhi || d < n->dhi || (d == n->dhi && b->excl))) n->dhi = d, n->dhi_ex = (uint8_t)b->excl, n->has_dhi = 1;
    }
    if ((kw->m = nd_jv_get(s, "multipleOf"))) {
        path_push(c, "multipleOf", 10, &save);
        if (kw->m->type != ND_JNUMBER || !(kw->m->num > 0) || !isfinite(kw->m->num)) return cfail(c, "%s", "must be a positive number");
        dec_parse(kw->m->str, kw->m->len, &kw->md);
        if (kw->md.sticky || kw->md.nd > ND_NUM_DIGITS) return cfail(c, "has more than %d significant digits", ND_NUM_DIGITS);
        path_pop(c, save);
        n->dmult = kw->m->num;
    }
    return 0;
}

/* The digits of a number: the integer digits of the value nearest zero the
 * bounds allow, then as many fraction digits as the bounds and multipleOf
 * need (6 at least), within ND_NUM_DIGITS. *F the first try, *Fmax the
 * most fraction digits that fit. 0 or -1. */
static int choose_digits(cc *c, const numkw *kw, int integer, int *F, int *Fmax) {
    long need_int = 1, need_frac = kw->m ? dec_frac_digits(&kw->md) : 0;
    size_t save;
    for (int i = 0; i < kw->nb; i++) {
        const nbound *b = &kw->b[i];
        if (b->is_min == !b->x.neg && b->x.nd && dec_int_digits(&b->x) > need_int) need_int = dec_int_digits(&b->x);
        if (dec_frac_digits(&b->x) + b->excl > need_frac) need_frac = dec_frac_digits(&b->x) + b->excl;
    }
    for (int i = 0; need_int > ND_NUM_DIGITS && i < kw->nb; i++)
        if (kw->b[i].is_min == !kw->b[i].x.neg && dec_int_digits(&kw->b[i].x) == need_int) {
            path_push(c, kw->b[i].key, strlen(kw->b[i].key), &save);
            return cfail(c, "%.40s is beyond the numbers the grammar writes (at most %d digits)", kw->b[i].v->str, ND_NUM_DIGITS);
        }
    *Fmax = integer ? 0 : (int)(ND_NUM_DIGITS - need_int);
    if (need_frac < 6) need_frac = 6;
    *F = integer ? 0 : (int)(need_frac < *Fmax ? need_frac : *Fmax);
    if (kw->m && !integer && dec_frac_digits(&kw->md) > *Fmax) {
        path_push(c, "multipleOf", 10, &save);
        return cfail(c, "needs %ld fraction digits; with these bounds at most %d fit in %d digits",
                     dec_frac_digits(&kw->md), *Fmax, ND_NUM_DIGITS);
    }
    return 0;
}

/* multipleOf scaled to n->F into n->mult: 0, or 1 when it does not fit. An
 * integer is a multiple of p / 10^d when it is one of p / gcd(p, 10^d). */
static int scale_multiple(const numkw *kw, gnode *n, int integer) {
    int exact;
    long fd = dec_frac_digits(&kw->md);
    n->mult = 1;
    if (!kw->m) return 0;
    if (integer && fd > 0) {
        nd_num p;
        if (fd > ND_NUM_DIGITS || dec_scale(&kw->md, (int)fd, 1, &p, &exact)) return 1;
        n->mult = p / gcd_num(p, nd_pow10s[fd]);
        return 0;
    }
    return dec_scale(&kw->md, n->F, 1, &n->mult, &exact) || !exact;
}

/* Needle 3: the range a property's name implies (grammar_v3_rules.c), as
 * inclusive bound keywords of kw (which has none): their count. jv and txt
 * hold the bounds' values. */
static int implied_bounds(const char *name, size_t len, gnode *n, numkw *kw, nd_jv jv[2], char txt[2][8]) {
    int lo = 0, hi = 0, have = name ? nd_v3_name_range(name, len, &lo, &hi) : 0, added = 0;
    for (int i = 0; i < 2; i++) {
        if (!(have >> i & 1)) continue;
        int v = i ? hi : lo;
        snprintf(txt[i], sizeof txt[i], "%d", v);
        memset(&jv[i], 0, sizeof jv[i]);
        jv[i].type = ND_JNUMBER, jv[i].str = txt[i], jv[i].len = strlen(txt[i]), jv[i].num = v;
        nbound *b = &kw->b[kw->nb++];
        b->key = i ? "maximum" : "minimum", b->v = &jv[i], b->is_min = !i, b->excl = 0;
        dec_parse(jv[i].str, jv[i].len, &b->x);
        if (!i) n->dlo = v, n->dlo_ex = 0, n->has_dlo = 1;
        else n->dhi = v, n->dhi_ex = 0, n->has_dhi = 1;
        added++;
    }
    return added;
}

/* name: the property's name for Needle 3's implied range (NULL: none). */
static int32_t compile_number(cc *c, const nd_jv *s, int integer, const char *name, size_t nlen) {
    gnode n = {0};
    numkw kw = {0};
    nd_jv jv[2];
    char txt[2][8];
    int F = 0, Fmax = 0;
    n.kind = K_NUM, n.items = -1, n.integer = (uint8_t)integer;
    if (read_num_keywords(c, s, &n, &kw)) return -1;
    int implied = kw.nb == 0 ? implied_bounds(name, nlen, &n, &kw, jv, txt) : 0;
    if (choose_digits(c, &kw, integer, &F, &Fmax)) return -1; /* the implied bounds need no more digits */
    int F0 = F;
    for (;; F++) { /* more fraction digits while no value is found (exclusive bounds close together) */
        n.F = F, n.lo = -ND_MAXMAG, n.hi = ND_MAXMAG;
        if (scale_multiple(&kw, &n, integer)) {
            size_t save;
            path_push(c, "multipleOf", 10, &save);
            return cfail(c, "is too large or has too many digits for numbers of at most %d digits", ND_NUM_DIGITS);
        }
        for (int i = 0; i < kw.nb; i++)
            if (apply_bound(c, &n, &kw.b[i])) return -1;
        if (n.lo <= n.hi && num_exists(&n)) break;
        if (F >= Fmax && implied) { /* multipleOf leaves nothing in the implied range: the schema's own */
            kw.nb = 0, implied = 0, n.has_dlo = n.has_dhi = 0, F = F0 - 1;
            continue;
        }
        if (F >= Fmax) {
            if (integer) return cfail(c, "no integer satisfies the bounds%s", kw.m ? " and multipleOf" : "");
            return cfail(c, "no number satisfies the bounds%s (numbers here have at most %d digits, %d after the point)",
                         kw.m ? " and multipleOf" : "", ND_NUM_DIGITS, F);
        }
    }
    int32_t id = new_node(c, K_NUM);
    if (id >= 0) c->gr->v[id] = n;
    return id;
}

/* ---- arrays and objects ---- */
static int32_t any_node(cc *c);

static int32_t compile_array(cc *c, const nd_jv *s) {
    const nd_jv *it = nd_jv_get(s, "items"), *u = nd_jv_get(s, "uniqueItems");
    uint32_t mn = 0, mx = UINT32_MAX;
    if (get_count(c, s, "minItems", &mn) || get_count(c, s, "maxItems", &mx)) return -1;
    if (mn > mx) return cfail(c, "%s", "minItems > maxItems");
    if (u && u->type != ND_JTRUE && u->type != ND_JFALSE) return cfail(c, "%s", "uniqueItems must be a boolean");
    size_t save;
    path_push(c, "items", 5, &save);
    if (it && it->type == ND_JARRAY) return cfail(c, "%s", "tuple items are unsupported");
    int32_t items = it ? compile(c, it) : any_node(c);
    if (items < 0) return -1;
    path_pop(c, save);
    int32_t id = new_node(c, K_ARR);
    if (id < 0) return -1;
    gnode *n = &c->gr->v[id];
    const gnode *in = &c->gr->v[items];
    n->items = items, n->minit = mn, n->maxit = mx, n->unique = u && u->type == ND_JTRUE;
    if (n->unique) { /* finite domains: never promise more unique items than exist */
        uint64_t domain = UINT64_MAX;
        if (in->kind == K_LIT) domain = in->nlits;
        else if (in->kind == K_NUM && in->F == 0 && (in->hi - in->lo) / in->mult < 64) {
            /* the values a validator tells apart: beyond 2^53 neighbours share a double */
            domain = 0;
            double last = 0;
            for (nd_num q = nd_ceil_div(in->lo, in->mult); q * in->mult <= in->hi; q++) {
                if (!nd_num_ok(in, q * in->mult)) continue;
                double d = nd_num_double(q * in->mult, 0);
                if (!domain || d != last) domain++;
                last = d;
            }
        }
        n->small = domain <= 64;
        if (domain < n->maxit) n->maxit = (uint32_t)domain;
        if (n->minit > n->maxit) return cfail(c, "%s", "minItems exceeds the number of distinct values");
    }
    if (n->maxit > (uint32_t)ND_MAX_OUTPUT) n->maxit = ND_MAX_OUTPUT;
    return id;
}

static const nd_jv *resolve_ref(const nd_jv *root, const char *ref, size_t n);

/* A property schema says "grounded": true, itself or in the schema its
 * $ref names (the engine reads a $ref's target in its place). */
static int declared_grounded(const cc *c, const nd_jv *s) {
    const nd_jv *g = s->type == ND_JOBJECT ? nd_jv_get(s, "grounded") : NULL, *r = g ? NULL : nd_jv_get(s, "$ref");
    if (r && r->type == ND_JSTRING && (s = resolve_ref(c->root, r->str, r->len)) && s->type == ND_JOBJECT)
        g = nd_jv_get(s, "grounded");
    return g && g->type == ND_JTRUE;
}

static int32_t compile_object(cc *c, const nd_jv *s) {
    const nd_jv *props = nd_jv_get(s, "properties"), *req = nd_jv_get(s, "required");
    const nd_jv *ap = nd_jv_get(s, "additionalProperties");
    size_t save;
    if (ap && ap->type != ND_JFALSE && ap->type != ND_JTRUE && ap->type != ND_JOBJECT) {
        path_push(c, "additionalProperties", 20, &save);
        return cfail(c, "%s", "must be a boolean or a schema");
    }
    if (props && props->type != ND_JOBJECT) return cfail(c, "%s", "properties must be an object");
    if (req && req->type != ND_JARRAY) return cfail(c, "%s", "required must be an array");
    size_t np = props ? props->n : 0;
    if (np > 64) return cfail(c, "%s", "more than 64 properties");
    lit *keys = calloc(np ? np : 1, sizeof *keys);
    int32_t *vals = calloc(np ? np : 1, sizeof *vals);
    uint8_t *isreq = calloc(np ? np : 1, 2), *isground = isreq ? isreq + (np ? np : 1) : NULL;
    int32_t id = -1;
    if (!keys || !vals || !isreq) { oom(c); goto out; }
    for (size_t i = 0; i < np; i++) {
        const nd_jv *k = &props->kids[i];
        char shown[80];
        nd_escape(shown, sizeof shown, k->key, k->klen, 40);
        for (size_t j = 0; j < i; j++) /* keys compare with their full length (they may hold NUL) */
            if (props->kids[j].klen == k->klen && !memcmp(props->kids[j].key, k->key, k->klen)) {
                path_push(c, "properties", 10, &save);
                cfail(c, "duplicate property \"%s\"", shown);
                goto out;
            }
        size_t n = nd_json_string(k->key, k->klen, c->ascii, NULL, 0);
        keys[i].s = malloc(n + 1);
        if (!keys[i].s) { oom(c); goto out; }
        keys[i].n = nd_json_string(k->key, k->klen, c->ascii, keys[i].s, n + 1);
        keys[i].s[keys[i].n] = 0;
        size_t s1, s2;
        path_push(c, "properties", 10, &s1);
        path_push(c, k->key, k->klen, &s2);
        isground[i] = (uint8_t)(c->v3 && (nd_v3_grounded_name(k->key, k->klen) || declared_grounded(c, k)));
        c->prop = (propref){k->key, k->klen, isground[i]};
        vals[i] = compile(c, k);
        path_pop(c, s1);
        if (vals[i] < 0) goto out;
    }
    for (size_t r = 0; req && r < req->n; r++) {
        const nd_jv *name = &req->kids[r];
        if (name->type != ND_JSTRING) { cfail(c, "%s", "required entries must be strings"); goto out; }
        size_t i = 0;
        while (i < np && !(props->kids[i].klen == name->len && !memcmp(props->kids[i].key, name->str, name->len))) i++;
        if (i == np) {
            char shown[80];
            nd_escape(shown, sizeof shown, name->str, name->len, 40);
            cfail(c, "required property \"%s\" is not declared in properties", shown);
            goto out;
        }
        isreq[i] = 1;
    }
    /* sort keys, carrying values and required flags (selection sort: at most 64) */
    for (size_t i = 0; i < np; i++)
        for (size_t j = i + 1; j < np; j++)
            if (nd_lit_cmp(&keys[j], &keys[i]) < 0) {
                lit t = keys[i]; keys[i] = keys[j], keys[j] = t;
                int32_t v = vals[i]; vals[i] = vals[j], vals[j] = v;
                uint8_t q = isreq[i]; isreq[i] = isreq[j], isreq[j] = q;
                q = isground[i], isground[i] = isground[j], isground[j] = q;
            }
    uint64_t required = 0, grounded = 0;
    for (size_t i = 0; i < np; i++) required |= (uint64_t)isreq[i] << i, grounded |= (uint64_t)isground[i] << i;
    id = new_node(c, K_OBJ);
    if (id < 0) goto out;
    gnode *o = &c->gr->v[id];
    o->lits = keys, o->nlits = (uint32_t)np, o->kids = vals, o->nkids = (uint32_t)np, o->required = required;
    o->grounded = grounded;
    o->closed = ap && ap->type == ND_JFALSE;
    free(isreq);
    return id;
out:
    for (size_t i = 0; keys && i < np; i++) free(keys[i].s);
    free(keys), free(vals), free(isreq);
    return -1;
}

/* Any JSON value (an absent "items", a true schema): strings, numbers,
 * booleans, null, arrays of any values, and objects (written as {}). */
static int32_t any_node(cc *c) {
    if (c->any >= 0) return c->any;
    int32_t id = new_node(c, K_ALT);
    if (id < 0) return -1;
    c->any = id;
    static const char *const words[] = {"false", "null", "true"};
    int32_t k[5] = {str_node(c, "^[^]*$", 6, 0, UINT32_MAX, 1), -1, lit_from_words(c, words, 3), -1, -1};
    nd_jv none = {0};
    none.type = ND_JOBJECT;
    k[1] = compile_number(c, &none, 0, NULL, 0);
    k[3] = new_node(c, K_ARR);
    k[4] = new_node(c, K_OBJ); /* no keys, additional ones allowed: any object */
    int32_t *kids = malloc(sizeof k);
    if (k[0] < 0 || k[1] < 0 || k[2] < 0 || k[3] < 0 || k[4] < 0 || !kids) { free(kids); return -1; }
    c->gr->v[k[3]].items = id, c->gr->v[k[3]].maxit = ND_MAX_OUTPUT;
    memcpy(kids, k, sizeof k);
    c->gr->v[id].kids = kids, c->gr->v[id].nkids = 5;
    return id;
}

/* ---- keywords, $ref, anyOf/oneOf, enum, types ---- */
static const char *const ignored_kw[] = {"description", "title", "default", "examples", "$schema",
    "$id", "$comment", "$defs", "definitions", "grounded"};
static const char *const constraint_kw[] = {"type", "properties", "required", "additionalProperties",
    "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format", "items", "minItems", "maxItems", "uniqueItems",
    "$ref", "anyOf", "oneOf", "allOf"};

static int in_list(const char *k, size_t kl, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (is_word(k, kl, list[i])) return 1;
    return 0;
}
#define N_OF(a) (sizeof a / sizeof a[0])

/* Segment seg[0..n) of a JSON pointer (~0 ~1 escapes) equals key[0..kl). */
static int seg_is(const char *seg, size_t n, const char *key, size_t kl) {
    size_t j = 0;
    for (size_t i = 0; i < n; i++, j++) {
        char ch = seg[i];
        if (ch == '~' && i + 1 < n && (seg[i + 1] == '0' || seg[i + 1] == '1')) ch = seg[++i] == '0' ? '~' : '/';
        if (j >= kl || key[j] != ch) return 0;
    }
    return j == kl;
}

/* Resolves "#/a/b" (ref[0..n)) against the tool's parameters. */
static const nd_jv *resolve_ref(const nd_jv *root, const char *ref, size_t n) {
    if (!n || ref[0] != '#') return NULL;
    const nd_jv *v = root;
    size_t i = 1;
    while (i < n && ref[i] == '/' && v) {
        size_t st = ++i;
        while (i < n && ref[i] != '/') i++;
        const char *seg = ref + st;
        size_t sl = i - st;
        const nd_jv *hit = NULL;
        if (v->type == ND_JOBJECT) {
            for (size_t k = 0; k < v->n; k++) /* the last of repeated keys, as nd_jv_get */
                if (seg_is(seg, sl, v->kids[k].key, v->kids[k].klen)) hit = &v->kids[k];
        } else if (v->type == ND_JARRAY && sl > 0 && sl < 10 && (sl == 1 || seg[0] != '0')) {
            size_t idx = 0, k = 0;
            while (k < sl && seg[k] >= '0' && seg[k] <= '9') idx = idx * 10 + (size_t)(seg[k++] - '0');
            if (k == sl && idx < v->n) hit = &v->kids[idx];
        }
        v = hit;
    }
    return i < n ? NULL : v;
}

static int32_t compile_ref(cc *c, const nd_jv *ref) {
    size_t save;
    path_push(c, "$ref", 4, &save);
    const nd_jv *t = ref->type == ND_JSTRING ? resolve_ref(c->root, ref->str, ref->len) : NULL;
    if (!t) return cfail(c, "%s", "unresolvable $ref (only local #/... pointers)");
    for (size_t i = 0; i < c->nrefs; i++)
        if (c->refs[i].js == t) { path_pop(c, save); return c->refs[i].id; }
    /* an indirection node first, so a recursive reference finds it */
    int32_t id = new_node(c, K_ALT);
    int32_t *kid = malloc(sizeof *kid);
    if (id < 0 || !kid) { free(kid); return oom(c); }
    c->gr->v[id].kids = kid, c->gr->v[id].nkids = 1, kid[0] = -1;
    if (c->nrefs == c->crefs) {
        size_t nc = c->crefs ? c->crefs * 2 : 8;
        void *nr = realloc(c->refs, nc * sizeof *c->refs);
        if (!nr) return oom(c);
        c->refs = nr, c->crefs = nc;
    }
    c->refs[c->nrefs].js = t, c->refs[c->nrefs++].id = id;
    /* the target compiles at its own pointer, so errors inside name it (the
     * site's pointer waits in the pool: no path buffer on the stack) */
    size_t site = pool_put(c, c->path);
    if (site == SIZE_MAX || (c->nref[id] = pool_put_esc(c, ref->str, ref->len)) == SIZE_MAX) return oom(c);
    path_set(c, ref->str + 1, ref->len - 1);
    int32_t target = compile(c, t);
    snprintf(c->path, sizeof c->path, "%s", pool_at(c, site)), c->plen = strlen(c->path);
    if (target < 0) return -1;
    c->gr->v[id].kids[0] = target, c->norig[id] = target;
    path_pop(c, save);
    return id;
}

static int32_t alt_node(cc *c, const int32_t *alts, uint32_t n) {
    if (n == 1) return alts[0];
    int32_t id = new_node(c, K_ALT);
    int32_t *kids = malloc(n * sizeof *kids);
    if (id < 0 || !kids) { free(kids); return oom(c); }
    memcpy(kids, alts, n * sizeof *kids);
    c->gr->v[id].kids = kids, c->gr->v[id].nkids = n;
    return id;
}

static int32_t compile_anyof(cc *c, const nd_jv *list, const char *key) {
    size_t save, s2;
    path_push(c, key, strlen(key), &save);
    if (list->type != ND_JARRAY || list->n == 0 || list->n > 64)
        return cfail(c, "%s", "must be a non-empty array (at most 64 schemas)");
    int32_t alts[64];
    for (size_t i = 0; i < list->n; i++) {
        char idx[24];
        snprintf(idx, sizeof idx, "%zu", i);
        path_push(c, idx, strlen(idx), &s2);
        if ((alts[i] = compile(c, &list->kids[i])) < 0) return -1;
        path_pop(c, s2);
    }
    if (key[0] == 'o' && list->n > 1) { /* oneOf: disjointness is checked once the graph is complete */
        if (c->noneofs == c->coneofs) {
            size_t nc = c->coneofs ? c->coneofs * 2 : 8;
            oneof_check *no = realloc(c->oneofs, nc * sizeof *no);
            if (!no) return oom(c);
            c->oneofs = no, c->coneofs = nc;
        }
        oneof_check *k = &c->oneofs[c->noneofs];
        k->alts = malloc(list->n * sizeof *k->alts), k->n = (uint32_t)list->n;
        k->ptr = pool_put(c, c->path), k->tool = c->tool_index;
        if (!k->alts || k->ptr == SIZE_MAX) { free(k->alts); return oom(c); }
        memcpy(k->alts, alts, list->n * sizeof *alts);
        c->noneofs++;
    }
    path_pop(c, save);
    return alt_node(c, alts, (uint32_t)list->n);
}

static int32_t compile_enum(cc *c, const nd_jv *s, int types) {
    const nd_jv *e = nd_jv_get(s, "enum"), *k = nd_jv_get(s, "const");
    size_t save;
    path_push(c, e ? "enum" : "const", e ? 4 : 5, &save);
    if (e && k) return cfail(c, "%s", "enum together with const is unsupported");
    if (e && (e->type != ND_JARRAY || e->n == 0)) return cfail(c, "%s", "must be a non-empty array");
    size_t n = e ? e->n : 1;
    lit *ls = calloc(n, sizeof *ls);
    uint32_t w = 0;
    if (!ls) return oom(c);
    for (size_t i = 0; i < n; i++) {
        const nd_jv *v = e ? &e->kids[i] : k;
        if (types && !(jv_types(v) & types)) continue;
        size_t len = nd_jv_compact(v, c->ascii, NULL, 0);
        char *t = len < SIZE_MAX ? malloc(len + 1) : NULL;
        if (t && nd_jv_compact(v, c->ascii, t, len + 1) == len) t[len] = 0; /* texts end with NUL (messages, strtod) */
        else {
            free(t);
            for (uint32_t j = 0; j < w; j++) free(ls[j].s);
            free(ls);
            return oom(c);
        }
        ls[w].s = t, ls[w++].n = len;
    }
    if (!w) { free(ls); return cfail(c, "%s", "no value has the declared type"); }
    path_pop(c, save);
    return lit_node(c, ls, w);
}

static int parse_types(cc *c, const nd_jv *t, int *types) {
    size_t save;
    path_push(c, "type", 4, &save);
    size_t n = t->type == ND_JARRAY ? t->n : 1;
    *types = 0;
    for (size_t i = 0; i < n; i++) {
        const nd_jv *v = t->type == ND_JARRAY ? &t->kids[i] : t;
        size_t k = 0;
        while (k < N_OF(type_names) && !(v->type == ND_JSTRING && is_word(v->str, v->len, type_names[k]))) k++;
        if (k == N_OF(type_names)) return cfail(c, "%s", "unknown type"), -1;
        *types |= 1 << k;
    }
    if (!*types) return cfail(c, "%s", "empty type list"), -1;
    path_pop(c, save);
    return 0;
}

/* Without "type", the keywords present say which types can carry them. */
static int infer_types(const nd_jv *s) {
    static const char *const obj[] = {"properties", "required", "additionalProperties"};
    static const char *const arr[] = {"items", "minItems", "maxItems", "uniqueItems"};
    static const char *const str[] = {"minLength", "maxLength", "pattern", "format"};
    static const char *const num[] = {"minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf"};
    int t = 0;
    for (size_t i = 0; i < s->n; i++) {
        const char *k = s->kids[i].key;
        size_t kl = s->kids[i].klen;
        if (in_list(k, kl, obj, N_OF(obj))) t |= T_OBJECT;
        else if (in_list(k, kl, arr, N_OF(arr))) t |= T_ARRAY;
        else if (in_list(k, kl, str, N_OF(str))) t |= T_STRING;
        else if (in_list(k, kl, num, N_OF(num))) t |= T_NUMBER;
    }
    return t;
}

/* name: the property's name when Needle 3 may imply a range (NULL: none). */
static int32_t compile_typed(cc *c, const nd_jv *s, int type, const char *name, size_t nlen) {
    static const char *const bools[] = {"false", "true"}, *const nulls[] = {"null"};
    switch (type) {
    case T_STRING: return compile_string(c, s);
    case T_INTEGER: return compile_number(c, s, 1, name, nlen);
    case T_NUMBER: return compile_number(c, s, 0, name, nlen);
    case T_BOOLEAN: return lit_from_words(c, bools, 2);
    case T_NULL: return lit_from_words(c, nulls, 1);
    case T_OBJECT: return compile_object(c, s);
    default: return compile_array(c, s);
    }
}

/* 1 when the decoded string s[0..len) is a value of string node n. */
static int str_accepts(const gnode *n, const char *s, size_t len) {
    size_t k;
    uint32_t *cp = nd_utf8_to_cps(s, len, &k);
    int32_t st = 0;
    for (size_t i = 0; cp && i < k && st >= 0; i++) st = n->dfa->next[(size_t)st * n->dfa->nclasses + nd_dfa_class(n->dfa, cp[i])];
    int ok = cp && st >= 0 && n->dfa->accept[st] && k >= n->minlen && k <= n->maxlen;
    free(cp);
    return ok;
}

/* 1 when schema s has one of the keywords kws. */
static int in_any(const nd_jv *s, const char *const *kws, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (nd_jv_get(s, kws[i])) return 1;
    return 0;
}

/* The string node of s's own string keywords, for testing mined values:
 * its id, -2 when s has none, -3 when they do not compile (the schema's own
 * compile reports that, or not, as before), -1 when out of memory. */
static int32_t string_checker(cc *c, const nd_jv *s) {
    static const char *const kws[] = {"minLength", "maxLength", "pattern", "format"};
    if (!in_any(s, kws, N_OF(kws))) return -2;
    needle_error mine, *theirs = c->err;
    size_t plen = c->plen;
    memset(&mine, 0, sizeof mine);
    c->err = &mine;
    int32_t id = compile_string(c, s);
    c->err = theirs;
    path_pop(c, plen);
    if (id < 0 && mine.code == NEEDLE_E_NOMEM) return oom(c);
    return id < 0 ? -3 : id;
}

/* Needle 3: a schema with no enum or const whose description lists values
 * (grammar_v3_rules.c) is the enum of those its own string keywords accept.
 * Not for a "required": true or grounded property, nor through $ref (the
 * engine reads the target's description). Its id, -1 on an error, -2 when
 * the rule does not apply. */
static int32_t mined_enum(cc *c, const nd_jv *s, int grounded) {
    const nd_jv *d = nd_jv_get(s, "description"), *t = nd_jv_get(s, "type");
    const nd_jv *req = nd_jv_get(s, "required"), *gr = nd_jv_get(s, "grounded");
    if (!d || d->type != ND_JSTRING || nd_jv_get(s, "enum") || nd_jv_get(s, "const") || nd_jv_get(s, "$ref")) return -2;
    if (t && t->type != ND_JARRAY && !(t->type == ND_JSTRING && is_word(t->str, t->len, "string"))) return -2;
    if (grounded || (req && req->type == ND_JTRUE) || (gr && gr->type == ND_JTRUE)) return -2;
    size_t n;
    nd_mined *m = nd_v3_mine(d->str, d->len, &n);
    if (!m) return -2;
    int32_t check = string_checker(c, s);
    if (check == -3) { free(m); return -2; }
    lit *ls = check == -1 ? NULL : calloc(n, sizeof *ls);
    uint32_t w = 0;
    for (size_t i = 0; ls && i < n; i++) {
        const char *v = d->str + m[i].at;
        if (check >= 0 && !str_accepts(&c->gr->v[check], v, m[i].n)) continue;
        size_t len = nd_json_string(v, m[i].n, c->ascii, NULL, 0);
        if (!(ls[w].s = malloc(len + 1))) { while (w) free(ls[--w].s); free(ls), ls = NULL; break; }
        ls[w].n = nd_json_string(v, m[i].n, c->ascii, ls[w].s, len + 1);
        ls[w++].s[len] = 0;
    }
    free(m);
    if (!ls) return check == -1 ? -1 : oom(c);
    if (!w) { free(ls); return -2; }
    return lit_node(c, ls, w);
}

/* Recursion here follows the schema: at most ND_SCHEMA_DEPTH levels (the
 * JSON parser bounds the rest), however long the schema. */
static int32_t compile(cc *c, const nd_jv *s) {
    propref prop = c->prop; /* whose value s is: taken here, so the schemas inside do not see it */
    c->prop = (propref){NULL, 0, 0};
    if (++c->depth > ND_SCHEMA_DEPTH) {
        c->depth--;
        return cfail(c, "schema nests deeper than %d levels (subschemas and $ref hops)", ND_SCHEMA_DEPTH);
    }
    int32_t id = -1;
    if (s->type == ND_JTRUE) { id = any_node(c); goto out; }
    if (s->type != ND_JOBJECT) { cfail(c, "%s", "a schema must be an object or true"); goto out; }
    int constraints = 0;
    for (size_t i = 0; i < s->n; i++) {
        const nd_jv *k = &s->kids[i];
        if (in_list(k->key, k->klen, ignored_kw, N_OF(ignored_kw))) continue;
        if (!in_list(k->key, k->klen, constraint_kw, N_OF(constraint_kw))) {
            size_t save;
            path_push(c, k->key, k->klen, &save);
            cfail(c, "%s", "unsupported keyword");
            goto out;
        }
        constraints++;
    }
    if (c->v3 && (id = mined_enum(c, s, prop.grounded)) != -2) goto out;
    id = -1;
    const nd_jv *ref = nd_jv_get(s, "$ref"), *any = nd_jv_get(s, "anyOf"), *one = nd_jv_get(s, "oneOf");
    const nd_jv *all = nd_jv_get(s, "allOf"), *t = nd_jv_get(s, "type");
    if (ref || any || one || all) {
        if (constraints > 1) { cfail(c, "%s", "$ref/anyOf/oneOf/allOf with sibling constraints are unsupported"); goto out; }
        if (ref) c->prop = prop, id = compile_ref(c, ref); /* the target is still this property's value */
        else if (any || one) id = compile_anyof(c, any ? any : one, any ? "anyOf" : "oneOf");
        else if (all->type != ND_JARRAY || all->n != 1) {
            size_t save;
            path_push(c, "allOf", 5, &save);
            cfail(c, "%s", "only a single-schema allOf is supported");
        } else {
            size_t save, s2;
            path_push(c, "allOf", 5, &save);
            path_push(c, "0", 1, &s2);
            c->prop = prop;
            id = compile(c, &all->kids[0]);
            path_pop(c, save);
        }
        c->prop = (propref){NULL, 0, 0}; /* a $ref compiled before took nothing */
        goto out;
    }
    int types = 0;
    if (t && parse_types(c, t, &types)) goto out;
    if (nd_jv_get(s, "enum") || nd_jv_get(s, "const")) {
        if (constraints > 1 + (t != NULL)) { cfail(c, "%s", "enum/const with constraints other than type are unsupported"); goto out; }
        id = compile_enum(c, s, types);
        goto out;
    }
    if (!t && !(types = infer_types(s))) { id = any_node(c); goto out; }
    if ((types & T_NUMBER) && (types & T_INTEGER)) types &= ~T_INTEGER; /* number covers integer */
    int32_t alts[8];
    uint32_t n = 0;
    int named = c->v3 && t && t->type == ND_JSTRING; /* the engine implies ranges for a plain "type" only */
    for (int k = 0; k < 7; k++)
        if (types >> k & 1) {
            if ((alts[n] = compile_typed(c, s, 1 << k, named ? prop.s : NULL, prop.n)) < 0) goto out;
            n++;
        }
    id = alt_node(c, alts, n);
out:
    c->depth--;
    return id;
}

/* ---- the whole graph: flattening, costs, and the checks per tool ---- */

/* Every ALT's alternatives become the non-ALT nodes it reaches through
 * ALTs (an explicit stack; ALT cycles such as {"$ref":"#"} add nothing), so
 * the matcher and the completion never walk ALT chains. */
static int flatten_alts(graph *gr) {
    size_t N = gr->n;
    int32_t **nk = calloc(N + 1, sizeof *nk);
    uint32_t *nn = calloc(N + 1, sizeof *nn);
    size_t *stamp = calloc(N + 1, sizeof *stamp);
    int32_t *stack = malloc((N + 1) * sizeof *stack);
    int rc = -1;
    if (!nk || !nn || !stamp || !stack) goto out;
    for (size_t i = 0; i < N; i++) {
        if (gr->v[i].kind != K_ALT) continue;
        size_t sp = 0, cap = 0;
        int32_t *leaves = NULL;
        stack[sp++] = (int32_t)i, stamp[i] = i + 1;
        while (sp) {
            const gnode *u = &gr->v[stack[--sp]];
            for (uint32_t k = 0; k < u->nkids; k++) {
                int32_t t = u->kids[k];
                if (t < 0 || stamp[t] == i + 1) continue;
                stamp[t] = i + 1;
                if (gr->v[t].kind == K_ALT) { stack[sp++] = t; continue; }
                if (nn[i] == cap) {
                    cap = cap ? cap * 2 : 4;
                    int32_t *nl = realloc(leaves, cap * sizeof *nl);
                    if (!nl) { free(leaves); goto out; }
                    leaves = nl;
                }
                leaves[nn[i]++] = t;
            }
        }
        nk[i] = leaves;
    }
    for (size_t i = 0; i < N; i++)
        if (gr->v[i].kind == K_ALT) free(gr->v[i].kids), gr->v[i].kids = nk[i], gr->v[i].nkids = nn[i], nk[i] = NULL;
    rc = 0;
out:
    for (size_t i = 0; nk && i < N; i++) free(nk[i]);
    free(nk), free(nn), free(stamp), free(stack);
    return rc;
}

/* An error about a tool found after the build (its name from the tools). */
static int gfail(cc *c, size_t tool, const char *ptr, const char *fmt, ...) {
    char name[96];
    const nd_jv *nm = nd_jv_get(&c->tools->kids[tool], "name");
    nd_escape(name, sizeof name, nm->str, nm->len, 60);
    va_list ap;
    va_start(ap, fmt);
    int rc = tfail(c, name, ptr, fmt, ap);
    va_end(ap);
    return rc;
}

/* "ptr/properties/<key>" for key text kt (a JSON string literal). */
static void key_ptr(const char *ptr, const lit *kt, char *out, size_t cap) {
    nd_json *d = nd_json_parse(kt->s, kt->n, 1, NULL);
    const nd_jv *k = d ? nd_json_root(d) : NULL;
    char e[512];
    size_t w = 0;
    for (size_t i = 0; k && i < k->len && w + 2 < sizeof e; i++)
        if (k->str[i] == '~' || k->str[i] == '/') e[w++] = '~', e[w++] = k->str[i] == '~' ? '0' : '1';
        else e[w++] = k->str[i];
    char shown[600];
    nd_escape(shown, sizeof shown, e, w, 200);
    snprintf(out, cap, "%s/properties/%s", ptr, shown);
    nd_json_free(d);
}

/* " (#/a -> #/b -> #/a)": the $refs of the cycle from indirection id, up
 * to the first repeat ("" when id is no $ref). */
static void ref_chain(const cc *c, int32_t id, char *out, size_t cap) {
    int32_t on[8];
    size_t w = 0;
    out[0] = 0;
    for (int32_t r = id, k = 0; r >= 0 && k < 8 && c->nref[r] != SIZE_MAX && w < cap; r = c->norig[r]) {
        w += (size_t)snprintf(out + w, cap - w, "%s%s", k ? " -> " : " (", pool_at(c, c->nref[r]));
        int again = 0;
        for (int j = 0; j < k; j++) again |= on[j] == r;
        if (again) break;
        on[k++] = r;
    }
    if (w && w + 2 < cap) memcpy(out + w, ")", 2);
}

/* The arguments of tool t (node args, at depth 2 under the call array and
 * the call object) have no value that fits: follows one unwritable
 * required part down (a loop, at most ND_MAX_DEPTH steps) and names it. */
static int explain_unwritable(cc *c, size_t t, int32_t args) {
    const graph *gr = c->gr;
    uint8_t *seen = calloc(gr->n + 1, 1);
    if (!seen) return oom(c);
    char via[1400];
    snprintf(via, sizeof via, "%s", pool_at(c, c->nptr[args]));
    int32_t id = args;
    int rc = 0;
    for (int d = 2;; ) {
        const gnode *n = &gr->v[id];
        const char *ptr = pool_at(c, c->nptr[id]);
        if (n->kind == K_ALT) {
            if (!n->nkids) { /* only ALTs reachable: a cycle of $refs */
                char chain[200];
                ref_chain(c, id, chain, sizeof chain);
                rc = gfail(c, t, ptr, "$ref cycle with no base case%s", chain);
                break;
            }
            uint32_t k = 0; /* every alternative is unwritable here: follow the first */
            while (k + 1 < n->nkids && gr->v[n->kids[k]].kind == K_ALT) k++;
            id = n->kids[k];
            continue;
        }
        if (d >= ND_MAX_DEPTH) {
            rc = gfail(c, t, via, "required nesting goes deeper than the %d-level limit", ND_MAX_DEPTH);
            break;
        }
        if (seen[id]) {
            rc = gfail(c, t, via, "required recursion never ends (no base case within the %d-level limit)", ND_MAX_DEPTH);
            break;
        }
        seen[id] = 1;
        int32_t next = -1;
        if (n->kind == K_OBJ) {
            for (uint32_t k = 0; k < n->nlits && next < 0; k++)
                if ((n->required >> k & 1) && nd_cost(gr, n->kids[k], d + 1) == ND_INF_COST)
                    next = n->kids[k], key_ptr(ptr, &n->lits[k], via, sizeof via);
        } else if (n->kind == K_ARR && n->minit > 0 && nd_cost(gr, n->items, d + 1) == ND_INF_COST) {
            next = n->items;
            snprintf(via, sizeof via, "%s/items", ptr);
        }
        if (next < 0) {
            rc = gfail(c, t, ptr, "its shortest value exceeds the %u-byte output limit", ND_MAX_OUTPUT);
            break;
        }
        id = next, d++;
    }
    free(seen);
    return rc;
}

/* parameters must admit only objects: each alternative an object schema,
 * or literals that are objects. */
static int check_params(cc *c, size_t t, int32_t args) {
    const graph *gr = c->gr;
    uint32_t nl;
    const int32_t *lv = nd_leaves_of(gr, &args, &nl);
    for (uint32_t i = 0; i < nl; i++) {
        const gnode *n = &gr->v[lv[i]];
        int ok = n->kind == K_OBJ;
        if (n->kind == K_LIT) {
            ok = 1;
            for (uint32_t k = 0; k < n->nlits; k++) ok &= n->lits[k].s[0] == '{';
        }
        if (ok) continue;
        static const char *const what[] = {"literals that are not objects", "strings", "numbers", "arrays", "objects", ""};
        return gfail(c, t, "", "parameters must be an object schema (\"type\":\"object\", or \"properties\" without a type); "
                     "this one also accepts %s", args == c->any ? "any value" : what[n->kind]);
    }
    return 0;
}

/* oneOf: every pair of branches provably disjoint (grammar_oneof.c). */
static int check_oneof(cc *c, const oneof_check *k) {
    char why[160];
    for (uint32_t i = 0; i < k->n; i++)
        for (uint32_t j = i + 1; j < k->n; j++)
            if (nd_oneof_overlap(c->gr, k->alts[i], k->alts[j], why, sizeof why))
                return gfail(c, k->tool, pool_at(c, k->ptr), "branches %u and %u overlap (%s); oneOf needs disjoint branches", i, j, why);
    return 0;
}

/* One call: {"name":<the tool's name>,"arguments":<args>}. */
static int32_t call_node(cc *c, const nd_jv *name, int32_t args) {
    size_t len = nd_json_string(name->str, name->len, c->ascii, NULL, 0);
    lit *ls = calloc(1, sizeof *ls);
    if (ls) ls->s = malloc(len + 1), ls->n = len;
    if (!ls || !ls->s) { free(ls); return oom(c); }
    nd_json_string(name->str, name->len, c->ascii, ls->s, len + 1);
    ls->s[len] = 0;
    int32_t nameid = lit_node(c, ls, 1);
    int32_t obj = new_node(c, K_OBJ);
    static const char *const keys[] = {"\"arguments\"", "\"name\""};
    lit *ks = calloc(2, sizeof *ks);
    int32_t *vs = malloc(2 * sizeof *vs);
    if (nameid < 0 || obj < 0 || !ks || !vs) { free(ks), free(vs); return oom(c); }
    for (int k = 0; k < 2; k++) {
        ks[k].n = strlen(keys[k]);
        ks[k].s = malloc(ks[k].n + 1);
        if (ks[k].s) memcpy(ks[k].s, keys[k], ks[k].n + 1);
    }
    vs[0] = args, vs[1] = nameid;
    gnode *o = &c->gr->v[obj];
    /* The model was trained on {"name":..,"arguments":..}: the name comes first. */
    o->lits = ks, o->nlits = 2, o->kids = vs, o->nkids = 2, o->required = 3, o->leading = 2;
    if (!ks[0].s || !ks[1].s) return oom(c);
    return obj;
}

/* Every tool decided now: a shortest value exists and the search finds it,
 * the arguments are objects, and every oneOf is disjoint. */
static int check_tools(cc *c, const int32_t *argv) {
    const graph *gr = c->gr;
    int rc;
    for (size_t i = 0; i < c->tools->n; i++) {
        if (nd_cost(gr, argv[i], 2) == ND_INF_COST) return explain_unwritable(c, i, argv[i]);
        if ((rc = check_params(c, i, argv[i]))) return rc;
        for (size_t k = 0; k < c->noneofs; k++)
            if (c->oneofs[k].tool == i && (rc = check_oneof(c, &c->oneofs[k]))) return rc;
        if (!nd_graph_can_complete(gr, argv[i], 2))
            return gfail(c, i, "", "the completion search finds no value (a uniqueItems array may need more distinct items than exist)");
    }
    return 0;
}

/* The call array: [ {"name":<tool>,"arguments":<parameters>} ... ]. */
int nd_build_graph(graph *gr, const nd_jv *tools, uint32_t min_calls, unsigned flags, needle_error *err) {
    if (tools->type != ND_JARRAY) return nd_fail(err, NEEDLE_E_SCHEMA, "tools: must be a JSON array");
    if (tools->n > 1024) return nd_fail(err, NEEDLE_E_SCHEMA, "tools: more than 1024 tools");
    cc c = {0};
    c.gr = gr, c.err = err, c.any = -1, c.tools = tools;
    c.ascii = (flags & ND_GRAMMAR_ASCII) != 0, c.v3 = (flags & ND_GRAMMAR_NEEDLE3) != 0;
    int32_t *calls = malloc((tools->n ? tools->n : 1) * sizeof *calls);
    int32_t *argv = malloc((tools->n ? tools->n : 1) * sizeof *argv);
    int rc = -1;
    if (!calls || !argv) { rc = oom(&c); goto out; }
    for (size_t i = 0; i < tools->n; i++) {
        const nd_jv *tool = &tools->kids[i], *name = nd_jv_get(tool, "name");
        if (!name || name->type != ND_JSTRING || !name->len) {
            rc = nd_fail(err, NEEDLE_E_SCHEMA, "tools[%zu]: \"name\" must be a non-empty string", i);
            goto out;
        }
        if (name->len > MAX_NAME_BYTES) { /* OpenAI's limit: longer names are no names but prompt text */
            rc = nd_fail(err, NEEDLE_E_SCHEMA, "tools[%zu]: \"name\" is %zu bytes, over the limit of %d", i,
                         name->len, MAX_NAME_BYTES);
            goto out;
        }
        nd_escape(c.tool, sizeof c.tool, name->str, name->len, 60);
        for (size_t j = 0; j < i; j++) {
            const nd_jv *other = nd_jv_get(&tools->kids[j], "name");
            if (other->len == name->len && !memcmp(other->str, name->str, name->len)) {
                rc = nd_fail(err, NEEDLE_E_SCHEMA, "tool \"%s\": declared twice", c.tool);
                goto out;
            }
        }
        c.tool_index = i, c.root = nd_jv_get(tool, "parameters"), c.nrefs = 0, c.plen = 0, c.path[0] = 0;
        int32_t args = c.root ? compile(&c, c.root) : new_node(&c, K_OBJ); /* no parameters: {} */
        if (args < 0) goto out;
        argv[i] = args;
        int32_t obj = call_node(&c, name, args);
        if (obj < 0) goto out;
        calls[i] = obj;
    }
    int32_t item = tools->n ? alt_node(&c, calls, (uint32_t)tools->n) : -1;
    int32_t root = new_node(&c, K_ARR);
    if (root < 0 || (tools->n && item < 0)) goto out;
    gr->v[root].items = item, gr->v[root].maxit = tools->n ? ND_MAX_CALLS : 0;
    gr->v[root].minit = tools->n ? min_calls : 0;
    gr->root = root;
    if (flatten_alts(gr) || nd_graph_costs(gr)) { rc = oom(&c); goto out; }
    if ((rc = check_tools(&c, argv))) goto out;
    rc = 0;
out:
    free(calls), free(argv), free(c.refs);
    free(c.nptr), free(c.nref), free(c.norig), free(c.pool);
    for (size_t k = 0; k < c.noneofs; k++) free(c.oneofs[k].alts);
    free(c.oneofs);
    return rc;
}
