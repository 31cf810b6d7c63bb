/* session.c: one conversation over a model: the forward pass of spec section
 * 3, the caches of section 5 and the probe pooling of section 4.
 *
 * Memory is bounded whatever the length: the KV cache is a ring of W + chunk
 * slots (W the attention window; Needle 3 ND_SESSION_REWIND more) plus
 * `sinks` pinned slots; the token
 * history (for the engram hashes) and the engram value history (for the
 * taps) are small rings too; the probe heads pool every cell online. Every
 * buffer is allocated in needle_session_new (and set_sinks), none per token.
 *
 * A feed of n tokens runs in chunks of ND_CHUNK positions: each matrix is
 * applied to the whole chunk with one GEMM (prefill) and attention is causal
 * within the chunk, so feeding a sequence at once or token by token gives the
 * same logits up to float summation order. Attention runs every query of the
 * chunk that shares a KV head at once over the cached rows (the kernels and
 * the row formats are in attention.h).
 */
#define _POSIX_C_SOURCE 199309L /* clock_gettime for the opt-in stage timers */
#include "model/session.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/a8.h"
#include "kernels/activation.h"
#include "kernels/attention.h"
#include "kernels/cq_a8.h"
#include "kernels/cq_q8.h"
#include "format/fp16.h"
#include "kernels/hadamard.h"
#include "model/mlp3.h"
#include "platform.h"
#include "kernels/threads.h"

#define ND_CHUNK 16u /* positions per prefill GEMM: bounds the scratch memory */

enum { KV_F32, KV_I8, KV_CQ };

/* The attention state of the queries of one KV head: KV heads run in
 * parallel (threads.h), each on its own. */
typedef struct {
    nd_attn attn;
    float *aq, *aqs, *cq_rows;    /* [nq][hdp], [nq][hdp/32], [ND_ATTN_BLOCK][2][hdp] */
    int16_t *aq8;                 /* [nq][hdp] */
    uint32_t *alo, *ahi;          /* [nq] visible positions */
    uint32_t *slo;                /* [nq] first visible sink (Needle 3's local layers) */
} head_attention;

struct needle_session {
    const needle_model *model;
    uint32_t window, sinks, position;
    int kv_format;
    int exact;                    /* exact-float mode: f32 kernels only, no int8 */
    uint32_t hdp;                 /* widest head (q/k or v) as stored: padded to 4 (f32), 32 (int8), 64 (CQ) */
    size_t row_bytes, slot_bytes; /* one K or V head row; every row of one position */
    uint32_t kv_cap, tok_cap, v0_cap;
    uint32_t kv_from, tok_from;   /* lowest position the rings still hold */
    uint8_t *ring, *sink;         /* [L][KV][kv_cap][K,V row], [L][KV][sinks][K,V row] */
    int32_t *ring_tok, *sink_tok; /* [tok_cap], [sinks] */
    float *v0;                    /* [sites][v0_cap][d] engram values before the taps */
    float *raw;                   /* Needle 3: [L][raw_cap][q|k|v] projections before the convolution */
    uint32_t raw_cap, raw_from;
    float *raw_pin;               /* [L][C-1][q|k|v] copies of the last C-1 sinks' raw rows */
    uint64_t raw_pinned;          /* bit i: pinned row i holds position sinks - (C-1) + i */
    float *pool;                  /* [heads][P][2 + d]: max, sum, weighted sum */
    size_t pool_floats;
    size_t bytes, sink_bytes;     /* allocated in total; by the sink storage */
    uint32_t *slots;              /* [chunk][tables] engram slots */
    const int32_t *ids;           /* the chunk being run */
    /* scratch, one allocation: see session_scratch() */
    float *buf, *x, *nx, *xr, *mpre, *mpost, *mres, *u, *bx, *h, *a, *ek, *ev;
    float *q, *gt, *o, *k, *v, *e, *keep, *rope, *tmp, *z;
    float *q8;                    /* [chunk] s->xr quantised for the q8 kernels (nd_q8_bytes each) */
    const nd_cq *q8_of;           /* the matrix it was quantised for, NULL: none for this xr */
    float *lut;                   /* the q8 GEMV's tables of one quantised position (nd_q8_tables_bytes) */
    const nd_cq *lut_of;          /* the matrix they were built for, NULL: none for this q8 */
    float *a8;                    /* [chunk] s->xr quantised for nd_cq_a8_gemv (a float a column) */
    const nd_cq *a8_of;           /* the matrix it was quantised for, NULL: none for this xr */
    /* per KV head, its queries over a chunk (rep * ND_CHUNK): see attn_alloc() */
    head_attention *heads;
    void *attn_buf;
    uint32_t *azero;              /* [nq] zeros: the sinks' first visible position */
    int profiling;                         /* needle_session_set_profiling */
    double stage_ms[NEEDLE_STAGE_COUNT];   /* per stage; OTHER holds whole feeds */
};

/* ---- opt-in stage timers (needle_session_profile) ------------------------ */

/* The clock when profiling, else 0 without reading it. */
static double stage_clock(const needle_session *s) { return s->profiling ? nd_now_ms() : 0; }

/* Adds the time since `since` to `stage`; returns the clock for the next lap. */
static double stage_lap(needle_session *s, int stage, double since) {
    if (!s->profiling) return 0;
    double now = nd_now_ms();
    s->stage_ms[stage] += now - since;
    return now;
}

/* ---- small maths --------------------------------------------------------- */

/* Sums of a[i] * b[i] in sixteen interleaved partial sums, combined
 * pairwise: four vectors of independent chains the compiler maps onto SIMD
 * lanes (one vector's chain waits on its adds), and one order in every
 * build (native and wasm give the same bits). */
static float dot16(const float *a, const float *b, uint32_t n) {
    float p[16] = {0};
    uint32_t i = 0;
    for (; i + 16 <= n; i += 16)
        for (int k = 0; k < 16; k++) p[k] += a[i + k] * b[i + k];
    for (; i < n; i++) p[i % 16] += a[i] * b[i];
    for (int w = 8; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) p[k] += p[k + w];
    return p[0];
}

/* out[d] = mean of the n lanes x[n][d], summed lane by lane from lane 0
 * (loops over i innermost, so they vectorise). */
static void lane_mean(const float *x, uint32_t n, uint32_t d, float *out) {
    memcpy(out, x, d * sizeof(float));
    for (uint32_t a = 1; a < n; a++)
        for (uint32_t i = 0; i < d; i++) out[i] += x[(size_t)a * d + i];
    for (uint32_t i = 0; i < d; i++) out[i] /= (float)n;
}

/* 1 / sqrt(mean(v^2) + 1e-6), accumulated in double in eight interleaved
 * partial sums combined pairwise (four f64x2 chains; one was latency-bound:
 * an add every four cycles for two values). Not inlined: its vector loops
 * would be copied into every caller for no gain. */
__attribute__((noinline)) static float rms_inv(const float *v, uint32_t n) {
    double p[8] = {0};
    uint32_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int k = 0; k < 8; k++) p[k] += (double)v[i + k] * v[i + k];
    for (; i < n; i++) p[i % 8] += (double)v[i] * v[i];
    for (int w = 4; w >= 1; w /= 2)
        for (int k = 0; k < w; k++) p[k] += p[k + w];
    return (float)(1.0 / sqrt(p[0] / n + 1e-6));
}

/* out = (1 + scale) * rms_unit(v); out may alias v. */
static void zcrms(const float *v, const float *scale, uint32_t n, float *out) {
    float r = rms_inv(v, n);
    for (uint32_t i = 0; i < n; i++) out[i] = (1.0f + scale[i]) * (v[i] * r);
}

/* A <- exp(20 rounds of row then column log-normalisation of A), n x n. */
static void sinkhorn(double *A, uint32_t n) {
    for (int it = 0; it < 20; it++) {
        for (int pass = 0; pass < 2; pass++) {
            for (uint32_t r = 0; r < n; r++) {
                size_t step = pass ? n : 1, at = pass ? r : (size_t)r * n;
                double m = -INFINITY, s = 0;
                for (uint32_t c = 0; c < n; c++) m = fmax(m, A[at + c * step]);
                for (uint32_t c = 0; c < n; c++) s += exp(A[at + c * step] - m);
                double lse = m + log(s);
                for (uint32_t c = 0; c < n; c++) A[at + c * step] -= lse;
            }
        }
    }
    for (uint32_t i = 0; i < n * n; i++) A[i] = exp(A[i]);
}

/* sinkhorn's result by matrix scaling, for fast mode: P = exp(A - max A),
 * then 20 rounds of dividing each row, then each column, by its sum. That is
 * the log-space iteration (subtracting a logsumexp divides the exps by their
 * sum) with 16 exp instead of ~800 exp and log; in double it stays within
 * ~1e-15 of it. While A spans at most 200 no entry can come near underflow;
 * a wider (or non-finite) A runs the log-space form. */
static void sinkhorn_scaled(double *A, uint32_t n) {
    double hi = -INFINITY, lo = INFINITY;
    for (uint32_t i = 0; i < n * n; i++) hi = fmax(hi, A[i]), lo = fmin(lo, A[i]);
    if (!(hi - lo <= 200.0)) {
        sinkhorn(A, n);
        return;
    }
    for (uint32_t i = 0; i < n * n; i++) A[i] = exp(A[i] - hi);
    for (int it = 0; it < 20; it++) {
        for (int pass = 0; pass < 2; pass++) {
            for (uint32_t r = 0; r < n; r++) {
                size_t step = pass ? n : 1, at = pass ? r : (size_t)r * n;
                double sum = 0;
                for (uint32_t c = 0; c < n; c++) sum += A[at + c * step];
                double inv = 1.0 / sum; /* one division per row, not per entry */
                for (uint32_t c = 0; c < n; c++) A[at + c * step] *= inv;
            }
        }
    }
}

/* The CQ level nearest to u (levels sorted ascending), ties to the lower one,
 * exactly as a searchsorted over the levels decides it. */
static uint8_t nearest_level(float u, const float *lv, uint32_t count) {
    uint32_t pos = 0;
    while (pos < count && lv[pos] < u) pos++;
    if (pos < 1) pos = 1;
    if (pos > count - 1) pos = count - 1;
    return (uint8_t)(fabsf(u - lv[pos - 1]) <= fabsf(u - lv[pos]) ? pos - 1 : pos);
}

/* ---- matrices over a chunk --------------------------------------------- */

/* A matrix's per-position work over a chunk, as a pool job (chunk = position). */
typedef struct {
    needle_session *s;
    const nd_cq *m;
    const float *x;
    size_t stride;
} position_job;

static void rotate_position(const void *ctx, uint32_t t) {
    const position_job *j = ctx;
    nd_cq_rotate(j->m, j->x + t * j->stride, j->s->xr + (size_t)t * nd_cq_padded(j->m));
}

/* Fast mode on short archive-layout matrices (the mHC Phi rows) reading
 * one x: each position's int8 activation, quantised once for every matrix
 * that shares it, then the int8 GEMVs, the same kernel in prefill and
 * decode. A prefill chunk runs one pool job per position; a decoded token
 * splits the matrices' rows into blocks of A8_ROWS instead (a row's result
 * does not depend on the rows beside it). */
#define A8_ROWS 4u
#define A8_MAX 8u
typedef struct {
    needle_session *s;
    const nd_cq *const *ms;
    float *const *ys;
    uint32_t count, quantise, first[A8_MAX + 1]; /* first: the row blocks before matrix i */
} a8_job;

static void a8_position(const void *ctx, uint32_t t) {
    const a8_job *j = ctx;
    const nd_cq *m = j->ms[0];
    uint8_t *q = (uint8_t *)j->s->a8 + t * nd_cq_a8_bytes(m);
    if (j->quantise) nd_cq_a8_quantise(m, j->s->xr + (size_t)t * nd_cq_padded(m), q);
    for (uint32_t i = 0; i < j->count; i++) nd_cq_a8_gemv(j->ms[i], q, j->ys[i] + (size_t)t * j->ms[i]->rows);
}

static void a8_rows(const void *ctx, uint32_t c) {
    const a8_job *j = ctx;
    uint32_t i = 0;
    while (c >= j->first[i + 1]) i++;
    uint32_t r0 = (c - j->first[i]) * A8_ROWS, rows = j->ms[i]->rows - r0;
    nd_cq block = nd_cq_rows(j->ms[i], r0, rows < A8_ROWS ? rows : A8_ROWS);
    nd_cq_a8_gemv(&block, j->s->a8, j->ys[i] + r0);
}

/* ys[i][T][rows] = ms[i] s->xr for `count` (at most A8_MAX) a8 matrices whose
 * quantised activations are shared (nd_cq_a8_shared). */
static void matmul_a8(needle_session *s, const nd_cq *const *ms, float *const *ys, uint32_t count, uint32_t T) {
    a8_job job = {s, ms, ys, count, !s->a8_of || !nd_cq_a8_shared(s->a8_of, ms[0]), {0}};
    s->a8_of = ms[0];
    if (T > 1 || nd_threads() < 2) {
        nd_parallel(a8_position, &job, T);
        return;
    }
    if (job.quantise) nd_cq_a8_quantise(ms[0], s->xr, s->a8);
    for (uint32_t i = 0; i < count; i++) job.first[i + 1] = job.first[i] + (ms[i]->rows + A8_ROWS - 1) / A8_ROWS;
    nd_parallel(a8_rows, &job, job.first[count]);
}

static void q8_position(const void *ctx, uint32_t t) {
    const position_job *j = ctx;
    needle_session *s = j->s;
    nd_q8_activation(j->m, s->xr + (size_t)t * nd_cq_padded(j->m), (uint8_t *)s->q8 + t * nd_q8_bytes(j->m));
}

/* Rotates x (T activations at stride `stride`) into s->xr for m, unless
 * `prev` (the matrix last rotated for, over the same x) has the same group
 * and width: q/k/v/gate share one rotation. */
static void rotate_for(needle_session *s, const nd_cq *m, const nd_cq *prev, const float *x, size_t stride,
                       uint32_t T) {
    if (prev && prev->group == m->group && prev->cols == m->cols) return;
    position_job job = {s, m, x, stride};
    nd_parallel(rotate_position, &job, T);
    s->q8_of = NULL;
    s->a8_of = NULL;
}

/* Quantises s->xr for m (the engine's int8 per group), unless it already is
 * for a matrix of the same group and width; for one position also builds
 * m's GEMV tables, unless the last built serve it (the same levels). */
static void quantise_for(needle_session *s, const nd_cq *m, uint32_t T) {
    if (!s->q8_of || !nd_q8_shared(s->q8_of, m)) {
        position_job job = {s, m, NULL, 0};
        nd_parallel(q8_position, &job, T);
        s->q8_of = m;
        s->lut_of = NULL;
    }
    if (T == 1 && m->tiles && !(s->lut_of && nd_cq_lut_shared(s->lut_of, m))) {
        nd_q8_tables(m, s->q8, (int8_t *)s->lut);
        s->lut_of = m;
    }
}

/* ys[i][T][rows] = ms[i] x[t] for `count` matrices reading the same x (T
 * activations at stride `stride`). Fast mode computes the makers' engine
 * numerics (cq_q8.h): the matrices share one quantisation and, for one
 * position, one set of tables when their levels are the same; otherwise
 * they run one after the other. */
static void matmuls(needle_session *s, const nd_cq *const *ms, float *const *ys, uint32_t count, const float *x,
                    size_t stride, uint32_t T) {
    int shared = 1;
    for (uint32_t i = 1; i < count; i++)
        shared &= ms[i]->cols == ms[0]->cols && nd_q8_shared(ms[0], ms[i]) &&
                  (T > 1 || (ms[i]->tiles && ms[0]->tiles && nd_cq_lut_shared(ms[0], ms[i])));
    if (!shared || s->exact) {
        for (uint32_t i = 0; i < count; i++) {
            rotate_for(s, ms[i], i ? ms[i - 1] : NULL, x, stride, T);
            if (s->exact) {
                nd_cq_matmul(ms[i], s->xr, T, ys[i]);
                continue;
            }
            quantise_for(s, ms[i], T);
            nd_cq_matmul_q8(ms + i, ys + i, 1, s->q8, T, T == 1 ? (const int8_t *)s->lut : NULL);
        }
        return;
    }
    rotate_for(s, ms[0], NULL, x, stride, T);
    quantise_for(s, ms[0], T);
    nd_cq_matmul_q8(ms, ys, count, s->q8, T, T == 1 ? (const int8_t *)s->lut : NULL);
}

static void matmul(needle_session *s, const nd_cq *m, const float *x, size_t stride, uint32_t T, float *y) {
    matmuls(s, &m, &y, 1, x, stride, T);
}

/* The mHC Phi products: in fast mode the a8 kernel where it fits, which
 * reads the archive layout (4 to 16 rows, too few for tiles: see cq_a8.h). */
static void phi_matmuls(needle_session *s, const nd_cq *const *ms, float *const *ys, uint32_t count,
                        const float *x, size_t stride, uint32_t T) {
    int a8 = !s->exact && count <= A8_MAX;
    for (uint32_t i = 0; i < count; i++)
        a8 &= ms[i]->cols == ms[0]->cols && nd_cq_a8_fits(ms[i]) && nd_cq_a8_shared(ms[0], ms[i]);
    if (!a8) {
        matmuls(s, ms, ys, count, x, stride, T);
        return;
    }
    rotate_for(s, ms[0], NULL, x, stride, T);
    matmul_a8(s, ms, ys, count, T);
}

/* ---- caches --------------------------------------------------------------- */

static int32_t *token_at(needle_session *s, uint32_t pos) {
    return pos < s->sinks ? &s->sink_tok[pos] : &s->ring_tok[pos % s->tok_cap];
}

/* Row `which` (0 K, 1 V) of kv head `head` of `layer` at position pos. The
 * K and V rows of one (layer, head) follow position after position, so the
 * attention reads a run of positions at one stride. */
static uint8_t *kv_row(const needle_session *s, uint32_t pos, uint32_t layer, uint32_t head,
                       int which) {
    size_t lh = (size_t)layer * s->model->archive.geometry.kv_heads + head;
    size_t at = pos < s->sinks ? lh * s->sinks + pos : lh * s->kv_cap + pos % s->kv_cap;
    return (pos < s->sinks ? s->sink : s->ring) + (at * 2 + (size_t)which) * s->row_bytes;
}

static float *v0_at(needle_session *s, uint32_t site, uint32_t pos) {
    uint32_t d = s->model->archive.geometry.hidden;
    return s->v0 + ((size_t)site * s->v0_cap + pos % s->v0_cap) * d;
}

/* Stores one head vector x[hd] (a K or V head) in the cache format
 * (attention.h), padding zeroed: f32; int8 with one f32 scale per 32
 * values (Needle 3: one for the vector, as it was trained); or CQ (spec
 * section 5: H64, unit levels, fp16 norm). */
static void kv_store(needle_session *s, const float *x, uint32_t hd, uint8_t *row) {
    if (s->kv_format == KV_F32) {
        memcpy(row, x, hd * sizeof(float));
        memset(row + (size_t)hd * sizeof(float), 0, (s->hdp - hd) * sizeof(float));
    } else if (s->kv_format == KV_I8) {
        if (ND_IS_V3(&s->model->archive.geometry)) nd_attn_quantise_row_a8(x, hd, s->hdp, row);
        else nd_attn_quantise_row(x, hd, s->hdp, row);
    } else {
        const needle_model *m = s->model;
        float *norms = (float *)row, r[ND_KV_GROUP];
        uint8_t *idx = row + (size_t)(s->hdp / ND_KV_GROUP) * 4;
        for (uint32_t g = 0; g * ND_KV_GROUP < s->hdp; g++) {
            double ss = 0;
            for (uint32_t i = 0; i < ND_KV_GROUP; i++) {
                uint32_t c = g * ND_KV_GROUP + i;
                r[i] = c < hd ? x[c] : 0.0f;
            }
            nd_fwht(r, ND_KV_GROUP);
            for (uint32_t i = 0; i < ND_KV_GROUP; i++) ss += (double)r[i] * r[i];
            float n = (float)sqrt(ss), div = n > 1e-12f ? n : 1e-12f;
            for (uint32_t i = 0; i < ND_KV_GROUP; i++)
                idx[g * ND_KV_GROUP + i] = nearest_level(r[i] / div, m->kv_levels, m->kv_level_count);
            norms[g] = nd_fp16_to_f32(nd_f32_to_fp16(n));
        }
    }
}

/* A CQ row in the rotated domain (levels times the fp16 norm of each 64),
 * out[hdp]: q . k = (H64 q) . out, and values accumulate there too. */
static void kv_decode_cq(const needle_session *s, const uint8_t *row, float *out) {
    const float *norms = (const float *)row, *lv = s->model->kv_levels;
    const uint8_t *idx = row + (size_t)(s->hdp / ND_KV_GROUP) * 4;
    for (uint32_t i = 0; i < s->hdp; i++) out[i] = norms[i / ND_KV_GROUP] * lv[idx[i]];
}

/* ---- attention ------------------------------------------------------------ */

/* RoPE (half split) of one head vector with the cos/sin table of its position. */
static void rope(float *x, const float *cs, uint32_t hd) {
    uint32_t half = hd / 2;
    for (uint32_t m = 0; m < half; m++) {
        float c = cs[m], sn = cs[half + m], a = x[m], b = x[m + half];
        x[m] = a * c - b * sn;
        x[m + half] = b * c + a * sn;
    }
}

/* cos and sin of p * theta^(-2m/hd) for every position of the chunk, in double. */
static void rope_table(needle_session *s, uint32_t p0, uint32_t T) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t half = g->head_dim / 2;
    for (uint32_t t = 0; t < T; t++) {
        float *cs = s->rope + (size_t)t * g->head_dim;
        for (uint32_t m = 0; m < half; m++) {
            double ang = (double)(p0 + t) * pow((double)g->rope_theta, -2.0 * m / g->head_dim);
            cs[m] = (float)cos(ang);
            cs[half + m] = (float)sin(ang);
        }
    }
}

/* The band of layer li: Needle 3's local layers see the last slidingWindow
 * positions (sinks included), every other layer all of them. */
static uint32_t layer_band(const nd_geometry *g, uint32_t li) {
    int global = !g->sliding_window || (li < 64 && (g->global_mask >> li) & 1u);
    return ND_IS_V3(g) && !global ? g->sliding_window : UINT32_MAX;
}

/* The chunk's queries of kv head `kvh` in the kernels' form (query i = t *
 * rep + r is query head kvh * rep + r at position p0 + t), with the positions
 * each sees besides the sinks: the last W up to its own (spec section 3),
 * within the layer's band (needle3-model.md section 4). */
static void attn_queries(const needle_session *s, head_attention *ha, uint32_t li, uint32_t kvh, uint32_t p0,
                         uint32_t T) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t hd = g->head_dim, hdp = s->hdp, rep = g->query_heads / g->kv_heads;
    uint32_t band = layer_band(g, li), w = band < s->window ? band : s->window;
    float inv = (float)(1.0 / sqrt((double)hd));
    for (uint32_t t = 0; t < T; t++) {
        uint32_t p = p0 + t, lo = p + 1 > w ? p + 1 - w : 0;
        for (uint32_t r = 0; r < rep; r++) {
            uint32_t i = t * rep + r;
            const float *q = s->q + (size_t)t * g->query_heads * hd + (size_t)(kvh * rep + r) * hd;
            ha->alo[i] = lo > s->sinks ? lo : s->sinks;
            ha->ahi[i] = p;
            if (ND_IS_V3(g)) ha->slo[i] = p + 1 > band ? p + 1 - band : 0;
            if (s->kv_format == KV_I8) {
                int16_t *q8 = ha->aq8 + (size_t)i * hdp;
                float *qs = ha->aqs + (size_t)i * (hdp / 32);
                if (ND_IS_V3(g)) nd_attn_quantise_a8(q, hd, hdp, inv, q8, qs);
                else nd_attn_quantise(q, hd, hdp, inv, q8, qs);
                continue;
            }
            float *qa = ha->aq + (size_t)i * hdp;
            for (uint32_t k = 0; k < hdp; k++) qa[k] = k < hd ? q[k] : 0.0f;
            if (s->kv_format == KV_CQ)
                for (uint32_t b = 0; b < hdp; b += ND_KV_GROUP) nd_fwht(qa + b, ND_KV_GROUP);
            for (uint32_t k = 0; k < hdp; k++) qa[k] *= inv;
        }
    }
}

/* Folds one run of cached rows into the queries' state; CQ rows are decoded
 * a block at a time into f32 rows first. */
static void attn_run(const needle_session *s, head_attention *ha, const nd_kv_run *run) {
    if (s->kv_format == KV_I8) { nd_attn_i8(&ha->attn, run); return; }
    if (s->kv_format == KV_F32) { nd_attn_f32(&ha->attn, run); return; }
    size_t f32_row = (size_t)s->hdp * sizeof(float);
    for (uint32_t j0 = 0; j0 < run->count; j0 += ND_ATTN_BLOCK) {
        uint32_t n = run->count - j0 < ND_ATTN_BLOCK ? run->count - j0 : ND_ATTN_BLOCK;
        for (uint32_t j = 0; j < n; j++) {
            kv_decode_cq(s, run->k + (size_t)(j0 + j) * run->stride, ha->cq_rows + (size_t)j * 2 * s->hdp);
            kv_decode_cq(s, run->v + (size_t)(j0 + j) * run->stride, ha->cq_rows + ((size_t)j * 2 + 1) * s->hdp);
        }
        const uint8_t *rows = (const uint8_t *)ha->cq_rows;
        nd_kv_run dec = {rows, rows + f32_row, 2 * f32_row, run->pos + j0, n};
        nd_attn_f32(&ha->attn, &dec);
    }
}

/* Positions [from, to] of (layer, kvh), all sinks or all in the ring: one
 * run, or two where the ring wraps. */
static void attn_span(const needle_session *s, head_attention *ha, uint32_t layer, uint32_t kvh, uint32_t from,
                      uint32_t to) {
    while (from <= to) {
        uint32_t count = to - from + 1;
        if (from >= s->sinks && count > s->kv_cap - from % s->kv_cap) count = s->kv_cap - from % s->kv_cap;
        nd_kv_run run = {kv_row(s, from, layer, kvh, 0), kv_row(s, from, layer, kvh, 1),
                         2 * s->row_bytes, from, count};
        attn_run(s, ha, &run);
        from += count;
    }
}

/* One layer's attention over a chunk of T positions from p0, as a pool job. */
typedef struct {
    needle_session *s;
    uint32_t layer, p0, T;
} attend_job;

/* The chunk's queries of KV head kvh and its key normed and rotated, its K
 * and V rows cached: the heads' share of the layer's work before attention,
 * done in the head's chunk so that it runs in parallel and stays on the
 * thread that reads it. */
static void qk_head(const attend_job *job, uint32_t kvh) {
    needle_session *s = job->s;
    const nd_layer *l = &s->model->layers[job->layer];
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t hd = g->head_dim, vd = g->v_head_dim, rep = g->query_heads / g->kv_heads;
    uint32_t qw = g->query_heads * hd, kw = g->kv_heads * hd, vw = g->kv_heads * vd;
    for (uint32_t t = 0; t < job->T; t++) {
        const float *cs = s->rope + (size_t)t * hd;
        for (uint32_t r = 0; r < rep; r++) {
            float *qh = s->q + (size_t)t * qw + (size_t)(kvh * rep + r) * hd;
            zcrms(qh, l->q_norm, hd, qh);
            rope(qh, cs, hd);
            if (ND_IS_V3(g) && !s->exact) nd_a8(qh, hd); /* an A8 point of Needle 3 */
        }
        float *kh = s->k + (size_t)t * kw + (size_t)kvh * hd;
        zcrms(kh, l->k_norm, hd, kh);
        rope(kh, cs, hd);
        kv_store(s, kh, hd, kv_row(s, job->p0 + t, job->layer, kvh, 0));
        kv_store(s, s->v + (size_t)t * vw + (size_t)kvh * vd, vd, kv_row(s, job->p0 + t, job->layer, kvh, 1));
    }
}

/* Chunk kvh of an attend_job: every query of the chunk on KV head kvh over
 * the sinks, then the window, into its heads' slices of s->o, each times
 * sigmoid of its gate. */
static void attend_head(const void *ctx, uint32_t kvh) {
    const attend_job *job = ctx;
    needle_session *s = job->s;
    head_attention *ha = &s->heads[kvh];
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t vd = g->v_head_dim, rep = g->query_heads / g->kv_heads, T = job->T, last = job->p0 + T - 1;
    uint32_t ns = last + 1 < s->sinks ? last + 1 : s->sinks;
    ha->attn.n = rep * T;
    qk_head(job, kvh);
    attn_queries(s, ha, job->layer, kvh, job->p0, T);
    nd_attn_reset(&ha->attn);
    /* a sink is visible from its own position on (within a local layer's band) */
    ha->attn.lo = layer_band(g, job->layer) == UINT32_MAX ? s->azero : ha->slo;
    if (ns) attn_span(s, ha, job->layer, kvh, 0, ns - 1);
    ha->attn.lo = ha->alo;  /* the first query's window starts first */
    if (ha->alo[0] <= last) attn_span(s, ha, job->layer, kvh, ha->alo[0], last);
    for (uint32_t i = 0; i < rep * T; i++) {
        float *acc = ha->attn.acc + (size_t)i * s->hdp; /* CQ: rotate back (linear, so before the division) */
        if (s->kv_format == KV_CQ)
            for (uint32_t b = 0; b < s->hdp; b += ND_KV_GROUP) nd_fwht(acc + b, ND_KV_GROUP);
        size_t at = (size_t)(i / rep) * g->query_heads * vd + (size_t)(kvh * rep + i % rep) * vd;
        nd_attn_finish(&ha->attn, i, vd, s->o + at);
        nd_sigmoid_mul(s->o + at, s->gt + at, vd);
    }
}

/* o[T][H*vd] = gated softmax-weighted cached values for the chunk's queries,
 * the KV heads in parallel (each writes only its own heads' values and
 * cache rows). */
static void attend(needle_session *s, uint32_t layer, uint32_t p0, uint32_t T) {
    attend_job job = {s, layer, p0, T};
    nd_parallel(attend_head, &job, s->model->archive.geometry.kv_heads);
}

/* A layer's per-position work over a chunk, as a pool job (chunk = position
 * within the chunk). */
typedef struct {
    needle_session *s;
    const nd_layer *l;
    uint32_t li;
} layer_job;

/* h = zcrms(bx, norm_in) at position t. */
static void norm_in_position(const void *ctx, uint32_t t) {
    const layer_job *j = ctx;
    uint32_t d = j->s->model->archive.geometry.hidden;
    float *h = j->s->h + (size_t)t * d;
    zcrms(j->s->bx + (size_t)t * d, j->l->norm_in, d, h);
}

/* bx += attn_gate * zcrms(a, post_norm) at position t. */
static void post_norm_position(const void *ctx, uint32_t t) {
    const layer_job *j = ctx;
    uint32_t d = j->s->model->archive.geometry.hidden;
    float *a = j->s->a + (size_t)t * d, *bx = j->s->bx + (size_t)t * d;
    zcrms(a, j->l->post_norm, d, a);
    for (uint32_t i = 0; i < d; i++) bx[i] += j->l->attn_gate * a[i];
}

#ifdef ND_NEEDLE3
static uint32_t raw_width(const nd_geometry *g) {
    return (g->query_heads + g->kv_heads) * g->head_dim + g->kv_heads * g->v_head_dim;
}

/* The pinned copy of position p's raw row in layer li, or NULL when p is not
 * among the last C-1 sinks: those rows outlive the ring, so a rewind to the
 * end of the static prefix can always re-run the convolution. */
static float *raw_pin_row(const needle_session *s, uint32_t li, uint32_t p) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t keep = g->conv_taps - 1;
    if (!s->raw_pin || p >= s->sinks || p + keep < s->sinks) return NULL;
    return s->raw_pin + ((size_t)li * keep + p + keep - s->sinks) * raw_width(g);
}

/* Whether position p's raw rows are still held, in the ring or pinned. */
static int raw_kept(const needle_session *s, uint32_t p) {
    if (p >= s->position) return 0;
    if (p >= s->raw_from) return 1;
    return raw_pin_row(s, 0, p) && (s->raw_pinned >> (p + s->model->archive.geometry.conv_taps - 1 - s->sinks) & 1);
}

/* Position p's raw row in layer li, wherever it is held. */
static float *raw_row(const needle_session *s, uint32_t li, uint32_t p) {
    float *pinned = p < s->raw_from ? raw_pin_row(s, li, p) : NULL;
    return pinned ? pinned : s->raw + ((size_t)li * s->raw_cap + p % s->raw_cap) * raw_width(&s->model->archive.geometry);
}

/* Needle 3's causal depthwise convolution of the raw q, k and v projections
 * of the chunk, in place: x[p] = sum_j taps[j] (.) raw[p - j] over the taps
 * whose position exists and lies in the layer's band (needle3-model.md
 * section 4). The raw rows are kept in s->raw for later chunks, and the
 * last C-1 sinks' also in s->raw_pin. */
static void convolve_qkv(needle_session *s, const nd_layer *l, uint32_t li, uint32_t p0, uint32_t T) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t qw = g->query_heads * g->head_dim, kw = g->kv_heads * g->head_dim, vw = g->kv_heads * g->v_head_dim;
    uint32_t band = layer_band(g, li);
    float *parts[] = {s->q, s->k, s->v};
    const float *taps[] = {l->q_taps, l->k_taps, l->v_taps};
    uint32_t width[] = {qw, kw, vw}, off[] = {0, qw, qw + kw};
    for (uint32_t t = 0; t < T; t++) {
        float *ring = s->raw + ((size_t)li * s->raw_cap + (p0 + t) % s->raw_cap) * (qw + kw + vw);
        for (int k = 0; k < 3; k++) memcpy(ring + off[k], parts[k] + (size_t)t * width[k], width[k] * sizeof(float));
        float *pinned = raw_pin_row(s, li, p0 + t);
        if (pinned) memcpy(pinned, ring, (qw + kw + vw) * sizeof(float));
        if (pinned) s->raw_pinned |= 1ull << (p0 + t + g->conv_taps - 1 - s->sinks);
    }
    for (uint32_t t = 0; t < T; t++) {
        uint32_t p = p0 + t;
        for (int k = 0; k < 3; k++) {
            float *x = parts[k] + (size_t)t * width[k];
            memset(x, 0, width[k] * sizeof(float));
            for (uint32_t j = 0; j < g->conv_taps && j <= p && j < band; j++) {
                const float *tap = taps[k] + (size_t)j * width[k];
                const float *raw = raw_row(s, li, p - j) + off[k];
                for (uint32_t c = 0; c < width[k]; c++) x[c] += tap[c] * raw[c];
            }
        }
    }
}
#endif

/* bx += sigmoid(attn_gate) * zcrms(attention(zcrms(bx, norm_in)), post_norm). */
static void attention_block(needle_session *s, uint32_t li, uint32_t p0, uint32_t T) {
    const nd_geometry *g = &s->model->archive.geometry;
    const nd_layer *l = &s->model->layers[li];
    uint32_t d = g->hidden, ow = g->query_heads * g->v_head_dim;
    layer_job job = {s, l, li};
    double clock = stage_clock(s);
    nd_parallel(norm_in_position, &job, T);
    const nd_cq *qkvg[] = {&l->q, &l->k, &l->v, &l->gate};
    float *out[] = {s->q, s->k, s->v, s->gt};
    matmuls(s, qkvg, out, 4, s->h, d, T);
#ifdef ND_NEEDLE3
    if (g->conv_taps) convolve_qkv(s, l, li, p0, T);
#endif
    clock = stage_lap(s, NEEDLE_STAGE_ATTN_PROJ, clock);
    attend(s, li, p0, T);
    clock = stage_lap(s, NEEDLE_STAGE_ATTENTION, clock);
    matmul(s, &l->out, s->o, ow, T, s->a);
    nd_parallel(post_norm_position, &job, T);
    stage_lap(s, NEEDLE_STAGE_ATTN_PROJ, clock);
}

/* bx += first d of d3 * HN silu(d2 * HN (d1 * pad(zcrms(bx, pre_hada)))) at
 * position t (scratch: its row of s->z). */
static void mlp_position(const void *ctx, uint32_t t) {
    const layer_job *j = ctx;
    needle_session *s = j->s;
    const nd_layer *l = j->l;
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t d = g->hidden, N = g->hadamard_dim;
    float *z = s->z + (size_t)t * N, *bx = s->bx + (size_t)t * d;
    zcrms(bx, l->pre_hada, d, z);
    for (uint32_t i = 0; i < N; i++) z[i] = i < d ? l->d1[i] * z[i] : 0.0f;
    nd_fwht(z, N);
    for (uint32_t i = 0; i < N; i++) z[i] *= l->d2[i];
    nd_sigmoid_mul(z, z, N); /* silu */
    nd_fwht(z, N);
    for (uint32_t i = 0; i < d; i++) bx[i] += l->d3[i] * z[i];
}

#ifdef ND_NEEDLE3
/* bx += mlp3(zcrms(bx, pre_hada)) at position t (scratch: its rows of s->z). */
static void mlp3_position(const void *ctx, uint32_t t) {
    const layer_job *j = ctx;
    needle_session *s = j->s;
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t d = g->hidden, N = g->hadamard_dim;
    float *z = s->z + (size_t)t * (ND_MLP3_SCRATCH(N) + 2 * d), *x = z + ND_MLP3_SCRATCH(N), *y = x + d;
    float *bx = s->bx + (size_t)t * d;
    zcrms(bx, j->l->pre_hada, d, x);
    nd_mlp3(s->model, j->l, x, y, z);
    for (uint32_t i = 0; i < d; i++) bx[i] += y[i];
}
#endif

static void mlp_block(needle_session *s, const nd_layer *l, uint32_t T) {
    layer_job job = {s, l, 0};
#ifdef ND_NEEDLE3
    if (ND_IS_V3(&s->model->archive.geometry)) {
        nd_parallel(mlp3_position, &job, T);
        return;
    }
#endif
    nd_parallel(mlp_position, &job, T);
}

/* ---- engram --------------------------------------------------------------- */

/* Table slots of position p (spec section 3 hash) and whether each n-gram exists. */
static void engram_slots(needle_session *s, uint32_t p, uint32_t *slots, float *keep) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t heads = g->engram_tables / g->order_count;
    uint32_t stride = ND_IS_V3(g) && g->engram_seed_heads ? g->engram_seed_heads : heads; /* Needle 3's seeds */
    for (uint32_t o = 0; o < g->order_count; o++) {
        for (uint32_t e = 0; e < heads; e++) {
            uint32_t t = o * heads + e, acc = 0x9E3779B9u * (o * stride + e + 1);
            for (uint32_t j = 0; j < g->orders[o]; j++) {
                uint32_t tok = j <= p ? (uint32_t)*token_at(s, p - j) : 0;
                acc = (acc ^ tok) * 0x01000193u;
            }
            acc ^= acc >> 15;
            slots[t] = acc % g->engram_slots;
            keep[t] = p + 1 >= g->orders[o] ? 1.0f : 0.0f;
        }
    }
}

/* e[tables*sub] of position p for a site: the gathered table rows. */
static void engram_gather(needle_session *s, const nd_site *st, const uint32_t *slots,
                          const float *keep, float *e) {
    const nd_geometry *g = &s->model->archive.geometry;
    for (uint32_t t = 0; t < g->engram_tables; t++) {
        float *row = e + (size_t)t * g->engram_sub;
        nd_cq_gather(&st->tables, t * g->engram_slots + slots[t], row, s->tmp);
        for (uint32_t i = 0; i < g->engram_sub; i++) row[i] *= keep[t];
    }
}

/* Site `site` at layer input u: bx = u + alpha * ev (spec section 3). */
static void engram_block(needle_session *s, uint32_t site, uint32_t p0, uint32_t T) {
    const nd_geometry *g = &s->model->archive.geometry;
    const nd_site *st = &s->model->sites[site];
    uint32_t d = g->hidden, width = g->engram_tables * g->engram_sub, tb = g->engram_tables;
    for (uint32_t t = 0; t < T; t++)
        engram_gather(s, st, s->slots + (size_t)t * tb, s->keep + (size_t)t * tb,
                      s->e + (size_t)t * width);
    const nd_cq *kv[] = {&st->key, &st->value};
    float *out[] = {s->ek, s->ev};
    matmuls(s, kv, out, 2, s->e, width, T);
    for (uint32_t t = 0; t < T; t++) memcpy(v0_at(s, site, p0 + t), s->ev + (size_t)t * d, d * sizeof(float));
    float inv_sqrt_d = (float)(1.0 / sqrt((double)d));
    for (uint32_t t = 0; t < T; t++) {
        uint32_t p = p0 + t;
        float *ev = s->ev + (size_t)t * d, *ek = s->ek + (size_t)t * d, *u = s->u + (size_t)t * d;
        memset(ev, 0, d * sizeof(float));
        for (uint32_t m = 0; m < g->engram_taps && (uint64_t)m * g->engram_dilation <= p; m++) {
            const float *tap = st->taps + (size_t)m * d, *v0 = v0_at(s, site, p - m * g->engram_dilation);
            for (uint32_t i = 0; i < d; i++) ev[i] += tap[i] * v0[i];
        }
        float dot = 0, ru = rms_inv(u, d), rk = rms_inv(ek, d);
        for (uint32_t i = 0; i < d; i++) dot += (u[i] * ru) * (ek[i] * rk);
        float alpha = nd_sigmoid(dot * inv_sqrt_d);
        float *bx = s->bx + (size_t)t * d;
        for (uint32_t i = 0; i < d; i++) bx[i] = u[i] + alpha * ev[i];
    }
}

/* ---- probe pooling ---------------------------------------------------------- */

static void pool_clear(needle_session *s) {
    uint32_t d = s->model->archive.geometry.hidden;
    for (size_t at = 0; at < s->pool_floats; at += 2 + d) {
        s->pool[at] = -INFINITY;
        memset(s->pool + at + 1, 0, (1 + d) * sizeof(float));
    }
}

/* Probe k (counting across heads) and its running state: max, sum, sum of cells. */
static const float *probe_at(const needle_session *s, uint32_t k, float **acc) {
    const needle_model *m = s->model;
    uint32_t d = m->archive.geometry.hidden;
    *acc = s->pool + (size_t)k * (2 + d);
    uint32_t h = 0;
    while (k >= m->heads[h].probes) k -= m->heads[h++].probes;
    return m->heads[h].probe + (size_t)k * d;
}

/* Cells to pool, in position order: count rows of d floats, into probes
 * first, first + 1, ... */
typedef struct {
    needle_session *s;
    const float *cells;
    uint32_t count, first;
} pool_job;

/* One online-softmax step of probe first + k per cell, cell after cell. */
static void pool_probe(const void *ctx, uint32_t k) {
    const pool_job *j = ctx;
    uint32_t d = j->s->model->archive.geometry.hidden;
    float inv = (float)(1.0 / sqrt((double)d)), *acc;
    const float *probe = probe_at(j->s, j->first + k, &acc);
    for (uint32_t n = 0; n < j->count; n++) {
        const float *c = j->cells + (size_t)n * d;
        float score = dot16(c, probe, d) * inv;
        float keep = 1.0f, w = 1.0f;
        if (score > acc[0]) {
            keep = expf(acc[0] - score); /* 0 for the first cell */
            acc[0] = score;
        } else {
            w = expf(score - acc[0]);
        }
        acc[1] = acc[1] * keep + w;
        for (uint32_t i = 0; i < d; i++) acc[2 + i] = acc[2 + i] * keep + w * c[i];
    }
}

/* Runs pool_probe over probes first.. of job: in parallel for several cells;
 * for one (a decoded token) on this thread, where each probe's work (one
 * dot and one update of d floats) costs less than handing it to a worker. */
static void pool_probes(pool_job *job, uint32_t probes) {
    if (job->count > 1) nd_parallel(pool_probe, job, probes);
    else for (uint32_t k = 0; k < probes; k++) pool_probe(job, k);
}

/* Pools count cells of kind `cell` (0 the embedding, i + 1 block i's lane
 * mean; rows of d, in position order) into the probes that read them: every
 * probe of every head in Needle 2, each head's probes of that cell in Needle
 * 3. Each probe runs over the cells in order. */
static void pool_cells(needle_session *s, const float *cells, uint32_t count, uint32_t cell) {
    const needle_model *m = s->model;
    pool_job job = {s, cells, count, 0};
    if (!count) return;
    if (!ND_IS_V3(&m->archive.geometry)) {
        pool_probes(&job, (uint32_t)(s->pool_floats / (2 + m->archive.geometry.hidden)));
        return;
    }
    for (uint32_t h = 0; h < m->head_count; job.first += m->heads[h++].probes) {
        pool_job one = {s, cells, count, job.first + cell * m->heads[h].per_cell};
        pool_probes(&one, m->heads[h].per_cell);
    }
}

/* ---- the forward pass of one chunk -------------------------------------------- */

/* x[n*d] of each position: the embedding row times sqrt(d) in every lane. */
static void embed(needle_session *s, uint32_t T) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t d = g->hidden, nd = g->lanes * d;
    float scale = (float)sqrt((double)d);
    uint32_t count = 0; /* non-pad cells to pool, gathered in u (free until mhc_pre) */
    for (uint32_t t = 0; t < T; t++) {
        float *x = s->x + (size_t)t * nd;
        nd_cq_gather(&s->model->embedding, (uint32_t)s->ids[t], x, s->tmp);
        for (uint32_t i = 0; i < d; i++) x[i] *= scale;
        if (s->model->head_count && s->ids[t] != s->model->pad_id)
            memcpy(s->u + (size_t)count++ * d, x, d * sizeof(float));
        for (uint32_t j = 1; j < g->lanes; j++) memcpy(x + (size_t)j * d, x, d * sizeof(float));
    }
    pool_cells(s, s->u, count, 0);
}

/* nx = rms_unit(X) at position t, the lanes taken as one vector. */
static void mhc_norm_position(const void *ctx, uint32_t t) {
    const layer_job *j = ctx;
    uint32_t nd = j->s->model->archive.geometry.lanes * j->s->model->archive.geometry.hidden;
    const float *x = j->s->x + (size_t)t * nd;
    float r = rms_inv(x, nd), *nx = j->s->nx + (size_t)t * nd;
    for (uint32_t i = 0; i < nd; i++) nx[i] = x[i] * r;
    if (ND_IS_V3(&j->s->model->archive.geometry) && !j->s->exact) nd_a8(nx, nd); /* an A8 point of Needle 3 */
}

/* u = sum_j hpre[j] X[j] at position t (with lane offsets). */
static void mhc_mix_position(const void *ctx, uint32_t t) {
    const layer_job *j = ctx;
    const needle_session *s = j->s;
    const nd_layer *l = j->l;
    uint32_t n = s->model->archive.geometry.lanes, d = s->model->archive.geometry.hidden, c = j->li % n;
    const float *x = s->x + (size_t)t * n * d;
    float *u = s->u + (size_t)t * d;
    memset(u, 0, d * sizeof(float));
    for (uint32_t a = 0; a < n; a++) {
        float hp = nd_sigmoid(l->a_pre * s->mpre[t * n + a] + l->b_pre[a] + (a == c ? 4.0f : -4.0f));
        for (uint32_t i = 0; i < d; i++) u[i] += hp * x[(size_t)a * d + i];
    }
}

/* u = sum_j hpre[j] X[j] from the mHC pre mix, positions in parallel. */
static void mhc_pre(needle_session *s, const nd_layer *l, uint32_t li, uint32_t T) {
    uint32_t nd = s->model->archive.geometry.lanes * s->model->archive.geometry.hidden;
    layer_job job = {s, l, li};
    nd_parallel(mhc_norm_position, &job, T);
    const nd_cq *phi[] = {&l->phi_pre, &l->phi_post, &l->phi_res};
    float *out[] = {s->mpre, s->mpost, s->mres};
    phi_matmuls(s, phi, out, 3, s->nx, nd, T);
    nd_parallel(mhc_mix_position, &job, T);
}

/* out[i] = h y[i] + r[0] x[0][i] + ... + r[n-1] x[n-1][i] (lanes d floats
 * apart), added in that order, in one pass; inlined with n constant for the
 * released lane count, so the lanes unroll and i vectorises. */
static inline __attribute__((always_inline)) void mix_lane(float *restrict out, float h, const float *restrict y,
                                                           const float *r, const float *restrict x, uint32_t n,
                                                           uint32_t d) {
    for (uint32_t i = 0; i < d; i++) {
        float o = h * y[i];
        for (uint32_t b = 0; b < n; b++) o += r[b] * x[(size_t)b * d + i];
        out[i] = o;
    }
}

/* X'[a] = sum_b R[a][b] X[b] + hpost[a] * y at position t, y = block output
 * - u (scratch: its row of s->nx, free once Phi has read it). */
static void mhc_post_position(const void *ctx, uint32_t t) {
    const layer_job *j = ctx;
    needle_session *s = j->s;
    const nd_layer *l = j->l;
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t n = g->lanes, d = g->hidden, nd = n * d, c = j->li % n;
    double R[ND_MAX_LANES * ND_MAX_LANES];
    float *x = s->x + (size_t)t * nd, *y = s->bx + (size_t)t * d, *u = s->u + (size_t)t * d;
    float *tmp = s->nx + (size_t)t * nd, hpost[ND_MAX_LANES];
    for (uint32_t i = 0; i < d; i++) y[i] -= u[i];
    for (uint32_t a = 0; a < n; a++)
        hpost[a] = 2.0f * nd_sigmoid(l->a_post * s->mpost[t * n + a] + l->b_post[a] + (a == c ? 0.0f : -4.0f));
    for (uint32_t i = 0; i < n * n; i++) R[i] = (double)(l->a_res * s->mres[(size_t)t * n * n + i] + l->b_res[i]);
    if (s->exact) sinkhorn(R, n); /* the spec's log-space iteration, as written */
    else sinkhorn_scaled(R, n);
    for (uint32_t a = 0; a < n; a++) {
        float r[ND_MAX_LANES];
        for (uint32_t b = 0; b < n; b++) r[b] = (float)R[a * n + b];
        if (n == ND_MAX_LANES) mix_lane(tmp + (size_t)a * d, hpost[a], y, r, x, ND_MAX_LANES, d);
        else mix_lane(tmp + (size_t)a * d, hpost[a], y, r, x, n, d);
    }
    memcpy(x, tmp, nd * sizeof(float));
}

/* The mHC post mix of every position, then (in position order: the pools
 * are running sums) the pooling of each position's lane mean. */
static void mhc_post(needle_session *s, const nd_layer *l, uint32_t li, uint32_t T) {
    const needle_model *m = s->model;
    uint32_t n = m->archive.geometry.lanes, d = m->archive.geometry.hidden;
    layer_job job = {s, l, li};
    nd_parallel(mhc_post_position, &job, T);
    if (!m->head_count) return;
    uint32_t count = 0; /* the lane means of the non-pad positions, into u (free now) */
    for (uint32_t t = 0; t < T; t++)
        if (s->ids[t] != m->pad_id) lane_mean(s->x + (size_t)t * n * d, n, d, s->u + (size_t)count++ * d);
    pool_cells(s, s->u, count, li + 1);
}

static void final_hidden(needle_session *s, uint32_t first, uint32_t T);

/* logits[T'][vocab] = E zcrms(mean of lanes, final_norm) for positions first..T-1. */
static void final_logits(needle_session *s, uint32_t first, uint32_t T, float *logits) {
    const nd_geometry *g = &s->model->archive.geometry;
#ifdef ND_NEEDLE3
    if (ND_IS_V3(g) && g->out_vocab < g->vocab) {
        /* Needle 3's input-only rows are never scored: their logits are -inf. */
        uint32_t n = T - first, scored = g->out_vocab;
        nd_cq head = s->model->embedding; /* its tiles lie within the scored rows (model.c) */
        head.rows = scored;
        final_hidden(s, first, T);
        matmul(s, &head, s->u, g->hidden, n, logits);
        for (uint32_t t = n; t-- > 0;) {
            memmove(logits + (size_t)t * g->vocab, logits + (size_t)t * scored, scored * sizeof(float));
            for (uint32_t r = scored; r < g->vocab; r++) logits[(size_t)t * g->vocab + r] = -INFINITY;
        }
        return;
    }
#endif
    final_hidden(s, first, T);
    matmul(s, &s->model->embedding, s->u, g->hidden, T - first, logits);
}

/* u[T'][d] = zcrms(mean of lanes, final_norm) for positions first..T-1. */
static void final_hidden(needle_session *s, uint32_t first, uint32_t T) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t n = g->lanes, d = g->hidden;
    for (uint32_t t = first; t < T; t++) {
        const float *x = s->x + (size_t)t * n * d;
        float *f = s->u + (size_t)(t - first) * d;
        lane_mean(x, n, d, f);
        zcrms(f, s->model->final_norm, d, f);
    }
}

static void forward_chunk(needle_session *s, const int32_t *ids, uint32_t T, float *logits, int all) {
    const needle_model *m = s->model;
    const nd_geometry *g = &m->archive.geometry;
    uint32_t p0 = s->position;
    s->ids = ids;
    for (uint32_t t = 0; t < T; t++) *token_at(s, p0 + t) = ids[t];
    if (g->site_count)
        for (uint32_t t = 0; t < T; t++)
            engram_slots(s, p0 + t, s->slots + (size_t)t * g->engram_tables,
                         s->keep + (size_t)t * g->engram_tables);
    rope_table(s, p0, T);
    double clock = stage_clock(s);
    embed(s, T);
    stage_lap(s, NEEDLE_STAGE_EMBEDDING, clock);
    for (uint32_t li = 0; li < g->layers; li++) {
        const nd_layer *l = &m->layers[li];
        clock = stage_clock(s);
        mhc_pre(s, l, li, T);
        clock = stage_lap(s, NEEDLE_STAGE_MHC, clock);
        if (l->site >= 0) engram_block(s, (uint32_t)l->site, p0, T);
        else memcpy(s->bx, s->u, (size_t)T * g->hidden * sizeof(float));
        stage_lap(s, NEEDLE_STAGE_ENGRAM, clock);
        attention_block(s, li, p0, T); /* times its own two stages */
        clock = stage_clock(s);
        mlp_block(s, l, T);
        clock = stage_lap(s, NEEDLE_STAGE_MLP, clock);
        mhc_post(s, l, li, T);
        stage_lap(s, NEEDLE_STAGE_MHC, clock);
    }
    s->position = p0 + T;
    if (s->position > s->kv_cap && s->position - s->kv_cap > s->kv_from)
        s->kv_from = s->position - s->kv_cap;
    if (s->position > s->tok_cap && s->position - s->tok_cap > s->tok_from)
        s->tok_from = s->position - s->tok_cap;
    if (s->raw_cap && s->position > s->raw_cap && s->position - s->raw_cap > s->raw_from)
        s->raw_from = s->position - s->raw_cap;
    clock = stage_clock(s);
    if (logits) final_logits(s, all ? 0 : T - 1, T, logits);
    stage_lap(s, NEEDLE_STAGE_LOGITS, clock);
}

/* ---- public API --------------------------------------------------------------- */

int needle_session_feed(needle_session *s, const int32_t *ids, size_t n, float *logits, int all,
                        needle_error *err) {
    if (!s || (n && !ids)) return nd_fail(err, NEEDLE_E_ARGUMENT, "session or ids is NULL");
    if (!n) return logits ? nd_fail(err, NEEDLE_E_ARGUMENT, "no tokens to give logits for") : NEEDLE_OK;
    const nd_geometry *g = &s->model->archive.geometry;
    for (size_t i = 0; i < n; i++)
        if (ids[i] < 0 || (uint32_t)ids[i] >= g->vocab)
            return nd_fail(err, NEEDLE_E_ARGUMENT, "token %zu is %d, vocabulary is %u", i, ids[i], g->vocab);
    if (n > UINT32_MAX - s->position)
        return nd_fail(err, NEEDLE_E_CONTEXT, "%zu more tokens overflow the position counter", n);
    for (size_t done = 0; done < n;) {
        uint32_t T = n - done < ND_CHUNK ? (uint32_t)(n - done) : ND_CHUNK;
        float *out = NULL;
        if (logits && all) out = logits + done * g->vocab;
        else if (logits && done + T == n) out = logits;
        double clock = stage_clock(s);
        forward_chunk(s, ids + done, T, out, all);
        stage_lap(s, NEEDLE_STAGE_OTHER, clock); /* whole chunks; the rest is subtracted on reading */
        done += T;
    }
    return NEEDLE_OK;
}

/* What follows runs once per session, turn or query (set-up, rewind, the
 * heads), not per token: compiled for size, which keeps the module within
 * its budget. */
#ifdef __clang__
#pragma clang attribute push(__attribute__((minsize)), apply_to = function)
#endif

void needle_session_set_profiling(needle_session *s, int on) {
    if (!s) return;
    s->profiling = on != 0;
    if (on) memset(s->stage_ms, 0, sizeof s->stage_ms);
}

uint32_t needle_session_profile(const needle_session *s, double *ms, uint32_t n) {
    double other = s ? s->stage_ms[NEEDLE_STAGE_OTHER] : 0;
    for (uint32_t i = 0; s && i < NEEDLE_STAGE_OTHER; i++) other -= s->stage_ms[i];
    for (uint32_t i = 0; ms && i < n && i < NEEDLE_STAGE_COUNT; i++)
        ms[i] = !s ? 0 : i == NEEDLE_STAGE_OTHER ? (other > 0 ? other : 0) : s->stage_ms[i];
    return NEEDLE_STAGE_COUNT;
}

uint32_t needle_session_position(const needle_session *s) { return s ? s->position : 0; }

/* Why row `which` of (layer, head) at pos has no levels to read, or NULL. */
static const char *kv_levels_refused(const needle_session *s, uint32_t layer, uint32_t head, uint32_t pos,
                                     int which) {
    const nd_geometry *g = &s->model->archive.geometry;
    if (s->kv_format != KV_CQ) return "the KV cache holds no CQ levels (kvBits 8)";
    if (layer >= g->layers || head >= g->kv_heads || (which != 0 && which != 1)) return "no such layer, kv head or row";
    if (pos >= s->position || (pos >= s->sinks && pos < s->kv_from)) return "that position is not in the cache";
    return NULL;
}

uint32_t needle_session_kv_levels(const needle_session *s, uint32_t layer, uint32_t head, uint32_t pos, int which,
                                  uint8_t *out, uint32_t cap, needle_error *err) {
    const char *why = !s || (cap && !out) ? "session or out is NULL" : kv_levels_refused(s, layer, head, pos, which);
    if (why) {
        nd_fail(err, NEEDLE_E_ARGUMENT, "kv levels of layer %u, head %u, position %u: %s", layer, head, pos, why);
        return 0;
    }
    const uint8_t *idx = kv_row(s, pos, layer, head, which) + (size_t)(s->hdp / ND_KV_GROUP) * 4;
    if (cap) memcpy(out, idx, cap < s->hdp ? cap : s->hdp);
    return s->hdp;
}

/* Tokens the engram of position r and the value history before it read. */
static uint32_t token_history(const nd_geometry *g) {
    uint32_t maxo = 1;
    for (uint32_t o = 0; o < g->order_count; o++) maxo = g->orders[o] > maxo ? g->orders[o] : maxo;
    return (maxo - 1) + (g->engram_taps ? g->engram_taps - 1 : 0) * g->engram_dilation;
}

/* Recomputes the engram values v0 of positions [r - (taps-1)*dilation, r). */
static void rebuild_v0(needle_session *s, uint32_t r) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t span = (g->engram_taps ? g->engram_taps - 1 : 0) * g->engram_dilation;
    uint32_t from = r > span ? r - span : 0;
    for (uint32_t p = from; p < r; p++) {
        engram_slots(s, p, s->slots, s->keep);
        for (uint32_t site = 0; site < g->site_count; site++) {
            const nd_site *st = &s->model->sites[site];
            engram_gather(s, st, s->slots, s->keep, s->e);
            matmul(s, &st->value, s->e, 0, 1, v0_at(s, site, p));
        }
    }
}

int needle_session_rewind(needle_session *s, uint32_t r, needle_error *err) {
    if (!s) return nd_fail(err, NEEDLE_E_ARGUMENT, "session is NULL");
    if (r > s->position)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "cannot rewind to %u: only %u positions fed", r, s->position);
    if (r == s->position) return NEEDLE_OK;
    const nd_geometry *g = &s->model->archive.geometry;
    /* The next query at r reads K/V of [lo, r) and the engram reads tokens of [tlo, r). */
    uint32_t lo = r + 1 > s->window ? r + 1 - s->window : 0, hist = token_history(g);
    uint32_t tlo = r > hist ? r - hist : 0;
    if (lo < s->sinks) lo = s->sinks;
    if (tlo < s->sinks) tlo = s->sinks;
    if ((lo < r && lo < s->kv_from) || (tlo < r && tlo < s->tok_from))
        return nd_fail(err, NEEDLE_E_CONTEXT, "cannot rewind to %u: positions from %u on left the cache",
                       r, lo < s->kv_from ? lo : tlo);
#ifdef ND_NEEDLE3
    /* Needle 3's convolution at r reads the raw projections of [r - C + 1, r). */
    for (uint32_t p = r + 1 > g->conv_taps ? r + 1 - g->conv_taps : 0; s->raw_cap && p < r; p++)
        if (!raw_kept(s, p))
            return nd_fail(err, NEEDLE_E_CONTEXT, "cannot rewind to %u: the convolution state of %u left the cache",
                           r, p);
#endif
    s->position = r;
    if (s->kv_from > r) s->kv_from = r;
    if (s->tok_from > r) s->tok_from = r;
    if (s->raw_from > r) s->raw_from = r;
    if (r == 0) pool_clear(s);
    else if (g->site_count) rebuild_v0(s, r);
    return NEEDLE_OK;
}

/* ---- construction --------------------------------------------------------------- */

static int add_size(size_t *total, uint64_t count) {
    if (count > (SIZE_MAX / sizeof(float)) - *total) return 0;
    *total += (size_t)count;
    return 1;
}

static void widen(uint32_t *w, const nd_cq *c, int tiled_only) {
    if ((c->tiles || !tiled_only) && nd_cq_padded(c) > *w) *w = nd_cq_padded(c);
}

/* The widest padded input of the matrices a forward pass multiplies (of the
 * tiled ones only: tiled_only). */
static uint32_t widest_input(const needle_model *m, int tiled_only) {
    const nd_geometry *g = &m->archive.geometry;
    uint32_t w = 0;
    widen(&w, &m->embedding, tiled_only);
    for (uint32_t i = 0; i < g->layers; i++) {
        const nd_layer *l = &m->layers[i];
        const nd_cq *all[] = {&l->q, &l->k, &l->v, &l->gate, &l->out, &l->phi_pre, &l->phi_post, &l->phi_res};
        for (size_t j = 0; j < sizeof all / sizeof *all; j++) widen(&w, all[j], tiled_only);
    }
    for (uint32_t i = 0; i < g->site_count; i++) {
        widen(&w, &m->sites[i].key, tiled_only);
        widen(&w, &m->sites[i].value, tiled_only);
    }
    return w;
}

/* Carves every per-chunk buffer out of one allocation. */
static int session_scratch(needle_session *s, needle_error *err) {
    const needle_model *m = s->model;
    const nd_geometry *g = &m->archive.geometry;
    uint64_t B = ND_CHUNK, d = g->hidden, n = g->lanes, nd = n * d;
    uint64_t qw = (uint64_t)g->query_heads * g->head_dim, kw = (uint64_t)g->kv_heads * g->head_dim;
    uint64_t vw = (uint64_t)g->kv_heads * g->v_head_dim, ow = (uint64_t)g->query_heads * g->v_head_dim;
    uint64_t z = ND_IS_V3(g) ? ND_MLP3_SCRATCH((uint64_t)g->hadamard_dim) + 2 * d : g->hadamard_dim;
    uint64_t width = (uint64_t)g->engram_tables * g->engram_sub, tb = g->engram_tables;
    uint64_t tmp = nd > g->hadamard_dim ? nd : g->hadamard_dim;
    if (tmp < ND_CQ_MAX_GROUP) tmp = ND_CQ_MAX_GROUP;
    float **ptr[] = {&s->x, &s->nx, &s->xr, &s->mpre, &s->mpost, &s->mres, &s->u, &s->bx, &s->h,
                     &s->a, &s->ek, &s->ev, &s->q, &s->gt, &s->o, &s->k, &s->v, &s->e,
                     &s->keep, &s->rope, &s->tmp, &s->q8, &s->lut, &s->a8, &s->z};
    /* q8: an int16 and at most a float scale a column; the tables of one position: at most one code a
     * column (two 2-bit columns share one), two 16-byte planes a code */
    uint64_t wide = widest_input(m, 0), tiled = widest_input(m, 1);
    uint64_t len[] = {B * nd, B * nd, B * wide, B * n, B * n, B * n * n, B * d, B * d,
                      B * d, B * d, B * d, B * d, B * qw, B * ow, B * ow, B * kw, B * vw,
                      B * width, B * tb, B * g->head_dim, tmp, B * (wide * 3 / 2 + 1), tiled * 32 / sizeof(float), B * wide, B * z};
    size_t total = 0;
    for (size_t i = 0; i < sizeof len / sizeof *len; i++)
        if (!add_size(&total, len[i])) return nd_fail(err, NEEDLE_E_NOMEM, "session scratch overflows");
    s->buf = calloc(total, sizeof(float));
    s->bytes += total * sizeof(float) + ((size_t)(B * tb) + 1) * sizeof(uint32_t);
    s->slots = calloc((size_t)(B * tb) + 1, sizeof(uint32_t));
    if (!s->buf || !s->slots) return nd_fail(err, NEEDLE_E_NOMEM, "no memory for %zu scratch floats", total);
    float *at = s->buf;
    for (size_t i = 0; i < sizeof len / sizeof *len; i++) {
        *ptr[i] = at;
        at += len[i];
    }
    return NEEDLE_OK;
}

/* Allocates a zeroed array of count * size bytes, or NULL on overflow. */
static void *alloc_array(uint64_t count, uint64_t size) {
    if (size && count > SIZE_MAX / size) return NULL;
    return calloc(count ? (size_t)count : 1, (size_t)size);
}

/* Sink storage for `sinks` pinned positions. */
static int alloc_sinks(needle_session *s, uint32_t sinks, uint8_t **kv, int32_t **tok, needle_error *err) {
    *kv = alloc_array(sinks, s->slot_bytes);
    *tok = alloc_array(sinks, sizeof(int32_t));
    if (*kv && *tok) {
        s->bytes -= s->sink_bytes;
        s->sink_bytes = (size_t)sinks * (s->slot_bytes + sizeof(int32_t));
        s->bytes += s->sink_bytes;
        return NEEDLE_OK;
    }
    free(*kv), free(*tok);
    return nd_fail(err, NEEDLE_E_NOMEM, "no memory for %u pinned positions", sinks);
}

/* Carves one KV head's attention buffers out of f (nq queries). */
static float *head_carve(head_attention *ha, float *f, uint64_t nq, uint32_t hdp) {
    ha->aq = f, f += nq * hdp;
    ha->attn.acc = f, f += nq * hdp;
    ha->aqs = f, f += nq * (hdp / 32 + 1);
    ha->attn.max = f, f += nq;
    ha->attn.sum = f, f += nq;
    ha->cq_rows = f, f += 2 * ND_ATTN_BLOCK * hdp;
    ha->aq8 = (int16_t *)f;
    uint32_t *u = (uint32_t *)(ha->aq8 + nq * hdp); /* nq * hdp is even: 4-byte aligned */
    ha->alo = u, ha->ahi = u + nq, ha->slo = u + 2 * nq;
    uintptr_t work = ((uintptr_t)(u + 3 * nq) + 15) & ~(uintptr_t)15; /* the SIMD kernels' block buffers */
    ha->attn.work = (void *)work;
    ha->attn.hdp = hdp;
    ha->attn.q = ha->aq, ha->attn.q8 = ha->aq8, ha->attn.qscale = ha->aqs, ha->attn.hi = ha->ahi;
    return (float *)((work + nd_attn_work_bytes(hdp) + 15) & ~(uintptr_t)15);
}

/* The attention state of every KV head: rep * ND_CHUNK queries each (one KV
 * head over a chunk), one allocation. */
static int attn_alloc(needle_session *s, needle_error *err) {
    const nd_geometry *g = &s->model->archive.geometry;
    uint64_t nq = (uint64_t)(g->query_heads / g->kv_heads) * ND_CHUNK, hdp = s->hdp;
    uint64_t floats = nq * hdp * 2 + nq * (hdp / 32 + 1) + 2 * nq + 2 * ND_ATTN_BLOCK * hdp;
    uint64_t head = floats * 4 + nq * hdp * 2 + 3 * nq * 4 + nd_attn_work_bytes(s->hdp) + 32;
    uint64_t bytes = head * g->kv_heads + nq * 4 + g->kv_heads * sizeof(head_attention) + 16;
    if (bytes > SIZE_MAX || !(s->attn_buf = calloc(1, (size_t)bytes)))
        return nd_fail(err, NEEDLE_E_NOMEM, "no memory for the attention of %llu queries", (unsigned long long)nq);
    s->bytes += (size_t)bytes;
    s->heads = s->attn_buf;
    s->azero = (uint32_t *)(s->heads + g->kv_heads);
    float *f = (float *)(((uintptr_t)(s->azero + nq) + 15) & ~(uintptr_t)15);
    for (uint32_t h = 0; h < g->kv_heads; h++) f = head_carve(&s->heads[h], f, nq, s->hdp);
    return NEEDLE_OK;
}

static int session_alloc(needle_session *s, needle_error *err) {
    const needle_model *m = s->model;
    const nd_geometry *g = &m->archive.geometry;
    uint32_t hd = g->head_dim > g->v_head_dim ? g->head_dim : g->v_head_dim; /* K and V rows share one width */
    s->kv_format = g->kv_bits != 8 ? KV_CQ : s->kv_format;
    uint32_t pad = s->kv_format == KV_CQ ? ND_KV_GROUP : s->kv_format == KV_I8 ? 32 : 4;
    s->hdp = (hd + pad - 1) / pad * pad;
    if (s->kv_format == KV_F32) s->row_bytes = (size_t)s->hdp * 4;
    else if (s->kv_format == KV_I8) s->row_bytes = (size_t)(s->hdp / 32) * 4 + s->hdp;
    else s->row_bytes = (size_t)(s->hdp / ND_KV_GROUP) * 4 + s->hdp;
    s->slot_bytes = (size_t)g->layers * g->kv_heads * 2 * s->row_bytes;
    uint32_t rewind = ND_IS_V3(g) ? ND_SESSION_REWIND : 0;
    s->kv_cap = s->window + ND_CHUNK + rewind;
    s->tok_cap = s->window + ND_CHUNK + rewind + token_history(g) + 1;
    s->v0_cap = (g->engram_taps ? g->engram_taps - 1 : 0) * g->engram_dilation + ND_CHUNK;
    for (uint32_t h = 0; h < m->head_count; h++)
        s->pool_floats += (size_t)m->heads[h].probes * (2 + g->hidden);
    s->ring = alloc_array(s->kv_cap, s->slot_bytes);
    s->ring_tok = alloc_array(s->tok_cap, sizeof(int32_t));
    s->v0 = alloc_array((uint64_t)g->site_count * s->v0_cap * g->hidden, sizeof(float));
    s->pool = alloc_array(s->pool_floats, sizeof(float));
    if (!s->ring || !s->ring_tok || !s->v0 || !s->pool)
        return nd_fail(err, NEEDLE_E_NOMEM, "no memory for a KV cache of %u positions", s->kv_cap);
    s->bytes = (size_t)s->kv_cap * s->slot_bytes + (size_t)s->tok_cap * sizeof(int32_t) +
               ((size_t)g->site_count * s->v0_cap * g->hidden + s->pool_floats) * sizeof(float);
#ifdef ND_NEEDLE3
    if (g->conv_taps) { /* the raw projections of every position a rewind may return to */
        uint64_t row = raw_width(g);
        s->raw_cap = s->kv_cap + g->conv_taps;
        s->raw = alloc_array((uint64_t)g->layers * s->raw_cap * row, sizeof(float));
        if (!s->raw) return nd_fail(err, NEEDLE_E_NOMEM, "no memory for the convolution state");
        s->bytes += (size_t)g->layers * s->raw_cap * row * sizeof(float);
        if (g->conv_taps > 1 && !(s->raw_pin = alloc_array((uint64_t)g->layers * (g->conv_taps - 1) * row, sizeof(float))))
            return nd_fail(err, NEEDLE_E_NOMEM, "no memory for the pinned convolution state");
        s->bytes += (size_t)g->layers * (g->conv_taps - 1) * row * sizeof(float);
    }
#endif
    pool_clear(s);
    int rc = alloc_sinks(s, s->sinks, &s->sink, &s->sink_tok, err);
    if (!rc) rc = attn_alloc(s, err);
    return rc ? rc : session_scratch(s, err);
}

needle_session *needle_session_new(const needle_model *model, uint32_t window, uint32_t sinks,
                                   int exact, needle_error *err) {
    if (!model) { nd_fail(err, NEEDLE_E_ARGUMENT, "model is NULL"); return NULL; }
    if (window > ND_MAX_SEQ || sinks > ND_MAX_SEQ) {
        nd_fail(err, NEEDLE_E_ARGUMENT, "window %u or sinks %u exceeds %u", window, sinks, ND_MAX_SEQ);
        return NULL;
    }
    needle_session *s = calloc(1, sizeof *s);
    if (!s) { nd_fail(err, NEEDLE_E_NOMEM, "no memory for a session"); return NULL; }
    s->model = model;
    s->window = window ? window : model->window;
    s->sinks = sinks;
    s->kv_format = exact ? KV_F32 : KV_I8;
    s->exact = exact != 0;
    if (session_alloc(s, err)) { needle_session_free(s); return NULL; }
    return s;
}

void needle_session_free(needle_session *s) {
    if (!s) return;
    free(s->ring), free(s->sink), free(s->ring_tok), free(s->sink_tok), free(s->v0);
    free(s->pool), free(s->slots), free(s->buf), free(s->attn_buf), free(s->raw), free(s->raw_pin);
    free(s);
}

#ifdef ND_NEEDLE3
/* For set_sinks: the raw rows of the new last C-1 sinks, from wherever they
 * are still held (a row no longer held stays unpinned, and a rewind that
 * needs it is refused). */
static int raw_repin(const needle_session *s, uint32_t sinks, float **out, uint64_t *bits, needle_error *err) {
    *out = NULL, *bits = 0;
    if (!s->raw_pin) return NEEDLE_OK;
    const nd_geometry *g = &s->model->archive.geometry;
    uint32_t keep = g->conv_taps - 1, row = raw_width(g);
    float *pin = alloc_array((uint64_t)g->layers * keep * row, sizeof(float));
    if (!pin) return nd_fail(err, NEEDLE_E_NOMEM, "no memory for the pinned convolution state");
    uint64_t pinned = 0;
    for (uint32_t p = sinks > keep ? sinks - keep : 0; p < sinks; p++) {
        if (!raw_kept(s, p)) continue;
        for (uint32_t li = 0; li < g->layers; li++)
            memcpy(pin + ((size_t)li * keep + p + keep - sinks) * row, raw_row(s, li, p), row * sizeof(float));
        pinned |= 1ull << (p + keep - sinks);
    }
    *out = pin, *bits = pinned;
    return NEEDLE_OK;
}
#else
static int raw_repin(const needle_session *s, uint32_t sinks, float **out, uint64_t *bits, needle_error *err) {
    (void)s, (void)sinks, (void)err;
    *out = NULL, *bits = 0;
    return NEEDLE_OK;
}
#endif

int needle_session_set_sinks(needle_session *s, uint32_t sinks, needle_error *err) {
    if (!s) return nd_fail(err, NEEDLE_E_ARGUMENT, "session is NULL");
    if (sinks > ND_MAX_SEQ) return nd_fail(err, NEEDLE_E_ARGUMENT, "sinks %u exceeds %u", sinks, ND_MAX_SEQ);
    uint32_t keep = s->position < s->sinks ? s->position : s->sinks; /* already pinned, stays */
    uint32_t move_to = s->position < sinks ? s->position : sinks;     /* [old sinks, move_to) from the ring */
    if (sinks < s->sinks && s->position > sinks)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "cannot unpin positions %u..%u already fed; rewind first",
                       sinks, keep - 1);
    if (move_to > s->sinks && (s->sinks < s->kv_from || s->sinks < s->tok_from))
        return nd_fail(err, NEEDLE_E_CONTEXT, "positions %u..%u left the cache before being pinned",
                       s->sinks, move_to - 1);
    uint8_t *kv;
    int32_t *tok;
    float *pin;
    uint64_t pinned;
    int rc = raw_repin(s, sinks, &pin, &pinned, err);
    if (!rc && (rc = alloc_sinks(s, sinks, &kv, &tok, err))) free(pin);
    if (rc) return rc;
    if (pin) free(s->raw_pin), s->raw_pin = pin, s->raw_pinned = pinned;
    if (keep > sinks) keep = sinks;
    uint32_t upto = keep > move_to ? keep : move_to;
    const nd_geometry *g = &s->model->archive.geometry;
    for (uint32_t l = 0; l < g->layers; l++) /* the rows of [0, upto): from the old sinks, then the ring */
        for (uint32_t h = 0; h < g->kv_heads; h++)
            for (uint32_t p = 0; p < upto; p++) {
                size_t at = ((size_t)l * g->kv_heads + h) * sinks + p;
                memcpy(kv + at * 2 * s->row_bytes, kv_row(s, p, l, h, 0), 2 * s->row_bytes);
            }
    memcpy(tok, s->sink_tok, (size_t)keep * sizeof(int32_t));
    for (uint32_t p = s->sinks; p < move_to; p++) tok[p] = s->ring_tok[p % s->tok_cap];
    free(s->sink), free(s->sink_tok);
    s->sink = kv, s->sink_tok = tok, s->sinks = sinks;
    return NEEDLE_OK;
}

size_t nd_session_memory(const needle_session *s) { return s ? s->bytes + sizeof *s : 0; }

uint32_t nd_session_sinks(const needle_session *s) { return s ? s->sinks : 0; }

/* ---- heads -------------------------------------------------------------------- */

uint32_t nd_head_outputs(const needle_model *m, uint32_t kind) {
    for (uint32_t h = 0; m && h < m->head_count; h++)
        if (m->heads[h].kind == kind) return m->heads[h].out;
    return 0;
}

uint32_t needle_model_head_outputs(const needle_model *m, int kind) { return kind > 0 ? nd_head_outputs(m, (uint32_t)kind) : 0; }

size_t nd_session_pool_bytes(const needle_model *m) {
    size_t floats = 0;
    for (uint32_t h = 0; m && h < m->head_count; h++)
        floats += (size_t)m->heads[h].probes * (2 + m->archive.geometry.hidden);
    return floats ? floats * sizeof(float) : 1;
}

void nd_session_pool_save(const needle_session *s, void *mark) {
    if (s->pool_floats) memcpy(mark, s->pool, s->pool_floats * sizeof(float));
}

void nd_session_pool_restore(needle_session *s, const void *mark) {
    if (s->pool_floats) memcpy(s->pool, mark, s->pool_floats * sizeof(float));
}

void needle_session_pool_reset(needle_session *s) {
    if (s) pool_clear(s);
}

#ifdef ND_NEEDLE3
static double dot_f64(const float *a, const float *b, uint32_t n) {
    double s = 0;
    for (uint32_t i = 0; i < n; i++) s += (double)a[i] * b[i];
    return s;
}

/* Needle 3's head output (needle3-model.md section 5) into out[hd->out]:
 * each (cell, probe) pool rms-normalised times its gain, each query's
 * softmax over those, then proj of the queries' pooled vectors, plus bias. */
static int head_out3(const needle_model *m, const nd_head *hd, const float *pool, double *out, needle_error *err) {
    uint32_t d = m->archive.geometry.hidden, P = hd->probes, q = hd->queries;
    float *r = malloc((size_t)P * d * sizeof(float)), *pooled = calloc((size_t)q * d, sizeof(float));
    double *u = malloc(P * sizeof(double)), inv = 1.0 / sqrt((double)d);
    int rc = r && pooled && u ? NEEDLE_OK : nd_fail(err, NEEDLE_E_NOMEM, "no memory for a probe head");
    for (uint32_t p = 0; p < P && !rc; p++) {
        const float *acc = pool + (size_t)p * (2 + d);
        double sq = 0;
        for (uint32_t i = 0; i < d; i++) sq += (double)acc[2 + i] * acc[2 + i];
        double scale = hd->gain[p] / sqrt(sq / ((double)acc[1] * acc[1] * d) + 1e-6) / acc[1];
        for (uint32_t i = 0; i < d; i++) r[(size_t)p * d + i] = (float)(acc[2 + i] * scale);
    }
    for (uint32_t j = 0; j < q && !rc; j++) {
        double max = -INFINITY, sum = 0;
        for (uint32_t p = 0; p < P; p++) {
            u[p] = dot_f64(r + (size_t)p * d, hd->query + (size_t)j * d, d) * inv + hd->row_bias[(size_t)j * P + p];
            if (u[p] > max) max = u[p];
        }
        for (uint32_t p = 0; p < P; p++) sum += u[p] = exp(u[p] - max);
        for (uint32_t p = 0; p < P; p++)
            for (uint32_t i = 0; i < d; i++) pooled[(size_t)j * d + i] += (float)(u[p] / sum) * r[(size_t)p * d + i];
    }
    for (uint32_t o = 0; o < hd->out && !rc; o++)
        out[o] = hd->bias[o] + dot_f64(hd->proj + (size_t)o * q * d, pooled, q * d);
    free(r), free(pooled), free(u);
    return rc;
}

/* needle_session_head for Needle 3: the embedding of unit norm, the
 * confidence probability, or the router's three logits as computed. */
static int session_head3(const needle_model *m, const nd_head *hd, const float *pool, float *out, needle_error *err) {
    double value[ND_MAX_EMBED_DIM], norm = 0; /* the widest head: an embedding's */
    int rc = head_out3(m, hd, pool, value, err);
    for (uint32_t o = 0; o < hd->out && !rc; o++) norm += value[o] * value[o];
    for (uint32_t o = 0; o < hd->out && !rc; o++)
        out[o] = hd->kind == ND_HEAD_CONTRASTIVE ? (float)(value[o] / sqrt(norm + 1e-12))
               : hd->kind == ND_HEAD_CONFIDENCE ? (float)(1.0 / (1.0 + exp(-value[o]))) : (float)value[o];
    return rc;
}
#endif

int needle_session_head(needle_session *s, int kind, float *out, needle_error *err) {
    if (!s || !out) return nd_fail(err, NEEDLE_E_ARGUMENT, "session or out is NULL");
    const needle_model *m = s->model;
    uint32_t d = m->archive.geometry.hidden;
    const float *pool = s->pool;
    const nd_head *hd = NULL;
    for (uint32_t h = 0; h < m->head_count && !hd; h++) {
        if (m->heads[h].kind == (uint32_t)kind) hd = &m->heads[h];
        else pool += (size_t)m->heads[h].probes * (2 + d);
    }
    if (!hd) return nd_fail(err, NEEDLE_E_ARGUMENT, "the archive has no probe head of kind %d", kind);
    if (pool[0] == -INFINITY) return nd_fail(err, NEEDLE_E_CONTEXT, "no positions pooled yet");
#ifdef ND_NEEDLE3
    if (ND_IS_V3(&m->archive.geometry)) return session_head3(m, hd, pool, out, err);
#endif
    double norm = 0, first = 0;
    for (uint32_t o = 0; o < hd->out; o++) {
        const float *w = hd->proj + (size_t)o * hd->probes * d;
        double acc = hd->bias[o];
        for (uint32_t k = 0; k < hd->probes; k++) {
            const float *pk = pool + (size_t)k * (2 + d);
            double part = 0;
            for (uint32_t i = 0; i < d; i++) part += (double)w[(size_t)k * d + i] * pk[2 + i];
            acc += part / pk[1];
        }
        if (kind == ND_HEAD_CONTRASTIVE) out[o] = (float)acc;
        if (o == 0) first = acc;
        norm += acc * acc;
    }
    if (kind == ND_HEAD_CONTRASTIVE) {
        double inv = 1.0 / sqrt(norm + 1e-12);
        for (uint32_t o = 0; o < hd->out; o++) out[o] = (float)(out[o] * inv);
    } else {
        out[0] = (float)(1.0 / (1.0 + exp(-first)));
    }
    return NEEDLE_OK;
}

#ifdef __clang__
#pragma clang attribute pop
#endif
