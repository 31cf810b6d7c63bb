/* fuzz_tokenizer.c: libFuzzer target for the tokenizer. The input splits at
 * the first NUL: before it, a tokenizer blob to load (hostile bytes); after
 * it, text to encode with the blob when it loads, and with a fixed valid
 * blob always; the ids are decoded whole and streamed back. The fixed blob
 * also encodes the text as plain text (nd_tokenize_plain, flags from the
 * text's own bytes), which must write no marker where a flag is set. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "needle.h"
#include "format/tokenizer.h"

/* A valid blob: specials, one marker, the 256 byte pieces and a few merges. */
static needle_tokenizer *fixed_tokenizer(void) {
    static const char *const normal[] = {"\xe2\x96\x81", "a", "b", "ab", ("\xe2\x96\x81" "a"), "ba", "{\"", "\":"};
    uint8_t b[8192];
    size_t n = 5 + 256 + sizeof normal / sizeof normal[0], w = 24;
    uint32_t head[5] = {(uint32_t)n, 0, 1, 2, 3};
    memcpy(b, head, 20);
    b[20] = 1, b[21] = 1, b[22] = 0, b[23] = 0;
    for (size_t i = 0; i < n; i++) {
        char s[16];
        uint8_t type = i < 3 ? 2 : i == 3 ? 1 : i == 4 ? 3 : i < 261 ? 4 : 0;
        static const char *const special[] = {"<pad>", "</s>", "<s>", "<unk>", "<tool_call>"};
        if (i < 5) strcpy(s, special[i]);
        else if (i < 261) {
            static const char hex[] = "0123456789ABCDEF";
            memcpy(s, "<0x", 3), s[3] = hex[(i - 5) >> 4], s[4] = hex[(i - 5) & 15], s[5] = '>', s[6] = 0;
        } else strcpy(s, normal[i - 261]);
        float score = -(float)i;
        uint16_t len = (uint16_t)strlen(s);
        memcpy(b + w, &score, 4), w += 4;
        b[w++] = type;
        memcpy(b + w, &len, 2), w += 2;
        memcpy(b + w, s, len), w += len;
    }
    return needle_tokenizer_load(b, w, NULL);
}

static void round_trip(const needle_tokenizer *tok, const char *text, size_t len) {
    size_t count = 0, cap = len + 8;
    int32_t *ids = malloc(cap * sizeof *ids);
    if (!ids) return;
    if (needle_tokenize(tok, text, len, ids, cap, &count, NULL) == NEEDLE_OK && count <= cap) {
        size_t n = needle_detokenize(tok, ids, count, NULL, 0);
        char *out = malloc(n + 1);
        if (out) needle_detokenize(tok, ids, count, out, n + 1);
        free(out);
        needle_decoder *dec = needle_decoder_new(tok);
        char piece[8];
        for (size_t i = 0; dec && i < count; i++) needle_decoder_push(dec, ids[i], piece, sizeof piece);
        if (dec) needle_decoder_flush(dec, piece, sizeof piece);
        needle_decoder_free(dec);
    }
    free(ids);
}

/* Plain flags from the text's bytes (odd bytes plain): whatever the flags,
 * the marker (id 4, "<tool_call>") may only come from bytes that are all
 * markup, so with every byte plain it never appears. */
static void plain_encode(const needle_tokenizer *tok, const char *text, size_t len) {
    size_t count = 0, cap = len + 8;
    int32_t *ids = malloc(cap * sizeof *ids);
    uint8_t *plain = malloc(len + 1);
    if (ids && plain) {
        for (size_t i = 0; i < len; i++) plain[i] = (uint8_t)text[i] & 1;
        nd_tokenize_plain(tok, text, len, plain, ids, cap, &count, NULL);
        memset(plain, 1, len);
        if (nd_tokenize_plain(tok, text, len, plain, ids, cap, &count, NULL) == NEEDLE_OK)
            for (size_t i = 0; i < count && i < cap; i++)
                if (ids[i] == 4) abort();
    }
    free(ids);
    free(plain);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static needle_tokenizer *fixed;
    if (!fixed) fixed = fixed_tokenizer();
    const uint8_t *nul = memchr(data, 0, size);
    size_t blob_len = nul ? (size_t)(nul - data) : size;
    const char *text = nul ? (const char *)nul + 1 : "";
    size_t text_len = nul ? size - blob_len - 1 : 0;
    needle_tokenizer *tok = needle_tokenizer_load(data, blob_len, NULL);
    if (tok) round_trip(tok, text, text_len);
    needle_tokenizer_free(tok);
    if (fixed) round_trip(fixed, text, text_len);
    if (fixed) plain_encode(fixed, text, text_len);
    return 0;
}
