/* test_postprocess.c: the Needle 3 call post-processor (src/agent/
 * postprocess.c; docs/needle3.md "The call post-processor"). One test per
 * rule with cases of our own, the examples docs/engine-rules.md of
 * ddrscott/needle-rs states, the public entry's errors and hostile inputs.
 * Recorded engine cases are held outside the project: `needle-wasm
 * postprocess` replays them (docs/needle3.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/postprocess.h"
#include "check.h"
#include "format/json.h"
#include "needle.h"
#include "rng.h"

/* ---- helpers ------------------------------------------------------------------ */
/* Appends s as a JSON string literal. */
static void put_json_string(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t need = *len + strlen(s) * 6 + 3;
    if (need > *cap) *cap = need * 2, *buf = realloc(*buf, *cap);
    char *o = *buf + *len;
    *o++ = '"';
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\') *o++ = '\\', *o++ = (char)*p;
        else if (*p < 0x20) o += sprintf(o, "\\u%04x", *p);
        else *o++ = (char)*p;
    }
    *o++ = '"';
    *len = (size_t)(o - *buf);
}

static void put_raw(char **buf, size_t *len, size_t *cap, const char *s) {
    size_t n = strlen(s);
    if (*len + n + 1 > *cap) *cap = (*len + n + 1) * 2, *buf = realloc(*buf, *cap);
    memcpy(*buf + *len, s, n);
    *len += n;
}

/* The request object; tools is JSON text (put raw), conversation may be NULL. */
static char *request(const char *tools, const char *system, const char *req, const char *conv, const char *calls) {
    char *b = NULL;
    size_t n = 0, cap = 0;
    put_raw(&b, &n, &cap, "{\"tools\":");
    put_raw(&b, &n, &cap, tools);
    put_raw(&b, &n, &cap, ",\"system\":");
    put_json_string(&b, &n, &cap, system);
    put_raw(&b, &n, &cap, ",\"request\":");
    put_json_string(&b, &n, &cap, req);
    if (conv) put_raw(&b, &n, &cap, ",\"conversation\":"), put_json_string(&b, &n, &cap, conv);
    put_raw(&b, &n, &cap, ",\"calls\":");
    put_json_string(&b, &n, &cap, calls);
    put_raw(&b, &n, &cap, "}");
    b[n] = 0;
    return b;
}

/* The output line we expect. */
static char *line(const char *calls, int withhold, int strong) {
    char *b = NULL;
    size_t n = 0, cap = 0;
    put_raw(&b, &n, &cap, "{\"calls\":");
    put_json_string(&b, &n, &cap, calls);
    put_raw(&b, &n, &cap, withhold ? ",\"withhold\":true" : ",\"withhold\":false");
    put_raw(&b, &n, &cap, strong ? ",\"strong\":true}" : ",\"strong\":false}");
    b[n] = 0;
    return b;
}

/* Runs one case and checks the whole output line. */
#define EXPECT(tools, system, req, conv, calls, want_calls, w, s)                                   \
    do {                                                                                          \
        char *in_ = request(tools, system, req, conv, calls), *want_ = line(want_calls, w, s), *out_ = NULL; \
        size_t len_ = 0;                                                                          \
        needle_error err_ = {0};                                                                  \
        int rc_ = needle_postprocess(in_, strlen(in_), &out_, &len_, &err_);                      \
        CHECK(rc_ == NEEDLE_OK && out_ && len_ == strlen(out_) && !strcmp(out_, want_),          \
              "%s\n     want %s\n     got  %s (rc %d %s)", req, want_, out_ ? out_ : "-", rc_, err_.message); \
        free(in_), free(want_), free(out_);                                                       \
    } while (0)
#define PP(tools, req, calls, want, w, s) EXPECT(tools, " ", req, NULL, calls, want, w, s)

/* A tool: name, then the properties and required JSON. */
#define TOOL(name, props, req) "{\"name\":\"" name "\",\"description\":\"\",\"parameters\":{\"type\":\"object\",\"properties\":" props ",\"required\":" req "}}"
#define STR "{\"type\":\"string\"}"
#define CALL(name, args) "{\"name\":\"" name "\",\"arguments\":" args "}"

/* ---- the pipeline's edges ---------------------------------------------------------- */
static void test_passthrough(void) {
    const char *t = "[" TOOL("set_timer", "{\"minutes\":{\"type\":\"number\"}}", "[\"minutes\"]") "]";
    PP(t, "x", "[]", "[]", 0, 0);
    PP(t, "x", " {} ", " {} ", 0, 0);            /* not an array: verbatim */
    PP(t, "x", "[1, 2", "[1, 2", 0, 0);          /* not JSON: verbatim */
    PP(t, "x", "[ 7 ,\"a\" ]", "[7,\"a\"]", 0, 0); /* an array is rewritten compactly */
    /* integers under a number type get ".0"; the second call is a duplicate */
    PP(t, "set a timer for 20 minutes", "[" CALL("set_timer", "{\"minutes\":20}") "," CALL("set_timer", "{\"minutes\":20}") "]",
       "[" CALL("set_timer", "{\"minutes\":20.0}") "]", 0, 0);
    /* a blank request switches the request-driven rules off (no quantity gate here) */
    PP(t, " \t", "[" CALL("set_timer", "{\"minutes\":3}") "]", "[" CALL("set_timer", "{\"minutes\":3.0}") "]", 0, 0);
    /* object members keep their order and repeats; numbers keep their text */
    PP("[]", " ", "[{\"arguments\":{\"b\":1.50,\"b\":2e3},\"name\":\"q\"}]", "[{\"arguments\":{\"b\":1.50,\"b\":2e3},\"name\":\"q\"}]", 0, 0);
    /* with a request, an optional number it never states is dropped (the unknown key is optional) */
    PP("[]", "x", "[{\"arguments\":{\"b\":1.50,\"b\":2e3},\"name\":\"q\"}]", "[{\"arguments\":{},\"name\":\"q\"}]", 0, 0);
}

/* ---- names, verbs and flips ------------------------------------------------------- */
#define CONTACT "[" TOOL("add_contact", "{\"first_name\":" STR ",\"last_name\":" STR "}", "[\"first_name\"]") "]"

static void test_name_split(void) {
    PP(CONTACT, "add Dr. Jane Smith", "[" CALL("add_contact", "{\"first_name\":\"Dr. Jane Smith\"}") "]",
       "[" CALL("add_contact", "{\"first_name\":\"Jane\"}") "]", 0, 0);
    PP(CONTACT, "add Peter Pan to my contacts", "[" CALL("add_contact", "{\"first_name\":\"\",\"last_name\":\"Peter Pan\"}") "]",
       "[" CALL("add_contact", "{\"first_name\":\"Peter\",\"last_name\":\"Pan\"}") "]", 0, 0);
    PP(CONTACT, "text Paul O'Brien's brother", "[" CALL("add_contact", "{\"first_name\":\"Paul\",\"last_name\":\"\"}") "]",
       "[" CALL("add_contact", "{\"first_name\":\"Paul\",\"last_name\":\"O'Brien\"}") "]", 0, 0);
    /* the word before a surname is its first name unless it is a command word */
    PP(CONTACT, "call Maria Lopez", "[" CALL("add_contact", "{\"first_name\":\"\",\"last_name\":\"Lopez\"}") "]",
       "[" CALL("add_contact", "{\"first_name\":\"Maria\",\"last_name\":\"Lopez\"}") "]", 0, 0);
    PP(CONTACT, "save Lopez", "[" CALL("add_contact", "{\"first_name\":\"\",\"last_name\":\"Lopez\"}") "]",
       "[" CALL("add_contact", "{\"first_name\":\"\",\"last_name\":\"Lopez\"}") "]", 0, 0);
}

#define DOORS "[" TOOL("lock_door", "{\"door\":" STR "}", "[\"door\"]") "," TOOL("unlock_door", "{\"door\":" STR "}", "[\"door\"]") "," \
    TOOL("mute_tv", "{}", "[]") "," TOOL("unmute_tv", "{}", "[]") "]"

static void test_polarity_rename(void) {
    PP(DOORS, "unlock the front door", "[" CALL("lock_door", "{\"door\":\"front\"}") "]",
       "[" CALL("unlock_door", "{\"door\":\"front\"}") "]", 0, 0);
    PP(DOORS, "don't unlock it, just lock the door", "[" CALL("unlock_door", "{\"door\":\"door\"}") "]",
       "[" CALL("lock_door", "{\"door\":\"door\"}") "]", 0, 0);
    PP(DOORS, "please unmute the tv", "[" CALL("mute_tv", "{}") "]", "[" CALL("unmute_tv", "{}") "]", 0, 0);
    /* both directions named: nothing fires */
    PP(DOORS, "lock or unlock the door", "[" CALL("lock_door", "{\"door\":\"door\"}") "]",
       "[" CALL("lock_door", "{\"door\":\"door\"}") "]", 0, 0);
}

static void test_flip(void) {
    const char *t = "[" TOOL("power", "{\"on\":{\"type\":\"boolean\"},\"turn_off\":{\"type\":\"boolean\"},"
                    "\"state\":{\"type\":\"string\",\"enum\":[\"ON\",\"OFF\"]},"
                    "\"job\":{\"type\":\"string\",\"enum\":[\"start\",\"stop\",\"pause\",\"resume\"]}}", "[]") "]";
    /* a bool whose key has a word of the row takes the direction, unless the key says "off" */
    PP(t, "switch off the heater", "[" CALL("power", "{\"on\":true,\"turn_off\":true,\"state\":\"on\"}") "]",
       "[" CALL("power", "{\"on\":false,\"turn_off\":true,\"state\":\"OFF\"}") "]", 0, 0);
    /* transport verbs: the one the request uses */
    PP(t, "please carry on", "[" CALL("power", "{\"job\":\"pause\"}") "]", "[" CALL("power", "{\"job\":\"resume\"}") "]", 0, 0);
    /* a negated verb does not count ("never" in the 12 bytes before) */
    PP(t, "never turn on the heater", "[" CALL("power", "{\"on\":false}") "]", "[" CALL("power", "{\"on\":false}") "]", 0, 0);
}

/* ---- per-call gates ---------------------------------------------------------------- */
static void test_origin_gate(void) {
    const char *t = "[" TOOL("route", "{\"origin\":" STR ",\"destination\":" STR "}", "[\"origin\",\"destination\"]") ","
                    TOOL("walk", "{\"from\":" STR ",\"to\":" STR "}", "[\"to\"]") "]";
    /* withheld; the rebuild still runs (the destination takes the request's casing) */
    PP(t, "take me to Rome", "[" CALL("route", "{\"origin\":\" Rome\",\"destination\":\"rome\"}") "]",
       "[" CALL("route", "{\"origin\":\" Rome\",\"destination\":\"Rome\"}") "]", 1, 0);
    PP(t, "walk to the park", "[" CALL("walk", "{\"from\":\"park\",\"to\":\"park\"}") "]", "[" CALL("walk", "{\"to\":\"park\"}") "]", 0, 0);
}

static void test_enum_gate(void) {
    const char *t = "[" TOOL("order", "{\"drink\":{\"type\":\"string\",\"enum\":[\"espresso\",\"green tea\"]},"
                    "\"kind\":{\"type\":\"string\",\"enum\":[\"hot\",\"iced\"]}}", "[\"drink\",\"kind\"]") "]";
    PP(t, "order a coffee", "[" CALL("order", "{\"drink\":\"espresso\",\"kind\":\"iced\"}") "]",
       "[" CALL("order", "{\"drink\":\"espresso\",\"kind\":\"iced\"}") "]", 1, 0); /* espresso never named; kind exempt */
    PP(t, "two espressos please", "[" CALL("order", "{\"drink\":\"espresso\"}") "]", "[" CALL("order", "{\"drink\":\"espresso\"}") "]", 0, 0);
    PP(t, "some tea", "[" CALL("order", "{\"drink\":\"green tea\"}") "]", "[" CALL("order", "{\"drink\":\"green tea\"}") "]", 0, 0);
}

#define HEAT "[" TOOL("heat", "{\"room\":" STR ",\"mode\":" STR ",\"label\":" STR "}", "[\"room\",\"label\"]") "]"

static void test_control_place_gate(void) {
    /* a required room that holds a word the request never says */
    PP(HEAT, "warm up the bedroom", "[" CALL("heat", "{\"room\":\"attic\"}") "]", "[" CALL("heat", "{\"room\":\"attic\"}") "]", 1, 0);
    PP(HEAT, "warm up the bedroom", "[" CALL("heat", "{\"room\":\"Bedroom\"}") "]", "[" CALL("heat", "{\"room\":\"Bedroom\"}") "]", 0, 0);
    PP(HEAT, "warm up the bedroom", "[" CALL("heat", "{\"room\":\"Tuesday\"}") "]", "[" CALL("heat", "{\"room\":\"Tuesday\"}") "]", 1, 0);
    PP(HEAT, "warm up the bedroom", "[" CALL("heat", "{\"room\":\"7\"}") "]", "[" CALL("heat", "{\"room\":\"7\"}") "]", 1, 0);
    /* a control word in a required free-text slot (mode is not required; label is) */
    PP(HEAT, "warm up the bedroom", "[" CALL("heat", "{\"label\":\"up\"}") "]", "[" CALL("heat", "{\"label\":\"Up\"}") "]", 1, 0);
    PP(HEAT, "warm up the bedroom", "[" CALL("heat", "{\"mode\":\"up\"}") "]", "[" CALL("heat", "{\"mode\":\"up\"}") "]", 0, 0);
    /* the conversation grounds a place the request does not name */
    EXPECT(HEAT, " ", "warm it up", "we are in the attic\nwarm it up", "[" CALL("heat", "{\"room\":\"attic\"}") "]",
           "[" CALL("heat", "{\"room\":\"attic\"}") "]", 0, 0);
}

static void test_quantity_gate(void) {
    const char *t = "[" TOOL("set_volume", "{\"level\":{\"type\":\"integer\"}}", "[\"level\"]") "]";
    PP(t, "set the volume", "[" CALL("set_volume", "{\"level\":40}") "]", "[" CALL("set_volume", "{\"level\":40}") "]", 1, 0);
    PP(t, "set the volume to half", "[" CALL("set_volume", "{\"level\":50}") "]", "[" CALL("set_volume", "{\"level\":50}") "]", 0, 0);
    EXPECT(t, " ", "set the volume", "volume now 12\nset the volume", "[" CALL("set_volume", "{\"level\":40}") "]",
           "[" CALL("set_volume", "{\"level\":40}") "]", 0, 0);
}

/* ---- the rebuild ------------------------------------------------------------------ */
#define MSG "[" TOOL("send", "{\"phone\":" STR ",\"title\":" STR ",\"body\":" STR ",\"cc_email\":" STR ",\"note\":" STR "," \
    "\"file\":{\"type\":\"string\",\"description\":\"MIME type of the file\"},\"temp_f\":{\"type\":\"number\"}}", "[\"title\"]") "]"

static void test_mime_phone(void) {
    PP(MSG, "attach it as a spreadsheet", "[" CALL("send", "{\"title\":\"x\",\"file\":\".XLSX\"}") "]",
       "[" CALL("send", "{\"title\":\"X\"}") "]", 0, 0); /* converted, then dropped: the request never says it */
    PP(MSG, "text 0044 20 7946 0018 the plan", "[" CALL("send", "{\"title\":\"plan\",\"phone\":\"7946 0018\"}") "]",
       "[" CALL("send", "{\"title\":\"Plan\",\"phone\":\"0044 20 7946 0018\"}") "]", 0, 0);
    PP(MSG, "text 020.7946.0018 the plan", "[" CALL("send", "{\"title\":\"plan\",\"phone\":\"02079460018\"}") "]",
       "[" CALL("send", "{\"title\":\"Plan\",\"phone\":\"020.7946.0018\"}") "]", 0, 0);
}

static void test_quotes_casing(void) {
    PP(MSG, "send a note titled \"Weekly Sync Notes\" now", "[" CALL("send", "{\"title\":\"weekly sync notes.\"}") "]",
       "[" CALL("send", "{\"title\":\"Weekly Sync Notes\"}") "]", 0, 0);
    /* a truncated prefix of a longer quote is restored */
    PP(MSG, "title it \u201cPlans for the big garden party\u201d", "[" CALL("send", "{\"title\":\"Plans for the big\"}") "]",
       "[" CALL("send", "{\"title\":\"Plans for the big garden party\"}") "]", 0, 0);
    /* request casing for free text, a capital for title-like keys */
    PP(MSG, "email the Berlin Office about it", "[" CALL("send", "{\"title\":\"about it\",\"body\":\"berlin office\"}") "]",
       "[" CALL("send", "{\"title\":\"About it\",\"body\":\"Berlin Office\"}") "]", 0, 0);
    /* an optional *mail* string without '@' is dropped */
    PP(MSG, "cc bob on it", "[" CALL("send", "{\"title\":\"it\",\"cc_email\":\"bob\"}") "]", "[" CALL("send", "{\"title\":\"It\"}") "]", 0, 0);
}

static void test_temperature(void) {
    PP(MSG, "heat it to 25 C", "[" CALL("send", "{\"title\":\"t\",\"temp_f\":25}") "]", "[" CALL("send", "{\"title\":\"T\"}") "]", 0, 0);
    EXPECT(MSG, " ", "heat it to 25 C", "it is 77 now\nheat it to 25 C", "[" CALL("send", "{\"title\":\"t\",\"temp_f\":25}") "]",
           "[" CALL("send", "{\"title\":\"T\",\"temp_f\":77.0}") "]", 0, 0);
    EXPECT(MSG, " ", "heat it to 22.5 \u00b0C", "72.5 it is\nheat it to 22.5 \u00b0C", "[" CALL("send", "{\"title\":\"t\",\"temp_f\":22.5}") "]",
           "[" CALL("send", "{\"title\":\"T\",\"temp_f\":72.5}") "]", 0, 0);
}

#define MAPS "[" TOOL("find_place", "{\"query\":{\"type\":\"string\",\"description\":\"a place on the map\"}}", "[\"query\"]") "]"

static void test_places(void) {
    PP(MAPS, "find Cafe Luna on Elm Street, Portland and book a table", "[" CALL("find_place", "{\"query\":\"cafe luna\"}") "]",
       "[" CALL("find_place", "{\"query\":\"Cafe Luna on Elm Street, Portland\"}") "]", 0, 0);
    PP(MAPS, "show me the bank of america near 5th Avenue", "[" CALL("find_place", "{\"query\":\"bank america\"}") "]",
       "[" CALL("find_place", "{\"query\":\"bank of america near 5th Avenue\"}") "]", 0, 0);
    /* a lowercase run after a preposition is no address */
    PP(MAPS, "show me the bank of america near the stadium", "[" CALL("find_place", "{\"query\":\"bank america\"}") "]",
       "[" CALL("find_place", "{\"query\":\"bank of america\"}") "]", 0, 0);
    /* a query split over two calls is merged */
    PP(MAPS, "find Thai food in Oakland", "[" CALL("find_place", "{\"query\":\"Thai food\"}") "," CALL("find_place", "{\"query\":\"Oakland\"}") "]",
       "[" CALL("find_place", "{\"query\":\"Thai food in Oakland\"}") "]", 0, 0);
}

/* ---- the tail repairs ---------------------------------------------------------------- */
#define DEV "[" TOOL("device", "{\"name\":{\"type\":\"string\",\"description\":\"device name\"},\"level\":{\"type\":\"integer\",\"default\":3}," \
    "\"mode\":{\"type\":\"string\",\"enum\":[\"eco\",\"turbo\",\"quiet\"]},\"step\":{\"type\":\"number\"},\"color\":{\"type\":\"string\",\"default\":\"blue\"}}", \
    "[\"name\",\"level\"]") "]"

static void test_tail(void) {
    /* an ungrounded optional string is dropped; a required name slot takes the leftover phrase */
    PP(DEV, "turn on the garden fountain", "[" CALL("device", "{\"name\":\"pump\",\"level\":3,\"color\":\"red\"}") "]",
       "[" CALL("device", "{\"name\":\"garden fountain\",\"level\":3}") "]", 0, 0);
    /* a required number with no quantity anywhere takes the default (no gate: it has one) */
    PP(DEV, "start the fan", "[" CALL("device", "{\"name\":\"fan\",\"level\":8}") "]", "[" CALL("device", "{\"name\":\"fan\",\"level\":3}") "]", 0, 0);
    /* the enum snaps to the one option the request names */
    PP(DEV, "run the fan in turbo", "[" CALL("device", "{\"name\":\"fan\",\"level\":3,\"mode\":\"eco\"}") "]",
       "[" CALL("device", "{\"name\":\"fan\",\"level\":3,\"mode\":\"turbo\"}") "]", 0, 0);
    /* "by N" fills the only numeric parameter... here two are declared, so nothing */
    PP(DEV, "raise the fan by 2", "[" CALL("device", "{\"name\":\"fan\",\"level\":3}") "]", "[" CALL("device", "{\"name\":\"fan\",\"level\":3}") "]", 0, 0);
    const char *vol = "[" TOOL("volume_up", "{\"amount\":{\"type\":\"number\"}}", "[]") "]";
    PP(vol, "turn it up by 15%", "[" CALL("volume_up", "{}") "]", "[" CALL("volume_up", "{\"amount\":15.0}") "]", 0, 0);
    const char *ride = "[" TOOL("ride", "{\"pickup_location\":" STR ",\"destination\":" STR ",\"stops\":{\"type\":\"array\",\"items\":{\"type\":\"number\"}}}", "[]") "]";
    /* the ungrounded destination is dropped, then both route slots come from the request, at the end */
    PP(ride, "get me from Penn Station to the Ritz, please", "[" CALL("ride", "{\"destination\":\"hotel\",\"stops\":[1,2.5]}") "]",
       "[" CALL("ride", "{\"stops\":[1.0,2.5],\"pickup_location\":\"Penn Station\",\"destination\":\"Ritz\"}") "]", 0, 0);
}

/* ---- cross-call gates --------------------------------------------------------------- */
#define HOME "[" TOOL("lights_off", "{\"room\":" STR "}", "[]") "," TOOL("set_alarm", "{\"time\":" STR "}", "[]") "]"

static void test_cross_call_gates(void) {
    /* exclusion: the excluded call is dropped when others survive, the list withheld when all are hit */
    PP(HOME, "turn off the lights apart from the porch", "[" CALL("lights_off", "{\"room\":\"porch\"}") "," CALL("lights_off", "{\"room\":\"lights\"}") "]",
       "[" CALL("lights_off", "{\"room\":\"lights\"}") "]", 0, 0);
    PP(HOME, "turn off the lights apart from the porch", "[" CALL("lights_off", "{\"room\":\"porch\"}") "]",
       "[" CALL("lights_off", "{\"room\":\"porch\"}") "]", 1, 1);
    /* negation: a cue, then a word of the tool name within three words */
    PP(HOME, "please do not set alarms tonight", "[" CALL("set_alarm", "{}") "]", "[" CALL("set_alarm", "{}") "]", 1, 1);
    PP(HOME, "don't hesitate to set an alarm", "[" CALL("set_alarm", "{}") "]", "[" CALL("set_alarm", "{}") "]", 0, 0);
    /* reported speech: a reporting verb and a quote within 40 bytes */
    PP(HOME, "my son wrote \"lights off\" on the fridge", "[" CALL("lights_off", "{}") "]", "[" CALL("lights_off", "{}") "]", 1, 1);
    PP(HOME, "my son wrote to me about the lights", "[" CALL("lights_off", "{}") "]", "[" CALL("lights_off", "{}") "]", 0, 0);
}

/* ---- dates ------------------------------------------------------------------------- */
#define CAL "[" TOOL("event", "{\"title\":" STR ",\"date\":" STR ",\"end_time\":" STR "}", "[]") "]"

static void test_dates(void) {
    const char *sys = "Today is 2027-02-26."; /* a Friday */
    EXPECT(CAL, sys, "dinner next tuesday", "Today is 2027-02-26.\ndinner next tuesday", "[" CALL("event", "{\"date\":\"2027-01-01\"}") "]",
           "[" CALL("event", "{\"date\":\"2027-03-02\"}") "]", 0, 0);
    EXPECT(CAL, sys, "dinner friday", "Today is 2027-02-26.\ndinner friday", "[" CALL("event", "{\"date\":\"2027-01-01\"}") "]",
           "[" CALL("event", "{\"date\":\"2027-03-05\"}") "]", 0, 0); /* a bare weekday is never today */
    EXPECT(CAL, sys, "party on February 2nd", "Today is 2027-02-26.\nparty on February 2nd",
           "[" CALL("event", "{\"date\":\"2027-01-01\",\"end_time\":\"2027-01-01T23:00\"}") "]",
           "[" CALL("event", "{\"date\":\"2028-02-02\",\"end_time\":\"2028-02-02T23:00\"}") "]", 0, 0); /* passed: next year */
    EXPECT(CAL, sys, "leap day the 29th of february", "Today is 2027-02-26.\nleap day the 29th of february",
           "[" CALL("event", "{\"date\":\"2027-01-01\"}") "]", "[" CALL("event", "{\"date\":\"2027-01-01\"}") "]", 0, 0); /* 2027 has none */
    /* the standard "date:" fact is blanked when stored, so it drives nothing */
    char stored[64];
    const char *fact = "date: 2027-02-26 Fri 10:00; locale: en";
    size_t n = nd_pp_grounding_text(fact, strlen(fact), stored);
    stored[n] = 0;
    CHECK(!strcmp(stored, " ; locale: en"), "%s", stored);
    EXPECT(CAL, stored, "dinner tomorrow", NULL, "[" CALL("event", "{\"date\":\"2027-01-01\"}") "]",
           "[" CALL("event", "{\"date\":\"2027-01-01\"}") "]", 0, 0);
    const char *stamp = "seen 2027-02-26T10:30 and 2027-02-26 09:00";
    char buf[64];
    n = nd_pp_grounding_text(stamp, strlen(stamp), buf);
    buf[n] = 0;
    CHECK(!strcmp(buf, "seen                  and                 "), "[%s]", buf);
}

/* ---- the entry points ---------------------------------------------------------------- */
static int fails(const char *json, const char *needle, int code) {
    char *out = (char *)1;
    size_t len = 7;
    needle_error err = {0};
    int rc = needle_postprocess(json, strlen(json), &out, &len, &err);
    int ok = rc == code && err.code == code && !out && !len && strstr(err.message, needle) && !strchr(err.message, '\n');
    if (!ok) printf("  %s -> rc %d: %s\n", json, rc, err.message);
    return ok;
}

static void test_errors(void) {
    CHECK(fails("", "json: offset 0", NEEDLE_E_ARGUMENT), "empty");
    CHECK(fails("[]", "must be a JSON object", NEEDLE_E_ARGUMENT), "array");
    CHECK(fails("{\"request\":\"x\",\"calls\":\"[]\"}", "missing member \"tools\"", NEEDLE_E_ARGUMENT), "no tools");
    CHECK(fails("{\"tools\":[],\"calls\":\"[]\"}", "missing member \"request\"", NEEDLE_E_ARGUMENT), "no request");
    CHECK(fails("{\"tools\":[],\"request\":\"x\"}", "missing member \"calls\"", NEEDLE_E_ARGUMENT), "no calls");
    CHECK(fails("{\"tools\":{},\"request\":\"x\",\"calls\":\"[]\"}", "\"tools\" must be an array", NEEDLE_E_ARGUMENT), "tools object");
    CHECK(fails("{\"tools\":\"[\",\"request\":\"x\",\"calls\":\"[]\"}", "member \"tools\": json: offset 1", NEEDLE_E_ARGUMENT), "tools text");
    CHECK(fails("{\"tools\":\"{}\",\"request\":\"x\",\"calls\":\"[]\"}", "must hold a JSON array", NEEDLE_E_ARGUMENT), "tools text object");
    CHECK(fails("{\"tools\":[],\"request\":7,\"calls\":\"[]\"}", "\"request\" must be a string", NEEDLE_E_ARGUMENT), "request type");
    CHECK(fails("{\"tools\":[],\"request\":\"x\",\"calls\":[]}", "\"calls\" must be a string", NEEDLE_E_ARGUMENT), "calls type");
    CHECK(fails("{\"tools\":[],\"request\":\"x\",\"calls\":\"[]\",\"cals\":1}", "unknown member \"cals\"", NEEDLE_E_ARGUMENT), "typo");
    CHECK(fails("{\"tools\":[],\"request\":\"x\",\"calls\":\"[]\",\"\\u0001\\n\":1}", "unknown member \"\\u0001\\u000a\"", NEEDLE_E_ARGUMENT), "escaped");
    needle_error err;
    size_t len;
    CHECK(needle_postprocess("{}", 2, NULL, &len, &err) == NEEDLE_E_ARGUMENT, "NULL out");
    CHECK(needle_postprocess("{}", 2, NULL, NULL, NULL) == NEEDLE_E_ARGUMENT, "NULL err");
    char *big = malloc((4u << 20) + 2);
    memset(big, ' ', (4u << 20) + 1);
    char *out;
    CHECK(needle_postprocess(big, (4u << 20) + 1, &out, &len, &err) == NEEDLE_E_ARGUMENT && strstr(err.message, "more than"), "%s", err.message);
    free(big);
    /* tools as JSON text, and OpenAI wrappers */
    const char *wrapped = "{\"tools\":\"[{\\\"type\\\":\\\"function\\\",\\\"function\\\":{\\\"name\\\":\\\"t\\\",\\\"parameters\\\":"
                          "{\\\"properties\\\":{\\\"n\\\":{\\\"type\\\":\\\"number\\\"}}}}}]\",\"request\":\"x\",\"calls\":\"[{\\\"name\\\":\\\"t\\\",\\\"arguments\\\":{\\\"n\\\":2}}]\"}";
    CHECK(needle_postprocess(wrapped, strlen(wrapped), &out, &len, &err) == NEEDLE_OK &&
          !strcmp(out, "{\"calls\":\"[{\\\"name\\\":\\\"t\\\",\\\"arguments\\\":{}}]\",\"withhold\":false,\"strong\":false}"), "%s", out);
    free(out);
}

static void test_agent_entry(void) {
    const char *tools = "[" TOOL("set_timer", "{\"minutes\":{\"type\":\"number\"},\"label\":" STR "}", "[\"minutes\"]") "]";
    const char *calls = "[" CALL("set_timer", "{\"minutes\":20,\"label\":\"tea\"}") "]";
    nd_pp_input in = {tools, " ", "don't set a timer for tea", " \ndon't set a timer for tea", calls, strlen(tools), 1, 25, 27, strlen(calls)};
    nd_pp_output out;
    needle_error err;
    CHECK(nd_postprocess(&in, &out, &err) == NEEDLE_OK && out.withhold && out.strong &&
          !strcmp(out.calls, "[" CALL("set_timer", "{\"minutes\":20.0,\"label\":\"Tea\"}") "]"), "%s", out.calls);
    char *v;
    size_t vn;
    CHECK(nd_pp_validation(&in, out.calls, out.calls_len, &v, &vn, &err) == NEEDLE_OK &&
          !strcmp(v, "{\"ungrounded\":[\"set_timer.minutes\"],\"negation\":true}"), "%s", v);
    free(v);
    free(out.calls);
    in.tools_len = 1;
    CHECK(nd_postprocess(&in, &out, &err) == NEEDLE_E_ARGUMENT && !out.calls, "bad tools");
    /* "whenever" holds a cue; "don't forget" does not; numbers match as words and with commas */
    const char *t2 = "[" TOOL("a", "{\"n\":{\"type\":\"number\"},\"e\":{\"type\":\"string\",\"enum\":[\"x\"]},\"s\":" STR "}", "[]") "]";
    const char *c2 = "[" CALL("a", "{\"n\":12,\"e\":\"zzz\",\"s\":\"ok\"}") "," CALL("a", "{\"n\":1500,\"s\":\"far away\"}") "]";
    nd_pp_input in2 = {t2, "", "whenever, a dozen, 1,500", "a dozen, 1,500", c2, strlen(t2), 0, 24, 14, strlen(c2)};
    CHECK(nd_pp_validation(&in2, c2, strlen(c2), &v, &vn, &err) == NEEDLE_OK &&
          !strcmp(v, "{\"ungrounded\":[\"a.s\"],\"negation\":true}"), "%s", v);
    free(v);
}

/* ---- hostile input ------------------------------------------------------------------ */
/* Runs a request; the output must be one JSON line whenever the status is OK. */
static void survive(const char *json, size_t len) {
    char *out = NULL;
    size_t n = 0;
    needle_error err;
    int rc = needle_postprocess(json, len, &out, &n, &err);
    if (rc == NEEDLE_OK) {
        needle_error e2;
        nd_json *d = nd_json_parse(out, n, 8, &e2);
        CHECK(d != NULL && n == strlen(out), "output is not JSON: %s", out);
        nd_json_free(d);
    }
    free(out);
}

static void test_hostile(void) {
    /* deep nesting in the calls (past the parser's bound: verbatim) and in the tools */
    char deep[600];
    memset(deep, '[', 300);
    memset(deep + 300, ']', 300);
    char *req = request("[]", "", "x", NULL, "");
    free(req);
    char calls[700];
    snprintf(calls, sizeof calls, "%.*s", 600, deep);
    req = request("[]", "", "x", NULL, calls);
    survive(req, strlen(req));
    free(req);
    /* lone surrogates, controls, huge numbers, empty keys, odd types everywhere */
    const char *t = "[" TOOL("t", "{\"temp_f\":{\"type\":\"number\"},\"phone\":" STR ",\"date\":" STR ",\"room\":" STR ",\"title\":" STR
                    ",\"n\":{\"type\":\"integer\",\"default\":\"auto\"}}", "[\"room\",\"n\"]") "]";
    const char *odd[] = {
        "[{\"name\":\"t\",\"arguments\":{\"temp_f\":1e400,\"phone\":\"\\ud800\\u0000 1\",\"title\":\"\\udfff\",\"\":[]}}]",
        "[{\"name\":\"t\",\"arguments\":{\"temp_f\":-1e308,\"room\":\"\",\"date\":\"9999-12-31\",\"n\":5}}]",
        "[{\"name\":5,\"arguments\":{}},{\"arguments\":[]},null,[[]],{\"name\":\"t\",\"arguments\":\"x\"}]",
        "[{\"name\":\"t\",\"arguments\":{\"n\":12345678901234567890123456789}}]",
    };
    const char *reqs[] = {"set 1e400 c", "call +((((((((9", "\"\"''\xe2\x80\x9c\xe2\x80\x98 said 'x' except , but not ;", "next friday 0000-01-01 31st of february",
                          "turn it up by 99999999999999999999999", "\xc2\xa0\xe2\x80\x99s \xe2\x81\x80", "don't don't don't"};
    for (size_t i = 0; i < sizeof odd / sizeof odd[0]; i++)
        for (size_t k = 0; k < sizeof reqs / sizeof reqs[0]; k++) {
            char *r = request(t, "Today is 0000-01-03 and 9999-12-31", reqs[k], NULL, odd[i]);
            survive(r, strlen(r));
            free(r);
        }
    /* random bytes in the request and calls text, random mutations of a valid call */
    uint64_t seed = 47;
    const char *base = "[{\"name\":\"t\",\"arguments\":{\"room\":\"Kitchen, 2nd\",\"phone\":\"555 0100\",\"date\":\"2026-10-01T09:00\",\"title\":\"x y\"}}]";
    for (int round = 0; round < 400; round++) {
        char text[160], mutated[256];
        size_t n = rng_next(&seed) % sizeof text;
        static const char alphabet[] = " aAzZ09,.'\"-:;!?\xe2\x80\x99\xc3\xa9todaymfrnx";
        for (size_t i = 0; i < n; i++) text[i] = alphabet[rng_next(&seed) % (sizeof alphabet - 1)];
        text[n] = 0;
        snprintf(mutated, sizeof mutated, "%s", base);
        size_t m = strlen(mutated);
        for (int k = 0; k < (rng_unit(&seed) < 0.5 ? 1 : 3); k++) mutated[rng_next(&seed) % m] = "{}[]\",:0a\\ "[rng_next(&seed) % 12];
        char *r = request(t, round & 1 ? "Today is 2026-09-25." : "", text, NULL, round & 2 ? mutated : base);
        survive(r, strlen(r));
        free(r);
    }
}

int main(void) {
    RUN(test_passthrough);
    RUN(test_name_split);
    RUN(test_polarity_rename);
    RUN(test_flip);
    RUN(test_origin_gate);
    RUN(test_enum_gate);
    RUN(test_control_place_gate);
    RUN(test_quantity_gate);
    RUN(test_mime_phone);
    RUN(test_quotes_casing);
    RUN(test_temperature);
    RUN(test_places);
    RUN(test_tail);
    RUN(test_cross_call_gates);
    RUN(test_dates);
    RUN(test_errors);
    RUN(test_agent_entry);
    RUN(test_hostile);
    return check_report();
}
