/* regex.h: the regular expressions of JSON Schema "pattern" (and of the
 * formats the grammar supports), compiled to a DFA over Unicode code points
 * (src/grammar/regex.c). The grammar walks a string value's decoded code points
 * through the DFA and asks, per state, which remaining lengths can still end
 * in a match.
 *
 * The ECMAScript subset: literals, escapes (\d\D\w\W\s\S\t\n\r\v\f\0\xHH
 * \uHHHH and escaped syntax characters; a \uHHHH surrogate pair is one code
 * point), classes [..] with ranges and negation, '.', groups (..) and (?:..),
 * alternation, * + ? {n} {n,} {n,m} (lazy forms match the same language),
 * ^ at the start and $ at the end. Lookaround, backreferences, \b and flags
 * are compile errors. */
#ifndef ND_REGEX_H
#define ND_REGEX_H

#include <stddef.h>
#include <stdint.h>

/* The DFA a string value runs: transitions on code point classes, plus
 * reach[s] = bit L set when an accepting state is L steps from s. */
typedef struct {
    uint32_t nstates, nclasses;
    uint32_t *bounds;  /* class i = [bounds[i], bounds[i+1]) */
    int32_t *next;     /* nstates x nclasses, -1 = dead */
    uint8_t *accept;
    uint32_t lc, words; /* reach covers lengths 0..lc */
    uint64_t *reach;
    uint8_t *any;      /* any[s]: s accepts every continuation (a free string from there on) */
} nd_dfa;

/* Compiles pat[0..plen) (UTF-8) with JSON Schema's search semantics: an end
 * without ^ or $ gets an implicit .*. NULL with *why (a static message) on
 * a syntax error, an unsupported feature or a pattern too large. The DFA
 * has no reach yet (nd_dfa_reach). */
nd_dfa *nd_regex_compile(const char *pat, size_t plen, const char **why);
/* Fills d->reach for string lengths within [minlen, maxlen] (maxlen
 * UINT32_MAX: unbounded), and d->any. -1 with *why when the table would be
 * too large. */
int nd_dfa_reach(nd_dfa *d, uint32_t minlen, uint32_t maxlen, const char **why);
/* The class of code point cp: its column in d->next. */
uint32_t nd_dfa_class(const nd_dfa *d, uint32_t cp);
void nd_dfa_free(nd_dfa *d);

/* Decodes UTF-8 (already validated by the JSON parser) to a malloc'ed array
 * of *out_n code points; NULL when out of memory. */
uint32_t *nd_utf8_to_cps(const char *s, size_t n, size_t *out_n);
/* The value of hex digit c (either case), or -1. */
int nd_hex_digit(uint32_t c);

#endif
