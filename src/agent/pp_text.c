/* pp_text.c: the post-processor's arena and byte helpers. The engine works
 * on raw bytes and only ever lowercases ASCII, so these do the same; every
 * read is bounds-checked and every size overflow-checked, and a failed
 * allocation leaves an empty result (the arena's nomem flag says so). */
#ifdef ND_NEEDLE3
#include <stdlib.h>
#include <string.h>

#include "agent/postprocess.h"

/* ---- arena --------------------------------------------------------------- */
struct pp_chunk {
    pp_chunk *next;
    size_t used, cap;
    max_align_t data[];
};

void *pp_alloc(pp_arena *a, size_t size) {
    if (a->nomem) return NULL;
    if (size > SIZE_MAX / 2 - 64) goto fail;
    size = (size + 15u) & ~(size_t)15u;
    if (size == 0) size = 16;
    pp_chunk *c = a->chunks;
    if (!c || c->cap - c->used < size) {
        size_t cap = size > 32768 ? size : 32768;
        c = malloc(sizeof(pp_chunk) + cap);
        if (!c) goto fail;
        c->next = a->chunks, c->used = 0, c->cap = cap;
        a->chunks = c;
    }
    void *p = (char *)c->data + c->used;
    c->used += size;
    return p;
fail:
    a->nomem = 1;
    return NULL;
}

void pp_arena_free(pp_arena *a) {
    for (pp_chunk *c = a->chunks, *next; c; c = next) next = c->next, free(c);
    a->chunks = NULL;
}

/* Grows *v (elements of size each, n used, *cap room) to hold one more. */
static int grow(pp_arena *a, void **v, size_t n, size_t *cap, size_t size) {
    if (n < *cap) return 1;
    size_t want = *cap ? *cap * 2 : 8;
    if (want > SIZE_MAX / 2 / size) { a->nomem = 1; return 0; }
    void *p = pp_alloc(a, want * size);
    if (!p) return 0;
    if (n) memcpy(p, *v, n * size);
    *v = p, *cap = want;
    return 1;
}

void pp_put(pp_buf *b, const char *s, size_t n) {
    if (!n) return;
    if (n > SIZE_MAX / 4 || b->n > SIZE_MAX / 4) { b->a->nomem = 1; return; }
    if (b->cap - b->n < n) {
        size_t want = b->cap ? b->cap : 64;
        while (want - b->n < n) want *= 2;
        char *p = pp_alloc(b->a, want);
        if (!p) return;
        if (b->n) memcpy(p, b->p, b->n);
        b->p = p, b->cap = want;
    }
    memcpy(b->p + b->n, s, n);
    b->n += n;
}

void pp_putc(pp_buf *b, char c) { pp_put(b, &c, 1); }

const pp_str PP_EMPTY = {"", 0};

pp_str pp_view(const pp_buf *b) { return b->n ? (pp_str){b->p, b->n} : PP_EMPTY; }

void pp_strv_push(pp_arena *a, pp_strv *v, pp_str s) {
    if (grow(a, (void **)&v->v, v->n, &v->cap, sizeof(pp_str))) v->v[v->n++] = s;
}

void pp_spans_push(pp_arena *a, pp_spans *v, size_t start, size_t end) {
    if (grow(a, (void **)&v->v, v->n, &v->cap, sizeof(pp_span))) v->v[v->n++] = (pp_span){start, end};
}

/* ---- comparisons and search ---------------------------------------------- */
static unsigned char low(unsigned char c) { return c >= 'A' && c <= 'Z' ? c | 0x20 : c; }
int pp_is_digit(unsigned char c) { return c >= '0' && c <= '9'; }
int pp_is_alnum(unsigned char c) { return pp_is_digit(c) || (low(c) >= 'a' && low(c) <= 'z'); }

pp_str pp_z(const char *s) { return (pp_str){s, strlen(s)}; }

pp_str pp_sub(pp_str s, size_t from, size_t to) {
    if (to > s.n) to = s.n;
    if (from >= to) return PP_EMPTY;
    return (pp_str){s.p + from, to - from};
}

pp_str pp_copy(pp_arena *a, pp_str s) {
    if (!s.n) return PP_EMPTY;
    char *p = pp_alloc(a, s.n);
    if (!p) return PP_EMPTY;
    memcpy(p, s.p, s.n);
    return (pp_str){p, s.n};
}

int pp_eq(pp_str a, pp_str b) { return a.n == b.n && memcmp(a.p, b.p, a.n) == 0; }

int pp_eq_ci(pp_str a, pp_str b) {
    if (a.n != b.n) return 0;
    for (size_t i = 0; i < a.n; i++)
        if (low((unsigned char)a.p[i]) != low((unsigned char)b.p[i])) return 0;
    return 1;
}

int pp_eqz(pp_str a, const char *z) { return pp_eq(a, pp_z(z)); }

int pp_all_digits(pp_str s) {
    for (size_t i = 0; i < s.n; i++)
        if (!pp_is_digit((unsigned char)s.p[i])) return 0;
    return s.n > 0;
}

int pp_any_digit(pp_str s) {
    for (size_t i = 0; i < s.n; i++)
        if (pp_is_digit((unsigned char)s.p[i])) return 1;
    return 0;
}

static size_t find_impl(pp_str hay, pp_str needle, size_t from, int ci) {
    if (from > hay.n) return PP_NONE;
    if (!needle.n) return from;
    if (needle.n > hay.n - from) return PP_NONE;
    for (size_t i = from; i <= hay.n - needle.n; i++) {
        size_t k = 0;
        if (ci)
            while (k < needle.n && low((unsigned char)hay.p[i + k]) == low((unsigned char)needle.p[k])) k++;
        else
            while (k < needle.n && hay.p[i + k] == needle.p[k]) k++;
        if (k == needle.n) return i;
    }
    return PP_NONE;
}

size_t pp_find(pp_str hay, pp_str needle, size_t from) { return find_impl(hay, needle, from, 0); }
size_t pp_find_ci(pp_str hay, pp_str needle, size_t from) { return find_impl(hay, needle, from, 1); }
int pp_has(pp_str hay, pp_str needle) { return pp_find(hay, needle, 0) != PP_NONE; }
int pp_has_ci(pp_str hay, pp_str needle) { return pp_find_ci(hay, needle, 0) != PP_NONE; }
int pp_hasz(pp_str hay, const char *needle) { return pp_has(hay, pp_z(needle)); }

int pp_starts(pp_str s, size_t at, pp_str prefix) {
    return at <= s.n && prefix.n <= s.n - at && memcmp(s.p + at, prefix.p, prefix.n) == 0;
}
int pp_startsz(pp_str s, size_t at, const char *prefix) { return pp_starts(s, at, pp_z(prefix)); }

int pp_ends(pp_str s, const char *suffix) {
    size_t n = strlen(suffix);
    return n <= s.n && memcmp(s.p + s.n - n, suffix, n) == 0;
}

/* NUL always counts as trimmable (the engine trims with strchr, which
 * matches the terminator). */
pp_str pp_trim(pp_str s, const char *set) {
    size_t a = 0, b = s.n;
    while (a < b && (!s.p[a] || strchr(set, s.p[a]))) a++;
    while (b > a && (!s.p[b - 1] || strchr(set, s.p[b - 1]))) b--;
    return pp_sub(s, a, b);
}

/* ---- transformed copies ---------------------------------------------------- */
pp_str pp_lower(pp_arena *a, pp_str s) {
    pp_str out = pp_copy(a, s);
    for (size_t i = 0; i < out.n; i++) ((char *)out.p)[i] = (char)low((unsigned char)out.p[i]);
    return out;
}

pp_str pp_squash(pp_arena *a, pp_str s) {
    pp_buf b = {a, 0, 0, 0};
    for (size_t i = 0; i < s.n; i++)
        if (s.p[i] != ' ' && s.p[i] != '-' && s.p[i] != '_') pp_putc(&b, (char)low((unsigned char)s.p[i]));
    return pp_view(&b);
}

pp_str pp_normq(pp_arena *a, pp_str s) {
    pp_buf b = {a, 0, 0, 0};
    pp_putc(&b, ' ');
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = low((unsigned char)s.p[i]);
        pp_putc(&b, (char)((pp_is_alnum(c) || c == ' ' || c == '\'') && c < 0x80 ? c : ' '));
    }
    pp_putc(&b, ' ');
    return pp_view(&b);
}

pp_str pp_pad(pp_arena *a, pp_str s) {
    pp_buf b = {a, 0, 0, 0};
    pp_putc(&b, ' ');
    pp_puts(&b, s);
    pp_putc(&b, ' ');
    return pp_view(&b);
}

int pp_has_word(pp_arena *a, pp_str hay, pp_str word) { return pp_has(hay, pp_pad(a, word)); }

pp_str pp_join(pp_arena *a, const pp_strv *v, char sep) {
    pp_buf b = {a, 0, 0, 0};
    for (size_t i = 0; i < v->n; i++) {
        if (i) pp_putc(&b, sep);
        pp_puts(&b, v->v[i]);
    }
    return pp_view(&b);
}

/* ---- tokenizers ---------------------------------------------------------- */
pp_strv pp_ws_tokens(pp_arena *a, pp_str s) {
    pp_strv out = {0};
    size_t i = 0;
    while (i < s.n) {
        while (i < s.n && (s.p[i] == ' ' || s.p[i] == '\t' || s.p[i] == '\n')) i++;
        size_t start = i;
        while (i < s.n && s.p[i] != ' ' && s.p[i] != '\t' && s.p[i] != '\n') i++;
        if (i > start) pp_strv_push(a, &out, pp_sub(s, start, i));
    }
    return out;
}

static int word_tokens_byte(unsigned char c) { return pp_is_alnum(c) || c == '\'' || c >= 0x80; }

pp_strv pp_word_tokens(pp_arena *a, pp_str s) {
    pp_strv out = {0};
    size_t i = 0;
    while (i < s.n) {
        while (i < s.n && !word_tokens_byte((unsigned char)s.p[i])) i++;
        size_t start = i;
        while (i < s.n && word_tokens_byte((unsigned char)s.p[i])) i++;
        if (i > start) pp_strv_push(a, &out, pp_sub(s, start, i));
    }
    return out;
}

/* Length of a punctuation sequence at i that separates words: Latin-1
 * punctuation (C2 A0..BF) and general punctuation (E2 80 xx, E2 81 xx),
 * or 0. */
static size_t separator_len(pp_str s, size_t i) {
    unsigned char c = (unsigned char)s.p[i];
    unsigned char d = i + 1 < s.n ? (unsigned char)s.p[i + 1] : 0;
    if (c == 0xc2 && d >= 0xa0 && d <= 0xbf) return 2;
    if (c == 0xe2 && (d == 0x80 || d == 0x81) && i + 2 < s.n) return 3;
    return 0;
}

static int word_at(pp_str s, size_t i) {
    if (i >= s.n) return 0;
    unsigned char c = (unsigned char)s.p[i];
    return pp_is_alnum(c) || (c >= 0x80 && separator_len(s, i) == 0);
}

/* Runs of ASCII alphanumerics and non-punctuation non-ASCII bytes; an
 * apostrophe (' or U+2019) followed by a word byte stays inside. */
pp_spans pp_tokens(pp_arena *a, pp_str s) {
    pp_spans out = {0};
    size_t i = 0;
    while (i < s.n) {
        if (!word_at(s, i)) {
            size_t n = (unsigned char)s.p[i] >= 0x80 ? separator_len(s, i) : 1;
            i += n ? n : 1;
            continue;
        }
        size_t start = i;
        for (;;) {
            if (word_at(s, i) || (i < s.n && s.p[i] == '\'' && word_at(s, i + 1)))
                i++;
            else if (pp_startsz(s, i, "\xe2\x80\x99") && word_at(s, i + 3))
                i += 3;
            else
                break;
        }
        pp_spans_push(a, &out, start, i);
    }
    return out;
}

/* Words of an identifier: lowercase alphanumeric runs, an uppercase letter
 * after a lowercase one starting a new word (camelCase), anything else a
 * separator; words under three bytes and a few stop words dropped. */
static void name_flush(pp_arena *a, pp_strv *out, pp_buf *cur) {
    pp_str w = pp_view(cur);
    if (w.n >= 3 && !pp_in(w, PP_STEM_DROP)) pp_strv_push(a, out, pp_copy(a, w));
    cur->n = 0;
}

pp_strv pp_name_words(pp_arena *a, pp_str s) {
    pp_strv out = {0};
    pp_buf cur = {a, 0, 0, 0};
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i];
        if ((c >= 'a' && c <= 'z') || pp_is_digit(c)) {
            pp_putc(&cur, (char)c);
        } else if (c >= 'A' && c <= 'Z') {
            if (cur.n && cur.p[cur.n - 1] >= 'a' && cur.p[cur.n - 1] <= 'z') name_flush(a, &out, &cur);
            pp_putc(&cur, (char)(c | 0x20));
        } else {
            name_flush(a, &out, &cur);
        }
    }
    name_flush(a, &out, &cur);
    return out;
}

int pp_name_has(pp_arena *a, pp_str name, pp_str word) {
    pp_strv w = pp_name_words(a, name);
    for (size_t i = 0; i < w.n; i++)
        if (pp_eq(w.v[i], word)) return 1;
    return 0;
}
#endif /* ND_NEEDLE3 */
