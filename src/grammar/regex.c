/* regex.c: regular expressions (the ECMAScript subset regex.h lists) -> NFA
 * -> DFA over code points, for the patterns and formats of the tool-call
 * grammar. The parser builds the NFA directly, fragment by fragment (a
 * quantified atom is parsed again for every copy); the subset construction
 * then splits the code points into classes at every range boundary. libc
 * only: nothing here knows about schemas or tokens.
 *
 * Escapes follow ECMAScript's u mode, which JSON Schema validators in JS
 * compile patterns with: a \uHHHH high surrogate followed by a \uHHHH low
 * surrogate is the one code point they encode, since the grammar matches
 * decoded code points, where no surrogate ever appears. */
#include "grammar/regex.h"

#include <stdlib.h>
#include <string.h>

#define ND_MAX_NFA 8192     /* regex NFA states */
#define ND_MAX_DFA 4096     /* regex DFA states */
#define ND_CP_END 0x110000u

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

/* Sorts and merges ranges [from, a->nr); negate complements them. The
 * complement is built from a heap copy: a class may hold as many ranges as
 * the pattern has characters, too many for the stack. */
static void normalize_ranges(nfa *a, size_t from, int negate) {
    size_t n = a->nr - from, w = 0;
    if (n) { /* a->rg may still be NULL when n == 0 (an empty class "[]" or "[^]") */
        cprange *r = a->rg + from;
        qsort(r, n, sizeof *r, cmp_range);
        for (size_t i = 0; i < n; i++) {
            if (w && r[i].lo <= r[w - 1].hi + 1) {
                if (r[i].hi > r[w - 1].hi) r[w - 1].hi = r[i].hi;
            } else r[w++] = r[i];
        }
    }
    a->nr = from + w;
    if (!negate) return;
    cprange *tmp = w ? malloc(w * sizeof *tmp) : NULL;
    if (w && !tmp) { a->error = "out of memory"; return; }
    if (w) memcpy(tmp, a->rg + from, w * sizeof *tmp);
    uint32_t next = 0;
    a->nr = from;
    for (size_t i = 0; i < w; i++) {
        if (tmp[i].lo > next) add_range(a, next, tmp[i].lo - 1);
        next = tmp[i].hi + 1;
    }
    if (next < ND_CP_END) add_range(a, next, ND_CP_END - 1);
    free(tmp);
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

int nd_hex_digit(uint32_t c) {
    if (c >= '0' && c <= '9') return (int)c - '0';
    if ((c | 0x20) >= 'a' && (c | 0x20) <= 'f') return (int)(c | 0x20) - 'a' + 10;
    return -1;
}

/* After a \uHHHH that gave the high surrogate hi: when a \uHHHH low
 * surrogate follows, consumes it and returns the code point the pair
 * encodes (ECMAScript's u mode); otherwise returns hi. */
static uint32_t surrogate_pair(nfa *a, uint32_t hi) {
    if (hi < 0xD800 || hi > 0xDBFF || a->len - a->i < 6 || a->p[a->i] != '\\' || a->p[a->i + 1] != 'u')
        return hi;
    uint32_t lo = 0;
    for (size_t j = 2; j < 6; j++) {
        int h = nd_hex_digit(a->p[a->i + j]);
        if (h < 0) return hi;
        lo = lo << 4 | (uint32_t)h;
    }
    if (lo < 0xDC00 || lo > 0xDFFF) return hi;
    a->i += 6;
    return 0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00);
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
            int h = a->i < a->len ? nd_hex_digit(a->p[a->i]) : -1;
            if (h < 0) { a->error = "bad \\x or \\u escape"; return -1; }
            v = v << 4 | (uint32_t)h, a->i++;
        }
        return c == 'u' ? surrogate_pair(a, v) : v;
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

void nd_dfa_free(nd_dfa *d) {
    if (!d) return;
    free(d->bounds), free(d->next), free(d->accept), free(d->reach), free(d->any);
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
                if (!(sets[s * W + q / 64] >> (q % 64) & 1) || a->st[q].kind != 1 || !a->st[q].nr) continue;
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
    nd_dfa_free(d);
    return NULL;
}

/* A class of surrogates only. No decoded string holds one (JSON's pair
 * \ud83d\ude00 decodes to U+1F600), so reach never steps through it: a
 * pattern that only a lone surrogate could satisfy is refused when the
 * schema compiles instead of leaving the mask with no token to allow. */
static int surrogates_only(const nd_dfa *d, uint32_t c) {
    return d->bounds[c] >= 0xD800 && d->bounds[c + 1] <= 0xE000;
}

/* Whether every class of s (but those only lone surrogates fall in) leads
 * to a state `to` marks (to NULL: to s itself). */
static int all_lead(const nd_dfa *d, uint32_t s, const uint8_t *to) {
    for (uint32_t c = 0; c < d->nclasses; c++) {
        int32_t t = d->next[s * d->nclasses + c];
        if (!surrogates_only(d, c) && (t < 0 || (to ? !to[t] : (uint32_t)t != s))) return 0;
    }
    return 1;
}

/* d->any: states from which any text is accepted, so a mask there needs no
 * trie walk (grammar_mask.c). Found in two steps, not as the whole fixpoint:
 * an accepting state that loops to itself on every class, and an accepting
 * state whose every class leads to one (the start of a free string's
 * two-state DFA). Others are left out: they cost a walk, never a wrong
 * mask. */
static int any_states(nd_dfa *d, const char **why) {
    uint8_t *loop = malloc(d->nstates);
    d->any = malloc(d->nstates);
    if (!loop || !d->any) { free(loop); *why = "out of memory"; return -1; }
    for (uint32_t s = 0; s < d->nstates; s++) loop[s] = d->accept[s] && all_lead(d, s, NULL);
    for (uint32_t s = 0; s < d->nstates; s++) d->any[s] = loop[s] || (d->accept[s] && all_lead(d, s, loop));
    free(loop);
    return 0;
}

/* reach bitsets for lengths 0..lc (lc = maxLength, or minLength + states
 * when unbounded: a longer accepting path can be shortened by a cycle of at
 * most `states` steps without dropping below minLength). */
int nd_dfa_reach(nd_dfa *d, uint32_t minlen, uint32_t maxlen, const char **why) {
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
                if (t >= 0 && !surrogates_only(d, c) &&
                    (d->reach[t * words + (L - 1) / 64] >> ((L - 1) % 64) & 1)) {
                    d->reach[s * words + L / 64] |= 1ull << (L % 64);
                    break;
                }
            }
    return any_states(d, why);
}

/* Decodes UTF-8 (already validated by the JSON parser) to code points. */
uint32_t *nd_utf8_to_cps(const char *s, size_t n, size_t *out_n) {
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
nd_dfa *nd_regex_compile(const char *pat, size_t plen, const char **why) {
    size_t n;
    uint32_t *cp = nd_utf8_to_cps(pat, plen, &n);
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

uint32_t nd_dfa_class(const nd_dfa *d, uint32_t cp) {
    uint32_t lo = 0, hi = d->nclasses; /* bounds[lo] <= cp < bounds[hi] */
    while (hi - lo > 1) {
        uint32_t mid = (lo + hi) / 2;
        if (d->bounds[mid] <= cp) lo = mid;
        else hi = mid;
    }
    return lo;
}
