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

#endif
