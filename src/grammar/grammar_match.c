/* grammar_match.c: the tool-call grammar's matcher: immutable frames in an
 * arena, a set of heads. It walks the output one byte at a time; every
 * accepted byte keeps the output a prefix that can still be completed into a
 * value valid under the schemas.
 *
 * Output language: the compact JSON array [{"name":..,"arguments":{..}},...]
 * (no whitespace), keys of an object in any order, each at most once, all
 * required keys before '}'.
 *
 * The matcher state is a set of "heads" (alternatives still alive, for
 * anyOf), each the top of an immutable stack of frames in an arena: a byte
 * copies the top frame (copy on write), so saving and restoring a state is
 * remembering two arena lengths and a head list.
 *
 * Decisions (documented in the report and README):
 * - Strings: the model may write raw UTF-8 or JSON escapes (\uXXXX with
 *   surrogate pairs); minLength/maxLength count code points of the decoded
 *   string and pattern/format run on the decoded code points.
 * - Number bounds are exact on every prefix (128-bit scaled integers: the
 *   model writes digits and the grammar compares them exactly, beyond 2^53
 *   too). multipleOf is also checked in doubles the way validators do it
 *   (0.3 is no multiple of 0.1 for them), and a prefix stays open only while
 *   one of the first ND_NUM_TRIES multiples it can reach passes that check.
 * - uniqueItems compares items by JSON equality.
 * - Recursion ($ref cycles) is bounded by a frame depth of ND_MAX_DEPTH: a
 *   value is started (an alternative, a key, an item) only when the node
 *   cost table says a minimal value of it fits below that depth, so no
 *   prefix dead-ends on the depth bound.
 * - The call stack per byte is bounded (start -> run -> finish -> run of the
 *   parent): nothing here recurses with the input.
 * - Grounded values (Needle 3, grammar_ground.c): a frame started under a
 *   grounded key carries ground; its string or number text is stepped
 *   through the context as well. The mask walk notes in g->ctx_read every
 *   decision that read the context, so its mask is remembered under that
 *   context only (grammar_cache.c). */
#include "grammar/grammar_internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

int32_t nd_frame_push(needle_grammar *g, const frame *w) {
    if (g->nfr == g->cfr) {
        size_t nc = g->cfr ? g->cfr * 2 : 1024;
        frame *nf = nc < INT32_MAX ? realloc(g->fr, nc * sizeof *nf) : NULL;
        if (!nf) { g->oom = 1; return -1; }
        g->fr = nf, g->cfr = nc;
    }
    g->fr[g->nfr] = *w;
    return (int32_t)g->nfr++;
}

void nd_heads_add(heads *o, int32_t h) {
    if (h != -1 && o->n < ND_G_HEADS) o->h[o->n++] = h;
}
static void emit(needle_grammar *g, const frame *w, heads *o) { nd_heads_add(o, nd_frame_push(g, w)); }

static void run(needle_grammar *g, frame w, int b, heads *o);

/* Starts a value of node (an ALT's alternatives are never ALTs: the graph is
 * flattened when it is built) in a frame at depth, fed byte b. The value of
 * a grounded key starts each alternative as grammar_ground.c says. */
static void start(needle_grammar *g, int32_t node, int32_t parent, int depth, int b, heads *o) {
    const gnode *n = &g->gr.v[node];
    uint32_t nk = n->kind == K_ALT ? n->nkids : 1;
    if (parent == -1) return;
    const frame *pf = &g->fr[parent]; /* read before any push moves the arena */
    const gnode *pn = &g->gr.v[pf->node];
    int key = pn->kind == K_OBJ ? (int)pf->y : 0, grounded = pn->kind == K_OBJ && (pn->grounded >> key & 1);
    int required = (int)(pn->required >> key & 1);
    if (grounded) g->ctx_read = 1;
    for (uint32_t i = 0; i < nk; i++) {
        int32_t id = n->kind == K_ALT ? n->kids[i] : node;
        const gnode *m = &g->gr.v[id];
        if (m->kind == K_ALT || nd_cost(&g->gr, id, depth) == ND_INF_COST) continue;
        int mode = grounded ? nd_ground_leaf(g, id, required) : ND_G_FREE;
        if (mode == ND_G_NONE) continue;
        frame w;
        memset(&w, 0, sizeof w);
        w.parent = parent, w.node = id, w.depth = (uint16_t)depth, w.ground = mode == ND_G_SUB;
        if (m->kind == K_LIT) w.b = (int32_t)m->nlits;
        run(g, w, b, o);
    }
}

/* Bit mask of indices [i, j) (j - i <= 64, j <= 64). */
static uint64_t range_mask(uint32_t i, uint32_t j) {
    if (j <= i) return 0;
    uint64_t m = j - i >= 64 ? ~0ull : (1ull << (j - i)) - 1;
    return m << i;
}

/* Values already used by the enclosing unique array (LIT index / NUM slot). */
uint64_t nd_used_mask(const needle_grammar *g, const frame *w) {
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
int nd_text_equal(const char *x, size_t nx, const char *y, size_t ny) {
    if (nx == ny && !memcmp(x, y, nx)) return 1;
    nd_json *a = nd_json_parse(x, nx, ND_MAX_DEPTH + 2, NULL), *b = nd_json_parse(y, ny, ND_MAX_DEPTH + 2, NULL);
    int eq = a && b && jv_equal(nd_json_root(a), nd_json_root(b));
    nd_json_free(a), nd_json_free(b);
    return eq;
}

static nd_num num_value(const gnode *n, const frame *w) {
    nd_num v = w->x * nd_pow10s[n->F] + w->y * nd_pow10s[n->F - w->b];
    return w->sub ? -v : v;
}

/* A child value ended at text[..end): update the parent's state. */
static int child_done(needle_grammar *g, frame *p, const frame *child, uint32_t end) {
    const gnode *pn = &g->gr.v[p->node];
    if (pn->kind == K_OBJ) { p->ph = O_AFTER; return 1; }
    if (pn->unique) {
        for (int32_t s = p->c; s >= 0; s = g->sp[s].next)
            if (nd_text_equal(g->text + g->sp[s].start, g->sp[s].end - g->sp[s].start, g->text + p->b, end - (uint32_t)p->b))
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
        if (pn->small && cn->kind == K_LIT) p->x |= (nd_num)(1ull << child->a);
        if (pn->small && cn->kind == K_NUM)
            p->x |= (nd_num)(1ull << (int)((num_value(cn, child) - nd_ceil_div(cn->lo, cn->mult) * cn->mult) / cn->mult));
    }
    p->a++;
    p->ph = A_AFTER;
    return 1;
}

/* The frame's value is complete: hand over to the parent, which consumes
 * b next (consumed = 0) or already consumed it as the value's last byte. */
static void finish(needle_grammar *g, const frame *w, int consumed, int b, heads *o) {
    if (w->parent < 0) { if (consumed) nd_heads_add(o, ND_DONE); return; }
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
    uint64_t used = n->nlits <= 64 ? nd_used_mask(g, &w) : 0;
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
    for (uint32_t c = nd_dfa_class(d, lo); c < d->nclasses && d->bounds[c] <= hi; c++) {
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
        dup = nd_text_equal(g->text + g->sp[s].start, g->sp[s].end - g->sp[s].start, item, len + 1);
    free(item);
    return dup;
}

/* A grounded string takes byte b (decoded) when its text with b is still in
 * the context. */
static int ground_byte(const needle_grammar *g, frame *w, uint8_t b) {
    int32_t to = nd_ground_step(g, (int32_t)w->y, b);
    if (to < 0) return 0;
    w->y = to;
    return 1;
}

static int str_advance(const needle_grammar *g, const gnode *n, frame *w, uint32_t cp) {
    const nd_dfa *d = n->dfa;
    if ((uint32_t)w->b >= n->maxlen) return 0;
    int32_t t = d->next[(size_t)w->a * d->nclasses + nd_dfa_class(d, cp)];
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
        if (str_cp_ok(n, w.a, len, 0, 0x10FFFF) && (!w.ground || nd_ground_esc_ok(g, (int32_t)w.y)))
            emit(g, &w, o);
        return;
    }
    if (b < 0x20) return;
    if (w.ground && !ground_byte(g, &w, (uint8_t)b)) return;
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
    int h = nd_hex_digit((uint32_t)b);
    if (w.ground) g->ctx_read = 1;
    switch (w.ph) {
    case S_OPEN:
        if (b == '"') { w.ph = S_BODY; emit(g, &w, o); }
        return;
    case S_BODY: run_str_body(g, w, b, o, n); return;
    case S_UTF: {
        if ((b & 0xC0) != 0x80 || (w.ground && !ground_byte(g, &w, (uint8_t)b))) return;
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
        if (f && w.ground && !ground_byte(g, &w, (uint8_t)to[f - from])) return;
        if (f) { if (str_advance(g, n, &w, (uint8_t)to[f - from])) emit(g, &w, o); return; }
        if (b == 'u' && !w.ground && str_unit_ok(n, w.a, len, 0, 0xFFFF)) { w.ph = S_U, w.sub = 0, w.u = 0; emit(g, &w, o); }
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
static const double pow10d[23] = {1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11,
    1e12, 1e13, 1e14, 1e15, 1e16, 1e17, 1e18, 1e19, 1e20, 1e21, 1e22};

int nd_num_text(char *t, nd_num v, int F, int fb) {
    char d[48];
    int k = 0, w = 0;
    nd_num mag = v < 0 ? -v : v;
    if (v < 0) t[w++] = '-';
    for (nd_num ip = mag / nd_pow10s[F]; k == 0 || ip; ip /= 10) d[k++] = (char)('0' + (int)(ip % 10));
    while (k) t[w++] = d[--k];
    if (fb > 0) {
        nd_num fr = mag % nd_pow10s[F] / nd_pow10s[F - fb];
        t[w++] = '.';
        for (int i = fb; i-- > 0; fr /= 10) t[w + i] = (char)('0' + (int)(fr % 10));
        w += fb;
    }
    t[w] = 0;
    return w;
}

/* (double)v / 10^F is correctly rounded while both are exact doubles;
 * otherwise the text goes through strtod (correctly rounded, like a JS or
 * Python parser). */
double nd_num_double(nd_num v, int F) {
    const nd_num big = (nd_num)1 << 53;
    if (v > -big && v < big && F <= 22) return (double)(int64_t)v / pow10d[F];
    char t[48];
    nd_num_text(t, v, F, F);
    return strtod(t, NULL);
}

int nd_num_ok(const gnode *n, nd_num v) {
    if (v < n->lo || v > n->hi || v % n->mult) return 0;
    if (n->dmult > 0) { /* ajv: q !== parseInt(q); Python: int(q) != q */
        double q = nd_num_double(v, n->F) / n->dmult;
        if (q != floor(q) || fabs(q) >= 1e21) return 0;
    }
    return 1;
}

/* In a unique array, v repeats a used value when their doubles are equal:
 * JS validators compare items as doubles (beyond 2^53, 2^53 + 7 equals
 * 2^53 + 8), and so does nd_text_equal. */
static int double_dup(const gnode *n, nd_num v, uint64_t used, nd_num base) {
    const nd_num big = (nd_num)1 << 53;
    if (v > -big && v < big) return 0; /* small integers are exact doubles */
    double d = nd_num_double(v, n->F);
    for (int j = 0; j < 64; j++)
        if ((used >> j & 1) && nd_num_double((base + j) * n->mult, n->F) == d) return 1;
    return 0;
}

int nd_num_first(const gnode *n, nd_num A, nd_num B, uint64_t used, nd_num *out) {
    if (A < n->lo) A = n->lo;
    if (B > n->hi) B = n->hi;
    if (A > B) return 0;
    /* from the end nearest zero (a range never straddles it but at compile time) */
    nd_num qa = nd_ceil_div(A, n->mult), qb = nd_floor_div(B, n->mult), step = B <= 0 ? -1 : 1;
    nd_num q = step > 0 ? qa : qb, base = used ? nd_ceil_div(n->lo, n->mult) : 0;
    for (int t = 0; t < ND_NUM_TRIES && q >= qa && q <= qb; t++, q += step) {
        if (used && ((q - base < 64 && (used >> (int)(q - base) & 1)) || double_dup(n, q * n->mult, used, base))) continue;
        if (nd_num_ok(n, q * n->mult)) { if (out) *out = q * n->mult; return 1; }
    }
    return 0;
}

static int mag_ok(const needle_grammar *g, const frame *w, const gnode *n, int neg, nd_num lo, nd_num hi) {
    uint64_t used = nd_used_mask(g, w);
    return neg ? nd_num_first(n, -hi, -lo, used, NULL) : nd_num_first(n, lo, hi, used, NULL);
}

static int num_viable(const needle_grammar *g, const frame *w, const gnode *n) {
    nd_num S = nd_pow10s[n->F];
    if (w->ph == N_START) return mag_ok(g, w, n, 0, 0, ND_MAXMAG) || mag_ok(g, w, n, 1, 0, ND_MAXMAG);
    if (w->ph == N_SIGN) return mag_ok(g, w, n, 1, 0, ND_MAXMAG);
    if (w->ph == N_INT) {
        for (int k = 0; w->a + k <= ND_NUM_DIGITS - n->F; k++) {
            if (k > 0 && w->x == 0) break;
            nd_num base = w->x * nd_pow10s[k];
            if (mag_ok(g, w, n, w->sub, base * S, (base + nd_pow10s[k]) * S - 1)) return 1;
        }
        return 0;
    }
    nd_num step = nd_pow10s[n->F - w->b], base = w->x * S + w->y * step;
    return mag_ok(g, w, n, w->sub, base, base + step - 1);
}

int nd_num_end_ok(const needle_grammar *g, const frame *w, const gnode *n) {
    if (w->ph != N_INT && w->ph != N_FRAC) return 0;
    nd_num v = num_value(n, w);
    return nd_num_first(n, v, v, nd_used_mask(g, w), NULL);
}

size_t nd_num_len(const frame *w) {
    return (size_t)w->sub + (size_t)w->a + (w->ph == N_DOT || w->ph == N_FRAC ? 1 + (size_t)w->b : 0);
}

int nd_num_step(const gnode *n, frame *w, int b) {
    if (b >= '0' && b <= '9') {
        int d = b - '0';
        if (w->ph == N_START || w->ph == N_SIGN) w->x = d, w->a = 1, w->ph = N_INT;
        else if (w->ph == N_INT) {
            if (w->x == 0 || w->a + 1 > ND_NUM_DIGITS - n->F) return 0;
            w->x = w->x * 10 + d, w->a++;
        } else {
            if (w->b + 1 > n->F) return 0;
            w->y = w->y * 10 + d, w->b++, w->ph = N_FRAC;
        }
        return 1;
    }
    if (b == '-' && w->ph == N_START) { w->sub = 1, w->ph = N_SIGN; return 1; }
    if (b == '.' && w->ph == N_INT && n->F > 0) { w->ph = N_DOT; return 1; }
    return 0;
}

/* A grounded number takes byte b (w before it, v after) when its text with
 * b is in the context and runs on there to a number n accepts. */
static int ground_num_ok(needle_grammar *g, const frame *w, frame *v, const gnode *n, int b) {
    int32_t to = nd_ground_step(g, w->c, (uint8_t)b);
    if (to < 0) return 0;
    v->c = to;
    return nd_ground_num_rest(g, v, n, NULL, NULL);
}

static void run_num(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    frame v = w;
    if (w.ground) g->ctx_read = 1;
    if (nd_num_step(n, &v, b)) {
        if (w.ground ? ground_num_ok(g, &w, &v, n, b) : num_viable(g, &v, n)) emit(g, &v, o);
        return;
    }
    if (b >= '0' && b <= '9') return; /* a digit never ends a number */
    if (nd_num_end_ok(g, &w, n)) finish(g, &w, 0, b, o);
}

/* ---- arrays and objects ---- */
static void item_start(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    w.ph = A_IN, w.b = (int32_t)g->pos;
    int32_t idx = nd_frame_push(g, &w);
    if (idx >= 0) start(g, n->items, idx, w.depth + 1, b, o);
}

/* 1 when an item of array frame w can be written (it fits the depth bound). */
static int item_fits(const needle_grammar *g, const frame *w, const gnode *n) {
    return n->maxit > 0 && nd_cost(&g->gr, n->items, w->depth + 1) != ND_INF_COST;
}

static void run_arr(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    switch (w.ph) {
    case A_OPEN: if (b == '[') { w.ph = A_FIRST, w.c = -1; emit(g, &w, o); } return;
    case A_FIRST:
        if (b == ']') { if (n->minit == 0) finish(g, &w, 1, b, o); return; }
        if (item_fits(g, &w, n)) item_start(g, w, b, o);
        return;
    case A_AFTER:
        if (b == ',' && (uint32_t)w.a < n->maxit && item_fits(g, &w, n)) { w.ph = A_NEXT; emit(g, &w, o); }
        if (b == ']' && (uint32_t)w.a >= n->minit) finish(g, &w, 1, b, o);
        return;
    case A_NEXT: item_start(g, w, b, o); return;
    }
}

/* Keys that may come next: the leading ones first, then any unseen key
 * whose value fits below the depth bound. */
uint64_t nd_open_keys(const graph *gr, const gnode *n, uint64_t seen, int depth) {
    uint64_t lead = n->leading & ~seen, open = lead ? lead : range_mask(0, n->nlits) & ~seen;
    for (uint32_t i = 0; i < n->nlits; i++)
        if ((open >> i & 1) && nd_cost(gr, n->kids[i], depth + 1) == ND_INF_COST) open &= ~(1ull << i);
    return open;
}

static void run_obj(needle_grammar *g, frame w, int b, heads *o) {
    const gnode *n = &g->gr.v[w.node];
    uint64_t seen = (uint64_t)w.x;
    uint64_t open = w.ph == O_COLON || w.ph == O_VALSTART || w.ph == O_OPEN ? 0 : nd_open_keys(&g->gr, n, seen, w.depth);
    if (open && n->grounded) open &= ~nd_ground_closed(g, n, &g->ctx_read);
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
        if (n->lits[i].n == (size_t)w.c) w.y = (nd_num)i, w.ph = O_COLON; /* a quoted key ends only itself */
        emit(g, &w, o);
        return;
    }
    case O_COLON: if (b == ':') { w.ph = O_VALSTART; emit(g, &w, o); } return;
    case O_VALSTART: {
        w.ph = O_IN, w.x = (nd_num)(seen | 1ull << (int)w.y);
        int32_t idx = nd_frame_push(g, &w);
        if (idx >= 0) start(g, n->kids[w.y], idx, w.depth + 1, b, o);
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
int nd_feed_byte(needle_grammar *g, const heads *in, int b, heads *out) {
    out->n = 0;
    if (g->pos >= ND_MAX_OUTPUT) return 0;
    g->text[g->pos] = (char)b;
    for (int i = 0; i < in->n; i++)
        if (in->h[i] >= 0) run(g, g->fr[in->h[i]], b, out);
    return out->n;
}

/* Feeds a whole byte string from the committed heads into *out; the arena
 * keeps what it allocated (the caller restores or commits). */
int nd_feed_bytes(needle_grammar *g, const uint8_t *s, size_t n, heads *out) {
    heads tmp[2];
    const heads *in = &g->cur;
    for (size_t i = 0; i < n; i++) {
        heads *o = &tmp[i & 1];
        g->pos = g->len + i;
        if (!nd_feed_byte(g, in, s[i], o)) return 0;
        in = o;
    }
    *out = *in;
    return 1;
}

/* 1 when a head has closed the call array. */
int nd_match_complete(const needle_grammar *g) {
    for (int i = 0; i < g->cur.n; i++)
        if (g->cur.h[i] == ND_DONE) return 1;
    return 0;
}

/* Drops frames and spans no head can reach (accepted tokens leave old
 * copies behind). Parents always precede children in the arena. */
void nd_arena_compact(needle_grammar *g) {
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
