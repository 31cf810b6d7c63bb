/* json.h: a small hostile-input-safe JSON parser (a read-only tree in one
 * arena) and Python-compatible compact rendering (spec section 7).
 *
 * The parser checks the full RFC 8259 grammar, valid UTF-8, a nesting depth
 * limit and every bound; errors are one line with the byte offset. Strings
 * are decoded to UTF-8 (a lone \uD800-style surrogate is kept as its 3-byte
 * generalised UTF-8 form so rendering gives it back); numbers keep the text
 * the caller wrote. Used for tool schemas (grammar_schema.c) and tool results. */
#ifndef ND_JSON_H
#define ND_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "needle.h"

enum { ND_JNULL, ND_JFALSE, ND_JTRUE, ND_JNUMBER, ND_JSTRING, ND_JARRAY, ND_JOBJECT };

typedef struct nd_jv nd_jv;
struct nd_jv {
    int type;
    const char *key; /* member name (decoded UTF-8) when inside an object */
    size_t klen;
    const char *str; /* string: decoded bytes; number: the literal as written */
    size_t len;
    nd_jv *kids;     /* array elements / object members, n of them */
    size_t n;
    double num;      /* number value (strtod of the literal) */
};

typedef struct nd_json nd_json; /* owns the arena every nd_jv lives in */

/* Parses text[0..len) (one value, optional surrounding whitespace). depth
 * bounds nesting. Returns NULL and fills err (NEEDLE_E_ARGUMENT, or
 * NEEDLE_E_NOMEM) on failure; free with nd_json_free. */
nd_json *nd_json_parse(const char *text, size_t len, int depth, needle_error *err);
void nd_json_free(nd_json *doc);
const nd_jv *nd_json_root(const nd_json *doc);

/* Member `key` of an object, or NULL (the last one when a key repeats, as
 * Python's json.loads keeps). */
const nd_jv *nd_jv_get(const nd_jv *obj, const char *key);

/* Appends the compact rendering of v (spec section 7) to out: writes at most
 * cap bytes and returns the full length (which may exceed cap). Repeated keys
 * render once, at the first position with the last value (what a Python dict
 * does). ascii is Python's ensure_ascii: 1 for Needle 2, 0 for Needle 3
 * (needle3-model.md section 8), which writes non-ASCII characters as
 * themselves. Returns SIZE_MAX only when allocation fails. */
size_t nd_jv_compact(const nd_jv *v, int ascii, char *out, size_t cap);

/* needle_json_compact with the choice of ensure_ascii. */
size_t nd_json_compact(const char *json, size_t len, int ascii, char *out, size_t cap, needle_error *err);

/* Renders one decoded UTF-8 string as a Python-escaped JSON string literal
 * (with quotes) into out (at most cap bytes); returns the full length. */
size_t nd_json_string(const char *s, size_t len, int ascii, char *out, size_t cap);

/* Renders s[0..n) for an error message: JSON escapes for '"', '\\' and
 * control characters, cut (with "...") after max bytes of s or when out
 * fills up, always between UTF-8 characters. */
void nd_escape(char *out, size_t cap, const char *s, size_t n, size_t max);

#endif
