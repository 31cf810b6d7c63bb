/* grammar_complete.c: the tool-call grammar's shortest completion: from the
 * matcher's heads, bytes that close every open value (a budget guard forces
 * them when tokens run out). Structural, per head: the head frame's rest (a
 * literal's tail, a string's shortest DFA path within the length bounds, the
 * shortest number within the bounds, missing required keys, missing minItems
 * items), then each enclosing frame's rest once its child is done. Values
 * written from scratch are minimal ones (per-node costs steer the choices).
 * uniqueItems: an item that would repeat an earlier one is rewritten with
 * the next "variant" (the k-th shortest text of the innermost value). Short
 * rather than provably shortest: a code point counts as one step whatever
 * its bytes.
 *
 * Nothing here recurses with the input: a string is written by a loop over
 * its code points (an explicit stack of choices for variants), and values
 * nest through minval at most ND_MAX_DEPTH frames deep.
 *
 * Grounded values (grammar_ground.c) come from the context: an open one is
 * finished with the bytes that follow it there, a new one is "" or the
 * shortest number the context holds. They have no variants: an array that
 * needs distinct items of them may find no completion. */
#include "grammar/grammar_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ND_INF ((int64_t)ND_INF_COST)
#define ND_VARIANTS 48 /* variants tried to avoid a duplicate item */
#define ND_WORK 400000 /* steps of one completion search (forward steps of a string are free) */

/* The text being written; bad: out of memory or over ND_MAX_OUTPUT. */
typedef struct { char *s; size_t n, cap; int bad; } sbuf;
/* One completion search: work counts its steps down (a guard on time). g
 * (the matcher state) is NULL when values are only built from scratch. */
typedef struct { const needle_grammar *g; const graph *gr; sbuf o; long work; } cx;

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

/* The steps out of DFA state s, cheapest characters first (up to three
 * representatives per class), built once per state and search. */
typedef struct { step_cand *c; uint32_t n; } step_list;
typedef struct { step_list *by_state; } step_cache;

static const step_list *steps_of(cx *x, step_cache *sc, const nd_dfa *d, int32_t s) {
    if (!sc->by_state && !(sc->by_state = calloc(d->nstates, sizeof *sc->by_state))) { x->o.bad = 1; return NULL; }
    step_list *l = &sc->by_state[s];
    if (l->c) return l;
    l->c = malloc(((size_t)d->nclasses * 3 + 1) * sizeof *l->c);
    if (!l->c) { x->o.bad = 1; return NULL; }
    for (uint32_t c = 0; c < d->nclasses; c++) {
        int32_t t = d->next[(size_t)s * d->nclasses + c];
        if (t < 0) continue;
        for (int i = 0; i < 3; i++) {
            uint32_t cp;
            if (!class_rep(d, c, 0, 0x10FFFF, i, &cp)) break;
            int rank = cp >= 'a' && cp <= 'z' ? 0 : cp >= '0' && cp <= '9' ? 1 : cp >= 'A' && cp <= 'Z' ? 2 : cp < 0x80 ? 3 : 4;
            l->c[l->n++] = (step_cand){cp, t, (int)cp_bytes(cp) * 8 + rank};
        }
    }
    qsort(l->c, l->n, sizeof *l->c, cmp_step);
    return l;
}

static void steps_free(step_cache *sc, const nd_dfa *d) {
    for (uint32_t s = 0; sc->by_state && s < d->nstates; s++) free(sc->by_state[s].c);
    free(sc->by_state);
}

/* Writes the k-th (fixed order, cheapest characters first) string of exactly
 * r code points from state s to acceptance; *k counts the strings passed.
 * A depth-first search with an explicit stack (one entry per code point):
 * every step keeps an accepting end exactly r steps away (reach), so the
 * first string needs no backtracking and costs no work. */
static int str_path(cx *x, step_cache *sc, const gnode *n, int32_t s, uint32_t r, long *k) {
    const nd_dfa *d = n->dfa;
    typedef struct { int32_t s; uint32_t i; size_t mark; } level;
    if (r > ND_MAX_OUTPUT) return 0; /* could never be written */
    level *st = malloc(((size_t)r + 1) * sizeof *st);
    if (!st) { x->o.bad = 1; return 0; }
    size_t top = 0; /* st[top]: the level being chosen, top code points written */
    st[0] = (level){s, 0, x->o.n};
    int ok = 0;
    while (!x->o.bad) {
        level *lv = &st[top];
        if (top == r) { /* a whole string: the k-th, or count it and go back */
            if (d->accept[lv->s] && (*k)-- == 0) { ok = 1; break; }
            if (--x->work < 0 || top == 0) break;
            top--;
            continue;
        }
        const step_list *l = steps_of(x, sc, d, lv->s);
        if (!l) break;
        while (lv->i < l->n && !reach_bit(d, l->c[lv->i].t, r - (uint32_t)top - 1)) lv->i++;
        if (lv->i == l->n) { /* no choice left here: back to the level above */
            if (top == 0 || --x->work < 0) break;
            top--;
            continue;
        }
        const step_cand *c = &l->c[lv->i++];
        x->o.n = lv->mark;
        put_cp(&x->o, c->cp);
        st[++top] = (level){c->t, 0, x->o.n};
    }
    if (!ok) x->o.n = st[0].mark;
    free(st);
    return ok && !x->o.bad;
}

/* The k-th rest of a string body from state s at length len, and '"'. */
static int str_rest(cx *x, const gnode *n, int32_t s, uint32_t len, long k) {
    uint32_t need, upto;
    str_rest_bounds(n, len, &need, &upto);
    step_cache sc = {NULL};
    int ok = 0;
    for (uint32_t L = need; L <= upto && x->work >= 0 && !ok && !x->o.bad; L++) {
        if (!reach_bit(n->dfa, s, L)) continue;
        if (--x->work < 0) break;
        size_t mark = x->o.n;
        if (str_path(x, &sc, n, s, L, &k)) sb_ch(&x->o, '"'), ok = 1;
        else x->o.n = mark;
    }
    steps_free(&sc, n->dfa);
    return ok && !x->o.bad;
}

/* The best code point in [lo, hi] to finish a partial character with: the
 * one whose rest is shortest. */
static int best_cp(const gnode *n, int32_t s, uint32_t len, uint32_t lo, uint32_t hi, uint32_t *cp, int64_t *best) {
    const nd_dfa *d = n->dfa;
    int found = 0;
    if (len >= n->maxlen || lo > hi) return 0;
    for (uint32_t c = nd_dfa_class(d, lo); c < d->nclasses && d->bounds[c] <= hi; c++) {
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
        int32_t t = d->next[(size_t)w->a * d->nclasses + nd_dfa_class(d, (uint8_t)to[i])];
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
    int32_t t = d->next[(size_t)w->a * d->nclasses + nd_dfa_class(d, cp)];
    return t >= 0 && str_rest(x, n, t, len + 1, k);
}

/* ---- numbers ---- */
static nd_num gcd_num(nd_num a, nd_num b) {
    while (b) { nd_num t = a % b; a = b, b = t; }
    return a;
}

/* Writes the number text for scaled value v (fb fraction digits) minus the
 * prefix of length skip already in the output. */
static void put_num(sbuf *o, const gnode *n, int neg, nd_num mag, int fb, size_t skip) {
    char t[48];
    t[0] = '-';
    int k = neg + nd_num_text(t + neg, mag, n->F, fb); /* "-0" keeps its sign: the '-' may be typed */
    if ((size_t)k > skip) sb_put(o, t + skip, (size_t)k - skip);
}

/* The k-th valid value of one shape (sign, magnitudes [A, B] in steps st,
 * fb fraction digits): written and 1, or 0 with *k reduced. Tries as many
 * multiples as the matcher does (nd_num_first), so a value it promised is
 * found. */
static int num_shape(cx *x, const gnode *n, const frame *w, int neg, nd_num A, nd_num B, nd_num st, int fb,
                     size_t skip, long *k) {
    nd_num P = neg ? -B : A, Q = neg ? -A : B;
    if (P < n->lo) P = n->lo;
    if (Q > n->hi) Q = n->hi;
    if (P > Q) return 0;
    nd_num m1 = st / gcd_num(st, n->mult), L = m1 > ND_MAXMAG / n->mult ? 0 : m1 * n->mult;
    if (!L && (P > 0 || Q < 0)) return 0; /* only 0 is a multiple of both */
    /* the order nd_num_first uses: from the end nearest zero */
    nd_num qa = L ? nd_ceil_div(P, L) : 0, qb = L ? nd_floor_div(Q, L) : 0, q = neg ? qb : qa;
    for (long tries = 0; q >= qa && q <= qb && tries < ND_NUM_TRIES + *k && --x->work >= 0; tries++, q += neg ? -1 : 1) {
        nd_num v = q * L, mag = v < 0 ? -v : v;
        frame f = *w;
        f.sub = (uint8_t)neg, f.x = mag / nd_pow10s[n->F], f.b = fb, f.y = mag % nd_pow10s[n->F] / nd_pow10s[n->F - fb];
        f.ph = fb ? N_FRAC : N_INT;
        if (nd_num_end_ok(x->g, &f, n) && (*k)-- == 0) { put_num(&x->o, n, neg, mag, fb, skip); return 1; }
    }
    return 0;
}

/* The k-th shortest digits that finish a number frame (or write one). */
static int num_tail(cx *x, const gnode *n, const frame *w, long k) {
    int F = n->F, ph = w->ph, fresh = ph == N_START || ph == N_SIGN, frac = ph == N_DOT || ph == N_FRAC;
    nd_num S = nd_pow10s[F];
    size_t skip = ph == N_START ? 0 : (size_t)(w->sub + w->a + (frac ? 1 : 0) + w->b);
    for (int len = 0; len <= ND_NUM_DIGITS + 2; len++)
        for (int neg = 0; neg < 2; neg++) {
            if (ph == N_START ? neg && len < 2 : neg != w->sub) continue;
            int body = len - (ph == N_START && neg);
            for (int j = 0; j <= F; j++) {
                int kd = frac ? 0 : body - (j ? 1 + j : 0), fb = frac ? w->b + j : j;
                if (frac ? body != j || (ph == N_DOT && j == 0) : kd < 0) continue;
                if (fb > F || (ph == N_INT && (kd > 0 && w->x == 0))) continue;
                if (fresh ? kd < 1 || kd > ND_NUM_DIGITS - F : w->a + kd > ND_NUM_DIGITS - F) continue;
                nd_num Imin = fresh ? (kd == 1 ? 0 : nd_pow10s[kd - 1]) : w->x * nd_pow10s[kd];
                nd_num Imax = fresh ? nd_pow10s[kd] - 1 : Imin + nd_pow10s[kd] - 1;
                nd_num unit = nd_pow10s[F - fb], fmin = 0, fmax = fb ? nd_pow10s[fb] - 1 : 0;
                if (ph == N_FRAC) fmin = w->y * nd_pow10s[j], fmax = fmin + nd_pow10s[j] - 1;
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

static int value(cx *x, int32_t id, int depth, long v, int gk);
/* A value of node id from scratch in a frame at depth, the v-th variant. */
static int minval(cx *x, int32_t id, int depth, long v) { return value(x, id, depth, v, -1); }

/* The value of key i of object n (a frame at depth): a grounded key's as
 * the matcher starts it. */
static int keyval(cx *x, const gnode *n, uint32_t i, int depth, long v) {
    int gk = x->g && (n->grounded >> i & 1) ? (int)(n->required >> i & 1) : -1;
    return value(x, n->kids[i], depth + 1, v, gk);
}

/* Keys of n the context closes now (grammar_ground.c). */
static uint64_t closed_keys(const cx *x, const gnode *n) {
    int reads = 0;
    return x->g && n->grounded ? nd_ground_closed(x->g, n, &reads) : 0;
}

/* 1 when item equals an item in spans, the just-closed item, or a new one. */
static int is_dup(const cx *x, int32_t spans, const char *extra, size_t nextra, const size_t *offs,
                  uint32_t nnew, const char *item, size_t n) {
    const needle_grammar *g = x->g;
    for (int32_t s = spans; s >= 0; s = g->sp[s].next)
        if (nd_text_equal(g->text + g->sp[s].start, g->sp[s].end - g->sp[s].start, item, n)) return 1;
    if (extra && nd_text_equal(extra, nextra, item, n)) return 1;
    for (uint32_t i = 0; i < nnew; i++)
        if (nd_text_equal(x->o.s + offs[2 * i], offs[2 * i + 1], item, n)) return 1;
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
            ok = minval(x, n->items, depth + 1, vv) && !x->o.bad;
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

/* The bytes key i of object n adds in a frame at depth (its value one deeper). */
static int64_t key_cost(const graph *gr, const gnode *n, uint32_t i, int depth) {
    int32_t c = nd_cost(gr, n->kids[i], depth + 1);
    return c == ND_INF_COST ? ND_INF : (int64_t)n->lits[i].n + 2 + c;
}

/* The rest of an object with keys `seen`: the missing required keys (the
 * leading ones first) with minimal values, then '}'. need: a key must come
 * (after a ','); v > 0 varies the first value (or adds the cheapest key). */
static int obj_rest(cx *x, const gnode *n, uint64_t seen, int comma, int need, int depth, long v) {
    uint64_t want = n->required & ~seen, open = nd_open_keys(x->gr, n, seen, depth) & ~closed_keys(x, n);
    long vfirst = v;
    if (!want && (need || v > 0)) {
        int64_t best = ND_INF;
        for (uint32_t i = 0; i < n->nlits; i++)
            if ((open >> i & 1) && key_cost(x->gr, n, i, depth) < best) best = key_cost(x->gr, n, i, depth), want = 1ull << i;
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
            if (!keyval(x, n, i, depth, first ? vfirst : 0)) return 0;
            first = 0;
        }
    sb_ch(&x->o, '}');
    return !x->o.bad;
}

/* A grounded leaf's value from scratch: "" or a number the context holds. */
static int ground_fresh(cx *x, const gnode *n, int32_t id) {
    if (n->kind == K_STR) { sb_put(&x->o, "\"\"", 2); return !x->o.bad; }
    frame w;
    char num[ND_NUM_DIGITS + 4];
    size_t len;
    memset(&w, 0, sizeof w);
    w.parent = -1, w.node = id, w.ph = N_START; /* c = 0: the context's root */
    if (!nd_ground_num_rest(x->g, &w, n, num, &len)) return 0;
    sb_put(&x->o, num, len);
    return !x->o.bad;
}

/* A value of node id from scratch (a frame at depth), the v-th variant. An
 * ALT's alternatives are leaves (the graph is flattened), tried cheapest
 * first at this depth. gk: -1, or the value is a grounded key's (1 when the
 * key is required). */
static int value(cx *x, int32_t id, int depth, long v, int gk) {
    const graph *gr = x->gr;
    const gnode *n = &gr->v[id];
    if (--x->work < 0 || x->o.bad) return 0;
    if (n->kind == K_ALT) {
        if (!n->nkids) return 0;
        uint32_t nk = n->nkids, *order = malloc(nk * sizeof *order);
        if (!order) { x->o.bad = 1; return 0; }
        for (uint32_t i = 0; i < nk; i++) order[i] = i;
        for (uint32_t i = 1; i < nk; i++) /* by cost (insertion sort, stable) */
            for (uint32_t j = i; j > 0 && nd_cost(gr, n->kids[order[j]], depth) < nd_cost(gr, n->kids[order[j - 1]], depth); j--) {
                uint32_t t = order[j]; order[j] = order[j - 1], order[j - 1] = t;
            }
        int ok = 0;
        for (uint32_t t = 0; t < nk && !ok && x->work >= 0; t++) {
            size_t mark = x->o.n;
            int32_t kid = n->kids[order[((uint32_t)(v % nk) + t) % nk]];
            if (gr->v[kid].kind != K_ALT && nd_cost(gr, kid, depth) != ND_INF_COST) ok = value(x, kid, depth, v / nk, gk);
            if (!ok) x->o.n = mark;
        }
        free(order);
        return ok;
    }
    if (nd_cost(gr, id, depth) == ND_INF_COST) return 0;
    int mode = gk >= 0 ? nd_ground_leaf(x->g, id, gk) : ND_G_FREE;
    if (mode == ND_G_NONE) return 0;
    if (mode == ND_G_SUB) return ground_fresh(x, n, id);
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
    uint64_t seen = (uint64_t)w->x, open = nd_open_keys(x->gr, n, seen, w->depth) & ~closed_keys(x, n);
    uint64_t req = n->required & ~seen;
    int64_t best = ND_INF + 1;
    int32_t pick = -1;
    for (uint32_t i = (uint32_t)w->a; i < (uint32_t)w->b; i++) {
        if (!(open >> i & 1)) continue;
        int64_t c = req >> i & 1 ? 0 : key_cost(x->gr, n, i, w->depth);
        if (c < best) best = c, pick = (int32_t)i;
    }
    if (pick < 0) return 0;
    sb_put(&x->o, n->lits[pick].s + w->c, n->lits[pick].n - (size_t)w->c), sb_ch(&x->o, ':');
    return keyval(x, n, (uint32_t)pick, w->depth, v) && obj_rest(x, n, seen | 1ull << pick, 1, 0, w->depth, 0);
}

/* Closes a grounded value with the bytes the context holds after it: a
 * string's partial character or escape, then its quote; a number's rest. */
static int ground_close(cx *x, const frame *w, const gnode *n) {
    const needle_grammar *g = x->g;
    int32_t state = (int32_t)w->y;
    if (n->kind == K_NUM) {
        char num[ND_NUM_DIGITS + 4];
        size_t len;
        if (!nd_ground_num_rest(g, w, n, num, &len)) return 0;
        sb_put(&x->o, num, len);
        return !x->o.bad;
    }
    if (w->ph == S_ESC) {
        static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
        int i = 0;
        while (i < 8 && nd_ground_step(g, state, (uint8_t)to[i]) < 0) i++;
        if (i == 8) return 0;
        sb_ch(&x->o, from[i]);
    } else if (w->ph == S_UTF) { /* the character's rest, where the text first ends */
        size_t avail;
        const uint8_t *rest = nd_ground_after(g, state, &avail);
        if (avail < w->sub) return 0;
        sb_put(&x->o, (const char *)rest, w->sub);
    } else if (w->ph != S_BODY) return 0; /* no \u escape in a grounded string */
    sb_ch(&x->o, '"');
    return !x->o.bad;
}

/* Closes the head frame's own value (variant v). */
static int close_head(cx *x, const frame *w, long v) {
    const needle_grammar *g = x->g;
    const gnode *n = &g->gr.v[w->node];
    uint64_t seen = (uint64_t)w->x;
    if (w->ground) return ground_close(x, w, n);
    switch (n->kind) {
    case K_LIT: return lit_tail(x, n, (uint32_t)w->a, (uint32_t)w->b, (uint32_t)w->c, n->nlits <= 64 ? nd_used_mask(g, w) : 0, v);
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
            return keyval(x, n, (uint32_t)w->y, w->depth, v) &&
                   obj_rest(x, n, seen | 1ull << (int)w->y, 1, 0, w->depth, 0);
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
    if (!g || g->done || nd_match_complete(g)) {
        if (out && cap) out[0] = 0;
        return 0;
    }
    cx x = {g, &g->gr, {0}, ND_WORK};
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

/* The cost table: per depth d (deepest first), every leaf from the level
 * below, then every ALT as its cheapest alternative at d (alternatives are
 * leaves, so one pass per level is exact: no fixpoint, and a recursive
 * schema costs what its base case costs, or ND_INF_COST when the base case
 * never fits below ND_MAX_DEPTH). A value longer than ND_MAX_OUTPUT cannot
 * be written: ND_INF_COST too. */
int nd_graph_costs(graph *gr) {
    size_t N = gr->n;
    free(gr->cost);
    gr->cost = malloc(((size_t)ND_MAX_DEPTH * N + 1) * sizeof *gr->cost);
    int64_t *base = malloc((N + 1) * sizeof *base); /* LIT/STR/NUM: depth does not matter */
    if (!gr->cost || !base) { free(base); return -1; }
    cx x = {NULL, gr, {0}, ND_WORK};
    for (size_t i = 0; i < N; i++) {
        const gnode *n = &gr->v[i];
        base[i] = ND_INF;
        if (n->kind == K_LIT) {
            for (uint32_t k = 0; k < n->nlits; k++)
                if ((int64_t)n->lits[k].n < base[i]) base[i] = (int64_t)n->lits[k].n;
        } else if (n->kind == K_STR) {
            int64_t L = str_min_rest(n, 0, 0);
            if (L >= 0) base[i] = 2 + L;
        } else if (n->kind == K_NUM) {
            frame w;
            memset(&w, 0, sizeof w);
            w.parent = -1, w.node = (int32_t)i, w.ph = N_START;
            x.o.n = 0, x.o.bad = 0, x.work = ND_WORK;
            if (num_tail(&x, n, &w, 0) && !x.o.bad) base[i] = (int64_t)x.o.n;
        }
    }
    free(x.o.s);
    for (int d = ND_MAX_DEPTH - 1; d >= 0; d--) {
        int32_t *row = gr->cost + (size_t)d * N;
        for (int pass = 0; pass < 2; pass++) /* leaves, then ALTs */
            for (size_t i = 0; i < N; i++) {
                const gnode *n = &gr->v[i];
                if ((n->kind == K_ALT) != pass) continue;
                int64_t c = ND_INF;
                if (n->kind == K_ALT) {
                    for (uint32_t k = 0; k < n->nkids; k++)
                        if (n->kids[k] >= 0 && gr->v[n->kids[k]].kind != K_ALT && row[n->kids[k]] < c) c = row[n->kids[k]];
                } else if (n->kind == K_ARR) {
                    int64_t item = nd_cost(gr, n->items, d + 1);
                    c = n->minit == 0 ? 2 : item == ND_INF || n->minit > ND_MAX_OUTPUT ? ND_INF : 1 + (item + 1) * n->minit;
                } else if (n->kind == K_OBJ) {
                    c = 2;
                    for (uint32_t k = 0; k < n->nlits && c < ND_INF; k++)
                        if (n->required >> k & 1) c += key_cost(gr, n, k, d);
                } else c = base[i];
                row[i] = c > (int64_t)ND_MAX_OUTPUT ? ND_INF_COST : (int32_t)c;
            }
    }
    free(base);
    return 0;
}

int nd_graph_can_complete(const graph *gr, int32_t node, int depth) {
    cx x = {NULL, gr, {0}, ND_WORK};
    int ok = minval(&x, node, depth, 0) && !x.o.bad;
    free(x.o.s);
    return ok;
}
