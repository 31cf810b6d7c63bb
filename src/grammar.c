/* grammar.c: the tool-call grammar. Declared tool schemas compile to a graph
 * of value nodes; a matcher walks the output one byte at a time; a byte trie
 * of the vocabulary's pieces is walked against the matcher to mask logits.
 *
 * Output language: the compact JSON array [{"name":..,"arguments":{..}},...]
 * (no whitespace), keys of an object in any order, each at most once, all
 * required keys before '}'. Every accepted byte keeps the output a prefix
 * that can still be completed into a value valid under the schemas, so the
 * mask never dead-ends and the result always validates.
 *
 * Decisions (documented in the report and README):
 * - additionalProperties: absent/false forbid undeclared keys; true or a
 *   schema are accepted but the output still uses declared keys only (valid
 *   either way). An object schema without properties admits only {}.
 * - Strings: the model may write raw UTF-8 or JSON escapes (\uXXXX with
 *   surrogate pairs); minLength/maxLength count code points of the decoded
 *   string and pattern/format run on the decoded code points. enum/const
 *   values must be written exactly as Python's json.dumps writes them.
 * - Numbers are plain decimals (no exponent), at most 6 fraction digits (more
 *   when multipleOf needs them, up to 9) and |x| < 10^(18-F); integers have
 *   |x| < 10^18. Bounds are exact on every prefix; at the end the value is
 *   also checked with doubles the way a JS validator does.
 * - oneOf compiles like anyOf: a value matching two branches is possible when
 *   the branches overlap. uniqueItems compares items by JSON equality.
 * - Recursion ($ref cycles) is bounded by a frame depth of ND_MAX_DEPTH.
 *
 * The matcher state is a set of "heads" (alternatives still alive, for
 * anyOf), each the top of an immutable stack of frames in an arena: a byte
 * copies the top frame (copy on write), so saving and restoring a state is
 * remembering two arena lengths and a head list. */
#include "grammar.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive.h" /* nd_fail */
#include "json.h"
#include "tokenizer.h"

#define ND_MAX_DEPTH 48     /* frame nesting bound (also bounds recursive $ref) */
#define ND_G_HEADS 64     /* alternatives alive at once */
#define ND_MAX_NFA 8192     /* regex NFA states */
#define ND_MAX_DFA 4096     /* regex DFA states */
#define ND_MAX_PIECE 128    /* longer pieces are never allowed */
#define ND_MAX_OUTPUT (1u << 20)
#define ND_MAX_CALLS 32     /* calls per array */
#define ND_CP_END 0x110000u

/* ======================================================================
 * Part 1. Regex (ECMAScript subset) -> NFA -> DFA over code points.
 * Supported: literals, escapes (\d\D\w\W\s\S\t\n\r\v\f\0\xHH\uHHHH and
 * escaped syntax characters), classes [..] with ranges and negation, '.',
 * groups (..) and (?:..), alternation, * + ? {n} {n,} {n,m} (lazy forms
 * match the same language), ^ at the start and $ at the end. Lookaround,
 * backreferences, \b and flags are compile errors.
 * ====================================================================== */
typedef struct { uint32_t lo, hi; } cprange; /* inclusive */

typedef struct {
    int kind;         /* 0 epsilon (out1, out2), 1 set (ranges, out1), 2 match */
    int out1, out2;
    uint32_t r0, nr;  /* ranges in nfa.rg */
} nstate;

typedef struct {
    nstate *st;
    size_t n, cap;
    cprange *rg;
    size_t nr, rcap;
    const uint32_t *p; /* pattern code points */
    size_t len, i;
    const char *error;
} nfa;

typedef struct { int start, end; } frag;

static int nfa_state(nfa *a, int kind, int out1, int out2) {
    if (a->n >= ND_MAX_NFA) { a->error = "pattern too large"; return -1; }
    if (a->n == a->cap) {
        size_t nc = a->cap ? a->cap * 2 : 64;
        nstate *ns = realloc(a->st, nc * sizeof *ns);
        if (!ns) { a->error = "out of memory"; return -1; }
        a->st = ns, a->cap = nc;
    }
    a->st[a->n] = (nstate){kind, out1, out2, 0, 0};
    return (int)a->n++;
}

static int add_range(nfa *a, uint32_t lo, uint32_t hi) {
    if (a->nr == a->rcap) {
        size_t nc = a->rcap ? a->rcap * 2 : 64;
        cprange *nr = realloc(a->rg, nc * sizeof *nr);
        if (!nr) { a->error = "out of memory"; return -1; }
        a->rg = nr, a->rcap = nc;
    }
    a->rg[a->nr++] = (cprange){lo, hi};
    return 0;
}

static int cmp_range(const void *x, const void *y) {
    const cprange *a = x, *b = y;
    return a->lo < b->lo ? -1 : a->lo > b->lo;
}

/* Sorts and merges ranges [from, a->nr); negate complements them. */
static void normalize_ranges(nfa *a, size_t from, int negate) {
    cprange *r = a->rg + from;
    size_t n = a->nr - from, w = 0;
    if (n) qsort(r, n, sizeof *r, cmp_range);
    for (size_t i = 0; i < n; i++) {
        if (w && r[i].lo <= r[w - 1].hi + 1) {
            if (r[i].hi > r[w - 1].hi) r[w - 1].hi = r[i].hi;
        } else r[w++] = r[i];
    }
    a->nr = from + w;
    if (!negate) return;
    cprange tmp[w + 1];
    if (w) memcpy(tmp, r, w * sizeof *r);
    uint32_t next = 0;
    a->nr = from;
    for (size_t i = 0; i < w; i++) {
        if (tmp[i].lo > next) add_range(a, next, tmp[i].lo - 1);
        next = tmp[i].hi + 1;
    }
    if (next < ND_CP_END) add_range(a, next, ND_CP_END - 1);
}

/* A set state over ranges [from, a->nr). */
static frag set_frag(nfa *a, size_t from) {
    int e = nfa_state(a, 0, -1, -1);
    int s = nfa_state(a, 1, e, -1);
    if (s < 0 || e < 0) return (frag){-1, -1};
    a->st[s].r0 = (uint32_t)from, a->st[s].nr = (uint32_t)(a->nr - from);
    return (frag){s, e};
}

static int class_escape(nfa *a, uint32_t c) { /* \d \w \s and complements */
    size_t from = a->nr;
    uint32_t lc = c | 0x20;
    if (lc == 'd') add_range(a, '0', '9');
    else if (lc == 'w') add_range(a, '0', '9'), add_range(a, 'A', 'Z'), add_range(a, '_', '_'),
        add_range(a, 'a', 'z');
    else if (lc == 's') {
        static const uint32_t ws[][2] = {{9, 13}, {32, 32}, {0xA0, 0xA0}, {0x1680, 0x1680},
            {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
            {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
        for (size_t i = 0; i < sizeof ws / sizeof ws[0]; i++) add_range(a, ws[i][0], ws[i][1]);
    } else return 0;
    if (c != lc) { /* upper case: complement just these */
        cprange tmp[16];
        size_t n = a->nr - from;
        memcpy(tmp, a->rg + from, n * sizeof *tmp);
        a->nr = from;
        uint32_t next = 0;
        for (size_t i = 0; i < n; i++) {
            if (tmp[i].lo > next) add_range(a, next, tmp[i].lo - 1);
            next = tmp[i].hi + 1;
        }
        add_range(a, next, ND_CP_END - 1);
    }
    return 1;
}

static int hexv(uint32_t c) {
    if (c >= '0' && c <= '9') return (int)c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (int)(c | 0x20) - 'a' + 10;
    return -1;
}

/* A single-character escape after '\' (a->i at the letter): the code point, or
 * -1 with a->error set. */
static int64_t char_escape(nfa *a) {
    uint32_t c = a->p[a->i++];
    switch (c) {
    case 't': return 9;
    case 'n': return 10;
    case 'v': return 11;
    case 'f': return 12;
    case 'r': return 13;
    case '0': return 0;
    case 'x': case 'u': {
        int k = c == 'x' ? 2 : 4;
        uint32_t v = 0;
        for (int j = 0; j < k; j++) {
            int h = a->i < a->len ? hexv(a->p[a->i]) : -1;
            if (h < 0) { a->error = "bad \\x or \\u escape"; return -1; }
            v = v << 4 | (uint32_t)h, a->i++;
        }
        return v;
    }
    }
    if ((c >= '1' && c <= '9') || c == 'b' || c == 'B' || c == 'k' || c == 'p' || c == 'P' ||
        c == 'c') {
        a->error = "unsupported escape (backreference, \\b, \\p, \\c)";
        return -1;
    }
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') { a->error = "unknown escape"; return -1; }
    return c; /* identity escape of a syntax character */
}

static frag parse_class(nfa *a) {
    size_t from = a->nr;
    int neg = a->i < a->len && a->p[a->i] == '^';
    if (neg) a->i++;
    while (a->i < a->len && a->p[a->i] != ']') {
        int64_t lo;
        uint32_t c = a->p[a->i++];
        if (c == '\\') {
            if (a->i >= a->len) break;
            if (class_escape(a, a->p[a->i])) { a->i++; continue; }
            if (a->p[a->i] == 'b') { a->i++; lo = 8; }
            else if ((lo = char_escape(a)) < 0) return (frag){-1, -1};
        } else lo = c;
        int64_t hi = lo;
        if (a->i + 1 < a->len && a->p[a->i] == '-' && a->p[a->i + 1] != ']') {
            a->i++;
            uint32_t d = a->p[a->i++];
            if (d == '\\') {
                if (a->i >= a->len) break;
                if ((hi = char_escape(a)) < 0) return (frag){-1, -1};
            } else hi = d;
            if (hi < lo) { a->error = "class range out of order"; return (frag){-1, -1}; }
        }
        add_range(a, (uint32_t)lo, (uint32_t)hi);
    }
    if (a->i >= a->len) { a->error = "unterminated class"; return (frag){-1, -1}; }
    a->i++;
    normalize_ranges(a, from, neg);
    return set_frag(a, from);
}

static frag parse_alt(nfa *a, int depth);

static frag parse_atom(nfa *a, int depth) {
    uint32_t c = a->p[a->i++];
    size_t from = a->nr;
    if (c == '(') {
        if (a->i + 1 < a->len && a->p[a->i] == '?') {
            if (a->p[a->i + 1] != ':') { a->error = "lookaround and named groups unsupported"; return (frag){-1, -1}; }
            a->i += 2;
        }
        frag f = parse_alt(a, depth + 1);
        if (f.start < 0) return f;
        if (a->i >= a->len || a->p[a->i] != ')') { a->error = "missing ')'"; return (frag){-1, -1}; }
        a->i++;
        return f;
    }
    if (c == '[') return parse_class(a);
    if (c == '.') {
        add_range(a, 0, 9), add_range(a, 11, 12), add_range(a, 14, 0x2027);
        add_range(a, 0x202A, ND_CP_END - 1);
        return set_frag(a, from);
    }
    if (c == '\\') {
        if (a->i >= a->len) { a->error = "trailing backslash"; return (frag){-1, -1}; }
        if (class_escape(a, a->p[a->i])) { a->i++; return set_frag(a, from); }
        int64_t v = char_escape(a);
        if (v < 0) return (frag){-1, -1};
        c = (uint32_t)v;
    } else if (c == '^' || c == '$') {
        a->error = "anchors only at the start and end of the pattern";
        return (frag){-1, -1};
    } else if (c == '*' || c == '+' || c == '?' || c == '{' || c == ')' || c == ']' || c == '}') {
        a->error = "misplaced quantifier or bracket";
        return (frag){-1, -1};
    }
    add_range(a, c, c);
    return set_frag(a, from);
}

static int parse_count(nfa *a, uint32_t *v) {
    size_t st = a->i;
    *v = 0;
    while (a->i < a->len && a->p[a->i] >= '0' && a->p[a->i] <= '9') {
        *v = *v * 10 + (a->p[a->i++] - '0');
        if (*v > 1000) { a->error = "repeat count over 1000"; return -1; }
    }
    return a->i > st ? 1 : 0;
}

/* Is a '{' at a->i a valid quantifier {n}, {n,}, {n,m}? Sets min/max. */
static int parse_braces(nfa *a, uint32_t *mn, uint32_t *mx) {
    size_t save = a->i++;
    int r = parse_count(a, mn);
    if (r < 0) return -1;
    if (r == 0) { a->i = save; return 0; }
    *mx = *mn;
    if (a->i < a->len && a->p[a->i] == ',') {
        a->i++;
        r = parse_count(a, mx);
        if (r < 0) return -1;
        if (r == 0) *mx = UINT32_MAX;
    }
    if (a->i >= a->len || a->p[a->i] != '}') { a->i = save; return 0; }
    a->i++;
    if (*mx < *mn) { a->error = "repeat {n,m} with m < n"; return -1; }
    return 1;
}

static frag concat(nfa *a, frag x, frag y) {
    if (x.start < 0) return y;
    a->st[x.end].out1 = y.start;
    return (frag){x.start, y.end};
}

/* A quantified atom: the atom's text is re-parsed for every copy. */
static frag parse_piece(nfa *a, int depth) {
    size_t at = a->i;
    frag f = parse_atom(a, depth);
    if (f.start < 0 || a->i >= a->len) return f;
    uint32_t mn = 1, mx = 1, c = a->p[a->i];
    if (c == '*') mn = 0, mx = UINT32_MAX, a->i++;
    else if (c == '+') mn = 1, mx = UINT32_MAX, a->i++;
    else if (c == '?') mn = 0, mx = 1, a->i++;
    else if (c == '{') {
        int r = parse_braces(a, &mn, &mx);
        if (r < 0) return (frag){-1, -1};
    }
    if (mn == 1 && mx == 1) return f;
    if (a->i < a->len && a->p[a->i] == '?') a->i++; /* lazy: same language */
    size_t after = a->i;
    frag out = {-1, -1};
    uint32_t copies = mx == UINT32_MAX ? (mn ? mn : 1) : mx;
    for (uint32_t k = 0; k < copies; k++) {
        frag g = f;
        if (k) { a->i = at; g = parse_atom(a, depth); if (g.start < 0) return g; }
        if (k >= mn || (mx == UINT32_MAX && k + 1 == copies)) {
            int e = nfa_state(a, 0, -1, -1);
            int s = nfa_state(a, 0, g.start, e);
            if (s < 0) return (frag){-1, -1};
            a->st[g.end].out1 = mx == UINT32_MAX ? s : e;
            if (mx == UINT32_MAX && k < mn) g = (frag){g.start, e}; /* x+ : x then loop */
            else g = (frag){s, e};
        }
        out = concat(a, out, g);
    }
    a->i = after;
    return out;
}

static frag parse_concat(nfa *a, int depth) {
    frag out = {-1, -1};
    while (a->i < a->len && a->p[a->i] != '|' && a->p[a->i] != ')') {
        frag f = parse_piece(a, depth);
        if (f.start < 0) return f;
        out = concat(a, out, f);
    }
    if (out.start < 0) {
        int s = nfa_state(a, 0, -1, -1);
        return (frag){s, s};
    }
    return out;
}

static frag parse_alt(nfa *a, int depth) {
    if (depth > 64) { a->error = "groups nested too deep"; return (frag){-1, -1}; }
    frag f = parse_concat(a, depth);
    while (f.start >= 0 && a->i < a->len && a->p[a->i] == '|') {
        a->i++;
        frag g = parse_concat(a, depth);
        if (g.start < 0) return g;
        int e = nfa_state(a, 0, -1, -1);
        int s = nfa_state(a, 0, f.start, g.start);
        if (s < 0) return (frag){-1, -1};
        a->st[f.end].out1 = e, a->st[g.end].out1 = e;
        f = (frag){s, e};
    }
    return f;
}

/* The DFA a string value runs: transitions on code point classes, plus
 * reach[s] = bit L set when an accepting state is L steps from s. */
typedef struct {
    uint32_t nstates, nclasses;
    uint32_t *bounds;  /* class i = [bounds[i], bounds[i+1]) */
    int32_t *next;     /* nstates x nclasses, -1 = dead */
    uint8_t *accept;
    uint32_t lc, words; /* reach covers lengths 0..lc */
    uint64_t *reach;
} nd_dfa;

static void dfa_free(nd_dfa *d) {
    if (!d) return;
    free(d->bounds), free(d->next), free(d->accept), free(d->reach);
    free(d);
}

static void closure(const nfa *a, uint64_t *set, int s, int *stack) {
    int sp = 0;
    if (set[s >> 6] >> (s & 63) & 1) return;
    set[s >> 6] |= 1ull << (s & 63);
    stack[sp++] = s;
    while (sp) {
        const nstate *x = &a->st[stack[--sp]];
        if (x->kind != 0) continue;
        int outs[2] = {x->out1, x->out2};
        for (int k = 0; k < 2; k++) {
            int t = outs[k];
            if (t < 0 || (set[t >> 6] >> (t & 63) & 1)) continue;
            set[t >> 6] |= 1ull << (t & 63);
            stack[sp++] = t;
        }
    }
}

static int cmp_u32(const void *x, const void *y) {
    uint32_t a = *(const uint32_t *)x, b = *(const uint32_t *)y;
    return a < b ? -1 : a > b;
}

/* Subset construction. Returns NULL with *why on failure. */
static nd_dfa *build_dfa(const nfa *a, int start, int match, const char **why) {
    size_t W = (a->n + 63) / 64;
    nd_dfa *d = calloc(1, sizeof *d);
    uint32_t *bd = malloc((2 * a->nr + 2) * sizeof *bd);
    uint64_t *sets = malloc(ND_MAX_DFA * W * sizeof *sets);
    int *stack = malloc(a->n * sizeof *stack);
    if (!d || !bd || !sets || !stack) goto oom;
    size_t nb = 0;
    bd[nb++] = 0, bd[nb++] = ND_CP_END;
    for (size_t i = 0; i < a->nr; i++) bd[nb++] = a->rg[i].lo, bd[nb++] = a->rg[i].hi + 1;
    qsort(bd, nb, sizeof *bd, cmp_u32);
    size_t u = 0;
    for (size_t i = 0; i < nb; i++)
        if (!u || bd[i] != bd[u - 1]) bd[u++] = bd[i];
    d->bounds = bd, d->nclasses = (uint32_t)(u - 1);
    memset(sets, 0, W * sizeof *sets);
    closure(a, sets, start, stack);
    size_t ns = 1, cap = 0;
    uint64_t *tmp = calloc(W, sizeof *tmp);
    if (!tmp) goto oom;
    for (size_t s = 0; s < ns; s++) {
        if ((s + 1) * d->nclasses > cap) {
            size_t nc = cap ? cap * 2 : 64 * (size_t)d->nclasses;
            int32_t *nn = realloc(d->next, nc * sizeof *nn);
            if (!nn) { free(tmp); goto oom; }
            d->next = nn, cap = nc;
        }
        for (uint32_t c = 0; c < d->nclasses; c++) {
            uint32_t cp = bd[c];
            memset(tmp, 0, W * sizeof *tmp);
            int any = 0;
            for (size_t q = 0; q < a->n; q++) {
                if (!(sets[s * W + q / 64] >> (q % 64) & 1) || a->st[q].kind != 1) continue;
                const cprange *r = a->rg + a->st[q].r0;
                for (uint32_t k = 0; k < a->st[q].nr; k++)
                    if (cp >= r[k].lo && cp <= r[k].hi) { closure(a, tmp, a->st[q].out1, stack); any = 1; break; }
            }
            int32_t t = -1;
            if (any) {
                for (size_t o = 0; o < ns; o++)
                    if (!memcmp(sets + o * W, tmp, W * sizeof *tmp)) { t = (int32_t)o; break; }
                if (t < 0) {
                    if (ns >= ND_MAX_DFA) { free(tmp); *why = "pattern needs too many DFA states"; goto fail; }
                    memcpy(sets + ns * W, tmp, W * sizeof *tmp);
                    t = (int32_t)ns++;
                }
            }
            d->next[s * d->nclasses + c] = t;
        }
    }
    free(tmp);
    d->nstates = (uint32_t)ns;
    d->accept = malloc(ns);
    if (!d->accept) goto oom;
    for (size_t s = 0; s < ns; s++) d->accept[s] = sets[s * W + match / 64] >> (match % 64) & 1;
    free(sets), free(stack);
    return d;
oom:
    *why = "out of memory";
fail:
    free(sets), free(stack);
    if (d && !d->bounds) free(bd);
    dfa_free(d);
    return NULL;
}

/* reach bitsets for lengths 0..lc (lc = maxLength, or minLength + states
 * when unbounded: a longer accepting path can be shortened by a cycle of at
 * most `states` steps without dropping below minLength). */
static int dfa_reach(nd_dfa *d, uint32_t minlen, uint32_t maxlen, const char **why) {
    uint64_t lc = maxlen != UINT32_MAX ? maxlen : (uint64_t)minlen + d->nstates + 1;
    uint64_t words = lc / 64 + 1;
    if (words * d->nstates > (1u << 20)) { *why = "length bounds too large for this pattern"; return -1; }
    d->lc = (uint32_t)lc, d->words = (uint32_t)words;
    d->reach = calloc(words * d->nstates, sizeof *d->reach);
    if (!d->reach) { *why = "out of memory"; return -1; }
    for (uint32_t s = 0; s < d->nstates; s++)
        if (d->accept[s]) d->reach[s * words] |= 1;
    for (uint32_t L = 1; L <= lc; L++)
        for (uint32_t s = 0; s < d->nstates; s++)
            for (uint32_t c = 0; c < d->nclasses; c++) {
                int32_t t = d->next[s * d->nclasses + c];
                if (t >= 0 && (d->reach[t * words + (L - 1) / 64] >> ((L - 1) % 64) & 1)) {
                    d->reach[s * words + L / 64] |= 1ull << (L % 64);
                    break;
                }
            }
    return 0;
}

/* Decodes UTF-8 (already validated by the JSON parser) to code points. */
static uint32_t *to_cps(const char *s, size_t n, size_t *out_n) {
    uint32_t *cp = malloc((n + 1) * sizeof *cp);
    if (!cp) return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n;) {
        unsigned c = (unsigned char)s[i];
        size_t m = c < 0x80 ? 1 : c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : 2;
        if (m > n - i) m = n - i;
        uint32_t v = m == 1 ? c : m == 2 ? c & 31 : m == 3 ? c & 15 : c & 7;
        for (size_t j = 1; j < m; j++) v = v << 6 | ((unsigned char)s[i + j] & 63);
        cp[k++] = v, i += m;
    }
    *out_n = k;
    return cp;
}

/* Compiles pattern (search semantics: implicit .* unless anchored). */
static nd_dfa *regex_compile(const char *pat, size_t plen, const char **why) {
    size_t n;
    uint32_t *cp = to_cps(pat, plen, &n);
    if (!cp) { *why = "out of memory"; return NULL; }
    int anch_s = n > 0 && cp[0] == '^';
    int anch_e = n > (size_t)anch_s && cp[n - 1] == '$' && !(n >= 2 && cp[n - 2] == '\\');
    nfa a = {0};
    a.p = cp + anch_s, a.len = n - anch_s - anch_e;
    frag body = parse_alt(&a, 0);
    if (!a.error && a.i < a.len) a.error = "unbalanced ')'";
    nd_dfa *d = NULL;
    if (!a.error && body.start >= 0) {
        frag f = body;
        for (int side = 0; side < 2; side++) { /* unanchored ends get .* */
            if (side == 0 ? anch_s : anch_e) continue;
            size_t from = a.nr;
            add_range(&a, 0, ND_CP_END - 1);
            frag any = set_frag(&a, from);
            int e = nfa_state(&a, 0, -1, -1), s = nfa_state(&a, 0, any.start, e);
            if (s < 0 || any.start < 0) break;
            a.st[any.end].out1 = s;
            frag star = {s, e};
            f = side == 0 ? concat(&a, star, f) : concat(&a, f, star);
        }
        int m = nfa_state(&a, 2, -1, -1);
        if (!a.error && m >= 0) {
            a.st[f.end].out1 = m;
            d = build_dfa(&a, f.start, m, why);
        }
    }
    if (a.error) *why = a.error;
    free(a.st), free(a.rg), free(cp);
    return d;
}

static uint32_t dfa_class(const nd_dfa *d, uint32_t cp) {
    uint32_t lo = 0, hi = d->nclasses; /* bounds[lo] <= cp < bounds[hi] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (d->bounds[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return lo;
}

int nd_regex_test(const char *pattern, const char *s, size_t n, needle_error *err) {
    const char *why = NULL;
    nd_dfa *d = regex_compile(pattern, strlen(pattern), &why);
    if (!d) return nd_fail(err, NEEDLE_E_SCHEMA, "pattern: %s", why ? why : "invalid"), -1;
    size_t k;
    uint32_t *cp = to_cps(s, n, &k);
    int32_t st = 0;
    for (size_t i = 0; cp && i < k && st >= 0; i++) st = d->next[st * d->nclasses + dfa_class(d, cp[i])];
    int ok = cp && st >= 0 && d->accept[st];
    free(cp);
    dfa_free(d);
    return ok;
}

/* ======================================================================
 * Part 2. Schemas -> a graph of value nodes.
 * ====================================================================== */
enum { K_LIT, K_STR, K_NUM, K_ARR, K_OBJ, K_ALT };

typedef struct { char *s; size_t n; } lit;

typedef struct {
    int kind;
    lit *lits;          /* LIT: canonical texts, sorted; OBJ: "\"key\"" texts, sorted */
    uint32_t nlits;
    int32_t *kids;      /* OBJ: value node per key; ALT: alternatives */
    uint32_t nkids;
    uint64_t required;  /* OBJ: bits of required keys */
    uint64_t leading;   /* OBJ: keys that must all come before any other */
    nd_dfa *dfa;        /* STR */
    uint32_t minlen, maxlen;
    int F;              /* NUM: fraction digits; bounds/multiple scaled by 10^F */
    int64_t lo, hi, mult;
    double dlo, dhi, dmult;
    uint8_t has_dlo, has_dhi, dlo_ex, dhi_ex;
    int32_t items;      /* ARR */
    uint32_t minit, maxit;
    int unique, small;  /* small: items' values fit a 64-bit used mask */
} gnode;

typedef struct {
    gnode *v;
    size_t n, cap;
    int32_t root;
} graph;

static void graph_free(graph *gr) {
    for (size_t i = 0; i < gr->n; i++) {
        for (uint32_t k = 0; k < gr->v[i].nlits; k++) free(gr->v[i].lits[k].s);
        free(gr->v[i].lits), free(gr->v[i].kids);
        dfa_free(gr->v[i].dfa);
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
    nd_dfa *d = regex_compile(pat, plen, &why);
    if (!d) return cfail(c, "pattern: %s", why ? why : "invalid");
    if (dfa_reach(d, minlen, maxlen, &why)) { dfa_free(d); return cfail(c, "%s", why); }
    int ok = 0; /* some accepted length within the bounds from the start state */
    for (uint32_t L = minlen; L <= d->lc && !ok; L++) ok = d->reach[L / 64] >> (L % 64) & 1;
    if (!ok) { dfa_free(d); return cfail(c, "%s", "no string satisfies pattern/format and length"); }
    int32_t id = new_node(c, K_STR);
    if (id < 0) { dfa_free(d); return -1; }
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

static const int64_t pow10s[19] = {1, 10, 100, 1000, 10000, 100000, 1000000, 10000000, 100000000,
    1000000000, 10000000000, 100000000000, 1000000000000, 10000000000000, 100000000000000,
    1000000000000000, 10000000000000000, 100000000000000000, 1000000000000000000};
#define ND_MAXMAG (1000000000000000000 - 1)

/* x scaled to an integer: dir +1 = ceiling, -1 = floor, with a tolerance so
 * that 0.1 * 10^6 counts as exactly 100000. */
static int64_t scale_bound(double x, int F, int dir, int *exact) {
    double v = x * (double)pow10s[F];
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

static int64_t ceil_div(int64_t a, int64_t m) { return a / m + (a % m != 0 && a > 0); }

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
        while (d <= 9 && fabs(m->num * (double)pow10s[d] - nearbyint(m->num * (double)pow10s[d])) >
                             1e-9 * m->num * (double)pow10s[d])
            d++;
        if (d > 9 || (integer && d > 0)) return cfail(c, "%s", "multipleOf must be a decimal (an integer for integers) with at most 9 fraction digits");
        if (d > n.F) n.F = d;
        double sm = nearbyint(m->num * (double)pow10s[n.F]);
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
    int64_t first = ceil_div(n.lo, n.mult) * n.mult;
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
            domain = (uint64_t)((in->hi - ceil_div(in->lo, in->mult) * in->mult) / in->mult + 1);
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
static int build_graph(graph *gr, const nd_jv *tools, uint32_t min_calls, needle_error *err) {
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

/* ======================================================================
 * Part 3. The matcher: immutable frames in an arena, a set of heads.
 * ====================================================================== */
typedef struct {
    int32_t parent, node;
    uint16_t depth;
    uint8_t ph, sub;
    int32_t a, b, c; /* LIT/key: range lo, hi, matched length; STR: dfa state, length, utf8 size;
                        NUM: int digits, fraction digits; ARR: count, item start, spans */
    uint32_t u;      /* STR: partial code point / high surrogate */
    int64_t x, y;    /* NUM: int part, fraction; OBJ: seen keys, chosen key; ARR: used values;
                        STR: partial low surrogate */
} frame;

typedef struct { uint32_t start, end; int32_t next; } span;
typedef struct { int32_t h[ND_G_HEADS]; int n; } heads;
#define ND_DONE (-2)

typedef struct {
    int32_t child, sibling, tok; /* first child, next sibling, first token ending here */
    uint8_t byte;
} tnode;

struct needle_vocab {
    uint32_t size;
    tnode *nodes;
    uint32_t nnodes, cnodes;
    int32_t *tok_next;      /* next token ending at the same node */
    uint8_t *bytes;         /* piece bytes of every token */
    uint32_t *off;
    uint8_t *len;           /* 0 = never allowed */
    uint64_t *plain;        /* tokens that are whole, plain string content */
    int32_t *special;       /* tokens with len > 0 that are not plain */
    uint32_t nspecial;
};

struct needle_grammar {
    const needle_vocab *vocab;
    needle_vocab *own_vocab;
    graph gr;
    frame *fr;
    size_t nfr, cfr;
    span *sp;
    size_t nsp, csp;
    char *text;
    size_t pos, len, ctext;
    heads cur;
    heads *hs;          /* per trie depth while masking */
    uint64_t *allowed;
    int32_t end_token;
    int done, oom;
    int64_t *cost;      /* per node: bytes of a minimal value (completion) */
};

enum { A_OPEN, A_FIRST, A_IN, A_AFTER, A_NEXT };
enum { O_OPEN, O_FIRST, O_KEY, O_COLON, O_VALSTART, O_IN, O_AFTER, O_KEYSTART };
enum { S_OPEN, S_BODY, S_ESC, S_U, S_LBS, S_LU, S_L, S_UTF };
enum { N_START, N_SIGN, N_INT, N_DOT, N_FRAC };

static int32_t fr_push(needle_grammar *g, const frame *w) {
    if (g->nfr == g->cfr) {
        size_t nc = g->cfr ? g->cfr * 2 : 1024;
        frame *nf = nc < INT32_MAX ? realloc(g->fr, nc * sizeof *nf) : NULL;
        if (!nf) { g->oom = 1; return -1; }
        g->fr = nf, g->cfr = nc;
    }
    g->fr[g->nfr] = *w;
    return (int32_t)g->nfr++;
}

static void out_add(heads *o, int32_t h) {
    if (h != -1 && o->n < ND_G_HEADS) o->h[o->n++] = h;
}
static void emit(needle_grammar *g, const frame *w, heads *o) { out_add(o, fr_push(g, w)); }

static void run(needle_grammar *g, frame w, int b, heads *o);

static void start(needle_grammar *g, int32_t node, int32_t parent, int depth, int b, heads *o, int hop) {
    const gnode *n = &g->gr.v[node];
    if (n->kind == K_ALT) {
        if (hop > 16) return;
        for (uint32_t i = 0; i < n->nkids; i++) start(g, n->kids[i], parent, depth, b, o, hop + 1);
        return;
    }
    if (depth >= ND_MAX_DEPTH || parent == -1) return;
    frame w;
    memset(&w, 0, sizeof w);
    w.parent = parent, w.node = node, w.depth = (uint16_t)depth;
    if (n->kind == K_LIT) w.b = (int32_t)n->nlits;
    run(g, w, b, o);
}

/* Bit mask of indices [i, j) (j - i <= 64, j <= 64). */
static uint64_t range_mask(uint32_t i, uint32_t j) {
    if (j <= i) return 0;
    uint64_t m = j - i >= 64 ? ~0ull : (1ull << (j - i)) - 1;
    return m << i;
}

/* Values already used by the enclosing unique array (LIT index / NUM slot). */
static uint64_t used_mask(const needle_grammar *g, const frame *w) {
    if (w->parent < 0) return 0;
    const frame *p = &g->fr[w->parent];
    const gnode *pn = &g->gr.v[p->node];
    return pn->kind == K_ARR && pn->unique && pn->small ? (uint64_t)p->x : 0;
}

static int jv_equal(const nd_jv *a, const nd_jv *b) {
    if (a->type != b->type) return 0;
    switch (a->type) {
    case ND_JNUMBER: return a->num == b->num;
    case ND_JSTRING: return a->len == b->len && !memcmp(a->str, b->str, a->len);
    case ND_JARRAY:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++)
            if (!jv_equal(&a->kids[i], &b->kids[i])) return 0;
        return 1;
    case ND_JOBJECT:
        if (a->n != b->n) return 0;
        for (size_t i = 0; i < a->n; i++) {
            const nd_jv *o = nd_jv_get(b, a->kids[i].key);
            if (!o || !jv_equal(&a->kids[i], o)) return 0;
        }
        return 1;
    default: return 1;
    }
}

/* JSON equality of two item texts (what uniqueItems means). */
static int text_equal(const char *x, size_t nx, const char *y, size_t ny) {
    if (nx == ny && !memcmp(x, y, nx)) return 1;
    nd_json *a = nd_json_parse(x, nx, ND_MAX_DEPTH + 2, NULL), *b = nd_json_parse(y, ny, ND_MAX_DEPTH + 2, NULL);
    int eq = a && b && jv_equal(nd_json_root(a), nd_json_root(b));
    nd_json_free(a), nd_json_free(b);
    return eq;
}

static int64_t num_value(const gnode *n, const frame *w) {
    int64_t v = w->x * pow10s[n->F] + w->y * pow10s[n->F - w->b];
    return w->sub ? -v : v;
}

/* A child value ended at text[..end): update the parent's state. */
static int child_done(needle_grammar *g, frame *p, const frame *child, uint32_t end) {
    const gnode *pn = &g->gr.v[p->node];
    if (pn->kind == K_OBJ) { p->ph = O_AFTER; return 1; }
    if (pn->unique) {
        for (int32_t s = p->c; s >= 0; s = g->sp[s].next)
            if (text_equal(g->text + g->sp[s].start, g->sp[s].end - g->sp[s].start, g->text + p->b, end - (uint32_t)p->b))
                return 0;
        if (g->nsp == g->csp) {
            size_t nc = g->csp ? g->csp * 2 : 256;
            span *ns = realloc(g->sp, nc * sizeof *ns);
            if (!ns) { g->oom = 1; return 0; }
            g->sp = ns, g->csp = nc;
        }
        g->sp[g->nsp] = (span){(uint32_t)p->b, end, p->c};
        p->c = (int32_t)g->nsp++;
        const gnode *cn = &g->gr.v[child->node];
        if (pn->small && cn->kind == K_LIT) p->x |= (int64_t)(1ull << child->a);
        if (pn->small && cn->kind == K_NUM)
            p->x |= (int64_t)(1ull << ((num_value(cn, child) - ceil_div(cn->lo, cn->mult) * cn->mult) / cn->mult));
    }
    p->a++;
    p->ph = A_AFTER;
    return 1;
}

/* The frame's value is complete: hand over to the parent, which consumes
 * b next (consumed = 0) or already consumed it as the value's last byte. */
static void finish(needle_grammar *g, const frame *w, int consumed, int b, heads *o) {
    if (w->parent < 0) { if (consumed) out_add(o, ND_DONE); return; }
    frame p = g->fr[w->parent];
    if (!child_done(g, &p, w, (uint32_t)(g->pos + (consumed ? 1 : 0)))) return;
    if (consumed) emit(g, &p, o);
    else run(g, p, b, o);
}

/* Narrows sorted texts [lo,hi) sharing a prefix of length pos by byte b. */
static void narrow(const lit *L, uint32_t lo, uint32_t hi, uint32_t pos, int b, uint32_t *i, uint32_t *j) {
    uint32_t k = lo;
    while (k < hi && (L[k].n <= pos || (uint8_t)L[k].s[pos] < b)) k++;
    uint32_t e = k;
    while (e < hi && L[e].n > pos && (uint8_t)L[e].s[pos] == b) e++;
    *i = k, *j = e;
}

static void run_lit(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    uint64_t used = n->nlits <= 64 ? used_mask(g, &w) : 0;
    uint32_t i, j, lo = (uint32_t)w.a, pos = (uint32_t)w.c;
    narrow(n->lits, lo, (uint32_t)w.b, pos, b, &i, &j);
    if (i < j && (!used || (range_mask(i, j) & ~used))) {
        w.a = (int32_t)i, w.b = (int32_t)j, w.c++;
        emit(g, &w, o);
        return;
    }
    if (n->lits[lo].n == pos && !(used >> lo & 1)) finish(g, &w, 0, b, o);
}

/* ---- strings ---- */
static int str_tail_ok(const gnode *n, int32_t t, uint32_t len) {
    const nd_dfa *d = n->dfa;
    uint32_t need = n->minlen > len ? n->minlen - len : 0;
    uint32_t upto = n->maxlen == UINT32_MAX ? d->lc : n->maxlen - len;
    const uint64_t *r = d->reach + (size_t)t * d->words;
    for (uint32_t L = need; L <= upto;) {
        uint64_t word = r[L / 64] >> (L % 64);
        if (word) return L + (uint32_t)__builtin_ctzll(word) <= upto;
        L = (L / 64 + 1) * 64;
    }
    return 0;
}

static int str_range_ok(const gnode *n, int32_t s, uint32_t len, uint32_t lo, uint32_t hi) {
    const nd_dfa *d = n->dfa;
    if (lo > hi || len >= n->maxlen) return 0;
    for (uint32_t c = dfa_class(d, lo); c < d->nclasses && d->bounds[c] <= hi; c++) {
        int32_t t = d->next[(size_t)s * d->nclasses + c];
        if (t >= 0 && str_tail_ok(n, t, len + 1)) return 1;
    }
    return 0;
}

static int str_cp_ok(const gnode *n, int32_t s, uint32_t len, uint32_t lo, uint32_t hi) {
    if (hi > 0x10FFFF) hi = 0x10FFFF;
    return str_range_ok(n, s, len, lo, hi < 0xD7FF ? hi : 0xD7FF) ||
           str_range_ok(n, s, len, lo > 0xE000 ? lo : 0xE000, hi);
}

/* A partial \uXXXX: UTF-16 units [lo,hi]; a high surrogate stands for the
 * supplementary characters it can start. */
static int str_unit_ok(const gnode *n, int32_t s, uint32_t len, uint32_t lo, uint32_t hi) {
    if (str_cp_ok(n, s, len, lo, hi)) return 1;
    uint32_t a = lo > 0xD800 ? lo : 0xD800, b = hi < 0xDBFF ? hi : 0xDBFF;
    return a <= b && str_range_ok(n, s, len, 0x10000 + ((a - 0xD800) << 10), 0x10000 + ((b - 0xD800) << 10) + 0x3FF);
}

/* In a unique array, a string that can only close now must not close into
 * a duplicate (one character of lookahead; deeper traps are documented). */
static int str_dup_trap(const needle_grammar *g, const frame *w, const gnode *n) {
    if (w->parent < 0 || !g->gr.v[g->fr[w->parent].node].unique) return 0;
    if (str_cp_ok(n, w->a, (uint32_t)w->b, 0, 0x10FFFF)) return 0;
    const frame *p = &g->fr[w->parent];
    size_t len = g->pos + 1 - (size_t)p->b;
    char *item = malloc(len + 1);
    if (!item) return 1;
    memcpy(item, g->text + p->b, len);
    item[len] = '"';
    int dup = 0;
    for (int32_t s = p->c; s >= 0 && !dup; s = g->sp[s].next)
        dup = text_equal(g->text + g->sp[s].start, g->sp[s].end - g->sp[s].start, item, len + 1);
    free(item);
    return dup;
}

static int str_advance(const needle_grammar *g, const gnode *n, frame *w, uint32_t cp) {
    const nd_dfa *d = n->dfa;
    if ((uint32_t)w->b >= n->maxlen) return 0;
    int32_t t = d->next[(size_t)w->a * d->nclasses + dfa_class(d, cp)];
    if (t < 0 || !str_tail_ok(n, t, (uint32_t)w->b + 1)) return 0;
    w->a = t, w->b++, w->ph = S_BODY;
    return !str_dup_trap(g, w, n);
}

static void run_str_body(needle_grammar *g, frame w, int b, heads *o, const gnode *n) {
    uint32_t len = (uint32_t)w.b;
    if (b == '"') {
        if (n->dfa->accept[w.a] && len >= n->minlen) finish(g, &w, 1, b, o);
        return;
    }
    if (b == '\\') {
        w.ph = S_ESC;
        if (str_cp_ok(n, w.a, len, 0, 0x10FFFF)) emit(g, &w, o);
        return;
    }
    if (b < 0x20) return;
    if (b < 0x80) { if (str_advance(g, n, &w, (uint32_t)b)) emit(g, &w, o); return; }
    int k = b >= 0xF5 ? 0 : b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
    if (!k) return;
    w.u = (uint32_t)b & (k == 2 ? 31 : k == 3 ? 15 : 7);
    w.sub = (uint8_t)(k - 1), w.c = k, w.ph = S_UTF;
    uint32_t lo = w.u << (6 * w.sub), hi = lo | ((1u << (6 * w.sub)) - 1);
    uint32_t min = k == 2 ? 0x80 : k == 3 ? 0x800 : 0x10000;
    if (str_cp_ok(n, w.a, len, lo > min ? lo : min, hi)) emit(g, &w, o);
}

static void run_str(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    uint32_t len = (uint32_t)w.b;
    int h = hexv((uint32_t)b);
    switch (w.ph) {
    case S_OPEN:
        if (b == '"') { w.ph = S_BODY; emit(g, &w, o); }
        return;
    case S_BODY: run_str_body(g, w, b, o, n); return;
    case S_UTF: {
        if ((b & 0xC0) != 0x80) return;
        w.u = w.u << 6 | ((uint32_t)b & 63);
        w.sub--;
        uint32_t min = w.c == 2 ? 0x80 : w.c == 3 ? 0x800 : 0x10000;
        uint32_t lo = w.u << (6 * w.sub), hi = lo | ((1u << (6 * w.sub)) - 1);
        if (w.sub == 0) {
            if (w.u < min || w.u > 0x10FFFF || (w.u >= 0xD800 && w.u < 0xE000)) return;
            if (str_advance(g, n, &w, w.u)) emit(g, &w, o);
        } else if (str_cp_ok(n, w.a, len, lo > min ? lo : min, hi)) emit(g, &w, o);
        return;
    }
    case S_ESC: {
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        const char *f = b ? strchr(from, b) : NULL;
        if (f) { if (str_advance(g, n, &w, (uint8_t)to[f - from])) emit(g, &w, o); return; }
        if (b == 'u' && str_unit_ok(n, w.a, len, 0, 0xFFFF)) { w.ph = S_U, w.sub = 0, w.u = 0; emit(g, &w, o); }
        return;
    }
    case S_U: {
        if (h < 0) return;
        w.u = w.u << 4 | (uint32_t)h;
        w.sub++;
        uint32_t sh = 4u * (4u - w.sub), lo = w.u << sh, hi = lo | ((1u << sh) - 1);
        if (w.sub < 4) { if (str_unit_ok(n, w.a, len, lo, hi)) emit(g, &w, o); return; }
        if (w.u >= 0xDC00 && w.u < 0xE000) return;
        if (w.u >= 0xD800 && w.u < 0xDC00) {
            w.ph = S_LBS;
            if (str_unit_ok(n, w.a, len, w.u, w.u)) emit(g, &w, o);
        } else if (str_advance(g, n, &w, w.u)) emit(g, &w, o);
        return;
    }
    case S_LBS: if (b == '\\') { w.ph = S_LU; emit(g, &w, o); } return;
    case S_LU: if (b == 'u') { w.ph = S_L, w.sub = 0, w.x = 0; emit(g, &w, o); } return;
    default: { /* S_L: the low surrogate's digits */
        if (h < 0) return;
        w.x = w.x << 4 | h;
        w.sub++;
        uint32_t sh = 4u * (4u - w.sub), lo = (uint32_t)w.x << sh, hi = lo | ((1u << sh) - 1);
        if (lo < 0xDC00) lo = 0xDC00;
        if (hi > 0xDFFF) hi = 0xDFFF;
        if (lo > hi) return;
        uint32_t base = 0x10000 + ((w.u - 0xD800) << 10);
        if (w.sub < 4) { if (str_cp_ok(n, w.a, len, base + lo - 0xDC00, base + hi - 0xDC00)) emit(g, &w, o); return; }
        if (str_advance(g, n, &w, base + lo - 0xDC00)) emit(g, &w, o);
        return;
    }
    }
}

/* ---- numbers: exact scaled-integer bounds on every prefix ---- */
static int mult_in(const needle_grammar *g, const frame *w, const gnode *n, int64_t A, int64_t B) {
    if (A < n->lo) A = n->lo;
    if (B > n->hi) B = n->hi;
    if (A > B) return 0;
    int64_t v = ceil_div(A, n->mult) * n->mult;
    if (v > B) return 0;
    uint64_t used = used_mask(g, w);
    if (!used) return 1;
    int64_t base = ceil_div(n->lo, n->mult) * n->mult;
    for (; v <= B; v += n->mult)
        if (!(used >> ((v - base) / n->mult) & 1)) return 1;
    return 0;
}

static int mag_ok(const needle_grammar *g, const frame *w, const gnode *n, int neg, int64_t lo, int64_t hi) {
    return neg ? mult_in(g, w, n, -hi, -lo) : mult_in(g, w, n, lo, hi);
}

static int num_viable(const needle_grammar *g, const frame *w, const gnode *n) {
    int64_t S = pow10s[n->F];
    if (w->ph == N_START) return mag_ok(g, w, n, 0, 0, ND_MAXMAG) || mag_ok(g, w, n, 1, 0, ND_MAXMAG);
    if (w->ph == N_SIGN) return mag_ok(g, w, n, 1, 0, ND_MAXMAG);
    if (w->ph == N_INT) {
        for (int k = 0; w->a + k <= 18 - n->F; k++) {
            if (k > 0 && w->x == 0) break;
            int64_t base = w->x * pow10s[k];
            if (mag_ok(g, w, n, w->sub, base * S, (base + pow10s[k] - 1) * S + S - 1)) return 1;
        }
        return 0;
    }
    int64_t step = pow10s[n->F - w->b], base = w->x * S + w->y * step;
    return mag_ok(g, w, n, w->sub, base, base + step - 1);
}

static int num_end_ok(const needle_grammar *g, const frame *w, const gnode *n) {
    if (w->ph != N_INT && w->ph != N_FRAC) return 0;
    int64_t v = num_value(n, w);
    if (v < n->lo || v > n->hi || v % n->mult) return 0;
    if (!mult_in(g, w, n, v, v)) return 0;
    /* the same checks in doubles, as a JS validator will do them */
    if (v > -(1ll << 53) && v < (1ll << 53)) {
        double dv = (double)v / (double)pow10s[n->F];
        if (n->has_dlo && (dv < n->dlo || (n->dlo_ex && dv == n->dlo))) return 0;
        if (n->has_dhi && (dv > n->dhi || (n->dhi_ex && dv == n->dhi))) return 0;
        if (n->dmult > 0) { double q = dv / n->dmult; if (q != floor(q)) return 0; }
    }
    return 1;
}

static void run_num(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    if (b >= '0' && b <= '9') {
        int d = b - '0';
        if (w.ph == N_START || w.ph == N_SIGN) w.x = d, w.a = 1, w.ph = N_INT;
        else if (w.ph == N_INT) {
            if (w.x == 0 || w.a + 1 > 18 - n->F) return;
            w.x = w.x * 10 + d, w.a++;
        } else {
            if (w.b + 1 > n->F) return;
            w.y = w.y * 10 + d, w.b++, w.ph = N_FRAC;
        }
        if (num_viable(g, &w, n)) emit(g, &w, o);
        return;
    }
    if (b == '-' && w.ph == N_START) {
        w.sub = 1, w.ph = N_SIGN;
        if (num_viable(g, &w, n)) emit(g, &w, o);
        return;
    }
    if (b == '.' && w.ph == N_INT && n->F > 0) {
        w.ph = N_DOT;
        if (num_viable(g, &w, n)) emit(g, &w, o);
        return;
    }
    if (num_end_ok(g, &w, n)) finish(g, &w, 0, b, o);
}

/* ---- arrays and objects ---- */
static void item_start(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    w.ph = A_IN, w.b = (int32_t)g->pos;
    int32_t idx = fr_push(g, &w);
    if (idx >= 0) start(g, n->items, idx, w.depth + 1, b, o, 0);
}

static void run_arr(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    switch (w.ph) {
    case A_OPEN: if (b == '[') { w.ph = A_FIRST, w.c = -1; emit(g, &w, o); } return;
    case A_FIRST:
        if (b == ']') { if (n->minit == 0) finish(g, &w, 1, b, o); return; }
        if (n->maxit > 0) item_start(g, w, b, o);
        return;
    case A_AFTER:
        if (b == ',' && (uint32_t)w.a < n->maxit) { w.ph = A_NEXT; emit(g, &w, o); }
        if (b == ']' && (uint32_t)w.a >= n->minit) finish(g, &w, 1, b, o);
        return;
    case A_NEXT: item_start(g, w, b, o); return;
    }
}

/* Keys that may come next: the leading ones first, then any unseen key. */
static uint64_t open_keys(const gnode *n, uint64_t seen) {
    uint64_t lead = n->leading & ~seen;
    return lead ? lead : range_mask(0, n->nlits) & ~seen;
}

static void run_obj(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    uint64_t seen = (uint64_t)w.x, open = open_keys(n, seen);
    switch (w.ph) {
    case O_OPEN: if (b == '{') { w.ph = O_FIRST; emit(g, &w, o); } return;
    case O_AFTER:
        if (b == ',' && open) { w.ph = O_KEYSTART; emit(g, &w, o); }
        if (b == '}' && !(n->required & ~seen)) finish(g, &w, 1, b, o);
        return;
    case O_FIRST:
        if (b == '}' && !n->required) { finish(g, &w, 1, b, o); return; }
        /* fall through - a key may start here too */
    case O_KEYSTART:
        if (b == '"' && open) { w.ph = O_KEY, w.a = 0, w.b = (int32_t)n->nlits, w.c = 1; emit(g, &w, o); }
        return;
    case O_KEY: {
        uint32_t i, j;
        narrow(n->lits, (uint32_t)w.a, (uint32_t)w.b, (uint32_t)w.c, b, &i, &j);
        if (i >= j || !(range_mask(i, j) & open)) return;
        w.a = (int32_t)i, w.b = (int32_t)j, w.c++;
        if (n->lits[i].n == (size_t)w.c) w.y = i, w.ph = O_COLON; /* a quoted key ends only itself */
        emit(g, &w, o);
        return;
    }
    case O_COLON: if (b == ':') { w.ph = O_VALSTART; emit(g, &w, o); } return;
    case O_VALSTART: {
        w.ph = O_IN, w.x = (int64_t)(seen | 1ull << w.y);
        int32_t idx = fr_push(g, &w);
        if (idx >= 0) start(g, n->kids[w.y], idx, w.depth + 1, b, o, 0);
        return;
    }
    }
}

static void run(needle_grammar *g, frame w, int b, heads *o) {
    switch (g->gr.v[w.node].kind) {
    case K_LIT: run_lit(g, w, b, o); break;
    case K_STR: run_str(g, w, b, o); break;
    case K_NUM: run_num(g, w, b, o); break;
    case K_ARR: run_arr(g, w, b, o); break;
    case K_OBJ: run_obj(g, w, b, o); break;
    }
}

/* Feeds byte b at text position g->pos to every head of in. */
static int feed_byte(needle_grammar *g, const heads *in, int b, heads *out) {
    out->n = 0;
    if (g->pos >= ND_MAX_OUTPUT) return 0;
    g->text[g->pos] = (char)b;
    for (int i = 0; i < in->n; i++)
        if (in->h[i] >= 0) run(g, g->fr[in->h[i]], b, out);
    return out->n;
}

/* Drops frames and spans no head can reach (accepted tokens leave old
 * copies behind). Parents always precede children in the arena. */
static void compact(needle_grammar *g) {
    size_t nf = g->nfr, ns = g->nsp;
    int32_t *map = malloc((nf + ns + 2) * sizeof *map);
    if (!map) return; /* only a missed clean-up */
    int32_t *smap = map + nf + 1;
    for (size_t i = 0; i < nf + ns + 2; i++) map[i] = -1;
    for (int h = 0; h < g->cur.n; h++)
        for (int32_t f = g->cur.h[h]; f >= 0 && map[f] == -1; f = g->fr[f].parent) map[f] = 0;
    for (size_t i = 0; i < nf; i++) /* spans of live unique arrays */
        if (map[i] == 0 && g->gr.v[g->fr[i].node].kind == K_ARR)
            for (int32_t s = g->fr[i].c; s >= 0 && smap[s] == -1; s = g->sp[s].next) smap[s] = 0;
    size_t w = 0;
    for (size_t s = 0; s < ns; s++)
        if (smap[s] == 0) {
            span sp = g->sp[s];
            sp.next = sp.next >= 0 ? smap[sp.next] : -1; /* next < s: already renumbered */
            smap[s] = (int32_t)w, g->sp[w++] = sp;
        }
    g->nsp = w, w = 0;
    for (size_t i = 0; i < nf; i++)
        if (map[i] == 0) {
            frame f = g->fr[i];
            if (f.parent >= 0) f.parent = map[f.parent];
            if (g->gr.v[f.node].kind == K_ARR && f.c >= 0) f.c = smap[f.c];
            map[i] = (int32_t)w, g->fr[w++] = f;
        }
    g->nfr = w;
    for (int h = 0; h < g->cur.n; h++)
        if (g->cur.h[h] >= 0) g->cur.h[h] = map[g->cur.h[h]];
    free(map);
}

/* ======================================================================
 * Part 3b. The shortest completion: from the matcher's heads, bytes that
 * close every open value (a budget guard forces them when tokens run out).
 * Structural, per head: the head frame's rest (a literal's tail, a string's
 * shortest DFA path within the length bounds, the shortest number within the
 * bounds, missing required keys, missing minItems items), then each
 * enclosing frame's rest once its child is done. Values written from scratch
 * are minimal ones (per-node costs steer the choices). uniqueItems: an item
 * that would repeat an earlier one is rewritten with the next "variant" (the
 * k-th shortest text of the innermost value). Short rather than provably
 * shortest: a code point counts as one step whatever its bytes.
 * ====================================================================== */
#define ND_INF ((int64_t)1 << 40)
#define ND_VARIANTS 48 /* variants tried to avoid a duplicate item */
#define ND_WORK 400000 /* steps of one completion search */

typedef struct { char *s; size_t n, cap; int bad; } sbuf;
typedef struct { const needle_grammar *g; sbuf o; long work; } cx;

static void sb_put(sbuf *b, const char *s, size_t n) {
    if (b->bad || !n) return;
    if (n > b->cap - b->n) {
        size_t nc = b->cap ? b->cap : 256;
        while (nc - b->n < n) {
            if (nc > ND_MAX_OUTPUT) { b->bad = 1; return; }
            nc *= 2;
        }
        char *ns = realloc(b->s, nc);
        if (!ns) { b->bad = 1; return; }
        b->s = ns, b->cap = nc;
    }
    memcpy(b->s + b->n, s, n), b->n += n;
}
static void sb_ch(sbuf *b, char c) { sb_put(b, &c, 1); }

static void put_hex4(sbuf *b, uint32_t u, int from) { /* hex digits [from, 4) of u */
    static const char hx[] = "0123456789abcdef";
    for (int i = from; i < 4; i++) sb_ch(b, hx[u >> (4 * (3 - i)) & 15]);
}

static size_t cp_bytes(uint32_t cp) {
    return cp == '"' || cp == '\\' ? 2 : cp < 0x20 ? 6 : cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
}

/* A code point as JSON string content: raw UTF-8, escapes where required. */
static void put_cp(sbuf *b, uint32_t cp) {
    if (cp == '"' || cp == '\\') { sb_ch(b, '\\'), sb_ch(b, (char)cp); return; }
    if (cp < 0x20) { sb_put(b, "\\u", 2), put_hex4(b, cp, 0); return; }
    char t[4];
    size_t k = cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4;
    static const uint8_t lead[5] = {0, 0, 0xC0, 0xE0, 0xF0};
    for (size_t i = k; i-- > 1; cp >>= 6) t[i] = (char)(0x80 | (cp & 63));
    t[0] = (char)(k == 1 ? cp : (lead[k] | cp));
    sb_put(b, t, k);
}

/* The idx-th representative of DFA class c within [lo, hi]: letters, digits,
 * other printable ASCII, then the lowest other code points (no surrogates). */
static int class_rep(const nd_dfa *d, uint32_t c, uint32_t lo, uint32_t hi, int idx, uint32_t *cp) {
    uint32_t a = d->bounds[c] > lo ? d->bounds[c] : lo, z = d->bounds[c + 1] - 1;
    if (z > hi) z = hi;
    if (z > 0x10FFFF) z = 0x10FFFF;
    static const uint32_t grp[4][2] = {{'a', 'z'}, {'0', '9'}, {'A', 'Z'}, {0x20, 0x7E}};
    for (int gi = 0; gi < 4; gi++)
        for (uint32_t v = grp[gi][0] > a ? grp[gi][0] : a; v <= grp[gi][1] && v <= z; v++) {
            int alnum = (v >= 'a' && v <= 'z') || (v >= '0' && v <= '9') || (v >= 'A' && v <= 'Z');
            if (gi == 3 && alnum) continue;
            if (idx-- == 0) { *cp = v; return 1; }
        }
    for (uint32_t v = a; v <= z; v++) {
        if (v >= 0x20 && v <= 0x7E) { v = 0x7E; continue; }
        if (v >= 0xD800 && v <= 0xDFFF) { v = 0xDFFF; continue; }
        if (idx-- == 0) { *cp = v; return 1; }
    }
    return 0;
}

static int reach_bit(const nd_dfa *d, int32_t s, uint32_t L) {
    return d->reach[(size_t)s * d->words + L / 64] >> (L % 64) & 1;
}

/* Length bounds of a string's rest: [*need, *upto] code points. */
static void str_rest_bounds(const gnode *n, uint32_t len, uint32_t *need, uint32_t *upto) {
    *need = n->minlen > len ? n->minlen - len : 0;
    *upto = n->maxlen == UINT32_MAX ? n->dfa->lc : n->maxlen - len;
}

static int64_t str_min_rest(const gnode *n, int32_t s, uint32_t len) {
    uint32_t need, upto;
    str_rest_bounds(n, len, &need, &upto);
    for (uint32_t L = need; L <= upto; L++)
        if (reach_bit(n->dfa, s, L)) return L;
    return -1;
}

typedef struct { uint32_t cp; int32_t t; int score; } step_cand;
static int cmp_step(const void *x, const void *y) {
    const step_cand *a = x, *b = y;
    return a->score != b->score ? (a->score > b->score) - (a->score < b->score) : (a->cp > b->cp) - (a->cp < b->cp);
}

/* Writes the k-th (fixed order, cheapest characters first) string of exactly
 * r code points from state s to acceptance; *k counts the strings passed. */
static int str_path(cx *x, const gnode *n, int32_t s, uint32_t r, long *k) {
    const nd_dfa *d = n->dfa;
    if (--x->work < 0) return 0;
    if (r == 0) return d->accept[s] && (*k)-- == 0;
    step_cand *cs = malloc((size_t)d->nclasses * 3 * sizeof *cs);
    if (!cs) { x->o.bad = 1; return 0; }
    size_t nc = 0;
    for (uint32_t c = 0; c < d->nclasses; c++) {
        int32_t t = d->next[(size_t)s * d->nclasses + c];
        if (t < 0 || !reach_bit(d, t, r - 1)) continue;
        for (int i = 0; i < (*k ? 3 : 1); i++) {
            uint32_t cp;
            if (!class_rep(d, c, 0, 0x10FFFF, i, &cp)) break;
            int rank = cp >= 'a' && cp <= 'z' ? 0 : cp >= '0' && cp <= '9' ? 1 : cp >= 'A' && cp <= 'Z' ? 2 : cp < 0x80 ? 3 : 4;
            cs[nc++] = (step_cand){cp, t, (int)cp_bytes(cp) * 8 + rank};
        }
    }
    qsort(cs, nc, sizeof *cs, cmp_step);
    int ok = 0;
    for (size_t i = 0; i < nc && !ok && x->work >= 0; i++) {
        size_t mark = x->o.n;
        put_cp(&x->o, cs[i].cp);
        ok = str_path(x, n, cs[i].t, r - 1, k);
        if (!ok) x->o.n = mark;
    }
    free(cs);
    return ok && !x->o.bad;
}

/* The k-th rest of a string body from state s at length len, and '"'. */
static int str_rest(cx *x, const gnode *n, int32_t s, uint32_t len, long k) {
    uint32_t need, upto;
    str_rest_bounds(n, len, &need, &upto);
    for (uint32_t L = need; L <= upto && x->work >= 0; L++) {
        if (!reach_bit(n->dfa, s, L)) continue;
        size_t mark = x->o.n;
        if (str_path(x, n, s, L, &k)) { sb_ch(&x->o, '"'); return 1; }
        x->o.n = mark;
    }
    return 0;
}

/* The best code point in [lo, hi] to finish a partial character with: the
 * one whose rest is shortest. */
static int best_cp(const gnode *n, int32_t s, uint32_t len, uint32_t lo, uint32_t hi, uint32_t *cp, int64_t *best) {
    const nd_dfa *d = n->dfa;
    int found = 0;
    if (len >= n->maxlen || lo > hi) return 0;
    for (uint32_t c = dfa_class(d, lo); c < d->nclasses && d->bounds[c] <= hi; c++) {
        int32_t t = d->next[(size_t)s * d->nclasses + c];
        uint32_t v;
        if (t < 0 || !class_rep(d, c, lo, hi, 0, &v)) continue;
        int64_t rest = str_min_rest(n, t, len + 1);
        if (rest >= 0 && (!found || rest < *best)) *best = rest, *cp = v, found = 1;
    }
    return found;
}

/* Finishes a partial \uXXXX (typed hex digits of the unit) or escape. */
static int str_close_unit(cx *x, const gnode *n, const frame *w, uint32_t *cp) {
    int64_t b1 = ND_INF, b2 = ND_INF;
    uint32_t c1 = 0, c2 = 0, sh = 4u * (4u - w->sub), ulo = w->u << sh, uhi = ulo | ((1u << sh) - 1);
    int f1 = best_cp(n, w->a, (uint32_t)w->b, ulo, uhi, &c1, &b1);
    uint32_t a = ulo > 0xD800 ? ulo : 0xD800, z = uhi < 0xDBFF ? uhi : 0xDBFF;
    int f2 = a <= z && best_cp(n, w->a, (uint32_t)w->b, 0x10000 + ((a - 0xD800) << 10),
                               0x10000 + ((z - 0xD800) << 10) + 0x3FF, &c2, &b2);
    if (!f1 && !f2) return 0;
    *cp = f1 && (!f2 || b1 <= b2) ? c1 : c2;
    if (*cp < 0x10000) { put_hex4(&x->o, *cp, w->sub); return 1; }
    put_hex4(&x->o, 0xD800 + ((*cp - 0x10000) >> 10), w->sub);
    sb_put(&x->o, "\\u", 2), put_hex4(&x->o, 0xDC00 + ((*cp - 0x10000) & 0x3FF), 0);
    return 1;
}

static int str_close_esc(cx *x, const gnode *n, const frame *w, uint32_t *cp) {
    static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
    const nd_dfa *d = n->dfa;
    int64_t best = ND_INF;
    int pick = -1;
    for (int i = 0; i < 8 && (uint32_t)w->b < n->maxlen; i++) {
        int32_t t = d->next[(size_t)w->a * d->nclasses + dfa_class(d, (uint8_t)to[i])];
        int64_t rest = t >= 0 ? str_min_rest(n, t, (uint32_t)w->b + 1) : -1;
        if (rest >= 0 && rest < best) best = rest, pick = i;
    }
    if (pick >= 0) { *cp = (uint8_t)to[pick]; sb_ch(&x->o, from[pick]); return 1; }
    frame u = *w;
    u.sub = 0, u.u = 0;
    sb_ch(&x->o, 'u');
    return str_close_unit(x, n, &u, cp);
}

/* Closes a string frame: the partial character, the rest, the quote. */
static int str_close(cx *x, const gnode *n, const frame *w, long k) {
    const nd_dfa *d = n->dfa;
    uint32_t cp = 0, len = (uint32_t)w->b;
    int64_t best;
    switch (w->ph) {
    case S_BODY: return str_rest(x, n, w->a, len, k);
    case S_ESC: if (!str_close_esc(x, n, w, &cp)) return 0; break;
    case S_U: if (!str_close_unit(x, n, w, &cp)) return 0; break;
    case S_UTF: {
        uint32_t min = w->c == 2 ? 0x80 : w->c == 3 ? 0x800 : 0x10000;
        uint32_t lo = w->u << (6 * w->sub), hi = lo | ((1u << (6 * w->sub)) - 1);
        if (!best_cp(n, w->a, len, lo > min ? lo : min, hi, &cp, &best)) return 0;
        for (int i = w->sub; i-- > 0;) sb_ch(&x->o, (char)(0x80 | (cp >> (6 * i) & 63)));
        break;
    }
    default: { /* inside a surrogate pair: the low half */
        uint32_t base = 0x10000 + ((w->u - 0xD800) << 10), lo = 0xDC00, hi = 0xDFFF;
        int typed = w->ph == S_L ? w->sub : 0;
        if (w->ph == S_L) {
            uint32_t sh = 4u * (4u - w->sub);
            lo = (uint32_t)w->x << sh, hi = lo | ((1u << sh) - 1);
            if (lo < 0xDC00) lo = 0xDC00;
            if (hi > 0xDFFF) hi = 0xDFFF;
        }
        if (lo > hi || !best_cp(n, w->a, len, base + lo - 0xDC00, base + hi - 0xDC00, &cp, &best)) return 0;
        if (w->ph == S_LBS) sb_ch(&x->o, '\\');
        if (w->ph != S_L) sb_ch(&x->o, 'u');
        put_hex4(&x->o, 0xDC00 + ((cp - 0x10000) & 0x3FF), typed);
    }
    }
    int32_t t = d->next[(size_t)w->a * d->nclasses + dfa_class(d, cp)];
    return t >= 0 && str_rest(x, n, t, len + 1, k);
}

/* ---- numbers ---- */
static int64_t gcd64(int64_t a, int64_t b) {
    while (b) { int64_t t = a % b; a = b, b = t; }
    return a;
}

/* Writes the number text for scaled value v (int digits, fb fraction digits)
 * minus the prefix of length skip already in the output. */
static void put_num(sbuf *o, const gnode *n, int neg, int64_t mag, int fb, size_t skip) {
    char t[48];
    int64_t S = pow10s[n->F], unit = pow10s[n->F - fb];
    int k = snprintf(t, sizeof t, "%s%lld", neg ? "-" : "", (long long)(mag / S));
    if (fb) k += snprintf(t + k, sizeof t - (size_t)k, ".%0*lld", fb, (long long)(mag % S / unit));
    if ((size_t)k > skip) sb_put(o, t + skip, (size_t)k - skip);
}

/* The k-th valid value of one shape (sign, magnitudes [A, B] in steps st,
 * fb fraction digits): written and 1, or 0 with *k reduced. */
static int num_shape(cx *x, const gnode *n, const frame *w, int neg, int64_t A, int64_t B, int64_t st, int fb,
                     size_t skip, long *k) {
    int64_t P = neg ? -B : A, Q = neg ? -A : B;
    if (P < n->lo) P = n->lo;
    if (Q > n->hi) Q = n->hi;
    if (P > Q) return 0;
    int64_t m1 = st / gcd64(st, n->mult), L = m1 > ND_MAXMAG / n->mult ? 0 : m1 * n->mult;
    int64_t v = L ? ceil_div(P, L) * L : 0;
    if (!L && P > 0) return 0; /* only 0 is a multiple of both */
    for (int tries = 0; v <= Q && tries < 64 + *k && --x->work >= 0; tries++, v += L) {
        int64_t mag = v < 0 ? -v : v;
        frame f = *w;
        f.sub = (uint8_t)neg, f.x = mag / pow10s[n->F], f.b = fb, f.y = mag % pow10s[n->F] / pow10s[n->F - fb];
        f.ph = fb ? N_FRAC : N_INT;
        if (num_end_ok(x->g, &f, n) && (*k)-- == 0) { put_num(&x->o, n, neg, mag, fb, skip); return 1; }
        if (!L) break;
    }
    return 0;
}

/* The k-th shortest digits that finish a number frame (or write one). */
static int num_tail(cx *x, const gnode *n, const frame *w, long k) {
    int F = n->F, ph = w->ph, fresh = ph == N_START || ph == N_SIGN, frac = ph == N_DOT || ph == N_FRAC;
    int64_t S = pow10s[F];
    size_t skip = ph == N_START ? 0 : (size_t)(w->sub + w->a + (frac ? 1 : 0) + w->b);
    for (int len = 0; len <= 40; len++)
        for (int neg = 0; neg < 2; neg++) {
            if (ph == N_START ? neg && len < 2 : neg != w->sub) continue;
            int body = len - (ph == N_START && neg);
            for (int j = 0; j <= F; j++) {
                int kd = frac ? 0 : body - (j ? 1 + j : 0), fb = frac ? w->b + j : j;
                if (frac ? body != j || (ph == N_DOT && j == 0) : kd < 0) continue;
                if (fb > F || (ph == N_INT && (kd > 0 && w->x == 0))) continue;
                if (fresh ? kd < 1 || kd > 18 - F : w->a + kd > 18 - F) continue;
                int64_t Imin = fresh ? (kd == 1 ? 0 : pow10s[kd - 1]) : w->x * pow10s[kd];
                int64_t Imax = fresh ? pow10s[kd] - 1 : Imin + pow10s[kd] - 1;
                int64_t unit = pow10s[F - fb], fmin = 0, fmax = fb ? pow10s[fb] - 1 : 0;
                if (ph == N_FRAC) fmin = w->y * pow10s[j], fmax = fmin + pow10s[j] - 1;
                if (num_shape(x, n, w, neg, Imin * S + fmin * unit, Imax * S + fmax * unit, fb ? unit : S, fb, skip, &k))
                    return 1;
                if (x->work < 0) return 0;
            }
        }
    return 0;
}

/* ---- literals, values from scratch, containers ---- */
static int lit_tail(cx *x, const gnode *n, uint32_t a, uint32_t b, uint32_t c, uint64_t used, long k) {
    /* the k-th unused literal of [a, b) by length: repeated minimum scans */
    size_t last_n = 0;
    uint32_t last_i = 0;
    for (long r = 0; r <= k; r++) {
        int found = 0;
        uint32_t pick = 0;
        for (uint32_t i = a; i < b; i++) {
            if (i < 64 && (used >> i & 1)) continue;
            int after = r == 0 || n->lits[i].n > last_n || (n->lits[i].n == last_n && i > last_i);
            if (after && (!found || n->lits[i].n < n->lits[pick].n)) pick = i, found = 1;
        }
        if (!found || --x->work < 0) return 0;
        last_n = n->lits[pick].n, last_i = pick;
    }
    sb_put(&x->o, n->lits[last_i].s + c, n->lits[last_i].n - c);
    return 1;
}

static int minval(cx *x, int32_t id, int depth, long v, int hop);
static int is_complete(const needle_grammar *g);

/* 1 when item equals an item in spans, the just-closed item, or a new one. */
static int is_dup(const cx *x, int32_t spans, const char *extra, size_t nextra, const size_t *offs,
                  uint32_t nnew, const char *item, size_t n) {
    const needle_grammar *g = x->g;
    for (int32_t s = spans; s >= 0; s = g->sp[s].next)
        if (text_equal(g->text + g->sp[s].start, g->sp[s].end - g->sp[s].start, item, n)) return 1;
    if (extra && text_equal(extra, nextra, item, n)) return 1;
    for (uint32_t i = 0; i < nnew; i++)
        if (text_equal(x->o.s + offs[2 * i], offs[2 * i + 1], item, n)) return 1;
    return 0;
}

/* The rest of an array holding count items: items up to minItems (distinct
 * for uniqueItems), then ']'. comma: a ',' precedes the first new item;
 * need: one item must come; spans/extra: the items there already. */
static int arr_rest(cx *x, const gnode *n, uint32_t count, int comma, int need, int depth, int32_t spans,
                    const char *extra, size_t nextra, long v) {
    uint32_t m = n->minit > count ? n->minit - count : 0;
    if (need && !m) m = 1;
    long v0 = v;
    if (!m && v > 0) m = 1, v0 = v - 1;
    if (m > n->maxit - count || m > ND_MAX_OUTPUT) return 0;
    size_t *offs = m ? malloc(2 * (size_t)m * sizeof *offs) : NULL;
    if (m && !offs) { x->o.bad = 1; return 0; }
    int ok = 1;
    for (uint32_t i = 0; i < m && ok; i++) {
        ok = 0;
        for (long vv = i ? 0 : v0; vv < (i ? 0 : v0) + ND_VARIANTS && !ok && x->work >= 0; vv++) {
            size_t mark = x->o.n;
            if (comma || i) sb_ch(&x->o, ',');
            size_t at = x->o.n;
            ok = minval(x, n->items, depth + 1, vv, 0) && !x->o.bad;
            if (ok && n->unique)
                ok = !is_dup(x, spans, extra, nextra, offs, i, x->o.s + at, x->o.n - at);
            if (!ok) x->o.n = mark;
            else offs[2 * i] = at, offs[2 * i + 1] = x->o.n - at;
            if (!n->unique) break; /* variants only matter for distinctness */
        }
    }
    free(offs);
    if (ok) sb_ch(&x->o, ']');
    return ok;
}

static int64_t key_cost(const needle_grammar *g, const gnode *n, uint32_t i) {
    return (int64_t)n->lits[i].n + 2 + g->cost[n->kids[i]];
}

/* The rest of an object with keys `seen`: the missing required keys (the
 * leading ones first) with minimal values, then '}'. need: a key must come
 * (after a ','); v > 0 varies the first value (or adds the cheapest key). */
static int obj_rest(cx *x, const gnode *n, uint64_t seen, int comma, int need, int depth, long v) {
    uint64_t want = n->required & ~seen, open = open_keys(n, seen);
    long vfirst = v;
    if (!want && (need || v > 0)) {
        int64_t best = ND_INF;
        for (uint32_t i = 0; i < n->nlits; i++)
            if ((open >> i & 1) && key_cost(x->g, n, i) < best) best = key_cost(x->g, n, i), want = 1ull << i;
        if (!want) return 0;
        if (!need) vfirst = v - 1;
    }
    if (want) want |= n->leading & ~seen;
    int first = 1;
    for (int pass = 0; pass < 2; pass++)
        for (uint32_t i = 0; i < n->nlits; i++) {
            if (!(want >> i & 1) || (int)!(n->leading >> i & 1) != pass) continue;
            if (comma) sb_ch(&x->o, ',');
            comma = 1;
            sb_put(&x->o, n->lits[i].s, n->lits[i].n), sb_ch(&x->o, ':');
            if (!minval(x, n->kids[i], depth + 1, first ? vfirst : 0, 0)) return 0;
            first = 0;
        }
    sb_ch(&x->o, '}');
    return !x->o.bad;
}

/* A value of node id from scratch (a frame at depth), the v-th variant. */
static int minval(cx *x, int32_t id, int depth, long v, int hop) {
    const needle_grammar *g = x->g;
    const gnode *n = &g->gr.v[id];
    if (--x->work < 0 || x->o.bad) return 0;
    if (n->kind == K_ALT) {
        if (hop > 16 || !n->nkids) return 0;
        uint32_t nk = n->nkids, *order = malloc(nk * sizeof *order);
        if (!order) { x->o.bad = 1; return 0; }
        for (uint32_t i = 0; i < nk; i++) order[i] = i;
        for (uint32_t i = 1; i < nk; i++) /* by cost (insertion sort, stable) */
            for (uint32_t j = i; j > 0 && g->cost[n->kids[order[j]]] < g->cost[n->kids[order[j - 1]]]; j--) {
                uint32_t t = order[j]; order[j] = order[j - 1], order[j - 1] = t;
            }
        int ok = 0;
        for (uint32_t t = 0; t < nk && !ok && x->work >= 0; t++) {
            size_t mark = x->o.n;
            int32_t kid = n->kids[order[((uint32_t)(v % nk) + t) % nk]];
            if (kid >= 0 && g->cost[kid] < ND_INF) ok = minval(x, kid, depth, v / nk, hop + 1);
            if (!ok) x->o.n = mark;
        }
        free(order);
        return ok;
    }
    if (depth >= ND_MAX_DEPTH) return 0;
    switch (n->kind) {
    case K_LIT: return lit_tail(x, n, 0, n->nlits, 0, 0, v);
    case K_STR: sb_ch(&x->o, '"'); return str_rest(x, n, 0, 0, v);
    case K_NUM: {
        frame w;
        memset(&w, 0, sizeof w);
        w.parent = -1, w.node = id, w.ph = N_START;
        return num_tail(x, n, &w, v);
    }
    case K_ARR: sb_ch(&x->o, '['); return arr_rest(x, n, 0, 0, 0, depth, -1, NULL, 0, v);
    default: sb_ch(&x->o, '{'); return obj_rest(x, n, 0, 0, 0, depth, v);
    }
}

/* O_KEY: finish the cheapest open key in the narrowed range, its value, the rest. */
static int key_close(cx *x, const gnode *n, const frame *w, long v) {
    uint64_t seen = (uint64_t)w->x, open = open_keys(n, seen), req = n->required & ~seen;
    int64_t best = ND_INF;
    int32_t pick = -1;
    for (uint32_t i = (uint32_t)w->a; i < (uint32_t)w->b; i++) {
        if (!(open >> i & 1)) continue;
        int64_t c = key_cost(x->g, n, i) - (req >> i & 1 ? key_cost(x->g, n, i) : 0);
        if (c < best) best = c, pick = (int32_t)i;
    }
    if (pick < 0) return 0;
    sb_put(&x->o, n->lits[pick].s + w->c, n->lits[pick].n - (size_t)w->c), sb_ch(&x->o, ':');
    return minval(x, n->kids[pick], w->depth + 1, v, 0) && obj_rest(x, n, seen | 1ull << pick, 1, 0, w->depth, 0);
}

/* Closes the head frame's own value (variant v). */
static int close_head(cx *x, const frame *w, long v) {
    const needle_grammar *g = x->g;
    const gnode *n = &g->gr.v[w->node];
    uint64_t seen = (uint64_t)w->x;
    switch (n->kind) {
    case K_LIT: return lit_tail(x, n, (uint32_t)w->a, (uint32_t)w->b, (uint32_t)w->c, n->nlits <= 64 ? used_mask(g, w) : 0, v);
    case K_STR: return str_close(x, n, w, v);
    case K_NUM: return num_tail(x, n, w, v);
    case K_ARR:
        if (w->ph == A_OPEN) sb_ch(&x->o, '['); /* the root before any byte */
        if (w->ph <= A_FIRST) return arr_rest(x, n, 0, 0, 0, w->depth, -1, NULL, 0, v);
        return arr_rest(x, n, (uint32_t)w->a, w->ph == A_AFTER, w->ph == A_NEXT, w->depth, w->c, NULL, 0, v);
    default:
        switch (w->ph) {
        case O_FIRST: return obj_rest(x, n, seen, 0, 0, w->depth, v);
        case O_KEYSTART: return obj_rest(x, n, seen, 0, 1, w->depth, v);
        case O_AFTER: return obj_rest(x, n, seen, 1, 0, w->depth, v);
        case O_KEY: return key_close(x, n, w, v);
        case O_COLON: sb_ch(&x->o, ':'); /* fall through */
        case O_VALSTART:
            return minval(x, n->kids[w->y], w->depth + 1, v, 0) &&
                   obj_rest(x, n, seen | 1ull << w->y, 1, 0, w->depth, 0);
        }
    }
    return 0;
}

/* Closes head h and every frame above it; 0 when some item would repeat. */
static int close_chain(cx *x, int32_t h, long v) {
    const needle_grammar *g = x->g;
    if (!close_head(x, &g->fr[h], v)) return 0;
    for (int32_t f = h; g->fr[f].parent >= 0; f = g->fr[f].parent) {
        const frame *p = &g->fr[g->fr[f].parent];
        const gnode *pn = &g->gr.v[p->node];
        if (pn->kind == K_OBJ) {
            if (!obj_rest(x, pn, (uint64_t)p->x, 1, 0, p->depth, 0)) return 0;
            continue;
        }
        char *item = NULL;
        size_t ni = 0;
        if (pn->unique) { /* the item just closed: its text so far and ours */
            ni = g->len - (size_t)p->b + x->o.n;
            if (!(item = malloc(ni + 1))) { x->o.bad = 1; return 0; }
            memcpy(item, g->text + p->b, g->len - (size_t)p->b);
            if (x->o.n) memcpy(item + g->len - (size_t)p->b, x->o.s, x->o.n);
            if (is_dup(x, p->c, NULL, 0, NULL, 0, item, ni)) { free(item); return 0; }
        }
        int ok = arr_rest(x, pn, (uint32_t)p->a + 1, 1, 0, p->depth, p->c, item, ni, 0);
        free(item);
        if (!ok) return 0;
    }
    return !x->o.bad;
}

size_t needle_grammar_completion(const needle_grammar *g, char *out, size_t cap) {
    if (!g || g->done || is_complete(g)) {
        if (out && cap) out[0] = 0;
        return 0;
    }
    cx x = {g, {0}, ND_WORK};
    char *best = NULL;
    size_t best_n = SIZE_MAX;
    for (int i = 0; i < g->cur.n; i++) {
        if (g->cur.h[i] < 0) continue;
        for (long v = 0; v < ND_VARIANTS && x.work >= 0; v++) {
            x.o.n = 0;
            if (!close_chain(&x, g->cur.h[i], v) || x.o.bad) continue;
            if (x.o.n < best_n) {
                char *nb = malloc(x.o.n + 1);
                if (nb && x.o.n) memcpy(nb, x.o.s, x.o.n);
                if (nb) free(best), best = nb, best_n = x.o.n;
            }
            break;
        }
        x.o.bad = 0;
    }
    free(x.o.s);
    if (!best) return SIZE_MAX;
    if (out && cap) {
        size_t k = best_n < cap ? best_n : cap - 1;
        memcpy(out, best, k), out[k] = 0;
    }
    free(best);
    return best_n;
}

/* Per-node cost of a minimal value (a fixpoint: recursive schemas settle
 * once every cycle has a finite way out; INF otherwise). */
static int node_costs(needle_grammar *g) {
    size_t N = g->gr.n;
    g->cost = malloc((N ? N : 1) * sizeof *g->cost);
    if (!g->cost) return -1;
    cx x = {g, {0}, ND_WORK};
    for (size_t i = 0; i < N; i++) {
        const gnode *n = &g->gr.v[i];
        g->cost[i] = ND_INF;
        if (n->kind == K_LIT) {
            for (uint32_t k = 0; k < n->nlits; k++)
                if ((int64_t)n->lits[k].n < g->cost[i]) g->cost[i] = (int64_t)n->lits[k].n;
        } else if (n->kind == K_STR) {
            int64_t L = str_min_rest(n, 0, 0);
            if (L >= 0) g->cost[i] = 2 + L;
        } else if (n->kind == K_NUM) {
            frame w;
            memset(&w, 0, sizeof w);
            w.parent = -1, w.node = (int32_t)i, w.ph = N_START;
            x.o.n = 0, x.work = ND_WORK;
            if (num_tail(&x, n, &w, 0)) g->cost[i] = (int64_t)x.o.n;
        }
    }
    free(x.o.s);
    for (int changed = 1; changed;) {
        changed = 0;
        for (size_t i = 0; i < N; i++) {
            const gnode *n = &g->gr.v[i];
            int64_t c = ND_INF;
            if (n->kind == K_ALT) {
                for (uint32_t k = 0; k < n->nkids; k++)
                    if (n->kids[k] >= 0 && g->cost[n->kids[k]] < c) c = g->cost[n->kids[k]];
            } else if (n->kind == K_ARR) {
                int64_t item = n->items >= 0 ? g->cost[n->items] + 1 : ND_INF;
                c = n->minit > (1u << 20) ? ND_INF : 2 + (n->minit ? item * n->minit : 0);
            } else if (n->kind == K_OBJ) {
                c = 2;
                for (uint32_t k = 0; k < n->nlits; k++)
                    if (n->required >> k & 1) c += key_cost(g, n, k);
            } else continue;
            if (c > ND_INF) c = ND_INF;
            if (c < g->cost[i]) g->cost[i] = c, changed = 1;
        }
    }
    return 0;
}

/* ======================================================================
 * Part 4. The vocabulary trie and the mask.
 * ====================================================================== */
void needle_vocab_free(needle_vocab *v) {
    if (!v) return;
    free(v->nodes), free(v->tok_next), free(v->bytes), free(v->off), free(v->len);
    free(v->plain), free(v->special);
    free(v);
}

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

/* A piece's bytes: byte pieces are their byte, U+2581 is a space, control,
 * unknown and user-defined pieces have none (never allowed). */
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
    if (type != ND_PIECE_NORMAL) return 0;
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

static void dfs(needle_grammar *g, int32_t node, int depth) {
    const needle_vocab *v = g->vocab;
    for (int32_t c = v->nodes[node].child; c >= 0; c = v->nodes[c].sibling) {
        size_t mf = g->nfr, ms = g->nsp;
        g->pos = g->len + (size_t)depth;
        if (feed_byte(g, &g->hs[depth], v->nodes[c].byte, &g->hs[depth + 1])) {
            for (int32_t t = v->nodes[c].tok; t >= 0; t = v->tok_next[t]) g->allowed[t / 64] |= 1ull << (t % 64);
            if (v->nodes[c].child >= 0) dfs(g, c, depth + 1);
        }
        g->nfr = mf, g->nsp = ms;
    }
}

/* Feeds a whole byte string from the committed heads into *out; the arena
 * keeps what it allocated (the caller restores or commits). */
static int feed_bytes(needle_grammar *g, const uint8_t *s, size_t n, heads *out) {
    heads tmp[2];
    const heads *in = &g->cur;
    for (size_t i = 0; i < n; i++) {
        heads *o = &tmp[i & 1];
        g->pos = g->len + i;
        if (!feed_byte(g, in, s[i], o)) return 0;
        in = o;
    }
    *out = *in;
    return 1;
}

/* Fast path: one head inside a free string (no pattern, no near maxLength)
 * allows every plain piece; only the few special ones are walked. */
static int mask_fast(needle_grammar *g) {
    if (g->cur.n != 1 || g->cur.h[0] < 0) return 0;
    const frame *f = &g->fr[g->cur.h[0]];
    const gnode *n = &g->gr.v[f->node];
    if (n->kind != K_STR || f->ph != S_BODY || n->dfa->nstates != 1 || n->dfa->nclasses != 1 ||
        (n->maxlen != UINT32_MAX && (uint64_t)f->b + ND_MAX_PIECE > n->maxlen))
        return 0;
    const needle_vocab *v = g->vocab;
    memcpy(g->allowed, v->plain, ((v->size + 63) / 64) * sizeof *g->allowed);
    for (uint32_t i = 0; i < v->nspecial; i++) {
        int32_t t = v->special[i];
        size_t mf = g->nfr, ms = g->nsp;
        heads out;
        if (feed_bytes(g, v->bytes + v->off[t], v->len[t], &out)) g->allowed[t / 64] |= 1ull << (t % 64);
        g->nfr = mf, g->nsp = ms;
    }
    return 1;
}

static int is_complete(const needle_grammar *g) {
    for (int i = 0; i < g->cur.n; i++)
        if (g->cur.h[i] == ND_DONE) return 1;
    return 0;
}

uint32_t needle_grammar_mask(needle_grammar *g, float *logits) {
    if (!g || !logits) return 0;
    const needle_vocab *v = g->vocab;
    size_t words = (v->size + 63) / 64;
    memset(g->allowed, 0, words * sizeof *g->allowed);
    if (g->done) { /* nothing may follow the end token */
    } else if (is_complete(g)) {
        if (g->end_token >= 0 && (uint32_t)g->end_token < v->size)
            g->allowed[g->end_token / 64] |= 1ull << (g->end_token % 64);
    } else if (!mask_fast(g)) {
        g->hs[0] = g->cur;
        dfs(g, 0, 0);
    }
    if (g->end_token >= 0 && (uint32_t)g->end_token < v->size && !is_complete(g))
        g->allowed[g->end_token / 64] &= ~(1ull << (g->end_token % 64));
    uint32_t count = 0;
    for (uint32_t i = 0; i < v->size; i++) {
        if (g->allowed[i / 64] >> (i % 64) & 1) count++;
        else logits[i] = -INFINITY;
    }
    return count;
}

int nd_grammar_feed(needle_grammar *g, const char *bytes, size_t n, needle_error *err) {
    if (g->done || is_complete(g) || n > ND_MAX_OUTPUT - g->len)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: no bytes may follow here");
    size_t mf = g->nfr, ms = g->nsp;
    heads out;
    if (!feed_bytes(g, (const uint8_t *)bytes, n, &out)) {
        g->nfr = mf, g->nsp = ms;
        return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: bytes at output offset %zu break the grammar", g->len);
    }
    g->cur = out;
    g->len += n;
    if (g->nfr > 4096) compact(g);
    return NEEDLE_OK;
}

size_t nd_grammar_completion_after(needle_grammar *g, int32_t token) {
    const needle_vocab *v = g->vocab;
    if (token < 0 || (uint32_t)token >= v->size || !v->len[token] || g->done || is_complete(g) ||
        v->len[token] > ND_MAX_OUTPUT - g->len)
        return SIZE_MAX;
    size_t mf = g->nfr, ms = g->nsp, len = g->len;
    heads saved = g->cur, out;
    size_t n = SIZE_MAX;
    if (feed_bytes(g, v->bytes + v->off[token], v->len[token], &out)) {
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
        if (g->done || !is_complete(g))
            return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: end token before the call array is complete");
        g->done = 1;
        return NEEDLE_OK;
    }
    if (!v->len[token]) return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: token %d is never allowed", (int)token);
    if (nd_grammar_feed(g, (const char *)v->bytes + v->off[token], v->len[token], NULL))
        return nd_fail(err, NEEDLE_E_ARGUMENT, "grammar: token %d not allowed at output offset %zu", (int)token, g->len);
    return NEEDLE_OK;
}

/* ======================================================================
 * Part 5. Lifetime.
 * ====================================================================== */
void needle_grammar_reset(needle_grammar *g) {
    if (!g) return;
    g->nfr = g->nsp = 0, g->len = g->pos = 0, g->done = 0, g->oom = 0;
    frame w;
    memset(&w, 0, sizeof w);
    w.parent = -1, w.node = g->gr.root, w.c = -1;
    g->cur.n = 0;
    out_add(&g->cur, fr_push(g, &w));
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
    int rc = build_graph(&g->gr, nd_json_root(doc), min_calls, err);
    nd_json_free(doc);
    if (rc) { needle_grammar_free(g); return NULL; }
    g->ctext = ND_MAX_OUTPUT + ND_MAX_PIECE + 1;
    g->text = malloc(g->ctext);
    g->hs = malloc((ND_MAX_PIECE + 2) * sizeof *g->hs);
    g->allowed = calloc((vocab->size + 63) / 64, sizeof *g->allowed);
    if (!g->text || !g->hs || !g->allowed || node_costs(g)) {
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
    graph_free(&g->gr);
    free(g->fr), free(g->sp), free(g->text), free(g->hs), free(g->allowed), free(g->cost);
    needle_vocab_free(g->own_vocab);
    free(g);
}

int needle_grammar_done(const needle_grammar *g) { return g && g->done; }
int nd_grammar_complete(const needle_grammar *g) { return g && is_complete(g); }
const char *nd_grammar_text(const needle_grammar *g, size_t *len) {
    *len = g->len;
    return g->text;
}
