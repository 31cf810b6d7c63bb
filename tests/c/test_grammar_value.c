/* test_grammar_value.c: where the call stands relative to an argument value
 * (grammar_value.c), which Needle 3's decoding at a value's start reads
 * (agent/value_search.h): a value's start and its kind, the string options
 * right after a literal's opening quote, a closed value; and how the
 * engine decides that the conversation names an option (value_search.c).
 * Texts are fed byte by byte (nd_grammar_feed); the vocabulary is the 256
 * byte pieces. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "agent/value_search.h"
#include "check.h"
#include "grammar/grammar.h"
#include "needle.h"
#include "random_vocab.h"

enum { END_ID = 4 };

static needle_tokenizer *tok;
static needle_vocab *vocab;

static needle_tokenizer *byte_tokenizer(void) {
    rv_buf b = {0};
    rv_head(&b, 5 + 256);
    needle_error err;
    needle_tokenizer *t = needle_tokenizer_load(b.p, b.n, &err);
    free(b.p);
    return t;
}

static const char TOOLS[] =
    "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"mode\":{\"enum\":[\"eco\",\"boost\",\"living_room\"]},"
    "\"on\":{\"type\":\"boolean\"},"
    "\"level\":{\"type\":\"integer\"},"
    "\"note\":{\"type\":\"string\"},"
    "\"order_id\":{\"type\":\"string\"},"
    "\"either\":{\"enum\":[\"x\",1]},"
    "\"mixed\":{\"anyOf\":[{\"enum\":[\"a\",\"b\"]},{\"type\":\"string\"}]},"
    "\"room\":{\"type\":\"string\",\"description\":\"The room, one of: 'hall', 'attic'\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"}},"
    "\"modes\":{\"type\":\"array\",\"uniqueItems\":true,\"items\":{\"enum\":[\"eco\",\"boost\"]}}}}}]";
#define ARGS "[{\"name\":\"t\",\"arguments\":"

/* A grammar of TOOLS (Needle 3's rules, grounded in "order A-1") fed text. */
static needle_grammar *fed(const char *text) {
    needle_error err;
    needle_grammar *g = nd_grammar_new_calls(vocab, TOOLS, strlen(TOOLS), END_ID, 0, ND_GRAMMAR_NEEDLE3, &err);
    if (!g) { printf("  compile failed: %s\n", err.message); return NULL; }
    nd_grammar_set_context(g, "order A-1", 9);
    if (nd_grammar_feed(g, text, strlen(text), &err)) {
        printf("  %s: %s\n", text, err.message);
        needle_grammar_free(g);
        return NULL;
    }
    return g;
}

static unsigned start_of(const char *text) {
    needle_grammar *g = fed(text);
    unsigned v = g ? nd_grammar_value_start(g) : 99;
    needle_grammar_free(g);
    return v;
}

static void test_value_starts(void) {
    const unsigned S = ND_VALUE_START, O = ND_VALUE_OPTIONS, G = ND_VALUE_GROUNDED;
    static const struct { const char *text; unsigned want; } cases[] = {
        {"[", 0}, {"[{\"name\":", 0}, {ARGS, 0}, {ARGS "{", 0}, {ARGS "{\"mode\"", 0},
        {ARGS "{\"mode\":", S | O}, {ARGS "{\"modes\":[", S | O}, {ARGS "{\"modes\":[\"eco\",", S | O},
        {ARGS "{\"room\":", S | O}, /* options mined from the description */
        {ARGS "{\"on\":", S}, {ARGS "{\"level\":", S}, {ARGS "{\"note\":", S}, {ARGS "{\"either\":", S | O},
        {ARGS "{\"mixed\":", S}, {ARGS "{\"tags\":", S}, {ARGS "{\"tags\":[", S}, {ARGS "{\"tags\":[\"a\",", S},
        {ARGS "{\"order_id\":", S | G}, {ARGS "{\"level\":5,\"order_id\":", S | G},
        {ARGS "{\"mode\":\"", 0}, {ARGS "{\"level\":5", 0}, {ARGS "{\"level\":5,", 0}, {ARGS "{\"tags\":[\"a\"", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        unsigned got = start_of(cases[i].text);
        CHECK(got == cases[i].want, "%s: flags %u, want %u", cases[i].text, got, cases[i].want);
    }
}

static void test_closed(void) {
    static const struct { const char *text; int want; } cases[] = {
        {ARGS "{\"mode\":\"eco\"", 1}, {ARGS "{\"mode\":\"eco", 0}, {ARGS "{\"note\":\"a,b\"", 1},
        {ARGS "{\"note\":\"a\\\"", 0}, {ARGS "{\"level\":5", 0}, {ARGS "{\"level\":5,", 0}, /* a number closes at "}" */
        {ARGS "{\"level\":5}", 1}, {ARGS "{\"on\":tru", 0}, {ARGS "{\"on\":true", 1}, {ARGS "{\"on\":true}", 1},
        {ARGS "{\"either\":1", 0}, {ARGS "{\"either\":\"x\"", 1}, {ARGS "{\"modes\":[\"eco\"", 0}, {ARGS "{\"tags\":[\"a\"", 0},
        {ARGS "{\"tags\":[\"a\"]", 1}, {ARGS "{\"mode\":", 0}, {ARGS "{}", 1}, {ARGS "{}}]", 1},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        needle_grammar *g = fed(cases[i].text);
        int got = g ? nd_grammar_value_closed(g) : -1;
        CHECK(got == cases[i].want, "%s: closed %d, want %d", cases[i].text, got, cases[i].want);
        needle_grammar_free(g);
    }
}

/* The options after text, joined by '|' (each without its closing quote). */
static void options_of(const char *text, char *out, size_t cap) {
    needle_grammar *g = fed(text);
    const char *t[8];
    size_t l[8];
    uint32_t n = g ? nd_grammar_open_options(g, t, l, 8) : 0;
    out[0] = 0;
    for (uint32_t i = 0; i < n; i++) {
        if (l[i] < 1 || t[i][l[i] - 1] != '"') { snprintf(out, cap, "option %u does not end with a quote", i); break; }
        snprintf(out + strlen(out), cap - strlen(out), "%s%.*s", i ? "|" : "", (int)l[i] - 1, t[i]);
    }
    needle_grammar_free(g);
}

static void test_open_options(void) {
    static const struct { const char *text, *want; } cases[] = {
        {ARGS "{\"mode\":\"", "boost|eco|living_room"}, /* the grammar holds them sorted */
        {ARGS "{\"room\":\"", "attic|hall"},
        {ARGS "{\"modes\":[\"eco\",\"", "boost"}, /* a unique array's used option is gone */
        {ARGS "{\"mode\":", ""}, {ARGS "{\"mode\":\"b", ""}, {ARGS "{\"note\":\"", ""}, {ARGS "{\"mixed\":\"", ""},
        {ARGS "{\"mode\":\"eco\"", ""}, {ARGS "{\"either\":\"", "x"},
    };
    char got[256];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        options_of(cases[i].text, got, sizeof got);
        CHECK(!strcmp(got, cases[i].want), "%s: options '%s', want '%s'", cases[i].text, got, cases[i].want);
    }
}

static void test_option_named(void) {
    static const struct { const char *conversation, *option; int want; } cases[] = {
        {"turn on the Living-Room lights", "living_room", 1},
        {"livingroom lights", "living_room", 0},
        {"go eco mode", "eco", 1},
        {"economy please", "eco", 0},            /* under 5 bytes: a whole word */
        {"ECO!", "eco", 1},
        {"boosted heating", "boost", 1},          /* 5 bytes or more: anywhere */
        {"caf\xc3\xa9 eco", "eco", 1},            /* non-ASCII bytes separate words */
        {"\xc3\xa9" "eco\xc3\xa9", "eco", 1},
        {"set it to 10", "10", 1},
        {"set it to 100", "10", 0},
        {"anything", "", 0}, {"anything", "--", 0},
        {"", "eco", 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *c = cases[i].conversation, *o = cases[i].option;
        int got = nd_option_named(c, strlen(c), o, strlen(o));
        CHECK(got == cases[i].want, "'%s' names '%s': %d, want %d", c, o, got, cases[i].want);
    }
}

int main(void) {
    needle_error err;
    tok = byte_tokenizer();
    vocab = tok ? needle_vocab_new(tok, &err) : NULL;
    if (!vocab) { printf("no vocabulary\n"); return 1; }
    RUN(test_value_starts);
    RUN(test_closed);
    RUN(test_open_options);
    RUN(test_option_named);
    needle_vocab_free(vocab);
    needle_tokenizer_free(tok);
    return check_report();
}
