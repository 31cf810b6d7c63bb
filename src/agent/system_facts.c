/* system_facts.c: Needle 3's system text and tool results as the makers'
 * engine renders them (system_facts.h). Works on bytes: only ASCII digits
 * and separators are read, everything else is copied as it is. */
#ifdef ND_NEEDLE3
#include <stdlib.h>
#include <string.h>

#include "agent/system_facts.h"
#include "format/json.h"

#define SYSTEM_DEPTH 64
#define STAMP_LEN 16 /* "YYYY-MM-DD HH:MM" */

/* The keys a JSON system text contributes, in the order the facts list them. */
static const char *const FACT_KEYS[] = {"date", "locale", "device", "battery", "network",
                                        "location", "user", "assistant", "thermostat", "volume"};

typedef struct {
    char *p;
    size_t n, cap;
    int nomem;
} text_buf;

static void put(text_buf *b, const char *s, size_t n) {
    if (b->nomem) return;
    if (b->cap - b->n < n + 1) {
        size_t cap = b->cap ? b->cap : 64;
        while (cap - b->n < n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->nomem = 1; return; }
        b->p = p, b->cap = cap;
    }
    if (n) memcpy(b->p + b->n, s, n);
    b->n += n;
    b->p[b->n] = 0;
}

static void puts_z(text_buf *b, const char *s) { put(b, s, strlen(s)); }

/* The finished text, or NULL (everything freed) when out of memory. */
static char *finish(text_buf *b, size_t *out_len) {
    put(b, "", 0); /* an empty text still gets its NUL */
    if (b->nomem) { free(b->p); return NULL; }
    *out_len = b->n;
    return b->p;
}

/* ---- timestamps --------------------------------------------------------------- */

static int digit(char c) { return c >= '0' && c <= '9'; }

/* The first "YYYY-MM-DD[T ]HH:MM" in s[0..n), or NULL. */
static const char *find_stamp(const char *s, size_t n) {
    static const char shape[] = "dddd-dd-dd?dd:dd"; /* d: a digit, ?: 'T' or ' ' */
    for (size_t p = 0; n >= STAMP_LEN && p <= n - STAMP_LEN; p++) {
        size_t i = 0;
        for (; i < STAMP_LEN; i++) {
            char c = s[p + i], want = shape[i];
            if (want == 'd' ? !digit(c) : want == '?' ? c != 'T' && c != ' ' : c != want) break;
        }
        if (i == STAMP_LEN) return s + p;
    }
    return NULL;
}

static long long number(const char *s, int n) {
    long long v = 0;
    for (int i = 0; i < n; i++) v = v * 10 + (s[i] - '0');
    return v;
}

static long long floor_div(long long x, long long y) { return x / y - (x % y != 0 && (x < 0) != (y < 0)); }

/* The weekday of a stamp's date as the engine names it: days from
 * 1970-01-01 (a Thursday) by the civil-calendar count that starts the year
 * in March, in the engine's integer arithmetic (truncating divisions but
 * the leap-year one), so a month 00 or 13 gets the day the engine gives. */
static const char *weekday(const char *stamp) {
    static const char *const DAYS[7] = {"Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"};
    long long y = number(stamp, 4), m = number(stamp + 5, 2), d = number(stamp + 8, 2);
    long long march = (14 - m) / 12; /* 1 for January and February: they end the previous year */
    long long year = y - march, month = m + 12 * march;
    long long days = 365 * year + floor_div(year, 4) - year / 100 + year / 400 + (153 * month - 457) / 5 + d - 719469;
    return DAYS[(days % 7 + 7) % 7];
}

/* "YYYY-MM-DD Www HH:MM" of a stamp. */
static void put_stamp(text_buf *b, const char *stamp) {
    put(b, stamp, 10);
    put(b, " ", 1);
    puts_z(b, weekday(stamp));
    put(b, " ", 1);
    put(b, stamp + 11, 5);
}

/* ---- the system text ------------------------------------------------------------ */

/* A member's value as a fact: a non-empty string, number or boolean. */
static int fact_value(const nd_jv *v, const char **s, size_t *n) {
    if (v->type == ND_JTRUE || v->type == ND_JFALSE) *s = v->type == ND_JTRUE ? "true" : "false", *n = strlen(*s);
    else if (v->type == ND_JSTRING || v->type == ND_JNUMBER) *s = v->str, *n = v->len;
    else return 0;
    return *n > 0;
}

/* The facts of a JSON object system text into b; how many were written. */
static size_t put_facts(text_buf *b, const nd_jv *obj) {
    size_t facts = 0;
    for (size_t k = 0; k < sizeof FACT_KEYS / sizeof *FACT_KEYS; k++) {
        const char *key = FACT_KEYS[k], *value = NULL;
        size_t keylen = strlen(key), n = 0, i = 0;
        /* the first member of that key with a usable value */
        while (i < obj->n && !(obj->kids[i].klen == keylen && !memcmp(obj->kids[i].key, key, keylen) &&
                               fact_value(&obj->kids[i], &value, &n)))
            i++;
        if (i == obj->n) continue;
        if (facts++) put(b, "; ", 2);
        puts_z(b, key);
        put(b, ": ", 2);
        const char *stamp = k == 0 ? find_stamp(value, n) : NULL;
        if (stamp) put_stamp(b, stamp);
        else put(b, value, n);
    }
    return facts;
}

static int starts_object(const char *s, size_t n) {
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')) i++;
    return i < n && s[i] == '{';
}

static int has_date_fact(const char *s, size_t n) {
    for (size_t i = 0; n >= 6 && i <= n - 6; i++)
        if (!memcmp(s + i, "date: ", 6)) return 1;
    return 0;
}

char *nd_system_facts(const char *text, size_t len, size_t *out_len) {
    text_buf b = {0};
    nd_json *doc = starts_object(text, len) ? nd_json_parse(text, len, SYSTEM_DEPTH, NULL) : NULL;
    const nd_jv *root = doc ? nd_json_root(doc) : NULL;
    size_t facts = root && root->type == ND_JOBJECT ? put_facts(&b, root) : 0;
    nd_json_free(doc);
    if (facts) return finish(&b, out_len);
    b.n = 0;
    const char *stamp = find_stamp(text, len);
    if (stamp && !has_date_fact(text, len)) { /* the timestamp stands for the whole text */
        put(&b, "date: ", 6);
        put_stamp(&b, stamp);
    } else {
        put(&b, text, len);
    }
    return finish(&b, out_len);
}

/* ---- tool results ------------------------------------------------------------------ */

char *nd_tool_result_text(const char *text, size_t len, size_t *out_len) {
    text_buf b = {0};
    size_t i = 0;
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r')) i++;
    int object = i < len && text[i] == '{'; /* wrapped: the engine's results are lists */
    if (object) put(&b, "[", 1);
    for (int in_string = 0, escaped = 0; i < len; i++) {
        char c = text[i];
        if (!in_string && (c == ' ' || c == '\t' || c == '\n' || c == '\r')) continue;
        if (in_string && escaped) escaped = 0;
        else if (in_string && c == '\\') escaped = 1;
        else if (c == '"') in_string = !in_string;
        put(&b, &c, 1);
    }
    if (object) put(&b, "]", 1);
    return finish(&b, out_len);
}
#endif /* ND_NEEDLE3 */
