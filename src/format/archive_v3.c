/* archive_v3.c: the Needle 3 header and canonical walk (needle3-model.md
 * sections 2 and 3).
 *
 * The header is 48 u32 fields and the f32 rope theta (196 bytes). Each layer
 * holds 27 tensors, or 24 without the q/k/v convolution; the two Hadamard
 * MLP permutations (FP32) follow the mHC tensors; each probe head carries its
 * own probe count k and query count q, read off its records. Every field is
 * range-checked before anything is derived from it, as for Needle 2; the
 * container checks (extents, overlaps, finite values) are archive.c's.
 *
 * Compiled only with ND_NEEDLE3 (native builds and the needle3 wasm variant),
 * so the shipped Needle 2 modules stay within their size budget.
 */
#ifdef ND_NEEDLE3
#include <math.h>
#include <stdio.h>

#include "format/archive.h"
#include "format/archive_check.h"
#include "format/fp16.h"

enum {
    G_TAG, G_COUNT, G_CODEBOOK, G_WINDOW, G_KV_BITS, G_VOCAB, G_OUT_VOCAB, G_HIDDEN, G_QHEADS,
    G_KVHEADS, G_LAYERS, G_QK, G_VD, G_MAX_SEQ, G_HADAMARD, G_LANES, G_SLIDING, G_MASK_LO,
    G_MASK_HI, G_CONV, G_SLOTS, G_SUB, G_TABLES, G_TAPS, G_DILATION, G_SEED_HEADS, G_ORDER_COUNT,
    G_ORDERS, G_SITE_COUNT = G_ORDERS + 4, G_SITES, G_THETA = G_SITES + ND_MAX_SITES
};
static const char *const field_names[G_ORDERS] = {
    "tag", "tensorCount", "codebookLength", "kvWindow", "kvBits", "vocabulary", "outVocabulary",
    "hidden", "queryHeads", "kvHeads", "layers", "qkHeadDimension", "vHeadDimension",
    "maximumSequence", "hadamardDimension", "lanes", "slidingWindow", "globalMaskLo",
    "globalMaskHi", "qkvConvTaps", "engramSlots", "engramSubDimension", "engramTables",
    "engramTaps", "engramDilation", "engramSeedHeads", "orderCount"};

#define MAX_LAYERS3 64u /* the global mask has 64 bits */

ND_PRINTF(4, 5)
static int fail(needle_error *err, uint32_t field, uint32_t value, const char *fmt, ...) {
    char name[24];
    if (field < G_ORDERS) snprintf(name, sizeof name, "%s", field_names[field]);
    else if (field < G_SITE_COUNT) snprintf(name, sizeof name, "orders[%u]", field - G_ORDERS);
    else if (field == G_SITE_COUNT) snprintf(name, sizeof name, "siteCount");
    else snprintf(name, sizeof name, "sites[%u]", field - G_SITES);
    va_list ap;
    va_start(ap, fmt);
    int rc = nd_field_vfail(err, name, field, value, fmt, ap);
    va_end(ap);
    return rc;
}

/* ---- header ------------------------------------------------------------ */

static const struct { uint8_t field; uint32_t lo, hi; } field_ranges[] = {
    {G_CODEBOOK, ND_CODEBOOK_LENGTH, ND_CODEBOOK_LENGTH}, {G_WINDOW, 0, ND_MAX_SEQ},
    {G_VOCAB, 1, ND_MAX_VOCAB}, {G_OUT_VOCAB, 0, ND_MAX_VOCAB}, {G_HIDDEN, 1, ND_MAX_HIDDEN},
    {G_QHEADS, 1, ND_MAX_HEADS}, {G_KVHEADS, 1, ND_MAX_HEADS}, {G_LAYERS, 1, MAX_LAYERS3},
    {G_QK, 2, ND_MAX_HEAD_DIM}, {G_VD, 1, ND_MAX_HEAD_DIM}, {G_MAX_SEQ, 1, ND_MAX_SEQ},
    {G_LANES, 1, ND_MAX_LANES}, {G_SLIDING, 0, ND_MAX_SEQ}, {G_CONV, 0, ND_MAX_TAPS},
    {G_SLOTS, 1, ND_MAX_SLOTS}, {G_SUB, 1, ND_MAX_SUB}, {G_TABLES, 1, ND_MAX_TABLES},
    {G_TAPS, 1, ND_MAX_TAPS}, {G_DILATION, 1, ND_MAX_DILATION}, {G_SEED_HEADS, 0, ND_MAX_TABLES},
    {G_ORDER_COUNT, 1, 4}, {G_SITE_COUNT, 0, ND_MAX_SITES},
};

static void decode(const uint8_t *p, nd_geometry *g) {
    uint32_t f[G_THETA];
    for (int i = 0; i < G_THETA; i++) f[i] = nd_rd_u32(p + 4 * i);
    *g = (nd_geometry){
        .generation = 3, .tensor_count = f[G_COUNT], .codebook_length = f[G_CODEBOOK],
        .kv_window = f[G_WINDOW], .kv_bits = f[G_KV_BITS], .vocab = f[G_VOCAB],
        .out_vocab = f[G_OUT_VOCAB] ? f[G_OUT_VOCAB] : f[G_VOCAB], .hidden = f[G_HIDDEN],
        .query_heads = f[G_QHEADS], .kv_heads = f[G_KVHEADS], .layers = f[G_LAYERS],
        .head_dim = f[G_QK], .v_head_dim = f[G_VD], .max_seq = f[G_MAX_SEQ],
        .hadamard_dim = f[G_HADAMARD], .lanes = f[G_LANES], .sliding_window = f[G_SLIDING],
        .global_mask = f[G_MASK_LO] | (uint64_t)f[G_MASK_HI] << 32, .conv_taps = f[G_CONV],
        .engram_slots = f[G_SLOTS], .engram_sub = f[G_SUB], .engram_tables = f[G_TABLES],
        .engram_taps = f[G_TAPS], .engram_dilation = f[G_DILATION],
        .engram_seed_heads = f[G_SEED_HEADS], .order_count = f[G_ORDER_COUNT],
        .site_count = f[G_SITE_COUNT], .rope_theta = nd_rd_f32(p + 4 * G_THETA),
        .per_layer = f[G_CONV] ? ND_PER_LAYER3 : ND_PER_LAYER3 - 3, .perm_count = ND_PERMS3,
        .per_head = ND_H3_PER_HEAD};
    for (int i = 0; i < 4; i++) g->orders[i] = f[G_ORDERS + i];
    for (uint32_t i = 0; i < ND_MAX_SITES; i++) g->sites[i] = f[G_SITES + i];
}

static int check_attention(const nd_geometry *g, const uint8_t *p, needle_error *err) {
    if (g->kv_bits != 2 && g->kv_bits != 3 && g->kv_bits != 4 && g->kv_bits != 8)
        return fail(err, G_KV_BITS, g->kv_bits, "expected 2, 3, 4 or 8");
    uint32_t out_vocab = nd_rd_u32(p + 4 * G_OUT_VOCAB);
    if (out_vocab > g->vocab)
        return fail(err, G_OUT_VOCAB, out_vocab, "exceeds vocabulary %u (0 means all of it)", g->vocab);
    if (g->query_heads % g->kv_heads)
        return fail(err, G_KVHEADS, g->kv_heads, "queryHeads %u is not a multiple", g->query_heads);
    if (g->head_dim % 2)
        return fail(err, G_QK, g->head_dim, "must be even (RoPE rotates halves)");
    uint32_t widest = g->head_dim > g->v_head_dim ? g->head_dim : g->v_head_dim;
    if ((uint64_t)g->query_heads * widest > ND_MAX_ATTN_WIDTH)
        return fail(err, widest == g->head_dim ? G_QK : G_VD, widest,
                    "queryHeads*%u exceeds %u", widest, ND_MAX_ATTN_WIDTH);
    if (g->hadamard_dim != nd_next_pow2(g->hidden))
        return fail(err, G_HADAMARD, g->hadamard_dim, "expected %u (the next power of two >= hidden %u)",
                    nd_next_pow2(g->hidden), g->hidden);
    if (g->layers < 64 && g->global_mask >> g->layers) {
        uint32_t field = g->layers < 32 && (uint32_t)g->global_mask >> g->layers ? G_MASK_LO : G_MASK_HI;
        return fail(err, field, nd_rd_u32(p + 4 * field), "marks a layer at or beyond layers %u as global",
                    g->layers);
    }
    if (!(isfinite(g->rope_theta) && g->rope_theta > 0)) return nd_theta_fail(err, G_THETA, g->rope_theta);
    return NEEDLE_OK;
}

static int check_engram(const nd_geometry *g, needle_error *err) {
    if (g->engram_tables % g->order_count)
        return fail(err, G_TABLES, g->engram_tables, "not a multiple of orderCount %u", g->order_count);
    if ((uint64_t)g->engram_tables * g->engram_sub > ND_MAX_ENGRAM_WIDTH)
        return fail(err, G_SUB, g->engram_sub, "engramTables*engramSubDimension %llu exceeds %u",
                    (unsigned long long)g->engram_tables * g->engram_sub, ND_MAX_ENGRAM_WIDTH);
    /* The architecture hard-wires 4 value taps dilated by the largest order. */
    if (g->engram_taps != 4) return fail(err, G_TAPS, g->engram_taps, "expected 4");
    uint32_t largest = 0;
    for (uint32_t i = 0; i < g->order_count; i++) {
        if (g->orders[i] < 1 || g->orders[i] > ND_MAX_ORDER)
            return fail(err, G_ORDERS + i, g->orders[i], "expected 1..%u", ND_MAX_ORDER);
        if (g->orders[i] > largest) largest = g->orders[i];
    }
    if (g->engram_dilation != largest)
        return fail(err, G_DILATION, g->engram_dilation, "expected %u (the largest order)", largest);
    for (uint32_t i = 0; i < g->site_count; i++) {
        if (g->sites[i] >= g->layers)
            return fail(err, G_SITES + i, g->sites[i], "not below layers %u", g->layers);
        for (uint32_t j = 0; j < i; j++)
            if (g->sites[j] == g->sites[i]) return fail(err, G_SITES + i, g->sites[i], "repeats sites[%u]", j);
    }
    return NEEDLE_OK;
}

/* Tensors the heads may add after final_norm: the manifest, then 6 per head
 * and 7 for the router, which comes last (codes 1, 2, 3 in that order). */
static const uint32_t head_tensor_sums[] = {6, 7, 12, 13, 19};
static const uint32_t head_counts[] = {1, 1, 2, 2, 3};

static uint32_t base_count(const nd_geometry *g) { return nd_final_norm_tensor(g) + 2; }
static int has_router(const nd_geometry *g) {
    return g->tensor_count > base_count(g) && (g->tensor_count - base_count(g) - 1) % 6 == 1;
}

static int check_count(nd_check *c) {
    uint32_t base = base_count(&c->g), n = c->g.tensor_count;
    c->head_count = 0;
    if (n == base) return NEEDLE_OK;
    for (int i = 0; i < 5; i++)
        if (n == base + 1 + head_tensor_sums[i]) return c->head_count = head_counts[i], NEEDLE_OK;
    return fail(c->err, G_COUNT, n,
                "expected %u (no heads), or %u plus the heads' 6, 7, 12, 13 or 19 tensors, for this geometry",
                base, base + 1);
}

int nd_v3_check_header(nd_check *c) {
    const uint8_t *p = c->bytes;
    for (size_t i = 0; i < sizeof field_ranges / sizeof field_ranges[0]; i++) {
        uint32_t v = nd_rd_u32(p + 4 * field_ranges[i].field);
        if (v < field_ranges[i].lo || v > field_ranges[i].hi)
            return fail(c->err, field_ranges[i].field, v, "expected %u..%u", field_ranges[i].lo,
                        field_ranges[i].hi);
    }
    decode(p, &c->g);
    int rc = check_attention(&c->g, p, c->err);
    if (!rc) rc = check_engram(&c->g, c->err);
    if (!rc) rc = check_count(c);
    return rc;
}

/* ---- the walk ---------------------------------------------------------- */

/* The Kronecker split of the MLP width: N = ba * bb, ba = 2^floor(bitlen(N-1)/2). */
static uint32_t kron_a(uint32_t n) {
    uint32_t bits = 0;
    while (bits < 32 && (n - 1) >> bits) bits++;
    return 1u << (bits / 2);
}

static nd_expect expect_layer(const nd_geometry *g, uint32_t which) {
    uint32_t d = g->hidden, N = g->hadamard_dim, C = g->conv_taps;
    uint32_t qw = g->query_heads * g->head_dim, kw = g->kv_heads * g->head_dim;
    uint32_t vw = g->kv_heads * g->v_head_dim, ow = g->query_heads * g->v_head_dim;
    uint32_t ba = kron_a(N), bb = N / ba;
    switch (which) {
    case ND_L3_Q: return nd_expect_2(ND_CQ, qw, d);
    case ND_L3_K: return nd_expect_2(ND_CQ, kw, d);
    case ND_L3_V: return nd_expect_2(ND_CQ, vw, d);
    case ND_L3_Q_TAPS: return nd_expect_2(ND_FP16, C, qw);
    case ND_L3_K_TAPS: return nd_expect_2(ND_FP16, C, kw);
    case ND_L3_V_TAPS: return nd_expect_2(ND_FP16, C, vw);
    case ND_L3_Q_NORM: case ND_L3_K_NORM: return nd_expect_1(g->head_dim);
    case ND_L3_GATE: return nd_expect_2(ND_CQ, ow, d);
    case ND_L3_OUT: return nd_expect_2(ND_CQ, d, ow);
    case ND_L3_ATTN_GATE: return nd_expect_1(1);
    case ND_L3_D1: case ND_L3_D2: case ND_L3_B2: case ND_L3_D3: case ND_L3_D4: return nd_expect_1(N);
    case ND_L3_W1A: case ND_L3_W2A: case ND_L3_W3A: return nd_expect_2(ND_FP16, ba, ba);
    case ND_L3_W1B: case ND_L3_W2B: case ND_L3_W3B: return nd_expect_2(ND_FP16, bb, bb);
    case ND_L3_COND_V: return nd_expect_2(ND_FP16, d, ND_COND_RANK);
    case ND_L3_COND_U: return nd_expect_2(ND_FP16, ND_COND_RANK, N);
    default: return nd_expect_1(d); /* norm_in, post_norm, pre_hada */
    }
}

/* Layer position of a walk index: ND_L3_*, the taps skipped without conv. */
static uint32_t layer_which(const nd_geometry *g, uint32_t index) {
    uint32_t which = (index - 1) % g->per_layer;
    return !g->conv_taps && which > ND_L3_V ? which + 3 : which;
}

/* Head h and position ND_H3_* of a walk index inside the heads. */
static void head_at(const nd_geometry *g, uint32_t head_count, uint32_t index, uint32_t *h,
                    uint32_t *which) {
    uint32_t off = index - nd_head_tensor(g, 0, 0);
    *h = off / ND_H3_PER_HEAD;
    *which = off % ND_H3_PER_HEAD;
    if (*h >= head_count) *h = head_count - 1, *which = ND_H3_CALIBRATION;
}

/* The probes fix k: CQ [(layers+1)*k, hidden], or the older FP16 [layers+1, k, hidden]. */
static int expect_probes(nd_check *c, uint32_t index, uint32_t h, const nd_record *r, nd_expect *e) {
    uint32_t cells = c->g.layers + 1, d = c->g.hidden, k;
    if (r->dtype == ND_FP16 || r->dtype == ND_FP32) {
        k = r->rank == 3 ? r->shape[1] : 0;
        if (r->rank != 3)
            return nd_rec_fail(c, index, "rank is %u, expected 3 (the older dense layout "
                               "[layers+1, k, hidden]) or a CQ record", r->rank);
        *e = nd_expect_3(cells, k, d);
    } else {
        uint32_t rows = r->rank == 2 ? r->shape[0] : 0;
        k = rows / cells;
        if (r->dtype == ND_CQ && r->rank == 2 && (rows % cells || !k))
            return nd_rec_fail(c, index, "shape[0] is %u, expected (layers+1)*k = %u*k", rows, cells);
        *e = nd_expect_2(ND_CQ, cells * (k ? k : 1), d);
    }
    if (!k || k > ND_MAX_HEAD_CELLS)
        return nd_rec_fail(c, index, "has %u probes per cell, expected 1..%u", k, ND_MAX_HEAD_CELLS);
    c->head_probes[h] = k;
    return NEEDLE_OK;
}

/* The projection's rows are the head's outputs: 1 for confidence, 3 for the
 * router, any width from 2 to ND_MAX_EMBED_DIM for the embedding (an export
 * chooses its embedding_dim; the released file's is 128). They fix the kind
 * when the manifest was not yet read (a streamed prefix). */
static int expect_proj(nd_check *c, uint32_t index, uint32_t h, const nd_record *r, nd_expect *e) {
    int router_slot = has_router(&c->g) && h + 1 == c->head_count;
    uint32_t out = r->rank == 2 ? r->shape[0] : 0;
    uint32_t kind = router_slot ? (out == 3 ? ND_HEAD_ROUTER : 0)
                    : out == 1 ? ND_HEAD_CONFIDENCE : out >= 2 && out <= ND_MAX_EMBED_DIM ? ND_HEAD_CONTRASTIVE : 0;
    if (!kind || (c->kinds[h] && kind != c->kinds[h])) {
        uint32_t want = c->kinds[h] ? c->kinds[h] : router_slot ? ND_HEAD_ROUTER : 0;
        return nd_rec_fail(c, index, "shape[0] is %u, expected %s", out,
                           want == ND_HEAD_ROUTER ? "3 (router)" : want == ND_HEAD_CONFIDENCE ? "1 (confidence)"
                           : want == ND_HEAD_CONTRASTIVE ? "2..1024 (embedding)" : "2..1024 (embedding) or 1 (confidence)");
    }
    c->kinds[h] = kind;
    c->head_outs[h] = out;
    *e = (nd_expect){ND_CQ, 2, 1, {out, c->head_queries[h] * c->g.hidden, 0, 0}};
    return NEEDLE_OK;
}

static int expect_head(nd_check *c, uint32_t index, const nd_record *r, nd_expect *e) {
    uint32_t h, which, cells = c->g.layers + 1;
    head_at(&c->g, c->head_count, index, &h, &which);
    uint32_t k = c->head_probes[h], q = c->head_queries[h];
    switch (which) {
    case ND_H3_PROBES: return expect_probes(c, index, h, r, e);
    case ND_H3_GAIN: *e = nd_expect_2(ND_FP16, cells, k); break;
    case ND_H3_QUERY:
        q = r->rank == 2 ? r->shape[0] : 0;
        if (r->rank == 2 && (!q || q > ND_MAX_HEAD_CELLS))
            return nd_rec_fail(c, index, "shape[0] is %u, expected 1..%u queries", q, ND_MAX_HEAD_CELLS);
        c->head_queries[h] = q;
        *e = (nd_expect){ND_CQ, 2, 1, {q ? q : 1, c->g.hidden, 0, 0}};
        break;
    case ND_H3_ROW_BIAS: *e = nd_expect_3(q, cells, k); break;
    case ND_H3_PROJ: return expect_proj(c, index, h, r, e);
    case ND_H3_BIAS: *e = nd_expect_1(c->head_outs[h] ? c->head_outs[h] : 1); break;
    default: *e = nd_expect_1(3); /* the router's calibration */
    }
    return NEEDLE_OK;
}

int nd_v3_expect(nd_check *c, uint32_t index, const nd_record *r, nd_expect *e) {
    const nd_geometry *g = &c->g;
    if (index < nd_mhc_tensor(g, 0)) *e = expect_layer(g, layer_which(g, index));
    else if (index < nd_site_tensor(g, 0, 0)) *e = (nd_expect){ND_FP32, 1, 0, {g->hadamard_dim, 0, 0, 0}};
    else return expect_head(c, index, r, e);
    return NEEDLE_OK;
}

/* Codes 1 (embedding), 2 (confidence), 3 (router), rising, the router only
 * where the count put a 7-tensor head. */
int nd_v3_read_manifest(nd_check *c, uint32_t index, const nd_record *r) {
    const uint8_t *p = c->bytes + r->offset;
    int router = has_router(&c->g);
    for (uint32_t h = 0, last = 0; h < c->head_count; h++) {
        float v = r->dtype == ND_FP32 ? nd_rd_f32(p + 4 * h)
                                      : nd_fp16_to_f32((uint16_t)(p[2 * h] | p[2 * h + 1] << 8));
        uint32_t code = v == 1.0f ? 1 : v == 2.0f ? 2 : v == 3.0f ? 3 : 0;
        int want_router = router && h + 1 == c->head_count;
        if (!code || (code == ND_HEAD_ROUTER) != want_router)
            return nd_rec_fail(c, index, "element %u is %g, expected %s (the tensor count gives this "
                               "head %u tensors)", h, (double)v,
                               want_router ? "3 (router)" : "1 (embedding) or 2 (confidence)",
                               want_router ? 7 : 6);
        if (code <= last)
            return nd_rec_fail(c, index, "element %u is %u after %u: codes must rise (1, 2, 3)", h, code, last);
        c->kinds[h] = last = code;
    }
    return NEEDLE_OK;
}

/* Each permutation holds every index 0..N-1 once, as exact floats. */
int nd_v3_check_contents(const nd_check *c, uint32_t index, const nd_record *r) {
    if (index < nd_perm_tensor(&c->g, 0) || index >= nd_site_tensor(&c->g, 0, 0)) return NEEDLE_OK;
    uint32_t n = c->g.hadamard_dim;
    uint8_t seen[2 * ND_MAX_HIDDEN / 8] = {0};
    for (uint32_t i = 0; i < n; i++) {
        float v = nd_rd_f32(c->bytes + r->offset + 4 * (uint64_t)i);
        if (!(v >= 0 && v < (float)n && v == floorf(v)))
            return nd_rec_fail(c, index, "element %u is %g, expected an index in 0..%u", i, (double)v, n - 1);
        uint32_t j = (uint32_t)v;
        if (seen[j / 8] >> (j % 8) & 1)
            return nd_rec_fail(c, index, "element %u repeats index %u: not a permutation", i, j);
        seen[j / 8] |= (uint8_t)(1u << (j % 8));
    }
    return NEEDLE_OK;
}

/* ---- names ------------------------------------------------------------- */

static const char *const layer_names[ND_PER_LAYER3] = {
    "norm_in", "q_proj", "k_proj", "v_proj", "q_taps", "k_taps", "v_taps", "q_norm", "k_norm",
    "gate_proj", "out_proj", "post_norm", "attn_gate", "pre_hada", "d1", "d2", "b2", "d3", "d4",
    "w1a", "w1b", "w2a", "w2b", "w3a", "w3b", "cond_v", "cond_u"};
static const char *const head_names[ND_H3_PER_HEAD + 1] = {
    "probes", "gain", "query", "row_bias", "proj", "bias", "calibration"};
static const char *const kind_names[4] = {"", " (embedding)", " (confidence)", " (router)"};

void nd_v3_name(const nd_geometry *g, uint32_t head_count, const uint32_t kinds[3],
                uint32_t index, char *buf, size_t cap) {
    if (index < nd_mhc_tensor(g, 0)) {
        snprintf(buf, cap, "layer %u %s", (index - 1) / g->per_layer, layer_names[layer_which(g, index)]);
    } else if (index < nd_site_tensor(g, 0, 0)) {
        snprintf(buf, cap, "hada_p%u", index - nd_perm_tensor(g, 0) + 1);
    } else {
        uint32_t h, which;
        head_at(g, head_count, index, &h, &which);
        snprintf(buf, cap, "head %u%s %s", h, kind_names[kinds[h] <= 3 ? kinds[h] : 0], head_names[which]);
    }
}

#endif /* ND_NEEDLE3 */
