/* attention.h: softmax attention of a group of queries over cached K/V rows,
 * the inner loop of spec section 3's attention (session.c lays out the cache
 * and decides which positions each query may see).
 *
 * The queries of one KV head (the query heads sharing it, for every position
 * of a chunk) run together over "runs" of rows stored at a fixed stride, so
 * each K/V row is read once for all of them. Keys are taken in blocks of
 * ND_ATTN_BLOCK with an online softmax (running max, sum and weighted sum of
 * values per query): no score buffer grows with the context.
 *
 * Row formats (hdp: the head dim padded, the padding stored as zeros):
 * - f32: hdp floats, hdp a multiple of 4 (exact mode; CQ rows decoded);
 * - int8: hdp/32 f32 scales, then hdp int8, hdp a multiple of 32; value
 *   i is scale[i/32] * q[i] (fast mode, kvBits 8).
 * Queries of the int8 kernel are int8 too (nd_attn_quantise, one scale per
 * 32 values), so a score is a sum of exact integer dots per block. Values
 * are summed in integers as well: per block of ND_ATTN_I8_BLOCK keys, query
 * and 32 values, the coefficients weight * V scale are quantised to 15 bits
 * against their largest (round half to even), the 32 sums of coefficient
 * times int8 value are exact in int32 (at most 32 * 32767 * 127 < 2^31),
 * and each joins the f32 state with one multiply-add. The quantisation adds
 * at most half a step, largest coefficient / 65534, per key: relative to
 * the output, under ND_ATTN_I8_BLOCK / 65534 (tests/c/test_attention.c).
 *
 * Each kernel has a scalar `_ref` (the specification) and, in ND_SIMD128
 * builds, a `_simd128` twin: bit-identical for the quantisers and int8, the
 * same sums in another order for f32. The unsuffixed names pick the fastest
 * available. */
#ifndef ND_ATTENTION_H
#define ND_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#define ND_ATTN_BLOCK 16u    /* keys per online-softmax step, f32 rows */
#define ND_ATTN_I8_BLOCK 32u /* keys per online-softmax step, int8 rows */

/* A run of cached rows: position pos + j has its K row at k + j * stride and
 * its V row at v + j * stride. */
typedef struct {
    const uint8_t *k, *v;
    size_t stride;
    uint32_t pos, count;
} nd_kv_run;

/* n queries and their online-softmax state (the caller owns every array). */
typedef struct {
    uint32_t n, hdp;          /* queries; padded head dim (format's multiple) */
    const float *q;           /* f32 kernel: [n][hdp], already times 1/sqrt(hd) */
    const int16_t *q8;        /* int8 kernel: [n][hdp] values in [-127, 127] */
    const float *qscale;      /* int8 kernel: [n][hdp/32], times 1/sqrt(hd) */
    const uint32_t *lo, *hi;  /* [n]: query i sees positions lo[i] <= p <= hi[i] */
    float *max, *sum;         /* [n]: running max (-INFINITY at first) and sum (0) */
    float *acc;               /* [n][hdp]: running weighted sum of values (0) */
    void *work;               /* nd_attn_work_bytes(hdp) bytes, 16-byte aligned */
} nd_attn;

/* Scratch one kernel call needs for a head dim padded to hdp. */
size_t nd_attn_work_bytes(uint32_t hdp);

/* Starts the state of every query: max -INFINITY, sum and acc zero. */
void nd_attn_reset(nd_attn *a);

/* o[hd] = acc / sum of query i (zeros when it saw no key). */
void nd_attn_finish(const nd_attn *a, uint32_t i, uint32_t hd, float *o);

/* The int8 quantiser of rows and queries, per block of 32 values of x[hd]
 * (padded with zeros to hdp): scale = amax / 127 and q = round half to
 * even(x / scale) clamped to [-127, 127]. A block whose scale is 0 (all
 * zeros, or amax under 64 subnormal steps) is all zeros; NaN quotients (NaN
 * values, which amax skips, or infinities over an infinite scale) give -127.
 * nd_attn_quantise_row: the int8 row of x (the format above), for the cache.
 * nd_attn_quantise: q8[hdp], qscale[hdp/32] of one query, times `mul`
 * folded into the scales. */
void nd_attn_quantise_row_ref(const float *x, uint32_t hd, uint32_t hdp, uint8_t *row);
void nd_attn_quantise_ref(const float *x, uint32_t hd, uint32_t hdp, float mul, int16_t *q8, float *qscale);

/* The same with one scale for the whole vector (max |x| / 127, every block
 * storing it): A8 itself, Needle 3's trained numerics for its int8 K, V and
 * queries (spec 3, section 5), so the int8 kernel computes those exactly.
 * Scalar only: they run once per cached head vector and query, not per key. */
void nd_attn_quantise_row_a8(const float *x, uint32_t hd, uint32_t hdp, uint8_t *row);
void nd_attn_quantise_a8(const float *x, uint32_t hd, uint32_t hdp, float mul, int16_t *q8, float *qscale);

/* exp(x) for x <= 0 (0 below -87.3 and for -INFINITY) within 2 ulp: the
 * softmax's exponential, one polynomial shared by every kernel so they agree
 * bit for bit. */
float nd_attn_exp(float x);

/* Folds one run into the state of every query. */
void nd_attn_i8_ref(nd_attn *a, const nd_kv_run *run);
void nd_attn_f32_ref(nd_attn *a, const nd_kv_run *run);
#ifdef ND_SIMD128
void nd_attn_quantise_row_simd128(const float *x, uint32_t hd, uint32_t hdp, uint8_t *row);
void nd_attn_quantise_simd128(const float *x, uint32_t hd, uint32_t hdp, float mul, int16_t *q8, float *qscale);
void nd_attn_i8_simd128(nd_attn *a, const nd_kv_run *run);
void nd_attn_f32_simd128(nd_attn *a, const nd_kv_run *run);
#define nd_attn_quantise_row nd_attn_quantise_row_simd128
#define nd_attn_quantise nd_attn_quantise_simd128
#define nd_attn_i8 nd_attn_i8_simd128
#define nd_attn_f32 nd_attn_f32_simd128
#else
#define nd_attn_quantise_row nd_attn_quantise_row_ref
#define nd_attn_quantise nd_attn_quantise_ref
#define nd_attn_i8 nd_attn_i8_ref
#define nd_attn_f32 nd_attn_f32_ref
#endif

#endif
