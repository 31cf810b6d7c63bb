/* fuzz_agent.c: libFuzzer target for the agent API as a caller drives it:
 * hostile tool schemas, texts and options over a small model. The input is
 *   tool \x1e tool \x1e ... \0 query \0 result \0 options (8 bytes)
 * Each tool is declared (bad ones must be refused with an error), then init,
 * a query turn of a few steps, an abort or a tool-result turn, the envelope
 * and a reset. The model is the archive at $NEEDLE_FUZZ_ARCHIVE (written by
 * tests/js/fuzz.test.js), loaded once. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "needle.h"

static needle_model *model;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
    const char *path = getenv("NEEDLE_FUZZ_ARCHIVE");
    FILE *f = path ? fopen(path, "rb") : NULL;
    if (!f) { fprintf(stderr, "fuzz_agent: set NEEDLE_FUZZ_ARCHIVE to a .cact archive\n"); exit(1); }
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *bytes = malloc((size_t)size);
    if (!bytes || fread(bytes, 1, (size_t)size, f) != (size_t)size) exit(1);
    fclose(f);
    model = needle_model_load(bytes, (size_t)size, NULL); /* reads bytes in place: never freed */
    if (!model) { fprintf(stderr, "fuzz_agent: the archive does not load\n"); exit(1); }
    return 0;
}

/* The next field of data up to sep (or the end); advances *at past it. */
static const uint8_t *field(const uint8_t *data, size_t size, size_t *at, uint8_t sep, size_t *len) {
    const uint8_t *start = data + *at;
    const uint8_t *end = *at < size ? memchr(start, sep, size - *at) : NULL;
    *len = end ? (size_t)(end - start) : size - (*at < size ? *at : size);
    *at += *len + (end ? 1 : 0);
    return start;
}

static void run_turn(needle_agent *agent, const char *text, size_t len, int kind, uint32_t steps, int abort_at) {
    needle_error err;
    if (needle_agent_begin(agent, text, len, kind, 24, &err) != NEEDLE_OK) return;
    char piece[64];
    size_t n;
    for (uint32_t i = 0; i < steps; i++) {
        if ((int)i == abort_at) { needle_agent_abort(agent); break; }
        int step = needle_agent_step(agent, piece, sizeof piece, &n);
        if (step <= 0) break;
    }
    size_t need = needle_agent_envelope(agent, NULL, 0);
    char *envelope = malloc(need + 1);
    if (envelope) needle_agent_envelope(agent, envelope, need + 1);
    free(envelope);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    size_t at = 0, tools_len, query_len, result_len, options_len;
    const uint8_t *tools = field(data, size, &at, 0, &tools_len);
    const uint8_t *query = field(data, size, &at, 0, &query_len);
    const uint8_t *result = field(data, size, &at, 0, &result_len);
    const uint8_t *options = field(data, size, &at, 0xff, &options_len);
    uint8_t o[8] = {0};
    memcpy(o, options, options_len < 8 ? options_len : 8);

    needle_error err;
    needle_agent *agent = needle_agent_new(model, &err);
    if (!agent) return 0;
    size_t t = 0;
    while (t < tools_len) {
        size_t len;
        const uint8_t *tool = field(tools, tools_len, &t, 0x1e, &len);
        needle_agent_add_tool(agent, (const char *)tool, len, &err);
    }
    needle_agent_require_call(agent, o[0] & 1);
    needle_agent_exact(agent, o[0] & 2);
    needle_agent_set_sampling(agent, (float)o[1] / 64, o[2], (float)(o[3] + 1) / 256, (float)o[4] / 256,
                              1 + (float)o[5] / 128, o[6]);
    if (needle_agent_init(agent, (const char *)result, result_len < 64 ? result_len : 64, &err) == NEEDLE_OK) {
        uint32_t steps = 8 + (o[7] & 63);
        run_turn(agent, (const char *)query, query_len, NEEDLE_TURN_QUERY, steps, (o[7] & 64) ? (int)(o[7] & 15) : -1);
        run_turn(agent, (const char *)result, result_len, NEEDLE_TURN_AUTO, steps, -1);
        needle_agent_reset(agent, &err);
    }
    needle_agent_free(agent);
    return 0;
}
