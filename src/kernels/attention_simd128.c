/* attention_simd128.c: SIMD128 twins of the attention kernels and the
 * quantiser in attention.c (same loops, same results: bit for bit for the
 * quantiser and int8 rows).
 *
 * Each block of ND_ATTN_BLOCK keys is decoded once for all queries: int8 K
 * rows widened to i16 (so a query's score is i32x4.dot_i16x8_s on 8 values
 * at a time, exact in integers per block of 32), int8 V rows converted to
 * f32. Scores are computed four keys at a time and the four row sums
 * transposed into one vector; V accumulates one vector of a query's output
 * over the block's keys in a register. */
#ifdef ND_SIMD128
#include <math.h>
#include <string.h>
#include <wasm_simd128.h>
#include "kernels/attention.h"
#include "kernels/exp_simd128.h"
#include "kernels/rint_simd128.h"

#define INLINE static inline __attribute__((always_inline))
#define B ND_ATTN_BLOCK
#define UNROLL _Pragma("clang loop unroll(full)")

/* (sum a, sum b, sum c, sum d) of four vectors: a 4x4 transpose and add. */
INLINE v128_t reduce4_f32(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_f32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_f32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_f32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* ---- the quantiser (attention.c's, eight vectors a block) ----------------- */

/* Four lanes of x / scale clamped to [-127, 127] (NaN to -127) and rounded
 * half to even, as i32: the quotient by f32x4.div as the reference divides;
 * the clamp as pmax(lo, y), pmin(hi, y), which take NaN to the bound as the
 * reference's comparisons do. */
INLINE v128_t quantise4(v128_t x, v128_t scale) {
    v128_t y = wasm_f32x4_pmax(wasm_f32x4_splat(-127.0f), wasm_f32x4_div(x, scale));
    return nd_rint4(wasm_f32x4_pmin(wasm_f32x4_splat(127.0f), y));
}

/* q[4] (i16x8) of block b of x[hd] (zeros past hd) as attention.c's quantise_at forms
 * them; returns the scale. amax by pmax, which skips NaN as fmaxf does. */
INLINE float quantise_block(const float *x, uint32_t hd, uint32_t b, v128_t *q) {
    uint32_t n = hd <= b * 32 ? 0 : hd - b * 32 < 32 ? hd - b * 32 : 32;
    _Alignas(16) float pad[32];
    const float *v = pad;
    if (n == 32) v = x + b * 32;
    else {
        memset(pad, 0, sizeof pad);
        if (n) memcpy(pad, x + b * 32, n * sizeof(float));
    }
    v128_t xs[8], m = wasm_f32x4_splat(0.0f);
    UNROLL for (int t = 0; t < 8; t++) {
        xs[t] = wasm_v128_load(v + 4 * t);
        m = wasm_f32x4_pmax(m, wasm_f32x4_abs(xs[t]));
    }
    m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 2, 3, 0, 1));
    m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
    float amax = wasm_f32x4_extract_lane(m, 0), scale = amax / 127.0f;
    v128_t sv = wasm_f32x4_splat(scale);
    if (!(scale > 0.0f)) { /* zeros (0 / 0 would be NaN) */
        for (int t = 0; t < 4; t++) q[t] = wasm_i16x8_splat(0);
        return scale;
    }
    UNROLL for (int t = 0; t < 4; t++)
        q[t] = wasm_i16x8_narrow_i32x4(quantise4(xs[2 * t], sv), quantise4(xs[2 * t + 1], sv));
    return scale;
}

void nd_attn_quantise_row_simd128(const float *x, uint32_t hd, uint32_t hdp, uint8_t *row) {
    uint8_t *qv = row + (size_t)(hdp / 32) * 4;
    for (uint32_t b = 0; b * 32 < hdp; b++) {
        v128_t q[4];
        float scale = quantise_block(x, hd, b, q);
        memcpy(row + 4 * b, &scale, 4);
        wasm_v128_store(qv + 32 * b, wasm_i8x16_narrow_i16x8(q[0], q[1]));
        wasm_v128_store(qv + 32 * b + 16, wasm_i8x16_narrow_i16x8(q[2], q[3]));
    }
}

void nd_attn_quantise_simd128(const float *x, uint32_t hd, uint32_t hdp, float mul, int16_t *q8, float *qscale) {
    for (uint32_t b = 0; b * 32 < hdp; b++) {
        v128_t q[4];
        qscale[b] = quantise_block(x, hd, b, q) * mul;
        for (int t = 0; t < 4; t++) wasm_v128_store(q8 + 32 * b + 8 * t, q[t]);
    }
}

/* ---- the online-softmax step (attention.c's, vectorised) ------------------ */

static int block_hidden(const nd_attn *a, uint32_t i, uint32_t p, uint32_t kb) {
    return p > a->hi[i] || p + kb - 1 < a->lo[i];
}

/* Masks s[B] of query i (keys kb.. and positions it does not see) and
 * returns the block max. */
static float mask_scores(const nd_attn *a, uint32_t i, uint32_t p, uint32_t kb, float *s) {
    float bm = -INFINITY;
    for (uint32_t j = 0; j < B; j++) {
        if (j >= kb || p + j < a->lo[i] || p + j > a->hi[i]) s[j] = -INFINITY;
        bm = fmaxf(bm, s[j]);
    }
    return bm;
}

static float raise_max(nd_attn *a, uint32_t i, float bm) {
    float m = a->max[i];
    if (!(bm > m)) return m;
    float *acc = a->acc + (size_t)i * a->hdp;
    float c = nd_attn_exp(m - bm);
    v128_t cv = wasm_f32x4_splat(c);
    a->sum[i] *= c;
    for (uint32_t k = 0; k < a->hdp; k += 4) wasm_v128_store(acc + k, wasm_f32x4_mul(wasm_v128_load(acc + k), cv));
    a->max[i] = bm;
    return bm;
}

/* w[B] = exp(s - mx) (0 where masked); adds them to the sum in key order. */
static void weights(nd_attn *a, uint32_t i, const float *s, float mx, float *w) {
    v128_t m = wasm_f32x4_splat(mx);
    for (uint32_t j = 0; j < B; j += 4) wasm_v128_store(w + j, nd_exp4(wasm_f32x4_sub(wasm_v128_load(s + j), m)));
    float sum = a->sum[i];
    for (uint32_t j = 0; j < B; j++) sum += w[j];
    a->sum[i] = sum;
}

/* acc[hdp] += w[j] * v[j] for keys j < kb, key order per element; v rows
 * vstride floats apart. A masked key has weight 0 and adds nothing. */
static void accumulate(float *acc, uint32_t hdp, const float *v, size_t vstride, const float *w, uint32_t kb) {
    for (uint32_t k = 0; k < hdp; k += 4) {
        v128_t x = wasm_v128_load(acc + k);
        for (uint32_t j = 0; j < kb; j++)
            x = wasm_f32x4_add(x, wasm_f32x4_mul(wasm_f32x4_splat(w[j]), wasm_v128_load(v + j * vstride + k)));
        wasm_v128_store(acc + k, x);
    }
}

/* ---- int8 rows --------------------------------------------------------------- */

/* Queries go through a block in pairs (one when a single one is left): each
 * K row is widened to i16 in registers once for both queries' dots, and
 * each pair of V rows interleaved value by value, (v[2p][c], v[2p+1][c],
 * v[2p][c+1], ...), once for both, so i32x4.dot_i16x8_s against a pair of
 * keys' quantised coefficients adds both keys' terms of four values. Only
 * the scales are copied out of the rows (as vectors of four keys). */

#define BI ND_ATTN_I8_BLOCK
#define CQ_ONE 32767.0f

typedef struct {
    const uint8_t *k, *v;  /* row j of the block at k + j * stride (nb scales, then hdp int8) */
    size_t stride;
    uint32_t p, kb;        /* position of row 0; rows present (the rest are zero rows) */
    float *ks, *vs;        /* [nb][BI] K and V scales */
    int16_t *cq;           /* [2][nb][BI] a query pair's quantised coefficients */
    float *d;              /* [2][nb] the step each set of them counts in */
    uint8_t *pad;          /* [BI][K, V row]: a short block's rows, zero rows after */
} i8_block;

/* out[b * BI + j] = scale b of row j (rows `stride` bytes apart, nb scales
 * each), four rows a step. The block's first reads of the cache happen
 * here, so a scalar copy of every scale, one loop turn each with V8's stack
 * check, cost a tenth of attention. */
static void gather_scales(const uint8_t *rows, size_t stride, uint32_t nb, float *out) {
    for (uint32_t j = 0; j < BI; j += 4) {
        const uint8_t *r = rows + j * stride;
        for (uint32_t b = 0; b < nb; b++) {
            float f[4];
            for (int k = 0; k < 4; k++) memcpy(&f[k], r + k * stride + 4 * b, 4);
            wasm_v128_store(out + b * BI + j, wasm_f32x4_make(f[0], f[1], f[2], f[3]));
        }
    }
}

/* Row j0.. of the run as a full block: a short one copied and padded with
 * zero rows (zero scales: masked scores, zero coefficients). */
static void load_block(const nd_kv_run *run, uint32_t j0, uint32_t hdp, i8_block *bl) {
    uint32_t nb = hdp / 32, kb = run->count - j0 < BI ? run->count - j0 : BI;
    size_t row = (size_t)nb * 4 + hdp;
    bl->p = run->pos + j0, bl->kb = kb;
    bl->k = run->k + j0 * run->stride, bl->v = run->v + j0 * run->stride, bl->stride = run->stride;
    if (kb < BI) {
        for (uint32_t j = 0; j < kb; j++) {
            memcpy(bl->pad + 2 * j * row, bl->k + j * run->stride, row);
            memcpy(bl->pad + (2 * j + 1) * row, bl->v + j * run->stride, row);
        }
        memset(bl->pad + 2 * kb * row, 0, 2 * (BI - kb) * row);
        bl->k = bl->pad, bl->v = bl->pad + row, bl->stride = 2 * row;
    }
    gather_scales(bl->k, bl->stride, nb, bl->ks);
    gather_scales(bl->v, bl->stride, nb, bl->vs);
}

/* Integer dot of 32 values of one K row (widened w0..w3) with a query's. */
INLINE v128_t dot32(v128_t w0, v128_t w1, v128_t w2, v128_t w3, const int16_t *q) {
    v128_t d0 = wasm_i32x4_dot_i16x8(w0, wasm_v128_load(q));
    v128_t d1 = wasm_i32x4_dot_i16x8(w1, wasm_v128_load(q + 8));
    v128_t d2 = wasm_i32x4_dot_i16x8(w2, wasm_v128_load(q + 16));
    v128_t d3 = wasm_i32x4_dot_i16x8(w3, wasm_v128_load(q + 24));
    return wasm_i32x4_add(wasm_i32x4_add(d0, d1), wasm_i32x4_add(d2, d3));
}

/* d[t] for query slot t < nq: the dots of values 32b.. of row r with it. */
INLINE void row_dots(const uint8_t *r, const int16_t *const *q, int nq, v128_t *d) {
    v128_t k0 = wasm_v128_load(r), k1 = wasm_v128_load(r + 16);
    v128_t w0 = wasm_i16x8_extend_low_i8x16(k0), w1 = wasm_i16x8_extend_high_i8x16(k0);
    v128_t w2 = wasm_i16x8_extend_low_i8x16(k1), w3 = wasm_i16x8_extend_high_i8x16(k1);
    for (int t = 0; t < nq; t++) d[t] = dot32(w0, w1, w2, w3, q[t]);
}

/* (x0, x1, x0', x1') lane sums of two dot vectors: half of reduce4_i32. */
INLINE v128_t half_reduce(v128_t a, v128_t b) {
    return wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
}

/* s[t][BI] scores of queries qi[t < nq] over the block, as dot_i8_ref sums
 * them, positions a query does not see -INFINITY; bm[t] their max. */
INLINE void scores_i8(const nd_attn *a, const i8_block *bl, const uint32_t *qi, int nq, float (*s)[BI], float *bm) {
    uint32_t hdp = a->hdp, nb = hdp / 32;
    const v128_t ninf = wasm_f32x4_splat(-INFINITY), four = wasm_i32x4_splat(4);
    v128_t pos = wasm_i32x4_add(wasm_i32x4_splat((int32_t)bl->p), wasm_i32x4_make(0, 1, 2, 3));
    v128_t end = wasm_i32x4_splat((int32_t)(bl->p + bl->kb)), mx[2] = {ninf, ninf};
    const uint8_t *k = bl->k + (size_t)nb * 4;
    size_t st = bl->stride;
    _Pragma("clang loop unroll(disable)") for (uint32_t j = 0; j < BI; j += 4, pos = wasm_i32x4_add(pos, four)) {
        v128_t sc[2] = {wasm_f32x4_splat(0.0f), wasm_f32x4_splat(0.0f)};
        for (uint32_t b = 0; b < nb; b++) {
            const uint8_t *r = k + j * st + 32 * b;
            const int16_t *q[2];
            for (int t = 0; t < nq; t++) q[t] = a->q8 + (size_t)qi[t] * hdp + 32 * b;
            v128_t d0[2], d1[2], ab[2], cd[2];
            row_dots(r, q, nq, d0);
            row_dots(r + st, q, nq, d1);
            for (int t = 0; t < nq; t++) ab[t] = half_reduce(d0[t], d1[t]);
            row_dots(r + 2 * st, q, nq, d0);
            row_dots(r + 3 * st, q, nq, d1);
            for (int t = 0; t < nq; t++) {
                cd[t] = half_reduce(d0[t], d1[t]);
                v128_t isum = wasm_i32x4_add(wasm_i32x4_shuffle(ab[t], cd[t], 0, 1, 4, 5),
                                             wasm_i32x4_shuffle(ab[t], cd[t], 2, 3, 6, 7));
                v128_t scale = wasm_f32x4_mul(wasm_f32x4_splat(a->qscale[(size_t)qi[t] * nb + b]),
                                              wasm_v128_load(bl->ks + b * BI + j));
                sc[t] = wasm_f32x4_add(sc[t], wasm_f32x4_mul(scale, wasm_f32x4_convert_i32x4(isum)));
            }
        }
        for (int t = 0; t < nq; t++) {
            v128_t lo = wasm_i32x4_splat((int32_t)a->lo[qi[t]]), hi = wasm_i32x4_splat((int32_t)a->hi[qi[t]]);
            v128_t seen = wasm_v128_and(wasm_v128_and(wasm_u32x4_ge(pos, lo), wasm_u32x4_le(pos, hi)),
                                        wasm_u32x4_lt(pos, end));
            v128_t v = wasm_v128_bitselect(sc[t], ninf, seen);
            mx[t] = wasm_f32x4_pmax(mx[t], v);
            wasm_v128_store(s[t] + j, v);
        }
    }
    for (int t = 0; t < nq; t++) {
        v128_t m = wasm_f32x4_pmax(mx[t], wasm_i32x4_shuffle(mx[t], mx[t], 2, 3, 0, 1));
        m = wasm_f32x4_pmax(m, wasm_i32x4_shuffle(m, m, 1, 0, 3, 2));
        bm[t] = wasm_f32x4_extract_lane(m, 0);
    }
}

/* w[BI] = exp(s - mx) (0 where masked); adds them to the sum in block_sum's order. */
static void weights_i8(nd_attn *a, uint32_t i, const float *s, float mx, float *w) {
    v128_t m = wasm_f32x4_splat(mx), t = nd_exp4(wasm_f32x4_sub(wasm_v128_load(s), m));
    wasm_v128_store(w, t);
    _Pragma("clang loop unroll(disable)") for (uint32_t j = 4; j < BI; j += 4) {
        v128_t e = nd_exp4(wasm_f32x4_sub(wasm_v128_load(s + j), m));
        wasm_v128_store(w + j, e);
        t = wasm_f32x4_add(t, e);
    }
    t = wasm_f32x4_add(t, wasm_i32x4_shuffle(t, t, 2, 3, 0, 1));
    a->sum[i] += wasm_f32x4_extract_lane(t, 0) + wasm_f32x4_extract_lane(t, 1);
}

/* cq[BI] = the 15-bit coefficients w[j] * V scale of values 32b.. (zeros
 * when all are below 2^-100) as add_values_ref forms them; returns the step
 * they count in (0 for zeros). */
static float coefficients(const float *w, const float *vs, int16_t *cq) {
    v128_t c[BI / 4], mx = wasm_f32x4_splat(0.0f);
    UNROLL for (uint32_t t = 0; t < BI / 4; t++) {
        c[t] = wasm_f32x4_mul(wasm_v128_load(w + 4 * t), wasm_v128_load(vs + 4 * t));
        mx = wasm_f32x4_pmax(mx, c[t]);
    }
    mx = wasm_f32x4_pmax(mx, wasm_i32x4_shuffle(mx, mx, 2, 3, 0, 1));
    mx = wasm_f32x4_pmax(mx, wasm_i32x4_shuffle(mx, mx, 1, 0, 3, 2));
    float cmax = wasm_f32x4_extract_lane(mx, 0);
    int ok = cmax >= 0x1p-100f;
    v128_t f = wasm_f32x4_splat(ok ? CQ_ONE / cmax : 0.0f);
    UNROLL for (uint32_t t = 0; t < BI / 8; t++)
        wasm_v128_store(cq + 8 * t, wasm_i16x8_narrow_i32x4(nd_rint4(wasm_f32x4_mul(c[2 * t], f)),
                                                            nd_rint4(wasm_f32x4_mul(c[2 * t + 1], f))));
    return ok ? cmax / CQ_ONE : 0.0f;
}

/* x[4] += the terms of one pair of keys on 16 values: i0, i1 their
 * interleaved values widened, cp the pair's two coefficients in each lane. */
INLINE void pair_terms(v128_t *x, v128_t e0, v128_t e1, v128_t e2, v128_t e3, v128_t cp) {
    x[0] = wasm_i32x4_add(x[0], wasm_i32x4_dot_i16x8(e0, cp));
    x[1] = wasm_i32x4_add(x[1], wasm_i32x4_dot_i16x8(e1, cp));
    x[2] = wasm_i32x4_add(x[2], wasm_i32x4_dot_i16x8(e2, cp));
    x[3] = wasm_i32x4_add(x[3], wasm_i32x4_dot_i16x8(e3, cp));
}

/* acc of queries qi[t < nq] += their coefficients cq (bl->cq, slot t) times
 * the block's values, 16 values at a time: exact int32 sums over the block,
 * then one multiply-add by their step bl->d. */
INLINE void values_i8(nd_attn *a, const i8_block *bl, const uint32_t *qi, int nq) {
    uint32_t hdp = a->hdp, nb = hdp / 32;
    size_t st = bl->stride;
    for (uint32_t c = 0; c < hdp; c += 16) {
        uint32_t b = c / 32;
        const uint8_t *v = bl->v + (size_t)nb * 4 + c;
        const int16_t *cq[2];
        v128_t x[2][4];
        for (int t = 0; t < nq; t++) {
            cq[t] = bl->cq + ((size_t)t * nb + b) * BI;
            for (int g = 0; g < 4; g++) x[t][g] = wasm_i32x4_splat(0);
        }
        _Pragma("clang loop unroll(disable)") for (uint32_t pr = 0; pr < BI / 2; pr++, v += 2 * st) {
            v128_t r0 = wasm_v128_load(v), r1 = wasm_v128_load(v + st);
            v128_t lo = wasm_i8x16_shuffle(r0, r1, 0, 16, 1, 17, 2, 18, 3, 19, 4, 20, 5, 21, 6, 22, 7, 23);
            v128_t hi = wasm_i8x16_shuffle(r0, r1, 8, 24, 9, 25, 10, 26, 11, 27, 12, 28, 13, 29, 14, 30, 15, 31);
            v128_t e0 = wasm_i16x8_extend_low_i8x16(lo), e1 = wasm_i16x8_extend_high_i8x16(lo);
            v128_t e2 = wasm_i16x8_extend_low_i8x16(hi), e3 = wasm_i16x8_extend_high_i8x16(hi);
            for (int t = 0; t < nq; t++) pair_terms(x[t], e0, e1, e2, e3, wasm_v128_load32_splat(cq[t] + 2 * pr));
        }
        for (int t = 0; t < nq; t++) {
            float *acc = a->acc + (size_t)qi[t] * hdp + c;
            v128_t dv = wasm_f32x4_splat(bl->d[t * nb + b]);
            for (int g = 0; g < 4; g++)
                wasm_v128_store(acc + 4 * g, wasm_f32x4_add(wasm_v128_load(acc + 4 * g),
                                                            wasm_f32x4_mul(dv, wasm_f32x4_convert_i32x4(x[t][g]))));
        }
    }
}

/* Queries qi[t < nq] (each sees some of the block) through the block. */
INLINE void group_i8(nd_attn *a, const i8_block *bl, const uint32_t *qi, int nq) {
    uint32_t nb = a->hdp / 32, live[2];
    _Alignas(16) float s[2][BI], w[BI];
    float bm[2];
    int n = 0;
    scores_i8(a, bl, qi, nq, s, bm);
    for (int t = 0; t < nq; t++) {
        if (bm[t] == -INFINITY) continue;
        uint32_t i = qi[t];
        weights_i8(a, i, s[t], raise_max(a, i, bm[t]), w);
        for (uint32_t b = 0; b < nb; b++) bl->d[n * nb + b] = coefficients(w, bl->vs + b * BI, bl->cq + ((size_t)n * nb + b) * BI);
        live[n++] = i;
    }
    if (n == 2) values_i8(a, bl, live, 2);
    else if (n == 1) values_i8(a, bl, live, 1);
}

static void pair_i8(nd_attn *a, const i8_block *bl, const uint32_t *qi) { group_i8(a, bl, qi, 2); }
static void single_i8(nd_attn *a, const i8_block *bl, const uint32_t *qi) { group_i8(a, bl, qi, 1); }

static i8_block carve(void *work, uint32_t hdp) {
    uint32_t nb = hdp / 32;
    i8_block bl;
    bl.ks = work;
    bl.vs = bl.ks + (size_t)nb * BI;
    bl.cq = (int16_t *)(bl.vs + (size_t)nb * BI);
    bl.d = (float *)(bl.cq + 2 * (size_t)nb * BI);
    bl.pad = (uint8_t *)(bl.d + 2 * (size_t)nb);
    return bl;
}

void nd_attn_i8_simd128(nd_attn *a, const nd_kv_run *run) {
    i8_block bl = carve(a->work, a->hdp);
    for (uint32_t j0 = 0; j0 < run->count; j0 += BI) {
        uint32_t kb = run->count - j0 < BI ? run->count - j0 : BI, p = run->pos + j0, qi[2], n = 0;
        for (uint32_t i = 0; i < a->n; i++) {
            if (block_hidden(a, i, p, kb)) continue;
            if (!n) load_block(run, j0, a->hdp, &bl); /* only blocks some query sees */
            qi[n++ & 1] = i;
            if (!(n & 1)) pair_i8(a, &bl, qi);
        }
        if (n & 1) single_i8(a, &bl, qi);
    }
}

/* ---- f32 rows ---------------------------------------------------------------- */

INLINE v128_t dot_f32(const float *q, const float *k, uint32_t hdp) {
    v128_t d = wasm_f32x4_splat(0.0f);
    for (uint32_t c = 0; c < hdp; c += 4) d = wasm_f32x4_add(d, wasm_f32x4_mul(wasm_v128_load(q + c), wasm_v128_load(k + c)));
    return d;
}

void nd_attn_f32_simd128(nd_attn *a, const nd_kv_run *run) {
    uint32_t hdp = a->hdp;
    size_t fstride = run->stride / sizeof(float);
    _Alignas(16) float s[B], w[B];
    for (uint32_t j0 = 0; j0 < run->count; j0 += B) {
        uint32_t kb = run->count - j0 < B ? run->count - j0 : B, p = run->pos + j0;
        const float *k = (const float *)(run->k + j0 * run->stride);
        const float *v = (const float *)(run->v + j0 * run->stride);
        for (uint32_t i = 0; i < a->n; i++) {
            if (block_hidden(a, i, p, kb)) continue;
            const float *q = a->q + (size_t)i * hdp;
            for (uint32_t j = 0; j < B; j += 4) { /* absent keys read the last one, then are masked */
                const float *r[4];
                for (uint32_t t = 0; t < 4; t++) r[t] = k + (j + t < kb ? j + t : kb - 1) * fstride;
                wasm_v128_store(s + j, reduce4_f32(dot_f32(q, r[0], hdp), dot_f32(q, r[1], hdp),
                                                   dot_f32(q, r[2], hdp), dot_f32(q, r[3], hdp)));
            }
            float bm = mask_scores(a, i, p, kb, s);
            if (bm == -INFINITY) continue;
            float mx = raise_max(a, i, bm);
            weights(a, i, s, mx, w);
            accumulate(a->acc + (size_t)i * hdp, hdp, v, fstride, w, kb);
        }
    }
}
#endif
