/* grammar_v3_rules.c: what the makers' Needle 3 engine reads into a schema
 * beyond JSON Schema (needle3-engine.md section 2, "Grammar differences"),
 * as facts about property names and descriptions; grammar_schema.c applies
 * them when a grammar is built with ND_GRAMMAR_NEEDLE3, grammar_ground.c
 * checks grounded values. The facts (word lists, how names match, which
 * fields are exempt) are those ddrscott/needle-rs records in
 * docs/engine-rules.md ("The schema compiler") and
 * crates/needle-engine/src/grammar/compile.rs; the code is ours.
 *
 * Names are matched as bytes, case and all: the tools the grammar compiles
 * are already normalised (toolset.h snake_cases them), as the engine's are. */
#include "grammar/grammar_internal.h"

#include <stdlib.h>
#include <string.h>

#ifdef ND_NEEDLE3 /* Needle 2 modules compile the rules out (grammar_internal.h) */

/* s[0..n) holds the C string w. */
static int has(const char *s, size_t n, const char *w) {
    size_t k = strlen(w);
    for (size_t i = 0; k <= n && i <= n - k; i++)
        if (!memcmp(s + i, w, k)) return 1;
    return 0;
}

static int is(const char *s, size_t n, const char *w) { return strlen(w) == n && !memcmp(s, w, n); }

/* The engine's list, in its order: a percentage first (so "brightness_count"
 * is one), then a rating, then durations and counts, which only cannot be
 * negative. The exact names are whole names; the rest match anywhere. */
int nd_v3_name_range(const char *name, size_t n, int *lo, int *hi) {
    static const char *const percent[] = {"level", "brightness_level", "volume_level", "light_level",
                                          "dim_level", "fan_level", "power_level", "volume"};
    static const char *const nonneg[] = {"minutes", "seconds", "hours", "duration", "count"};
    for (size_t i = 0; i < sizeof percent / sizeof *percent; i++)
        if (is(name, n, percent[i])) { *lo = 0, *hi = 100; return 3; }
    if (has(name, n, "brightness") || has(name, n, "percent")) { *lo = 0, *hi = 100; return 3; }
    if (is(name, n, "rating")) { *lo = 1, *hi = 5; return 3; }
    for (size_t i = 0; i < sizeof nonneg / sizeof *nonneg; i++)
        if (has(name, n, nonneg[i])) { *lo = 0; return 1; }
    return 0;
}

/* "id", or a name of four bytes or more ending in "_id" ("_id" alone is not one). */
int nd_v3_grounded_name(const char *name, size_t n) {
    return is(name, n, "id") || (n >= 4 && !memcmp(name + n - 3, "_id", 3));
}

/* Tokens between quote bytes q, paired left to right, deduplicated. One
 * that is empty, 20 bytes or longer, or holds a space, tab or newline
 * spoils the whole list (prose in quotes, not options); fewer than two
 * distinct tokens are no list. */
static nd_mined *quoted(const char *s, size_t len, char q, size_t *count) {
    nd_mined *out = NULL;
    size_t n = 0, cap = 0;
    *count = 0;
    for (size_t i = 0; i < len;) {
        const char *a = memchr(s + i, q, len - i);
        const char *b = a ? memchr(a + 1, q, len - (size_t)(a + 1 - s)) : NULL;
        if (!b) break;
        size_t at = (size_t)(a + 1 - s), k = (size_t)(b - a - 1);
        if (!k || k > 19 || memchr(a + 1, ' ', k) || memchr(a + 1, '\t', k) || memchr(a + 1, '\n', k)) { n = 0; break; }
        int dup = 0;
        for (size_t j = 0; j < n && !dup; j++) dup = out[j].n == k && !memcmp(s + out[j].at, s + at, k);
        if (!dup) {
            if (n == cap) {
                nd_mined *t = realloc(out, (cap = cap ? cap * 2 : 8) * sizeof *t);
                if (!t) { n = 0; break; }
                out = t;
            }
            out[n++] = (nd_mined){at, k};
        }
        i = (size_t)(b + 1 - s);
    }
    if (n < 2) { free(out); return NULL; }
    *count = n;
    return out;
}

/* No list after an example cue; single-quoted tokens anywhere; else
 * double-quoted ones where a cue says options follow. The cues are read in
 * ASCII lowercase. */
nd_mined *nd_v3_mine(const char *desc, size_t len, size_t *count) {
    static const char *const examples[] = {"e.g", "such as", "for example"};
    static const char *const cues[] = {"options", "one of", "possible values", "allowed values", "valid values",
                                       "choices", "can be"};
    *count = 0;
    char *lower = malloc(len + 1);
    if (!lower) return NULL;
    for (size_t i = 0; i < len; i++) lower[i] = desc[i] >= 'A' && desc[i] <= 'Z' ? (char)(desc[i] + 32) : desc[i];
    nd_mined *out = NULL;
    int example = 0, cue = 0;
    for (size_t i = 0; i < sizeof examples / sizeof *examples; i++) example |= has(lower, len, examples[i]);
    for (size_t i = 0; i < sizeof cues / sizeof *cues; i++) cue |= has(lower, len, cues[i]);
    free(lower);
    if (example) return NULL;
    out = quoted(desc, len, '\'', count);
    if (!out && cue) out = quoted(desc, len, '"', count);
    return out;
}
#endif
