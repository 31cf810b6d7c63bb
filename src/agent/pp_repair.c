/* pp_repair.c: argument repairs before and inside the per-argument rebuild.
 * The model's copy of a value is often a little off the request: a full
 * name in the first-name slot, a phone number missing its area code, a
 * quoted title lowercased or cut short, a temperature in the other unit.
 * Each repair takes the request's own bytes when they clearly say more. */
#ifdef ND_NEEDLE3
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/postprocess.h"
#include "format/json.h"

/* ---- first and last names ---------------------------------------------------- */
/* Words of a name value with leading honorifics dropped. */
static pp_strv name_parts(pp_ctx *c, pp_str v) {
    pp_strv w = pp_ws_tokens(c->a, pp_trim(v, " \t"));
    size_t skip = 0;
    while (skip < w.n && pp_in_ci(w.v[skip], PP_HONORIFICS)) skip++;
    return (pp_strv){w.v + skip, w.n - skip, 0};
}

static int capitalish(pp_str t) {
    unsigned char c = t.n ? (unsigned char)t.p[0] : 0;
    return c >= 0x80 || (c >= 'A' && c <= 'Z');
}

static pp_str strip_possessive(pp_str t) {
    if (t.n > 2 && pp_ends(t, "'s")) return pp_sub(t, 0, t.n - 2);
    if (t.n >= 5 && pp_ends(t, "\xe2\x80\x99s")) return pp_sub(t, 0, t.n - 4);
    return t;
}

static pp_str tok_text(pp_str s, pp_span t) { return pp_sub(s, t.start, t.end); }

/* Tokens a and b of the request are adjacent (only blanks between). */
static int adjacent(pp_str req, pp_span a, pp_span b) {
    return pp_trim(pp_sub(req, a.end, b.start), " \t\n").n == 0;
}

/* The request word after `word` that can be its surname, or empty. */
static pp_str following_surname(pp_ctx *c, const pp_spans *t, pp_str word) {
    for (size_t i = 0; i + 1 < t->n; i++) {
        pp_str q = tok_text(c->req, t->v[i + 1]);
        if (pp_eq_ci(tok_text(c->req, t->v[i]), word) && capitalish(q) && !pp_in_ci(q, PP_NOT_LAST) &&
            adjacent(c->req, t->v[i], t->v[i + 1]))
            return strip_possessive(q);
    }
    return PP_EMPTY;
}

/* The capitalized request word right before `surname` that can be its
 * first name, or empty. */
static pp_str preceding_first(pp_ctx *c, const pp_spans *t, pp_str surname) {
    for (size_t i = 1; i < t->n; i++) {
        pp_str p = tok_text(c->req, t->v[i - 1]);
        if (pp_eq_ci(tok_text(c->req, t->v[i]), surname) && capitalish(p) && !pp_in_ci(p, PP_HONORIFICS) &&
            !pp_in_ci(p, PP_NOT_FIRST) && adjacent(c->req, t->v[i - 1], t->v[i]))
            return p;
    }
    return PP_EMPTY;
}

static int words_equal(const pp_str *a, const pp_str *b, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (!pp_eq(a[i], b[i])) return 0;
    return 1;
}

static pp_strv one(pp_ctx *c, pp_str w) {
    pp_strv v = {0};
    pp_strv_push(c->a, &v, w);
    return v;
}

/* The string value of a first/last slot (empty when absent); 0 when the
 * slot holds something else, which stops the repair. */
static int name_slot(const pp_val *args, size_t i, pp_str *out) {
    *out = PP_EMPTY;
    if (i == PP_NONE) return 1;
    if (args->kid[i].type != ND_JSTRING) return 0;
    *out = args->kid[i].s;
    return 1;
}

/* Splits a full name that sits in one of a first/last pair, fills a
 * missing half from the request ("save Jane Smith's number"), and drops
 * leading honorifics ("add Dr. Jane Smith" -> first name "Jane"). */
void pp_split_name(pp_ctx *c, pp_val *args) {
    size_t fi = PP_NONE, li = PP_NONE;
    for (size_t i = args->n; i-- > 0;) {
        if (pp_in_ci(args->key[i], PP_FIRST_KEYS)) fi = i;
        if (pp_in_ci(args->key[i], PP_LAST_KEYS)) li = i;
    }
    pp_str f0, l0;
    if ((fi == PP_NONE && li == PP_NONE) || !name_slot(args, fi, &f0) || !name_slot(args, li, &l0)) return;
    pp_strv fw = name_parts(c, f0), lw = name_parts(c, l0);
    if (lw.n >= 2 && (!fw.n || (fw.n <= lw.n && words_equal(fw.v, lw.v, fw.n)))) {
        fw = one(c, lw.v[0]);
        lw.v++, lw.n--;
    } else if (fw.n >= 2 && (!lw.n || (lw.n <= fw.n && words_equal(lw.v, fw.v + fw.n - lw.n, lw.n)))) {
        lw = (pp_strv){fw.v + 1, fw.n - 1, 0};
        fw.n = 1;
    } else if ((lw.n == 1 && !fw.n) || (fw.n == 1 && !lw.n)) {
        const pp_spans t = c->rtok;
        if (t.n < 2) goto write;
        if (fw.n) {
            pp_str q = following_surname(c, &t, fw.v[0]);
            if (q.n) lw = one(c, q);
        } else {
            pp_str p = preceding_first(c, &t, lw.v[0]), q;
            if (p.n) fw = one(c, p);
            else if ((q = following_surname(c, &t, lw.v[0])).n) fw = one(c, lw.v[0]), lw = one(c, q);
        }
    }
write:;
    pp_str first = pp_join(c->a, &fw, ' '), last = pp_join(c->a, &lw, ' ');
    if (fi != PP_NONE && !pp_eq(first, f0)) args->kid[fi] = pp_string(first);
    if (li != PP_NONE && !pp_eq(last, l0)) args->kid[li] = pp_string(last);
}

/* ---- file types ---------------------------------------------------------------- */
/* A bare file extension as its MIME type; anything else unchanged. */
static pp_str mime(pp_str s) {
    pp_str e = pp_trim(s, " \t.");
    if (!e.n || memchr(e.p, '/', e.n)) return s;
    const char *list = PP_MIME;
    pp_str item;
    while (pp_next_item(&list, &item)) {
        size_t eq = pp_find(item, pp_z("="), 0);
        if (pp_eq_ci(e, pp_sub(item, 0, eq))) return pp_sub(item, eq + 1, item.n);
    }
    return s;
}

static void to_mime(pp_val *v) {
    if (v->type == ND_JSTRING) v->s = mime(v->s);
    for (size_t i = 0; v->type == ND_JARRAY && i < v->n; i++) to_mime(&v->kid[i]);
}

/* ---- phone numbers ------------------------------------------------------------- */
static pp_str digits(pp_ctx *c, pp_str s) {
    pp_buf b = {c->a, 0, 0, 0};
    for (size_t i = 0; i < s.n; i++)
        if (pp_is_digit((unsigned char)s.p[i])) pp_putc(&b, s.p[i]);
    return pp_view(&b);
}

static int phone_byte(char ch) {
    return !ch || ch == ' ' || ch == '(' || ch == ')' || ch == '-' || ch == '.' || pp_is_digit((unsigned char)ch);
}

/* Phone-number-like spans of the request: from '(', '+' or a digit over
 * digits, blanks and ()-. up to the last digit; six digits and seven bytes
 * or more. */
pp_strv pp_phone_candidates(pp_ctx *c, pp_str r) {
    pp_strv out = {0};
    size_t p = 0;
    while (p < r.n) {
        char ch = r.p[p];
        if (ch != '(' && ch != '+' && !pp_is_digit((unsigned char)ch)) { p++; continue; }
        size_t j = ch == '+' ? p + 1 : p;
        if (j < r.n && r.p[j] == '(') j++;
        if (j >= r.n || !pp_is_digit((unsigned char)r.p[j])) { p = j > p + 1 ? j : p + 1; continue; }
        while (j < r.n && phone_byte(r.p[j])) j++;
        size_t end = j;
        while (end > p && !pp_is_digit((unsigned char)r.p[end - 1])) end--;
        pp_str span = pp_sub(r, p, end);
        if (digits(c, span).n >= 6 && span.n >= 7) pp_strv_push(c->a, &out, span);
        p = end > p + 1 ? end : p + 1;
    }
    return out;
}

static int phone_value(pp_str t) {
    size_t i = t.n && (t.p[0] == '+' || t.p[0] == '(');
    if (i >= t.n || !pp_is_digit((unsigned char)t.p[i])) return 0;
    for (; i < t.n; i++)
        if (!phone_byte(t.p[i]) && t.p[i] != '\'') return 0;
    return 1;
}

/* Completes a truncated phone number from the request (the longest number
 * there containing the value's digits), or takes the request's formatting
 * of the same digits. Any key with phone, mobile, tel, number or fax. */
static pp_str complete_phone(pp_ctx *c, pp_str key, pp_str value) {
    pp_str t = pp_trim(value, " \t");
    if (!t.n || !pp_sub_in(key, PP_PHONE_KEYS)) return value;
    pp_str vd = digits(c, value);
    if (!vd.n || !phone_value(t)) return value;
    pp_strv cands = c->phones;
    pp_str best = value;
    for (size_t i = 0; i < cands.n; i++) {
        pp_str cd = digits(c, cands.v[i]), t2 = pp_trim(cands.v[i], " .,;:");
        if (cd.n > vd.n && pp_has(cd, vd) && digits(c, t2).n > digits(c, best).n) best = t2;
    }
    if (!pp_eq(best, value)) return best;
    for (size_t i = 0; i < cands.n; i++) {
        pp_str o = pp_trim(cands.v[i], " .,;:");
        if (pp_eq(digits(c, cands.v[i]), vd) && !pp_eq(o, value)) return o;
    }
    return value;
}

/* ---- quoted text ------------------------------------------------------------- */
static int alpha(unsigned char ch) { return (ch | 0x20) >= 'a' && (ch | 0x20) <= 'z'; }

/* Length of a double quote mark (" or a curly one) at i, or 0. */
static size_t dq(pp_str r, size_t i) {
    if (r.p[i] == '"') return 1;
    unsigned char z = i + 2 < r.n ? (unsigned char)r.p[i + 2] : 0;
    return i + 2 < r.n && pp_startsz(r, i, "\xe2\x80") && (z == 0x9c || z == 0x9d) ? 3 : 0;
}

static void double_quoted(pp_ctx *c, pp_str r, pp_strv *out) {
    size_t i = 0;
    while (i < r.n) {
        size_t n = dq(r, i), j, m = 0;
        if (!n) { i++; continue; }
        size_t start = i + n;
        if (start >= r.n) return;
        for (j = start; j < r.n && !(m = dq(r, j)); j++) {}
        if (j >= r.n || j == start) return;
        pp_strv_push(c->a, out, pp_sub(r, start, j));
        i = j + m;
    }
}

/* Single quotes: an opening ' or U+2018 not glued to a letter before it,
 * closed by ' or U+2019 not glued to a letter after it ("don't" is no
 * quote). */
static void single_quoted(pp_ctx *c, pp_str r, pp_strv *out) {
    size_t i = 0;
    while (i < r.n) {
        size_t n = r.p[i] == '\'' ? 1 : pp_startsz(r, i, "\xe2\x80\x98") ? 3 : 0;
        if (!n || (i > 0 && alpha((unsigned char)r.p[i - 1]))) { i++; continue; }
        size_t start = i + n, j = start, m = 0;
        if (start >= r.n) return;
        while (j < r.n && !(m = r.p[j] == '\'' ? 1 : pp_startsz(r, j, "\xe2\x80\x99") ? 3 : 0)) j++;
        if (j >= r.n) return;
        if (j + m < r.n && alpha((unsigned char)r.p[j + m])) i++;
        else if (j > start) pp_strv_push(c->a, out, pp_sub(r, start, j)), i = j + m;
        else i++;
    }
}

pp_strv pp_quoted_spans(pp_ctx *c, pp_str req) {
    pp_strv out = {0};
    double_quoted(c, req, &out);
    single_quoted(c, req, &out);
    return out;
}

/* A value equal to a quoted span (case and edge punctuation aside), or a
 * truncated prefix of a longer one, becomes the span verbatim. */
static pp_str restore_quoted(pp_ctx *c, pp_str value) {
    static const char punct[] = " \t\n.,!?:;";
    if (!pp_trim(value, " \t").n) return value;
    pp_str vn = pp_trim(value, punct), p = value;
    for (size_t i = 0; i < c->quotes.n; i++) {
        pp_str q = c->quotes.v[i];
        if (pp_eq_ci(pp_trim(q, punct), vn) && !pp_eq(q, value)) return pp_trim(q, ",; ");
    }
    while (p.n && (p.p[p.n - 1] == ' ' || p.p[p.n - 1] == '.')) p.n--;
    for (size_t i = 0; i < c->quotes.n; i++) {
        pp_str q = c->quotes.v[i];
        if (q.n > value.n + 8 && q.n <= 2 * value.n && pp_eq_ci(pp_sub(q, 0, p.n), p) && q.n >= p.n)
            return pp_trim(q, ",; ");
    }
    return value;
}

/* ---- casing ------------------------------------------------------------------ */
static size_t caps(pp_str s) {
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++) n += s.p[i] >= 'A' && s.p[i] <= 'Z';
    return n;
}

/* Free text takes the request's casing of the same span when that has more
 * capitals ("packing list" -> "Packing List"); short, all-lowercase single
 * words are left alone. */
static pp_str restore_casing(pp_ctx *c, pp_str value, pp_str desc) {
    if (value.n < 4) return value;
    size_t up = caps(value), lo = 0;
    for (size_t i = 0; i < value.n; i++) lo += value.p[i] >= 'a' && value.p[i] <= 'z';
    int space = memchr(value.p, ' ', value.n) != NULL, at = memchr(value.p, '@', value.n) != NULL;
    if (!(lo || up) || !((lo && up) || space || at)) return value;
    if (desc.n && pp_has(desc, value)) return value;
    size_t pos = pp_find_ci(c->req, value, 0);
    if (pos == PP_NONE) return value;
    pp_str span = pp_sub(c->req, pos, pos + value.n);
    return !pp_eq(span, value) && caps(span) > up ? span : value;
}

/* A title-like field starts with a capital (its first byte only). */
static pp_str capitalize(pp_ctx *c, pp_str key, pp_str v) {
    if (!pp_in_ci(key, PP_TITLE_KEYS) || !v.n || v.p[0] < 'a' || v.p[0] > 'z') return v;
    pp_str out = pp_copy(c->a, v);
    if (out.n) ((char *)out.p)[0] = (char)(v.p[0] - 0x20);
    return out;
}

/* ---- temperatures ------------------------------------------------------------ */
static size_t skip_spaces(pp_str r, size_t q) {
    while (q < r.n && r.p[q] == ' ') q++;
    return q;
}

/* The request states the number s in the source unit: s not glued to a
 * digit or '.' before it, then blanks, an optional degree sign or
 * "degree(s)", blanks, and a unit word. */
static int stated_in_unit(pp_ctx *c, pp_str s, int celsius_source) {
    const char *units = celsius_source ? "c|celsius|centigrade" : "f|fahrenheit";
    pp_str r = c->lreq; /* the number text itself is matched as written */
    for (size_t pos = pp_find(r, s, 0); pos != PP_NONE; pos = pp_find(r, s, pos + (s.n ? s.n : 1))) {
        if (pos > 0 && (pp_is_digit((unsigned char)r.p[pos - 1]) || r.p[pos - 1] == '.')) continue;
        size_t q = skip_spaces(r, pos + s.n);
        size_t adv = pp_startsz(r, q, "\xc2\xb0") ? 2 : pp_find_ci(pp_sub(r, q, q + 7), pp_z("degrees"), 0) == 0 ? 7
                   : pp_find_ci(pp_sub(r, q, q + 6), pp_z("degree"), 0) == 0 ? 6 : 0;
        if (adv) q = skip_spaces(r, q + adv);
        pp_str u = pp_sub(r, q, q + 12), w;
        const char *list = units;
        while (pp_next_item(&list, &w))
            if (pp_find_ci(pp_sub(u, 0, w.n), w, 0) == 0 && (w.n >= u.n || !pp_is_alnum((unsigned char)u.p[w.n])))
                return 1;
    }
    return 0;
}

/* Number text without a trailing fractional zero run ("20.50" -> "20.5",
 * "23.0" -> "23"). */
static pp_str canonical_number(pp_str t) {
    if (!memchr(t.p, '.', t.n)) return t;
    while (t.n && t.p[t.n - 1] == '0') t.n--;
    if (t.n && t.p[t.n - 1] == '.') t.n--;
    return t;
}

static pp_str format_number(pp_ctx *c, double x, int integer) {
    char small[64], *out = small;
    int n;
    if (integer) {
        double r = round(x);
        /* saturating, as the engine's float-to-integer conversion */
        long long v = r != r ? 0 : r >= 9223372036854775807.0 ? INT64_MAX
                    : r <= -9223372036854775808.0 ? INT64_MIN : (long long)r;
        n = snprintf(small, sizeof small, "%lld", v);
    } else {
        n = snprintf(small, sizeof small, "%.1f", x);
        if (n >= (int)sizeof small && (out = pp_alloc(c->a, (size_t)n + 1))) snprintf(out, (size_t)n + 1, "%.1f", x);
    }
    if (n < 0 || !out) return PP_EMPTY;
    return pp_copy(c->a, (pp_str){out, (size_t)n});
}

/* A temperature the request gives in the other unit is converted to the
 * parameter's unit (a _f / fahrenheit or _c / celsius key or description). */
static pp_str convert_temperature(pp_ctx *c, pp_str key, pp_str desc, pp_str text) {
    int f = pp_ends(pp_lower(c->a, key), "_f") || pp_has_ci(key, pp_z("fahrenheit")) || pp_has_ci(desc, pp_z("fahrenheit"));
    int cel = pp_ends(pp_lower(c->a, key), "_c") || pp_has_ci(key, pp_z("celsius")) || pp_has_ci(desc, pp_z("celsius"));
    if (f == cel) return text;
    char *z = pp_alloc(c->a, text.n + 1); /* strtod needs a terminated copy */
    if (!z) return text;
    memcpy(z, text.p, text.n), z[text.n] = 0;
    double v = text.n ? strtod(z, NULL) : 0.0;
    pp_str s = canonical_number(text);
    if (!stated_in_unit(c, s, f)) return text;
    double x = f ? v * 1.8 + 32.0 : v * 0.5555555555555556 + -17.77777777777778;
    pp_str out = format_number(c, x, !memchr(s.p, '.', s.n));
    return out.n ? out : text;
}

/* ---- the rebuild --------------------------------------------------------------- */
/* A string argument: phone completion always; for free text (no enum) the
 * quoted text, place recovery, request casing and a capital for titles.
 * Returns 0 when the argument is to be dropped: an empty optional string,
 * or an optional *mail* string with no '@'. */
static int rebuild_string(pp_ctx *c, pp_str key, pp_val *v, const pp_param *p, pp_str tooltext) {
    pp_str s = complete_phone(c, key, v->s);
    if (!p->has_enum) {
        s = restore_quoted(c, s);
        if (pp_is_place_param(c, key, p->desc, tooltext)) s = pp_recover_place(c, s);
        s = restore_casing(c, s, p->desc);
        s = capitalize(c, key, s);
    }
    v->s = s;
    return p->required || (s.n && (!pp_has_ci(key, pp_z("mail")) || memchr(s.p, '@', s.n)));
}

void pp_rebuild_args(pp_ctx *c, pp_val *args, pp_str name) {
    pp_str tooltext = pp_tool_text(c, name);
    for (size_t i = 0; i < args->n;) {
        pp_val *v = &args->kid[i];
        pp_str key = args->key[i];
        const pp_param *p = pp_info(c, name, key);
        int keep = 1;
        if ((v->type == ND_JSTRING || v->type == ND_JARRAY) && !p->has_enum &&
            (pp_has_ci(key, pp_z("mime")) || pp_has_ci(p->desc, pp_z("mime"))))
            to_mime(v);
        if (v->type == ND_JSTRING) keep = rebuild_string(c, key, v, p, tooltext);
        else if (v->type == ND_JNUMBER && !p->has_enum) v->s = convert_temperature(c, key, p->desc, v->s);
        if (keep) i++;
        else pp_remove(args, i);
    }
}
#endif /* ND_NEEDLE3 */
