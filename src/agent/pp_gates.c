/* pp_gates.c: the gates that withhold a call list (into the envelope's
 * suppressed_calls). Per call: an origin copied into the destination, a
 * required enum option the request never names, a control word or an
 * unmentioned place in a required slot, a required number with no quantity
 * anywhere. Across calls (the "strong" gates, which also hold back a call a
 * trigger forced): what the request excludes, a negated verb, a reported
 * command. The exclusion and negation gates drop the calls they hit when
 * others survive, and withhold only when every call is hit. */
#ifdef ND_NEEDLE3
#include "agent/postprocess.h"
#include "format/json.h"

/* The first argument whose lowered key is in the list, or PP_NONE. */
static size_t key_index(const pp_val *args, const char *list) {
    for (size_t i = 0; i < args->n; i++)
        if (pp_in_ci(args->key[i], list)) return i;
    return PP_NONE;
}

/* An origin equal to the destination (trimmed, case-insensitive): a
 * required origin withholds; an optional one is erased. */
int pp_gate_origin(pp_ctx *c, pp_val *args, pp_str name) {
    size_t o = key_index(args, PP_ORIGIN_KEYS), d = key_index(args, PP_DEST_KEYS);
    if (o == PP_NONE || d == PP_NONE) return 0;
    if (args->kid[o].type != ND_JSTRING || args->kid[d].type != ND_JSTRING) return 0;
    pp_str ov = pp_trim(args->kid[o].s, " \t"), dv = pp_trim(args->kid[d].s, " \t");
    if (!ov.n || !pp_eq_ci(ov, dv)) return 0;
    if (pp_info(c, name, args->key[o])->required) return 1;
    pp_remove(args, o);
    return 0;
}

/* Whether the request names an enum value: as a whole word when short, as
 * squashed text when long, as a verb-table value, or by one of its words
 * (a word of four letters or more also by its stem). */
static int enum_mentioned(pp_ctx *c, pp_str v) {
    pp_str nq = c->nq, sqq = c->sqq;
    pp_strv words = pp_name_words(c->a, v);
    pp_str sqv = pp_squash(c->a, v);
    if (sqv.n <= 4 && words.n ? pp_has_word(c->a, nq, sqv) : (sqv.n && pp_has(sqq, sqv))) return 1;
    if (pp_verb_value(c, v)) return 1;
    for (size_t i = 0; i < words.n; i++) {
        pp_str w = words.v[i];
        if (pp_has_word(c->a, nq, w)) return 1;
        if (w.n >= 4) {
            pp_buf stem = {c->a, 0, 0, 0};
            pp_putc(&stem, ' ');
            pp_put(&stem, w.p, w.n - 1);
            if (pp_has(nq, pp_view(&stem))) return 1;
        }
    }
    return 0;
}

static size_t count_alpha(pp_str s) {
    size_t n = 0;
    for (size_t i = 0; i < s.n; i++) n += (s.p[i] | 0x20) >= 'a' && (s.p[i] | 0x20) <= 'z';
    return n;
}

/* A required enum of two or more options set to one the request never
 * names (keys that classify rather than control are exempt). */
int pp_gate_enum(pp_ctx *c, const pp_val *args, pp_str name) {
    for (size_t i = 0; i < args->n; i++) {
        const pp_val *v = &args->kid[i];
        const pp_param *p = pp_info(c, name, args->key[i]);
        if (v->type != ND_JSTRING || !p->required || p->nopts < 2) continue;
        if (pp_sub_in(args->key[i], PP_ENUM_EXEMPT)) continue;
        if (!pp_name_words(c->a, v->s).n && count_alpha(v->s) < 4) continue;
        if (!enum_mentioned(c, v->s)) return 1;
    }
    return 0;
}

/* A required place slot holding a number, a non-place word, or text the
 * conversation never mentions. */
static int bad_place(pp_ctx *c, pp_str val) {
    size_t comma = pp_find(val, pp_z(","), 0);
    pp_str sqp = pp_squash(c->a, pp_sub(val, 0, comma == PP_NONE ? val.n : comma));
    if (pp_all_digits(sqp) || pp_in_ci(val, PP_NON_PLACE)) return 1;
    return sqp.n >= 2 && !pp_has(c->sq, sqp);
}

/* A required free-text string slot holding a control word ("on", "up"),
 * unless the key itself is a control slot or the description offers the
 * word; a required place slot with a value that is no place. */
int pp_gate_control_place(pp_ctx *c, const pp_val *args, pp_str name) {
    for (size_t i = 0; i < args->n; i++) {
        const pp_val *v = &args->kid[i];
        const pp_param *p = pp_info(c, name, args->key[i]);
        if (v->type != ND_JSTRING || !p->required || p->has_enum || !pp_eqz(p->ty, "string")) continue;
        pp_str key = args->key[i];
        if (pp_piece_in(key, PP_CONTROL_SLOT)) continue;
        if (pp_has(pp_normq(c->a, p->desc), pp_pad(c->a, pp_lower(c->a, v->s)))) continue;
        if (pp_in_ci(v->s, PP_CONTROL_WORDS)) return 1;
        if (p->has_default && pp_eq(pp_squash(c->a, p->def), pp_squash(c->a, v->s))) continue;
        if (pp_piece_in(key, PP_PLACE_SLOT) && bad_place(c, v->s)) return 1;
    }
    return 0;
}

/* The first required number with no enum and no default, when nothing in
 * the conversation states a quantity. */
int pp_gate_quantity(pp_ctx *c, const pp_val *args, pp_str name) {
    for (size_t i = 0; i < args->n; i++) {
        const pp_param *p = pp_info(c, name, args->key[i]);
        if (args->kid[i].type == ND_JNUMBER && p->required && !p->has_enum && !p->has_default)
            return !c->qty;
    }
    return 0;
}

/* ---- cross-call gates ------------------------------------------------------ */
/* The first clause end at or after from, or PP_NONE. Each search stops
 * where an earlier end was found, so the cost is the distance to it. */
size_t pp_terminator(pp_str s, size_t from) {
    const char *list = PP_TERMINATORS;
    size_t best = PP_NONE;
    pp_str t;
    while (pp_next_item(&list, &t)) {
        pp_str hay = best == PP_NONE ? s : pp_sub(s, 0, best + t.n - 1);
        size_t at = pp_find(hay, t, from);
        if (at < best) best = at;
    }
    return best;
}

/* Marks each call; none hit: 0; all hit: 1 (the list is withheld whole);
 * some: the hit calls are dropped, 0. */
static int all_or_drop(pp_ctx *c, pp_val *calls, int (*hit)(pp_ctx *, const pp_val *, const void *),
                       const void *arg) {
    if (!calls->n) return 0;
    unsigned char *marks = pp_alloc(c->a, calls->n);
    if (!marks) return 0;
    size_t hits = 0;
    for (size_t i = 0; i < calls->n; i++) hits += marks[i] = (unsigned char)hit(c, &calls->kid[i], arg);
    if (!hits) return 0;
    if (hits == calls->n) return 1;
    size_t k = 0;
    for (size_t i = 0; i < calls->n; i++)
        if (!marks[i]) calls->kid[k++] = calls->kid[i];
    calls->n = k;
    return 0;
}

/* The squashed phrases the request excludes: up to four words after each
 * cue, to the clause's end, articles skipped before the first kept word. */
static pp_strv excluded_phrases(pp_ctx *c) {
    pp_strv out = {0};
    pp_str p = pp_pad(c->a, c->lreq), cue;
    const char *cues = PP_EXCLUSION_CUES;
    while (pp_next_item(&cues, &cue)) {
        pp_str needle = pp_pad(c->a, cue);
        for (size_t at = pp_find(p, needle, 0); at != PP_NONE; at = pp_find(p, needle, at + needle.n)) {
            size_t start = at + needle.n, end = pp_terminator(p, start);
            pp_strv toks = pp_ws_tokens(c->a, pp_sub(p, start, end == PP_NONE ? p.n : end));
            pp_buf phrase = {c->a, 0, 0, 0};
            size_t kept = 0;
            for (size_t i = 0; i < toks.n && kept < 4; i++) {
                if (!kept && pp_in(toks.v[i], PP_ARTICLES)) continue;
                pp_puts(&phrase, pp_trim(toks.v[i], "!,.:;?"));
                kept++;
            }
            if (kept) pp_strv_push(c->a, &out, pp_view(&phrase));
        }
    }
    return out;
}

/* A call with a short string argument (under five words, three bytes or
 * more squashed) that names an excluded phrase, or is named by one. */
static int excluded_call(pp_ctx *c, const pp_val *call, const void *arg) {
    const pp_strv *excl = arg;
    const pp_val *args = pp_call_args(call);
    for (size_t i = 0; args && i < args->n; i++) {
        if (args->kid[i].type != ND_JSTRING || pp_ws_tokens(c->a, args->kid[i].s).n >= 5) continue;
        pp_str v = pp_squash(c->a, args->kid[i].s);
        for (size_t e = 0; v.n >= 3 && e < excl->n; e++)
            if (!excl->v[e].n || pp_has(excl->v[e], v) || pp_has(v, excl->v[e])) return 1;
    }
    return 0;
}

int pp_gate_excluded(pp_ctx *c, pp_val *calls) {
    pp_strv excl = excluded_phrases(c);
    return excl.n ? all_or_drop(c, calls, excluded_call, &excl) : 0;
}

/* A negation is forgiven when a clause break follows it with more text,
 * and none of the call's values (two bytes or more) sit in the negated
 * span, and the call has such a value at all. */
static int negation_elsewhere(pp_ctx *c, pp_str lq, size_t p, const pp_val *call) {
    size_t t = pp_terminator(lq, p < lq.n ? p : lq.n);
    if (t == PP_NONE) return 0;
    pp_str clause = pp_squash(c->a, pp_sub(lq, p < t ? p : t, t));
    int more = 0;
    for (size_t i = t; i < lq.n && !more; i++) more = pp_is_alnum((unsigned char)lq.p[i]);
    const pp_val *args = pp_call_args(call);
    if (!more || !args) return 0;
    int seen = 0;
    for (size_t i = 0; i < args->n; i++) {
        if (args->kid[i].type != ND_JNUMBER && args->kid[i].type != ND_JSTRING) continue;
        pp_str v = pp_squash(c->a, args->kid[i].s);
        if (v.n < 2) continue;
        if (pp_has(clause, v)) return 0;
        seen = 1;
    }
    return seen;
}

/* Where a negated word may start in " " + request + " " (lowered): right
 * after a negation cue that is no "don't forget/mind/...", and one or two
 * words on. They depend on the request alone, so they are found once. */
static pp_spans negation_spots(pp_ctx *c, pp_str p) {
    pp_spans spots = {0};
    const char *cues = PP_NEGATION_CUES;
    pp_str cue, f;
    while (pp_next_item(&cues, &cue)) {
        pp_str needle = pp_pad(c->a, cue);
        for (size_t at = pp_find(p, needle, 0); at != PP_NONE; at = pp_find(p, needle, at + needle.n)) {
            size_t pos = at + needle.n, s = pp_find(p, pp_z(" "), pos);
            const char *forgive = PP_NEG_FORGIVE;
            int forgiven = 0;
            while (pp_next_item(&forgive, &f)) forgiven |= pp_starts(p, pos, f);
            if (forgiven) continue;
            pp_spans_push(c->a, &spots, pos, 0);
            if (s == PP_NONE) continue;
            pp_spans_push(c->a, &spots, s + 1, 0);
            size_t s2 = pp_find(p, pp_z(" "), s + 1);
            if (s2 != PP_NONE) pp_spans_push(c->a, &spots, s2 + 1, 0);
        }
    }
    return spots;
}

typedef struct {
    pp_str lq, p;
    pp_spans spots;
} negation;

/* The request negates a word of the call's tool name (as a prefix) within
 * the three words after a negation cue ("don't set a timer" for set_timer). */
static int negated_call(pp_ctx *c, const pp_val *call, const void *arg) {
    const negation *g = arg;
    const pp_str *name = pp_call_name(call);
    if (!name) return 0;
    pp_strv words = pp_name_words(c->a, *name);
    for (size_t i = 0; i < words.n; i++)
        for (size_t k = 0; k < g->spots.n; k++) {
            size_t at = g->spots.v[k].start;
            if (pp_starts(g->p, at, words.v[i]) && !negation_elsewhere(c, g->lq, at - 1, call)) return 1;
        }
    return 0;
}

int pp_gate_negated(pp_ctx *c, pp_val *calls) {
    negation g = {c->lreq, pp_pad(c->a, c->lreq), {0}};
    g.spots = negation_spots(c, g.p);
    return g.spots.n ? all_or_drop(c, calls, negated_call, &g) : 0;
}

/* A reporting verb ("said", "told me") followed within 40 bytes by a quote
 * mark (an apostrophe counts): someone else's words, not a command. */
int pp_gate_reported(pp_ctx *c) {
    pp_str r = c->req, verb;
    const char *verbs = PP_REPORTING;
    while (pp_next_item(&verbs, &verb)) {
        for (size_t i = pp_find_ci(r, verb, 0); i != PP_NONE; i = pp_find_ci(r, verb, i + verb.n)) {
            size_t from = i + verb.n, to = from + 40 < r.n ? from + 40 : r.n;
            for (size_t j = from; j < to; j++) {
                if (r.p[j] == '\'' || r.p[j] == '"') return 1;
                if (j + 2 < r.n && pp_startsz(r, j, "\xe2\x80") &&
                    ((unsigned char)r.p[j + 2] == 0x9c || (unsigned char)r.p[j + 2] == 0x98))
                    return 1;
            }
        }
    }
    return 0;
}
#endif /* ND_NEEDLE3 */
