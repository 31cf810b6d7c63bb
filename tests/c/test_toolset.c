/* test_toolset.c: what Needle 3's prompt carries of the caller's inputs
 * (src/agent/toolset.c, src/agent/system_facts.c; needle3-engine.md section
 * 1): one test per rule, with the examples ddrscott/needle-rs states for the
 * makers' engine (docs/engine-rules.md "DECODING" and the cases of its
 * toolset.rs) and cases of our own. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/system_facts.h"
#include "agent/toolset.h"
#include "check.h"
#include "needle.h"

/* ---- helpers ------------------------------------------------------------------ */

static nd_toolset *toolset_of(const char *const *tools, uint32_t n) {
    nd_toolset *ts = NULL;
    needle_error err = {0};
    int status = nd_toolset_new(tools, n, &ts, &err);
    CHECK(status == NEEDLE_OK, "nd_toolset_new: %d %s", status, err.message);
    return ts;
}

/* The text one tool renders as, checked against want. */
static void check_one(const char *tool, const char *want) {
    nd_toolset *ts = toolset_of(&tool, 1);
    const char *got = ts ? nd_toolset_text(ts, 0) : "(none)";
    CHECK(strcmp(got, want) == 0, "%s\n    gave %s\n    want %s", tool, got, want);
    nd_toolset_free(ts);
}

static void check_restore(const nd_toolset *ts, const char *calls, const char *want) {
    size_t n = 0;
    char *got = nd_toolset_restore(ts, calls, strlen(calls), &n);
    CHECK(got && strcmp(got, want) == 0 && n == strlen(want), "%s\n    gave %s\n    want %s", calls,
          got ? got : "(null)", want);
    free(got);
}

/* A rewrite of one text (the system text, a tool result) against what the engine writes. */
static void check_text(char *(*rewrite)(const char *, size_t, size_t *), const char *text, const char *want) {
    size_t n = 0;
    char *got = rewrite(text, strlen(text), &n);
    CHECK(got && strcmp(got, want) == 0 && n == strlen(want), "\"%s\"\n    gave \"%s\"\n    want \"%s\"", text,
          got ? got : "(null)", want);
    free(got);
}
#define check_system(text, want) check_text(nd_system_facts, text, want)
#define check_result(text, want) check_text(nd_tool_result_text, text, want)

/* ---- tools --------------------------------------------------------------------------- */

static void test_wrapper_unwrapped(void) {
    check_one("{\"type\":\"function\",\"function\":{\"name\":\"getWeather\",\"description\":\"Weather in a city\","
              "\"parameters\":{\"type\":\"object\",\"properties\":{\"cityName\":{\"type\":\"string\"}},"
              "\"required\":[\"cityName\"]}}}",
              "{\"name\":\"get_weather\",\"description\":\"Weather in a city\",\"parameters\":{\"type\":\"object\","
              "\"properties\":{\"city_name\":{\"type\":\"string\"}},\"required\":[\"city_name\"]}}");
    /* Only a "type":"function" wrapper is one: this tool is its own object. */
    check_one("{\"type\":\"tool\",\"function\":{\"name\":\"x\"},\"name\":\"y\"}",
              "{\"type\":\"tool\",\"function\":{\"name\":\"x\"},\"name\":\"y\"}");
}

static void test_triggers_kept_out_of_the_text(void) {
    const char *tool = "{\"name\":\"help\",\"triggers\":[\"\\\\bhelp\\\\b\",3,\"sos\"],\"parameters\":{}}";
    nd_toolset *ts = toolset_of(&tool, 1);
    if (!ts) return;
    CHECK(!strcmp(nd_toolset_text(ts, 0), "{\"name\":\"help\",\"parameters\":{}}"), "%s", nd_toolset_text(ts, 0));
    const char *triggers = nd_toolset_triggers(ts, 0);
    CHECK(triggers && !strcmp(triggers, "[\"\\\\bhelp\\\\b\",3,\"sos\"]"), "%s", triggers ? triggers : "(none)");
    nd_toolset_free(ts);
    const char *plain = "{\"name\":\"x\"}";
    ts = toolset_of(&plain, 1);
    CHECK(ts && !nd_toolset_triggers(ts, 0), "a tool without triggers has none");
    nd_toolset_free(ts);
}

/* The engine's snake_case, on toolset.rs's own cases. */
static void test_snake_case(void) {
    static const char *const CASES[][2] = {
        {"userId", "user_id"}, {"HTTPServer", "http_server"}, {"user-name", "user_name"}, {"a__b", "a_b"},
        {"_id", "id"}, {"setLights", "set_lights"}, {"get-weather", "get_weather"},
        {"already_snake", "already_snake"}, {"ABC", "abc"}, {"roomID2", "room_id2"}, {"x2Y", "x2_y"},
        {"__", "__"}, {"caf\xc3\xa9", "caf\xc3\xa9"}, {"getHTTPResponseCode", "get_http_response_code"},
        {"Set Room Temp", "set_room_temp"}, {"x.y", "x_y"}, {"-lead", "lead"},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        char tool[96], want[96];
        snprintf(tool, sizeof tool, "{\"name\":\"%s\"}", CASES[i][0]);
        snprintf(want, sizeof want, "{\"name\":\"%s\"}", CASES[i][1]);
        check_one(tool, want);
    }
}

/* Colliding tool names, numbered by sorted original name; the calls come
 * back under the names declared (toolset.rs's normalizes_tools case). */
static void test_tool_collisions(void) {
    const char *tools[] = {
        "{\"type\":\"function\",\"function\":{\"name\":\"setLights\",\"triggers\":[\"x\"],\"parameters\":{\"type\":"
        "\"object\",\"properties\":{\"roomName\":{\"type\":\"str\"},\"Level\":{\"type\":\"int\"},\"tags\":{\"type\":"
        "\"List[str]\",\"items\":{\"type\":\"String\"}}},\"required\":[\"roomName\"]}}}",
        "{\"name\":\"set_lights\",\"parameters\":{\"properties\":{}}}",
    };
    nd_toolset *ts = toolset_of(tools, 2);
    if (!ts) return;
    CHECK(!strcmp(nd_toolset_text(ts, 0), "{\"name\":\"set_lights__1\",\"parameters\":{\"type\":\"object\",\"properties\":"
                                          "{\"room_name\":{\"type\":\"str\"},\"level\":{\"type\":\"integer\"},\"tags\":{"
                                          "\"type\":\"array\",\"items\":{\"type\":\"string\"}}},\"required\":[\"room_name\"]}}"),
          "%s", nd_toolset_text(ts, 0));
    CHECK(!strcmp(nd_toolset_text(ts, 1), "{\"name\":\"set_lights__2\",\"parameters\":{\"properties\":{}}}"), "%s",
          nd_toolset_text(ts, 1));
    check_restore(ts, "[{\"name\":\"set_lights__1\",\"arguments\":{\"room_name\":\"kitchen\",\"level\":3}}]",
                  "[{\"name\":\"setLights\",\"arguments\":{\"roomName\":\"kitchen\",\"Level\":3}}]");
    check_restore(ts, "[{\"name\":\"set_lights__2\",\"arguments\":{}},{\"name\":\"other\",\"arguments\":{\"level\":1}}]",
                  "[{\"name\":\"set_lights\",\"arguments\":{}},{\"name\":\"other\",\"arguments\":{\"level\":1}}]");
    nd_toolset_free(ts);
    /* A name declared twice is one name: it shares its number. */
    const char *three[] = {"{\"name\":\"a\"}", "{\"name\":\"A\"}", "{\"name\":\"a\"}", "{\"name\":\"b\"}"};
    ts = toolset_of(three, 4);
    if (!ts) return;
    const char *want[] = {"{\"name\":\"a__2\"}", "{\"name\":\"a__1\"}", "{\"name\":\"a__2\"}", "{\"name\":\"b\"}"};
    for (uint32_t i = 0; i < 4; i++)
        CHECK(!strcmp(nd_toolset_text(ts, i), want[i]), "tool %u: %s", i, nd_toolset_text(ts, i));
    check_restore(ts, "[{\"name\":\"a__1\",\"arguments\":{}}]", "[{\"name\":\"A\",\"arguments\":{}}]");
    nd_toolset_free(ts);
}

/* Colliding properties keep the first and number the rest from __2, per
 * depth; a flat "parameters" object renames its members but keywords. */
static void test_property_collisions(void) {
    check_one("{\"name\":\"f\",\"parameters\":{\"properties\":{\"userId\":{},\"user_id\":{},\"USER_ID\":{}}}}",
              "{\"name\":\"f\",\"parameters\":{\"properties\":{\"user_id\":{},\"user_id__2\":{},\"user_id__3\":{}}}}");
    check_one("{\"name\":\"f\",\"parameters\":{\"roomName\":{\"type\":\"string\",\"required\":true},\"type\":\"object\","
              "\"description\":\"flat\"}}",
              "{\"name\":\"f\",\"parameters\":{\"room_name\":{\"type\":\"string\",\"required\":true},\"type\":\"object\","
              "\"description\":\"flat\"}}");
    const char *tool = "{\"name\":\"f\",\"parameters\":{\"properties\":{\"outerObj\":{\"type\":\"object\",\"properties\":"
                       "{\"innerKey\":{\"type\":\"int\"},\"inner_key\":{}}},\"list\":{\"type\":\"List[object]\",\"items\":"
                       "{\"properties\":{\"itemName\":{}}}}},\"required\":[\"outerObj\"]}}";
    nd_toolset *ts = toolset_of(&tool, 1);
    if (!ts) return;
    CHECK(!strcmp(nd_toolset_text(ts, 0), "{\"name\":\"f\",\"parameters\":{\"properties\":{\"outer_obj\":{\"type\":\"object\","
                                          "\"properties\":{\"inner_key\":{\"type\":\"integer\"},\"inner_key__2\":{}}},\"list\":"
                                          "{\"type\":\"array\",\"items\":{\"properties\":{\"item_name\":{}}}}},\"required\":"
                                          "[\"outer_obj\"]}}"),
          "%s", nd_toolset_text(ts, 0));
    /* Keys go back per depth; an undeclared key and what it holds stay. */
    check_restore(ts, "[{\"name\":\"f\",\"arguments\":{\"outer_obj\":{\"inner_key__2\":1,\"inner_key\":2},\"list\":"
                      "[{\"item_name\":\"x\"}],\"other\":{\"inner_key\":3}}}]",
                  "[{\"name\":\"f\",\"arguments\":{\"outerObj\":{\"inner_key\":1,\"innerKey\":2},\"list\":"
                  "[{\"itemName\":\"x\"}],\"other\":{\"inner_key\":3}}}]");
    check_restore(ts, "not json", "not json");
    check_restore(ts, "{\"name\":\"f\"}", "{\"name\":\"f\"}");
    nd_toolset_free(ts);
}

/* Each of the engine's type aliases, and names it keeps. */
static void test_type_aliases(void) {
    static const char *const CASES[][2] = {
        {"string", "string"}, {"char", "string"}, {"Character", "string"}, {"any", "string"},
        {"bool", "boolean"}, {"Boolean", "boolean"},
        {"int", "integer"}, {"integer", "integer"}, {"long", "integer"}, {"short", "integer"}, {"byte", "integer"},
        {"BigInteger", "integer"}, {"big_integer", "integer"},
        {"float", "number"}, {"double", "number"}, {"decimal", "number"}, {"BigDecimal", "number"}, {"number", "number"},
        {"array", "array"}, {"list", "array"}, {"ArrayList", "array"}, {"set", "array"}, {"tuple", "array"},
        {"List[str]", "array"}, {"int[]", "array"}, {"Array<int>", "array"},
        {"object", "object"}, {"dict", "object"}, {"Dictionary", "object"}, {"map", "object"}, {"HashMap", "object"},
        {"Dict<K,V>", "object"},
        {"null", "null"}, {"None", "null"},
        {"str", "str"}, {"uuid", "uuid"}, {"", ""},
    };
    for (size_t i = 0; i < sizeof CASES / sizeof *CASES; i++) {
        char tool[128], want[128];
        snprintf(tool, sizeof tool, "{\"name\":\"t\",\"parameters\":{\"properties\":{\"p\":{\"type\":\"%s\"}}}}", CASES[i][0]);
        snprintf(want, sizeof want, "{\"name\":\"t\",\"parameters\":{\"properties\":{\"p\":{\"type\":\"%s\"}}}}", CASES[i][1]);
        check_one(tool, want);
    }
    check_one("{\"name\":\"t\",\"parameters\":{\"properties\":{\"p\":{\"type\":[\"int\",\"None\"],\"anyOf\":[{\"type\":"
              "\"double\"}]}}}}",
              "{\"name\":\"t\",\"parameters\":{\"properties\":{\"p\":{\"type\":[\"integer\",\"null\"],\"anyOf\":[{\"type\":"
              "\"number\"}]}}}}");
}

/* Numbers keep their source text; strings come out as the engine writes them. */
static void test_numbers_and_strings(void) {
    check_one("{\"name\":\"n\",\"parameters\":{\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":1.50,\"maximum\":1e3,"
              "\"default\":-0,\"multipleOf\":0.250}}},\"description\":\"caf\\u00e9 \\\"q\\\"\\n\"}",
              "{\"name\":\"n\",\"parameters\":{\"properties\":{\"x\":{\"type\":\"number\",\"minimum\":1.50,\"maximum\":1e3,"
              "\"default\":-0,\"multipleOf\":0.250}}},\"description\":\"caf\xc3\xa9 \\\"q\\\"\\n\"}");
}

/* A list with an element the engine cannot name is kept as given. */
static void test_unnamed_list_kept(void) {
    const char *tools[] = {"{\"name\":\"setLights\"}", "{\"description\":\"no name\"}"};
    nd_toolset *ts = toolset_of(tools, 2);
    if (!ts) return;
    CHECK(!strcmp(nd_toolset_text(ts, 0), tools[0]) && !strcmp(nd_toolset_text(ts, 1), tools[1]), "%s",
          nd_toolset_text(ts, 0));
    check_restore(ts, "[{\"name\":\"setLights\",\"arguments\":{}}]", "[{\"name\":\"setLights\",\"arguments\":{}}]");
    CHECK(nd_toolset_text(ts, 2) == NULL, "out of range");
    nd_toolset_free(ts);
    needle_error err = {0};
    const char *bad = "{\"name\":";
    nd_toolset *none = NULL;
    CHECK(nd_toolset_new(&bad, 1, &none, &err) == NEEDLE_E_SCHEMA && !none, "%s", err.message);
    const char *two = "{\"name\":\"a\"},{\"name\":\"b\"}"; /* one text, two values */
    CHECK(nd_toolset_new(&two, 1, &none, &err) == NEEDLE_E_SCHEMA && !none, "%s", err.message);
    CHECK(nd_toolset_new(NULL, 0, &none, &err) == NEEDLE_OK && none, "no tools");
    check_restore(none, "[{\"name\":\"x\"}]", "[{\"name\":\"x\"}]");
    nd_toolset_free(none);
}

/* Nesting as deep as a tool may (nd_json_compact's 128 levels): renamed at
 * every depth, and calls as deep come back, with no stack to spare (the
 * 256 KB run of tests/js/c-units.test.js). */
static void test_deep_nesting(void) {
    enum { LEVELS = 60 };
    char *tool = malloc(64 + LEVELS * 32), *calls = malloc(64 + LEVELS * 16), *want = malloc(64 + LEVELS * 16);
    size_t n = (size_t)sprintf(tool, "{\"name\":\"deepTool\",\"parameters\":");
    size_t c = (size_t)sprintf(calls, "[{\"name\":\"deep_tool\",\"arguments\":");
    size_t w = (size_t)sprintf(want, "[{\"name\":\"deepTool\",\"arguments\":");
    for (int i = 0; i < LEVELS; i++) {
        n += (size_t)sprintf(tool + n, "{\"properties\":{\"kA\":");
        c += (size_t)sprintf(calls + c, "{\"k_a\":");
        w += (size_t)sprintf(want + w, "{\"kA\":");
    }
    n += (size_t)sprintf(tool + n, "{}");
    c += (size_t)sprintf(calls + c, "1");
    w += (size_t)sprintf(want + w, "1");
    for (int i = 0; i < LEVELS; i++) {
        n += (size_t)sprintf(tool + n, "}}");
        c += (size_t)sprintf(calls + c, "}");
        w += (size_t)sprintf(want + w, "}");
    }
    sprintf(tool + n, "}");
    sprintf(calls + c, "}]");
    sprintf(want + w, "}]");
    const char *texts[] = {tool};
    nd_toolset *ts = toolset_of(texts, 1);
    if (ts) check_restore(ts, calls, want);
    nd_toolset_free(ts);
    free(tool), free(calls), free(want);
}

/* ---- the system text ---------------------------------------------------------------- */

static void test_system_json_facts(void) {
    check_system("{\"user\":\"Ann\",\"date\":\"2026-09-26 08:15\",\"x\":1,\"volume\":30}",
                 "date: 2026-09-26 Sat 08:15; user: Ann; volume: 30");
    check_system(" {\"thermostat\":21.50,\"battery\":true,\"device\":\"\",\"locale\":\"fr-FR\",\"network\":null,"
                 "\"location\":{\"city\":\"Lyon\"},\"assistant\":\"Ida\",\"locale\":\"en\"}",
                 "locale: fr-FR; battery: true; assistant: Ida; thermostat: 21.50");
    check_system("{\"x\":1}", "{\"x\":1}"); /* no fact: the text as it is */
    check_system("{\"note\":\"at 2026-09-25 10:00\"}", "date: 2026-09-25 Fri 10:00");
    check_system("{\"date\":null,\"date\":\"2026-07-21\",\"device\":false}", "date: 2026-07-21; device: false");
}

static void test_system_date_format(void) {
    check_system("{\"date\":\"2026-09-25T10:00:33Z\"}", "date: 2026-09-25 Fri 10:00");
    check_system("{\"date\":\"1970-01-01 00:00\"}", "date: 1970-01-01 Thu 00:00");
    check_system("{\"date\":\"2000-02-29 12:00\"}", "date: 2000-02-29 Tue 12:00");
    check_system("{\"date\":\"1900-03-01 09:30\"}", "date: 1900-03-01 Thu 09:30");
    check_system("{\"date\":\"2024-12-31 23:59\"}", "date: 2024-12-31 Tue 23:59");
}

static void test_system_plain_text(void) {
    check_system("Now is 2026-09-25T10:00:33Z. Be brief.", "date: 2026-09-25 Fri 10:00");
    check_system("date: 2026-09-25 Fri 10:00; tz: x", "date: 2026-09-25 Fri 10:00; tz: x");
    check_system("Meeting 2026-09-25 10:00, see date: below", "Meeting 2026-09-25 10:00, see date: below");
    check_system("  be brief ", "  be brief ");
    check_system("today is 2026-09-25", "today is 2026-09-25");
    check_system("", "");
}

/* ---- tool results ------------------------------------------------------------------- */

static void test_tool_result(void) {
    check_result(" { \"ok\" : true,\n \"msg\": \"a  b\\\" c\" } ", "[{\"ok\":true,\"msg\":\"a  b\\\" c\"}]");
    check_result("[ {\"n\": 1.50}, 2 ]", "[{\"n\":1.50},2]");
    check_result("\"x \\\\\" ", "\"x \\\\\"");
    check_result("3", "3");
}

int main(void) {
    RUN(test_wrapper_unwrapped);
    RUN(test_triggers_kept_out_of_the_text);
    RUN(test_snake_case);
    RUN(test_tool_collisions);
    RUN(test_property_collisions);
    RUN(test_type_aliases);
    RUN(test_numbers_and_strings);
    RUN(test_unnamed_list_kept);
    RUN(test_deep_nesting);
    RUN(test_system_json_facts);
    RUN(test_system_date_format);
    RUN(test_system_plain_text);
    RUN(test_tool_result);
    return check_report();
}
