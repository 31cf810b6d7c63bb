/* test_grammar_v3.c: the makers' Needle 3 engine's grammar additions
 * (ND_GRAMMAR_NEEDLE3; grammar_v3_rules.c, grammar_ground.c): the ranges a
 * number property's name implies, enums mined from descriptions, and values
 * grounded in the conversation, checked byte by byte (nd_grammar_feed),
 * token by token (the mask, remembered and walked), across a change of
 * context, through the completion, and in random walks. A grammar without
 * the flag (Needle 2) must accept what it accepted before on the same
 * schemas. The test tokenizer is built as test_grammar.c builds its own. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "format/json.h"
#include "grammar/grammar.h"
#include "needle.h"
#include "platform.h"
#include "random_vocab.h"

/* ---- a test tokenizer: 5 specials, the 256 byte pieces, these pieces ---- */
static const char *const extra[] = {"{\"", "\":\"", "\",\"", "\"}", "\"}}]", "\":", ",\"", "name", "arguments",
    "\":{\"", "}}", "}]", "[{\"", "\"name\":\"", "\"arguments\":{", "order_id", "user_id", "AB", "-7", "77", "78",
    "AB-78", "CD", "12", "45", "21", "caf", "\u00e9", "caf\u00e9", "\\n", "\\u00", "heat", "cool", "auto", "dry",
    "100", "101", "10", "-1", "5", "0", "true", "null", "\u2581", "\"]", "[\"", "\":[\"", ".5", "ab", "x"};
enum { N_EXTRA = sizeof extra / sizeof extra[0], END_ID = 4 }; /* id 4 = </tool_call> */

static needle_tokenizer *tok;
static needle_vocab *vocab;

static needle_tokenizer *test_tokenizer(void) {
    rv_buf b = {0};
    rv_head(&b, 5 + 256 + N_EXTRA);
    for (int i = 0; i < N_EXTRA; i++) rv_piece(&b, extra[i], 0);
    needle_error err;
    needle_tokenizer *t = needle_tokenizer_load(b.p, b.n, &err);
    if (!t) printf("tokenizer: %s\n", err.message);
    free(b.p);
    return t;
}

/* The id of a piece of the list, or of a one-byte piece. */
static int32_t tok_id(const char *s) {
    for (int i = 0; i < N_EXTRA; i++)
        if (!strcmp(extra[i], s)) return 5 + 256 + i;
    return strlen(s) == 1 ? 5 + (uint8_t)s[0] : -1;
}

/* ---- helpers ---- */
#define V3 ND_GRAMMAR_NEEDLE3
#define N2 ND_GRAMMAR_ASCII
#define ONE(props, req) "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":" props ",\"required\":" req "}}]"
#define CALL(args) "[{\"name\":\"t\",\"arguments\":" args "}]"
#define ARGS "[{\"name\":\"t\",\"arguments\":"

static needle_grammar *grammar(const char *tools, unsigned flags, const char *ctx) {
    needle_error err;
    needle_grammar *g = nd_grammar_new_calls(vocab, tools, strlen(tools), END_ID, 0, flags, &err);
    if (!g) printf("  compile failed: %s\n", err.message);
    else if (ctx) nd_grammar_set_context(g, ctx, strlen(ctx));
    return g;
}

/* Feeds text one byte at a time: -1 when all of it is taken (and, ending
 * in ']', completes the array), else the offset of the byte refused. */
static long refused_at(const char *tools, unsigned flags, const char *ctx, const char *text) {
    needle_grammar *g = grammar(tools, flags, ctx);
    if (!g) return -2;
    needle_error err;
    long at = -1;
    size_t n = strlen(text);
    for (size_t i = 0; i < n && at < 0; i++)
        if (nd_grammar_feed(g, text + i, 1, &err) != NEEDLE_OK) at = (long)i;
    if (at < 0 && n && text[n - 1] == ']' && !nd_grammar_complete(g)) at = (long)n;
    needle_grammar_free(g);
    return at;
}
static int takes(const char *tools, unsigned flags, const char *ctx, const char *text) {
    return refused_at(tools, flags, ctx, text) == -1;
}

/* The mask after prefix: allowed[i] for each token; the remembered mask
 * must equal the walked one. Returns the number allowed (-1 on an error). */
static long mask_after(needle_grammar *g, const char *prefix, float *logits) {
    uint32_t V = needle_tokenizer_size(tok);
    float *walked = malloc(V * sizeof *walked);
    needle_error err;
    needle_grammar_reset(g);
    long n = -1;
    if (!*prefix || nd_grammar_feed(g, prefix, strlen(prefix), &err) == NEEDLE_OK) {
        for (uint32_t i = 0; i < V; i++) logits[i] = walked[i] = 0;
        n = needle_grammar_mask(g, logits);
        if (nd_grammar_mask_walked(g, walked) != (uint32_t)n || memcmp(walked, logits, V * sizeof *logits)) n = -1;
    }
    free(walked);
    return n;
}
static int allowed(const float *logits, const char *piece) { return logits[tok_id(piece)] == 0; }

/* The completion after prefix into out (it must complete the array). */
static int completion(const char *tools, unsigned flags, const char *ctx, const char *prefix, char *out, size_t cap) {
    needle_grammar *g = grammar(tools, flags, ctx);
    needle_error err;
    int ok = g && (!*prefix || nd_grammar_feed(g, prefix, strlen(prefix), &err) == NEEDLE_OK);
    size_t n = ok ? needle_grammar_completion(g, out, cap) : SIZE_MAX;
    ok = ok && n < cap && (n == 0 || nd_grammar_feed(g, out, n, &err) == NEEDLE_OK) && nd_grammar_complete(g);
    needle_grammar_free(g);
    return ok;
}
#define EXPECT(tools, ctx, prefix, want) do { char got[256] = ""; \
    CHECK(completion(tools, V3, ctx, prefix, got, sizeof got) && !strcmp(got, want), "after %s: got %s, want %s", prefix, got, want); } while (0)

/* ---- implied ranges ---- */
#define NUM(name, type) ONE("{\"" name "\":{\"type\":\"" type "\"}}", "[\"" name "\"]")
#define VAL(name, v) CALL("{\"" name "\":" v "}")

static void test_implied_ranges(void) {
    static const char *const percent[] = {"level", "volume", "brightness_level", "volume_level", "light_level",
                                          "dim_level", "fan_level", "power_level", "screen_brightness", "brightness",
                                          "battery_percent", "percentage"};
    for (size_t i = 0; i < sizeof percent / sizeof *percent; i++) {
        char tools[256], lo[64], hi[64], over[64], under[64];
        snprintf(tools, sizeof tools, ONE("{\"%s\":{\"type\":\"integer\"}}", "[\"%s\"]"), percent[i], percent[i]);
        snprintf(lo, sizeof lo, VAL("%s", "0"), percent[i]);
        snprintf(hi, sizeof hi, VAL("%s", "100"), percent[i]);
        snprintf(over, sizeof over, VAL("%s", "101"), percent[i]);
        snprintf(under, sizeof under, VAL("%s", "-1"), percent[i]);
        CHECK(takes(tools, V3, NULL, lo) && takes(tools, V3, NULL, hi), "%s: 0 and 100", percent[i]);
        CHECK(!takes(tools, V3, NULL, over) && !takes(tools, V3, NULL, under), "%s: 101 and -1 refused", percent[i]);
        CHECK(takes(tools, N2, NULL, over) && takes(tools, N2, NULL, under), "%s: Needle 2 unbounded", percent[i]);
        CHECK(takes(tools, 0, NULL, over), "%s: flags 0 unbounded", percent[i]);
    }
    CHECK(takes(NUM("volume", "number"), V3, NULL, VAL("volume", "99.5")), "a number range keeps fractions");
    CHECK(!takes(NUM("volume", "number"), V3, NULL, VAL("volume", "100.5")), "volume 100.5");
    CHECK(takes(NUM("rating", "number"), V3, NULL, VAL("rating", "1")) && takes(NUM("rating", "number"), V3, NULL, VAL("rating", "5")), "rating 1..5");
    CHECK(!takes(NUM("rating", "number"), V3, NULL, VAL("rating", "0.5")) && !takes(NUM("rating", "integer"), V3, NULL, VAL("rating", "6")), "rating outside");
    static const char *const nonneg[] = {"minutes", "wait_seconds", "hours", "duration_ms", "retry_count", "account_count"};
    for (size_t i = 0; i < sizeof nonneg / sizeof *nonneg; i++) {
        char tools[256], big[64], neg[64];
        snprintf(tools, sizeof tools, ONE("{\"%s\":{\"type\":\"integer\"}}", "[\"%s\"]"), nonneg[i], nonneg[i]);
        snprintf(big, sizeof big, VAL("%s", "100000"), nonneg[i]);
        snprintf(neg, sizeof neg, VAL("%s", "-1"), nonneg[i]);
        CHECK(takes(tools, V3, NULL, big) && !takes(tools, V3, NULL, neg), "%s: a minimum of 0 only", nonneg[i]);
        CHECK(takes(tools, N2, NULL, neg), "%s: Needle 2 takes -1", nonneg[i]);
    }
    /* whole names are whole, and case counts */
    static const char *const free_names[] = {"Level", "levels", "my_level", "volume_max", "user_rating", "Rating", "Brightness"};
    for (size_t i = 0; i < sizeof free_names / sizeof *free_names; i++) {
        char tools[256], big[64];
        snprintf(tools, sizeof tools, ONE("{\"%s\":{\"type\":\"integer\"}}", "[\"%s\"]"), free_names[i], free_names[i]);
        snprintf(big, sizeof big, VAL("%s", "-1000"), free_names[i]);
        CHECK(takes(tools, V3, NULL, big), "%s gets no range", free_names[i]);
    }
    /* the schema's own bounds stay: any bound of either draft */
    const char *own = ONE("{\"level\":{\"type\":\"integer\",\"minimum\":10,\"maximum\":20}}", "[\"level\"]");
    CHECK(takes(own, V3, NULL, VAL("level", "15")) && !takes(own, V3, NULL, VAL("level", "5")), "own [10, 20]");
    const char *max = ONE("{\"level\":{\"type\":\"integer\",\"maximum\":500}}", "[\"level\"]");
    CHECK(takes(max, V3, NULL, VAL("level", "300")) && takes(max, V3, NULL, VAL("level", "-5")), "a maximum alone: no implied minimum");
    const char *xmin = ONE("{\"volume\":{\"type\":\"number\",\"exclusiveMinimum\":-50}}", "[\"volume\"]");
    CHECK(takes(xmin, V3, NULL, VAL("volume", "-20")) && takes(xmin, V3, NULL, VAL("volume", "1000")), "an exclusive bound is a bound");
    const char *draft4 = ONE("{\"volume\":{\"type\":\"number\",\"exclusiveMinimum\":true}}", "[\"volume\"]");
    CHECK(takes(draft4, V3, NULL, VAL("volume", "0")) && !takes(draft4, V3, NULL, VAL("volume", "101")), "a lone draft-4 flag: inclusive [0, 100]");
    /* only a plain "type": not in anyOf branches or type lists, not for enums */
    const char *any = ONE("{\"level\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"null\"}]}}", "[\"level\"]");
    CHECK(takes(any, V3, NULL, VAL("level", "1000")), "anyOf: no range");
    const char *list = ONE("{\"level\":{\"type\":[\"integer\",\"null\"]}}", "[\"level\"]");
    CHECK(takes(list, V3, NULL, VAL("level", "1000")), "type list: no range");
    const char *en = ONE("{\"level\":{\"enum\":[200,300]}}", "[\"level\"]");
    CHECK(takes(en, V3, NULL, VAL("level", "300")), "an enum is the enum");
    /* a $ref keeps the property's name; multipleOf leaving nothing drops the range */
    const char *ref = "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"$defs\":{\"P\":{\"type\":\"integer\"}},"
                      "\"properties\":{\"level\":{\"$ref\":\"#/$defs/P\"}},\"required\":[\"level\"]}}]";
    CHECK(!takes(ref, V3, NULL, VAL("level", "101")), "through $ref");
    const char *mult = ONE("{\"rating\":{\"type\":\"integer\",\"multipleOf\":10}}", "[\"rating\"]");
    CHECK(takes(mult, V3, NULL, VAL("rating", "10")) && !takes(mult, V3, NULL, VAL("rating", "5")), "no multiple of 10 in [1, 5]: the schema's own");
    const char *mult7 = ONE("{\"level\":{\"type\":\"integer\",\"multipleOf\":7}}", "[\"level\"]");
    CHECK(takes(mult7, V3, NULL, VAL("level", "98")) && !takes(mult7, V3, NULL, VAL("level", "105")), "multipleOf within the range");
    EXPECT(NUM("rating", "integer"), NULL, ARGS "{\"rating\":", "1}}]");
}

/* ---- grounded values ---- */
static const char *const order_tools =
    "[{\"name\":\"get\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"order_id\":{\"type\":\"string\"},\"id\":{\"type\":\"string\"},\"user_id\":{\"type\":\"integer\"},"
    "\"note\":{\"type\":\"string\",\"grounded\":true},\"text\":{\"type\":\"string\"},\"_id\":{\"type\":\"string\"},"
    "\"code_id\":{\"type\":\"string\",\"pattern\":\"^[A-Z]+$\"},\"kind_id\":{\"enum\":[\"zz\",\"yy\"]},"
    "\"short_id\":{\"type\":\"string\",\"maxLength\":3}}}}]";
#define GET(args) "[{\"name\":\"get\",\"arguments\":" args "}]"
#define GETP "[{\"name\":\"get\",\"arguments\":"
static const char *const ctx = "track order AB-77 please, user 4521 \"q\" caf\xc3\xa9\nend";

static void test_grounded_bytes(void) {
    CHECK(takes(order_tools, V3, ctx, GET("{\"order_id\":\"AB-77\"}")), "a substring");
    long at = refused_at(order_tools, V3, ctx, GET("{\"order_id\":\"AB-78\"}"));
    CHECK(at == (long)strlen(GETP "{\"order_id\":\"AB-7"), "refused at the byte that leaves the context: %ld", at);
    CHECK(takes(order_tools, V3, ctx, GET("{\"order_id\":\"\"}")), "the empty string");
    CHECK(takes(order_tools, V3, ctx, GET("{\"order_id\":\"77 please\"}")), "spaces and all");
    CHECK(!takes(order_tools, V3, ctx, GET("{\"order_id\":\"ab\"}")) && !takes(order_tools, V3, ctx, GET("{\"id\":\"Track\"}")), "case counts");
    CHECK(takes(order_tools, V3, ctx, GET("{\"id\":\"order\",\"note\":\"please\"}")), "id and grounded: true");
    CHECK(!takes(order_tools, V3, ctx, GET("{\"id\":\"orderx\"}")) && !takes(order_tools, V3, ctx, GET("{\"note\":\"xyz\"}")), "id and note grounded");
    CHECK(takes(order_tools, V3, ctx, GET("{\"text\":\"xyz\",\"_id\":\"xyz\"}")), "other names and a bare _id are free");
    CHECK(takes(order_tools, V3, ctx, GET("{\"code_id\":\"XYZ\"}")), "a patterned id keeps its schema, ungrounded");
    CHECK(takes(order_tools, V3, ctx, GET("{\"kind_id\":\"zz\"}")), "an enum wins over grounding");
    CHECK(takes(order_tools, V3, ctx, GET("{\"short_id\":\"AB-\"}")) && !takes(order_tools, V3, ctx, GET("{\"short_id\":\"AB-7\"}")) &&
          !takes(order_tools, V3, ctx, GET("{\"short_id\":\"ABC\"}")), "maxLength and grounding together");
    /* escapes decode before the check; \\u cannot be checked early and is refused */
    CHECK(takes(order_tools, V3, ctx, GET("{\"note\":\"\\\"q\\\" caf\xc3\xa9\\nend\"}")), "short escapes and raw UTF-8");
    CHECK(!takes(order_tools, V3, ctx, GET("{\"note\":\"caf\\u00e9\"}")), "\\u refused");
    CHECK(!takes(order_tools, V3, ctx, GET("{\"note\":\"\\t\"}")), "an escape the context lacks");
    /* numbers */
    CHECK(takes(order_tools, V3, ctx, GET("{\"user_id\":4521}")) && takes(order_tools, V3, ctx, GET("{\"user_id\":45}")), "numbers in the context");
    CHECK(takes(order_tools, V3, ctx, GET("{\"user_id\":-77}")), "a sign the context holds");
    CHECK(!takes(order_tools, V3, ctx, GET("{\"user_id\":4522}")) && !takes(order_tools, V3, ctx, GET("{\"user_id\":9}")), "numbers not in it");
    /* no context, or no flag: nothing is grounded */
    CHECK(takes(order_tools, V3, NULL, GET("{\"order_id\":\"AB-78\",\"user_id\":9}")), "no context");
    CHECK(takes(order_tools, V3, "", GET("{\"order_id\":\"AB-78\",\"user_id\":9}")), "an empty context");
    CHECK(takes(order_tools, N2, ctx, GET("{\"order_id\":\"AB-78\",\"user_id\":9,\"note\":\"\\u0061\"}")), "Needle 2 ignores the context");
    /* a character is taken only where the context holds it whole */
    const char *bad = "ab\xc3(cd \xe2\x82";
    CHECK(takes(order_tools, V3, bad, GET("{\"id\":\"ab\"}")) && !takes(order_tools, V3, bad, GET("{\"id\":\"ab\xc3")), "a lone lead byte");
    CHECK(!takes(order_tools, V3, bad, GET("{\"id\":\"cd \xe2")), "a cut character");
}

static void test_grounded_numbers_need_the_context(void) {
    const char *none = "no digits here";
    long at = refused_at(order_tools, V3, none, GET("{\"user_id\":1}"));
    CHECK(at == (long)strlen(GETP "{\""), "an optional number id is closed: %ld", at);
    CHECK(takes(order_tools, V3, none, GET("{\"order_id\":\"digits\"}")), "strings still grounded");
    const char *req = "[{\"name\":\"get\",\"parameters\":{\"type\":\"object\",\"properties\":{\"user_id\":{\"type\":\"integer\"}},\"required\":[\"user_id\"]}}]";
    CHECK(takes(req, V3, none, GET("{\"user_id\":9}")), "a required one is written unchecked");
    char got[128];
    CHECK(completion(req, V3, none, GETP "{", got, sizeof got) && !strcmp(got, "\"user_id\":0}}]"), "%s", got);
    const char *bounded = "[{\"name\":\"get\",\"parameters\":{\"type\":\"object\",\"properties\":{\"user_id\":{\"type\":\"integer\",\"minimum\":100}}}}]";
    CHECK(takes(bounded, V3, "ids 7 and 4521", GET("{\"user_id\":4521}")), "a bounded id in the context");
    CHECK(takes(bounded, V3, "ids 7 and 4521", GETP "{\"user_id\":45"), "45 leads on to 4521: the prefix is fine");
    CHECK(refused_at(bounded, V3, "ids 7 and 4521", GET("{\"user_id\":7}")) == (long)strlen(GETP "{\"user_id\":"), "7 runs to no value >= 100");
    CHECK(refused_at(bounded, V3, "ids 7 and 45", GET("{\"user_id\":1}")) == (long)strlen(GETP "{"), "no value >= 100: the key is closed");
    const char *alt = "[{\"name\":\"get\",\"parameters\":{\"type\":\"object\",\"properties\":{\"item_id\":{\"anyOf\":[{\"type\":\"integer\"},{\"type\":\"string\"}]}}}}]";
    CHECK(takes(alt, V3, none, GET("{\"item_id\":\"no\"}")) && !takes(alt, V3, none, GET("{\"item_id\":1")), "anyOf: the string branch stays");
    CHECK(takes(alt, V3, ctx, GET("{\"item_id\":45}")) && !takes(alt, V3, ctx, GET("{\"item_id\":46}")), "anyOf: the number branch grounded");
}

static void test_grounded_tokens(void) {
    uint32_t V = needle_tokenizer_size(tok);
    float *l = malloc(V * sizeof *l);
    needle_grammar *g = grammar(order_tools, V3, ctx);
    CHECK(mask_after(g, GETP "{\"order_id\":\"", l) > 0, "mask");
    CHECK(allowed(l, "AB") && allowed(l, "-7") && allowed(l, "77") && allowed(l, "caf\u00e9") && allowed(l, "\\n") &&
          allowed(l, "\"") && allowed(l, "\"}"), "pieces the context holds");
    CHECK(!allowed(l, "AB-78") && !allowed(l, "78") && !allowed(l, "ab") && !allowed(l, "x") && !allowed(l, "\\u00") &&
          !allowed(l, "heat"), "pieces it does not");
    CHECK(mask_after(g, GETP "{\"order_id\":\"AB", l) > 0 && allowed(l, "-7") && !allowed(l, "AB") && !allowed(l, "78"), "after AB");
    CHECK(mask_after(g, GETP "{\"order_id\":\"caf\xc3", l) > 0 && allowed(l, "\xa9") && !allowed(l, "\xa8"), "the rest of a character");
    CHECK(mask_after(g, GETP "{\"user_id\":", l) > 0 && allowed(l, "45") && allowed(l, "21") && allowed(l, "-7") &&
          allowed(l, "77") && allowed(l, "5"), "numbers the context holds");
    CHECK(!allowed(l, "12") && !allowed(l, "100") && !allowed(l, "0") && !allowed(l, "-1"), "numbers it does not");
    CHECK(mask_after(g, GETP "{\"user_id\":45", l) > 0 && allowed(l, "21") && allowed(l, "}}") && !allowed(l, "12"), "after 45");
    CHECK(mask_after(g, GETP "{\"text\":\"", l) > 0 && allowed(l, "heat") && allowed(l, "AB-78"), "a free string");
    needle_grammar_free(g);
    free(l);
}

/* Masks remembered under one context are never served under another; a
 * state whose masks do not read the context keeps them across contexts. */
static void test_context_change(void) {
    const char *tools = "[{\"name\":\"find\",\"parameters\":{\"type\":\"object\",\"properties\":{"
                        "\"order_id\":{\"type\":\"string\"},\"text\":{\"type\":\"string\"}}}}]";
    const char *at = "[{\"name\":\"find\",\"arguments\":{\"order_id\":\"";
    const char *in_text = "[{\"name\":\"find\",\"arguments\":{\"text\":\"";
    uint32_t V = needle_tokenizer_size(tok);
    float *l = malloc(V * sizeof *l);
    uint64_t hits, walks, hits2, walks2;
    needle_grammar *g = grammar(tools, V3, "turn one: order AB-77");
    CHECK(mask_after(g, at, l) > 0 && allowed(l, "AB") && !allowed(l, "CD"), "turn one");
    CHECK(mask_after(g, in_text, l) > 0, "a free string");
    nd_grammar_set_context(g, "turn two: order CD-12", 21);
    CHECK(mask_after(g, at, l) > 0 && allowed(l, "CD") && !allowed(l, "AB") && allowed(l, "12"), "turn two");
    nd_grammar_mask_counts(g, &hits, &walks);
    CHECK(mask_after(g, in_text, l) > 0, "a free string again");
    nd_grammar_mask_counts(g, &hits2, &walks2);
    CHECK(hits2 == hits + 1, "its mask read no context: remembered across turns (%llu -> %llu)",
          (unsigned long long)hits, (unsigned long long)hits2);
    nd_grammar_set_context(g, "turn two: order CD-12", 21); /* the same text: the same masks */
    nd_grammar_mask_counts(g, &hits, &walks);
    CHECK(mask_after(g, at, l) > 0 && allowed(l, "CD"), "the same context");
    nd_grammar_mask_counts(g, &hits2, &walks2);
    CHECK(hits2 == hits + 1, "remembered under the same context");
    nd_grammar_set_context(g, "turn one: order AB-77", 21);
    CHECK(mask_after(g, at, l) > 0 && allowed(l, "AB") && !allowed(l, "CD"), "back to turn one");
    nd_grammar_set_context(g, NULL, 0);
    CHECK(mask_after(g, at, l) > 0 && allowed(l, "CD") && allowed(l, "AB") && allowed(l, "x"), "no context: free");
    needle_grammar_free(g);
    free(l);
}

static void test_grounded_completion(void) {
    EXPECT(order_tools, ctx, GETP "{\"order_id\":\"AB", "\"}}]");
    EXPECT(order_tools, ctx, GETP "{\"order_id\":\"caf\xc3", "\xa9\"}}]");
    EXPECT(order_tools, ctx, GETP "{\"order_id\":\"\\", "\"\"}}]");
    EXPECT(order_tools, ctx, GETP "{\"user_id\":45", "}}]");
    EXPECT(order_tools, ctx, GETP "{\"user_id\":-", "7}}]");
    const char *req = "[{\"name\":\"get\",\"parameters\":{\"type\":\"object\",\"properties\":{\"order_id\":{\"type\":\"string\"},"
                      "\"user_id\":{\"type\":\"integer\"}},\"required\":[\"order_id\",\"user_id\"]}}]";
    EXPECT(req, ctx, GETP "{", "\"order_id\":\"\",\"user_id\":1}}]"); /* the first number the context holds, digits in order */
    EXPECT(req, "user 4521 or 0.5", GETP "{\"order_id\":\"user\",", "\"user_id\":0}}]");
}

/* ---- enums mined from descriptions ---- */
#define DESC(d) ONE("{\"m\":{\"type\":\"string\",\"description\":\"" d "\"}}", "[\"m\"]")
#define M(v) CALL("{\"m\":\"" v "\"}")

static void test_mined_enums(void) {
    const char *one = DESC("One of 'heat', 'cool' or 'auto'.");
    CHECK(takes(one, V3, NULL, M("heat")) && takes(one, V3, NULL, M("auto")) && !takes(one, V3, NULL, M("dry")), "single quotes");
    CHECK(!takes(one, V3, NULL, M("hea")), "whole values only");
    CHECK(takes(one, N2, NULL, M("dry")) && takes(one, 0, NULL, M("dry")), "without the flag: free");
    static const char *const cued[] = {
        DESC("Choose one of \\\"low\\\", \\\"high\\\""), DESC("Possible values: \\\"low\\\" and \\\"high\\\""),
        DESC("It can be \\\"low\\\" or \\\"high\\\""), DESC("Options \\\"low\\\", \\\"high\\\""),
        DESC("CHOICES: \\\"low\\\" \\\"high\\\""), DESC("allowed values \\\"low\\\" \\\"high\\\""),
        DESC("valid values \\\"low\\\" \\\"high\\\"")};
    for (size_t i = 0; i < sizeof cued / sizeof *cued; i++)
        CHECK(takes(cued[i], V3, NULL, M("low")) && !takes(cued[i], V3, NULL, M("mid")), "cue %zu", i);
    static const char *const not_mined[] = {
        DESC("Say \\\"hi\\\" or \\\"yo\\\""),               /* double quotes without a cue */
        DESC("e.g. 'low', 'high'"), DESC("Values such as 'low', 'high'"), DESC("For example 'low' or 'high'"),
        DESC("one of 'low', 'high', E.G. others"),          /* an example cue anywhere */
        DESC("Just 'low'"), DESC("'low', 'low'"),            /* fewer than two distinct */
        DESC("'a b', 'high'"), DESC("'', 'high'"),           /* a space, an empty token: no list */
        DESC("'abcdefghijklmnopqrst', 'high'"),             /* 20 bytes */
        ONE("{\"m\":{\"type\":\"string\",\"required\":true,\"description\":\"'low', 'high'\"}}", "[\"m\"]"),
        ONE("{\"m\":{\"type\":\"string\",\"grounded\":true,\"description\":\"'low', 'high'\"}}", "[\"m\"]"),
        ONE("{\"m\":{\"type\":\"integer\",\"description\":\"'low', 'high'\"}}", "[\"m\"]")};
    for (size_t i = 0; i < sizeof not_mined / sizeof *not_mined; i++)
        CHECK(takes(not_mined[i], V3, NULL, i + 1 == sizeof not_mined / sizeof *not_mined ? CALL("{\"m\":7}") : M("mid")),
              "not mined %zu", i);
    CHECK(takes(DESC("'a b', 'c' but one of \\\"x\\\", \\\"y\\\""), V3, NULL, M("x")) &&
          !takes(DESC("'a b', 'c' but one of \\\"x\\\", \\\"y\\\""), V3, NULL, M("c")), "a spoilt single-quote list falls back to the cue");
    const char *grounded = ONE("{\"room_id\":{\"type\":\"string\",\"description\":\"'low', 'high'\"}}", "[\"room_id\"]");
    CHECK(takes(grounded, V3, "a mid room", CALL("{\"room_id\":\"mid\"}")), "a grounded key is not mined");
    const char *untyped = ONE("{\"m\":{\"description\":\"'low', 'high'\"}}", "[\"m\"]");
    CHECK(takes(untyped, V3, NULL, M("low")) && !takes(untyped, V3, NULL, CALL("{\"m\":1}")), "untyped: mined");
    const char *pattern = ONE("{\"m\":{\"type\":\"string\",\"pattern\":\"^[a-z]+$\",\"description\":\"'abc', 'x1', 'ok'\"}}", "[\"m\"]");
    CHECK(takes(pattern, V3, NULL, M("abc")) && !takes(pattern, V3, NULL, M("x1")) && !takes(pattern, V3, NULL, M("zz")), "the schema filters");
    const char *none_pass = ONE("{\"m\":{\"type\":\"string\",\"maxLength\":2,\"description\":\"'abc', 'xyz'\"}}", "[\"m\"]");
    CHECK(takes(none_pass, V3, NULL, M("zz")), "none passing: the schema as it was");
    const char *en = ONE("{\"m\":{\"enum\":[\"p\",\"q\"],\"description\":\"'low', 'high'\"}}", "[\"m\"]");
    CHECK(takes(en, V3, NULL, M("p")) && !takes(en, V3, NULL, M("low")), "an enum wins");
    const char *ref = "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"$defs\":{\"S\":{\"type\":\"string\",\"description\":\"'a1', 'b2'\"}},"
                      "\"properties\":{\"m\":{\"$ref\":\"#/$defs/S\",\"description\":\"'low', 'high'\"}},\"required\":[\"m\"]}}]";
    CHECK(takes(ref, V3, NULL, M("a1")) && !takes(ref, V3, NULL, M("low")), "a $ref: the target's description");
    const char *quote = DESC("one of 'a\\\"b', 'c'");
    CHECK(takes(quote, V3, NULL, M("a\\\"b")), "a value with a quote is written escaped");
    EXPECT(one, NULL, ARGS "{\"m\":", "\"auto\"}}]");
    /* a broken pattern is the error it was, mined or not */
    const char *broken = ONE("{\"m\":{\"type\":\"string\",\"pattern\":\"(\",\"description\":\"'low', 'high'\"}}", "[\"m\"]");
    needle_error err;
    needle_grammar *g = nd_grammar_new_calls(vocab, broken, strlen(broken), END_ID, 0, V3, &err);
    CHECK(!g && err.code == NEEDLE_E_SCHEMA && strstr(err.message, "pattern"), "%s", g ? "compiled" : err.message);
    needle_grammar_free(g);
}

/* ---- random walks ---- */
static const char *const walk_tools =
    "[{\"name\":\"get_order\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"order_id\":{\"type\":\"string\"},\"user_id\":{\"type\":\"integer\"},\"note\":{\"type\":\"string\",\"grounded\":true,\"maxLength\":6},"
    "\"level\":{\"type\":\"integer\"},\"rating\":{\"type\":\"number\"},\"wait_minutes\":{\"type\":\"integer\"},"
    "\"mode\":{\"type\":\"string\",\"description\":\"One of 'heat', 'cool' or 'auto'.\"},"
    "\"tags\":{\"type\":\"array\",\"items\":{\"type\":\"string\"},\"maxItems\":2}},\"required\":[\"order_id\"]}},"
    "{\"name\":\"pick\",\"parameters\":{\"type\":\"object\",\"properties\":{"
    "\"item_id\":{\"anyOf\":[{\"type\":\"string\"},{\"type\":\"integer\"},{\"type\":\"null\"}]},\"count\":{\"type\":\"integer\"}},"
    "\"required\":[\"item_id\"]}}]";
static const char *const walk_ctx = "track order AB-77 please; user 4521, item X9 -3 caf\xc3\xa9\n\"q\" 0.5 abab";

static uint64_t rng;
static uint32_t rnd(void) { rng = rng * 6364136223846793005ull + 1442695040888963407ull; return (uint32_t)(rng >> 33); }

static int in_ctx(const char *ctx, const char *s, size_t n) {
    size_t m = strlen(ctx);
    for (size_t i = 0; n <= m && i <= m - n; i++)
        if (!memcmp(ctx + i, s, n)) return 1;
    return 0;
}

/* What the v3 rules promise of a walk's output: grounded values in the
 * context, the implied ranges, the mined enum. */
static int valid_v3(const char *text, size_t n, const char *ctx, char *why) {
    nd_json *d = nd_json_parse(text, n, 64, NULL);
    const nd_jv *calls = d ? nd_json_root(d) : NULL;
    int ok = calls && calls->type == ND_JARRAY;
    for (size_t i = 0; ok && i < calls->n; i++) {
        const nd_jv *args = nd_jv_get(&calls->kids[i], "arguments");
        for (size_t k = 0; ok && args && k < args->n; k++) {
            const nd_jv *v = &args->kids[k];
            const char *key = v->key;
            int grounded = !strcmp(key, "order_id") || !strcmp(key, "user_id") || !strcmp(key, "note") || !strcmp(key, "item_id");
            if (grounded && (v->type == ND_JSTRING || v->type == ND_JNUMBER)) ok = in_ctx(ctx, v->str, v->len);
            if (!strcmp(key, "level")) ok = v->num >= 0 && v->num <= 100;
            if (!strcmp(key, "rating")) ok = v->num >= 1 && v->num <= 5;
            if (!strcmp(key, "wait_minutes") || !strcmp(key, "count")) ok = v->num >= 0;
            if (!strcmp(key, "mode")) ok = in_ctx("|heat|cool|auto|", v->str, v->len) && v->len == 4;
            if (!ok) sprintf(why, "%s breaks its rule in %.200s", key, text);
        }
    }
    if (!calls) sprintf(why, "not JSON: %.200s", text);
    nd_json_free(d);
    return ok;
}

/* The completion from g's state must complete the array validly; the
 * state is then restored by re-feeding the prefix. */
static int completion_ok(needle_grammar *g, const char *ctx, char *why) {
    size_t len, plen;
    const char *t = nd_grammar_text(g, &plen);
    char *prefix = malloc(plen + 1), out[512];
    memcpy(prefix, t, plen);
    needle_error err;
    size_t n = needle_grammar_completion(g, out, sizeof out);
    int ok = n < sizeof out && (!n || nd_grammar_feed(g, out, n, &err) == NEEDLE_OK) && nd_grammar_complete(g);
    t = nd_grammar_text(g, &len);
    if (!ok) sprintf(why, "bad completion %.100s after %.200s", n < sizeof out ? out : "(none)", t);
    else ok = valid_v3(t, len, ctx, why);
    needle_grammar_reset(g);
    if (plen && nd_grammar_feed(g, prefix, plen, &err)) ok = 0;
    free(prefix);
    return ok;
}

/* A walk choosing uniformly among the allowed tokens (closing ones late):
 * remembered masks equal walked ones, no dead end, completions valid. The
 * tokens taken go to ids (when not NULL). Returns 1 when done and valid. */
static int walk(needle_grammar *g, const char *ctx, uint64_t seed, int32_t *ids, int *nids, char *why) {
    uint32_t V = needle_tokenizer_size(tok);
    float *l = malloc(V * sizeof *l), *w = malloc(V * sizeof *w);
    int32_t *pool = malloc(V * sizeof *pool);
    needle_grammar_reset(g);
    rng = seed;
    int done = 0, steps = 0;
    for (; steps < 600 && !done; steps++) {
        if (steps % 5 == 4 && !nd_grammar_complete(g) && !completion_ok(g, ctx, why)) break;
        for (uint32_t i = 0; i < V; i++) l[i] = w[i] = 0;
        uint32_t n = needle_grammar_mask(g, l), k = 0;
        if (nd_grammar_mask_walked(g, w) != n || memcmp(w, l, V * sizeof *l)) { sprintf(why, "remembered mask differs at step %d", steps); break; }
        for (uint32_t i = 0; i < V; i++)
            if (l[i] == 0) pool[k++] = (int32_t)i;
        if (!k) { size_t len; sprintf(why, "dead end after %.200s", nd_grammar_text(g, &len)); break; }
        int32_t pick = pool[rnd() % k];
        for (uint32_t i = 0; steps > 200 && i < k; i++) /* late: lean on closers */
            if (pool[i] == END_ID || (pool[i] >= 5 && pool[i] < 261 && strchr("\"]}", pool[i] - 5) && rnd() % 2)) { pick = pool[i]; break; }
        needle_error err;
        if (needle_grammar_accept(g, pick, &err)) { sprintf(why, "accept: %s", err.message); break; }
        if (ids) ids[(*nids)++] = pick;
        done = needle_grammar_done(g);
    }
    size_t len;
    const char *text = nd_grammar_text(g, &len);
    if (done) done = valid_v3(text, len, ctx, why);
    else if (!*why) sprintf(why, "not done: %.200s", text);
    free(l), free(w), free(pool);
    return done;
}

static void test_random_walks(void) {
    needle_grammar *g = grammar(walk_tools, V3, walk_ctx);
    for (int i = 0; g && i < 40; i++) {
        char why[512] = "";
        CHECK(walk(g, walk_ctx, 100 + (uint64_t)i, NULL, NULL, why), "walk %d: %s", i, why);
    }
    needle_grammar_free(g);
}

/* A walk replayed under another context: every mask, remembered or not,
 * must be the one walked for that context; replayed under its own, every
 * mask is remembered. */
static void test_replay_across_contexts(void) {
    static const char *const other[] = {"nothing here", "order AB-7 user 45", "AB-77 4521 X9"};
    uint32_t V = needle_tokenizer_size(tok);
    float *l = malloc(V * sizeof *l), *w = malloc(V * sizeof *w);
    for (int s = 0; s < 6; s++) {
        needle_grammar *g = grammar(walk_tools, V3, walk_ctx);
        int32_t ids[700];
        int n = 0;
        char why[512] = "";
        if (!walk(g, walk_ctx, 900 + (uint64_t)s, ids, &n, why)) { CHECK(0, "walk: %s", why); needle_grammar_free(g); continue; }
        for (int pass = 0; pass < 4; pass++) {
            const char *c = pass == 0 ? walk_ctx : other[pass - 1];
            nd_grammar_set_context(g, c, strlen(c));
            needle_grammar_reset(g);
            uint64_t h0, h1, wk;
            nd_grammar_mask_counts(g, &h0, &wk);
            h1 = h0;
            int i = 0, same = 1;
            for (; i < n; i++) {
                for (uint32_t k = 0; k < V; k++) l[k] = w[k] = 0;
                uint32_t m = needle_grammar_mask(g, l);
                nd_grammar_mask_counts(g, &h1, &wk);
                if (nd_grammar_mask_walked(g, w) != m || memcmp(w, l, V * sizeof *l)) { same = 0; break; }
                needle_error err;
                if (l[ids[i]] != 0 || needle_grammar_accept(g, ids[i], &err)) break; /* this context refuses the walk */
            }
            CHECK(same, "seed %d pass %d: a remembered mask differs from the walked one at token %d", s, pass, i);
            if (pass == 0) CHECK(i == n && h1 - h0 == (uint64_t)n - 1, "seed %d: %d of %d tokens, %llu masks remembered", s, i, n,
                                 (unsigned long long)(h1 - h0));
        }
        needle_grammar_free(g);
    }
    free(l), free(w);
}

/* ---- Needle 2 is unchanged ---- */
/* Without the flag, the same schemas give the masks they gave before any of
 * this: equal with or without a context, and equal to needle_grammar_new_shared's. */
static void test_needle2_unchanged(void) {
    uint32_t V = needle_tokenizer_size(tok);
    float *a = malloc(V * sizeof *a), *b = malloc(V * sizeof *b);
    needle_error err;
    needle_grammar *plain = needle_grammar_new_shared(vocab, walk_tools, strlen(walk_tools), END_ID, &err);
    needle_grammar *n2 = grammar(walk_tools, N2, walk_ctx);
    CHECK(plain && n2, "compile");
    for (int s = 0; plain && n2 && s < 10; s++) {
        int32_t ids[700];
        int n = 0;
        char why[512] = "";
        walk(plain, "", 300 + (uint64_t)s, ids, &n, why); /* Needle 2's walks break the v3 rules; only the tokens matter */
        needle_grammar_reset(plain), needle_grammar_reset(n2);
        int same = 1;
        for (int i = 0; i < n && same; i++) {
            for (uint32_t k = 0; k < V; k++) a[k] = b[k] = 0;
            same = needle_grammar_mask(plain, a) == needle_grammar_mask(n2, b) && !memcmp(a, b, V * sizeof *a);
            same = same && !needle_grammar_accept(plain, ids[i], &err) && !needle_grammar_accept(n2, ids[i], &err);
        }
        CHECK(same, "walk %d: a Needle 2 grammar with a context differs", s);
    }
    const char *out = GET("{\"order_id\":\"zz\",\"user_id\":-9000,\"note\":\"\\u00e9\"}");
    CHECK(takes(order_tools, N2, ctx, out), "ids free");
    CHECK(takes(NUM("level", "integer"), N2, ctx, VAL("level", "1000")), "no ranges");
    CHECK(takes(DESC("One of 'heat', 'cool'"), N2, ctx, M("dry")), "no mined enums");
    needle_grammar_free(plain), needle_grammar_free(n2);
    free(a), free(b);
}

/* ---- timing: grounded masks over a long context ---- */
/* An 8,192-piece vocabulary of short random pieces, and a grounded grammar
 * walked against a 12 KiB context written from the same letters: the mask
 * inside a grounded value steps the context's automaton for every piece it
 * tries. */
static void test_mask_timing(void) {
    uint32_t n = 8192;
    needle_error err;
    needle_tokenizer *big = random_tokenizer(n, 7, &err);
    needle_vocab *bv = big ? needle_vocab_new(big, &err) : NULL;
    CHECK(bv, "big vocabulary");
    if (!bv) { needle_tokenizer_free(big); return; }
    char *text = malloc(12288 + 1);
    for (int i = 0; i < 12288; i++) text[i] = "abcdefghijklmnopqrstuvwxyz0123456789 .,"[rnd() % 39];
    text[12288] = 0;
    const char *tools = "[{\"name\":\"t\",\"parameters\":{\"type\":\"object\",\"properties\":{\"order_id\":{\"type\":\"string\"},"
                        "\"user_id\":{\"type\":\"integer\"},\"note_id\":{\"type\":\"string\"}},\"required\":[\"order_id\",\"user_id\",\"note_id\"]}}]";
    needle_grammar *g = nd_grammar_new_calls(bv, tools, strlen(tools), END_ID, 0, V3, &err);
    float *l = malloc(n * sizeof *l);
    int32_t *ids = malloc(n * sizeof *ids);
    double times[2000];
    int nt = 0;
    for (int w = 0; g && w < 10 && nt < 2000; w++) {
        nd_grammar_set_context(g, text + w * 64, 12288 - (size_t)w * 64); /* a new context each walk */
        needle_grammar_reset(g);
        for (int s = 0; s < 200 && nt < 2000 && !needle_grammar_done(g); s++) {
            for (uint32_t i = 0; i < n; i++) l[i] = 0;
            double t0 = nd_now_ms();
            uint32_t k = needle_grammar_mask(g, l);
            times[nt++] = nd_now_ms() - t0;
            if (!k) break;
            uint32_t m = 0;
            for (uint32_t i = 0; i < n; i++) if (l[i] == 0) ids[m++] = (int32_t)i;
            int32_t pick = ids[rnd() % m];
            for (uint32_t i = 0; s > 60 && i < m; i++)
                if (ids[i] == END_ID || (ids[i] >= 5 && ids[i] < 261 && strchr("\"]}", ids[i] - 5))) { pick = ids[i]; break; }
            CHECK(needle_grammar_accept(g, pick, &err) == NEEDLE_OK, "%s", err.message);
        }
        CHECK(needle_grammar_done(g), "walk %d done", w);
    }
    if (nt) {
        qsort(times, (size_t)nt, sizeof *times, cmp_double);
        printf("  grounded mask, 8192 pieces, 12 KiB context: median %.4f ms, p99 %.4f ms, max %.4f ms over %d steps\n",
               times[nt / 2], times[nt * 99 / 100], times[nt - 1], nt);
    }
    free(l), free(ids), free(text);
    needle_grammar_free(g);
    needle_vocab_free(bv);
    needle_tokenizer_free(big);
}

int main(void) {
    tok = test_tokenizer();
    vocab = tok ? needle_vocab_new(tok, NULL) : NULL;
    if (!vocab) { printf("no vocabulary\n"); return 1; }
    RUN(test_implied_ranges);
    RUN(test_grounded_bytes);
    RUN(test_grounded_numbers_need_the_context);
    RUN(test_grounded_tokens);
    RUN(test_context_change);
    RUN(test_grounded_completion);
    RUN(test_mined_enums);
    RUN(test_random_walks);
    RUN(test_replay_across_contexts);
    RUN(test_needle2_unchanged);
    RUN(test_mask_timing);
    needle_vocab_free(vocab);
    needle_tokenizer_free(tok);
    return check_report();
}
