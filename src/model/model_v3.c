/* model_v3.c: the parts of a Needle 3 model that Needle 2 lacks
 * (needle3-model.md sections 3 and 4): each layer's split q/k and v widths,
 * convolution taps and Kronecker MLP, and the MLP's stored permutations.
 *
 * Binary (1-bit) CQ records are rewritten once, after loading, as 2-bit
 * index streams with levels {-c, +c, 0, 0}: every kernel then reads them as
 * it reads 2-bit ones, for twice their packed bytes (the released file has
 * none).
 * Built with ND_NEEDLE3 only. */
#ifdef ND_NEEDLE3
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "model/model.h"
#include "model/weights.h"

#define BINARY_LEVEL 0.7978845608028654 /* sqrt(2/pi): E|x| of a unit Gaussian */

/* Bytes of the 2-bit stream of a binary record (0 for any other). */
static size_t widened_bytes(const nd_record *r) {
    if (r->dtype != ND_CQ || r->bits != 1 || r->rank != 2) return 0;
    uint64_t groups = ((uint64_t)r->shape[1] + r->group - 1) / r->group;
    return (size_t)(r->shape[0] * groups * r->group / 4);
}

/* Widens every binary record's indices into m->widened (bit k -> crumb k). */
static int widen_records(needle_model *m, needle_error *err) {
    const nd_archive *a = &m->archive;
    size_t total = 0;
    for (uint32_t i = 0; i < a->geometry.tensor_count; i++) total += widened_bytes(&a->records[i]);
    if (!total) return NEEDLE_OK;
    m->widened = malloc(total);
    if (!m->widened) return nd_fail(err, NEEDLE_E_NOMEM, "no memory to widen %zu bytes of 1-bit weights", total);
    uint8_t *out = m->widened;
    for (uint32_t i = 0; i < a->geometry.tensor_count; i++) {
        size_t n = widened_bytes(&a->records[i]);
        const uint8_t *in = a->bytes + a->records[i].offset;
        for (size_t b = 0; b < n; b++) {
            uint32_t bits = in[b / 2] >> (4 * (b % 2)), w = 0;
            for (uint32_t k = 0; k < 4; k++) w |= ((bits >> k) & 1u) << (2 * k);
            out[b] = (uint8_t)w;
        }
        out += n;
    }
    return NEEDLE_OK;
}

/* Points a binary view (a whole record or rows of one) at the widened
 * stream, as a 2-bit matrix with levels {-c, +c}/sqrt(group). */
static void widen_view(const needle_model *m, nd_cq *c) {
    if (c->bits != 1) return;
    const uint8_t *at = m->widened;
    for (uint32_t i = 0; i < m->archive.geometry.tensor_count; i++) {
        const nd_record *r = &m->archive.records[i];
        const uint8_t *start = m->archive.bytes + r->offset;
        if (widened_bytes(r) && c->packed >= start && c->packed < start + widened_bytes(r) / 2) {
            c->packed = at + 2 * (size_t)(c->packed - start);
            break;
        }
        at += widened_bytes(r);
    }
    c->bits = 2;
    c->row_bytes *= 2;
    memset(c->levels, 0, sizeof c->levels);
    c->levels[0] = (float)(-BINARY_LEVEL / sqrt((double)c->group));
    c->levels[1] = -c->levels[0];
}

int nd_model_widen3(needle_model *m, needle_error *err) {
    const nd_geometry *g = &m->archive.geometry;
    int rc = widen_records(m, err);
    if (rc || !m->widened) return rc;
    widen_view(m, &m->embedding);
    for (uint32_t i = 0; i < g->layers; i++) {
        nd_layer *l = &m->layers[i];
        nd_cq *all[] = {&l->q, &l->k, &l->v, &l->gate, &l->out, &l->phi_pre, &l->phi_post, &l->phi_res};
        for (size_t j = 0; j < sizeof all / sizeof *all; j++) widen_view(m, all[j]);
    }
    for (uint32_t s = 0; s < g->site_count; s++) {
        widen_view(m, &m->sites[s].tables);
        widen_view(m, &m->sites[s].key);
        widen_view(m, &m->sites[s].value);
    }
    return NEEDLE_OK;
}

int nd_model_layer3(needle_model *m, float *const *f32, uint32_t i, needle_error *err) {
    const nd_archive *a = &m->archive;
    const nd_geometry *g = &a->geometry;
    nd_layer *l = &m->layers[i];
    uint32_t d = g->hidden, qk = g->head_dim, N = g->hadamard_dim, C = g->conv_taps;
    uint32_t qw = g->query_heads * qk, kw = g->kv_heads * qk, vw = g->kv_heads * g->v_head_dim;
    uint32_t ow = g->query_heads * g->v_head_dim, ba = m->kron_a, bb = m->kron_b;
    const float *gate;
    int rc = NEEDLE_OK;
#define T(which) nd_layer_tensor(g, i, which)
#define DENSE(which, n, out) if (!rc) rc = nd_model_dense(a, f32, T(which), n, out, err)
#define CQ(which, r, c, out) if (!rc) rc = nd_model_cq(a, T(which), r, c, out, err)
    DENSE(ND_L3_NORM_IN, d, &l->norm_in);
    CQ(ND_L3_Q, qw, d, &l->q);
    CQ(ND_L3_K, kw, d, &l->k);
    CQ(ND_L3_V, vw, d, &l->v);
    if (C) {
        DENSE(ND_L3_Q_TAPS, (uint64_t)C * qw, &l->q_taps);
        DENSE(ND_L3_K_TAPS, (uint64_t)C * kw, &l->k_taps);
        DENSE(ND_L3_V_TAPS, (uint64_t)C * vw, &l->v_taps);
    }
    DENSE(ND_L3_Q_NORM, qk, &l->q_norm);
    DENSE(ND_L3_K_NORM, qk, &l->k_norm);
    CQ(ND_L3_GATE, ow, d, &l->gate);
    CQ(ND_L3_OUT, d, ow, &l->out);
    DENSE(ND_L3_POST_NORM, d, &l->post_norm);
    DENSE(ND_L3_ATTN_GATE, 1, &gate);
    DENSE(ND_L3_PRE_HADA, d, &l->pre_hada);
    DENSE(ND_L3_D1, N, &l->d1);
    DENSE(ND_L3_D2, N, &l->d2);
    DENSE(ND_L3_B2, N, &l->b2);
    DENSE(ND_L3_D3, N, &l->d3);
    DENSE(ND_L3_D4, N, &l->d4);
    for (uint32_t s = 0; s < 6; s++) {
        uint32_t side = s % 2 ? bb : ba;
        DENSE(ND_L3_W1A + s, (uint64_t)side * side, &l->w[s]);
    }
    DENSE(ND_L3_COND_V, (uint64_t)d * ND_COND_RANK, &l->cond_v);
    DENSE(ND_L3_COND_U, (uint64_t)ND_COND_RANK * N, &l->cond_u);
#undef CQ
#undef DENSE
#undef T
    if (rc) return rc;
    l->attn_gate = 1.0f / (1.0f + expf(-gate[0]));
    l->site = -1;
    return NEEDLE_OK;
}

/* Elements of head h's matrices (probes, query, proj) that are CQ records. */
static uint64_t head_cq_elements(const needle_model *m, uint32_t h) {
    const nd_archive *a = &m->archive;
    uint64_t n = 0;
    for (uint32_t which = ND_H3_PROBES; which <= ND_H3_PROJ; which++) {
        const nd_record *r = &a->records[nd_head_tensor(&a->geometry, h, which)];
        if (r->dtype == ND_CQ) n += nd_record_elements(r);
    }
    return n;
}

/* A head matrix as dense rows: its FP16/FP32 values, or its CQ rows
 * dequantised at *cursor (which advances). The heads run in float
 * (needle3-model.md section 5), once per call scored. */
static int head_matrix(needle_model *m, float *const *f32, uint32_t index, uint32_t rows, uint32_t cols,
                       float **cursor, const float **out, needle_error *err) {
    const nd_archive *a = &m->archive;
    if (a->records[index].dtype != ND_CQ) return nd_model_dense(a, f32, index, (uint64_t)rows * cols, out, err);
    nd_cq c;
    int rc = nd_model_cq(a, index, rows, cols, &c, err);
    if (rc) return rc;
    widen_view(m, &c);
    float *scratch = malloc(c.group * sizeof(float));
    if (!scratch) return nd_fail(err, NEEDLE_E_NOMEM, "no memory to dequantise a head matrix");
    for (uint32_t r = 0; r < rows; r++) nd_cq_gather(&c, r, *cursor + (size_t)r * cols, scratch);
    free(scratch);
    *out = *cursor;
    *cursor += (size_t)rows * cols;
    return NEEDLE_OK;
}

/* The probe heads: each with its k probes per cell and q queries (read off
 * its records by archive_v3.c). */
int nd_model_heads3(needle_model *m, float *const *f32, needle_error *err) {
    const nd_archive *a = &m->archive;
    const nd_geometry *g = &a->geometry;
    uint32_t d = g->hidden, cells = g->layers + 1;
    uint64_t total = 0;
    for (uint32_t h = 0; h < a->head_count; h++) total += head_cq_elements(m, h);
    if (total && !(m->head_rows = malloc((size_t)total * sizeof(float))))
        return nd_fail(err, NEEDLE_E_NOMEM, "no memory for the heads' %llu weights", (unsigned long long)total);
    float *cursor = m->head_rows;
    m->head_count = a->head_count;
    for (uint32_t h = 0; h < a->head_count; h++) {
        nd_head *hd = &m->heads[h];
        uint32_t k = a->head_probes[h], q = a->head_queries[h];
#define T(which) nd_head_tensor(g, h, which)
        *hd = (nd_head){.kind = a->head_kinds[h], .probes = cells * k, .per_cell = k, .queries = q,
                        .out = a->records[T(ND_H3_PROJ)].shape[0]}; /* its kind's width, checked at parse */
        int rc = head_matrix(m, f32, T(ND_H3_PROBES), hd->probes, d, &cursor, &hd->probe, err);
        if (!rc) rc = nd_model_dense(a, f32, T(ND_H3_GAIN), hd->probes, &hd->gain, err);
        if (!rc) rc = head_matrix(m, f32, T(ND_H3_QUERY), q, d, &cursor, &hd->query, err);
        if (!rc) rc = nd_model_dense(a, f32, T(ND_H3_ROW_BIAS), (uint64_t)q * hd->probes, &hd->row_bias, err);
        if (!rc) rc = head_matrix(m, f32, T(ND_H3_PROJ), hd->out, q * d, &cursor, &hd->proj, err);
        if (!rc) rc = nd_model_dense(a, f32, T(ND_H3_BIAS), hd->out, &hd->bias, err);
#undef T
        if (rc) return rc;
    }
    return NEEDLE_OK;
}

/* The split N = ba * bb (ba = 2^floor(bitlen(N-1)/2)) and the two gathers,
 * read from their FP32 records (archive_v3.c checked each is a permutation). */
int nd_model_mlp3(needle_model *m, float *const *f32, needle_error *err) {
    const nd_geometry *g = &m->archive.geometry;
    uint32_t N = g->hadamard_dim, bits = 0;
    while (bits < 32 && (N - 1) >> bits) bits++;
    m->kron_a = 1u << (bits / 2);
    m->kron_b = N / m->kron_a;
    m->perms = malloc(2 * (size_t)N * sizeof *m->perms);
    if (!m->perms) return nd_fail(err, NEEDLE_E_NOMEM, "no memory for the MLP permutations");
    for (uint32_t p = 0; p < 2; p++) {
        const float *values;
        int rc = nd_model_dense(&m->archive, f32, nd_perm_tensor(g, ND_P3_P1 + p), N, &values, err);
        if (rc) return rc;
        for (uint32_t j = 0; j < N; j++) m->perms[(size_t)p * N + j] = (uint32_t)values[j];
    }
    return NEEDLE_OK;
}
#endif /* ND_NEEDLE3 */
