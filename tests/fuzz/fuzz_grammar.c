/* fuzz_grammar.c: libFuzzer target for the JSON parser, the schema compiler
 * and the matcher. The input splits at the first NUL: before it, tools JSON
 * to compile (and to compact); after it, bytes to drive the matcher with
 * (each must be accepted or rejected without harm), with a mask before
 * each: remembered masks must equal walked ones.
 * Build: clang -std=c11 -Isrc -fsanitize=fuzzer,address,undefined
 * (./build.sh fuzz builds every target in tests/fuzz). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grammar/grammar.h"
#include "needle.h"

/* A tokenizer blob with the 256 byte pieces and a few JSON pieces. */
static needle_tokenizer *fuzz_tokenizer(void) {
    static const char *const extra[] = {"{\"", "\":\"", "\",\"", "\"}", "[]", "name", "arguments", "1", "true"};
    size_t n = 5 + 256 + sizeof extra / sizeof extra[0], cap = 64 + n * 32, w = 0;
    uint8_t *b = malloc(cap);
    if (!b) return NULL;
    uint32_t head[5] = {(uint32_t)n, 0, 1, 2, 3};
    memcpy(b, head, 20), w = 20;
    b[w++] = 1, b[w++] = 1, b[w++] = 0, b[w++] = 0;
    for (size_t i = 0; i < n; i++) {
        char s[16];
        uint8_t type = i < 3 ? 2 : i == 3 ? 1 : i == 4 ? 3 : i < 261 ? 4 : 0;
        if (i < 4) snprintf(s, sizeof s, "<c%zu>", i);
        else if (i == 4) strcpy(s, "</tool_call>");
        else if (i < 261) snprintf(s, sizeof s, "<0x%02X>", (unsigned)(i - 5));
        else strcpy(s, extra[i - 261]);
        float score = 0;
        uint16_t len = (uint16_t)strlen(s);
        memcpy(b + w, &score, 4), w += 4;
        b[w++] = type;
        memcpy(b + w, &len, 2), w += 2;
        memcpy(b + w, s, len), w += len;
    }
    needle_error e; needle_tokenizer *tok = needle_tokenizer_load(b, w, &e); if (!tok) fprintf(stderr, "%s\n", e.message);
    free(b);
    return tok;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    static needle_tokenizer *tok;
    static needle_vocab *vocab;
    if (!tok) tok = fuzz_tokenizer(), vocab = tok ? needle_vocab_new(tok, NULL) : NULL;
    if (!vocab) return 0;
    const uint8_t *nul = memchr(data, 0, size);
    size_t tl = nul ? (size_t)(nul - data) : size;
    needle_error err;
    char out[512];
    needle_json_compact((const char *)data, tl, out, sizeof out, &err);
    needle_grammar *g = needle_grammar_new_shared(vocab, (const char *)data, tl, 4, &err);
    if (!g) return 0;
    /* Masks after every byte fed, twice over: the second pass meets the same
     * states, so its masks are remembered ones; each must equal the walk. */
    for (int pass = 0; pass < 2; pass++) {
        needle_grammar_reset(g);
        for (size_t i = tl + 1; i < size; i++) {
            float logits[300] = {0}, walked[300] = {0};
            uint32_t n = needle_grammar_mask(g, logits);
            if (nd_grammar_mask_walked(g, walked) != n || memcmp(logits, walked, sizeof logits)) __builtin_trap();
            nd_grammar_feed(g, (const char *)data + i, 1, &err);
        }
    }
    needle_grammar_free(g);
    return 0;
}
