/* pp_tail.c: the repairs after the per-argument rebuild, in the engine's
 * order: optional values the conversation never grounds are dropped, a
 * required name slot is re-grounded on the request's one leftover phrase,
 * defaults stand in where the model invented a value, an enum snaps to the
 * one option the request names, route slots come from "from X" / "to Y",
 * a missing amount from "by N"; last, integers under a number type get
 * ".0" (the engine's float rendering). */
#ifdef ND_NEEDLE3
#include <string.h>

#include "agent/postprocess.h"
#include "format/json.h"

/* ---- grounding helpers ----------------------------------------------------------- */
int pp_has_quantity_word(pp_ctx *c, pp_str s) {
    pp_strv t = pp_word_tokens(c->a, s);
    for (size_t i = 0; i < t.n; i++)
        if (pp_in_ci(t.v[i], PP_QUANTITY_WORDS)) return 1;
    return 0;
}

int pp_date_key(pp_str key) { return pp_sub_in(key, PP_DATE_KEY); }

/* "id" or "*_id", any case. */
static int id_key(pp_str k) {
    return pp_eq_ci(k, pp_z("id")) || (k.n >= 3 && pp_eq_ci(pp_sub(k, k.n - 3, k.n), pp_z("_id")));
}

static int digit_at(pp_str s, size_t i) { return i < s.n && pp_is_digit((unsigned char)s.p[i]); }

/* c occurs in hay not glued to other digits (nor to "digit." before or
 * ".digit" after); occurrences are taken left to right, without overlap. */
static int standalone(pp_str c, pp_str hay) {
    for (size_t p = pp_find(hay, c, 0); p != PP_NONE; p = pp_find(hay, c, p + c.n)) {
        size_t e = p + c.n;
        int before = (p >= 1 && digit_at(hay, p - 1)) || (p >= 2 && hay.p[p - 1] == '.' && digit_at(hay, p - 2));
        int after = digit_at(hay, e) || (e < hay.n && hay.p[e] == '.' && digit_at(hay, e + 1));
        if (!before && !after) return 1;
    }
    return 0;
}

/* hay without its thousands commas ("1,500" -> "1500"). */
pp_str pp_no_thousands(pp_ctx *c, pp_str hay) {
    pp_buf b = {c->a, 0, 0, 0};
    if (hay.n) pp_putc(&b, hay.p[0]);
    for (size_t i = 0; i + 2 <= hay.n; i++) {
        int drop = hay.p[i + 1] == ',' && digit_at(hay, i) && i + 4 < hay.n && digit_at(hay, i + 2) &&
                   digit_at(hay, i + 3) && digit_at(hay, i + 4);
        if (!drop) pp_putc(&b, hay.p[i + 1]);
    }
    return pp_view(&b);
}

/* The squashed conversation states this number: as digits ("23" for
 * 23.0), with thousands commas, or as a number word ("dozen" for 12). */
int pp_number_grounded(pp_str hay, pp_str plain, pp_str num) {
    pp_str n = num;
    if (memchr(n.p, '.', n.n)) {
        while (n.n && n.p[n.n - 1] == '0') n.n--;
        if (n.n && n.p[n.n - 1] == '.') n.n--;
    }
    if (!n.n || standalone(n, hay)) return 1;
    if (plain.n != hay.n && standalone(n, plain)) return 1;
    const char *list = PP_NUMBER_WORDS;
    pp_str item;
    while (pp_next_item(&list, &item)) {
        size_t eq = pp_find(item, pp_z("="), 0);
        if (pp_eq(pp_sub(item, 0, eq), n) && pp_has(hay, pp_sub(item, eq + 1, item.n))) return 1;
    }
    return 0;
}

/* ---- dropping ungrounded optionals ------------------------------------------------ */
/* A standalone 19xx or 20xx year. */
static int has_year(pp_str v) {
    for (size_t p = 0; p + 4 <= v.n; p++)
        if ((pp_startsz(v, p, "19") || pp_startsz(v, p, "20")) && pp_all_digits(pp_sub(v, p, p + 4)) &&
            !(p > 0 && digit_at(v, p - 1)) && !digit_at(v, p + 4))
            return 1;
    return 0;
}

int pp_iso_shape(pp_str v) {
    if (v.n != 10 && v.n != 16 && v.n != 19) return 0;
    for (size_t i = 0; i < v.n; i++) {
        char want = i == 4 || i == 7 ? '-' : i == 10 ? 'T' : i == 13 || i == 16 ? ':' : 0;
        if (want ? v.p[i] != want : !pp_is_digit((unsigned char)v.p[i])) return 0;
    }
    return 1;
}

static int date_like(pp_str key, pp_str v) {
    return pp_iso_shape(v) ||
           (v.n >= 10 && v.p[4] == '-' && v.p[7] == '-' && pp_all_digits(pp_sub(v, 0, 4))) ||
           (v.n >= 4 && v.p[1] == ':' && digit_at(v, 0)) ||
           (v.n >= 5 && v.p[2] == ':' && digit_at(v, 0) && digit_at(v, 1)) ||
           (pp_date_key(key) && has_year(v));
}

/* Optional non-enum strings the conversation never mentions are dropped
 * (ids, dates, times and anything under three letters exempt), and
 * optional numbers it never states, unless the request has a quantity word. */
static void drop_ungrounded(pp_ctx *c, pp_val *args, pp_str name) {
    for (size_t i = 0; i < args->n;) {
        const pp_val *v = &args->kid[i];
        const pp_param *p = pp_info(c, name, args->key[i]);
        int keep = 1, optional = !p->required && !p->has_enum;
        if (optional && v->type == ND_JNUMBER) keep = c->qty_word || pp_number_grounded(c->sq, c->sq_plain, v->s);
        if (optional && v->type == ND_JSTRING && !id_key(args->key[i]) && !date_like(args->key[i], v->s)) {
            pp_str sq = pp_squash(c->a, v->s);
            keep = sq.n < 3 || pp_has(c->sq, sq);
        }
        if (keep) i++;
        else pp_remove(args, i);
    }
}

/* ---- the leftover phrase ----------------------------------------------------------- */
/* A slot that names a thing or a person. */
static int nameish(pp_str key, pp_str desc) {
    return pp_piece_in(key, PP_NAME_WORDS) || (pp_has_ci(desc, pp_z("name")) && !pp_piece_in(key, PP_PLACE_SLOT));
}

static int tool_option(const pp_tool *t, pp_str w) {
    for (size_t i = 0; t && i < t->np; i++)
        for (size_t o = 0; o < t->params[i].nopts; o++)
            if (pp_eq_ci(t->params[i].opts[o], w)) return 1;
    return 0;
}

/* The request's one leftover phrase once filler, control words, the tool's
 * enum options and its name words are taken out: empty unless exactly one
 * run of words is left, and it has under five words. */
static pp_str leftover(pp_ctx *c, const pp_tool *t) {
    if (c->left_done && c->left_tool == t) return c->left; /* the last tool's, kept */
    pp_strv ident = t ? pp_name_words(c->a, t->name) : (pp_strv){0};
    pp_strv words = c->wtok, run = {0};
    size_t runs = 0;
    int open = 0;
    for (size_t i = 0; i < words.n; i++) {
        pp_str lw = pp_lower(c->a, words.v[i]);
        int brk = pp_in(lw, PP_LEFTOVER_FILLER) || pp_in(lw, PP_LEFTOVER_CONTROL) || tool_option(t, lw);
        for (size_t k = 0; !brk && k < ident.n; k++) brk = pp_eq(ident.v[k], lw);
        if (brk) { open = 0; continue; }
        if (!open) runs++, open = 1;
        if (runs == 1) pp_strv_push(c->a, &run, words.v[i]);
    }
    c->left = runs == 1 && run.n < 5 ? pp_join(c->a, &run, ' ') : PP_EMPTY;
    c->left_tool = t, c->left_done = 1;
    return c->left;
}

/* A required name-like string the conversation never mentions becomes the
 * request's leftover phrase, when the conversation has that. */
static void reground_name(pp_ctx *c, pp_val *args, pp_str name) {
    const pp_tool *t = pp_tool_last(c, name);
    for (size_t i = 0; i < args->n; i++) {
        pp_val *v = &args->kid[i];
        const pp_param *p = pp_info(c, name, args->key[i]);
        if (v->type != ND_JSTRING || !p->required || p->has_enum || !pp_eqz(p->ty, "string") ||
            id_key(args->key[i]) || !nameish(args->key[i], p->desc))
            continue;
        pp_str sv = pp_squash(c->a, v->s);
        if (sv.n < 2 || pp_has(c->sq, sv)) continue;
        pp_str cand = leftover(c, t);
        if (cand.n && pp_has(c->sq, pp_squash(c->a, cand))) v->s = cand;
    }
}

/* ---- defaults ---------------------------------------------------------------------- */
static int squash_eq(pp_ctx *c, pp_str a, pp_str b) { return pp_eq(pp_squash(c->a, a), pp_squash(c->a, b)); }

/* The default in a number's place. The engine copies its text as the
 * number's text; where that text is no JSON number (a string default such
 * as "auto") it would write invalid JSON, so we keep such a default a
 * string, and a true/false/null default that JSON literal. */
static pp_val default_number(pp_ctx *c, const pp_param *p) {
    nd_json *d = p->def.n ? nd_json_parse(p->def.p, p->def.n, 1, NULL) : NULL;
    int t = d ? nd_json_root(d)->type : ND_JSTRING;
    nd_json_free(d);
    pp_val v = t == ND_JNUMBER ? pp_number(p->def) : pp_string(p->def);
    if (t == ND_JTRUE || t == ND_JFALSE || t == ND_JNULL) v.type = t;
    return v;
}

/* Defaults stand in for a string that is just a tool-name word or the bare
 * leftover phrase, and for a required number when nothing states a
 * quantity; an optional number equal to its default is dropped when its
 * digits appear nowhere. */
static void apply_defaults(pp_ctx *c, pp_val *args, pp_str name) {
    pp_str cand = leftover(c, pp_tool_last(c, name));
    for (size_t i = 0; i < args->n;) {
        pp_val *v = &args->kid[i];
        const pp_param *p = pp_info(c, name, args->key[i]);
        int keep = 1;
        if (p->has_default && v->type == ND_JSTRING && !p->has_enum) {
            if (pp_name_has(c->a, name, pp_lower(c->a, v->s)) && !squash_eq(c, v->s, p->def))
                v->s = p->def;
            else if (p->required && cand.n && squash_eq(c, v->s, cand) && !squash_eq(c, cand, p->def))
                v->s = p->def;
        } else if (p->has_default && v->type == ND_JNUMBER && p->required) {
            if (!p->has_enum && !pp_eq(v->s, p->def) && !c->qty) *v = default_number(c, p);
        } else if (p->has_default && v->type == ND_JNUMBER && pp_eq(v->s, p->def)) {
            size_t lead = 0;
            while (digit_at(v->s, lead)) lead++;
            keep = !lead || pp_has(c->sq, pp_sub(v->s, 0, lead));
        }
        if (keep) i++;
        else pp_remove(args, i);
    }
}

/* ---- enums --------------------------------------------------------------------------- */
/* An enum string snaps to the one option (three letters or more, not all
 * digits) the request names as a whole word. */
static void snap_enum(pp_ctx *c, pp_val *args, pp_str name) {
    pp_str r = c->nq;
    for (size_t i = 0; i < args->n; i++) {
        pp_val *v = &args->kid[i];
        const pp_param *p = pp_info(c, name, args->key[i]);
        if (v->type != ND_JSTRING || p->nopts < 2) continue;
        const pp_str *found = NULL;
        size_t hits = 0;
        for (size_t o = 0; o < p->nopts; o++) {
            pp_str ol = pp_lower(c->a, p->opts[o]);
            if (ol.n < 3 || pp_all_digits(ol) || !pp_has(r, pp_pad(c->a, ol))) continue;
            hits++, found = &p->opts[o];
        }
        if (hits != 1 || pp_eq_ci(*found, v->s) || pp_has(r, pp_pad(c->a, pp_lower(c->a, v->s)))) continue;
        v->s = *found;
    }
}

/* ---- routes --------------------------------------------------------------------------- */
static const char EDGE[] = ",.?!;:";

/* Up to five words from k, a leading article skipped, stopping at a stop
 * word or after a word with edge punctuation. */
static pp_str place_phrase(pp_ctx *c, const pp_strv *words, size_t k) {
    pp_strv out = {0};
    for (size_t i = k; i < words->n && out.n <= 4; i++) {
        pp_str w = words->v[i], t = pp_trim(w, EDGE);
        if (!t.n || pp_in_ci(t, PP_PHRASE_STOP)) break;
        int clipped = t.n != w.n;
        if (!out.n && pp_in_ci(t, "a|an|the")) {
            if (clipped) break;
            continue;
        }
        pp_strv_push(c->a, &out, t);
        if (clipped) break;
    }
    return pp_join(c->a, &out, ' ');
}

/* A phrase that starts with a verb or a clock time is no place. */
static int valid_place(pp_ctx *c, pp_str p) {
    pp_strv w = pp_ws_tokens(c->a, p);
    if (!w.n || pp_in_ci(w.v[0], PP_NOT_A_PLACE)) return 0;
    pp_str f = w.v[0];
    return !(pp_any_digit(f) && (memchr(f.p, ':', f.n) || pp_has_ci(f, pp_z("am")) || pp_has_ci(f, pp_z("pm"))));
}

/* Writes a route phrase into its slot unless the model's value is
 * grounded; adds the slot when the call left it out. */
static void apply_place(pp_ctx *c, pp_val *args, pp_str field, pp_str phrase) {
    if (!field.n || !phrase.n) return;
    pp_str sp = pp_squash(c->a, phrase);
    if (sp.n < 3 || pp_all_digits(sp)) return;
    for (size_t i = 0; i < args->n; i++) {
        if (!pp_eq(args->key[i], field)) continue;
        pp_val *v = &args->kid[i];
        pp_str sv = v->type == ND_JSTRING ? pp_squash(c->a, v->s) : PP_EMPTY;
        if (v->type == ND_JSTRING && (!sv.n || !pp_has(c->sq, sv))) v->s = phrase;
        return;
    }
    pp_push(c->a, args, field, pp_string(phrase));
}

/* The first free-text string parameter whose lowered key is in the list. */
static pp_str route_slot(const pp_tool *t, const char *names) {
    for (size_t i = 0; i < t->np; i++)
        if (pp_eqz(t->params[i].ty, "string") && !t->params[i].has_enum && pp_in_ci(t->params[i].key, names))
            return t->params[i].key;
    return PP_EMPTY;
}

/* Skips the words of `skip` from j; then whether word j is in `at`. */
static size_t after_words(const pp_strv *w, size_t j, const char *skip) {
    while (j < w->n && pp_in_ci(w->v[j], skip)) j++;
    return j;
}

/* Origin and destination slots from "from X", "to Y", "pick (me) up at X"
 * and "drop (me) off at Y" (the last "to" wins). */
static void route_from_request(pp_ctx *c, pp_val *args, pp_str name) {
    const pp_tool *t = pp_tool_last(c, name);
    if (!t) return;
    pp_str of = route_slot(t, PP_ORIGIN_NAMES), df = route_slot(t, PP_DEST_NAMES), origin = PP_EMPTY, dest = PP_EMPTY;
    if (!of.n && !df.n) return;
    pp_strv w = c->wstok;
    for (size_t i = 0; i + 1 < w.n; i++) {
        pp_str word = pp_trim(w.v[i], EDGE), cand;
        size_t j;
        if (!origin.n && pp_eq_ci(word, pp_z("from")) && valid_place(c, cand = place_phrase(c, &w, i + 1))) origin = cand;
        if (!origin.n && pp_in_ci(word, "pick|pickup|picking") && (j = after_words(&w, i + 1, "up|me|us")) < w.n &&
            pp_in_ci(w.v[j], "at|from") && valid_place(c, cand = place_phrase(c, &w, j + 1)))
            origin = cand;
        if (pp_eq_ci(word, pp_z("to")) && valid_place(c, cand = place_phrase(c, &w, i + 1))) dest = cand;
        if (pp_in_ci(word, "drop|dropoff|dropping") && (j = after_words(&w, i + 1, "off|me|us")) < w.n &&
            pp_eq_ci(w.v[j], pp_z("at")) && valid_place(c, cand = place_phrase(c, &w, j + 1)))
            dest = cand;
    }
    if (origin.n && dest.n && squash_eq(c, origin, dest)) return;
    apply_place(c, args, of, origin);
    apply_place(c, args, df, dest);
}

/* ---- amounts and floats ------------------------------------------------------------------ */
/* "by N" fills the tool's only numeric parameter when the call left it out. */
static void amount_from_by(pp_ctx *c, pp_val *args, pp_str name) {
    pp_strv w = c->wstok;
    pp_str n = PP_EMPTY;
    for (size_t i = 0; i + 1 < w.n && !n.n; i++) {
        pp_str next = pp_trim(w.v[i + 1], ",.?!;:%");
        if (pp_eq_ci(w.v[i], pp_z("by")) && pp_all_digits(next)) n = next;
    }
    const pp_tool *t = n.n ? pp_tool_last(c, name) : NULL;
    const pp_param *only = NULL;
    for (size_t i = 0; t && i < t->np; i++) {
        if (!pp_eqz(t->params[i].ty, "integer") && !pp_eqz(t->params[i].ty, "number")) continue;
        if (only) return;
        only = &t->params[i];
    }
    if (!only) return;
    for (size_t i = 0; i < args->n; i++)
        if (pp_eq(args->key[i], only->key)) return;
    if (pp_info(c, name, only->key)->has_enum) return;
    pp_push(c->a, args, only->key, pp_number(n));
}

static int float_type(pp_str t) { return pp_eqz(t, "float") || pp_eqz(t, "number") || pp_eqz(t, "double"); }

static void add_point_zero(pp_ctx *c, pp_val *v) {
    if (v->type != ND_JNUMBER || memchr(v->s.p, '.', v->s.n) || memchr(v->s.p, 'e', v->s.n) || memchr(v->s.p, 'E', v->s.n))
        return;
    pp_buf b = {c->a, 0, 0, 0};
    pp_puts(&b, v->s);
    pp_put(&b, ".0", 2);
    if (!c->a->nomem) v->s = pp_view(&b);
}

/* Integers under a number/float/double type (or in an array of them) get
 * ".0", as the engine renders floats. */
void pp_floats_for_numbers(pp_ctx *c, pp_val *args, pp_str name) {
    for (size_t i = 0; i < args->n; i++) {
        const pp_param *p = pp_info(c, name, args->key[i]);
        pp_val *v = &args->kid[i];
        if (float_type(p->ty)) add_point_zero(c, v);
        else if (pp_eqz(p->ty, "array") && float_type(p->items_ty) && v->type == ND_JARRAY)
            for (size_t k = 0; k < v->n; k++) add_point_zero(c, &v->kid[k]);
    }
}

void pp_tail_repairs(pp_ctx *c, pp_val *args, pp_str name) {
    drop_ungrounded(c, args, name);
    reground_name(c, args, name);
    apply_defaults(c, args, name);
    snap_enum(c, args, name);
    route_from_request(c, args, name);
    amount_from_by(c, args, name);
}
#endif /* ND_NEEDLE3 */
