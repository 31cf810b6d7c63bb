/* archive.c: parsing and validation of the .cact archive.
 *
 * Layout (little-endian): a header (Needle 2: 120 bytes, 29 u32 fields then
 * ropeTheta as f32; Needle 3: 196 bytes, 48 u32 then the f32), 28 f32
 * codebook levels, tensorCount records of 44 bytes, then the blobs the
 * records point at. The tag says which generation. Records carry no names: a
 * tensor's meaning, dtype and shape follow from its position (spec section
 * 2), so every record is checked against what its position requires. This
 * file holds the container and Needle 2's header and walk; archive_v3.c holds
 * Needle 3's.
 *
 * Archive bytes are hostile. Every header field is range-checked before a size
 * is derived from it (bounds in archive.h), every derived size uses checked
 * 64-bit arithmetic, and every record is checked against its position and the
 * file bounds before a pointer into its blob is formed. Every error is one
 * line naming the tensor (index and canonical name) or header field, the
 * field and the value.
 */
#include "format/archive.h"
#include "format/archive_check.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/fp16.h"

/* ---- little-endian reads (byte by byte: the bytes may be unaligned) ---- */

static uint64_t rd_u64(const uint8_t *p) { return nd_rd_u32(p) | (uint64_t)nd_rd_u32(p + 4) << 32; }

/* Checked u64 arithmetic: returns 0 on overflow. */
static int mul_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (a && b > UINT64_MAX / a) return 0;
    *out = a * b;
    return 1;
}
static int add_u64(uint64_t a, uint64_t b, uint64_t *out) {
    if (b > UINT64_MAX - a) return 0;
    *out = a + b;
    return 1;
}

int nd_fail(needle_error *err, int code, const char *fmt, ...) {
    if (err) {
        va_list ap;
        va_start(ap, fmt);
        err->code = code;
        vsnprintf(err->message, sizeof err->message, fmt, ap);
        va_end(ap);
    }
    return code;
}

/* ---- canonical positions ---------------------------------------------- */

uint32_t nd_layer_tensor(const nd_geometry *g, uint32_t layer, uint32_t which) {
    /* Needle 3 without the convolution has no taps: later positions move up. */
    if (g->generation == 3 && !g->conv_taps && which > ND_L3_V) which -= 3;
    return 1 + layer * g->per_layer + which;
}
uint32_t nd_mhc_tensor(const nd_geometry *g, uint32_t which) {
    return 1 + g->layers * g->per_layer + which;
}
uint32_t nd_perm_tensor(const nd_geometry *g, uint32_t which) {
    return nd_mhc_tensor(g, ND_MHC_COUNT) + which;
}
uint32_t nd_site_tensor(const nd_geometry *g, uint32_t site, uint32_t which) {
    return nd_mhc_tensor(g, ND_MHC_COUNT) + g->perm_count + site * ND_PER_SITE + which;
}
uint32_t nd_final_norm_tensor(const nd_geometry *g) { return nd_site_tensor(g, g->site_count, 0); }
uint32_t nd_manifest_tensor(const nd_geometry *g) { return nd_final_norm_tensor(g) + 1; }
uint32_t nd_head_tensor(const nd_geometry *g, uint32_t head, uint32_t which) {
    /* Only the last head may have more than per_head tensors (the router). */
    return nd_manifest_tensor(g) + 1 + head * g->per_head + which;
}
uint32_t nd_tokenizer_tensor(const nd_archive *a) { return a->geometry.tensor_count - 1; }

static const char *const layer_names[ND_PER_LAYER] = {
    "norm_in", "q_proj", "k_proj", "v_proj", "q_norm", "k_norm", "gate_proj",
    "out_proj", "post_norm", "attn_gate", "pre_hada", "d1", "d2", "d3"};
static const char *const mhc_names[ND_MHC_COUNT] = {
    "a_pre", "a_post", "a_res", "b_pre", "b_post", "b_res", "phi_pre", "phi_post", "phi_res"};
static const char *const site_names[ND_PER_SITE] = {"tables", "key_proj", "value_proj", "taps"};
static const char *const head_names[ND_PER_HEAD] = {"probes", "proj", "bias"};
static const char *const kind_names[3] = {"", " (contrastive)", " (confidence)"};

/* The name of position `index` given the geometry and what is known of the
 * heads (kinds[h] = 0 while the manifest has not been read). */
static void name_of(const nd_geometry *g, uint32_t head_count, const uint32_t kinds[3],
                    uint32_t index, char *buf, size_t cap) {
    uint32_t mhc = nd_mhc_tensor(g, 0), site = nd_site_tensor(g, 0, 0);
    uint32_t final = nd_final_norm_tensor(g), heads = nd_head_tensor(g, 0, 0);
    int v3 = g->generation == 3;
    if (!cap) return;
    if (index == 0) {
        snprintf(buf, cap, "embedding");
    } else if (index < mhc && v3) {
        nd_v3_name(g, head_count, kinds, index, buf, cap);
    } else if (index < mhc) {
        snprintf(buf, cap, "layer %u %s", (index - 1) / ND_PER_LAYER,
                 layer_names[(index - 1) % ND_PER_LAYER]);
    } else if (index < mhc + ND_MHC_COUNT) {
        snprintf(buf, cap, "mhc %s", mhc_names[index - mhc]);
    } else if (index < site) {
        nd_v3_name(g, head_count, kinds, index, buf, cap); /* the permutations */
    } else if (index < final) {
        snprintf(buf, cap, "engram site %u %s", (index - site) / ND_PER_SITE,
                 site_names[(index - site) % ND_PER_SITE]);
    } else if (index == final) {
        snprintf(buf, cap, "final_norm");
    } else if (index + 1 == g->tensor_count) {
        snprintf(buf, cap, "tokenizer");
    } else if (head_count && index == final + 1) {
        snprintf(buf, cap, "heads manifest");
    } else if (head_count && index < g->tensor_count && v3) {
        nd_v3_name(g, head_count, kinds, index, buf, cap);
    } else if (head_count && index < heads + head_count * ND_PER_HEAD) {
        uint32_t h = (index - heads) / ND_PER_HEAD, kind = kinds[h] <= 2 ? kinds[h] : 0;
        snprintf(buf, cap, "head %u%s %s", h, kind_names[kind],
                 head_names[(index - heads) % ND_PER_HEAD]);
    } else {
        snprintf(buf, cap, "beyond the canonical tensors");
    }
}

void nd_tensor_name(const nd_archive *a, uint32_t index, char *buf, size_t cap) {
    name_of(&a->geometry, a->head_count, a->head_kinds, index, buf, cap);
}

/* ---- errors ------------------------------------------------------------ */

int nd_rec_fail(const nd_check *c, uint32_t index, const char *fmt, ...) {
    char name[64], what[192];
    va_list ap;
    name_of(&c->g, c->head_count, c->kinds, index, name, sizeof name);
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    return nd_fail(c->err, NEEDLE_E_FORMAT, "tensor %u (%s): %s", index, name, what);
}

/* ---- header ------------------------------------------------------------ */

enum {
    F_TAG, F_COUNT, F_CODEBOOK, F_WINDOW, F_KV_BITS, F_VOCAB, F_HIDDEN, F_QHEADS, F_KVHEADS,
    F_LAYERS, F_HEAD_DIM, F_MAX_SEQ, F_HADAMARD, F_LANES, F_SLOTS, F_SUB, F_TABLES, F_TAPS,
    F_DILATION, F_ORDER_COUNT, F_ORDERS, F_SITE_COUNT = F_ORDERS + 4, F_SITES, F_THETA = F_SITES + 4,
    F_FIELDS
};
static const char *const field_names[F_FIELDS] = {
    "tag", "tensorCount", "codebookLength", "kvWindow", "kvBits", "vocabulary", "hidden",
    "queryHeads", "kvHeads", "layers", "headDimension", "maximumSequence", "hadamardDimension",
    "lanes", "engramSlots", "engramSubDimension", "engramTables", "engramTaps", "engramDilation",
    "orderCount", "orders[0]", "orders[1]", "orders[2]", "orders[3]", "siteCount", "sites[0]",
    "sites[1]", "sites[2]", "sites[3]", "ropeTheta"};

int nd_field_vfail(needle_error *err, const char *name, uint32_t field, uint32_t value,
                   const char *fmt, va_list ap) {
    char what[160];
    vsnprintf(what, sizeof what, fmt, ap);
    return nd_fail(err, NEEDLE_E_FORMAT, "header field %s (offset %u) is %u: %s", name, field * 4,
                   value, what);
}

ND_PRINTF(4, 5)
static int field_fail(needle_error *err, int field, uint32_t value, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int rc = nd_field_vfail(err, field_names[field], (uint32_t)field, value, fmt, ap);
    va_end(ap);
    return rc;
}

int nd_theta_fail(needle_error *err, uint32_t field, float theta) {
    uint32_t bits;
    memcpy(&bits, &theta, 4);
    return nd_fail(err, NEEDLE_E_FORMAT,
                   "header field ropeTheta (offset %u) is %g (0x%08x): expected a finite value > 0",
                   field * 4, (double)theta, bits);
}

static void decode_geometry(const uint8_t *p, nd_geometry *g) {
    uint32_t f[F_THETA];
    for (int i = 0; i < F_THETA; i++) f[i] = nd_rd_u32(p + 4 * i);
    *g = (nd_geometry){
        .tensor_count = f[F_COUNT], .codebook_length = f[F_CODEBOOK], .kv_window = f[F_WINDOW],
        .kv_bits = f[F_KV_BITS], .vocab = f[F_VOCAB], .hidden = f[F_HIDDEN],
        .query_heads = f[F_QHEADS], .kv_heads = f[F_KVHEADS], .layers = f[F_LAYERS],
        .head_dim = f[F_HEAD_DIM], .max_seq = f[F_MAX_SEQ], .hadamard_dim = f[F_HADAMARD],
        .lanes = f[F_LANES], .engram_slots = f[F_SLOTS], .engram_sub = f[F_SUB],
        .engram_tables = f[F_TABLES], .engram_taps = f[F_TAPS], .engram_dilation = f[F_DILATION],
        .order_count = f[F_ORDER_COUNT], .site_count = f[F_SITE_COUNT],
        .rope_theta = nd_rd_f32(p + 4 * F_THETA), .generation = 2, .out_vocab = f[F_VOCAB],
        .v_head_dim = f[F_HEAD_DIM], .per_layer = ND_PER_LAYER, .per_head = ND_PER_HEAD};
    for (int i = 0; i < 4; i++) g->orders[i] = f[F_ORDERS + i], g->sites[i] = f[F_SITES + i];
}

/* Plain ranges, checked in this order before anything is derived from them. */
static const struct { uint8_t field; uint32_t lo, hi; } field_ranges[] = {
    {F_CODEBOOK, ND_CODEBOOK_LENGTH, ND_CODEBOOK_LENGTH}, {F_WINDOW, 0, ND_MAX_SEQ},
    {F_VOCAB, 1, ND_MAX_VOCAB}, {F_HIDDEN, 1, ND_MAX_HIDDEN}, {F_QHEADS, 1, ND_MAX_HEADS},
    {F_KVHEADS, 1, ND_MAX_HEADS}, {F_LAYERS, 1, ND_MAX_LAYERS}, {F_HEAD_DIM, 2, ND_MAX_HEAD_DIM},
    {F_MAX_SEQ, 1, ND_MAX_SEQ}, {F_LANES, 1, ND_MAX_LANES}, {F_SLOTS, 1, ND_MAX_SLOTS},
    {F_SUB, 1, ND_MAX_SUB}, {F_TABLES, 1, ND_MAX_TABLES}, {F_TAPS, 1, ND_MAX_TAPS},
    {F_DILATION, 1, ND_MAX_DILATION}, {F_ORDER_COUNT, 1, 4}, {F_SITE_COUNT, 0, 4},
};

static int check_ranges(const uint8_t *p, needle_error *err) {
    for (size_t i = 0; i < sizeof field_ranges / sizeof field_ranges[0]; i++) {
        uint32_t v = nd_rd_u32(p + 4 * field_ranges[i].field);
        if (v < field_ranges[i].lo || v > field_ranges[i].hi)
            return field_fail(err, field_ranges[i].field, v, "expected %u..%u",
                              field_ranges[i].lo, field_ranges[i].hi);
    }
    return NEEDLE_OK;
}

/* Relations between fields (ranges already hold, so products fit in u64). */
static int check_attention(const nd_geometry *g, needle_error *err) {
    if (g->kv_bits != 2 && g->kv_bits != 3 && g->kv_bits != 4 && g->kv_bits != 8)
        return field_fail(err, F_KV_BITS, g->kv_bits, "expected 2, 3, 4 or 8");
    if (g->query_heads % g->kv_heads)
        return field_fail(err, F_KVHEADS, g->kv_heads, "queryHeads %u is not a multiple",
                          g->query_heads);
    if (g->head_dim % 2)
        return field_fail(err, F_HEAD_DIM, g->head_dim, "must be even (RoPE rotates halves)");
    if ((uint64_t)g->query_heads * g->head_dim > ND_MAX_ATTN_WIDTH)
        return field_fail(err, F_HEAD_DIM, g->head_dim, "queryHeads*headDimension %llu exceeds %u",
                          (unsigned long long)g->query_heads * g->head_dim, ND_MAX_ATTN_WIDTH);
    if (g->hadamard_dim != nd_next_pow2(g->hidden))
        return field_fail(err, F_HADAMARD, g->hadamard_dim,
                          "expected %u (the next power of two >= hidden %u)",
                          nd_next_pow2(g->hidden), g->hidden);
    if (!(isfinite(g->rope_theta) && g->rope_theta > 0)) return nd_theta_fail(err, F_THETA, g->rope_theta);
    return NEEDLE_OK;
}

static int check_engram(const nd_geometry *g, needle_error *err) {
    if (g->engram_tables % g->order_count)
        return field_fail(err, F_TABLES, g->engram_tables, "not a multiple of orderCount %u",
                          g->order_count);
    if ((uint64_t)g->engram_tables * g->engram_sub > ND_MAX_ENGRAM_WIDTH)
        return field_fail(err, F_SUB, g->engram_sub, "engramTables*engramSubDimension %llu exceeds %u",
                          (unsigned long long)g->engram_tables * g->engram_sub, ND_MAX_ENGRAM_WIDTH);
    for (uint32_t i = 0; i < g->order_count; i++)
        if (g->orders[i] < 1 || g->orders[i] > ND_MAX_ORDER)
            return field_fail(err, F_ORDERS + (int)i, g->orders[i], "expected 1..%u", ND_MAX_ORDER);
    for (uint32_t i = 0; i < g->site_count; i++) {
        if (g->sites[i] >= g->layers)
            return field_fail(err, F_SITES + (int)i, g->sites[i], "not below layers %u", g->layers);
        for (uint32_t j = 0; j < i; j++)
            if (g->sites[j] == g->sites[i])
                return field_fail(err, F_SITES + (int)i, g->sites[i], "repeats sites[%u]", j);
    }
    return NEEDLE_OK;
}

/* tensorCount must be the canonical count with 0, 1 or 2 heads; sets the head count. */
static int check_count(nd_check *c) {
    uint32_t base = nd_final_norm_tensor(&c->g) + 2; /* through final_norm, plus tokenizer */
    uint32_t n = c->g.tensor_count;
    if (n == base || n == base + 1 + ND_PER_HEAD || n == base + 1 + 2 * ND_PER_HEAD) {
        c->head_count = n == base ? 0 : (n - base - 1) / ND_PER_HEAD;
        return NEEDLE_OK;
    }
    return field_fail(c->err, F_COUNT, n,
                      "expected %u (no heads), %u (1 head) or %u (2 heads) for this geometry",
                      base, base + 1 + ND_PER_HEAD, base + 1 + 2 * ND_PER_HEAD);
}

static int check_header(nd_check *c) {
    const uint8_t *p = c->bytes;
    int rc;
    if ((rc = check_ranges(p, c->err))) return rc;
    decode_geometry(p, &c->g);
    if ((rc = check_attention(&c->g, c->err)) || (rc = check_engram(&c->g, c->err)) ||
        (rc = check_count(c)))
        return rc;
    return NEEDLE_OK;
}

/* The header of either generation, then where the directory ends. */
static int check_any_header(nd_check *c) {
    int rc = c->header_bytes == ND_HEADER3_BYTES ? nd_v3_check_header(c) : check_header(c);
    if (rc) return rc;
    c->data_start = c->header_bytes + ND_CODEBOOK_BYTES + (uint64_t)c->g.tensor_count * ND_RECORD_BYTES;
    if (c->data_start > c->total)
        return nd_fail(c->err, NEEDLE_E_FORMAT,
                       "file is %llu bytes, shorter than its directory (%u records end at byte %llu)",
                       (unsigned long long)c->total, c->g.tensor_count,
                       (unsigned long long)c->data_start);
    return NEEDLE_OK;
}

static int check_codebook(const nd_check *c, float *levels) {
    for (uint32_t i = 0; i < ND_CODEBOOK_LENGTH; i++) {
        float v = nd_rd_f32(c->bytes + c->header_bytes + 4 * i);
        if (!isfinite(v))
            return nd_fail(c->err, NEEDLE_E_FORMAT, "codebook entry %u (offset %u) is %g: expected a finite level",
                           i, c->header_bytes + 4 * i, (double)v);
        if (levels) levels[i] = v;
    }
    return NEEDLE_OK;
}

/* ---- records ----------------------------------------------------------- */

static void decode_record(const uint8_t *p, nd_record *r) {
    r->dtype = p[0];
    r->rank = p[1];
    for (int i = 0; i < 4; i++) r->shape[i] = nd_rd_u32(p + 4 + 4 * i);
    r->offset = rd_u64(p + 20);
    r->bytes = rd_u64(p + 28);
    r->group = nd_rd_u32(p + 36);
    r->bits = nd_rd_u32(p + 40);
}

/* Probe count and output width of a head kind (spec section 2). */
static uint32_t head_probes(uint32_t kind) { return kind == ND_HEAD_CONTRASTIVE ? 4 : 8; }
static uint32_t head_out(uint32_t kind) { return kind == ND_HEAD_CONTRASTIVE ? 128 : 1; }


static nd_expect expect_layer(const nd_geometry *g, uint32_t which) {
    uint32_t d = g->hidden, qw = g->query_heads * g->head_dim, kvw = g->kv_heads * g->head_dim;
    switch (which) {
    case ND_L_Q: case ND_L_GATE: return nd_expect_2(ND_CQ, qw, d);
    case ND_L_K: case ND_L_V: return nd_expect_2(ND_CQ, kvw, d);
    case ND_L_OUT: return nd_expect_2(ND_CQ, d, qw);
    case ND_L_Q_NORM: case ND_L_K_NORM: return nd_expect_1(g->head_dim);
    case ND_L_ATTN_GATE: return nd_expect_1(1);
    case ND_L_D1: case ND_L_D2: case ND_L_D3: return nd_expect_1(g->hadamard_dim);
    default: return nd_expect_1(d); /* norm_in, post_norm, pre_hada */
    }
}

static nd_expect expect_mhc(const nd_geometry *g, uint32_t which) {
    uint32_t L = g->layers, n = g->lanes, nd = n * g->hidden;
    switch (which) {
    case ND_M_B_PRE: case ND_M_B_POST: return nd_expect_2(ND_FP16, L, n);
    case ND_M_B_RES: return nd_expect_3(L, n, n);
    case ND_M_PHI_PRE: case ND_M_PHI_POST: return nd_expect_2(ND_CQ, L * n, nd);
    case ND_M_PHI_RES: return nd_expect_2(ND_CQ, L * n * n, nd);
    default: return nd_expect_1(L); /* a_pre, a_post, a_res */
    }
}

static nd_expect expect_site(const nd_geometry *g, uint32_t which) {
    uint32_t width = g->engram_tables * g->engram_sub;
    switch (which) {
    case ND_S_TABLES: return nd_expect_2(ND_CQ, g->engram_tables * g->engram_slots, g->engram_sub);
    case ND_S_TAPS: return nd_expect_2(ND_FP16, g->engram_taps, g->hidden);
    default: return nd_expect_2(ND_CQ, g->hidden, width); /* key_proj, value_proj */
    }
}

/* A Needle 2 head's position. Its kind must be known (c->kinds). */
static nd_expect expect_head(const nd_check *c, uint32_t index) {
    uint32_t heads = nd_head_tensor(&c->g, 0, 0), d = c->g.hidden;
    uint32_t kind = c->kinds[(index - heads) / ND_PER_HEAD];
    uint32_t P = head_probes(kind), out = head_out(kind);
    switch ((index - heads) % ND_PER_HEAD) {
    case ND_H_PROBES: return nd_expect_2(ND_FP16, P, d);
    case ND_H_PROJ: return nd_expect_2(ND_FP16, out, P * d);
    default: return nd_expect_1(out);
    }
}

/* What position `index` must hold. The positions the generations share are
 * here; Needle 3's layers, permutations and heads are in archive_v3.c. */
static int expect_of(nd_check *c, uint32_t index, const nd_record *r, nd_expect *e) {
    const nd_geometry *g = &c->g;
    uint32_t mhc = nd_mhc_tensor(g, 0), site = nd_site_tensor(g, 0, 0);
    uint32_t final = nd_final_norm_tensor(g);
    int v3 = g->generation == 3;
    if (index == 0) *e = nd_expect_2(ND_CQ, g->vocab, g->hidden);
    else if (index < mhc) return v3 ? nd_v3_expect(c, index, r, e)
                                    : (*e = expect_layer(g, (index - 1) % ND_PER_LAYER), NEEDLE_OK);
    else if (index < mhc + ND_MHC_COUNT) *e = expect_mhc(g, index - mhc);
    else if (index < site) return nd_v3_expect(c, index, r, e); /* the permutations */
    else if (index < final) *e = expect_site(g, (index - site) % ND_PER_SITE);
    else if (index == final) *e = nd_expect_1(g->hidden);
    else if (index + 1 == g->tensor_count) *e = (nd_expect){ND_RAW, 0, 0, {0}};
    else if (index == final + 1) *e = nd_expect_1(c->head_count);
    else if (v3) return nd_v3_expect(c, index, r, e);
    else *e = expect_head(c, index);
    return NEEDLE_OK;
}

static const char *dtype_name(uint32_t dtype) {
    static const char *const names[5] = {"?", "FP16", "FP32", "CQ", "RAW"};
    return dtype <= 4 ? names[dtype] : "?";
}

/* Rows of index stream bytes and fp16 norms of a CQ matrix. */
static int cq_expected_bytes(const nd_record *r, uint64_t *out) {
    uint64_t rows = r->shape[0], cols = r->shape[1];
    uint64_t padded = (cols + r->group - 1) / r->group * r->group, groups = padded / r->group;
    uint64_t stream_bits = r->bits == ND_TERNARY_BITS ? 2 : r->bits, row_bytes = padded * stream_bits / 8;
    uint64_t packed, norms;
    return mul_u64(rows, row_bytes, &packed) && mul_u64(rows, groups * 2, &norms) &&
           add_u64(packed, norms, out);
}

uint64_t nd_record_elements(const nd_record *r) {
    uint64_t n = r->dtype == ND_RAW ? 0 : 1;
    for (uint32_t i = 0; i < r->rank && i < 4 && n; i++)
        if (!mul_u64(n, r->shape[i], &n)) return UINT64_MAX;
    return n;
}

/* In streaming checks the manifest may not be present yet: a head's kind is
 * then taken from its probe count (4 contrastive, 8 confidence). */
static int infer_kind(nd_check *c, uint32_t index, const nd_record *r) {
    uint32_t heads = nd_head_tensor(&c->g, 0, 0);
    if (c->g.generation != 2 || !c->head_count || index < heads || index + 1 >= c->g.tensor_count)
        return NEEDLE_OK;
    uint32_t h = (index - heads) / ND_PER_HEAD;
    if (c->kinds[h] || (index - heads) % ND_PER_HEAD != ND_H_PROBES) return NEEDLE_OK;
    uint32_t p = r->rank >= 1 ? r->shape[0] : 0;
    if (p != 4 && p != 8)
        return nd_rec_fail(c, index, "shape[0] is %u, expected 4 (contrastive) or 8 (confidence)", p);
    c->kinds[h] = p == 4 ? ND_HEAD_CONTRASTIVE : ND_HEAD_CONFIDENCE;
    return NEEDLE_OK;
}

static int check_kind(const nd_check *c, uint32_t index, const nd_record *r, const nd_expect *e) {
    /* Dense tensors are FP16 in released archives; the format also allows FP32. */
    int dense = r->dtype == ND_FP16 || r->dtype == ND_FP32;
    int dense_ok = (e->dtype == ND_FP16 && r->dtype == ND_FP32) || (e->cq_or_dense && dense);
    if (r->dtype != e->dtype && !dense_ok)
        return nd_rec_fail(c, index, "dtype is %u (%s), expected %u (%s)", r->dtype,
                        dtype_name(r->dtype), e->dtype, dtype_name(e->dtype));
    if (r->rank > 4 || (e->dtype != ND_RAW && r->rank != e->rank))
        return nd_rec_fail(c, index, "rank is %u, expected %u", r->rank, e->rank);
    if (e->dtype == ND_RAW) return NEEDLE_OK; /* the tokenizer checks its own blob */
    for (uint32_t i = 0; i < e->rank; i++)
        if (r->shape[i] != e->shape[i])
            return nd_rec_fail(c, index, "shape[%u] is %u, expected %u", i, r->shape[i], e->shape[i]);
    if (r->dtype != ND_CQ) return NEEDLE_OK;
    uint32_t min_bits = c->g.generation == 3 ? 1 : 2; /* Needle 3 adds binary CQ */
    if (r->bits < min_bits || r->bits > 5)
        return nd_rec_fail(c, index, "bits is %u, expected %s2, 3, 4 or 5 (ternary)", r->bits,
                           min_bits == 1 ? "1, " : "");
    if (r->group < ND_MIN_GROUP || r->group > ND_MAX_GROUP || (r->group & (r->group - 1)))
        return nd_rec_fail(c, index, "group is %u, expected a power of two in %u..%u", r->group,
                        ND_MIN_GROUP, ND_MAX_GROUP);
    return NEEDLE_OK;
}

static int check_extent(const nd_check *c, uint32_t index, const nd_record *r) {
    uint64_t want = 0;
    if (r->dtype == ND_CQ) {
        if (!cq_expected_bytes(r, &want)) return nd_rec_fail(c, index, "CQ size overflows");
    } else if (r->dtype != ND_RAW) {
        uint64_t n = nd_record_elements(r);
        if (!mul_u64(n, r->dtype == ND_FP16 ? 2 : 4, &want)) return nd_rec_fail(c, index, "size overflows");
    }
    if (r->dtype != ND_RAW && r->bytes != want)
        return nd_rec_fail(c, index, "bytes is %llu, expected %llu%s", (unsigned long long)r->bytes,
                        (unsigned long long)want,
                        r->dtype == ND_CQ ? " (rows*rowBytes + rows*groups*2)"
                        : r->dtype == ND_FP16 ? " (2 per element)" : " (4 per element)");
    if (r->offset < c->data_start)
        return nd_rec_fail(c, index, "offset %llu lies inside the header, codebooks and directory (bytes 0..%llu)",
                        (unsigned long long)r->offset, (unsigned long long)c->data_start);
    if (r->bytes > c->total || r->offset > c->total - r->bytes)
        return nd_rec_fail(c, index, "offset %llu + bytes %llu runs past the end of the file (%llu bytes)",
                        (unsigned long long)r->offset, (unsigned long long)r->bytes,
                        (unsigned long long)c->total);
    return NEEDLE_OK;
}

/* The manifest's codes: 1 (contrastive) or 2 (confidence), each at most once. */
static int read_manifest(nd_check *c, uint32_t index, const nd_record *r) {
    for (uint32_t h = 0; h < c->head_count; h++) {
        const uint8_t *p = c->bytes + r->offset;
        uint16_t half = (uint16_t)(p[2 * h] | p[2 * h + 1] << 8);
        float v = r->dtype == ND_FP32 ? nd_rd_f32(p + 4 * h) : nd_fp16_to_f32(half);
        uint32_t code = v == 1.0f ? ND_HEAD_CONTRASTIVE : v == 2.0f ? ND_HEAD_CONFIDENCE : 0;
        if (!code && r->dtype == ND_FP32)
            return nd_rec_fail(c, index, "element %u is %g, expected 1 (contrastive) or 2 (confidence)",
                            h, (double)v);
        if (!code)
            return nd_rec_fail(c, index, "element %u is %g (fp16 0x%04x), expected 1 (contrastive) or 2 (confidence)",
                            h, (double)v, half);
        if (h && c->kinds[0] == code) return nd_rec_fail(c, index, "element %u repeats code %u", h, code);
        c->kinds[h] = code;
    }
    return NEEDLE_OK;
}

/* Directory-level checks of record `index` (no blob bytes read, except the
 * manifest's when they are present). */
static int check_record(nd_check *c, uint32_t index, const nd_record *r) {
    int rc;
    nd_expect e;
    if ((rc = infer_kind(c, index, r)) || (rc = expect_of(c, index, r, &e))) return rc;
    if ((rc = check_kind(c, index, r, &e)) || (rc = check_extent(c, index, r))) return rc;
    if (c->head_count && index == nd_manifest_tensor(&c->g) && r->offset + r->bytes <= c->avail)
        return c->g.generation == 3 ? nd_v3_read_manifest(c, index, r) : read_manifest(c, index, r);
    return NEEDLE_OK;
}

/* ---- blob contents (whole file present) -------------------------------- */

static int check_fp16(const nd_check *c, uint32_t index, const uint8_t *p, uint64_t n, const char *what) {
    for (uint64_t i = 0; i < n; i++) {
        uint16_t h = (uint16_t)(p[2 * i] | p[2 * i + 1] << 8);
        if ((h & 0x7c00u) == 0x7c00u)
            return nd_rec_fail(c, index, "%s %llu is %s (fp16 0x%04x)", what, (unsigned long long)i,
                            h & 0x3ffu ? "nan" : (h & 0x8000u ? "-inf" : "inf"), h);
    }
    return NEEDLE_OK;
}

static int check_fp32(const nd_check *c, uint32_t index, const uint8_t *p, uint64_t n) {
    for (uint64_t i = 0; i < n; i++) {
        float v = nd_rd_f32(p + 4 * i);
        if (!isfinite(v))
            return nd_rec_fail(c, index, "element %llu is %g", (unsigned long long)i, (double)v);
    }
    return NEEDLE_OK;
}

/* Ternary crumbs must be 3, 0 or 1 (-1, 0, +1); 2 has no meaning. */
static int check_crumbs(const nd_check *c, uint32_t index, const nd_record *r, uint64_t packed) {
    const uint8_t *p = c->bytes + r->offset;
    for (uint64_t i = 0; i < packed; i++)
        for (int k = 0; k < 4; k++)
            if (((p[i] >> (2 * k)) & 3) == 2)
                return nd_rec_fail(c, index, "ternary crumb 2 (invalid) at byte offset %llu, bits %d..%d",
                                (unsigned long long)(r->offset + i), 2 * k, 2 * k + 1);
    return NEEDLE_OK;
}

static int check_contents(const nd_check *c, uint32_t index, const nd_record *r) {
    const uint8_t *p = c->bytes + r->offset;
    if (r->dtype == ND_FP16) return check_fp16(c, index, p, r->bytes / 2, "element");
    if (r->dtype == ND_FP32) {
        int rc = check_fp32(c, index, p, r->bytes / 4);
        return rc || c->g.generation != 3 ? rc : nd_v3_check_contents(c, index, r);
    }
    if (r->dtype != ND_CQ) return NEEDLE_OK;
    uint64_t rows = r->shape[0], groups = ((uint64_t)r->shape[1] + r->group - 1) / r->group;
    uint64_t packed = r->bytes - rows * groups * 2; /* lengths were checked */
    int rc = check_fp16(c, index, p + packed, rows * groups, "norm");
    if (!rc && r->bits == ND_TERNARY_BITS) rc = check_crumbs(c, index, r, packed);
    return rc;
}

/* ---- overlaps ---------------------------------------------------------- */

typedef struct {
    uint64_t begin, end;
    uint32_t index;
} nd_span;

static int span_cmp(const void *a, const void *b) {
    const nd_span *x = a, *y = b;
    if (x->begin != y->begin) return x->begin < y->begin ? -1 : 1;
    return x->end < y->end ? -1 : x->end > y->end;
}

/* No two non-empty blobs may share a byte (extents were checked). */
static int check_overlaps(const nd_check *c, const nd_record *records, uint32_t n) {
    nd_span *s = malloc((size_t)n * sizeof *s);
    uint32_t m = 0;
    if (!s) return nd_fail(c->err, NEEDLE_E_NOMEM, "out of memory sorting %u records", n);
    for (uint32_t i = 0; i < n; i++)
        if (records[i].bytes)
            s[m++] = (nd_span){records[i].offset, records[i].offset + records[i].bytes, i};
    if (m) qsort(s, m, sizeof *s, span_cmp);
    int rc = NEEDLE_OK;
    for (uint32_t i = 1, last = 0; i < m && !rc; i++) {
        if (s[i].begin < s[last].end) {
            char other[64];
            name_of(&c->g, c->head_count, c->kinds, s[last].index, other, sizeof other);
            rc = nd_rec_fail(c, s[i].index, "bytes [%llu, %llu) overlap tensor %u (%s) at [%llu, %llu)",
                          (unsigned long long)s[i].begin, (unsigned long long)s[i].end, s[last].index,
                          other, (unsigned long long)s[last].begin, (unsigned long long)s[last].end);
        }
        if (s[i].end > s[last].end) last = i;
    }
    free(s);
    return rc;
}

/* ---- entry points ------------------------------------------------------ */

/* Header and codebooks; NEEDLE_E_INCOMPLETE when the prefix is too short. */
static int check_front(nd_check *c, float *levels) {
    uint32_t tag = c->avail >= 4 ? nd_rd_u32(c->bytes) : ND_TAG; /* sizes below hold for both */
    if (tag != ND_TAG && tag != ND_TAG3)
        return nd_fail(c->err, NEEDLE_E_FORMAT,
                       "header field tag (offset 0) is 0x%08x: expected 0x%08x (Needle 2) or 0x%08x "
                       "(Needle 3), not a .cact archive", tag, ND_TAG, ND_TAG3);
#ifndef ND_NEEDLE3
    if (tag == ND_TAG3)
        return nd_fail(c->err, NEEDLE_E_UNSUPPORTED,
                       "header field tag (offset 0) is 0x%08x: Needle 3, read by the needle3 variant only", tag);
#endif
    c->header_bytes = tag == ND_TAG3 ? ND_HEADER3_BYTES : ND_HEADER_BYTES;
    uint32_t front = c->header_bytes + ND_CODEBOOK_BYTES;
    if (c->total < front)
        return nd_fail(c->err, NEEDLE_E_FORMAT,
                       "file is %llu bytes, shorter than the %u-byte header and codebooks",
                       (unsigned long long)c->total, front);
    if (c->avail < c->header_bytes)
        return nd_fail(c->err, NEEDLE_E_INCOMPLETE, "need the %u-byte header", c->header_bytes);
    int rc = check_any_header(c);
    if (rc) return rc;
    if (c->avail < front) return nd_fail(c->err, NEEDLE_E_INCOMPLETE, "need the codebooks");
    return check_codebook(c, levels);
}

/* Records [0, n): decoded into records[] and checked (contents too in full mode). */
static int check_records(nd_check *c, nd_record *records, uint32_t n) {
    for (uint32_t i = 0; i < n; i++) {
        int rc;
        decode_record(c->bytes + c->header_bytes + ND_CODEBOOK_BYTES + (size_t)i * ND_RECORD_BYTES,
                      &records[i]);
        if ((rc = check_record(c, i, &records[i]))) return rc;
        if (c->full && (rc = check_contents(c, i, &records[i]))) return rc;
    }
    return NEEDLE_OK;
}

int nd_archive_parse(const uint8_t *bytes, size_t size, nd_archive *a, needle_error *err) {
    nd_check c = {.bytes = bytes, .avail = size, .total = size, .full = 1, .err = err};
    memset(a, 0, sizeof *a);
    if (!bytes && size) return nd_fail(err, NEEDLE_E_ARGUMENT, "archive bytes are NULL");
    int rc = check_front(&c, a->codebook);
    if (rc) return rc == NEEDLE_E_INCOMPLETE ? nd_fail(err, NEEDLE_E_FORMAT, "truncated header") : rc;
    uint32_t n = c.g.tensor_count; /* bounded by the geometry checks; directory is in the file */
    nd_record *records = calloc(n, sizeof *records);
    if (!records) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory for %u records", n);
    if ((rc = check_records(&c, records, n)) || (rc = check_overlaps(&c, records, n))) {
        free(records);
        return rc;
    }
    a->geometry = c.g;
    a->weight_group = records[0].group;
    a->head_count = c.head_count;
    for (int h = 0; h < 3; h++) {
        a->head_kinds[h] = c.kinds[h];
        a->head_probes[h] = c.head_probes[h];
        a->head_queries[h] = c.head_queries[h];
    }
    a->records = records;
    a->bytes = bytes;
    a->size = size;
    return NEEDLE_OK;
}

int nd_archive_check_prefix(const uint8_t *bytes, size_t size, uint64_t total_size,
                            needle_error *err) {
    if ((!bytes && size) || size > total_size)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "prefix of %zu bytes for a file of %llu bytes", size,
                       (unsigned long long)total_size);
    if (size == total_size) {
        nd_archive a;
        int rc = nd_archive_parse(bytes, size, &a, err);
        nd_archive_free(&a);
        return rc;
    }
    nd_check c = {.bytes = bytes, .avail = size, .total = total_size, .err = err};
    int rc = check_front(&c, NULL);
    if (rc) return rc;
    uint32_t n = c.g.tensor_count;
    uint64_t present = (size - c.header_bytes - ND_CODEBOOK_BYTES) / ND_RECORD_BYTES;
    nd_record *records = calloc(n, sizeof *records);
    if (!records) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory for %u records", n);
    rc = check_records(&c, records, present < n ? (uint32_t)present : n);
    if (!rc && present < n)
        rc = nd_fail(err, NEEDLE_E_INCOMPLETE, "need the directory (%u records)", n);
    if (!rc) rc = check_overlaps(&c, records, n);
    free(records);
    return rc;
}

void nd_archive_free(nd_archive *a) {
    if (!a) return;
    free(a->records);
    memset(a, 0, sizeof *a);
}

int nd_record_dense(const nd_archive *a, uint32_t index, float *out) {
    if (index >= a->geometry.tensor_count) return NEEDLE_E_ARGUMENT;
    const nd_record *r = &a->records[index];
    const uint8_t *p = a->bytes + r->offset;
    uint64_t n = nd_record_elements(r);
    if (r->dtype == ND_FP16) {
        for (uint64_t i = 0; i < n; i++) out[i] = nd_load_fp16(p + 2 * i);
    } else if (r->dtype == ND_FP32) {
        for (uint64_t i = 0; i < n; i++) out[i] = nd_rd_f32(p + 4 * i);
    } else {
        return NEEDLE_E_ARGUMENT;
    }
    return NEEDLE_OK;
}
