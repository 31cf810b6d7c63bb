/* pp_place.c: place queries. A model asked to "find Joe's Pizza on Main
 * Street, Springfield" tends to write a shortened or lowercased "joe's
 * pizza", or to split the query over two calls. The engine widens the value
 * to its whole span in the request (filler words allowed between its
 * words), then on over a ", City", an "at/in/on/near <address>" run, a
 * "which is located at" clause, or a place noun after a closing quote, and
 * tidies the span up. */
#ifdef ND_NEEDLE3
#include <string.h>

#include "agent/postprocess.h"
#include "format/json.h"

/* s with every occurrence of phrase removed, again where a removal joins a
 * new one (as removing the leftmost one until none is left: the phrases
 * used here cannot overlap themselves, so the result is the same). */
static pp_str remove_all(pp_ctx *c, pp_str s, const char *phrase) {
    pp_str ph = pp_z(phrase);
    pp_buf b = {c->a, 0, 0, 0};
    for (size_t i = 0; i < s.n; i++) {
        pp_putc(&b, s.p[i]);
        if (b.n >= ph.n && b.p && memcmp(b.p + b.n - ph.n, ph.p, ph.n) == 0) b.n -= ph.n;
    }
    return pp_view(&b);
}

/* Text that talks about places (e-mail addresses aside). */
static int place_text(pp_ctx *c, pp_str t) {
    pp_str s = remove_all(c, remove_all(c, pp_lower(c->a, t), "email address"), "e-mail address");
    pp_spans tok = pp_tokens(c->a, s);
    for (size_t i = 0; i < tok.n; i++)
        if (pp_in(pp_sub(s, tok.v[i].start, tok.v[i].end), PP_PLACE_TEXT)) return 1;
    return 0;
}

pp_str pp_tool_text(pp_ctx *c, pp_str name) {
    const pp_tool *t = pp_tool_first(c, name);
    if (!t) return name;
    pp_buf b = {c->a, 0, 0, 0};
    pp_puts(&b, t->name);
    pp_putc(&b, ' ');
    pp_puts(&b, t->desc);
    return pp_view(&b);
}

int pp_is_place_param(pp_ctx *c, pp_str key, pp_str desc, pp_str tooltext) {
    if (pp_sub_in(key, PP_NOT_PLACE_KEY) || pp_ends(pp_lower(c->a, key), "id")) return 0;
    if (pp_eq_ci(key, pp_z("query"))) return place_text(c, desc) || place_text(c, tooltext);
    return pp_in_ci(key, PP_PLACE_KEYS) || place_text(c, desc);
}

/* ---- recovery over the request's tokens -------------------------------------- */
typedef struct {
    pp_ctx *c;
    pp_spans t;
    pp_str *low; /* each token lowered */
} recovery;

static pp_str rtext(const recovery *r, size_t i) {
    return i < r->t.n ? pp_sub(r->c->req, r->t.v[i].start, r->t.v[i].end) : PP_EMPTY;
}
static pp_str rlow(const recovery *r, size_t i) { return i < r->t.n ? r->low[i] : PP_EMPTY; }
static pp_str gap(const recovery *r, size_t a, size_t b) {
    return pp_sub(r->c->req, r->t.v[a].end, r->t.v[b].start);
}
static int has_any(pp_str s, const char *bytes) {
    for (size_t i = 0; i < s.n; i++)
        if (strchr(bytes, s.p[i]) && s.p[i]) return 1;
    return 0;
}
static int word_in(pp_str w, const char *list) { return w.n && pp_in(w, list); }

/* A clock time (5pm, 10:) or a year. */
static int timeish(pp_str t) {
    if (t.n == 4 && pp_all_digits(t) && (pp_startsz(t, 0, "19") || pp_startsz(t, 0, "20"))) return 1;
    if (!t.n || !pp_is_digit((unsigned char)t.p[0])) return 0;
    size_t skip = t.n > 1 && pp_is_digit((unsigned char)t.p[1]) ? 2 : 1;
    pp_str rest = pp_sub(t, skip, t.n);
    return pp_find_ci(pp_sub(rest, 0, 2), pp_z("am"), 0) == 0 || pp_find_ci(pp_sub(rest, 0, 2), pp_z("pm"), 0) == 0 ||
           pp_startsz(rest, 0, ":");
}

static int lead_ok(pp_str t) {
    unsigned char ch = t.n ? (unsigned char)t.p[0] : 0;
    return (ch >= 'A' && ch <= 'Z') || pp_is_digit(ch) || ch >= 0x80;
}

/* The place query ends after token j: at the request's end, a sentence
 * break, a stop word, or "on (the|a) map". */
static int stop_at(const recovery *r, size_t j) {
    if (j + 1 >= r->t.n) return 1;
    if (has_any(gap(r, j, j + 1), ".!?;")) return 1;
    pp_str n1 = rlow(r, j + 1), w2 = rlow(r, j + 2), w3 = rlow(r, j + 3);
    if (word_in(n1, PP_STOP_WORDS)) return 1;
    int map2 = pp_eqz(w2, "map") || pp_eqz(w2, "maps"), map3 = pp_eqz(w3, "map") || pp_eqz(w3, "maps");
    return pp_eqz(n1, "on") && (map2 || (pp_eqz(w2, "the") && map3) || (pp_eqz(w2, "a") && pp_eqz(w3, "map")));
}

typedef struct {
    size_t last, count;
    int suffix, comma_cap;
} address;

/* A street-address run after token p: capitalized words and numbers,
 * street suffixes, connectives once the run has started, commas between. */
static address address_run(const recovery *r, size_t p) {
    address a = {p, 0, 0, 0};
    for (size_t q = p + 1; q < r->t.n; p = q, q++) {
        pp_str g = gap(r, p, q), t = rtext(r, q), w = rlow(r, q);
        if (has_any(g, ".!?;") || word_in(w, PP_STOP_WORDS)) break;
        g = pp_trim(g, " \t\n");
        int comma = pp_eqz(g, ",");
        if (g.n && !comma) break;
        int digit0 = t.n && pp_is_digit((unsigned char)t.p[0]);
        int first = lead_ok(t) && !pp_in(w, PP_NON_PLACE) && (t.n >= 2 || digit0);
        int second = (digit0 && !timeish(t)) || word_in(w, PP_SUFFIXES) || (word_in(w, PP_ADDR_CONN) && a.count > 0);
        if (!first && !second) break;
        if (word_in(w, PP_SUFFIXES)) a.suffix = 1;
        if (comma && lead_ok(t)) a.comma_cap = 1;
        a.count++, a.last = q;
    }
    return a;
}

/* The first request position where the value's words occur in order, with
 * only filler words between them: (start, end) tokens, or 0. */
static int match_value(const recovery *r, const pp_str *vt, size_t nv, size_t *start, size_t *end) {
    for (size_t i = 0; i < r->t.n; i++) {
        if (!pp_eq(r->low[i], vt[0])) continue;
        size_t j = i, k = 0;
        while (k < nv && j < r->t.n) {
            if (pp_eq(r->low[j], vt[k])) k++, j++;
            else if (pp_in(r->low[j], PP_FILLER)) j++;
            else break;
        }
        if (k == nv) { *start = i, *end = j - 1; return 1; }
    }
    return 0;
}

/* Every byte of g is a quote mark (' " and the curly ones). */
static int only_quotes(pp_str g) {
    for (size_t i = 0; i < g.n;) {
        unsigned char z = i + 2 < g.n ? (unsigned char)g.p[i + 2] : 0;
        if (g.p[i] == '\'' || g.p[i] == '"') i++;
        else if (pp_startsz(g, i, "\xe2\x80") && z >= 0x98 && z <= 0x9d && z != 0x9a && z != 0x9b) i += 3;
        else return 0;
    }
    return 1;
}

/* One step of widening past token cur; returns the new end token, or
 * PP_NONE to stop. */
static size_t widen(const recovery *r, size_t cur, int quoted) {
    pp_str g = pp_trim(gap(r, cur, cur + 1), " \t\n"), n1 = rlow(r, cur + 1);
    if (pp_eqz(g, ",")) { /* ", City": capitalized words after the comma */
        pp_str t = rtext(r, cur + 1);
        if (!lead_ok(t) || pp_in(n1, PP_NON_PLACE) || t.n < 2) return PP_NONE;
        size_t k = cur + 1;
        while (k + 1 < r->t.n && !pp_trim(gap(r, k, k + 1), " \t\n").n && lead_ok(rtext(r, k + 1)) &&
               !pp_in(rlow(r, k + 1), PP_NON_PLACE) && !timeish(rtext(r, k + 1)) && !stop_at(r, k))
            k++;
        return k;
    }
    if (pp_in(n1, PP_PREPS)) { /* "on Main Street", "at 5 Elm St" */
        pp_str w = rtext(r, cur + 2);
        if (cur + 2 >= r->t.n || !w.n || timeish(w) || pp_in_ci(w, PP_NON_PLACE)) return PP_NONE;
        address a = address_run(r, cur + 1);
        int d = pp_is_digit((unsigned char)w.p[0]);
        if (!a.count || (a.count == 1 && d)) return PP_NONE;
        return a.count == 1 || d || a.suffix || a.comma_cap ? a.last : PP_NONE;
    }
    if (pp_eqz(n1, "is") || pp_eqz(n1, "which") || pp_eqz(n1, "located") || pp_eqz(n1, "that")) {
        pp_str w1 = rlow(r, cur + 2), w2 = rlow(r, cur + 3);
        int ok = pp_eqz(w1, "located") || pp_in(w1, PP_PREPS) ||
                 (pp_in(w2, PP_PREPS) && (pp_eqz(w1, "is") || pp_eqz(w1, "located")));
        return ok ? cur + 1 : PP_NONE;
    }
    return quoted && only_quotes(g) && pp_in(n1, PP_PLACE_NOUNS) ? cur + 1 : PP_NONE;
}

pp_str pp_recover_place(pp_ctx *c, pp_str value) {
    pp_spans vs = pp_tokens(c->a, value);
    if (!vs.n) return value;
    pp_str *vt = pp_alloc(c->a, vs.n * sizeof(pp_str));
    recovery r = {c, c->rtok, c->rlow};
    if (!vt || (r.t.n && !r.low)) return value;
    for (size_t i = 0; i < vs.n; i++) vt[i] = pp_lower(c->a, pp_sub(value, vs.v[i].start, vs.v[i].end));
    size_t start, cur;
    if (!match_value(&r, vt, vs.n, &start, &cur)) return value;
    int quoted = 0;
    while (!stop_at(&r, cur)) {
        pp_str g = gap(&r, cur, cur + 1);
        if (has_any(g, "'\"") || pp_hasz(g, "\xe2\x80\x9d") || pp_hasz(g, "\xe2\x80\x99")) quoted = 1;
        size_t next = widen(&r, cur, quoted);
        if (next == PP_NONE) break;
        cur = next;
    }
    pp_str cleaned = pp_clean_place(c, pp_sub(c->req, r.t.v[start].start, r.t.v[cur].end));
    return cleaned.n ? cleaned : value;
}

/* ---- tidying a span ------------------------------------------------------------ */
static int word_byte(unsigned char ch) { return pp_is_alnum(ch) || ch >= 0x80; }

/* Relative clauses collapsed, in this order. */
static const char *const CLEAN_PATTERNS[][2] = {
    {" which is located at ", " "}, {" that is located at ", " "}, {" is located at ", " at "},
    {" located at ", " "},          {" which is at ", " "},          {" that is at ", " "},
    {" which is ", " "},            {" that is ", " "},              {" is located ", " "},
    {" located ", " "}};

/* Each occurrence of pat (case-insensitive) replaced by rep, scanning on
 * after the replacement. */
static pp_str replace_all(pp_ctx *c, pp_str s, pp_str pat, pp_str rep) {
    pp_buf b = {c->a, 0, 0, 0};
    size_t from = 0;
    for (size_t p = pp_find_ci(s, pat, 0); p != PP_NONE; p = pp_find_ci(s, pat, from)) {
        pp_put(&b, s.p + from, p - from);
        pp_puts(&b, rep);
        from = p + pat.n;
    }
    if (!from) return s;
    pp_put(&b, s.p + from, s.n - from);
    return pp_view(&b);
}

/* Quotes out (an apostrophe inside a word stays), relative clauses
 * collapsed, a trailing "on the map" and dangling function words dropped,
 * edge punctuation trimmed. */
pp_str pp_clean_place(pp_ctx *c, pp_str span) {
    pp_buf b = {c->a, 0, 0, 0};
    pp_putc(&b, ' ');
    for (size_t i = 0; i < span.n;) {
        unsigned char ch = (unsigned char)span.p[i], z = i + 2 < span.n ? (unsigned char)span.p[i + 2] : 0;
        if (ch == '"') { i++; continue; }
        if (pp_startsz(span, i, "\xe2\x80") && (z == 0x98 || z == 0x99 || z == 0x9c || z == 0x9d)) { i += 3; continue; }
        if (ch != '\'' || (i > 0 && word_byte((unsigned char)span.p[i - 1]) && i + 1 < span.n &&
                           word_byte((unsigned char)span.p[i + 1])))
            pp_putc(&b, (char)ch);
        i++;
    }
    pp_putc(&b, ' ');
    pp_str s = pp_view(&b);
    for (size_t k = 0; k < sizeof CLEAN_PATTERNS / sizeof CLEAN_PATTERNS[0]; k++)
        s = replace_all(c, s, pp_z(CLEAN_PATTERNS[k][0]), pp_z(CLEAN_PATTERNS[k][1]));
    pp_strv w = pp_ws_tokens(c->a, s);
    if (w.n >= 3) {
        pp_str a = pp_trim(w.v[w.n - 3], ",."), m = pp_trim(w.v[w.n - 2], ",."), z = pp_trim(w.v[w.n - 1], ",.");
        if (pp_eq_ci(a, pp_z("on")) && (pp_eq_ci(m, pp_z("the")) || pp_eq_ci(m, pp_z("a"))) &&
            (pp_eq_ci(z, pp_z("map")) || pp_eq_ci(z, pp_z("maps"))))
            w.n -= 3;
    }
    while (w.n && pp_in(pp_trim(w.v[w.n - 1], ",."), PP_TRAILING)) w.n--; /* case-sensitive, as the engine */
    return pp_trim(pp_join(c->a, &w, ' '), " ,.;:!?");
}

/* ---- a query split over two calls ----------------------------------------------- */
/* Two consecutive calls to one tool, each with one place argument under the
 * same key, whose values sit close together in the request (under 25 bytes
 * of filler words between): the joined span, or empty. */
static int merged_value(pp_ctx *c, const pp_val *prev, const pp_val *cur, pp_str *out) {
    const pp_str *pn = pp_call_name(prev), *cn = pp_call_name(cur);
    const pp_val *pa = pp_call_args(prev), *ca = pp_call_args(cur);
    if (!pn || !cn || !pp_eq(*pn, *cn) || !pa || !ca || pa->n != 1 || ca->n != 1) return 0;
    if (pa->kid[0].type != ND_JSTRING || ca->kid[0].type != ND_JSTRING || !pp_eq(pa->key[0], ca->key[0]))
        return 0;
    pp_str key = pa->key[0], pv = pa->kid[0].s, cv = ca->kid[0].s;
    if (!pp_is_place_param(c, key, pp_info(c, *pn, key)->desc, pp_tool_text(c, *pn))) return 0;
    size_t p1 = pp_find_ci(c->req, pv, 0), p2 = pp_find_ci(c->req, cv, 0);
    if (p1 == PP_NONE || p2 == PP_NONE || p1 >= p2 || !pv.n || !cv.n) return 0;
    size_t after = p1 + pv.n;
    pp_str between = pp_sub(c->req, after, p2 >= after ? p2 : c->req.n);
    if (between.n >= 25) return 0;
    pp_spans t = pp_tokens(c->a, between);
    for (size_t i = 0; i < t.n; i++)
        if (!pp_in_ci(pp_sub(between, t.v[i].start, t.v[i].end), PP_MERGE_GAP)) return 0;
    *out = pp_clean_place(c, pp_sub(c->req, p1, p2 + cv.n));
    return 1;
}

/* Merged calls collapse into the first (whose one argument takes the
 * joined span), which may merge again with the call after. */
void pp_merge_split_place(pp_ctx *c, pp_val *calls) {
    size_t k = 0;
    for (size_t i = 0; i < calls->n; i++) {
        pp_str m;
        if (k && merged_value(c, &calls->kid[k - 1], &calls->kid[i], &m)) {
            pp_get(&calls->kid[k - 1], "arguments")->kid[0] = pp_string(m);
            continue;
        }
        calls->kid[k++] = calls->kid[i];
    }
    calls->n = k;
}
#endif /* ND_NEEDLE3 */
