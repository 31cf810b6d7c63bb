/* grammar_schema.c: the tool-call grammar's schemas -> a graph of value
 * nodes (gnode, grammar_internal.h). The tools array becomes the call array
 * [{"name":<tool>,"arguments":<parameters>},...]; a schema becomes literals
 * (enum, const, booleans, null), a string DFA (pattern, format, lengths), a
 * number with scaled-integer bounds, an array, an object, or alternatives
 * (anyOf, oneOf, several types). A $ref target gets an indirection node
 * first, so a recursive reference finds it. Errors name the tool and the
 * JSON pointer of the offending keyword.
 *
 * Decisions (documented in the report and README):
 * - additionalProperties: absent/false forbid undeclared keys; true or a
 *   schema are accepted but the output still uses declared keys only (valid
 *   either way). An object schema without properties admits only {}.
 * - enum/const values must be written exactly as Python's json.dumps writes
 *   them.
 * - Numbers are plain decimals (no exponent), at most 6 fraction digits
 *   (more when multipleOf needs them, up to 9) and |x| < 10^(18-F); integers
 *   have |x| < 10^18.
 * - oneOf compiles like anyOf: a value matching two branches is possible
 *   when the branches overlap. */
#include "grammar_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive.h" /* nd_fail */

#define ND_MAX_CALLS 32     /* calls per array */

void nd_graph_free(graph *gr) {
    for (size_t i = 0; i < gr->n; i++) {
        for (uint32_t k = 0; k < gr->v[i].nlits; k++) free(gr->v[i].lits[k].s);
        free(gr->v[i].lits), free(gr->v[i].kids);
        nd_dfa_free(gr->v[i].dfa);
    }
    free(gr->v);
}

typedef struct {
    graph *gr;
    needle_error *err;
    const char *tool;
    const nd_jv *root;
    struct { const nd_jv *js; int32_t id; } *refs;
    size_t nrefs, crefs;
    char path[512];
    size_t plen;
    int32_t any;
    int depth;
} cc;

static int32_t cfail(cc *c, const char *fmt, const char *arg) {
    char msg[160];
    snprintf(msg, sizeof msg, fmt, arg);
    nd_fail(c->err, NEEDLE_E_SCHEMA, "tool \"%.60s\": %s: %s", c->tool, c->plen ? c->path : "/", msg);
    return -1;
}

static void path_push(cc *c, const char *seg, size_t n, size_t *save) {
    *save = c->plen;
    if (c->plen + 2 < sizeof c->path) c->path[c->plen++] = '/';
    for (size_t i = 0; i < n && c->plen + 3 < sizeof c->path; i++) {
        if (seg[i] == '~' || seg[i] == '/') c->path[c->plen++] = '~', c->path[c->plen++] = seg[i] == '~' ? '0' : '1';
        else c->path[c->plen++] = seg[i];
    }
    c->path[c->plen] = 0;
}
static void path_pop(cc *c, size_t save) { c->plen = save, c->path[save] = 0; }

static int32_t new_node(cc *c, int kind) {
    graph *gr = c->gr;
    if (gr->n == gr->cap) {
        size_t nc = gr->cap ? gr->cap * 2 : 32;
        gnode *nv = nc < SIZE_MAX / sizeof *nv ? realloc(gr->v, nc * sizeof *nv) : NULL;
        if (!nv) { nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"); return -1; }
        gr->v = nv, gr->cap = nc;
    }
    memset(&gr->v[gr->n], 0, sizeof gr->v[0]);
    gr->v[gr->n].kind = kind;
    gr->v[gr->n].items = -1;
    return (int32_t)gr->n++;
}

static int cmp_lit(const void *x, const void *y) {
    const lit *a = x, *b = y;
    int r = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
    return r ? r : (a->n > b->n) - (a->n < b->n);
}

/* A literal node from rendered texts (takes ownership; sorts, dedupes). */
static int32_t lit_node(cc *c, lit *ls, uint32_t n) {
    qsort(ls, n, sizeof *ls, cmp_lit);
    uint32_t w = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (w && !cmp_lit(&ls[w - 1], &ls[i])) { free(ls[i].s); continue; }
        ls[w++] = ls[i];
    }
    int32_t id = new_node(c, K_LIT);
    if (id < 0) { for (uint32_t i = 0; i < w; i++) free(ls[i].s); free(ls); return -1; }
    c->gr->v[id].lits = ls, c->gr->v[id].nlits = w;
    return id;
}

static int lit_from_words(cc *c, const char *const *words, uint32_t n) {
    lit *ls = calloc(n, sizeof *ls);
    if (!ls) return nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"), -1;
    for (uint32_t i = 0; i < n; i++) {
        ls[i].n = strlen(words[i]);
        ls[i].s = malloc(ls[i].n + 1);
        if (!ls[i].s) { while (i--) free(ls[i].s); free(ls); return nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"), -1; }
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

static int32_t compile(cc *c, const nd_jv *s);

static int32_t str_node(cc *c, const char *pat, size_t plen, uint32_t minlen, uint32_t maxlen) {
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
    n->dfa = d, n->minlen = minlen, n->maxlen = maxlen;
    return id;
}

/* Formats as patterns that admit only values every common validator
 * (ajv-formats "full" included) accepts: a safe subset of each format. */
static const char *format_pattern(const char *f) {
#define ND_DATE "[0-9]{4}-((0[13578]|1[02])-(0[1-9]|[12][0-9]|3[01])|(0[469]|11)-(0[1-9]|[12][0-9]|30)|02-(0[1-9]|1[0-9]|2[0-8]))"
#define ND_TIME "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]{1,6})?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])"
    if (!strcmp(f, "date")) return "^" ND_DATE "$";
    if (!strcmp(f, "time")) return "^" ND_TIME "$";
    if (!strcmp(f, "date-time")) return "^" ND_DATE "T" ND_TIME "$";
    if (!strcmp(f, "email"))
        return "^[A-Za-z0-9_+-]{1,32}(\\.[A-Za-z0-9_+-]{1,32}){0,3}@([A-Za-z0-9]{1,30}\\.){1,3}[A-Za-z]{2,10}$";
    if (!strcmp(f, "uri"))
        return "^https?://[A-Za-z0-9-]{1,40}(\\.[A-Za-z0-9-]{1,40}){0,4}(/[A-Za-z0-9._~-]*)*(\\?[A-Za-z0-9._~=&-]*)?$";
    if (!strcmp(f, "uuid"))
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
        const char *fp = format_pattern(f->str);
        path_push(c, "format", 6, &save);
        if (!fp) return cfail(c, "unsupported format \"%.40s\"", f->str);
        int32_t id = str_node(c, fp, strlen(fp), mn, mx);
        path_pop(c, save);
        return id;
    }
    if (p) {
        path_push(c, "pattern", 7, &save);
        int32_t id = str_node(c, p->str, p->len, mn, mx);
        path_pop(c, save);
        return id;
    }
    return str_node(c, "^[^]*$", 6, mn, mx);
}

const int64_t nd_pow10s[19] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
    1000000000, 10000000000, 100000000000, 1000000000000, 10000000000000, 100000000000000,
    1000000000000000, 10000000000000000, 100000000000000000, 1000000000000000000};

/* x scaled to an integer: dir +1 = ceiling, -1 = floor, with a tolerance so
 * that 0.1 * 10^6 counts as exactly 100000. */
static int64_t scale_bound(double x, int F, int dir, int *exact) {
    double v = x * (double)nd_pow10s[F];
    if (v > 1e18) v = 1e18;
    if (v < -1e18) v = -1e18;
    double r = nearbyint(v);
    *exact = fabs(v - r) <= 1e-9 * (fabs(r) > 1 ? fabs(r) : 1);
    if (*exact) v = r;
    else v = dir > 0 ? ceil(v) : floor(v);
    if (v > (double)ND_MAXMAG) return ND_MAXMAG;
    if (v < -(double)ND_MAXMAG) return -ND_MAXMAG;
    return (int64_t)v;
}


static int num_bound(cc *c, const nd_jv *s, gnode *n, const char *key, int is_min, int excl) {
    const nd_jv *v = nd_jv_get(s, key);
    if (!v) return 0;
    if (v->type == ND_JTRUE || v->type == ND_JFALSE) return 0; /* draft-4 flag, read by the caller */
    size_t save;
    path_push(c, key, strlen(key), &save);
    if (v->type != ND_JNUMBER || !isfinite(v->num)) return cfail(c, "%s", "must be a number");
    path_pop(c, save);
    int exact;
    int64_t b = scale_bound(v->num, n->F, is_min ? 1 : -1, &exact);
    if (excl && exact) b += is_min ? 1 : -1;
    if (is_min) {
        if (b > n->lo) n->lo = b;
        if (!n->has_dlo || v->num > n->dlo || (v->num == n->dlo && excl)) n->dlo = v->num, n->dlo_ex = (uint8_t)excl;
        n->has_dlo = 1;
    } else {
        if (b < n->hi) n->hi = b;
        if (!n->has_dhi || v->num < n->dhi || (v->num == n->dhi && excl)) n->dhi = v->num, n->dhi_ex = (uint8_t)excl;
        n->has_dhi = 1;
    }
    return 0;
}

static int32_t compile_number(cc *c, const nd_jv *s, int integer) {
    gnode n = {0};
    n.kind = K_NUM, n.F = integer ? 0 : 6, n.mult = 1, n.items = -1;
    const nd_jv *m = nd_jv_get(s, "multipleOf");
    if (m) {
        size_t save;
        path_push(c, "multipleOf", 10, &save);
        if (m->type != ND_JNUMBER || !(m->num > 0) || !isfinite(m->num)) return cfail(c, "%s", "must be a positive number");
        int d = 0;
        while (d <= 9 && fabs(m->num * (double)nd_pow10s[d] - nearbyint(m->num * (double)nd_pow10s[d])) >
                             1e-9 * m->num * (double)nd_pow10s[d])
            d++;
        if (d > 9 || (integer && d > 0)) return cfail(c, "%s", "multipleOf must be a decimal (an integer for integers) with at most 9 fraction digits");
        if (d > n.F) n.F = d;
        double sm = nearbyint(m->num * (double)nd_pow10s[n.F]);
        if (sm > 1e17) return cfail(c, "%s", "multipleOf too large");
        n.mult = (int64_t)sm, n.dmult = m->num;
        path_pop(c, save);
    }
    n.lo = -ND_MAXMAG, n.hi = ND_MAXMAG;
    const nd_jv *xmin = nd_jv_get(s, "exclusiveMinimum"), *xmax = nd_jv_get(s, "exclusiveMaximum");
    if (num_bound(c, s, &n, "minimum", 1, xmin && xmin->type == ND_JTRUE) ||
        num_bound(c, s, &n, "maximum", 0, xmax && xmax->type == ND_JTRUE) ||
        num_bound(c, s, &n, "exclusiveMinimum", 1, 1) || num_bound(c, s, &n, "exclusiveMaximum", 0, 1))
        return -1;
    int64_t first = nd_ceil_div(n.lo, n.mult) * n.mult;
    if (n.lo > n.hi || first > n.hi) return cfail(c, "%s", "no number satisfies the bounds");
    int32_t id = new_node(c, K_NUM);
    if (id >= 0) c->gr->v[id] = n;
    return id;
}

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
        else if (in->kind == K_NUM && in->F == 0 && in->hi - in->lo < 64 * in->mult)
            domain = (uint64_t)((in->hi - nd_ceil_div(in->lo, in->mult) * in->mult) / in->mult + 1);
        n->small = domain <= 64;
        if (domain < n->maxit) n->maxit = (uint32_t)domain;
        if (n->minit > n->maxit) return cfail(c, "%s", "minItems exceeds the number of distinct values");
    }
    if (n->maxit > (uint32_t)ND_MAX_OUTPUT) n->maxit = ND_MAX_OUTPUT;
    return id;
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
    int32_t id = -1;
    if (!keys || !vals) { nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"); goto out; }
    for (size_t i = 0; i < np; i++) {
        const nd_jv *k = &props->kids[i];
        if (nd_jv_get(props, k->key) != k) { cfail(c, "duplicate property \"%.40s\"", k->key); goto out; }
        size_t n = nd_json_string(k->key, k->klen, NULL, 0);
        keys[i].s = malloc(n + 1);
        if (!keys[i].s) { nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"); goto out; }
        keys[i].n = nd_json_string(k->key, k->klen, keys[i].s, n + 1);
        size_t s1, s2;
        path_push(c, "properties", 10, &s1);
        path_push(c, k->key, k->klen, &s2);
        vals[i] = compile(c, k);
        path_pop(c, s1);
        if (vals[i] < 0) goto out;
    }
    /* sort keys, carrying values (selection sort: at most 64) */
    for (size_t i = 0; i < np; i++)
        for (size_t j = i + 1; j < np; j++)
            if (cmp_lit(&keys[j], &keys[i]) < 0) {
                lit t = keys[i]; keys[i] = keys[j], keys[j] = t;
                int32_t v = vals[i]; vals[i] = vals[j], vals[j] = v;
            }
    uint64_t required = 0;
    for (size_t r = 0; req && r < req->n; r++) {
        const nd_jv *name = &req->kids[r];
        if (name->type != ND_JSTRING) { cfail(c, "%s", "required entries must be strings"); goto out; }
        size_t i = 0;
        while (i < np && !(props->kids[i].klen == name->len && !memcmp(props->kids[i].key, name->str, name->len))) i++;
        if (i == np) { cfail(c, "required property \"%.40s\" is not declared in properties", name->str); goto out; }
        char buf[256];
        size_t n = nd_json_string(name->str, name->len, buf, sizeof buf);
        for (size_t k = 0; k < np; k++)
            if (keys[k].n == n && n <= sizeof buf && !memcmp(keys[k].s, buf, n)) required |= 1ull << k;
    }
    id = new_node(c, K_OBJ);
    if (id < 0) goto out;
    gnode *o = &c->gr->v[id];
    o->lits = keys, o->nlits = (uint32_t)np, o->kids = vals, o->nkids = (uint32_t)np, o->required = required;
    return id;
out:
    for (size_t i = 0; keys && i < np; i++) free(keys[i].s);
    free(keys), free(vals);
    return id;
}

/* Any JSON value (an absent "items", a true schema): strings, numbers,
 * booleans, null, arrays of any values, and the empty object. */
static int32_t any_node(cc *c) {
    if (c->any >= 0) return c->any;
    int32_t id = new_node(c, K_ALT);
    if (id < 0) return -1;
    c->any = id;
    static const char *const words[] = {"false", "null", "true", "{}"};
    int32_t k[4] = {str_node(c, "^[^]*$", 6, 0, UINT32_MAX), -1, lit_from_words(c, words, 4), -1};
    nd_jv none = {0};
    none.type = ND_JOBJECT;
    k[1] = compile_number(c, &none, 0);
    k[3] = new_node(c, K_ARR);
    int32_t *kids = malloc(4 * sizeof *kids);
    if (k[0] < 0 || k[1] < 0 || k[2] < 0 || k[3] < 0 || !kids) { free(kids); return -1; }
    c->gr->v[k[3]].items = id, c->gr->v[k[3]].maxit = UINT32_MAX;
    memcpy(kids, k, sizeof k);
    c->gr->v[id].kids = kids, c->gr->v[id].nkids = 4;
    return id;
}

static const char *const ignored_kw[] = {"description", "title", "default", "examples", "$schema",
    "$id", "$comment", "$defs", "definitions"};
static const char *const constraint_kw[] = {"type", "properties", "required", "additionalProperties",
    "enum", "const", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf",
    "minLength", "maxLength", "pattern", "format", "items", "minItems", "maxItems", "uniqueItems",
    "$ref", "anyOf", "oneOf", "allOf"};

static int in_list(const char *k, size_t kl, const char *const *list, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (strlen(list[i]) == kl && !memcmp(list[i], k, kl)) return 1;
    return 0;
}
#define N_OF(a) (sizeof a / sizeof a[0])

/* Resolves "#/a/b" against the tool's parameters (JSON pointer, ~0 ~1). */
static const nd_jv *resolve_ref(const nd_jv *root, const char *ref) {
    if (ref[0] != '#') return NULL;
    const nd_jv *v = root;
    const char *p = ref + 1;
    while (*p == '/' && v) {
        char seg[256];
        size_t n = 0;
        for (p++; *p && *p != '/'; p++) {
            char ch = *p;
            if (ch == '~' && (p[1] == '0' || p[1] == '1')) ch = *++p == '0' ? '~' : '/';
            if (n + 1 < sizeof seg) seg[n++] = ch;
        }
        seg[n] = 0;
        if (v->type == ND_JOBJECT) v = nd_jv_get(v, seg);
        else if (v->type == ND_JARRAY) {
            char *end;
            unsigned long i = strtoul(seg, &end, 10);
            v = *seg && !*end && i < v->n ? &v->kids[i] : NULL;
        } else v = NULL;
    }
    return *p ? NULL : v;
}

static int32_t compile_ref(cc *c, const nd_jv *ref) {
    size_t save;
    path_push(c, "$ref", 4, &save);
    const nd_jv *t = ref->type == ND_JSTRING ? resolve_ref(c->root, ref->str) : NULL;
    if (!t) return cfail(c, "%s", "unresolvable $ref (only local #/... pointers)");
    for (size_t i = 0; i < c->nrefs; i++)
        if (c->refs[i].js == t) { path_pop(c, save); return c->refs[i].id; }
    /* an indirection node first, so a recursive reference finds it */
    int32_t id = new_node(c, K_ALT);
    int32_t *kid = malloc(sizeof *kid);
    if (id < 0 || !kid) { free(kid); return nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"), -1; }
    c->gr->v[id].kids = kid, c->gr->v[id].nkids = 1, kid[0] = -1;
    if (c->nrefs == c->crefs) {
        size_t nc = c->crefs ? c->crefs * 2 : 8;
        void *nr = realloc(c->refs, nc * sizeof *c->refs);
        if (!nr) return nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"), -1;
        c->refs = nr, c->crefs = nc;
    }
    c->refs[c->nrefs].js = t, c->refs[c->nrefs++].id = id;
    int32_t target = compile(c, t);
    if (target < 0) return -1;
    c->gr->v[id].kids[0] = target;
    path_pop(c, save);
    return id;
}

static int32_t alt_node(cc *c, const int32_t *alts, uint32_t n) {
    if (n == 1) return alts[0];
    int32_t id = new_node(c, K_ALT);
    int32_t *kids = malloc(n * sizeof *kids);
    if (id < 0 || !kids) { free(kids); return nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"), -1; }
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
    if (!ls) return nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"), -1;
    for (size_t i = 0; i < n; i++) {
        const nd_jv *v = e ? &e->kids[i] : k;
        if (types && !(jv_types(v) & types)) continue;
        size_t len = nd_jv_compact(v, NULL, 0);
        char *t = len < SIZE_MAX ? malloc(len + 1) : NULL;
        if (!t || nd_jv_compact(v, t, len + 1) != len) {
            free(t);
            for (uint32_t j = 0; j < w; j++) free(ls[j].s);
            free(ls);
            return nd_fail(c->err, NEEDLE_E_NOMEM, "grammar: out of memory"), -1;
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
        while (k < N_OF(type_names) && !(v->type == ND_JSTRING && !strcmp(v->str, type_names[k]))) k++;
        if (k == N_OF(type_names)) return cfail(c, "%s", "unknown type"), -1;
        *types |= 1 << k;
    }
    if (!*types) return cfail(c, "%s", "empty type list"), -1;
    path_pop(c, save);
    return 0;
}

/* Without "type", the keywords present say which types can carry them. */
static int infer_types(const nd_jv *s) {
    int t = 0;
    for (size_t i = 0; i < s->n; i++) {
        const char *k = s->kids[i].key;
        if (!strcmp(k, "properties") || !strcmp(k, "required") || !strcmp(k, "additionalProperties")) t |= T_OBJECT;
        else if (!strcmp(k, "items") || !strcmp(k, "minItems") || !strcmp(k, "maxItems") || !strcmp(k, "uniqueItems")) t |= T_ARRAY;
        else if (!strcmp(k, "minLength") || !strcmp(k, "maxLength") || !strcmp(k, "pattern") || !strcmp(k, "format")) t |= T_STRING;
        else if (!strcmp(k, "minimum") || !strcmp(k, "maximum") || !strcmp(k, "exclusiveMinimum") ||
                 !strcmp(k, "exclusiveMaximum") || !strcmp(k, "multipleOf")) t |= T_NUMBER;
    }
    return t;
}

static int32_t compile_typed(cc *c, const nd_jv *s, int type) {
    static const char *const bools[] = {"false", "true"}, *const nulls[] = {"null"};
    switch (type) {
    case T_STRING: return compile_string(c, s);
    case T_INTEGER: return compile_number(c, s, 1);
    case T_NUMBER: return compile_number(c, s, 0);
    case T_BOOLEAN: return lit_from_words(c, bools, 2);
    case T_NULL: return lit_from_words(c, nulls, 1);
    case T_OBJECT: return compile_object(c, s);
    default: return compile_array(c, s);
    }
}

static int32_t compile(cc *c, const nd_jv *s) {
    if (++c->depth > 64) return cfail(c, "%s", "schema nested too deep");
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
    const nd_jv *ref = nd_jv_get(s, "$ref"), *any = nd_jv_get(s, "anyOf"), *one = nd_jv_get(s, "oneOf");
    const nd_jv *all = nd_jv_get(s, "allOf"), *t = nd_jv_get(s, "type");
    if (ref || any || one || all) {
        if (constraints > 1) { cfail(c, "%s", "$ref/anyOf/oneOf/allOf with sibling constraints are unsupported"); goto out; }
        if (ref) id = compile_ref(c, ref);
        else if (any || one) id = compile_anyof(c, any ? any : one, any ? "anyOf" : "oneOf");
        else if (all->type != ND_JARRAY || all->n != 1) {
            size_t save;
            path_push(c, "allOf", 5, &save);
            cfail(c, "%s", "only a single-schema allOf is supported");
        } else {
            size_t save;
            path_push(c, "allOf", 5, &save);
            id = compile(c, &all->kids[0]);
            path_pop(c, save);
        }
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
    for (int k = 0; k < 7; k++)
        if (types >> k & 1) {
            if ((alts[n] = compile_typed(c, s, 1 << k)) < 0) goto out;
            n++;
        }
    id = alt_node(c, alts, n);
out:
    c->depth--;
    return id;
}

/* The call array: [ {"name":<tool>,"arguments":<parameters>} ... ]. */
int nd_build_graph(graph *gr, const nd_jv *tools, uint32_t min_calls, needle_error *err) {
    if (tools->type != ND_JARRAY) return nd_fail(err, NEEDLE_E_SCHEMA, "tools: must be a JSON array");
    if (tools->n > 1024) return nd_fail(err, NEEDLE_E_SCHEMA, "tools: more than 1024 tools");
    cc c = {0};
    c.gr = gr, c.err = err, c.any = -1;
    int32_t *calls = malloc((tools->n ? tools->n : 1) * sizeof *calls);
    int rc = -1;
    if (!calls) return nd_fail(err, NEEDLE_E_NOMEM, "grammar: out of memory");
    for (size_t i = 0; i < tools->n; i++) {
        const nd_jv *tool = &tools->kids[i], *name = nd_jv_get(tool, "name");
        if (!name || name->type != ND_JSTRING || !name->len) {
            rc = nd_fail(err, NEEDLE_E_SCHEMA, "tools[%zu]: \"name\" must be a non-empty string", i);
            goto out;
        }
        for (size_t j = 0; j < i; j++)
            if (!strcmp(nd_jv_get(&tools->kids[j], "name")->str, name->str)) {
                rc = nd_fail(err, NEEDLE_E_SCHEMA, "tool \"%.60s\": declared twice", name->str);
                goto out;
            }
        c.tool = name->str, c.root = nd_jv_get(tool, "parameters"), c.nrefs = 0, c.plen = 0, c.path[0] = 0;
        int32_t args = c.root ? compile(&c, c.root) : new_node(&c, K_OBJ); /* no parameters: {} */
        if (args < 0) goto out;
        size_t len = nd_json_string(name->str, name->len, NULL, 0);
        lit *ls = calloc(1, sizeof *ls);
        if (ls) ls->s = malloc(len + 1), ls->n = len;
        if (!ls || !ls->s) { if (ls) free(ls); rc = nd_fail(err, NEEDLE_E_NOMEM, "grammar: out of memory"); goto out; }
        nd_json_string(name->str, name->len, ls->s, len + 1);
        int32_t nameid = lit_node(&c, ls, 1);
        int32_t obj = new_node(&c, K_OBJ);
        static const char *const keys[] = {"\"arguments\"", "\"name\""};
        lit *ks = calloc(2, sizeof *ks);
        int32_t *vs = malloc(2 * sizeof *vs);
        if (nameid < 0 || obj < 0 || !ks || !vs) { free(ks), free(vs); rc = nd_fail(err, NEEDLE_E_NOMEM, "grammar: out of memory"); goto out; }
        for (int k = 0; k < 2; k++) {
            ks[k].n = strlen(keys[k]);
            ks[k].s = malloc(ks[k].n + 1);
            if (ks[k].s) memcpy(ks[k].s, keys[k], ks[k].n + 1);
        }
        vs[0] = args, vs[1] = nameid;
        gnode *o = &gr->v[obj];
        /* The model was trained on {"name":..,"arguments":..}: the name comes first. */
        o->lits = ks, o->nlits = 2, o->kids = vs, o->nkids = 2, o->required = 3, o->leading = 2;
        if (!ks[0].s || !ks[1].s) { rc = nd_fail(err, NEEDLE_E_NOMEM, "grammar: out of memory"); goto out; }
        calls[i] = obj;
    }
    int32_t item = tools->n ? alt_node(&c, calls, (uint32_t)tools->n) : -1;
    int32_t root = new_node(&c, K_ARR);
    if (root < 0 || (tools->n && item < 0)) goto out;
    gr->v[root].items = item, gr->v[root].maxit = tools->n ? ND_MAX_CALLS : 0;
    gr->v[root].minit = tools->n ? min_calls : 0;
    gr->root = root;
    rc = 0;
out:
    free(calls);
    free(c.refs);
    return rc;
}
