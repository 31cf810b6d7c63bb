/* attention.c: the scalar reference of the attention kernels (see
 * attention.h), the quantiser of rows and queries and the softmax
 * exponential they share.
 * The SIMD128 twins in attention_simd128.c follow these loops step by step:
 * blocks of ND_ATTN_BLOCK (f32) or ND_ATTN_I8_BLOCK (int8) keys from the
 * start of the run, per query the block's scores, its max, the rescale of
 * the state, then the weights and values in the order written here. */
#include "kernels/attention.h"

#include <math.h>
#include <string.h>

size_t nd_attn_work_bytes(uint32_t hdp) {
    /* the int8 SIMD kernel's: K and V scales, a query pair's coefficients
     * and their steps, a short block's rows copied out */
    size_t nb = hdp / 32, keys = ND_ATTN_I8_BLOCK;
    return 2 * nb * keys * 4 + 2 * nb * keys * 2 + 2 * nb * 4 + keys * 2 * (nb * 4 + hdp) + 64;
}

void nd_attn_reset(nd_attn *a) {
    for (uint32_t i = 0; i < a->n; i++) a->max[i] = -INFINITY, a->sum[i] = 0.0f;
    memset(a->acc, 0, (size_t)a->n * a->hdp * sizeof(float));
}

void nd_attn_finish(const nd_attn *a, uint32_t i, uint32_t hd, float *o) {
    const float *acc = a->acc + (size_t)i * a->hdp;
    float sum = a->sum[i];
    for (uint32_t k = 0; k < hd; k++) o[k] = sum > 0.0f ? acc[k] / sum : 0.0f;
}

/* max |x| over values first .. first + count - 1 of x[hd] (NaN skipped). */
static float amax_of(const float *x, uint32_t hd, uint32_t first, uint32_t count) {
    float amax = 0.0f;
    for (uint32_t i = first; i < first + count && i < hd; i++) amax = fmaxf(amax, fabsf(x[i]));
    return amax;
}

/* q[32] of block b of x[hd] (values 32b.., zeros past hd) at `scale`. The
 * clamp comes before rounding (the same for integer bounds), where it also
 * takes NaN to -127, as the SIMD twin's. */
static void quantise_at(const float *x, uint32_t hd, uint32_t b, float scale, int16_t *q) {
    uint32_t n = hd <= b * 32 ? 0 : hd - b * 32 < 32 ? hd - b * 32 : 32;
    for (uint32_t i = 0; i < 32; i++) {
        float y = i < n && scale > 0.0f ? x[b * 32 + i] / scale : 0.0f;
        y = -127.0f < y ? y : -127.0f;
        y = y < 127.0f ? y : 127.0f;
        q[i] = (int16_t)rintf(y);
    }
}

/* The scale of block b: its own (whole 0) or the vector's, `vector` (whole 1). */
static float block_scale(const float *x, uint32_t hd, uint32_t b, int whole, float vector) {
    return whole ? vector : amax_of(x, hd, b * 32, 32) / 127.0f;
}

static void quantise_row(const float *x, uint32_t hd, uint32_t hdp, int whole, uint8_t *row) {
    int8_t *qv = (int8_t *)(row + (size_t)(hdp / 32) * 4);
    int16_t q[32];
    float vector = whole ? amax_of(x, hd, 0, hd) / 127.0f : 0.0f;
    for (uint32_t b = 0; b * 32 < hdp; b++) {
        float scale = block_scale(x, hd, b, whole, vector);
        quantise_at(x, hd, b, scale, q);
        memcpy(row + 4 * b, &scale, 4);
        for (uint32_t i = 0; i < 32; i++) qv[b * 32 + i] = (int8_t)q[i];
    }
}

static void quantise_query(const float *x, uint32_t hd, uint32_t hdp, int whole, float mul, int16_t *q8,
                           float *qscale) {
    float vector = whole ? amax_of(x, hd, 0, hd) / 127.0f : 0.0f;
    for (uint32_t b = 0; b * 32 < hdp; b++) {
        float scale = block_scale(x, hd, b, whole, vector);
        quantise_at(x, hd, b, scale, q8 + b * 32);
        qscale[b] = scale * mul;
    }
}

void nd_attn_quantise_row_ref(const float *x, uint32_t hd, uint32_t hdp, uint8_t *row) {
    quantise_row(x, hd, hdp, 0, row);
}

void nd_attn_quantise_ref(const float *x, uint32_t hd, uint32_t hdp, float mul, int16_t *q8, float *qscale) {
    quantise_query(x, hd, hdp, 0, mul, q8, qscale);
}

void nd_attn_quantise_row_a8(const float *x, uint32_t hd, uint32_t hdp, uint8_t *row) {
    quantise_row(x, hd, hdp, 1, row);
}

void nd_attn_quantise_a8(const float *x, uint32_t hd, uint32_t hdp, float mul, int16_t *q8, float *qscale) {
    quantise_query(x, hd, hdp, 1, mul, q8, qscale);
}

/* Cody-Waite reduction x = k ln2 + r, |r| <= ln2/2, and a degree-6
 * polynomial for exp(r) (Cephes' expf coefficients); 2^k from the exponent
 * bits. Adding 1.5 * 2^23 rounds to an integer, half to even, in every build. */
#define EXP_MAGIC 12582912.0f
float nd_attn_exp(float x) {
    if (!(x >= -87.3f)) return 0.0f;
    float k = (x * 1.44269504088896341f + EXP_MAGIC) - EXP_MAGIC;
    float r = (x - k * 0.693359375f) - k * -2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    p = (p * (r * r) + r) + 1.0f;
    uint32_t bits = (uint32_t)((int32_t)k + 127) << 23;
    float two_k;
    memcpy(&two_k, &bits, sizeof two_k);
    return p * two_k;
}

/* ---- the online-softmax step both kernels share ---------------------------- */

/* Whether query i sees none of positions [p, p + kb). */
static int block_hidden(const nd_attn *a, uint32_t i, uint32_t p, uint32_t kb) {
    return p > a->hi[i] || p + kb - 1 < a->lo[i];
}

/* Raises query i's running max to cover a block whose largest score is bm,
 * rescaling its sum and values; returns the new max. */
static float raise_max(nd_attn *a, uint32_t i, float bm) {
    float m = a->max[i];
    if (!(bm > m)) return m;
    float c = nd_attn_exp(m - bm), *acc = a->acc + (size_t)i * a->hdp;
    a->sum[i] *= c;
    for (uint32_t k = 0; k < a->hdp; k++) acc[k] *= c;
    a->max[i] = bm;
    return bm;
}

/* s[kb] scores of query i (masked ones -INFINITY) -> its block max. */
static float mask_scores(const nd_attn *a, uint32_t i, uint32_t p, uint32_t kb, float *s) {
    float bm = -INFINITY;
    for (uint32_t j = 0; j < kb; j++) {
        if (p + j < a->lo[i] || p + j > a->hi[i]) s[j] = -INFINITY;
        bm = fmaxf(bm, s[j]);
    }
    return bm;
}

/* ---- int8 rows --------------------------------------------------------------- */

#define BI ND_ATTN_I8_BLOCK
#define CQ_ONE 32767.0f /* the largest quantised coefficient of a block */

static float dot_i8_ref(const int16_t *q, const float *qs, const uint8_t *row, uint32_t hdp) {
    uint32_t nb = hdp / 32;
    const float *ks = (const float *)row;
    const int8_t *k = (const int8_t *)(row + (size_t)nb * 4);
    float score = 0.0f;
    for (uint32_t b = 0; b < nb; b++) {
        int32_t isum = 0;
        for (uint32_t i = b * 32; i < b * 32 + 32; i++) isum += q[i] * k[i];
        score += (qs[b] * ks[b]) * (float)isum;
    }
    return score;
}

/* The larger of m and x as f32x4.pmax takes it (m < x ? x : m): the same
 * value in any order for the non-NaN scores and weights it sees. */
static float pmax(float m, float x) { return m < x ? x : m; }

/* The sum of a block's BI weights in the order of four-lane vectors: lane l
 * adds w[l], w[l + 4], ... in turn, then (lane 0 + lane 2) + (lane 1 + lane 3). */
static float block_sum(const float *w) {
    float t[4];
    for (uint32_t l = 0; l < 4; l++) {
        t[l] = w[l];
        for (uint32_t j = 4 + l; j < BI; j += 4) t[l] += w[j];
    }
    return (t[0] + t[2]) + (t[1] + t[3]);
}

/* acc[32] += sum over keys j < kb of w[j] * V value (32 * b + k) of key j,
 * in integers (attention.h): coefficient w[j] * scale[b] quantised to 15
 * bits against the block's largest, exact int32 sums, one multiply-add.
 * Coefficients all below 2^-100 (values that small) add nothing. */
static void add_values_ref(float *acc, const float *w, const nd_kv_run *run, uint32_t j0, uint32_t kb,
                           uint32_t nb, uint32_t b) {
    float c[BI], cmax = 0.0f;
    for (uint32_t j = 0; j < kb; j++) {
        c[j] = w[j] * ((const float *)(run->v + (j0 + j) * run->stride))[b];
        cmax = pmax(cmax, c[j]);
    }
    if (!(cmax >= 0x1p-100f)) return;
    float f = CQ_ONE / cmax, d = cmax / CQ_ONE;
    int32_t isum[32] = {0};
    for (uint32_t j = 0; j < kb; j++) {
        float r = rintf(c[j] * f);
        int32_t cq = r > CQ_ONE ? (int32_t)CQ_ONE : (int32_t)r;
        const int8_t *v = (const int8_t *)(run->v + (j0 + j) * run->stride + (size_t)nb * 4) + 32 * b;
        for (uint32_t k = 0; k < 32; k++) isum[k] += cq * v[k];
    }
    for (uint32_t k = 0; k < 32; k++) acc[k] += d * (float)isum[k];
}

void nd_attn_i8_ref(nd_attn *a, const nd_kv_run *run) {
    uint32_t hdp = a->hdp, nb = hdp / 32;
    float s[BI], w[BI];
    for (uint32_t j0 = 0; j0 < run->count; j0 += BI) {
        uint32_t kb = run->count - j0 < BI ? run->count - j0 : BI, p = run->pos + j0;
        for (uint32_t i = 0; i < a->n; i++) {
            if (block_hidden(a, i, p, kb)) continue;
            float bm = -INFINITY;
            for (uint32_t j = 0; j < BI; j++) {
                int seen = j < kb && p + j >= a->lo[i] && p + j <= a->hi[i];
                s[j] = seen ? dot_i8_ref(a->q8 + (size_t)i * hdp, a->qscale + (size_t)i * nb,
                                         run->k + (j0 + j) * run->stride, hdp)
                            : -INFINITY;
                bm = pmax(bm, s[j]);
            }
            if (bm == -INFINITY) continue;
            float mx = raise_max(a, i, bm), *acc = a->acc + (size_t)i * hdp;
            for (uint32_t j = 0; j < BI; j++) w[j] = nd_attn_exp(s[j] - mx);
            a->sum[i] += block_sum(w);
            for (uint32_t b = 0; b < nb; b++) add_values_ref(acc + 32 * b, w, run, j0, kb, nb, b);
        }
    }
}

/* ---- f32 rows ---------------------------------------------------------------- */

void nd_attn_f32_ref(nd_attn *a, const nd_kv_run *run) {
    uint32_t hdp = a->hdp;
    float s[ND_ATTN_BLOCK];
    for (uint32_t j0 = 0; j0 < run->count; j0 += ND_ATTN_BLOCK) {
        uint32_t kb = run->count - j0 < ND_ATTN_BLOCK ? run->count - j0 : ND_ATTN_BLOCK, p = run->pos + j0;
        for (uint32_t i = 0; i < a->n; i++) {
            if (block_hidden(a, i, p, kb)) continue;
            const float *q = a->q + (size_t)i * hdp;
            for (uint32_t j = 0; j < kb; j++) {
                const float *k = (const float *)(run->k + (j0 + j) * run->stride);
                float dot = 0.0f;
                for (uint32_t c = 0; c < hdp; c++) dot += q[c] * k[c];
                s[j] = dot;
            }
            float bm = mask_scores(a, i, p, kb, s);
            if (bm == -INFINITY) continue;
            float mx = raise_max(a, i, bm), *acc = a->acc + (size_t)i * hdp;
            for (uint32_t j = 0; j < kb; j++) {
                if (s[j] == -INFINITY) continue;
                float w = nd_attn_exp(s[j] - mx);
                const float *v = (const float *)(run->v + (j0 + j) * run->stride);
                a->sum[i] += w;
                for (uint32_t k = 0; k < hdp; k++) acc[k] += w * v[k];
            }
        }
    }
}
