/* fuzz_postprocess.c: libFuzzer target for the Needle 3 call post-processor
 * (src/agent/postprocess.c) on hostile calls, requests and tools. The input
 * splits at NUL bytes into
 *   tools \0 system \0 request \0 conversation \0 calls
 * which go straight to the rules (nd_postprocess, nd_pp_validation,
 * nd_pp_grounding_text: any bytes, no JSON wrapper to get past); the whole
 * input also goes to needle_postprocess as a request object. Every call
 * must return a status without a trap; an OK answer must be one JSON value
 * and, for needle_postprocess, one line. Only the first 64 KB is read, so a
 * run stays quick.
 * Build: clang -std=c11 -Isrc -DND_NEEDLE3 -fsanitize=fuzzer,address,undefined
 * (./build.sh fuzz builds every target in tests/fuzz). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "agent/postprocess.h"
#include "format/json.h"
#include "needle.h"

/* The next field up to NUL (or the end); advances *at past it. */
static const char *field(const uint8_t *data, size_t size, size_t *at, size_t *len) {
    const uint8_t *start = data + *at;
    const uint8_t *end = *at < size ? memchr(start, 0, size - *at) : NULL;
    *len = end ? (size_t)(end - start) : size - (*at < size ? *at : size);
    *at += *len + (end ? 1 : 0);
    return (const char *)start;
}

static void must_be_json(const char *text, size_t n) {
    needle_error err;
    nd_json *doc = nd_json_parse(text, n, 200, &err);
    if (!doc) { fprintf(stderr, "output is not JSON (%s): %.*s\n", err.message, (int)n, text); abort(); }
    nd_json_free(doc);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size > 65536) size = 65536;
    size_t at = 0, n[5];
    const char *f[5];
    for (int i = 0; i < 5; i++) f[i] = field(data, size, &at, &n[i]);

    /* the stored system text, as the agent would make it */
    char *stored = malloc(n[1] + 1);
    if (!stored) return 0;
    size_t stored_len = nd_pp_grounding_text(f[1], n[1], stored);
    if (stored_len > n[1]) abort();

    nd_pp_input in = {f[0], stored, f[2], f[3], f[4], n[0], stored_len, n[2], n[3], n[4]};
    nd_pp_output out;
    needle_error err;
    if (nd_postprocess(&in, &out, &err) == NEEDLE_OK) {
        if (!out.calls || out.calls_len != strlen(out.calls)) abort();
        char *v;
        size_t vn;
        if (nd_pp_validation(&in, out.calls, out.calls_len, &v, &vn, &err) == NEEDLE_OK) {
            must_be_json(v, vn);
            free(v);
        }
        free(out.calls);
    }
    free(stored);

    char *line;
    size_t len;
    if (needle_postprocess((const char *)data, size, &line, &len, &err) == NEEDLE_OK) {
        must_be_json(line, len);
        if (memchr(line, '\n', len)) abort();
        free(line);
    } else if (!err.message[0] || strchr(err.message, '\n')) {
        abort(); /* an error is one line */
    }
    return 0;
}
