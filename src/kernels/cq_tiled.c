/* cq_tiled.c: the tiled layout of 2-, 3- and 4-bit CQ matrices (see cq.h): the
 * in-place repack, its scalar reference kernels (the specification the
 * SIMD128 twins in cq_tiled_simd128.c match bit for bit), the row gather and
 * nd_cq_matmul, which picks a kernel for either layout.
 *
 * A tile is a byte transpose of 16 rows, so a repacked matrix occupies exactly
 * the bytes of the archive one: the engine can repack inside the archive
 * buffer it owns and need no second copy of the weights. */
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include "kernels/cq.h"
#include "format/fp16.h"
#include "kernels/hadamard.h"
#include "kernels/cq_range.h"
#include "kernels/threads.h"

int nd_cq_tileable(const nd_cq *m) {
    return m->tiles == 0 && m->bits >= 2 && m->bits <= 4 && m->group % 8 == 0 &&
           m->group <= ND_CQ_MAX_GROUP && m->rows >= ND_CQ_TILE;
}

/* The rows after the last full tile, in the archive layout, as a matrix. */
static nd_cq tail_view(const nd_cq *m) {
    uint32_t first = m->tiles * ND_CQ_TILE;
    return nd_cq_rows(m, first, m->rows - first);
}

int nd_cq_repack(nd_cq *m, uint8_t *packed, uint8_t *norms) {
    if (!nd_cq_tileable(m)) return 0;
    size_t tile_bytes = (size_t)ND_CQ_TILE * m->row_bytes, tile_norms = (size_t)ND_CQ_TILE * m->groups * 2;
    uint8_t *tmp = malloc(tile_bytes + tile_norms);
    if (!tmp) return -1;
    uint32_t tiles = m->rows / ND_CQ_TILE;
    for (uint32_t t = 0; t < tiles; t++) {
        uint8_t *p = packed + t * tile_bytes, *n = norms + t * tile_norms;
        memcpy(tmp, p, tile_bytes);
        memcpy(tmp + tile_bytes, n, tile_norms);
        for (uint32_t lane = 0; lane < ND_CQ_TILE; lane++) {
            for (uint32_t b = 0; b < m->row_bytes; b++)
                p[(size_t)b * ND_CQ_TILE + lane] = tmp[(size_t)lane * m->row_bytes + b];
            for (uint32_t g = 0; g < m->groups; g++) {
                const uint8_t *src = tmp + tile_bytes + ((size_t)lane * m->groups + g) * 2;
                memcpy(n + ((size_t)g * ND_CQ_TILE + lane) * 2, src, 2);
            }
        }
    }
    free(tmp);
    m->tiles = tiles;
    return 0;
}

uint32_t nd_cqt_index(const nd_cq *m, uint32_t row, uint32_t k) {
    if (row >= m->tiles * ND_CQ_TILE) {
        nd_cq tail = tail_view(m);
        return nd_cq_index(&tail, row - m->tiles * ND_CQ_TILE, k);
    }
    size_t bit = (size_t)k * m->bits;
    size_t at = ((size_t)(row / ND_CQ_TILE) * m->row_bytes + (bit >> 3)) * ND_CQ_TILE + row % ND_CQ_TILE;
    uint32_t v = m->packed[at];
    if ((bit & 7) + m->bits > 8) v |= (uint32_t)m->packed[at + ND_CQ_TILE] << 8; /* a 3-bit index's next byte */
    return (v >> (bit & 7)) & ((1u << m->bits) - 1);
}

float nd_cqt_norm(const nd_cq *m, uint32_t row, uint32_t g) {
    if (row >= m->tiles * ND_CQ_TILE) return nd_load_fp16(m->norms + 2 * ((size_t)row * m->groups + g));
    size_t at = ((size_t)(row / ND_CQ_TILE) * m->groups + g) * ND_CQ_TILE + row % ND_CQ_TILE;
    return nd_load_fp16(m->norms + 2 * at);
}

/* ---- exact f32 ------------------------------------------------------------ */

/* The same products and order as nd_cq_gemv_ref: per group a dot product in
 * index order from 0, then y[r] += norm * dot, groups ascending. */
void nd_cqt_gemv_range_ref(const nd_cq *m, const float *xr, float *y, uint32_t t0, uint32_t t1) {
    for (uint32_t r = t0 * ND_CQ_TILE; r < t1 * ND_CQ_TILE; r++) {
        float acc = 0.0f;
        for (uint32_t g = 0; g < m->groups; g++) {
            const float *x = xr + (size_t)g * m->group;
            float dot = 0.0f;
            for (uint32_t k = 0; k < m->group; k++)
                dot += m->levels[nd_cqt_index(m, r, g * m->group + k)] * x[k];
            acc += nd_cqt_norm(m, r, g) * dot;
        }
        y[r] = acc;
    }
}

void nd_cqt_gemv_ref(const nd_cq *m, const float *xr, float *y) { nd_cqt_gemv_range_ref(m, xr, y, 0, m->tiles); }

void nd_cqt_gemm_ref(const nd_cq *m, const float *xr, uint32_t n, float *y) {
    for (uint32_t t = 0; t < n; t++) nd_cqt_gemv_ref(m, xr + (size_t)t * nd_cq_padded(m), y + (size_t)t * m->rows);
}

/* ---- int8 tables (two per code) ------------------------------------------ */

/* Largest |level| of the matrix's 2^bits levels. */
static float level_max(const nd_cq *m) {
    float l = 0.0f;
    for (uint32_t i = 0; i < (1u << m->bits); i++) l = fmaxf(l, fabsf(m->levels[i]));
    return l;
}

/* The group's int8 tables of the activation x, tb[2][codes][16] (see
 * cq.h); returns the scale. The scale comes from a bound rather than the
 * table's true absmax, so it costs one pass over x: amax = lmax * max over
 * codes of the sum of |x| the code reads (the true absmax when the levels
 * are symmetric, as Lloyd-Max levels are). Entries v are built from xs =
 * x * (127 / amax), so every |v| <= 127 up to a few ulps: the first table
 * holds rint(v), the second rint(127 * (v - rint(v))) in [-64, 64] (the
 * difference is exact in float), both rounded half to even. */
static float tables_ref(const nd_cq *m, const float *x, int8_t *tb) {
    uint32_t codes = nd_cq_codes(m);
    int8_t *lo = tb + (size_t)codes * 16;
    float most = 0.0f, xs[ND_CQ_MAX_GROUP];
    for (uint32_t j = 0; j < codes; j++)
        most = fmaxf(most, m->bits != 2 ? fabsf(x[j]) : fabsf(x[2 * j]) + fabsf(x[2 * j + 1]));
    float amax = level_max(m) * most;
    if (!(amax > 0.0f)) {
        memset(tb, 0, (size_t)codes * 32);
        return 0.0f;
    }
    float inv = 127.0f / amax;
    for (uint32_t k = 0; k < m->group; k++) xs[k] = x[k] * inv;
    for (uint32_t j = 0; j < codes; j++)
        for (uint32_t e = 0; e < 16; e++) {
            float v = m->bits == 2 ? m->levels[e & 3] * xs[2 * j] + m->levels[e >> 2] * xs[2 * j + 1]
                      : e >> m->bits ? 0.0f /* 3 bits: no index reads entries 8..15 */
                                     : m->levels[e] * xs[j];
            float hi = rintf(v); /* ties to even */
            tb[j * 16 + e] = (int8_t)hi;
            lo[j * 16 + e] = (int8_t)rintf((v - hi) * 127.0f);
        }
    return amax / (127.0f * 127.0f);
}

/* Code j of row r in group g: indices 2j and 2j + 1 (2 bits), else index j. */
static uint32_t code_at(const nd_cq *m, uint32_t r, uint32_t g, uint32_t j) {
    if (m->bits != 2) return nd_cqt_index(m, r, g * m->group + j);
    uint32_t k = g * m->group + 2 * j;
    return nd_cqt_index(m, r, k) | nd_cqt_index(m, r, k + 1) << 2;
}

/* Row r's integer sum over group g's tables: 127 * (sum of its first-table
 * entries) + (sum of its second-table entries), exact in int32. */
static int32_t table_sum(const nd_cq *m, const int8_t *tb, uint32_t r, uint32_t g) {
    uint32_t codes = nd_cq_codes(m);
    int32_t hi = 0, lo = 0;
    for (uint32_t j = 0; j < codes; j++) {
        uint32_t e = j * 16 + code_at(m, r, g, j);
        hi += tb[e];
        lo += tb[codes * 16 + e];
    }
    return 127 * hi + lo;
}

void nd_cqt_gemv_lut_ref(const nd_cq *m, const float *xr, float *y) {
    int8_t tb[ND_CQ_MAX_GROUP * 32];
    uint32_t rows = m->tiles * ND_CQ_TILE;
    memset(y, 0, rows * sizeof(float));
    for (uint32_t g = 0; g < m->groups; g++) {
        float scale = tables_ref(m, xr + (size_t)g * m->group, tb);
        for (uint32_t r = 0; r < rows; r++) y[r] += (nd_cqt_norm(m, r, g) * scale) * (float)table_sum(m, tb, r, g);
    }
}

int nd_cq_lut_shared(const nd_cq *a, const nd_cq *b) {
    return a->group == b->group && a->groups == b->groups && a->bits == b->bits &&
           memcmp(a->levels, b->levels, (sizeof *a->levels << a->bits)) == 0;
}

void nd_cq_lut_build_ref(const nd_cq *m, const float *xr, int8_t *tables, float *scales) {
    size_t step = (size_t)nd_cq_codes(m) * 32;
    for (uint32_t g = 0; g < m->groups; g++) scales[g] = tables_ref(m, xr + (size_t)g * m->group, tables + g * step);
}

/* nd_cqt_gemv_lut_ref with the tables of each group read instead of built. */
void nd_cqt_gemv_lut_tables_range_ref(const nd_cq *m, const int8_t *tables, const float *scales, float *y,
                                      uint32_t t0, uint32_t t1) {
    uint32_t r0 = t0 * ND_CQ_TILE, r1 = t1 * ND_CQ_TILE, codes = nd_cq_codes(m);
    memset(y + r0, 0, (r1 - r0) * sizeof(float));
    for (uint32_t g = 0; g < m->groups; g++) {
        const int8_t *tb = tables + (size_t)g * codes * 32;
        for (uint32_t r = r0; r < r1; r++) y[r] += (nd_cqt_norm(m, r, g) * scales[g]) * (float)table_sum(m, tb, r, g);
    }
}

void nd_cqt_gemv_lut_tables_ref(const nd_cq *m, const int8_t *tables, const float *scales, float *y) {
    nd_cqt_gemv_lut_tables_range_ref(m, tables, scales, y, 0, m->tiles);
}

void nd_cqt_gemm_lut_tables_ref(const nd_cq *m, const int8_t *tables, const float *scales, uint32_t n, float *y) {
    for (uint32_t t = 0; t < n; t++)
        nd_cqt_gemv_lut_tables_ref(m, tables + t * nd_cq_lut_bytes(m), scales + (size_t)t * m->groups,
                                   y + (size_t)t * m->rows);
}

/* ---- dispatch ------------------------------------------------------------- */

void nd_cq_gather(const nd_cq *m, uint32_t row, float *out, float *scratch) {
    if (row >= m->tiles * ND_CQ_TILE) {
        nd_cq tail = tail_view(m);
        nd_cq_row(&tail, row - m->tiles * ND_CQ_TILE, out, scratch);
        return;
    }
    for (uint32_t g = 0; g < m->groups; g++) { /* nd_cq_row_ref's steps */
        float norm = nd_cqt_norm(m, row, g);
        uint32_t base = g * m->group, w = m->cols - base < m->group ? m->cols - base : m->group;
        for (uint32_t k = 0; k < m->group; k++) scratch[k] = m->levels[nd_cqt_index(m, row, base + k)] * norm;
        nd_fwht(scratch, m->group);
        memcpy(out + base, scratch, w * sizeof(float));
    }
}

#ifdef ND_SIMD128
#define CQT_GEMV_RANGE nd_cqt_gemv_range_simd128
#define CQT_GEMM nd_cqt_gemm_simd128
#define CQT_GEMM_LUT_TABLES nd_cqt_gemm_lut_tables_simd128
#define CQT_GEMV_LUT_TABLES_RANGE nd_cqt_gemv_lut_tables_range_simd128
#else
#define CQT_GEMV_RANGE nd_cqt_gemv_range_ref
#define CQT_GEMM nd_cqt_gemm_ref
#define CQT_GEMM_LUT_TABLES nd_cqt_gemm_lut_tables_ref
#define CQT_GEMV_LUT_TABLES_RANGE nd_cqt_gemv_lut_tables_range_ref
#endif

/* ---- splitting across threads (threads.h) ----------------------------------
 * The matrices of one call (several when they read one activation, as a
 * layer's q/k/v/gate do) run as one pool job, so they cost one hand-off. A
 * GEMV is split by tiles, a GEMM by activations: either way each output row
 * of each activation is computed by one chunk with the whole-matrix kernel's
 * arithmetic, so the result does not depend on the thread count. Matrices
 * under SPLIT_MIN_TILES tiles are not split (the hand-off would cost more
 * than it saves): each is one chunk. */
#define SPLIT_MIN_TILES 8u
#define SPLIT_TILES 4u  /* tiles per GEMV chunk: 64 rows, a few microseconds of work */
#define SPLIT_TOKENS 4u /* activations per GEMM chunk: the GEMMs' own block */
#define SPLIT_MATRICES 8u

typedef struct {
    const nd_cq *const *ms;
    float *const *ys;
    const float *xr;
    const int8_t *tables; /* NULL: the exact kernels */
    const float *scales;
    uint32_t n, split, first[SPLIT_MATRICES + 1]; /* first[i]: the chunks before matrix i */
} split_job;

static uint32_t chunk_end(uint32_t c, uint32_t per, uint32_t total) {
    return (c + 1) * per < total ? (c + 1) * per : total;
}

static uint32_t chunks_of(uint32_t total, uint32_t per) { return (total + per - 1) / per; }

/* Chunk c of the job: tiles of a GEMV or activations of a GEMM of one matrix. */
static void split_chunk(const void *p, uint32_t c) {
    const split_job *j = p;
    uint32_t i = 0;
    while (c >= j->first[i + 1]) i++;
    const nd_cq *m = j->ms[i];
    uint32_t k = c - j->first[i];
    if (j->n == 1) {
        uint32_t per = j->split ? SPLIT_TILES : m->tiles, t0 = k * per, t1 = chunk_end(k, per, m->tiles);
        if (j->tables) CQT_GEMV_LUT_TABLES_RANGE(m, j->tables, j->scales, j->ys[i], t0, t1);
        else CQT_GEMV_RANGE(m, j->xr, j->ys[i], t0, t1);
        return;
    }
    uint32_t per = j->split ? SPLIT_TOKENS : j->n, t0 = k * per, n = chunk_end(k, per, j->n) - t0;
    float *y = j->ys[i] + (size_t)t0 * m->rows;
    if (j->tables)
        CQT_GEMM_LUT_TABLES(m, j->tables + t0 * nd_cq_lut_bytes(m), j->scales + (size_t)t0 * m->groups, n, y);
    else
        CQT_GEMM(m, j->xr + (size_t)t0 * nd_cq_padded(m), n, y);
}

/* The tiled rows of count (<= SPLIT_MATRICES) matrices as one pool job, then
 * their tail rows (exact). */
static void tiled_matmul(const nd_cq *const *ms, float *const *ys, uint32_t count, const float *xr, uint32_t n,
                         const int8_t *tables, const float *scales) {
    split_job j = {.ms = ms, .ys = ys, .xr = xr, .tables = tables, .scales = scales, .n = n, .split = 1};
    for (uint32_t i = 0; i < count; i++) j.split &= ms[i]->tiles >= SPLIT_MIN_TILES && nd_threads() > 1;
    for (uint32_t i = 0; i < count; i++)
        j.first[i + 1] = j.first[i] + (!j.split ? 1 : n == 1 ? chunks_of(ms[i]->tiles, SPLIT_TILES)
                                                              : chunks_of(n, SPLIT_TOKENS));
    nd_parallel(split_chunk, &j, j.first[count]);
    for (uint32_t i = 0; i < count; i++) {
        nd_cq tail = tail_view(ms[i]);
        for (uint32_t t = 0; t < n && tail.rows; t++)
            nd_cq_gemv(&tail, xr + (size_t)t * nd_cq_padded(ms[i]),
                       ys[i] + (size_t)t * ms[i]->rows + ms[i]->tiles * ND_CQ_TILE);
    }
}

void nd_cq_matmul(const nd_cq *m, const float *xr, uint32_t n, float *y) {
    if (m->tiles) tiled_matmul(&m, &y, 1, xr, n, NULL, NULL);
    else if (n == 1) nd_cq_gemv(m, xr, y);
    else nd_cq_gemm(m, xr, n, y);
}

void nd_cq_matmul_lut_many(const nd_cq *const *ms, float *const *ys, uint32_t count, const float *xr, uint32_t n,
                           const int8_t *tables, const float *scales) {
    for (uint32_t i = 0; i < count; i += SPLIT_MATRICES)
        tiled_matmul(ms + i, ys + i, count - i < SPLIT_MATRICES ? count - i : SPLIT_MATRICES, xr, n, tables, scales);
}

void nd_cq_matmul_lut(const nd_cq *m, const float *xr, uint32_t n, const int8_t *tables, const float *scales,
                      float *y) {
    nd_cq_matmul_lut_many(&m, &y, 1, xr, n, tables, scales);
}
