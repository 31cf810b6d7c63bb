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
#else
#define CQT_GEMV_RANGE nd_cqt_gemv_range_ref
#define CQT_GEMM nd_cqt_gemm_ref
#endif

/* ---- splitting across threads (threads.h) ----------------------------------
 * A GEMV is split by tiles, a GEMM by activations: either way each output
 * row of each activation is computed by one chunk with the whole-matrix
 * kernel's arithmetic, so the result does not depend on the thread count.
 * A matrix under SPLIT_MIN_TILES tiles is not split (the hand-off would cost
 * more than it saves). */
#define SPLIT_MIN_TILES 8u
#define SPLIT_TILES 4u  /* tiles per GEMV chunk: 64 rows, a few microseconds of work */
#define SPLIT_TOKENS 4u /* activations per GEMM chunk: the GEMMs' own block */

typedef struct {
    const nd_cq *m;
    float *y;
    const float *xr;
    uint32_t n, per; /* per: tiles (GEMV) or activations (GEMM) a chunk */
} split_job;

static uint32_t chunk_end(uint32_t c, uint32_t per, uint32_t total) {
    return (c + 1) * per < total ? (c + 1) * per : total;
}

/* Chunk c of the job: tiles of a GEMV or activations of a GEMM. */
static void split_chunk(const void *p, uint32_t c) {
    const split_job *j = p;
    const nd_cq *m = j->m;
    if (j->n == 1) {
        CQT_GEMV_RANGE(m, j->xr, j->y, c * j->per, chunk_end(c, j->per, m->tiles));
        return;
    }
    uint32_t t0 = c * j->per, n = chunk_end(c, j->per, j->n) - t0;
    CQT_GEMM(m, j->xr + (size_t)t0 * nd_cq_padded(m), n, j->y + (size_t)t0 * m->rows);
}

/* The tiled rows of m as one pool job, then its tail rows. */
static void tiled_matmul(const nd_cq *m, float *y, const float *xr, uint32_t n) {
    int split = m->tiles >= SPLIT_MIN_TILES && nd_threads() > 1;
    uint32_t total = n == 1 ? m->tiles : n;
    split_job j = {m, y, xr, n, split ? (n == 1 ? SPLIT_TILES : SPLIT_TOKENS) : total};
    nd_parallel(split_chunk, &j, (total + j.per - 1) / j.per);
    nd_cq tail = tail_view(m);
    for (uint32_t t = 0; t < n && tail.rows; t++)
        nd_cq_gemv(&tail, xr + (size_t)t * nd_cq_padded(m), y + (size_t)t * m->rows + m->tiles * ND_CQ_TILE);
}

void nd_cq_matmul(const nd_cq *m, const float *xr, uint32_t n, float *y) {
    if (m->tiles) tiled_matmul(m, y, xr, n);
    else if (n == 1) nd_cq_gemv(m, xr, y);
    else nd_cq_gemm(m, xr, n, y);
}

int nd_cq_lut_shared(const nd_cq *a, const nd_cq *b) {
    return a->group == b->group && a->groups == b->groups && a->bits == b->bits &&
           memcmp(a->levels, b->levels, (sizeof *a->levels << a->bits)) == 0;
}
