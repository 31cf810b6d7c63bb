/* attention_simd128.c: SIMD128 twins of the attention kernels in
 * attention.c (same loops, same results: bit for bit for int8 rows).
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
#include "attention.h"

#define INLINE static inline __attribute__((always_inline))
#define B ND_ATTN_BLOCK

/* (sum a, sum b, sum c, sum d) of four vectors: a 4x4 transpose and add. */
INLINE v128_t reduce4_i32(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_i32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_i32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_i32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

INLINE v128_t reduce4_f32(v128_t a, v128_t b, v128_t c, v128_t d) {
    v128_t ab = wasm_f32x4_add(wasm_i32x4_shuffle(a, b, 0, 4, 1, 5), wasm_i32x4_shuffle(a, b, 2, 6, 3, 7));
    v128_t cd = wasm_f32x4_add(wasm_i32x4_shuffle(c, d, 0, 4, 1, 5), wasm_i32x4_shuffle(c, d, 2, 6, 3, 7));
    return wasm_f32x4_add(wasm_i32x4_shuffle(ab, cd, 0, 1, 4, 5), wasm_i32x4_shuffle(ab, cd, 2, 3, 6, 7));
}

/* nd_attn_exp on four lanes, the same operations. */
INLINE v128_t exp4(v128_t x) {
    const v128_t magic = wasm_f32x4_splat(12582912.0f), lowest = wasm_f32x4_splat(-87.3f);
    v128_t ok = wasm_f32x4_ge(x, lowest);
    x = wasm_f32x4_max(x, lowest);
    v128_t k = wasm_f32x4_sub(wasm_f32x4_add(wasm_f32x4_mul(x, wasm_f32x4_splat(1.44269504088896341f)), magic), magic);
    v128_t r = wasm_f32x4_sub(wasm_f32x4_sub(x, wasm_f32x4_mul(k, wasm_f32x4_splat(0.693359375f))),
                              wasm_f32x4_mul(k, wasm_f32x4_splat(-2.12194440e-4f)));
    v128_t p = wasm_f32x4_splat(1.9875691500e-4f);
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.3981999507e-3f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(8.3334519073e-3f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(4.1665795894e-2f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(1.6666665459e-1f));
    p = wasm_f32x4_add(wasm_f32x4_mul(p, r), wasm_f32x4_splat(5.0000001201e-1f));
    p = wasm_f32x4_add(wasm_f32x4_add(wasm_f32x4_mul(p, wasm_f32x4_mul(r, r)), r), wasm_f32x4_splat(1.0f));
    v128_t e = wasm_i32x4_shl(wasm_i32x4_add(wasm_i32x4_trunc_sat_f32x4(k), wasm_i32x4_splat(127)), 23);
    return wasm_v128_and(wasm_f32x4_mul(p, e), ok);
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
    for (uint32_t j = 0; j < B; j += 4) wasm_v128_store(w + j, exp4(wasm_f32x4_sub(wasm_v128_load(s + j), m)));
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

/* acc[32] += coef[j] * v[j][32] for keys j < kb (v rows hdp floats apart),
 * the 32 sums in registers. */
INLINE void accumulate32(float *acc, const float *v, uint32_t hdp, const float *coef, uint32_t kb) {
    v128_t x[8];
    for (int q = 0; q < 8; q++) x[q] = wasm_v128_load(acc + 4 * q);
    for (uint32_t j = 0; j < kb; j++, v += hdp) {
        v128_t c = wasm_f32x4_splat(coef[j]);
        for (int q = 0; q < 8; q++) x[q] = wasm_f32x4_add(x[q], wasm_f32x4_mul(c, wasm_v128_load(v + 4 * q)));
    }
    for (int q = 0; q < 8; q++) wasm_v128_store(acc + 4 * q, x[q]);
}

/* ---- int8 rows --------------------------------------------------------------- */

typedef struct {
    int16_t *k;   /* [B][hdp] K widened */
    float *v;     /* [B][hdp] V as f32 (scales apart) */
    float *ks;    /* [nb][B] K scales, block-major: four keys' scales are one vector */
    float *vs;    /* [B][nb] V scales */
} i8_block;

static i8_block carve(void *work, uint32_t hdp) {
    i8_block bl;
    bl.k = work;
    bl.v = (float *)(bl.k + (size_t)B * hdp);
    bl.ks = bl.v + (size_t)B * hdp;
    bl.vs = bl.ks + (size_t)B * (hdp / 32);
    return bl;
}

/* Widens rows j0..j0+kb of the run into the block buffers (scales of absent keys 0). */
static void decode_i8(const nd_kv_run *run, uint32_t j0, uint32_t kb, uint32_t hdp, i8_block *bl) {
    uint32_t nb = hdp / 32;
    for (uint32_t j = 0; j < B; j++) {
        if (j >= kb) {
            for (uint32_t b = 0; b < nb; b++) bl->ks[b * B + j] = 0.0f;
            memset(bl->k + (size_t)j * hdp, 0, hdp * sizeof(int16_t));
            continue;
        }
        const uint8_t *kr = run->k + (j0 + j) * run->stride, *vr = run->v + (j0 + j) * run->stride;
        int16_t *kw = bl->k + (size_t)j * hdp;
        float *vf = bl->v + (size_t)j * hdp;
        for (uint32_t b = 0; b < nb; b++) {
            float ks, vs;
            memcpy(&ks, kr + 4 * b, 4);
            memcpy(&vs, vr + 4 * b, 4);
            bl->ks[b * B + j] = ks;
            bl->vs[j * nb + b] = vs;
        }
        for (uint32_t c = 0; c < hdp; c += 16) {
            v128_t k8 = wasm_v128_load(kr + (size_t)nb * 4 + c), v8 = wasm_v128_load(vr + (size_t)nb * 4 + c);
            wasm_v128_store(kw + c, wasm_i16x8_extend_low_i8x16(k8));
            wasm_v128_store(kw + c + 8, wasm_i16x8_extend_high_i8x16(k8));
            v128_t lo = wasm_i16x8_extend_low_i8x16(v8), hi = wasm_i16x8_extend_high_i8x16(v8);
            wasm_v128_store(vf + c, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(lo)));
            wasm_v128_store(vf + c + 4, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(lo)));
            wasm_v128_store(vf + c + 8, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_low_i16x8(hi)));
            wasm_v128_store(vf + c + 12, wasm_f32x4_convert_i32x4(wasm_i32x4_extend_high_i16x8(hi)));
        }
    }
}

/* Integer dot of 32 widened values of one key with the query. */
INLINE v128_t dot32(const int16_t *k, const int16_t *q) {
    v128_t d0 = wasm_i32x4_dot_i16x8(wasm_v128_load(k), wasm_v128_load(q));
    v128_t d1 = wasm_i32x4_dot_i16x8(wasm_v128_load(k + 8), wasm_v128_load(q + 8));
    v128_t d2 = wasm_i32x4_dot_i16x8(wasm_v128_load(k + 16), wasm_v128_load(q + 16));
    v128_t d3 = wasm_i32x4_dot_i16x8(wasm_v128_load(k + 24), wasm_v128_load(q + 24));
    return wasm_i32x4_add(wasm_i32x4_add(d0, d1), wasm_i32x4_add(d2, d3));
}

/* s[B] scores of one query against the decoded block, as dot_i8_ref sums them. */
static void scores_i8(const i8_block *bl, uint32_t hdp, const int16_t *q, const float *qs, float *s) {
    for (uint32_t j = 0; j < B; j += 4) {
        const int16_t *k = bl->k + (size_t)j * hdp;
        v128_t sc = wasm_f32x4_splat(0.0f);
        for (uint32_t b = 0; b < hdp / 32; b++) {
            const int16_t *kb = k + b * 32, *qb = q + b * 32;
            v128_t isum = reduce4_i32(dot32(kb, qb), dot32(kb + hdp, qb), dot32(kb + 2 * hdp, qb),
                                      dot32(kb + 3 * hdp, qb));
            v128_t scale = wasm_f32x4_mul(wasm_f32x4_splat(qs[b]), wasm_v128_load(bl->ks + b * B + j));
            sc = wasm_f32x4_add(sc, wasm_f32x4_mul(scale, wasm_f32x4_convert_i32x4(isum)));
        }
        wasm_v128_store(s + j, sc);
    }
}

static int any_sees(const nd_attn *a, uint32_t p, uint32_t kb) {
    for (uint32_t i = 0; i < a->n; i++)
        if (!block_hidden(a, i, p, kb)) return 1;
    return 0;
}

void nd_attn_i8_simd128(nd_attn *a, const nd_kv_run *run) {
    uint32_t hdp = a->hdp, nb = hdp / 32;
    i8_block bl = carve(a->work, hdp);
    _Alignas(16) float s[B], w[B], coef[B];
    for (uint32_t j0 = 0; j0 < run->count; j0 += B) {
        uint32_t kb = run->count - j0 < B ? run->count - j0 : B, p = run->pos + j0;
        if (!any_sees(a, p, kb)) continue;
        decode_i8(run, j0, kb, hdp, &bl);
        for (uint32_t i = 0; i < a->n; i++) {
            if (block_hidden(a, i, p, kb)) continue;
            scores_i8(&bl, hdp, a->q8 + (size_t)i * hdp, a->qscale + (size_t)i * nb, s);
            float bm = mask_scores(a, i, p, kb, s);
            if (bm == -INFINITY) continue;
            float mx = raise_max(a, i, bm);
            weights(a, i, s, mx, w);
            float *acc = a->acc + (size_t)i * hdp;
            for (uint32_t b = 0; b < nb; b++) {
                for (uint32_t j = 0; j < kb; j++) coef[j] = w[j] * bl.vs[j * nb + b];
                accumulate32(acc + b * 32, bl.v + b * 32, hdp, coef, kb);
            }
        }
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
