/* pp_dates.c: date resolution. The model often writes a plausible but wrong
 * date for "next friday" or "March 4th"; the engine recomputes the date
 * part of every ISO-shaped value under a date-ish key from the dates the
 * request mentions, counted from the first ISO date in the stored system
 * text. (The standard "date: ..." fact is blanked when the system text is
 * stored, so only an ISO date in free text, "Today is 2026-09-25.", drives
 * it.) One mentioned date goes to every such value; as many dates as values
 * go pairwise; otherwise nothing changes. */
#ifdef ND_NEEDLE3
#include <stdio.h>

#include "agent/postprocess.h"
#include "format/json.h"

/* Days since 1970-01-01 of a proleptic Gregorian date, and back (Howard
 * Hinnant's civil-date algorithms). */
static int64_t days_from_civil(int64_t y, int64_t m, int64_t d) {
    y -= m <= 2;
    int64_t era = (y >= 0 ? y : y - 399) / 400, yoe = y - era * 400;
    int64_t doy = (153 * ((m + 9) % 12) + 2) / 5 + d - 1;
    return era * 146097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719468;
}

static void civil_from_days(int64_t z, int64_t *y, int64_t *m, int64_t *d) {
    z += 719468;
    int64_t era = (z >= 0 ? z : z - 146096) / 146097, doe = z - era * 146097;
    int64_t yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
    int64_t doy = doe - (365 * yoe + yoe / 4 - yoe / 100), mp = (5 * doy + 2) / 153;
    *d = doy - (153 * mp + 2) / 5 + 1;
    *m = mp < 10 ? mp + 3 : mp - 9;
    *y = yoe + era * 400 + (*m <= 2);
}

static int valid_date(int64_t y, int64_t m, int64_t d) {
    if (m < 1 || m > 12 || d < 1 || d > 31) return 0;
    int64_t y2, m2, d2;
    civil_from_days(days_from_civil(y, m, d), &y2, &m2, &d2);
    return y2 == y && m2 == m && d2 == d;
}

static int64_t atoi_n(pp_str s) {
    int64_t v = 0;
    for (size_t i = 0; i < s.n; i++) v = v * 10 + (s.p[i] - '0');
    return v;
}

/* The first standalone YYYY-MM-DD at or after from (not glued to digits):
 * its position, or PP_NONE. */
static size_t find_iso(pp_str s, size_t from, int64_t ymd[3]) {
    for (size_t p = from; p + 10 <= s.n; p++) {
        int shape = 1;
        for (size_t i = 0; i < 10 && shape; i++)
            shape = i == 4 || i == 7 ? s.p[p + i] == '-' : pp_is_digit((unsigned char)s.p[p + i]);
        if (!shape || (p > 0 && pp_is_digit((unsigned char)s.p[p - 1])) ||
            (p + 10 < s.n && pp_is_digit((unsigned char)s.p[p + 10])))
            continue;
        ymd[0] = atoi_n(pp_sub(s, p, p + 4)), ymd[1] = atoi_n(pp_sub(s, p + 5, p + 7));
        ymd[2] = atoi_n(pp_sub(s, p + 8, p + 10));
        return p;
    }
    return PP_NONE;
}

/* "4", "04", "4th", "21st" as a day of the month, or 0. */
static int64_t day_ordinal(pp_str t) {
    size_t k = 0;
    while (k < t.n && pp_is_digit((unsigned char)t.p[k])) k++;
    if (k < 1 || k > 2 || !(k == t.n || pp_in_ci(pp_sub(t, k, t.n), "st|nd|rd|th"))) return 0;
    int64_t v = atoi_n(pp_sub(t, 0, k));
    return v >= 1 && v <= 31 ? v : 0;
}

static int64_t four_digits(pp_str t) { return t.n == 4 && pp_all_digits(t) ? atoi_n(t) : 0; }

/* A mentioned date: kind by rank (0 ISO, 1 month and day, 2 weekday, 3
 * relative), a[] its fields: ISO (y, m, d); month-day (y or 0, m, d);
 * weekday (0 = Monday, modifier 1 "next", 2 "this"/"coming", 0 none);
 * relative (days from today). */
typedef struct {
    size_t pos, tok;
    int rank;
    int64_t a[3];
} mention;

typedef struct {
    mention *v;
    size_t n, cap;
} mentions;

static void add(pp_arena *ar, mentions *m, size_t pos, size_t tok, int rank, int64_t x, int64_t y, int64_t z) {
    if (m->n == m->cap) {
        size_t cap = m->cap ? m->cap * 2 : 8;
        mention *v = cap < SIZE_MAX / sizeof(mention) ? pp_alloc(ar, cap * sizeof(mention)) : NULL;
        if (!v) return;
        for (size_t i = 0; i < m->n; i++) v[i] = m->v[i];
        m->v = v, m->cap = cap;
    }
    m->v[m->n++] = (mention){pos, tok, rank, {x, y, z}};
}

/* The word at token i names a date: month + day ("March 4th", with a
 * following year), day (+ "of") + month ("4th of July"), a weekday (after
 * next/this/coming), today/tonight/tomorrow/"day after tomorrow". */
static void token_mention(pp_ctx *c, const pp_spans *t, const pp_str *lw, size_t i, mentions *ms) {
    size_t n = t->n, pos = t->v[i].start;
    pp_str text = pp_sub(c->req, t->v[i].start, t->v[i].end);
    size_t month = pp_list_index(lw[i], PP_MONTHS), wd;
    if (month != PP_NONE && i + 1 < n && day_ordinal(lw[i + 1])) {
        int64_t year = i + 2 < n ? four_digits(lw[i + 2]) : 0;
        add(c->a, ms, pos, i, 1, year, (int64_t)month + 1, day_ordinal(lw[i + 1]));
        return;
    }
    int64_t dy = day_ordinal(text);
    if (dy && i + 1 < n) {
        size_t j = pp_eqz(lw[i + 1], "of") && i + 2 < n ? i + 2 : i + 1;
        size_t m = pp_list_index(lw[j], PP_MONTHS);
        if (m != PP_NONE) {
            add(c->a, ms, pos, i, 1, j + 1 < n ? four_digits(lw[j + 1]) : 0, (int64_t)m + 1, dy);
            return;
        }
    }
    if ((wd = pp_list_index(lw[i], PP_WEEKDAYS)) != PP_NONE) {
        pp_str prev = i ? lw[i - 1] : PP_EMPTY;
        int mod = pp_eqz(prev, "next") ? 1 : pp_eqz(prev, "this") || pp_eqz(prev, "coming") ? 2 : 0;
        add(c->a, ms, pos, i, 2, (int64_t)wd, mod, 0);
        return;
    }
    if (pp_eqz(lw[i], "today") || pp_eqz(lw[i], "tonight")) add(c->a, ms, pos, i, 3, 0, 0, 0);
    if (pp_eqz(lw[i], "tomorrow"))
        add(c->a, ms, pos, i, 3, i >= 2 && pp_eqz(lw[i - 1], "after") && pp_eqz(lw[i - 2], "day") ? 2 : 1, 0, 0);
}

/* The mentions in position order, then near duplicates pruned: a weekday
 * beside a month-day or ISO date gives way to it ("Friday, March 4th"),
 * and a later mention of the same kind at the same place is dropped. The
 * first n_iso mentions (ISO dates) and the rest (words) are each in order
 * already, so a stable merge sorts them. */
static void prune(pp_arena *a, mentions *ms, size_t n_iso) {
    mention *sorted = ms->n ? pp_alloc(a, ms->n * sizeof(mention)) : NULL;
    if (!sorted) { ms->n = 0; return; }
    for (size_t i = 0, w = n_iso, k = 0; k < ms->n; k++)
        sorted[k] = w >= ms->n || (i < n_iso && ms->v[i].pos <= ms->v[w].pos) ? ms->v[i++] : ms->v[w++];
    ms->v = sorted;
    size_t k = 0;
    for (size_t i = 0; i < ms->n; i++) {
        mention cur = ms->v[i];
        if (k) {
            mention *l = &ms->v[k - 1];
            if (cur.tok <= l->tok + 3 && l->rank == 2 && cur.rank <= 1) { *l = cur; continue; }
            if (cur.tok <= l->tok + 3 && l->rank <= 1 && cur.rank == 2) continue;
            if (cur.pos <= l->pos && cur.rank == l->rank) continue;
        }
        ms->v[k++] = cur;
    }
    ms->n = k;
}

static int64_t mod7(int64_t x) { return ((x % 7) + 7) % 7; }

/* The day number a mention resolves to; 0 in *ok when it names no real day. */
static int64_t resolve(const mention *m, int64_t today, int *ok) {
    int64_t ty, tm, td, wd = mod7(today + 3); /* 1970-01-01 was a Thursday */
    civil_from_days(today, &ty, &tm, &td);
    *ok = 1;
    switch (m->rank) {
    case 0: *ok = valid_date(m->a[0], m->a[1], m->a[2]); return days_from_civil(m->a[0], m->a[1], m->a[2]);
    case 1: {
        if (m->a[0]) return *ok = valid_date(m->a[0], m->a[1], m->a[2]), days_from_civil(m->a[0], m->a[1], m->a[2]);
        if (!valid_date(ty, m->a[1], m->a[2])) return *ok = 0, 0;
        int64_t y = ty + (days_from_civil(ty, m->a[1], m->a[2]) < today); /* a date passed this year is next year's */
        *ok = valid_date(y, m->a[1], m->a[2]);
        return days_from_civil(y, m->a[1], m->a[2]);
    }
    case 2: {
        if (m->a[1] == 1) return today - wd + 7 + m->a[0]; /* "next friday": the one in next week */
        int64_t k = mod7(m->a[0] - wd);
        return today + (k ? k : 7); /* a bare weekday is never today */
    }
    default: return today + m->a[0];
    }
}

/* Day numbers of the dates the request mentions, in order. */
static size_t mentioned_days(pp_ctx *c, int64_t today, int64_t **out) {
    pp_spans t = c->rtok;
    pp_str *lw = c->rlow;
    mentions ms = {0};
    int64_t ymd[3];
    *out = NULL;
    if (t.n && !lw) return 0;
    for (size_t p = find_iso(c->req, 0, ymd); p != PP_NONE; p = find_iso(c->req, p + 10, ymd)) {
        size_t tok = 0;
        while (tok < t.n && t.v[tok].start < p) tok++;
        add(c->a, &ms, p, tok, 0, ymd[0], ymd[1], ymd[2]);
    }
    size_t n_iso = ms.n;
    for (size_t i = 0; i < t.n; i++) token_mention(c, &t, lw, i, &ms);
    prune(c->a, &ms, n_iso);
    int64_t *days = ms.n ? pp_alloc(c->a, ms.n * sizeof(int64_t)) : NULL;
    size_t n = 0;
    for (size_t i = 0; days && i < ms.n; i++) {
        int ok;
        int64_t d = resolve(&ms.v[i], today, &ok);
        if (ok) days[n++] = d;
    }
    *out = days;
    return n;
}

/* Writes the date part of an ISO-shaped value (its time part kept). */
static void assign(pp_ctx *c, pp_val *v, int64_t day) {
    int64_t y, m, d;
    civil_from_days(day, &y, &m, &d);
    char head[64];
    int n = snprintf(head, sizeof head, "%04lld-%02lld-%02lld", (long long)y, (long long)m, (long long)d);
    if (n < 0 || (size_t)n >= sizeof head) return;
    pp_buf b = {c->a, 0, 0, 0};
    pp_put(&b, head, (size_t)n);
    pp_puts(&b, pp_sub(v->s, 10, v->s.n));
    if (!c->a->nomem) v->s = pp_view(&b);
}

void pp_resolve_dates(pp_ctx *c, pp_val *calls) {
    int64_t ymd[3];
    if (find_iso(c->sys, 0, ymd) == PP_NONE || !valid_date(ymd[0], ymd[1], ymd[2])) return;
    int64_t today = days_from_civil(ymd[0], ymd[1], ymd[2]), *days;
    size_t nd = mentioned_days(c, today, &days), nt = 0;
    if (!nd) return;
    for (size_t i = 0; i < calls->n; i++) { /* count the targets */
        pp_val *args = pp_call_args(&calls->kid[i]);
        for (size_t k = 0; args && k < args->n; k++)
            nt += args->kid[k].type == ND_JSTRING && pp_iso_shape(args->kid[k].s) && pp_date_key(args->key[k]);
    }
    if (!nt) return;
    int same = 1;
    for (size_t i = 1; i < nd; i++) same &= days[i] == days[0];
    if (nd > nt && same) nd = 1;
    if (nd != 1 && nd != nt) return;
    size_t next = 0;
    for (size_t i = 0; i < calls->n; i++) {
        pp_val *args = pp_call_args(&calls->kid[i]);
        for (size_t k = 0; args && k < args->n; k++)
            if (args->kid[k].type == ND_JSTRING && pp_iso_shape(args->kid[k].s) && pp_date_key(args->key[k]))
                assign(c, &args->kid[k], days[nd == 1 ? 0 : next++]);
    }
}
#endif /* ND_NEEDLE3 */
