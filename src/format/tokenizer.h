/* tokenizer.h: internal accessors of the tokenizer (src/format/tokenizer.c) for the
 * rest of the engine (the grammar needs every piece's bytes to build token
 * masks). The public API is in needle.h. */
#ifndef ND_TOKENIZER_H
#define ND_TOKENIZER_H

#include <stddef.h>
#include <stdint.h>

#include "needle.h"

/* Piece types as stored in the blob (spec section 6). */
enum {
    ND_PIECE_NORMAL = 0,
    ND_PIECE_UNKNOWN = 1,
    ND_PIECE_CONTROL = 2,
    ND_PIECE_USER = 3,
    ND_PIECE_BYTE = 4
};

/* The surface of piece `id` (UTF-8, not NUL-terminated, owned by the
 * tokenizer) and its type; NULL when id is out of range. */
const char *nd_tokenizer_piece(const needle_tokenizer *tok, int32_t id, size_t *len, int *type);

/* The byte a byte piece stands for, or -1 when `id` is not a byte piece. */
int nd_tokenizer_byte(const needle_tokenizer *tok, int32_t id);

/* The longest piece surface in bytes: needle_decoder_push never needs more
 * than this plus 8 bytes of `out` for one id. */
size_t nd_tokenizer_max_piece(const needle_tokenizer *tok);

/* needle_tokenize with user-defined pieces (the chat markers) matched only
 * where every byte of their surface has plain[i] == 0: untrusted text
 * (queries, tool results, system text, tools) marked plain is encoded as the
 * text it is, so only the runtime writes markers. plain may be NULL. */
int nd_tokenize_plain(const needle_tokenizer *tok, const char *text, size_t len, const uint8_t *plain,
                      int32_t *ids, size_t cap, size_t *count, needle_error *err);

#endif
