/* grammar.h: internal pieces of the tool-call grammar (src/grammar/grammar.c and
 * the grammar_*.c files it lists) that the agent and tests reach: a
 * byte-level feed that bypasses tokens, the output so far, and the regex
 * compiler on its own. The public API is in needle.h. */
#ifndef ND_GRAMMAR_H
#define ND_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "needle.h"

/* needle_grammar_new_shared whose call array holds at least min_calls calls
 * (when there are tools): an extraction must call its one tool. ascii: the
 * names, keys and enum values are written as ensure_ascii writes them (1,
 * Needle 2) or with non-ASCII characters as themselves (0, Needle 3). */
needle_grammar *nd_grammar_new_calls(const needle_vocab *vocab, const char *tools_json, size_t len,
                                     int32_t end_token, uint32_t min_calls, int ascii, needle_error *err);

/* Feeds raw bytes as if a token carried them: returns NEEDLE_OK when every
 * byte keeps the output a valid prefix (the state advances), otherwise
 * NEEDLE_E_ARGUMENT and the state is unchanged. */
int nd_grammar_feed(needle_grammar *g, const char *bytes, size_t n, needle_error *err);
/* 1 when the call array is complete (only the end token may follow). */
int nd_grammar_complete(const needle_grammar *g);
/* The bytes accepted so far (owned by g, valid until the next call on g). */
const char *nd_grammar_text(const needle_grammar *g, size_t *len);
/* The completion length (needle_grammar_completion) after accepting token,
 * without accepting it; SIZE_MAX when token is not allowed here. */
size_t nd_grammar_completion_after(needle_grammar *g, int32_t token);

/* needle_grammar_mask without the remembered masks and without the fast
 * path inside free strings: the whole trie walk every time (tests compare
 * the two). */
uint32_t nd_grammar_mask_walked(needle_grammar *g, float *logits);
/* Masks served from memory and masks walked since g was made. */
void nd_grammar_mask_counts(const needle_grammar *g, uint64_t *remembered, uint64_t *walked);

/* Compiles an ECMAScript pattern (the subset regex.h documents) and
 * reports whether the whole string s matches it with JSON Schema's search
 * semantics (unanchored unless ^/$): 1 match, 0 no match, -1 compile error
 * (err filled). For tests. */
int nd_regex_test(const char *pattern, const char *s, size_t n, needle_error *err);

#endif
