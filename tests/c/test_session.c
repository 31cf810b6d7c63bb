/* test_session.c: the forward pass and the session over random archives
 * written here in memory: prefill equals token-by-token decode (every KV
 * format), the window and the sinks decide what is attended, rewind and
 * set_sinks reproduce a fresh session, memory does not grow with the length,
 * and the probe heads pool what was fed. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h"
#include "check.h"
#include "format/fp16.h"
#include "model/model.h"
#include "needle.h"
#include "model/session.h"

/* ---- a random archive writer (spec section 2 order) --------------------- */

typedef struct {
    nd_geometry g;
    uint32_t bits, group, heads; /* heads: 0 none, 2 both */
} config;

typedef struct {
    uint8_t dtype, rank;
    uint32_t shape[3];
    float base, amp; /* dense values: base + amp * uniform(-1, 1) */
    int kind;        /* 1 b_res (adds 4 on the diagonal), 2 manifest */
} spec;

static uint32_t rng_next(uint32_t *s) {
    *s = *s * 1664525u + 1013904223u;
    return *s >> 8;
}
static float rng_unit(uint32_t *s) { return (float)rng_next(s) / 8388608.0f * 2.0f - 1.0f; }

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void putf(uint8_t *p, float f) {
    uint32_t v;
    memcpy(&v, &f, 4);
    put32(p, v);
}

static spec dense1(uint32_t a, float base, float amp) { return (spec){ND_FP16, 1, {a, 0, 0}, base, amp, 0}; }
static spec cq(uint32_t r, uint32_t c) { return (spec){ND_CQ, 2, {r, c, 0}, 0, 0, 0}; }

static uint32_t tensors(const config *c, spec *out) {
    const nd_geometry *g = &c->g;
    uint32_t n = 0, d = g->hidden, q = g->query_heads * g->head_dim, kv = g->kv_heads * g->head_dim;
    uint32_t L = g->layers, ln = g->lanes, N = g->hadamard_dim, w = g->engram_tables * g->engram_sub;
    out[n++] = cq(g->vocab, d);
    for (uint32_t i = 0; i < L; i++) {
        out[n++] = dense1(d, 0, 0.2f);
        out[n++] = cq(q, d), out[n++] = cq(kv, d), out[n++] = cq(kv, d);
        out[n++] = dense1(g->head_dim, 0, 0.3f), out[n++] = dense1(g->head_dim, 0, 0.3f);
        out[n++] = cq(q, d), out[n++] = cq(d, q);
        out[n++] = dense1(d, 0, 0.2f), out[n++] = dense1(1, 0, 1.0f), out[n++] = dense1(d, 0, 0.2f);
        out[n++] = dense1(N, 1, 0.3f), out[n++] = dense1(N, 1, 0.3f), out[n++] = dense1(N, 0, 0.5f);
    }
    for (int k = 0; k < 3; k++) out[n++] = dense1(L, 0.5f, 0.4f);
    out[n++] = (spec){ND_FP16, 2, {L, ln, 0}, 0, 0.5f, 0};
    out[n++] = (spec){ND_FP16, 2, {L, ln, 0}, 0, 0.5f, 0};
    out[n++] = (spec){ND_FP16, 3, {L, ln, ln}, 0, 1.0f, 1};
    out[n++] = cq(L * ln, ln * d), out[n++] = cq(L * ln, ln * d), out[n++] = cq(L * ln * ln, ln * d);
    for (uint32_t s = 0; s < g->site_count; s++) {
        out[n++] = cq(g->engram_tables * g->engram_slots, g->engram_sub);
        out[n++] = cq(d, w), out[n++] = cq(d, w);
        out[n++] = (spec){ND_FP16, 2, {g->engram_taps, d, 0}, 0, 0.6f, 0};
    }
    out[n++] = dense1(d, 0, 0.2f);
    if (c->heads) {
        out[n++] = (spec){ND_FP16, 1, {2, 0, 0}, 0, 0, 2};
        for (uint32_t h = 0; h < 2; h++) {
            uint32_t P = h == 0 ? 4 : 8, o = h == 0 ? 128 : 1;
            out[n++] = (spec){ND_FP16, 2, {P, d, 0}, 0, 1.0f, 0};
            out[n++] = (spec){ND_FP16, 2, {o, P * d, 0}, 0, 0.05f, 0};
            out[n++] = dense1(o, 0, 0.1f);
        }
    }
    out[n++] = (spec){ND_RAW, 0, {0, 0, 0}, 0, 0, 0};
    return n;
}

/* vocab pieces: <pad> </s> <s> <unk>, then "t4", "t5", ... */
static size_t tokenizer_blob(uint32_t vocab, uint8_t *p) {
    size_t at = 24;
    if (p) {
        memset(p, 0, 24);
        put32(p, vocab), put32(p + 4, 0), put32(p + 8, 1), put32(p + 12, 2), put32(p + 16, 3);
        p[20] = 1;
    }
    for (uint32_t i = 0; i < vocab; i++) {
        char s[16];
        static const char *special[4] = {"<pad>", "</s>", "<s>", "<unk>"};
        int len = i < 4 ? snprintf(s, sizeof s, "%s", special[i]) : snprintf(s, sizeof s, "t%u", i);
        if (p) {
            putf(p + at, -(float)i);
            p[at + 4] = i < 3 ? 2 : i == 3 ? 1 : 0;
            p[at + 5] = (uint8_t)len, p[at + 6] = 0;
            memcpy(p + at + 7, s, (size_t)len);
        }
        at += 7 + (size_t)len;
    }
    return at;
}

static uint64_t blob_size(const config *c, const spec *s) {
    if (s->dtype == ND_RAW) return tokenizer_blob(c->g.vocab, NULL);
    uint64_t n = s->shape[0];
    for (int i = 1; i < s->rank; i++) n *= s->shape[i];
    if (s->dtype == ND_FP16) return 2 * n;
    uint64_t groups = (s->shape[1] + c->group - 1) / c->group, sb = c->bits == 5 ? 2 : c->bits;
    return s->shape[0] * (groups * c->group * sb / 8) + s->shape[0] * groups * 2;
}

static void fill(const config *c, const spec *s, uint8_t *p, uint64_t bytes, uint32_t *seed) {
    if (s->dtype == ND_RAW) { tokenizer_blob(c->g.vocab, p); return; }
    if (s->dtype == ND_FP16) {
        for (uint64_t i = 0; i < bytes / 2; i++) {
            float v = s->base + s->amp * rng_unit(seed);
            if (s->kind == 1 && (i / s->shape[2]) % s->shape[1] == i % s->shape[2]) v += 4.0f;
            if (s->kind == 2) v = (float)(i + 1);
            uint16_t h = nd_f32_to_fp16(v);
            p[2 * i] = (uint8_t)h, p[2 * i + 1] = (uint8_t)(h >> 8);
        }
        return;
    }
    uint64_t groups = (s->shape[1] + c->group - 1) / c->group, norms = s->shape[0] * groups;
    uint64_t packed = bytes - 2 * norms;
    static const uint8_t trit[3] = {0, 1, 3}; /* ternary crumbs: 0, +c, -c */
    for (uint64_t i = 0; i < packed; i++) {
        p[i] = (uint8_t)rng_next(seed);
        if (c->bits == 5)
            for (int k = 0; k < 4; k++) p[i] = (uint8_t)((p[i] & ~(3 << (2 * k))) | trit[rng_next(seed) % 3] << (2 * k));
    }
    for (uint64_t i = 0; i < norms; i++) {
        uint16_t h = nd_f32_to_fp16(0.6f + 0.4f * rng_unit(seed));
        p[packed + 2 * i] = (uint8_t)h, p[packed + 2 * i + 1] = (uint8_t)(h >> 8);
    }
}

static uint8_t *write_archive(const config *c, uint32_t seed, size_t *size) {
    static spec specs[2048];
    uint32_t count = tensors(c, specs);
    uint64_t at = 120 + 28 * 4 + 44ull * count, offsets[2048];
    for (uint32_t i = 0; i < count; i++) {
        at = (at + 63) / 64 * 64;
        offsets[i] = at;
        at += blob_size(c, &specs[i]);
    }
    uint8_t *b = calloc(1, at);
    const nd_geometry *g = &c->g;
    const uint32_t f[29] = {ND_TAG, count, 28, g->kv_window, g->kv_bits, g->vocab, g->hidden,
        g->query_heads, g->kv_heads, g->layers, g->head_dim, g->max_seq, g->hadamard_dim, g->lanes,
        g->engram_slots, g->engram_sub, g->engram_tables, g->engram_taps, g->engram_dilation,
        g->order_count, g->orders[0], g->orders[1], g->orders[2], g->orders[3], g->site_count,
        g->sites[0], g->sites[1], g->sites[2], g->sites[3]};
    for (int i = 0; i < 29; i++) put32(b + 4 * i, f[i]);
    putf(b + 116, g->rope_theta);
    static const double lloyd[28] = {-1.5066708, -0.4514406, 0.4529475, 1.5099326, -2.1412479,
        -1.3337165, -0.7483983, -0.2377402, 0.2500446, 0.7555868, 1.3379826, 2.1476363, -2.7099900,
        -2.0444556, -1.5947570, -1.2333362, -0.9222140, -0.6395374, -0.3726639, -0.1144507,
        0.1438063, 0.4039890, 0.6726934, 0.9614053, 1.2755258, 1.6370588, 2.0844264, 2.7410141};
    for (int i = 0; i < 28; i++) putf(b + 120 + 4 * i, (float)(lloyd[i] / sqrt(c->group)));
    for (uint32_t i = 0; i < count; i++) {
        uint8_t *r = b + 232 + 44 * i;
        uint64_t n = blob_size(c, &specs[i]);
        r[0] = specs[i].dtype, r[1] = specs[i].rank;
        for (int k = 0; k < 3; k++) put32(r + 4 + 4 * k, specs[i].shape[k]);
        put32(r + 20, (uint32_t)offsets[i]), put32(r + 28, (uint32_t)n);
        if (specs[i].dtype == ND_CQ) put32(r + 36, c->group), put32(r + 40, c->bits);
        fill(c, &specs[i], b + offsets[i], n, &seed);
    }
    *size = at;
    return b;
}

static config tiny(uint32_t kv_bits, uint32_t bits) {
    return (config){.g = {.kv_window = 64, .kv_bits = kv_bits, .vocab = 96, .hidden = 64,
                          .query_heads = 4, .kv_heads = 2, .layers = 2, .head_dim = 16,
                          .max_seq = 128, .hadamard_dim = 64, .lanes = 2, .engram_slots = 64,
                          .engram_sub = 16, .engram_tables = 4, .engram_taps = 4,
                          .engram_dilation = 3, .order_count = 2, .orders = {2, 3},
                          .site_count = 2, .sites = {0, 1}, .rope_theta = 10000.0f},
                    .bits = bits, .group = 32, .heads = 2};
}

typedef struct {
    uint8_t *bytes;
    needle_model *model;
} loaded;

static loaded load(config c, uint32_t seed) {
    loaded l;
    size_t size;
    needle_error err = {0};
    l.bytes = write_archive(&c, seed, &size);
    l.model = needle_model_load(l.bytes, size, &err);
    if (!l.model) printf("  load failed: %s\n", err.message);
    return l;
}

static void unload(loaded *l) {
    needle_model_free(l->model);
    free(l->bytes);
}

static void sequence(int32_t *ids, uint32_t n, uint32_t vocab, uint32_t seed) {
    ids[0] = 2;
    for (uint32_t i = 1; i < n; i++) ids[i] = 4 + (int32_t)(rng_next(&seed) % (vocab - 4));
}

/* max |a - b| / max |b| over n values. */
static double rel_diff(const float *a, const float *b, size_t n) {
    double diff = 0, ref = 1e-30;
    for (size_t i = 0; i < n; i++) {
        diff = fmax(diff, fabs((double)a[i] - b[i]));
        ref = fmax(ref, fabs((double)b[i]));
    }
    return diff / ref;
}

/* Logits of every position, fed at once (one=0) or token by token (one=1). */
static int run(const needle_model *m, uint32_t window, uint32_t sinks, int exact, const int32_t *ids,
               uint32_t n, int one, float *logits) {
    needle_error err = {0};
    needle_session *s = needle_session_new(m, window, sinks, exact, &err);
    if (!s) { printf("  session: %s\n", err.message); return -1; }
    uint32_t V = m->archive.geometry.vocab;
    int rc = 0;
    if (one) for (uint32_t i = 0; i < n && !rc; i++) rc = needle_session_feed(s, ids + i, 1, logits + (size_t)i * V, 0, &err);
    else rc = needle_session_feed(s, ids, n, logits, 1, &err);
    if (rc) printf("  feed: %s\n", err.message);
    needle_session_free(s);
    return rc;
}

/* ---- tests ---------------------------------------------------------------- */

static void prefill_case(config c, uint32_t window, uint32_t sinks, int exact, const char *name) {
    loaded l = load(c, 11);
    CHECK(l.model != NULL, "%s: load", name);
    if (!l.model) { free(l.bytes); return; }
    enum { n = 45 };
    uint32_t V = c.g.vocab;
    int32_t ids[n];
    sequence(ids, n, V, 5);
    float *a = malloc(sizeof(float) * n * V), *b = malloc(sizeof(float) * n * V);
    int ok = !run(l.model, window, sinks, exact, ids, n, 0, a) && !run(l.model, window, sinks, exact, ids, n, 1, b);
    double diff = rel_diff(a, b, (size_t)n * V), spread = 0;
    for (size_t i = 0; i < (size_t)n * V; i++) spread = fmax(spread, fabs(a[i] - a[i % V]));
    CHECK(ok && diff <= 1e-5, "%s: prefill vs decode %g", name, diff);
    CHECK(spread > 1e-3 && isfinite(spread), "%s: logits vary over positions (%g)", name, spread);
    free(a), free(b);
    unload(&l);
}

static void test_prefill_equals_decode(void) {
    prefill_case(tiny(8, 2), 0, 0, 1, "kvBits 8 exact");
    prefill_case(tiny(8, 3), 0, 0, 0, "kvBits 8 int8");
    prefill_case(tiny(4, 4), 0, 0, 1, "kvBits 4 CQ");
    prefill_case(tiny(2, 5), 8, 3, 1, "kvBits 2, ternary, window 8, 3 sinks");
    config odd = tiny(3, 2);
    odd.g.hidden = 48, odd.g.query_heads = 3, odd.g.kv_heads = 1, odd.g.lanes = 1;
    odd.g.order_count = 1, odd.g.orders[1] = 0, odd.g.engram_tables = 2, odd.g.site_count = 1;
    odd.g.sites[0] = 1, odd.g.sites[1] = 0, odd.g.engram_taps = 2, odd.g.engram_dilation = 1;
    prefill_case(odd, 5, 0, 1, "hidden 48, 1 lane, 1 site, kvBits 3, window 5");
    config four = tiny(8, 4);
    four.g.lanes = 4, four.g.layers = 3, four.g.sites[1] = 2, four.g.kv_window = 0;
    prefill_case(four, 0, 0, 1, "4 lanes, budget window");
}

static void test_kv_formats_differ(void) {
    /* Same weights, kvBits 8 vs 4: the CQ cache must change the logits a bit. */
    loaded a = load(tiny(8, 2), 3), b = load(tiny(4, 2), 3);
    CHECK(a.model && b.model, "load");
    if (a.model && b.model) {
        enum { n = 12 };
        uint32_t V = 96;
        int32_t ids[n];
        sequence(ids, n, V, 9);
        float *x = malloc(sizeof(float) * n * V), *y = malloc(sizeof(float) * n * V), *z = malloc(sizeof(float) * n * V);
        run(a.model, 0, 0, 1, ids, n, 0, x);
        run(b.model, 0, 0, 1, ids, n, 0, y);
        run(a.model, 0, 0, 0, ids, n, 0, z);
        double cq = rel_diff(y, x, (size_t)n * V), i8 = rel_diff(z, x, (size_t)n * V);
        CHECK(cq > 1e-6 && cq < 0.5, "CQ KV vs f32: %g", cq);
        CHECK(i8 > 0 && i8 < 0.05, "int8 KV vs f32: %g", i8);
        free(x), free(y), free(z);
    }
    if (a.model) unload(&a);
    if (b.model) unload(&b);
}

/* Logits of the last position of ids with the given window and sinks. */
static void last_logits(const needle_model *m, uint32_t window, uint32_t sinks, const int32_t *ids,
                        uint32_t n, float *out) {
    needle_session *s = needle_session_new(m, window, sinks, 1, NULL);
    needle_session_feed(s, ids, n, out, 0, NULL);
    needle_session_free(s);
}

static void test_window_and_sinks(void) {
    loaded l = load(tiny(8, 2), 21);
    if (!l.model) { CHECK(0, "load"); free(l.bytes); return; }
    enum { n = 40 };
    uint32_t V = 96;
    int32_t a[n], b[n];
    sequence(a, n, V, 17);
    memcpy(b, a, sizeof a);
    b[1] = a[1] == 4 ? 5 : 4; /* differs at position 1 only */
    float *x = malloc(sizeof(float) * V), *y = malloc(sizeof(float) * V);
    /* Window 6, two layers: position 1 reaches at most 2*5 positions further. */
    last_logits(l.model, 6, 0, a, n, x);
    last_logits(l.model, 6, 0, b, n, y);
    CHECK(!memcmp(x, y, sizeof(float) * V), "outside the window, position 1 is forgotten");
    last_logits(l.model, 6, 2, a, n, x);
    last_logits(l.model, 6, 2, b, n, y);
    CHECK(rel_diff(x, y, V) > 1e-6, "a sink is attended forever");
    last_logits(l.model, 64, 0, a, n, x);
    last_logits(l.model, 64, 0, b, n, y);
    CHECK(rel_diff(x, y, V) > 1e-6, "a wide window sees position 1");
    /* Positions shorter than the window do not depend on it. */
    float *all6 = malloc(sizeof(float) * 6 * V), *all64 = malloc(sizeof(float) * 6 * V);
    run(l.model, 6, 0, 1, a, 6, 0, all6);
    run(l.model, 64, 0, 1, a, 6, 0, all64);
    CHECK(!memcmp(all6, all64, sizeof(float) * 6 * V), "within the window");
    free(all6), free(all64), free(x), free(y);
    unload(&l);
}

static void test_long_and_bounded(void) {
    loaded l = load(tiny(8, 2), 23);
    if (!l.model) { CHECK(0, "load"); free(l.bytes); return; }
    needle_error err = {0};
    needle_session *s = needle_session_new(l.model, 16, 4, 0, &err);
    size_t before = nd_session_memory(s);
    int32_t ids[64];
    float *logits = malloc(sizeof(float) * 96);
    int rc = 0, finite = 1;
    for (int round = 0; round < 10 && !rc; round++) { /* 640 positions, past maxSequence 128 */
        sequence(ids, 64, 96, 100 + (uint32_t)round);
        rc = needle_session_feed(s, ids, 64, logits, 0, &err);
        for (int i = 0; i < 96; i++) finite &= isfinite(logits[i]) != 0;
    }
    CHECK(!rc && finite, "%s", err.message);
    CHECK(needle_session_position(s) == 640, "position %u", needle_session_position(s));
    CHECK(nd_session_memory(s) == before && before < 256 * 1024, "memory %zu then %zu", before,
          nd_session_memory(s));
    int32_t bad = 96;
    CHECK(needle_session_feed(s, &bad, 1, NULL, 0, &err) == NEEDLE_E_ARGUMENT, "token out of range");
    CHECK(needle_session_position(s) == 640, "a failed feed changes nothing");
    needle_session_free(s);
    free(logits);
    unload(&l);
}

static void test_rewind(void) {
    loaded l = load(tiny(8, 3), 31);
    if (!l.model) { CHECK(0, "load"); free(l.bytes); return; }
    enum { n = 50 };
    uint32_t V = 96;
    int32_t ids[n], other[n];
    sequence(ids, n, V, 41);
    sequence(other, n, V, 42);
    float *ref = malloc(sizeof(float) * n * V), *got = malloc(sizeof(float) * n * V);
    needle_error err = {0};
    run(l.model, 12, 3, 1, ids, n, 0, ref);
    needle_session *s = needle_session_new(l.model, 12, 3, 1, &err);
    /* A detour of other tokens, rewound, then the real continuation. */
    needle_session_feed(s, ids, 30, NULL, 0, &err);
    needle_session_feed(s, other, 5, NULL, 0, &err);
    CHECK(needle_session_rewind(s, 30, &err) == NEEDLE_OK, "%s", err.message);
    needle_session_feed(s, ids + 30, n - 30, got, 1, &err);
    CHECK(rel_diff(got, ref + 30 * V, (size_t)(n - 30) * V) <= 1e-5, "rewind by 5");
    /* Back to just after the sinks, far outside the window: the agent's reset. */
    CHECK(needle_session_rewind(s, 3, &err) == NEEDLE_OK, "%s", err.message);
    needle_session_feed(s, ids + 3, 20, got, 1, &err);
    CHECK(rel_diff(got, ref + 3 * V, 20 * (size_t)V) <= 1e-5, "rewind to the sinks");
    CHECK(needle_session_rewind(s, 24, &err) == NEEDLE_E_ARGUMENT, "past the end");
    CHECK(needle_session_rewind(s, 20, &err) == NEEDLE_OK, "re-fed positions count: %s", err.message);
    needle_session_feed(s, ids + 20, 30, got, 1, &err);
    CHECK(rel_diff(got, ref + 20 * V, 30 * (size_t)V) <= 1e-5, "rewind after a rewind");
    CHECK(needle_session_rewind(s, 20, &err) == NEEDLE_E_CONTEXT, "left the window: %s", err.message);
    CHECK(needle_session_rewind(s, 0, &err) == NEEDLE_OK, "to the start");
    needle_session_feed(s, ids, 10, got, 1, &err);
    CHECK(rel_diff(got, ref, 10 * (size_t)V) <= 1e-5, "from the start");
    needle_session_free(s);
    free(ref), free(got);
    unload(&l);
}

static void test_set_sinks(void) {
    loaded l = load(tiny(8, 2), 33);
    if (!l.model) { CHECK(0, "load"); free(l.bytes); return; }
    enum { n = 40 };
    uint32_t V = 96;
    int32_t ids[n];
    sequence(ids, n, V, 43);
    float *ref = malloc(sizeof(float) * n * V), *got = malloc(sizeof(float) * n * V);
    needle_error err = {0};
    run(l.model, 8, 5, 1, ids, n, 0, ref);
    needle_session *s = needle_session_new(l.model, 8, 0, 1, &err);
    needle_session_feed(s, ids, 7, got, 1, &err);
    CHECK(needle_session_set_sinks(s, 5, &err) == NEEDLE_OK, "%s", err.message);
    needle_session_feed(s, ids + 7, n - 7, got + 7 * V, 1, &err);
    CHECK(rel_diff(got, ref, (size_t)n * V) <= 1e-5, "pinned after feeding = pinned from the start");
    CHECK(needle_session_set_sinks(s, 2, &err) == NEEDLE_E_ARGUMENT, "cannot unpin fed positions");
    CHECK(needle_session_set_sinks(s, 30, &err) == NEEDLE_E_CONTEXT, "%s", err.message);
    needle_session_free(s);
    free(ref), free(got);
    unload(&l);
}

static void test_heads(void) {
    loaded l = load(tiny(8, 2), 51);
    if (!l.model) { CHECK(0, "load"); free(l.bytes); return; }
    needle_error err = {0};
    int32_t ids[20];
    float e1[128], e2[128], conf = -1, conf2 = -1;
    sequence(ids, 20, 96, 61);
    needle_session *s = needle_session_new(l.model, 0, 0, 1, &err);
    CHECK(needle_session_head(s, ND_HEAD_CONTRASTIVE, e1, &err) == NEEDLE_E_CONTEXT, "nothing pooled");
    needle_session_feed(s, ids, 20, NULL, 0, &err);
    CHECK(needle_session_head(s, ND_HEAD_CONTRASTIVE, e1, &err) == NEEDLE_OK, "%s", err.message);
    CHECK(needle_session_head(s, ND_HEAD_CONFIDENCE, &conf, &err) == NEEDLE_OK, "%s", err.message);
    double norm = 0;
    for (int i = 0; i < 128; i++) norm += (double)e1[i] * e1[i];
    CHECK(fabs(norm - 1) < 1e-5 && conf > 0 && conf < 1, "norm %g conf %g", norm, conf);
    /* Token by token pools the same cells. */
    needle_session_rewind(s, 0, &err);
    for (int i = 0; i < 20; i++) needle_session_feed(s, ids + i, 1, NULL, 0, &err);
    needle_session_head(s, ND_HEAD_CONTRASTIVE, e2, &err);
    needle_session_head(s, ND_HEAD_CONFIDENCE, &conf2, &err);
    CHECK(rel_diff(e2, e1, 128) < 1e-5 && fabsf(conf - conf2) < 1e-5, "decode pooling");
    /* A pooling mark restores the state of a shorter sequence. */
    void *mark = malloc(nd_session_pool_bytes(l.model));
    needle_session_rewind(s, 0, &err);
    needle_session_feed(s, ids, 10, NULL, 0, &err);
    nd_session_pool_save(s, mark);
    needle_session_head(s, ND_HEAD_CONTRASTIVE, e2, &err);
    needle_session *fresh = needle_session_new(l.model, 0, 0, 1, &err);
    needle_session_feed(fresh, ids, 10, NULL, 0, &err);
    needle_session_head(fresh, ND_HEAD_CONTRASTIVE, e1, &err);
    needle_session_free(fresh);
    CHECK(!memcmp(e1, e2, sizeof e1), "rewinding to 0 restarts pooling");
    needle_session_feed(s, ids + 10, 10, NULL, 0, &err);
    needle_session_head(s, ND_HEAD_CONTRASTIVE, e1, &err);
    CHECK(rel_diff(e1, e2, 128) > 1e-4, "more cells change the embedding");
    nd_session_pool_restore(s, mark);
    needle_session_head(s, ND_HEAD_CONTRASTIVE, e1, &err);
    CHECK(!memcmp(e1, e2, sizeof e1), "restored");
    needle_session_pool_reset(s);
    CHECK(needle_session_head(s, ND_HEAD_CONFIDENCE, &conf, &err) == NEEDLE_E_CONTEXT, "reset");
    CHECK(needle_session_head(s, 7, &conf, &err) == NEEDLE_E_ARGUMENT, "unknown kind");
    CHECK(nd_head_outputs(l.model, ND_HEAD_CONTRASTIVE) == 128 && nd_head_outputs(l.model, 2) == 1, "outputs");
    free(mark);
    needle_session_free(s);
    unload(&l);
    config c = tiny(8, 2);
    c.heads = 0;
    l = load(c, 52);
    s = l.model ? needle_session_new(l.model, 0, 0, 1, &err) : NULL;
    if (s) needle_session_feed(s, ids, 5, NULL, 0, &err);
    CHECK(s && needle_session_head(s, ND_HEAD_CONFIDENCE, &conf, &err) == NEEDLE_E_ARGUMENT, "no heads");
    needle_session_free(s);
    if (l.model) unload(&l);
}

static void test_load_errors(void) {
    config c = tiny(8, 2);
    size_t size;
    uint8_t *b = write_archive(&c, 3, &size);
    needle_error err = {0};
    put32(b + 4 * 4, 5); /* kvBits 5 */
    CHECK(!needle_model_load(b, size, &err) && err.code == NEEDLE_E_FORMAT, "kvBits 5: %s", err.message);
    put32(b + 4 * 4, 8);
    needle_model *m = needle_model_load(b, size, &err);
    CHECK(m && needle_tokenizer_size(needle_model_tokenizer(m)) == 96 && m->window == 64, "%s", err.message);
    needle_model_free(m);
    free(b);
}

/* The released geometry (spec section 1) with random weights: the session of
 * the fast mode and the exact one stay within the wasm memory budget. */
static void test_released_memory(void) {
    config c = {.g = {.kv_window = 256, .kv_bits = 8, .vocab = 8192, .hidden = 512,
                      .query_heads = 8, .kv_heads = 4, .layers = 27, .head_dim = 64,
                      .max_seq = 2048, .hadamard_dim = 512, .lanes = 4, .engram_slots = 8192,
                      .engram_sub = 128, .engram_tables = 4, .engram_taps = 4,
                      .engram_dilation = 3, .order_count = 2, .orders = {2, 3},
                      .site_count = 2, .sites = {2, 15}, .rope_theta = 100000.0f},
                .bits = 2, .group = 128, .heads = 2};
    loaded l = load(c, 71);
    if (!l.model) { CHECK(0, "load"); free(l.bytes); return; }
    needle_session *fast = needle_session_new(l.model, 0, 0, 0, NULL);
    needle_session *exact = needle_session_new(l.model, 0, 0, 1, NULL);
    size_t mf = nd_session_memory(fast), me = nd_session_memory(exact);
    printf("  released geometry: session %.2f MB fast, %.2f MB exact\n", mf / 1e6, me / 1e6);
    CHECK(mf < 6000000 && me < 17000000, "fast %zu exact %zu", mf, me);
    int32_t ids[20];
    sequence(ids, 20, 8192, 3);
    float *logits = malloc(sizeof(float) * 8192);
    CHECK(needle_session_feed(fast, ids, 20, logits, 0, NULL) == NEEDLE_OK && isfinite(logits[0]), "runs");
    free(logits);
    needle_session_free(fast);
    needle_session_free(exact);
    unload(&l);
}

/* Seeded sampling after a prefill, in fast and exact mode. Prints the tokens
 * on "tokens ..." lines: tests/js/c-units.test.js checks that the native and
 * the wasm build print the same ones (same seed, same tokens everywhere). */
static void test_seeded_generation(void) {
    enum { PROMPT = 12, STEPS = 48 };
    loaded l = load(tiny(8, 2), 21);
    if (!l.model) { CHECK(0, "load failed"); return; }
    uint32_t vocab = l.model->archive.geometry.vocab;
    for (int exact = 0; exact <= 1; exact++) {
        int32_t runs[2][STEPS];
        for (int run = 0; run < 2; run++) {
            int32_t ids[PROMPT + STEPS];
            sequence(ids, PROMPT, vocab, 5);
            float *logits = malloc(vocab * sizeof *logits);
            needle_error err;
            needle_session *s = needle_session_new(l.model, 0, 0, exact, &err);
            needle_sampler *sampler = needle_sampler_new(vocab, 3.0f, 0, 0.98f, 0, 1.3f, 7);
            int ok = logits && s && sampler && needle_session_feed(s, ids, PROMPT, logits, 0, &err) == NEEDLE_OK;
            for (int i = 0; ok && i < STEPS; i++) {
                ids[PROMPT + i] = runs[run][i] = needle_sampler_sample(sampler, logits, ids, PROMPT + i);
                ok = needle_session_feed(s, &runs[run][i], 1, logits, 0, &err) == NEEDLE_OK;
            }
            CHECK(ok, "generation failed (exact=%d)", exact);
            needle_sampler_free(sampler);
            needle_session_free(s);
            free(logits);
        }
        CHECK(!memcmp(runs[0], runs[1], sizeof runs[0]), "two runs with one seed differ (exact=%d)", exact);
        printf("tokens exact=%d:", exact);
        for (int i = 0; i < STEPS; i++) printf(" %d", runs[0][i]);
        printf("\n");
    }
    unload(&l);
}

int main(void) {
    RUN(test_load_errors);
    RUN(test_seeded_generation);
    RUN(test_prefill_equals_decode);
    RUN(test_kv_formats_differ);
    RUN(test_window_and_sinks);
    RUN(test_long_and_bounded);
    RUN(test_rewind);
    RUN(test_set_sinks);
    RUN(test_heads);
    RUN(test_released_memory);
    return check_report();
}
