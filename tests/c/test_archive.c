/* test_archive.c: the .cact loader against a valid tiny archive and many
 * malformed ones. The archive is built in memory by a small writer of its own
 * (an independent reading of spec section 2), then mutated one way per test;
 * every rejection must name the right tensor or header field.
 *
 * Run natively under ASan/UBSan (build/native/test_archive) and as a WASI
 * module (build/wasi/test_archive.wasm). `test_archive --write-seed FILE`
 * writes the valid archive to FILE (the fuzzer's seed corpus) and exits. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h"
#include "check.h"
#include "model/model.h"
#include "needle.h"

/* ---- a minimal archive writer ------------------------------------------ */

typedef struct {
    uint8_t dtype, rank;
    uint32_t shape[4];
} spec;

typedef struct {
    uint8_t *b;
    size_t size;
    uint32_t count;
    nd_geometry g;
} arc;

static void put32(uint8_t *p, uint32_t v) {
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static void put64(uint8_t *p, uint64_t v) {
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static uint64_t get64(const uint8_t *p) {
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

static spec s1(uint8_t dt, uint32_t a) { return (spec){dt, 1, {a, 0, 0, 0}}; }
static spec s2(uint8_t dt, uint32_t a, uint32_t b) { return (spec){dt, 2, {a, b, 0, 0}}; }
static spec s3(uint8_t dt, uint32_t a, uint32_t b, uint32_t c) { return (spec){dt, 3, {a, b, c, 0}}; }

/* The canonical tensor list (spec section 2), written out longhand. */
static uint32_t canonical(const nd_geometry *g, uint32_t nheads, const uint32_t *kinds, spec *out) {
    uint32_t n = 0, d = g->hidden, q = g->query_heads * g->head_dim, kv = g->kv_heads * g->head_dim;
    uint32_t L = g->layers, ln = g->lanes;
    out[n++] = s2(ND_CQ, g->vocab, d);
    for (uint32_t i = 0; i < L; i++) {
        out[n++] = s1(ND_FP16, d);
        out[n++] = s2(ND_CQ, q, d);
        out[n++] = s2(ND_CQ, kv, d);
        out[n++] = s2(ND_CQ, kv, d);
        out[n++] = s1(ND_FP16, g->head_dim);
        out[n++] = s1(ND_FP16, g->head_dim);
        out[n++] = s2(ND_CQ, q, d);
        out[n++] = s2(ND_CQ, d, q);
        out[n++] = s1(ND_FP16, d);
        out[n++] = s1(ND_FP16, 1);
        out[n++] = s1(ND_FP16, d);
        for (int k = 0; k < 3; k++) out[n++] = s1(ND_FP16, g->hadamard_dim);
    }
    for (int k = 0; k < 3; k++) out[n++] = s1(ND_FP16, L);
    out[n++] = s2(ND_FP16, L, ln);
    out[n++] = s2(ND_FP16, L, ln);
    out[n++] = s3(ND_FP16, L, ln, ln);
    out[n++] = s2(ND_CQ, L * ln, ln * d);
    out[n++] = s2(ND_CQ, L * ln, ln * d);
    out[n++] = s2(ND_CQ, L * ln * ln, ln * d);
    for (uint32_t s = 0; s < g->site_count; s++) {
        out[n++] = s2(ND_CQ, g->engram_tables * g->engram_slots, g->engram_sub);
        out[n++] = s2(ND_CQ, d, g->engram_tables * g->engram_sub);
        out[n++] = s2(ND_CQ, d, g->engram_tables * g->engram_sub);
        out[n++] = s2(ND_FP16, g->engram_taps, d);
    }
    out[n++] = s1(ND_FP16, d);
    if (nheads) out[n++] = s1(ND_FP16, nheads);
    for (uint32_t h = 0; h < nheads; h++) {
        uint32_t P = kinds[h] == 1 ? 4 : 8, o = kinds[h] == 1 ? 128 : 1;
        out[n++] = s2(ND_FP16, P, d);
        out[n++] = s2(ND_FP16, o, P * d);
        out[n++] = s1(ND_FP16, o);
    }
    out[n++] = (spec){ND_RAW, 0, {0}};
    return n;
}

static uint64_t blob_bytes(const spec *s, uint32_t bits, uint32_t group) {
    if (s->dtype == ND_RAW) return 24 + 7 + 1; /* one tokenizer piece */
    if (s->dtype == ND_FP16) {
        uint64_t n = 1;
        for (int i = 0; i < s->rank; i++) n *= s->shape[i];
        return 2 * n;
    }
    uint64_t groups = (s->shape[1] + group - 1) / group, sb = bits == 5 ? 2 : bits;
    return s->shape[0] * (groups * group * sb / 8) + s->shape[0] * groups * 2;
}

static void fill_blob(uint8_t *p, const spec *s, uint64_t n, uint32_t bits, uint32_t group,
                      uint32_t index, uint32_t *seed) {
    if (s->dtype == ND_FP16) {
        for (uint64_t i = 0; i < n / 2; i++) p[2 * i] = (uint8_t)(i * 7), p[2 * i + 1] = 0x38;
        return;
    }
    if (s->dtype == ND_RAW) {
        put32(p, 1); /* one piece "a", score 0, type normal */
        p[24 + 5] = 1;
        p[24 + 7] = 'a';
        return;
    }
    uint64_t groups = (s->shape[1] + group - 1) / group, norms = s->shape[0] * groups;
    uint64_t packed = n - 2 * norms;
    static const uint8_t ternary[3] = {0, 1, 3};
    for (uint64_t i = 0; i < packed; i++) {
        uint8_t v = 0;
        for (int k = 0; k < 4; k++) {
            *seed = *seed * 1664525u + 1013904223u + index;
            v |= (uint8_t)((bits == 5 ? ternary[(*seed >> 24) % 3] : (*seed >> 24) & 3) << (2 * k));
        }
        p[i] = v;
    }
    for (uint64_t i = 0; i < norms; i++) p[packed + 2 * i] = 0, p[packed + 2 * i + 1] = 0x3c;
}

static nd_geometry tiny_geometry(void) {
    return (nd_geometry){
        .codebook_length = 28, .kv_window = 16, .kv_bits = 8, .vocab = 64, .hidden = 32,
        .query_heads = 2, .kv_heads = 1, .layers = 2, .head_dim = 16, .max_seq = 64,
        .hadamard_dim = 32, .lanes = 2, .engram_slots = 16, .engram_sub = 8, .engram_tables = 4,
        .engram_taps = 2, .engram_dilation = 3, .order_count = 2, .orders = {2, 3},
        .site_count = 2, .sites = {0, 1}, .rope_theta = 10000.0f};
}

static void write_header(uint8_t *b, const nd_geometry *g, uint32_t count) {
    const uint32_t f[29] = {ND_TAG, count, g->codebook_length, g->kv_window, g->kv_bits, g->vocab,
        g->hidden, g->query_heads, g->kv_heads, g->layers, g->head_dim, g->max_seq,
        g->hadamard_dim, g->lanes, g->engram_slots, g->engram_sub, g->engram_tables,
        g->engram_taps, g->engram_dilation, g->order_count, g->orders[0], g->orders[1],
        g->orders[2], g->orders[3], g->site_count, g->sites[0], g->sites[1], g->sites[2],
        g->sites[3]};
    for (int i = 0; i < 29; i++) put32(b + 4 * i, f[i]);
    uint32_t t;
    memcpy(&t, &g->rope_theta, 4);
    put32(b + 116, t);
    for (int i = 0; i < 28; i++) {
        float level = (float)(i % 4) * 0.25f - 0.4f;
        memcpy(&t, &level, 4);
        put32(b + 120 + 4 * i, t);
    }
}

/* Builds the tiny archive with nheads heads of the given kinds. */
static arc build(uint32_t nheads, const uint32_t *kinds, uint32_t bits, uint32_t group) {
    static spec specs[512];
    arc a = {.g = tiny_geometry()};
    a.count = canonical(&a.g, nheads, kinds, specs);
    uint64_t pos = 232 + 44ull * a.count, offsets[512];
    for (uint32_t i = 0; i < a.count; i++) {
        pos = (pos + 63) / 64 * 64;
        offsets[i] = pos;
        pos += blob_bytes(&specs[i], bits, group);
    }
    a.size = pos;
    a.b = calloc(1, a.size);
    write_header(a.b, &a.g, a.count);
    uint32_t seed = 1;
    for (uint32_t i = 0; i < a.count; i++) {
        uint8_t *r = a.b + 232 + 44 * i;
        uint64_t n = blob_bytes(&specs[i], bits, group);
        r[0] = specs[i].dtype;
        r[1] = specs[i].rank;
        for (int k = 0; k < 4; k++) put32(r + 4 + 4 * k, specs[i].shape[k]);
        put64(r + 20, offsets[i]);
        put64(r + 28, n);
        if (specs[i].dtype == ND_CQ) put32(r + 36, group), put32(r + 40, bits);
        fill_blob(a.b + offsets[i], &specs[i], n, bits, group, i, &seed);
    }
    if (nheads) { /* manifest codes as fp16 */
        uint8_t *m = a.b + get64(a.b + 232 + 44 * (a.count - 2 - 3 * nheads) + 20);
        for (uint32_t h = 0; h < nheads; h++) m[2 * h] = 0, m[2 * h + 1] = kinds[h] == 1 ? 0x3c : 0x40;
    }
    return a;
}

static const uint32_t both[2] = {ND_HEAD_CONTRASTIVE, ND_HEAD_CONFIDENCE};
static arc tiny(void) { return build(2, both, 2, 16); }

static uint8_t *rec(arc *a, uint32_t i) { return a->b + 232 + 44 * i; }
static uint8_t *blob(arc *a, uint32_t i) { return a->b + get64(rec(a, i) + 20); }
static void set_field(arc *a, int field, uint32_t v) { put32(a->b + 4 * field, v); }

/* Parses a (possibly cut) archive; expects NEEDLE_E_FORMAT and every needle. */
static int rejects(const uint8_t *b, size_t size, const char *n1, const char *n2) {
    nd_archive x;
    needle_error err = {0};
    int rc = nd_archive_parse(b, size, &x, &err);
    nd_archive_free(&x);
    int ok = rc == NEEDLE_E_FORMAT && strstr(err.message, n1) && (!n2 || strstr(err.message, n2));
    if (!ok) printf("  got rc %d: %s\n  wanted: %s / %s\n", rc, err.message, n1, n2 ? n2 : "");
    return ok;
}
#define REJECTS(a, n1, n2) CHECK(rejects((a).b, (a).size, n1, n2), "message")

/* Canonical indices in the tiny geometry (L = 2, sites 2, heads 2). */
enum { LAYER1 = 1 + 14, MHC = 1 + 28, SITES = MHC + 9, FINAL = SITES + 8, MANIFEST = FINAL + 1,
       HEAD0 = MANIFEST + 1, HEAD1 = HEAD0 + 3, TOKENIZER = HEAD1 + 3, COUNT = TOKENIZER + 1 };

/* ---- the valid archive ------------------------------------------------- */

static void test_valid(void) {
    arc a = tiny();
    nd_archive x;
    needle_error err = {0};
    int rc = nd_archive_parse(a.b, a.size, &x, &err);
    CHECK(rc == NEEDLE_OK, "%s", err.message);
    if (rc == NEEDLE_OK) {
        CHECK(x.geometry.tensor_count == COUNT && a.count == COUNT, "count %u", x.geometry.tensor_count);
        CHECK(x.head_count == 2 && x.head_kinds[0] == 1 && x.head_kinds[1] == 2, "heads %u", x.head_count);
        CHECK(x.weight_group == 16, "group %u", x.weight_group);
        CHECK(x.geometry.sites[1] == 1 && x.geometry.rope_theta == 10000.0f, "geometry");
        CHECK(fabsf(x.codebook[1] + 0.15f) < 1e-6f, "codebook %g", x.codebook[1]);
        CHECK(nd_final_norm_tensor(&x.geometry) == FINAL && nd_tokenizer_tensor(&x) == TOKENIZER, "index");
        CHECK(nd_layer_tensor(&x.geometry, 1, ND_L_K) == LAYER1 + 2, "layer index");
        CHECK(nd_head_tensor(&x.geometry, 1, ND_H_BIAS) == HEAD1 + 2, "head index");
        CHECK(x.records[TOKENIZER].dtype == ND_RAW && x.records[0].bits == 2, "records");
        float v[32];
        CHECK(nd_record_dense(&x, FINAL, v) == NEEDLE_OK && v[0] == 0.5f, "dense %g", v[0]);
        CHECK(nd_record_dense(&x, 0, v) == NEEDLE_E_ARGUMENT, "dense of CQ");
    }
    nd_archive_free(&x);
    free(a.b);
}

static void test_names(void) {
    arc a = tiny();
    nd_archive x;
    nd_archive_parse(a.b, a.size, &x, NULL);
    const struct { uint32_t i; const char *name; } want[] = {
        {0, "embedding"}, {LAYER1 + 2, "layer 1 k_proj"}, {1, "layer 0 norm_in"},
        {LAYER1 + 13, "layer 1 d3"}, {MHC + 8, "mhc phi_res"}, {SITES + 6, "engram site 1 value_proj"},
        {FINAL, "final_norm"}, {MANIFEST, "heads manifest"}, {HEAD0 + 1, "head 0 (contrastive) proj"},
        {HEAD1, "head 1 (confidence) probes"}, {TOKENIZER, "tokenizer"}};
    for (size_t k = 0; k < sizeof want / sizeof want[0]; k++) {
        char buf[64];
        nd_tensor_name(&x, want[k].i, buf, sizeof buf);
        CHECK(!strcmp(buf, want[k].name), "%u: %s", want[k].i, buf);
    }
    nd_archive_free(&x);
    free(a.b);
}

static void test_no_heads_and_ternary(void) {
    arc a = build(0, NULL, 5, 32);
    nd_archive x;
    needle_error err = {0};
    CHECK(nd_archive_parse(a.b, a.size, &x, &err) == NEEDLE_OK, "%s", err.message);
    CHECK(x.head_count == 0 && x.records[0].bits == 5 && x.weight_group == 32, "no heads");
    nd_archive_free(&x);
    free(a.b);
    uint32_t conf = ND_HEAD_CONFIDENCE;
    a = build(1, &conf, 3, 8);
    CHECK(nd_archive_parse(a.b, a.size, &x, &err) == NEEDLE_OK, "%s", err.message);
    CHECK(x.head_count == 1 && x.head_kinds[0] == 2, "one head");
    nd_archive_free(&x);
    free(a.b);
}

/* needle_model_geometry / tensor_json over a model holding only the archive. */
static void test_inspect(void) {
    arc a = tiny();
    struct needle_model m;
    memset(&m, 0, sizeof m);
    CHECK(nd_archive_parse(a.b, a.size, &m.archive, NULL) == NEEDLE_OK, "parse");
    CHECK(needle_model_geometry(&m, "vocabulary") == 64, "vocab");
    CHECK(needle_model_geometry(&m, "hadamardDimension") == 32, "N");
    CHECK(needle_model_geometry(&m, "orders[1]") == 3, "orders");
    CHECK(needle_model_geometry(&m, "sites[1]") == 1, "sites");
    CHECK(needle_model_geometry(&m, "ropeTheta") == 10000, "theta");
    CHECK(needle_model_geometry(&m, "headCount") == 2, "heads");
    CHECK(needle_model_geometry(&m, "nope") == -1, "unknown");
    CHECK(needle_model_tensor_count(&m) == COUNT, "count");
    char buf[256];
    size_t n = needle_model_tensor_json(&m, LAYER1 + 2, buf, sizeof buf);
    char want[256];
    snprintf(want, sizeof want,
             "{\"index\":%d,\"name\":\"layer 1 k_proj\",\"dtype\":\"CQ\",\"shape\":[16,32],"
             "\"bits\":2,\"group\":16,\"offset\":%llu,\"bytes\":%d}",
             LAYER1 + 2, (unsigned long long)get64(rec(&a, LAYER1 + 2) + 20), 16 * 8 + 16 * 2 * 2);
    CHECK(n == strlen(want) && !strcmp(buf, want), "%s", buf);
    CHECK(needle_model_tensor_json(&m, COUNT, buf, sizeof buf) == 0, "index out of range");
    CHECK(needle_model_tensor_json(&m, 0, buf, 20) == 0 && buf[0] == 0, "small buffer");
    nd_archive_free(&m.archive);
    needle_error *e = needle_error_new();
    CHECK(e && e->code == 0, "error_new");
    needle_error_free(e);
    free(a.b);
}

/* ---- truncation -------------------------------------------------------- */

static void test_truncated_sections(void) {
    arc a = tiny();
    CHECK(rejects(a.b, 0, "file is 0 bytes", NULL), "empty");
    CHECK(rejects(a.b, 100, "file is 100 bytes, shorter than the 232-byte header", NULL), "in header");
    CHECK(rejects(a.b, 200, "file is 200 bytes", "232"), "in codebooks");
    CHECK(rejects(a.b, 232 + 44 * 10 + 5, "shorter than its directory", NULL), "in directory");
    uint64_t mid = get64(rec(&a, LAYER1 + 1) + 20) + 9;
    CHECK(rejects(a.b, mid, "tensor 16 (layer 1 q_proj): offset", "runs past the end"), "in blob");
    CHECK(rejects(a.b, a.size - 1, "tensor 54 (tokenizer): offset", "runs past the end"), "in tokenizer");
    free(a.b);
}

/* Every cut through header and directory, then a stride through the blobs,
 * fails cleanly (ASan checks no byte past the cut is read). */
static void test_every_prefix(void) {
    arc a = tiny();
    int bad = 0;
    for (size_t n = 0; n < a.size; n += n < 232 + 44 * COUNT + 200 ? 1 : 97) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, a.b, n);
        nd_archive x;
        needle_error err = {0};
        if (nd_archive_parse(copy, n, &x, &err) != NEEDLE_E_FORMAT || !err.message[0]) bad++;
        nd_archive_free(&x);
        free(copy);
    }
    CHECK(bad == 0, "%d prefixes accepted or unexplained", bad);
    free(a.b);
}

/* ---- header fields ----------------------------------------------------- */

typedef struct {
    int field;
    uint32_t value;
    const char *n1, *n2;
} field_case;

static void test_header_fields(void) {
    const field_case cases[] = {
        {0, 0x12345678, "header field tag (offset 0) is 0x12345678", "not a .cact"},
        {5, 0, "header field vocabulary (offset 20) is 0", "1..1048576"},
        {6, 1u << 31, "header field hidden (offset 24) is 2147483648", NULL},
        {9, 1000000, "header field layers (offset 36) is 1000000", NULL},
        {8, 3, "header field kvHeads (offset 32) is 3: queryHeads 2 is not a multiple", NULL},
        {10, 15, "header field headDimension (offset 40) is 15: must be even", NULL},
        {12, 64, "header field hadamardDimension (offset 48) is 64: expected 32", NULL},
        {4, 5, "header field kvBits (offset 16) is 5", NULL},
        {13, 5, "header field lanes (offset 52) is 5", NULL},
        {2, 27, "header field codebookLength (offset 8) is 27", NULL},
        {19, 0, "header field orderCount (offset 76) is 0", NULL},
        {21, 0, "header field orders[1] (offset 84) is 0", NULL},
        {16, 3, "header field engramTables (offset 64) is 3: not a multiple of orderCount 2", NULL},
        {18, 0, "header field engramDilation (offset 72) is 0", NULL},
        {17, 0, "header field engramTaps (offset 68) is 0", NULL},
        {26, 0, "header field sites[1] (offset 104) is 0: repeats sites[0]", NULL},
        {26, 2, "header field sites[1] (offset 104) is 2: not below layers 2", NULL},
        {24, 5, "header field siteCount (offset 96) is 5", NULL},
        {1, COUNT + 1, "header field tensorCount (offset 4) is 56", "expected 48 (no heads), 52 (1 head) or 55 (2 heads)"},
        {1, COUNT - 1, "header field tensorCount (offset 4) is 54", NULL},
        {1, 0, "header field tensorCount (offset 4) is 0", NULL},
        {7, 300, "header field queryHeads (offset 28) is 300", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arc a = tiny();
        set_field(&a, cases[i].field, cases[i].value);
        CHECK(rejects(a.b, a.size, cases[i].n1, cases[i].n2), "case %zu", i);
        free(a.b);
    }
}

static void test_float_fields(void) {
    arc a = tiny();
    float bad[3] = {NAN, 0.0f, -INFINITY};
    for (int k = 0; k < 3; k++) {
        uint32_t t;
        memcpy(&t, &bad[k], 4);
        put32(a.b + 116, t);
        REJECTS(a, "header field ropeTheta (offset 116)", "expected a finite value > 0");
    }
    free(a.b);
    a = tiny();
    put32(a.b + 120 + 4 * 9, 0x7f800000u);
    REJECTS(a, "codebook entry 9 (offset 156) is inf", NULL);
    free(a.b);
}

/* Bounds chosen so engine sizes fit: the product limits are enforced too. */
static void test_product_limits(void) {
    arc a = tiny();
    set_field(&a, 7, 256), set_field(&a, 8, 1), set_field(&a, 10, 512);
    REJECTS(a, "header field headDimension (offset 40) is 512: queryHeads*headDimension 131072", NULL);
    free(a.b);
    a = tiny();
    set_field(&a, 16, 64), set_field(&a, 15, 2048);
    REJECTS(a, "header field engramSubDimension (offset 60) is 2048", "exceeds 65536");
    free(a.b);
}

/* ---- records ----------------------------------------------------------- */

static void test_record_kinds(void) {
    arc a = tiny();
    rec(&a, 0)[1] = 3;
    REJECTS(a, "tensor 0 (embedding): rank is 3, expected 2", NULL);
    free(a.b);
    a = tiny();
    put32(rec(&a, LAYER1 + 2) + 4, 999);
    REJECTS(a, "tensor 17 (layer 1 k_proj): shape[0] is 999, expected 16", NULL);
    free(a.b);
    a = tiny();
    rec(&a, 1)[0] = ND_CQ;
    REJECTS(a, "tensor 1 (layer 0 norm_in): dtype is 3 (CQ), expected 1 (FP16)", NULL);
    free(a.b);
    a = tiny();
    rec(&a, MHC + 8)[0] = ND_FP16;
    REJECTS(a, "tensor 37 (mhc phi_res): dtype is 1 (FP16), expected 3 (CQ)", NULL);
    free(a.b);
    a = tiny();
    put32(rec(&a, MHC + 5) + 12, 3);
    REJECTS(a, "tensor 34 (mhc b_res): shape[2] is 3, expected 2", NULL);
    free(a.b);
    a = tiny();
    put32(rec(&a, SITES + 4) + 4, 65);
    REJECTS(a, "tensor 42 (engram site 1 tables): shape[0] is 65, expected 64", NULL);
    free(a.b);
    a = tiny();
    rec(&a, TOKENIZER)[0] = ND_FP16;
    REJECTS(a, "tensor 54 (tokenizer): dtype is 1 (FP16), expected 4 (RAW)", NULL);
    free(a.b);
    a = tiny();
    rec(&a, 5)[1] = 7;
    REJECTS(a, "tensor 5 (layer 0 q_norm): rank is 7", NULL);
    free(a.b);
}

static void test_cq_fields(void) {
    const struct { uint32_t index; int at; uint32_t v; const char *n1; } cases[] = {
        {2, 40, 1, "tensor 2 (layer 0 q_proj): bits is 1, expected 2, 3, 4 or 5"},
        {0, 40, 6, "tensor 0 (embedding): bits is 6"},
        {3, 36, 100, "tensor 3 (layer 0 k_proj): group is 100, expected a power of two in 8..1024"},
        {SITES, 36, 2048, "tensor 38 (engram site 0 tables): group is 2048"},
        {7, 36, 4, "tensor 7 (layer 0 gate_proj): group is 4"},
        {8, 36, 32, "tensor 8 (layer 0 out_proj): bytes is 384, expected 320"}, /* group 32: 1 group/row */
        {MHC + 6, 40, 4, "tensor 35 (mhc phi_pre): bytes is"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        arc a = tiny();
        put32(rec(&a, cases[i].index) + cases[i].at, cases[i].v);
        CHECK(rejects(a.b, a.size, cases[i].n1, NULL), "case %zu", i);
        free(a.b);
    }
    arc a = tiny();
    put64(rec(&a, 4) + 28, get64(rec(&a, 4) + 28) + 1);
    REJECTS(a, "tensor 4 (layer 0 v_proj): bytes is 193, expected 192", NULL);
    free(a.b);
    a = tiny();
    put64(rec(&a, 10) + 28, 4);
    REJECTS(a, "tensor 10 (layer 0 attn_gate): bytes is 4, expected 2 (2 per element)", NULL);
    free(a.b);
}

static void test_extents(void) {
    arc a = tiny();
    put64(rec(&a, 10) + 20, a.size + 64);
    REJECTS(a, "tensor 10 (layer 0 attn_gate): offset", "runs past the end of the file");
    free(a.b);
    a = tiny();
    put64(rec(&a, 1) + 20, UINT64_MAX - 15); /* offset + bytes wraps around u64 */
    REJECTS(a, "tensor 1 (layer 0 norm_in): offset 18446744073709551600 + bytes 64", "runs past");
    free(a.b);
    a = tiny();
    put64(rec(&a, 0) + 28, UINT64_MAX);
    REJECTS(a, "tensor 0 (embedding): bytes is 18446744073709551615", NULL);
    free(a.b);
    a = tiny();
    put64(rec(&a, 7) + 20, 100);
    REJECTS(a, "tensor 7 (layer 0 gate_proj): offset 100 lies inside the header", NULL);
    free(a.b);
    a = tiny();
    put64(rec(&a, 5) + 20, get64(rec(&a, 4) + 20) + 2); /* q_norm inside v_proj */
    REJECTS(a, "tensor 5 (layer 0 q_norm): bytes", "overlap tensor 4 (layer 0 v_proj)");
    free(a.b);
    a = tiny();
    put64(rec(&a, TOKENIZER) + 20, get64(rec(&a, FINAL) + 20)); /* tokenizer over final_norm */
    REJECTS(a, "overlap tensor", "final_norm");
    free(a.b);
}

/* ---- contents ---------------------------------------------------------- */

static void test_contents(void) {
    arc a = tiny();
    uint8_t *p = blob(&a, LAYER1 + 8);
    p[6] = 0x00, p[7] = 0x7e;
    REJECTS(a, "tensor 23 (layer 1 post_norm): element 3 is nan (fp16 0x7e00)", NULL);
    free(a.b);
    a = tiny();
    p = blob(&a, HEAD0 + 1);
    p[2 * 100] = 0x00, p[2 * 100 + 1] = 0xfc;
    REJECTS(a, "tensor 49 (head 0 (contrastive) proj): element 100 is -inf", NULL);
    free(a.b);
    a = tiny(); /* the first norm of k_proj row 0 sits after 16 rows of 8 packed bytes */
    p = blob(&a, 3) + 16 * 8;
    p[0] = 0x00, p[1] = 0x7c;
    REJECTS(a, "tensor 3 (layer 0 k_proj): norm 0 is inf", NULL);
    free(a.b);
}

static void test_ternary_crumb(void) {
    arc a = build(2, both, 5, 16);
    uint64_t off = get64(rec(&a, LAYER1 + 3) + 20) + 5;
    a.b[off] = (uint8_t)((a.b[off] & ~0x30u) | 0x20u); /* crumb 2 in bits 4..5 */
    char want[96];
    snprintf(want, sizeof want, "tensor 18 (layer 1 v_proj): ternary crumb 2 (invalid) at byte offset %llu, bits 4..5",
             (unsigned long long)off);
    REJECTS(a, want, NULL);
    free(a.b);
}

static void test_manifest(void) {
    arc a = tiny();
    uint8_t *m = blob(&a, MANIFEST);
    m[1] = 0x42; /* 3.0 */
    REJECTS(a, "tensor 47 (heads manifest): element 0 is 3 (fp16 0x4200), expected 1 (contrastive) or 2", NULL);
    free(a.b);
    a = tiny();
    m = blob(&a, MANIFEST);
    m[3] = 0x3c; /* codes (1, 1) */
    REJECTS(a, "tensor 47 (heads manifest): element 1 repeats code 1", NULL);
    free(a.b);
    a = tiny();
    m = blob(&a, MANIFEST);
    m[1] = 0x40, m[3] = 0x3c; /* codes swapped: head 0 is now the confidence head */
    REJECTS(a, "tensor 48 (head 0 (confidence) probes): shape[0] is 4, expected 8", NULL);
    free(a.b);
    a = tiny();
    put32(rec(&a, HEAD1 + 1) + 4, 128);
    REJECTS(a, "tensor 52 (head 1 (confidence) proj): shape[0] is 128, expected 1", NULL);
    free(a.b);
}

/* ---- streaming prefix check -------------------------------------------- */

static void test_prefix(void) {
    arc a = tiny();
    needle_error err = {0};
    size_t dir_end = 232 + 44 * COUNT;
    int incomplete = 0, other = 0;
    for (size_t n = 0; n < dir_end; n++) {
        int rc = nd_archive_check_prefix(a.b, n, a.size, &err);
        incomplete += rc == NEEDLE_E_INCOMPLETE;
        other += rc != NEEDLE_E_INCOMPLETE;
    }
    CHECK(incomplete == (int)dir_end && other == 0, "%d prefixes not incomplete", other);
    CHECK(nd_archive_check_prefix(a.b, dir_end, a.size, &err) == NEEDLE_OK, "%s", err.message);
    CHECK(nd_archive_check_prefix(a.b, a.size, a.size, &err) == NEEDLE_OK, "%s", err.message);
    CHECK(needle_archive_check_prefix(a.b, dir_end, (double)a.size, &err) == NEEDLE_OK, "wrapper");
    CHECK(needle_archive_check_prefix(a.b, dir_end, 0.5, &err) == NEEDLE_E_ARGUMENT, "fraction");
    CHECK(nd_archive_check_prefix(a.b, 10, 5, &err) == NEEDLE_E_ARGUMENT, "prefix > total");

    set_field(&a, 0, 0x04034b50); /* a zip file fails at its fourth byte */
    CHECK(nd_archive_check_prefix(a.b, 3, a.size, &err) == NEEDLE_E_INCOMPLETE, "3 bytes");
    CHECK(nd_archive_check_prefix(a.b, 4, a.size, &err) == NEEDLE_E_FORMAT &&
          strstr(err.message, "header field tag"), "%s", err.message);
    free(a.b);

    a = tiny(); /* a bad record fails as soon as the record is present */
    put32(rec(&a, 24) + 4, 7);
    size_t at = 232 + 44 * 25;
    CHECK(nd_archive_check_prefix(a.b, at - 1, a.size, &err) == NEEDLE_E_INCOMPLETE, "before");
    CHECK(nd_archive_check_prefix(a.b, at, a.size, &err) == NEEDLE_E_FORMAT &&
          strstr(err.message, "tensor 24 (layer 1 attn_gate): shape[0] is 7, expected 1"), "%s", err.message);
    free(a.b);

    a = tiny(); /* blobs past the declared total size */
    CHECK(nd_archive_check_prefix(a.b, dir_end, a.size - 1, &err) == NEEDLE_E_FORMAT &&
          strstr(err.message, "tensor 54 (tokenizer)"), "%s", err.message);
    CHECK(nd_archive_check_prefix(a.b, 300, 400, &err) == NEEDLE_E_FORMAT &&
          strstr(err.message, "shorter than its directory"), "%s", err.message);
    free(a.b);

    a = tiny(); /* head kinds inferred from probe counts before the manifest arrives */
    put32(rec(&a, HEAD0) + 4, 5);
    CHECK(nd_archive_check_prefix(a.b, dir_end, a.size, &err) == NEEDLE_E_FORMAT &&
          strstr(err.message, "tensor 48 (head 0 probes): shape[0] is 5, expected 4 (contrastive) or 8"),
          "%s", err.message);
    free(a.b);
}

static int write_seed(const char *path) {
    arc a = tiny();
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(a.b, 1, a.size, f) == a.size;
    if (f) fclose(f);
    free(a.b);
    return ok ? 0 : 1;
}

int main(int argc, char **argv) {
    if (argc == 3 && !strcmp(argv[1], "--write-seed")) return write_seed(argv[2]);
    RUN(test_valid);
    RUN(test_names);
    RUN(test_no_heads_and_ternary);
    RUN(test_inspect);
    RUN(test_truncated_sections);
    RUN(test_every_prefix);
    RUN(test_header_fields);
    RUN(test_float_fields);
    RUN(test_product_limits);
    RUN(test_record_kinds);
    RUN(test_cq_fields);
    RUN(test_extents);
    RUN(test_contents);
    RUN(test_ternary_crumb);
    RUN(test_manifest);
    RUN(test_prefix);
    return check_report();
}
