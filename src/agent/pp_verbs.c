/* pp_verbs.c: the repairs driven by the request's verb (the verb table in
 * pp_words.c): renaming a call to its opposite-polarity sibling tool
 * ("unlock the front door" with lock_door -> unlock_door), and flipping a
 * bool or an on/off-style enum argument, or a start/stop/pause/resume enum,
 * to what the request says. A model often picks the right tool family and
 * the wrong direction; the verb in the request is the better witness. */
#ifdef ND_NEEDLE3
#include "agent/postprocess.h"
#include "format/json.h"

/* Whether some phrase of the list occurs as " phrase " in text (a normq
 * text) without a negation in the 12 bytes before it. */
static int phrase_hit(pp_arena *a, pp_str text, const char *phrases) {
    pp_str p;
    while (pp_next_item(&phrases, &p)) {
        pp_str needle = pp_pad(a, p);
        for (size_t at = pp_find(text, needle, 0); at != PP_NONE; at = pp_find(text, needle, at + needle.n)) {
            pp_str before = pp_sub(text, at > 12 ? at - 12 : 0, at);
            if (!pp_sub_in(before, PP_NEG_BEFORE)) return 1;
        }
    }
    return 0;
}

/* A row fires when the request names exactly one of its two directions:
 * returns +1 (positive) or -1 (negative), 0 when it does not fire. */
static int row_fires(pp_arena *a, const pp_verb_row *row, pp_str nq) {
    int pos = phrase_hit(a, nq, row->a), neg = phrase_hit(a, nq, row->b);
    return pos == neg ? 0 : pos ? 1 : -1;
}

/* The verb rows and transport verbs depend on the request alone: each is
 * worked out once per run. */
void pp_verbs_init(pp_ctx *c) {
    for (int r = 0; r < PP_VERB_ROWS; r++) c->verb[r] = (signed char)row_fires(c->a, &PP_VERBS[r], c->nq);
    for (int t = 0; t < 4; t++) c->transport[t] = (unsigned char)phrase_hit(c->a, c->nq, PP_TRANSPORT_SYNONYMS[t]);
}

int pp_verb_value(pp_ctx *c, pp_str value) {
    for (int r = 0; r < PP_VERB_ROWS; r++)
        if (c->verb[r] && pp_in_ci(value, c->verb[r] > 0 ? PP_VERBS[r].d : PP_VERBS[r].e)) return 1;
    return 0;
}

/* Whether `other` has the same words as `words` except at i, where it has
 * a word of `want`. */
static int sibling(pp_arena *a, pp_str other_name, const pp_strv *words, size_t i, const char *want) {
    pp_strv other = pp_name_words(a, other_name);
    if (other.n != words->n || !pp_in(other.v[i], want)) return 0;
    for (size_t j = 0; j < other.n; j++)
        if (j != i && !pp_eq(other.v[j], words->v[j])) return 0;
    return 1;
}

/* When the request's verb contradicts a polarity word of the tool name,
 * the declared tool whose name differs only in that word. */
pp_str pp_polarity_rename(pp_ctx *c, pp_str name) {
    pp_strv words = pp_name_words(c->a, name);
    for (int r = 0; r < PP_VERB_ROWS; r++) {
        const pp_verb_row *row = &PP_VERBS[r];
        int dir = c->verb[r];
        if (!dir) continue;
        const char *want = dir > 0 ? row->d : row->e, *wrong = dir > 0 ? row->e : row->d;
        for (size_t i = 0; i < words.n; i++) {
            if (!pp_in(words.v[i], wrong)) continue;
            for (size_t t = 0; t < c->ntools; t++)
                if (!pp_eq(c->tools[t].name, name) && sibling(c->a, c->tools[t].name, &words, i, want))
                    return c->tools[t].name;
        }
    }
    return PP_EMPTY;
}

/* The first option of p whose lowered text is in the list, or NULL. */
static const pp_str *option_in(const pp_param *p, const char *list) {
    for (size_t i = 0; i < p->nopts; i++)
        if (pp_in_ci(p->opts[i], list)) return &p->opts[i];
    return NULL;
}

/* One firing row over the arguments: an enum value of the row set to the
 * wrong direction takes the first option of the right one; a bool whose key
 * has a word of the row (and no "off") takes the direction. */
static void flip_row(pp_ctx *c, pp_val *args, pp_str name, const pp_verb_row *row, int dir) {
    const char *target = dir > 0 ? row->d : row->e;
    for (size_t i = 0; i < args->n; i++) {
        pp_val *v = &args->kid[i];
        const pp_param *p = pp_info(c, name, args->key[i]);
        if (v->type == ND_JSTRING && p->nopts) {
            const pp_str *o = option_in(p, target);
            if ((pp_in_ci(v->s, row->d) || pp_in_ci(v->s, row->e)) && !pp_in_ci(v->s, target) && o) v->s = *o;
        } else if (v->type == ND_JTRUE || v->type == ND_JFALSE) {
            pp_str k = args->key[i];
            if (pp_sub_in(k, row->c) && !pp_has_ci(k, pp_z("off"))) v->type = dir > 0 ? ND_JTRUE : ND_JFALSE;
        }
    }
}

/* A start/stop/pause/resume enum takes the one transport verb the request
 * uses among its options. */
static void flip_transport(pp_ctx *c, pp_val *args, pp_str name) {
    for (size_t i = 0; i < args->n; i++) {
        pp_val *v = &args->kid[i];
        const pp_param *p = pp_info(c, name, args->key[i]);
        if (v->type != ND_JSTRING || !p->nopts || !pp_in_ci(v->s, PP_TRANSPORT_KEYS)) continue;
        const char *keys = PP_TRANSPORT_KEYS;
        pp_str k, named = PP_EMPTY;
        int count = 0;
        for (int t = 0; pp_next_item(&keys, &k); t++) {
            int offered = 0;
            for (size_t o = 0; o < p->nopts; o++) offered |= pp_eq_ci(p->opts[o], k);
            if (offered && c->transport[t]) named = k, count++;
        }
        if (count != 1 || pp_eq_ci(v->s, named)) continue;
        for (size_t o = 0; o < p->nopts; o++)
            if (pp_eq_ci(p->opts[o], named)) { v->s = p->opts[o]; break; }
    }
}

void pp_flip(pp_ctx *c, pp_val *args, pp_str name) {
    for (int r = 0; r < PP_VERB_ROWS; r++)
        if (c->verb[r]) flip_row(c, args, name, &PP_VERBS[r], c->verb[r]);
    flip_transport(c, args, name);
}
#endif /* ND_NEEDLE3 */
