/* grammar_oneof.c: the proof behind oneOf. A oneOf compiles like anyOf
 * only when its branches are disjoint on what the grammar writes: no value
 * a branch's node writes may validate against another branch's schema. The
 * check compares leaf nodes pairwise (literals, strings through their DFA,
 * numbers by range and kind, objects by required keys and their consts,
 * arrays by kind) and answers "may overlap" whenever it cannot prove
 * otherwise, within a work budget; nesting beyond a few levels counts as
 * overlap. grammar_schema.c turns an overlap into an error naming both
 * branches. */

#include "grammar/grammar_internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { V_STR = 1, V_INT = 2, V_FRAC = 4, V_BOOL = 8, V_NULL = 16, V_OBJ = 32, V_ARR = 64 };

static int text_kind(const char *s) {
    switch (s[0]) {
    case '"': return V_STR;
    case '{': return V_OBJ;
    case '[': return V_ARR;
    case 't': case 'f': return V_BOOL;
    case 'n': return V_NULL;
    default: { double d = strtod(s, NULL); return d == floor(d) ? V_INT : V_FRAC; }
    }
}

/* The kinds of values node n writes (written) or its schema accepts: a
 * number schema accepts fractions unless "integer"; its node writes them
 * when it has fraction digits. */
static int node_kinds(const gnode *n, int written) {
    int k = 0;
    switch (n->kind) {
    case K_LIT: for (uint32_t i = 0; i < n->nlits; i++) k |= text_kind(n->lits[i].s); return k;
    case K_STR: return V_STR;
    case K_NUM: return n->integer || (written && n->F == 0) ? V_INT : V_INT | V_FRAC;
    case K_ARR: return V_ARR;
    case K_OBJ: return V_OBJ;
    default: return 0;
    }
}

typedef struct { const graph *gr; long work; char *why; size_t cap; } ov;

static int ov_say(ov *o, const char *fmt, const char *arg) {
    char shown[64];
    nd_escape(shown, sizeof shown, arg, strlen(arg), 40);
    snprintf(o->why, o->cap, fmt, shown);
    return 1;
}

/* The decoded text of string literal t, run through STR node n: accepted? */
static int str_accepts(const gnode *n, const lit *t) {
    nd_json *d = nd_json_parse(t->s, t->n, 1, NULL);
    const nd_jv *v = d ? nd_json_root(d) : NULL;
    size_t k = 0;
    uint32_t *cp = v ? nd_utf8_to_cps(v->str, v->len, &k) : NULL;
    int ok = cp && k >= n->minlen && k <= n->maxlen;
    int32_t st = 0;
    for (size_t i = 0; ok && i < k && st >= 0; i++) st = n->dfa->next[(size_t)st * n->dfa->nclasses + nd_dfa_class(n->dfa, cp[i])];
    ok = ok && st >= 0 && n->dfa->accept[st];
    free(cp), nd_json_free(d);
    return ok;
}

/* Does a string both STR nodes accept exist? 1, 0, or -1 (too large to
 * tell). Breadth first over pairs of states, one layer per code point,
 * within both length bounds (an unbounded search stops after as many
 * layers as pairs: a longer common string can be pumped down). */
static int str_meet(const gnode *a, const gnode *b) {
    const nd_dfa *x = a->dfa, *y = b->dfa;
    size_t P = (size_t)x->nstates * y->nstates;
    if (P > (1u << 16)) return -1;
    uint32_t lo = a->minlen > b->minlen ? a->minlen : b->minlen, hi = a->maxlen < b->maxlen ? a->maxlen : b->maxlen;
    uint64_t last = hi != UINT32_MAX ? hi : (uint64_t)lo + P;
    if (lo > hi) return 0;
    /* the code point intervals on which both DFAs are constant */
    size_t ni = 0, cap = (size_t)x->nclasses + y->nclasses + 2;
    uint32_t (*iv)[2] = malloc(cap * sizeof *iv);
    uint8_t *cur = calloc(P, 1), *nxt = calloc(P, 1);
    int rc = -1;
    if (!iv || !cur || !nxt) goto out;
    for (uint32_t p = 0, i = 0, j = 0; p < 0x110000;) {
        while (i + 1 < x->nclasses && x->bounds[i + 1] <= p) i++;
        while (j + 1 < y->nclasses && y->bounds[j + 1] <= p) j++;
        uint32_t e = x->bounds[i + 1] < y->bounds[j + 1] ? x->bounds[i + 1] : y->bounds[j + 1];
        if (!(p >= 0xD800 && e <= 0xE000)) iv[ni][0] = i, iv[ni++][1] = j; /* no decoded string holds a surrogate */
        p = e;
    }
    cur[0] = 1;
    long work = 0;
    for (uint64_t L = 0;; L++) {
        int any = 0;
        for (size_t q = 0; q < P; q++) {
            if (!cur[q]) continue;
            any = 1;
            if (L >= lo && x->accept[q / y->nstates] && y->accept[q % y->nstates]) { rc = 1; goto out; }
        }
        if (!any || L == last) { rc = 0; goto out; }
        memset(nxt, 0, P);
        for (size_t q = 0; q < P; q++) {
            if (!cur[q]) continue;
            if ((work += (long)ni) > (1l << 24)) goto out;
            size_t sa = q / y->nstates, sb = q % y->nstates;
            for (size_t k = 0; k < ni; k++) {
                int32_t ta = x->next[sa * x->nclasses + iv[k][0]], tb = y->next[sb * y->nclasses + iv[k][1]];
                if (ta >= 0 && tb >= 0) nxt[(size_t)ta * y->nstates + (size_t)tb] = 1;
            }
        }
        uint8_t *t = cur; cur = nxt, nxt = t;
    }
out:
    free(iv), free(cur), free(nxt);
    return rc;
}

/* May number literal t validate against NUM schema b? (0 only when a
 * validator surely rejects it: doubles decide, equality with an exclusive
 * bound is left undecided.) */
static int lit_meets_num(const char *t, const gnode *b) {
    double d = strtod(t, NULL);
    int small = fabs(d) < 9007199254740992.0; /* an integer text is then exactly its double (Python compares ints exactly) */
    if (b->integer && d != floor(d) && fabs(d) < 4503599627370496.0) return 0;
    if (b->has_dlo && (d < b->dlo || (d == b->dlo && b->dlo_ex && small))) return 0;
    if (b->has_dhi && (d > b->dhi || (d == b->dhi && b->dhi_ex && small))) return 0;
    if (b->dmult > 0 && fabs(d) < 9007199254740992.0 && d / b->dmult != floor(d / b->dmult)) return 0;
    return 1;
}

/* May NUM node a write a value equal to number literal t? Its values pass
 * nd_num_ok, so their doubles lie within its bounds' doubles and are
 * multiples in doubles. */
static int num_meets_lit(const gnode *a, const char *t) {
    double d = strtod(t, NULL);
    if (a->F == 0 && d != floor(d)) return 0;
    if (d < nd_num_double(a->lo, a->F) || d > nd_num_double(a->hi, a->F)) return 0;
    if (a->dmult > 0 && d / a->dmult != floor(d / a->dmult)) return 0;
    return 1;
}

static int ov_nodes(ov *o, int32_t A, int32_t B, int depth);

/* A literal nd_text_equal can compare (it parses ND_MAX_DEPTH + 2 deep). */
static int parses(const lit *t) {
    nd_json *d = nd_json_parse(t->s, t->n, ND_MAX_DEPTH + 2, NULL);
    int ok = d != NULL;
    nd_json_free(d);
    return ok;
}

/* Objects: 0 when no object written by a validates against b. A written
 * object holds a's required keys and only a's keys, so it fails b when b
 * requires a key a never writes, or b is closed and a always writes a key b
 * lacks, or a key both have (written always, or required by b) holds
 * values that cannot meet. */
static int ov_objects(ov *o, const gnode *a, const gnode *b, int depth) {
    for (uint32_t j = 0; j < b->nlits; j++) { /* a key b requires */
        if (!(b->required >> j & 1)) continue;
        uint32_t i = 0;
        while (i < a->nlits && nd_lit_cmp(&a->lits[i], &b->lits[j])) i++;
        if (i == a->nlits) return 0;
        if (depth < 6 && !ov_nodes(o, a->kids[i], b->kids[j], depth + 1)) return 0;
    }
    for (uint32_t i = 0; i < a->nlits; i++) { /* a key a always writes */
        if (!(a->required >> i & 1)) continue;
        uint32_t j = 0;
        while (j < b->nlits && nd_lit_cmp(&a->lits[i], &b->lits[j])) j++;
        if (j == b->nlits) { if (b->closed) return 0; continue; }
        if (depth < 6 && !ov_nodes(o, a->kids[i], b->kids[j], depth + 1)) return 0;
    }
    return 1;
}

/* 1 (with o->why) when a value written by leaf a may validate against leaf
 * b's schema, 0 when none can. Nested values are compared at most 6 levels
 * deep (deeper: undecided, so refused). */
static int ov_leaf(ov *o, int32_t ia, int32_t ib, int depth) {
    const graph *gr = o->gr;
    const gnode *a = &gr->v[ia], *b = &gr->v[ib];
    if (--o->work < 0) return ov_say(o, "%sthe check is too large", "");
    int common = node_kinds(a, 1) & node_kinds(b, 0);
    if (!common) return 0;
    if (a->kind == K_LIT && b->kind == K_LIT) {
        for (uint32_t i = 0; i < a->nlits; i++)
            for (uint32_t j = 0; j < b->nlits; j++) {
                const lit *x = &a->lits[i], *y = &b->lits[j];
                if (nd_text_equal(x->s, x->n, y->s, y->n)) return ov_say(o, "both accept %s", x->s);
                if ((text_kind(x->s) & (V_OBJ | V_ARR)) && text_kind(x->s) == text_kind(y->s) && (!parses(x) || !parses(y)))
                    return ov_say(o, "cannot compare %s with the other branch's values", x->s); /* too deep for nd_text_equal */
            }
        return 0;
    }
    if (a->kind == K_LIT || b->kind == K_LIT) { /* a literal against a schema of another kind */
        const gnode *l = a->kind == K_LIT ? a : b, *s = a->kind == K_LIT ? b : a;
        int written = a->kind == K_LIT; /* the literal is what is written, else the schema writes */
        for (uint32_t i = 0; i < l->nlits; i++) {
            const lit *t = &l->lits[i];
            int k = text_kind(t->s), meets;
            if (!(k & node_kinds(s, !written))) continue;
            if (s->kind == K_STR) meets = !written || s->exact ? str_accepts(s, t) : 1;
            else if (s->kind == K_NUM) meets = written ? lit_meets_num(t->s, s) : num_meets_lit(s, t->s);
            else meets = 1; /* an object or array literal against an object or array schema: undecided */
            if (meets) return ov_say(o, "both may accept %s", t->s);
        }
        return 0;
    }
    if (a->kind == K_STR) {
        int m = b->exact ? str_meet(a, b) : -1;
        if (m == 0) return 0;
        return ov_say(o, m > 0 ? "both accept strings%s" : "cannot prove that no string matches both%s", b->exact ? "" : " (format)");
    }
    if (a->kind == K_NUM) {
        /* a's values v lie in [a.lo, a.hi] exactly, so their doubles lie in
         * [lo, hi]. Equal to an exclusive bound: JS and Python floats reject
         * (round(v) <= hi == dlo); a Python int v <= a.hi rejects too when
         * |hi| < 2^53, where floor(a.hi) is exact and below dlo. */
        double lo = nd_num_double(a->lo, a->F), hi = nd_num_double(a->hi, a->F);
        const double big = 9007199254740992.0;
        if (b->has_dlo && (hi < b->dlo || (hi == b->dlo && b->dlo_ex && fabs(hi) < big))) return 0;
        if (b->has_dhi && (lo > b->dhi || (lo == b->dhi && b->dhi_ex && fabs(lo) < big))) return 0;
        return ov_say(o, "both accept %s", a->integer || b->integer || a->F == 0 ? "integers" : "numbers");
    }
    if (a->kind == K_ARR) {
        if (a->maxit < b->minit || a->minit > b->maxit) return 0;
        if (a->minit > 0 && depth < 6 && !ov_nodes(o, a->items, b->items, depth + 1)) return 0;
        return ov_say(o, "both accept arrays%s", depth ? "" : " (give them different lengths or item types)");
    }
    if (!ov_objects(o, a, b, depth)) return 0;
    return ov_say(o, "both accept objects%s", depth ? "" : " (give them a required key with different consts)");
}

/* 1 when some value written by node A may validate against node B. */
static int ov_nodes(ov *o, int32_t A, int32_t B, int depth) {
    uint32_t na, nb;
    const int32_t *la = nd_leaves_of(o->gr, &A, &na), *lb = nd_leaves_of(o->gr, &B, &nb);
    for (uint32_t i = 0; i < na; i++)
        for (uint32_t j = 0; j < nb; j++)
            if (ov_leaf(o, la[i], lb[j], depth)) return 1;
    return 0;
}

int nd_oneof_overlap(const graph *gr, int32_t a, int32_t b, char *why, size_t cap) {
    ov o = {gr, 200000, why, cap};
    why[0] = 0;
    return ov_nodes(&o, a, b, 0) || ov_nodes(&o, b, a, 0);
}
