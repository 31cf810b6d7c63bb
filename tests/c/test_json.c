/* test_json.c: the JSON parser (hostile input: errors with offsets, depth
 * limit, UTF-8, surrogates) and Python-compatible compact rendering. */
#include <string.h>

#include "check.h"
#include "format/json.h"
#include "needle.h"

static const char *compact(const char *in, char *out, size_t cap) {
    static needle_error err; /* its message outlives the call */
    size_t n = needle_json_compact(in, strlen(in), out, cap, &err);
    return n ? out : err.message;
}

static void test_render(void) {
    char o[256];
    CHECK(!strcmp(compact("{ \"a\" : [ 1 , 2.50, -0, 1E+21 ] }", o, sizeof o), "{\"a\":[1,2.50,-0,1E+21]}"), "%s", o);
    CHECK(!strcmp(compact("\"\\/ \\b\\f\\n\\r\\t \\u001f \\\"\"", o, sizeof o), "\"/ \\b\\f\\n\\r\\t \\u001f \\\"\""), "%s", o);
    CHECK(!strcmp(compact("\"\xe2\x82\xac \\u20AC\"", o, sizeof o), "\"\\u20ac \\u20ac\""), "%s", o);
    CHECK(!strcmp(compact("\"\\ud800x\"", o, sizeof o), "\"\\ud800x\""), "lone surrogate kept: %s", o);
    CHECK(!strcmp(compact("{\"k\":1,\"j\":2,\"k\":3}", o, sizeof o), "{\"k\":3,\"j\":2}"), "%s", o);
    CHECK(!strcmp(compact("[]", o, sizeof o), "[]") && !strcmp(compact("{}", o, sizeof o), "{}"), "empty");
    /* ensure_ascii=False (Needle 3): non-ASCII and DEL as themselves; controls and lone surrogates escaped */
    const char *in = "[\"\xe2\x82\xac \\u00e9 \x7f \\ud83d\\ude00 \\n\\u0001 \\ud800\"]";
    needle_error err;
    size_t n = nd_json_compact(in, strlen(in), 0, o, sizeof o, &err);
    const char *want = "[\"\xe2\x82\xac \xc3\xa9 \x7f \xf0\x9f\x98\x80 \\n\\u0001 \\ud800\"]";
    CHECK(n == strlen(want) && !strcmp(o, want), "ensure_ascii=False: %s", o);
}

static void test_errors(void) {
    const char *bad[] = {"", "[", "{\"a\"}", "[1 2]", "01", "1.", "-", "\"\\q\"", "\"\x01\"", "\"\xed\xa0\x80\"",
                         "tru", "[1]x", "{\"a\":1,}", "\"\\u12\"", "nul"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        needle_error err;
        nd_json *d = nd_json_parse(bad[i], strlen(bad[i]), 8, &err);
        CHECK(!d && err.code == NEEDLE_E_ARGUMENT && strstr(err.message, "offset"), "case %zu: %s", i, bad[i]);
        nd_json_free(d);
    }
    needle_error err;
    nd_json *d = nd_json_parse("[[[1]]]", 7, 2, &err);
    CHECK(!d && strstr(err.message, "deep"), "depth limit: %s", err.message);
    d = nd_json_parse("[[1]]", 5, 2, &err);
    CHECK(d && nd_json_root(d)->kids[0].kids[0].num == 1, "within depth");
    nd_json_free(d);
}

static void test_tree(void) {
    needle_error err;
    const char *t = "{\"s\":\"a\\u0000b\",\"n\":-1.5e2,\"o\":{\"x\":null}}";
    nd_json *d = nd_json_parse(t, strlen(t), 8, &err);
    CHECK(d != NULL, "%s", err.message);
    if (!d) return;
    const nd_jv *r = nd_json_root(d), *s = nd_jv_get(r, "s");
    CHECK(s && s->len == 3 && s->str[1] == 0, "embedded NUL kept");
    CHECK(nd_jv_get(r, "n")->num == -150 && !strcmp(nd_jv_get(r, "n")->str, "-1.5e2"), "number text kept");
    CHECK(nd_jv_get(nd_jv_get(r, "o"), "x")->type == ND_JNULL, "nested");
    CHECK(nd_jv_get(r, "zz") == NULL, "missing");
    nd_json_free(d);
}

int main(void) {
    RUN(test_render);
    RUN(test_errors);
    RUN(test_tree);
    return check_report();
}
