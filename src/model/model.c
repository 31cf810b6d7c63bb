/* model.c: builds the immutable model from a validated archive.
 *
 * CQ matrices stay packed in the caller's archive bytes: an nd_cq view
 * (weights.c) points at the index stream and the fp16 norms and carries the
 * levels of its width (spec section 2). With NEEDLE_LOAD_REPACK the GEMV matrices are then tiled
 * in place (cq_tiled.c) for the integer kernels. Every dense (FP16/FP32) control tensor is converted to
 * f32 once, into one allocation. The tokenizer comes from the last (RAW)
 * record. The forward pass that uses all this lives in session.c.
 */
#include "model/model.h"
#include "model/weights.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

uint32_t nd_model_default_window(const nd_geometry *g) {
    if (g->kv_window) return g->kv_window;
    /* The reference's KV budget (11.5 MiB) divided by the bytes one position
     * costs at int8 with a f32 scale per 32 values; integer division throughout. */
    uint64_t kvd = (uint64_t)g->kv_heads * g->head_dim;
    uint64_t per_pos = (uint64_t)g->layers * (2 * kvd + 2 * (kvd / 32) * 4) +
                       (uint64_t)g->site_count * (g->hidden + (g->hidden / 32) * 4);
    uint64_t w = per_pos ? ((12058624u / per_pos) / 32) * 32 : g->max_seq;
    if (w > g->max_seq) w = g->max_seq;
    return w < 160 ? 160 : (uint32_t)w;
}

/* Rows [first, first+count) of m as a matrix of their own. */
static nd_cq cq_rows(const nd_cq *m, uint32_t first, uint32_t count) {
    nd_cq s = *m;
    s.packed = m->packed + (size_t)first * m->row_bytes;
    s.norms = m->norms + (size_t)first * m->groups * 2;
    s.rows = count;
    return s;
}

/* Converts every FP16/FP32 record into one allocation; f32[i] points at
 * record i's values (NULL for CQ and RAW records). */
static int convert_dense(needle_model *m, float **f32, needle_error *err) {
    const nd_archive *a = &m->archive;
    uint64_t total = 0;
    for (uint32_t i = 0; i < a->geometry.tensor_count; i++) {
        uint8_t t = a->records[i].dtype;
        if (t == ND_FP16 || t == ND_FP32) total += nd_record_elements(&a->records[i]);
        if (total > SIZE_MAX / sizeof(float))
            return nd_fail(err, NEEDLE_E_NOMEM, "dense tensors too large (%llu values)",
                           (unsigned long long)total);
    }
    m->dense = malloc(total ? (size_t)total * sizeof(float) : 1);
    if (!m->dense) return nd_fail(err, NEEDLE_E_NOMEM, "no memory for %llu dense values",
                                  (unsigned long long)total);
    float *at = m->dense;
    for (uint32_t i = 0; i < a->geometry.tensor_count; i++) {
        uint8_t t = a->records[i].dtype;
        f32[i] = NULL;
        if (t != ND_FP16 && t != ND_FP32) continue;
        int rc = nd_record_dense(a, i, at);
        if (rc) return nd_fail(err, rc, "tensor %u: cannot convert to f32", i);
        f32[i] = at;
        at += nd_record_elements(&a->records[i]);
    }
    return NEEDLE_OK;
}

static int load_layer(needle_model *m, float *const *f32, uint32_t i, needle_error *err) {
    const nd_archive *a = &m->archive;
    const nd_geometry *g = &a->geometry;
    nd_layer *l = &m->layers[i];
    uint32_t d = g->hidden, hd = g->head_dim, qw = g->query_heads * hd, kw = g->kv_heads * hd;
    uint32_t N = g->hadamard_dim;
    const float *gate;
#define T(which) nd_layer_tensor(g, i, which)
    int rc = nd_model_dense(a, f32, T(ND_L_NORM_IN), d, &l->norm_in, err);
    if (!rc) rc = nd_model_cq(a, T(ND_L_Q), qw, d, &l->q, err);
    if (!rc) rc = nd_model_cq(a, T(ND_L_K), kw, d, &l->k, err);
    if (!rc) rc = nd_model_cq(a, T(ND_L_V), kw, d, &l->v, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_L_Q_NORM), hd, &l->q_norm, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_L_K_NORM), hd, &l->k_norm, err);
    if (!rc) rc = nd_model_cq(a, T(ND_L_GATE), qw, d, &l->gate, err);
    if (!rc) rc = nd_model_cq(a, T(ND_L_OUT), d, qw, &l->out, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_L_POST_NORM), d, &l->post_norm, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_L_ATTN_GATE), 1, &gate, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_L_PRE_HADA), d, &l->pre_hada, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_L_D1), N, &l->d1, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_L_D2), N, &l->d2, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_L_D3), N, &l->d3, err);
#undef T
    if (rc) return rc;
    l->attn_gate = 1.0f / (1.0f + expf(-gate[0]));
    l->site = -1;
    return NEEDLE_OK;
}

/* The mHC tensors, split per layer (rows i*n.. of the Phi matrices). */
static int load_mhc(needle_model *m, float *const *f32, needle_error *err) {
    const nd_archive *a = &m->archive;
    const nd_geometry *g = &a->geometry;
    uint32_t L = g->layers, n = g->lanes, nd = n * g->hidden;
    const float *ap, *apo, *ar, *bp, *bpo, *br;
    nd_cq pre, post, res;
#define T(which) nd_mhc_tensor(g, which)
    int rc = nd_model_dense(a, f32, T(ND_M_A_PRE), L, &ap, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_M_A_POST), L, &apo, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_M_A_RES), L, &ar, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_M_B_PRE), (uint64_t)L * n, &bp, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_M_B_POST), (uint64_t)L * n, &bpo, err);
    if (!rc) rc = nd_model_dense(a, f32, T(ND_M_B_RES), (uint64_t)L * n * n, &br, err);
    if (!rc) rc = nd_model_cq(a, T(ND_M_PHI_PRE), L * n, nd, &pre, err);
    if (!rc) rc = nd_model_cq(a, T(ND_M_PHI_POST), L * n, nd, &post, err);
    if (!rc) rc = nd_model_cq(a, T(ND_M_PHI_RES), L * n * n, nd, &res, err);
#undef T
    if (rc) return rc;
    for (uint32_t i = 0; i < L; i++) {
        nd_layer *l = &m->layers[i];
        l->phi_pre = cq_rows(&pre, i * n, n);
        l->phi_post = cq_rows(&post, i * n, n);
        l->phi_res = cq_rows(&res, i * n * n, n * n);
        l->a_pre = ap[i];
        l->a_post = apo[i];
        l->a_res = ar[i];
        l->b_pre = bp + (size_t)i * n;
        l->b_post = bpo + (size_t)i * n;
        l->b_res = br + (size_t)i * n * n;
    }
    return NEEDLE_OK;
}

static int load_sites(needle_model *m, float *const *f32, needle_error *err) {
    const nd_archive *a = &m->archive;
    const nd_geometry *g = &a->geometry;
    uint32_t width = g->engram_tables * g->engram_sub;
    if (g->site_count > ND_MAX_SITES)
        return nd_fail(err, NEEDLE_E_FORMAT, "siteCount %u exceeds %u", g->site_count, ND_MAX_SITES);
    for (uint32_t s = 0; s < g->site_count; s++) {
        nd_site *st = &m->sites[s];
        uint32_t layer = g->sites[s];
        if (layer >= g->layers || m->layers[layer].site >= 0)
            return nd_fail(err, NEEDLE_E_FORMAT, "engram site %u: layer %u is out of range or repeated",
                           s, layer);
        int rc = nd_model_cq(a, nd_site_tensor(g, s, ND_S_TABLES), g->engram_tables * g->engram_slots,
                         g->engram_sub, &st->tables, err);
        if (!rc) rc = nd_model_cq(a, nd_site_tensor(g, s, ND_S_KEY), g->hidden, width, &st->key, err);
        if (!rc) rc = nd_model_cq(a, nd_site_tensor(g, s, ND_S_VALUE), g->hidden, width, &st->value, err);
        if (!rc) rc = nd_model_dense(a, f32, nd_site_tensor(g, s, ND_S_TAPS),
                                 (uint64_t)g->engram_taps * g->hidden, &st->taps, err);
        if (rc) return rc;
        m->layers[layer].site = (int)s;
    }
    return NEEDLE_OK;
}

static int load_heads(needle_model *m, float *const *f32, needle_error *err) {
    const nd_archive *a = &m->archive;
    const nd_geometry *g = &a->geometry;
    m->head_count = a->head_count;
    for (uint32_t h = 0; h < a->head_count && h < ND_MAX_HEAD_KINDS; h++) {
        nd_head *hd = &m->heads[h];
        const nd_record *pr = &a->records[nd_head_tensor(g, h, ND_H_PROBES)];
        const nd_record *jr = &a->records[nd_head_tensor(g, h, ND_H_PROJ)];
        hd->kind = a->head_kinds[h];
        hd->probes = pr->rank == 2 ? pr->shape[0] : 0;
        hd->out = jr->rank == 2 ? jr->shape[0] : 0;
        uint32_t want = hd->kind == ND_HEAD_CONTRASTIVE ? 128 : 1;
        if (hd->probes == 0 || hd->out != want)
            return nd_fail(err, NEEDLE_E_FORMAT, "head %u (kind %u): %u probes, %u outputs (want %u)",
                           h, hd->kind, hd->probes, hd->out, want);
        int rc = nd_model_dense(a, f32, nd_head_tensor(g, h, ND_H_PROBES),
                            (uint64_t)hd->probes * g->hidden, &hd->probe, err);
        if (!rc) rc = nd_model_dense(a, f32, nd_head_tensor(g, h, ND_H_PROJ),
                                 (uint64_t)hd->out * hd->probes * g->hidden, &hd->proj, err);
        if (!rc) rc = nd_model_dense(a, f32, nd_head_tensor(g, h, ND_H_BIAS), hd->out, &hd->bias, err);
        if (rc) return rc;
    }
    return NEEDLE_OK;
}

/* K/V levels for kvBits 2..4: header levels times sqrt(g/64) (spec section 5). */
static int kv_levels(needle_model *m, needle_error *err) {
    const nd_archive *a = &m->archive;
    uint32_t bits = a->geometry.kv_bits;
    if (bits == 8) return NEEDLE_OK;
    if (bits < 2 || bits > 4) return nd_fail(err, NEEDLE_E_FORMAT, "kvBits %u: expected 2, 3, 4 or 8", bits);
    uint32_t first = bits == 2 ? 0 : bits == 3 ? 4 : 12;
    float scale = (float)sqrt((double)a->weight_group / ND_KV_GROUP);
    m->kv_level_count = 1u << bits;
    for (uint32_t i = 0; i < m->kv_level_count; i++) m->kv_levels[i] = a->codebook[first + i] * scale;
    if (a->geometry.head_dim % 2)
        return nd_fail(err, NEEDLE_E_FORMAT, "headDimension %u must be even", a->geometry.head_dim);
    return NEEDLE_OK;
}

static int load_tokenizer(needle_model *m, needle_error *err);

static int load_all(needle_model *m, float **f32, needle_error *err) {
    const nd_archive *a = &m->archive;
    const nd_geometry *g = &a->geometry;
    int rc = convert_dense(m, f32, err);
    if (!rc) rc = nd_model_cq(a, 0, g->vocab, g->hidden, &m->embedding, err);
    if (rc) return rc;
    if (g->lanes == 0 || g->kv_heads == 0 || g->head_dim % 2 || g->query_heads % g->kv_heads ||
        g->hadamard_dim < g->hidden || (g->hadamard_dim & (g->hadamard_dim - 1)))
        return nd_fail(err, NEEDLE_E_FORMAT, "inconsistent geometry (lanes %u, headDimension %u, "
                       "heads %u/%u, hadamardDimension %u)", g->lanes, g->head_dim,
                       g->query_heads, g->kv_heads, g->hadamard_dim);
    m->layers = calloc(g->layers, sizeof *m->layers);
    if (!m->layers) return nd_fail(err, NEEDLE_E_NOMEM, "no memory for %u layers", g->layers);
#ifdef ND_NEEDLE3
    if (ND_IS_V3(g)) {
        rc = nd_model_mlp3(m, f32, err);
        for (uint32_t i = 0; i < g->layers && !rc; i++) rc = nd_model_layer3(m, f32, i, err);
    }
#endif
    for (uint32_t i = 0; i < g->layers && !rc && !ND_IS_V3(g); i++) rc = load_layer(m, f32, i, err);
    if (!rc) rc = load_mhc(m, f32, err);
    if (!rc) rc = load_sites(m, f32, err);
    if (!rc) rc = nd_model_dense(a, f32, nd_final_norm_tensor(g), g->hidden, &m->final_norm, err);
    if (!rc && !ND_IS_V3(g)) rc = load_heads(m, f32, err);
    if (!rc) rc = kv_levels(m, err);
#ifdef ND_NEEDLE3
    if (!rc && ND_IS_V3(g)) rc = nd_model_widen3(m, err);
    if (!rc && ND_IS_V3(g)) rc = nd_model_heads3(m, f32, err);
#endif
    return rc ? rc : load_tokenizer(m, err);
}

/* The tokenizer from the last (RAW) record, its size checked against the vocabulary. */
static int load_tokenizer(needle_model *m, needle_error *err) {
    const nd_archive *a = &m->archive;
    const nd_geometry *g = &a->geometry;
    const nd_record *tr = &a->records[nd_tokenizer_tensor(a)];
    m->tokenizer = needle_tokenizer_load(a->bytes + tr->offset, (size_t)tr->bytes, err);
    if (!m->tokenizer) return err ? err->code : NEEDLE_E_TOKENIZER;
    /* Needle 3 allows fewer pieces than embedding rows (needle3-model.md section 2). */
    uint32_t pieces = needle_tokenizer_size(m->tokenizer);
    if (g->generation == 3 ? pieces > g->vocab : pieces != g->vocab)
        return nd_fail(err, NEEDLE_E_FORMAT, "tokenizer has %u pieces, vocabulary is %u", pieces, g->vocab);
    m->pad_id = needle_tokenizer_special(m->tokenizer, 0);
    m->window = nd_model_default_window(g);
    return NEEDLE_OK;
}

/* Tiles matrix c in place (writable bytes w alias the archive) when it can
 * be: the SIMD kernels of both modes read tiles (cq.h). */
static int repack_one(const needle_model *m, uint8_t *w, nd_cq *c, needle_error *err) {
    if (!nd_cq_tileable(c)) return NEEDLE_OK;
    if (ND_IS_V3(&m->archive.geometry) && (c->packed < m->archive.bytes || c->packed >= m->archive.bytes + m->archive.size))
        return NEEDLE_OK; /* a widened binary matrix (model_v3.c) keeps its layout */
    size_t at = (size_t)(c->packed - m->archive.bytes), norms = (size_t)(c->norms - m->archive.bytes);
    if (nd_cq_repack(c, w + at, w + norms))
        return nd_fail(err, NEEDLE_E_NOMEM, "no memory to repack a %u x %u matrix", c->rows, c->cols);
    return NEEDLE_OK;
}

/* Needle 3 scores only the first outVocabulary rows: those are tiled, and
 * the rows after them (read only by row gathers) keep the archive layout
 * after the tiles, as any matrix's tail rows do. */
static int repack_embedding(needle_model *m, uint8_t *w, needle_error *err) {
    nd_cq head = m->embedding;
    head.rows = m->archive.geometry.out_vocab < head.rows ? m->archive.geometry.out_vocab : head.rows;
    int rc = repack_one(m, w, &head, err);
    m->embedding.tiles = head.tiles;
    return rc;
}

/* Every matrix a product reads, but the mHC Phi ones: the attention
 * projections, the engram key and value, the embedding (the logits; its row
 * gathers read either layout). The Phi matrices (4 to 16 rows) keep the
 * archive layout, which the fast mode's a8 kernel (cq_a8.h) reads. */
static int repack_all(needle_model *m, uint8_t *w, needle_error *err) {
    const nd_geometry *g = &m->archive.geometry;
    int rc = repack_embedding(m, w, err);
    for (uint32_t i = 0; i < g->layers && !rc; i++) {
        nd_layer *l = &m->layers[i];
        nd_cq *all[] = {&l->q, &l->k, &l->v, &l->gate, &l->out};
        for (size_t j = 0; j < sizeof all / sizeof *all && !rc; j++) rc = repack_one(m, w, all[j], err);
    }
    for (uint32_t s = 0; s < g->site_count && !rc; s++) {
        rc = repack_one(m, w, &m->sites[s].key, err);
        if (!rc) rc = repack_one(m, w, &m->sites[s].value, err);
    }
    return rc;
}

needle_model *needle_model_load_ex(uint8_t *bytes, size_t size, uint32_t flags, needle_error *err) {
    needle_model *m = needle_model_load(bytes, size, err);
    if (m && (flags & NEEDLE_LOAD_REPACK) && m->layers && repack_all(m, bytes, err)) {
        needle_model_free(m);
        return NULL;
    }
    return m;
}

needle_model *needle_model_load(const uint8_t *bytes, size_t size, needle_error *err) {
    if (err) { err->code = NEEDLE_OK; err->message[0] = 0; }
    if (!bytes) { nd_fail(err, NEEDLE_E_ARGUMENT, "archive bytes are NULL"); return NULL; }
    needle_model *m = calloc(1, sizeof *m);
    if (!m) { nd_fail(err, NEEDLE_E_NOMEM, "no memory for the model"); return NULL; }
    int rc = nd_archive_parse(bytes, size, &m->archive, err);
    if (rc) { free(m); return NULL; }
    m->fingerprint = nd_fnv1a(ND_FNV_OFFSET, bytes, size);
    float **f32 = calloc(m->archive.geometry.tensor_count, sizeof *f32);
    rc = f32 ? load_all(m, f32, err)
             : nd_fail(err, NEEDLE_E_NOMEM, "no memory for the tensor table");
    free(f32);
    if (rc) { needle_model_free(m); return NULL; }
    return m;
}

uint64_t nd_fnv1a(uint64_t h, const void *bytes, size_t n) {
    const uint8_t *p = bytes;
    for (size_t i = 0; i < n; i++) h = (h ^ p[i]) * 0x100000001b3ull;
    return h;
}

void needle_model_free(needle_model *m) {
    if (!m) return;
    needle_tokenizer_free(m->tokenizer);
    free(m->layers);
    free(m->dense);
    free(m->perms);
    free(m->widened);
    free(m->head_rows);
    nd_archive_free(&m->archive);
    free(m);
}

const needle_tokenizer *needle_model_tokenizer(const needle_model *m) {
    return m ? m->tokenizer : NULL;
}
