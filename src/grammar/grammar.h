/* grammar.h: internal pieces of the tool-call grammar (src/grammar/grammar.c and
 * the grammar_*.c files it lists) that the agent and tests reach: the call
 * grammar with its flags and Needle 3's context, a byte-level feed that
 * bypasses tokens, the output so far, and the regex compiler on its own.
 * The public API is in needle.h. */
#ifndef ND_GRAMMAR_H
#define ND_GRAMMAR_H

#include <stddef.h>
#include <stdint.h>

#include "needle.h"

/* Flags of nd_grammar_new_calls. */
#define ND_GRAMMAR_ASCII 1u   /* names, keys and enum values as ensure_ascii writes them (Needle 2);
                                 without it non-ASCII characters are themselves (Needle 3) */
#define ND_GRAMMAR_NEEDLE3 2u /* the makers' Needle 3 engine's grammar additions (grammar_v3_rules.c):
                                 implied number ranges, enums mined from descriptions, and values
                                 grounded in the conversation (nd_grammar_set_context) */

/* needle_grammar_new_shared whose call array holds at least min_calls calls
 * (when there are tools): an extraction must call its one tool. flags: the
 * ND_GRAMMAR_* bits above (0: Needle 3's literals without its additions). */
needle_grammar *nd_grammar_new_calls(const needle_vocab *vocab, const char *tools_json, size_t len,
                                     int32_t end_token, uint32_t min_calls, unsigned flags, needle_error *err);

/* The conversation that grounded values must come from (ND_GRAMMAR_NEEDLE3):
 * a string value of a property named "id" or "*_id", or declared
 * "grounded": true, must stay a substring of text as it grows, byte by
 * byte; a number value too (grammar_ground.c). The grammar keeps a copy,
 * indexed (the caller's buffer grows and is cut between turns, and the
 * index makes each byte one step), so text need not outlive the call; only
 * its last 64 KiB are kept. An empty text (the state a grammar starts in)
 * grounds nothing. Setting the same text again keeps the remembered masks;
 * another text retires those that read it. Out of memory, grounding is off
 * until the next call. Set it between call arrays (after
 * needle_grammar_reset, before a turn's first byte): a grounded value open
 * across the change would be checked against the wrong text. Modules built
 * without ND_NEEDLE3 ground nothing and ignore it. */
void nd_grammar_set_context(needle_grammar *g, const char *text, size_t len);

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

/* Where the call stands relative to an argument value (grammar_value.c),
 * for the makers' decoding at a value's start (agent/value_search.h).
 * nd_grammar_value_start: 0 unless every reading of the text so far waits
 * for an argument's value (a top-level argument or an item or member below
 * one); then ND_VALUE_START, with ND_VALUE_OPTIONS when every reading's value
 * is a literal set (enum, const, options mined from a description) holding
 * a string, and ND_VALUE_GROUNDED when a reading's key is grounded. */
#define ND_VALUE_START 1u
#define ND_VALUE_OPTIONS 2u
#define ND_VALUE_GROUNDED 4u
unsigned nd_grammar_value_start(const needle_grammar *g);
/* 1 when a reading has closed the top-level argument value it was in (the
 * arguments wait for "," or "}", or have closed): a number closes only at
 * "}", since its "," already opens the next key. */
int nd_grammar_value_closed(const needle_grammar *g);
/* Right after the opening quote of a literal value: the string options it
 * still allows (at most cap), each as its text after the opening quote
 * through the closing one, JSON-escaped as the call writes it (owned by
 * g); 0 when the text is anywhere else. */
uint32_t nd_grammar_open_options(const needle_grammar *g, const char **texts, size_t *lens, uint32_t cap);

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
