/* tokenizer.c: the SentencePiece BPE tokenizer of a Needle archive (spec
 * section 6): validation of the RAW blob, encode exactly as spm_encode does
 * with identity normalisation, decode as the reference exporter does, and a
 * streaming decoder that never emits half a UTF-8 character.
 *
 * Blob (little-endian, no alignment): a 24-byte header
 *   u32 pieceCount, padId, eosId, bosId, unknownId; u8 addDummyPrefix,
 *   u8 byteFallback, u16 pad (0)
 * then pieceCount records: f32 score, u8 type, u16 len, len bytes of UTF-8.
 *
 * Encoding, like SentencePiece's bpe_model.cc: every symbol pair whose
 * concatenation is a normal piece goes into a priority queue (highest score
 * first, leftmost on ties); popping a pair whose symbols have changed since
 * it was queued is skipped, so the whole merge costs O(n log n). */
#include "format/tokenizer.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ND_TOK_HEADER 24
#define ND_TOK_RECORD 7 /* f32 score, u8 type, u16 len */
#define ND_TOK_MAX_PIECES (1u << 24) /* far above any vocabulary; keeps table sizes in 32 bits */

typedef struct {
    uint32_t offset; /* of the surface in needle_tokenizer.text */
    uint16_t len;
    uint8_t type;
    int16_t byte;    /* the byte of a byte piece, else -1 */
    float score;
} nd_piece;

struct needle_tokenizer {
    uint32_t count;
    int32_t special[4];       /* pad, eos, bos, unknown */
    int add_dummy_prefix;
    int byte_fallback;
    nd_piece *pieces;         /* [count] */
    char *text;               /* every surface, back to back */
    uint32_t *slots;          /* open-addressing table of id + 1 by surface; 0 = empty */
    uint32_t slot_mask;
    int32_t byte_ids[256];    /* id of <0xXX> (unknown id when absent) */
    uint8_t marker_first[32]; /* bitmap of the first bytes of user-defined pieces */
    uint16_t *marker_lens;    /* distinct user-defined lengths, longest first */
    uint32_t marker_len_count;
    size_t max_piece;
};

static void nd_tok_fail(needle_error *err, int code, const char *fmt, ...) {
    if (!err) return;
    err->code = code;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->message, sizeof err->message, fmt, ap);
    va_end(ap);
}

static uint32_t nd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static float nd_f32(const uint8_t *p) {
    uint32_t bits = nd_u32(p);
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

/* ---- UTF-8 --------------------------------------------------------------- */

/* Length of the well-formed UTF-8 character at s (n bytes available), or 0
 * when it is ill-formed: overlong, surrogate, above U+10FFFF, truncated.
 * These are the rules of SentencePiece's DecodeUTF8. */
static size_t nd_utf8_char(const uint8_t *s, size_t n) {
    if (n == 0) return 0;
    uint8_t b = s[0];
    if (b < 0x80) return 1;
    size_t need = (b & 0xE0) == 0xC0 ? 2 : (b & 0xF0) == 0xE0 ? 3 : (b & 0xF8) == 0xF0 ? 4 : 0;
    if (need == 0 || n < need) return 0;
    uint32_t cp = b & (0x7F >> need);
    for (size_t i = 1; i < need; i++) {
        if ((s[i] & 0xC0) != 0x80) return 0;
        cp = cp << 6 | (s[i] & 0x3F);
    }
    static const uint32_t min_cp[5] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_cp[need] || cp > 0x10FFFF || (cp >= 0xD800 && cp < 0xE000)) return 0;
    return need;
}

/* ---- Loading ------------------------------------------------------------- */

static uint32_t nd_hash(const char *s, size_t len) {
    uint32_t h = 2166136261u; /* FNV-1a */
    for (size_t i = 0; i < len; i++) h = (h ^ (uint8_t)s[i]) * 16777619u;
    return h;
}

static int32_t nd_lookup(const needle_tokenizer *tok, const char *s, size_t len) {
    for (uint32_t i = nd_hash(s, len) & tok->slot_mask;; i = (i + 1) & tok->slot_mask) {
        uint32_t slot = tok->slots[i];
        if (slot == 0) return -1;
        const nd_piece *p = &tok->pieces[slot - 1];
        if (p->len == len && memcmp(tok->text + p->offset, s, len) == 0) return (int32_t)(slot - 1);
    }
}

/* Checks one record's fields; *off is the record's byte offset on entry. */
static int nd_check_piece(const uint8_t *blob, size_t size, uint32_t index, size_t off,
                          needle_error *err) {
    if (size - off < ND_TOK_RECORD) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: piece %u at byte %zu: record header needs %d bytes, %zu left",
                index, off, ND_TOK_RECORD, size - off);
        return 0;
    }
    float score = nd_f32(blob + off);
    uint8_t type = blob[off + 4];
    size_t len = (size_t)blob[off + 5] | (size_t)blob[off + 6] << 8;
    const uint8_t *s = blob + off + ND_TOK_RECORD;
    if (!isfinite(score)) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: piece %u at byte %zu: score is not finite", index, off);
        return 0;
    }
    if (type > ND_PIECE_BYTE) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: piece %u at byte %zu: type %u is not 0..4", index,
                off + 4, type);
        return 0;
    }
    if (len > size - off - ND_TOK_RECORD) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: piece %u at byte %zu: length %zu runs past the blob end (%zu bytes left)",
                index, off + 5, len, size - off - ND_TOK_RECORD);
        return 0;
    }
    if (len == 0 && type != ND_PIECE_CONTROL && type != ND_PIECE_UNKNOWN) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: piece %u at byte %zu: empty surface for type %u", index,
                off + 5, type);
        return 0;
    }
    for (size_t i = 0; i < len;) {
        size_t n = nd_utf8_char(s + i, len - i);
        if (n == 0) {
            nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: piece %u at byte %zu: surface is not valid UTF-8",
                    index, off + ND_TOK_RECORD + i);
            return 0;
        }
        i += n;
    }
    return 1;
}

static int nd_hex(uint8_t c) {
    return c >= '0' && c <= '9' ? c - '0' : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* A byte piece must read <0xXX> with upper-case hex, as SentencePiece writes it. */
static int nd_byte_value(const char *s, size_t len) {
    if (len != 6 || memcmp(s, "<0x", 3) != 0 || s[5] != '>') return -1;
    int hi = nd_hex((uint8_t)s[3]), lo = nd_hex((uint8_t)s[4]);
    return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

/* Reads every record into tok->pieces and tok->text. */
static int nd_read_pieces(needle_tokenizer *tok, const uint8_t *blob, size_t size, needle_error *err) {
    size_t off = ND_TOK_HEADER, text_len = 0;
    for (uint32_t i = 0; i < tok->count; i++) {
        if (!nd_check_piece(blob, size, i, off, err)) return 0;
        nd_piece *p = &tok->pieces[i];
        p->score = nd_f32(blob + off);
        p->type = blob[off + 4];
        p->len = (uint16_t)(blob[off + 5] | blob[off + 6] << 8);
        p->offset = (uint32_t)text_len;
        memcpy(tok->text + text_len, blob + off + ND_TOK_RECORD, p->len);
        p->byte = -1;
        if (p->type == ND_PIECE_BYTE) {
            int b = nd_byte_value(tok->text + text_len, p->len);
            if (b < 0) {
                nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: piece %u at byte %zu: byte piece is not of the form <0xXX>",
                        i, off + ND_TOK_RECORD);
                return 0;
            }
            p->byte = (int16_t)b;
        }
        if (p->len > tok->max_piece) tok->max_piece = p->len;
        text_len += p->len;
        off += ND_TOK_RECORD + p->len;
    }
    if (off != size) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: %zu trailing bytes after the last piece at byte %zu",
                size - off, off);
        return 0;
    }
    return 1;
}

/* Builds the surface hash table (and rejects duplicate surfaces, which would
 * make lookup ambiguous), the byte table and the user-defined lengths. */
static int nd_index_pieces(needle_tokenizer *tok, needle_error *err) {
    uint32_t slots = 16;
    while (slots < tok->count * 2u) slots *= 2; /* count <= 2^24: no overflow */
    tok->slots = calloc(slots, sizeof *tok->slots);
    tok->marker_lens = calloc(tok->count, sizeof *tok->marker_lens);
    if (!tok->slots || !tok->marker_lens) {
        nd_tok_fail(err, NEEDLE_E_NOMEM, "tokenizer: out of memory for the piece table");
        return 0;
    }
    tok->slot_mask = slots - 1;
    for (uint32_t id = 0; id < tok->count; id++) {
        const nd_piece *p = &tok->pieces[id];
        if (p->len == 0) continue; /* an empty control piece is never looked up */
        int32_t other = nd_lookup(tok, tok->text + p->offset, p->len);
        if (other >= 0) {
            nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: piece %u repeats the surface of piece %d", id, other);
            return 0;
        }
        uint32_t i = nd_hash(tok->text + p->offset, p->len) & tok->slot_mask;
        while (tok->slots[i]) i = (i + 1) & tok->slot_mask;
        tok->slots[i] = id + 1;
        if (p->type == ND_PIECE_USER) {
            uint8_t first = (uint8_t)tok->text[p->offset];
            tok->marker_first[first >> 3] |= (uint8_t)(1u << (first & 7));
            uint32_t k = 0;
            while (k < tok->marker_len_count && tok->marker_lens[k] > p->len) k++;
            if (k == tok->marker_len_count || tok->marker_lens[k] != p->len) {
                memmove(tok->marker_lens + k + 1, tok->marker_lens + k,
                        (tok->marker_len_count - k) * sizeof *tok->marker_lens);
                tok->marker_lens[k] = p->len;
                tok->marker_len_count++;
            }
        }
    }
    for (int b = 0; b < 256; b++) {
        char name[8];
        snprintf(name, sizeof name, "<0x%02X>", b);
        int32_t id = nd_lookup(tok, name, 6);
        tok->byte_ids[b] = id >= 0 ? id : tok->special[3];
    }
    return 1;
}

/* Validates the 24-byte header and fills the scalar fields of tok. */
static int nd_read_header(needle_tokenizer *tok, const uint8_t *blob, size_t size, needle_error *err) {
    if (size < ND_TOK_HEADER) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: blob is %zu bytes, shorter than its %d-byte header", size,
                ND_TOK_HEADER);
        return 0;
    }
    tok->count = nd_u32(blob);
    if (tok->count == 0 || tok->count > ND_TOK_MAX_PIECES || tok->count > (size - ND_TOK_HEADER) / ND_TOK_RECORD) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: pieceCount %u at byte 0 cannot fit a blob of %zu bytes",
                tok->count, size);
        return 0;
    }
    static const char *names[4] = {"padId", "eosId", "bosId", "unknownId"};
    for (int k = 0; k < 4; k++) {
        uint32_t id = nd_u32(blob + 4 + 4 * k);
        if (id >= tok->count) {
            nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: %s %u at byte %d is not below pieceCount %u", names[k],
                    id, 4 + 4 * k, tok->count);
            return 0;
        }
        tok->special[k] = (int32_t)id;
    }
    if (blob[20] > 1 || blob[21] > 1 || blob[22] || blob[23]) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER,
                "tokenizer: flags at byte 20 are %u %u pad %u: expected 0 or 1 each and pad 0", blob[20],
                blob[21], blob[22] | blob[23] << 8);
        return 0;
    }
    tok->add_dummy_prefix = blob[20];
    tok->byte_fallback = blob[21];
    return 1;
}

NEEDLE_API needle_tokenizer *needle_tokenizer_load(const uint8_t *blob, size_t size, needle_error *err) {
    if (err) { err->code = NEEDLE_OK; err->message[0] = '\0'; }
    if (!blob && size) {
        nd_tok_fail(err, NEEDLE_E_ARGUMENT, "tokenizer: blob is NULL");
        return NULL;
    }
    needle_tokenizer *tok = calloc(1, sizeof *tok);
    if (!tok) {
        nd_tok_fail(err, NEEDLE_E_NOMEM, "tokenizer: out of memory");
        return NULL;
    }
    int ok = nd_read_header(tok, blob, size, err);
    if (ok) {
        /* count <= size/7 and the surfaces fit in size, so neither product overflows. */
        tok->pieces = malloc((size_t)tok->count * sizeof *tok->pieces);
        tok->text = malloc(size - ND_TOK_HEADER);
        if (!tok->pieces || !tok->text) {
            nd_tok_fail(err, NEEDLE_E_NOMEM, "tokenizer: out of memory for %u pieces", tok->count);
            ok = 0;
        }
    }
    ok = ok && nd_read_pieces(tok, blob, size, err);
    if (ok && tok->pieces[tok->special[3]].type != ND_PIECE_UNKNOWN) {
        nd_tok_fail(err, NEEDLE_E_TOKENIZER, "tokenizer: unknownId %d names a piece of type %u, not unknown (1)",
                tok->special[3], tok->pieces[tok->special[3]].type);
        ok = 0;
    }
    ok = ok && nd_index_pieces(tok, err);
    if (!ok) {
        needle_tokenizer_free(tok);
        return NULL;
    }
    return tok;
}

NEEDLE_API void needle_tokenizer_free(needle_tokenizer *tok) {
    if (!tok) return;
    free(tok->pieces);
    free(tok->text);
    free(tok->slots);
    free(tok->marker_lens);
    free(tok);
}

NEEDLE_API uint32_t needle_tokenizer_size(const needle_tokenizer *tok) {
    return tok ? tok->count : 0;
}

NEEDLE_API int32_t needle_tokenizer_special(const needle_tokenizer *tok, int which) {
    return tok && which >= 0 && which < 4 ? tok->special[which] : -1;
}

NEEDLE_API int32_t needle_tokenizer_piece_id(const needle_tokenizer *tok, const char *text, size_t len) {
    if (!tok || (!text && len) || len == 0) return -1;
    return nd_lookup(tok, text, len);
}

const char *nd_tokenizer_piece(const needle_tokenizer *tok, int32_t id, size_t *len, int *type) {
    if (!tok || id < 0 || (uint32_t)id >= tok->count) return NULL;
    const nd_piece *p = &tok->pieces[id];
    if (len) *len = p->len;
    if (type) *type = p->type;
    return tok->text + p->offset;
}

int nd_tokenizer_byte(const needle_tokenizer *tok, int32_t id) {
    if (!tok || id < 0 || (uint32_t)id >= tok->count) return -1;
    return tok->pieces[id].byte;
}

size_t nd_tokenizer_max_piece(const needle_tokenizer *tok) {
    return tok ? tok->max_piece : 0;
}

/* ---- Encoding ------------------------------------------------------------ */

/* SentencePiece's identity normaliser: a space becomes U+2581, an ill-formed
 * byte becomes U+FFFD (one per byte, as spm does), and with addDummyPrefix
 * one U+2581 goes in front. out holds 3 * len + 3 bytes; returns its length. */
/* plain (may be NULL) flags input bytes where no user-defined piece may
 * start; out_plain gets the flag of each output byte. */
static size_t nd_normalize(const needle_tokenizer *tok, const uint8_t *s, size_t len, const uint8_t *plain,
                           char *out, uint8_t *out_plain) {
    size_t n = 0;
    if (tok->add_dummy_prefix) { memcpy(out, "\xE2\x96\x81", 3); n = 3; }
    if (out_plain) memset(out_plain, 0, n);
    for (size_t i = 0; i < len;) {
        size_t c = nd_utf8_char(s + i, len - i), from = n;
        if (s[i] == ' ' || c == 0) {
            memcpy(out + n, s[i] == ' ' ? "\xE2\x96\x81" : "\xEF\xBF\xBD", 3);
            n += 3;
            c = 1;
        } else {
            memcpy(out + n, s + i, c);
            n += c;
        }
        if (out_plain) memset(out_plain + from, plain && plain[i], n - from);
        i += c;
    }
    return n;
}

typedef struct {
    uint32_t start, len; /* bytes of the normalised text; len 0 once merged away */
    int32_t prev, next;  /* neighbours in the linked list of live symbols, -1 at the ends */
    int frozen;          /* a user-defined piece: never merged */
} nd_symbol;

typedef struct {
    float score;
    int32_t left, right;
    uint32_t size; /* bytes of the merged piece, to recognise a stale pair */
} nd_pair;

/* Heap order: higher score first, then the leftmost pair. */
static int nd_pair_before(const nd_pair *a, const nd_pair *b) {
    return a->score > b->score || (a->score == b->score && a->left < b->left);
}

typedef struct {
    const needle_tokenizer *tok;
    const char *text;
    const uint8_t *plain; /* per byte of text: 1 where no user-defined piece may match, or NULL */
    nd_symbol *sym;
    nd_pair *heap;
    size_t heap_len;
} nd_bpe;

static void nd_heap_push(nd_bpe *b, nd_pair pair) {
    size_t i = b->heap_len++;
    while (i > 0 && nd_pair_before(&pair, &b->heap[(i - 1) / 2])) {
        b->heap[i] = b->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    b->heap[i] = pair;
}

static nd_pair nd_heap_pop(nd_bpe *b) {
    nd_pair top = b->heap[0], last = b->heap[--b->heap_len];
    size_t i = 0, n = b->heap_len;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && nd_pair_before(&b->heap[c + 1], &b->heap[c])) c++;
        if (!nd_pair_before(&b->heap[c], &last)) break;
        b->heap[i] = b->heap[c];
        i = c;
    }
    if (n) b->heap[i] = last;
    return top;
}

/* Queues the pair (left, right) when their concatenation is a normal piece. */
static void nd_maybe_pair(nd_bpe *b, int32_t left, int32_t right) {
    if (left < 0 || right < 0 || b->sym[left].frozen || b->sym[right].frozen) return;
    uint32_t size = b->sym[left].len + b->sym[right].len;
    int32_t id = nd_lookup(b->tok, b->text + b->sym[left].start, size);
    if (id < 0 || b->tok->pieces[id].type != ND_PIECE_NORMAL) return;
    nd_pair pair = {b->tok->pieces[id].score, left, right, size};
    nd_heap_push(b, pair);
}

/* Length of the user-defined piece starting at s (longest first), or 0. */
static size_t nd_marker_at(const needle_tokenizer *tok, const char *s, size_t left) {
    uint8_t first = (uint8_t)s[0];
    if (!(tok->marker_first[first >> 3] & (1u << (first & 7)))) return 0;
    for (uint32_t k = 0; k < tok->marker_len_count; k++) {
        size_t len = tok->marker_lens[k];
        if (len > left) continue;
        int32_t id = nd_lookup(tok, s, len);
        if (id >= 0 && tok->pieces[id].type == ND_PIECE_USER) return len;
    }
    return 0;
}

/* Splits the normalised text into symbols (user-defined pieces whole and
 * frozen, otherwise one code point each); returns the symbol count. */
static size_t nd_split(nd_bpe *b, size_t n) {
    size_t count = 0;
    for (size_t i = 0; i < n;) {
        size_t len = nd_marker_at(b->tok, b->text + i, n - i);
        if (b->plain && len && memchr(b->plain + i, 1, len)) len = 0; /* plain text writes no marker */
        int frozen = len > 0;
        if (!frozen) len = nd_utf8_char((const uint8_t *)b->text + i, n - i); /* valid after normalising */
        nd_symbol *s = &b->sym[count];
        s->start = (uint32_t)i;
        s->len = (uint32_t)len;
        s->frozen = frozen;
        s->prev = (int32_t)count - 1;
        i += len;
        s->next = i < n ? (int32_t)count + 1 : -1;
        count++;
    }
    return count;
}

/* The merge loop of bpe_model.cc: pop the best pair, skip it when a symbol
 * changed since it was queued, otherwise merge and queue the new neighbours. */
static void nd_merge(nd_bpe *b, size_t count) {
    for (size_t i = 0; i + 1 < count; i++) nd_maybe_pair(b, (int32_t)i, (int32_t)i + 1);
    while (b->heap_len) {
        nd_pair top = nd_heap_pop(b);
        nd_symbol *l = &b->sym[top.left], *r = &b->sym[top.right];
        if (l->len == 0 || r->len == 0 || l->len + r->len != top.size) continue;
        l->len += r->len;
        l->next = r->next;
        if (r->next >= 0) b->sym[r->next].prev = top.left;
        r->len = 0;
        nd_maybe_pair(b, l->prev, top.left);
        nd_maybe_pair(b, top.left, l->next);
    }
}

typedef struct {
    int32_t *ids;
    size_t cap, count;
} nd_ids;

static void nd_emit(nd_ids *out, int32_t id) {
    if (out->count < out->cap) out->ids[out->count] = id;
    out->count++;
}

/* Turns the final symbols into ids, as sentencepiece_processor.cc does: an
 * unknown symbol becomes its bytes with byte fallback, otherwise a run of
 * unknown symbols becomes one unknown id. */
static void nd_emit_symbols(const nd_bpe *b, nd_ids *out) {
    const needle_tokenizer *tok = b->tok;
    int prev_unknown = 0;
    for (int32_t i = 0; i >= 0; i = b->sym[i].next) {
        const nd_symbol *s = &b->sym[i];
        int32_t id = nd_lookup(tok, b->text + s->start, s->len);
        int unknown = id < 0 || tok->pieces[id].type == ND_PIECE_UNKNOWN;
        if (!unknown) nd_emit(out, id);
        else if (tok->byte_fallback)
            for (uint32_t k = 0; k < s->len; k++) nd_emit(out, tok->byte_ids[(uint8_t)b->text[s->start + k]]);
        else if (!prev_unknown) nd_emit(out, tok->special[3]);
        prev_unknown = unknown;
    }
}

NEEDLE_API int needle_tokenize(const needle_tokenizer *tok, const char *text, size_t len, int32_t *ids,
                               size_t cap, size_t *count, needle_error *err) {
    return nd_tokenize_plain(tok, text, len, NULL, ids, cap, count, err);
}

int nd_tokenize_plain(const needle_tokenizer *tok, const char *text, size_t len, const uint8_t *plain,
                      int32_t *ids, size_t cap, size_t *count, needle_error *err) {
    if (!tok || (!text && len) || (!ids && cap) || !count) {
        nd_tok_fail(err, NEEDLE_E_ARGUMENT, "tokenize: NULL tokenizer, text, ids or count");
        return NEEDLE_E_ARGUMENT;
    }
    *count = 0;
    if (len == 0) return NEEDLE_OK; /* no dummy prefix for empty text, as spm */
    if (len > (SIZE_MAX / 3 - 3) / (3 * sizeof(nd_pair)) || len >= INT32_MAX / 4) {
        nd_tok_fail(err, NEEDLE_E_ARGUMENT, "tokenize: text of %zu bytes is too long", len);
        return NEEDLE_E_ARGUMENT;
    }
    size_t max_symbols = len + 1; /* at most one per input byte, plus the dummy prefix */
    nd_bpe b = {tok, NULL, NULL, NULL, NULL, 0};
    char *norm = malloc(3 * len + 3);
    uint8_t *norm_plain = plain ? malloc(3 * len + 3) : NULL;
    b.sym = malloc(max_symbols * sizeof *b.sym);
    b.heap = malloc(3 * max_symbols * sizeof *b.heap); /* initial pairs + two per merge */
    int status = NEEDLE_OK;
    if (!norm || !b.sym || !b.heap || (plain && !norm_plain)) {
        nd_tok_fail(err, NEEDLE_E_NOMEM, "tokenize: out of memory for %zu bytes of text", len);
        status = NEEDLE_E_NOMEM;
    } else {
        b.text = norm;
        b.plain = norm_plain;
        size_t n = nd_normalize(tok, (const uint8_t *)text, len, plain, norm, norm_plain);
        nd_merge(&b, nd_split(&b, n));
        nd_ids out = {ids, cap, 0};
        nd_emit_symbols(&b, &out);
        *count = out.count;
        if (out.count > cap) {
            nd_tok_fail(err, NEEDLE_E_ARGUMENT, "tokenize: %zu ids do not fit a buffer of %zu", out.count, cap);
            status = NEEDLE_E_ARGUMENT;
        }
    }
    free(norm);
    free(norm_plain);
    free(b.sym);
    free(b.heap);
    return status;
}

/* ---- Decoding ------------------------------------------------------------ */

/* An incremental UTF-8 decoder that replaces every maximal ill-formed
 * subpart with one U+FFFD (the WHATWG algorithm that TextDecoder uses). */
typedef struct {
    uint32_t cp;
    uint8_t needed, seen, lower, upper;
    int at_start;     /* nothing emitted yet: the dummy-prefix space may be dropped */
    int drop_space;   /* addDummyPrefix */
} nd_utf8;

typedef struct {
    char *out;
    size_t cap, len; /* len counts every byte, also those beyond cap */
} nd_sink;

static void nd_sink_put(nd_sink *k, const char *s, size_t n) {
    for (size_t i = 0; i < n; i++, k->len++)
        if (k->len < k->cap) k->out[k->len] = s[i];
}

/* Emits one decoded code point: U+2581 reads as a space, and the first
 * character is dropped when it is a space and addDummyPrefix is set. */
static void nd_put_cp(nd_utf8 *u, nd_sink *k, uint32_t cp) {
    if (cp == 0x2581) cp = ' ';
    int first = u->at_start;
    u->at_start = 0;
    if (first && u->drop_space && cp == ' ') return;
    char buf[4];
    size_t n;
    if (cp < 0x80) buf[0] = (char)cp, n = 1;
    else if (cp < 0x800) buf[0] = (char)(0xC0 | cp >> 6), buf[1] = (char)(0x80 | (cp & 0x3F)), n = 2;
    else if (cp < 0x10000)
        buf[0] = (char)(0xE0 | cp >> 12), buf[1] = (char)(0x80 | (cp >> 6 & 0x3F)),
        buf[2] = (char)(0x80 | (cp & 0x3F)), n = 3;
    else
        buf[0] = (char)(0xF0 | cp >> 18), buf[1] = (char)(0x80 | (cp >> 12 & 0x3F)),
        buf[2] = (char)(0x80 | (cp >> 6 & 0x3F)), buf[3] = (char)(0x80 | (cp & 0x3F)), n = 4;
    nd_sink_put(k, buf, n);
}

static void nd_utf8_byte(nd_utf8 *u, nd_sink *k, uint8_t b) {
    if (u->needed) {
        if (b >= u->lower && b <= u->upper) {
            u->cp = u->cp << 6 | (b & 0x3F);
            u->lower = 0x80, u->upper = 0xBF;
            if (++u->seen == u->needed) { nd_put_cp(u, k, u->cp); u->needed = u->seen = 0; }
            return;
        }
        u->needed = u->seen = 0; /* the held prefix is one ill-formed subpart; b starts afresh */
        nd_put_cp(u, k, 0xFFFD);
    }
    u->lower = 0x80, u->upper = 0xBF;
    if (b < 0x80) nd_put_cp(u, k, b);
    else if (b >= 0xC2 && b <= 0xDF) u->needed = 1, u->cp = b & 0x1F;
    else if (b >= 0xE0 && b <= 0xEF) {
        u->needed = 2, u->cp = b & 0x0F;
        if (b == 0xE0) u->lower = 0xA0;
        if (b == 0xED) u->upper = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
        u->needed = 3, u->cp = b & 0x07;
        if (b == 0xF0) u->lower = 0x90;
        if (b == 0xF4) u->upper = 0x8F;
    } else nd_put_cp(u, k, 0xFFFD);
}

/* Feeds the bytes id stands for: a byte piece its byte, control and
 * unknown pieces nothing, others their surface. Ids out of range give nothing. */
static void nd_decode_id(const needle_tokenizer *tok, nd_utf8 *u, nd_sink *k, int32_t id) {
    if (id < 0 || (uint32_t)id >= tok->count) return;
    const nd_piece *p = &tok->pieces[id];
    if (p->type == ND_PIECE_CONTROL || p->type == ND_PIECE_UNKNOWN) return;
    if (p->type == ND_PIECE_BYTE) { nd_utf8_byte(u, k, (uint8_t)p->byte); return; }
    for (size_t i = 0; i < p->len; i++) nd_utf8_byte(u, k, (uint8_t)tok->text[p->offset + i]);
}

static void nd_utf8_finish(nd_utf8 *u, nd_sink *k) {
    if (u->needed) { u->needed = u->seen = 0; nd_put_cp(u, k, 0xFFFD); }
}

NEEDLE_API size_t needle_detokenize(const needle_tokenizer *tok, const int32_t *ids, size_t n, char *out,
                                    size_t cap) {
    if (!tok || (!ids && n)) return 0;
    nd_utf8 u = {0, 0, 0, 0x80, 0xBF, 1, tok->add_dummy_prefix};
    nd_sink k = {out, out ? cap : 0, 0};
    for (size_t i = 0; i < n; i++) nd_decode_id(tok, &u, &k, ids[i]);
    nd_utf8_finish(&u, &k);
    if (k.len < k.cap) k.out[k.len] = '\0'; /* a convenience when it fits */
    return k.len;
}

/* ---- Streaming decoder --------------------------------------------------- */

/* Text decoded but not yet handed out (the caller's cap was too small) waits
 * in `queue` and comes out first on the next push or flush. */
struct needle_decoder {
    const needle_tokenizer *tok;
    nd_utf8 utf8;
    char *queue;
    size_t queue_len, queue_cap;
};

NEEDLE_API needle_decoder *needle_decoder_new(const needle_tokenizer *tok) {
    if (!tok) return NULL;
    needle_decoder *dec = calloc(1, sizeof *dec);
    if (!dec) return NULL;
    dec->tok = tok;
    dec->utf8 = (nd_utf8){0, 0, 0, 0x80, 0xBF, 1, tok->add_dummy_prefix};
    dec->queue_cap = 3 * (tok->max_piece + 4);
    dec->queue = malloc(dec->queue_cap);
    if (!dec->queue) { free(dec); return NULL; }
    return dec;
}

NEEDLE_API void needle_decoder_free(needle_decoder *dec) {
    if (!dec) return;
    free(dec->queue);
    free(dec);
}

/* Moves as many whole characters of the queue as fit in out. */
static size_t nd_decoder_drain(needle_decoder *dec, char *out, size_t cap) {
    size_t n = dec->queue_len < cap ? dec->queue_len : cap;
    while (n > 0 && n < dec->queue_len && ((uint8_t)dec->queue[n] & 0xC0) == 0x80) n--;
    if (n) memcpy(out, dec->queue, n);
    memmove(dec->queue, dec->queue + n, dec->queue_len - n);
    dec->queue_len -= n;
    return n;
}

/* Makes room for `more` bytes in the queue; 0 when memory ran out. */
static int nd_decoder_reserve(needle_decoder *dec, size_t more) {
    if (more <= dec->queue_cap - dec->queue_len) return 1;
    if (dec->queue_len > SIZE_MAX / 2 - more) return 0;
    size_t cap = 2 * (dec->queue_len + more);
    char *q = realloc(dec->queue, cap);
    if (!q) return 0;
    dec->queue = q;
    dec->queue_cap = cap;
    return 1;
}

/* Writes at most cap bytes and never half a character; whatever does not fit
 * is kept and written first by the next push or flush. With cap at least
 * nd_tokenizer_max_piece + 8 (65543 covers any blob) nothing ever waits. If
 * memory runs out while the queue must grow, the text of `id` is lost. */
NEEDLE_API size_t needle_decoder_push(needle_decoder *dec, int32_t id, char *out, size_t cap) {
    if (!dec) return 0;
    if (!out) cap = 0;
    /* A piece gives at most len bytes, each at most 3 bytes of output, plus one U+FFFD. */
    if (nd_decoder_reserve(dec, 3 * (dec->tok->max_piece + 4))) {
        nd_sink k = {dec->queue + dec->queue_len, dec->queue_cap - dec->queue_len, 0};
        nd_decode_id(dec->tok, &dec->utf8, &k, id);
        dec->queue_len += k.len;
    }
    return nd_decoder_drain(dec, out, cap);
}

NEEDLE_API size_t needle_decoder_flush(needle_decoder *dec, char *out, size_t cap) {
    if (!dec) return 0;
    if (!out) cap = 0;
    if (nd_decoder_reserve(dec, 4)) {
        nd_sink k = {dec->queue + dec->queue_len, dec->queue_cap - dec->queue_len, 0};
        nd_utf8_finish(&dec->utf8, &k);
        dec->queue_len += k.len;
    }
    return nd_decoder_drain(dec, out, cap);
}
