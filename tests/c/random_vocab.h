/* random_vocab.h: test tokenizer blobs for the grammar tests (test_grammar.c,
 * test_grammar_v3.c, test_grammar_value.c): a writer of pieces and of the
 * pieces every such blob starts with, and for mask timings a large
 * tokenizer (the four specials, </tool_call> at id 4, the 256 byte pieces,
 * then distinct random pieces of 1-8 characters drawn from letters, digits
 * and JSON punctuation, up to n pieces) with a comparison to sort timings. */
#ifndef TEST_RANDOM_VOCAB_H
#define TEST_RANDOM_VOCAB_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "needle.h"

typedef struct { uint8_t *p; size_t n, cap; } rv_buf;

static inline void rv_put(rv_buf *b, const void *s, size_t n) {
    if (b->n + n > b->cap) { b->cap = (b->n + n) * 2; b->p = realloc(b->p, b->cap); }
    memcpy(b->p + b->n, s, n), b->n += n;
}

static inline void rv_piece(rv_buf *b, const char *s, int type) {
    float score = -1.0f;
    uint8_t t = (uint8_t)type;
    uint16_t len = (uint16_t)strlen(s);
    rv_put(b, &score, 4), rv_put(b, &t, 1), rv_put(b, &len, 2), rv_put(b, s, len);
}

/* A tokenizer blob of n pieces starts: its header, the four specials,
 * </tool_call> at id 4 and the 256 byte pieces (ids 5-260). */
static inline void rv_head(rv_buf *b, uint32_t n) {
    uint32_t head[5] = {n, 0, 1, 2, 3};
    uint8_t flags[4] = {1, 1, 0, 0};
    rv_put(b, head, sizeof head), rv_put(b, flags, 4);
    rv_piece(b, "<pad>", 2), rv_piece(b, "</s>", 2), rv_piece(b, "<s>", 2), rv_piece(b, "<unk>", 1);
    rv_piece(b, "</tool_call>", 3);
    for (int i = 0; i < 256; i++) { char s[8]; snprintf(s, sizeof s, "<0x%02X>", i); rv_piece(b, s, 4); }
}

static inline int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static inline needle_tokenizer *random_tokenizer(uint32_t n, uint64_t seed, needle_error *err) {
    static const char alpha[] = "abcdefghijklmnopqrstuvwxyz0123456789\"{}[]:,_- .";
    static char seen[16384][12]; /* open addressing: surfaces must be distinct */
    rv_buf b = {0};
    rv_head(&b, n);
    memset(seen, 0, sizeof seen);
    for (uint32_t i = 261; i < n;) {
        char s[12] = {0};
#define RV_NEXT() (uint32_t)((seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33)
        int len = 1 + (int)(RV_NEXT() % 8);
        for (int k = 0; k < len; k++) s[k] = alpha[RV_NEXT() % (sizeof alpha - 1)];
#undef RV_NEXT
        uint32_t h = 2166136261u;
        for (int k = 0; k < len; k++) h = (h ^ (uint8_t)s[k]) * 16777619u;
        while (seen[h % 16384][0] && strcmp(seen[h % 16384], s)) h++;
        if (seen[h % 16384][0]) continue;
        strcpy(seen[h % 16384], s);
        rv_piece(&b, s, 0);
        i++;
    }
    needle_tokenizer *tok = needle_tokenizer_load(b.p, b.n, err);
    free(b.p);
    return tok;
}
#endif
