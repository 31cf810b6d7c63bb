/* cq.h: Cactus Quants matrices kept packed, and the kernels that use them.
 *
 * A CQ matrix of logical shape [rows, cols] stores, per row, one index per
 * column (cols padded with zeros up to a multiple of the group) as a
 * little-endian bitstream, then one fp16 L2 norm per (row, group). A group is
 * reconstructed as w = (levels[idx] * norm) @ Hg (Hg: normalised Sylvester
 * Walsh-Hadamard of the group size, symmetric and its own inverse), so a dot
 * product never needs the dense row: w . x = norm * (levels[idx] . (Hg x)).
 *
 * Every kernel has a scalar reference `nd_cq_*_ref` (the specification) and,
 * in wasm builds (ND_SIMD128), a SIMD128 twin `nd_cq_*_simd128` with the same
 * signature in cq_simd128.c; the unsuffixed name picks the fastest available.
 */
#ifndef ND_CQ_H
#define ND_CQ_H

#include <stddef.h>
#include <stdint.h>

/* Largest group the kernels accept (they keep one group on the stack); the
 * loader must reject CQ records with a larger group. */
#define ND_CQ_MAX_GROUP 256u

typedef struct {
    const uint8_t *packed; /* rows * row_bytes bytes of index bitstream (archive bytes) */
    const uint8_t *norms;  /* rows * groups fp16 little-endian, possibly unaligned */
    uint32_t rows, cols;   /* logical [output, input] */
    uint32_t group;        /* power of two, 1..ND_CQ_MAX_GROUP */
    uint32_t groups;       /* cols padded / group */
    uint32_t bits;         /* bits per index in the stream: 2, 3 or 4 (ternary is 2) */
    uint32_t row_bytes;    /* groups * group * bits / 8 */
    uint32_t tiles;        /* 16-row tiles in the tiled layout (see below); 0: archive layout */
    float levels[16];      /* level of each index value; ternary crumbs 0,1,2,3 -> 0,+c,0,-c */
} nd_cq;

/* Padded width of the activation a GEMV reads: groups * group. */
static inline uint32_t nd_cq_padded(const nd_cq *m) { return m->groups * m->group; }

/* Rows [first, first + count) of m stored in the archive layout (all of an
 * untiled matrix, or those after a tiled one's tiles) as a matrix of their
 * own: a row's products do not depend on the rows beside it. */
static inline nd_cq nd_cq_rows(const nd_cq *m, uint32_t first, uint32_t count) {
    nd_cq r = *m;
    r.packed = m->packed + (size_t)first * m->row_bytes;
    r.norms = m->norms + (size_t)first * m->groups * 2;
    r.rows = count;
    r.tiles = 0;
    return r;
}

/* Index k of row r (the reference bit extraction). */
uint32_t nd_cq_index(const nd_cq *m, uint32_t row, uint32_t k);

/* Dequantises row `row` into out[cols] (padding dropped). scratch: group floats. */
void nd_cq_row_ref(const nd_cq *m, uint32_t row, float *out, float *scratch);

/* xr[padded] = per group Hg x (x has cols values; padding is zero). Rotating
 * once lets every matrix that reads the same activation share the work. */
void nd_cq_rotate(const nd_cq *m, const float *x, float *xr);

/* y[rows] = W x, given xr from nd_cq_rotate with the same group and width. */
void nd_cq_gemv_ref(const nd_cq *m, const float *xr, float *y);

/* Y[t][rows] = W X[t] for n activations rotated into XR[t][padded] (row-major,
 * stride padded); each weight group is unpacked once for all n. */
void nd_cq_gemm_ref(const nd_cq *m, const float *xr, uint32_t n, float *y);

/* Dense f32 y[rows] = W[rows][cols] x (W row-major): the baseline the
 * benchmark compares CQ against. */
void nd_f32_gemv_ref(const float *w, uint32_t rows, uint32_t cols, const float *x, float *y);

#ifdef ND_SIMD128
void nd_f32_gemv_simd128(const float *w, uint32_t rows, uint32_t cols, const float *x, float *y);
#define nd_f32_gemv nd_f32_gemv_simd128
#else
#define nd_f32_gemv nd_f32_gemv_ref
#endif

#ifdef ND_SIMD128
void nd_cq_row_simd128(const nd_cq *m, uint32_t row, float *out, float *scratch);
void nd_cq_gemv_simd128(const nd_cq *m, const float *xr, float *y);
void nd_cq_gemm_simd128(const nd_cq *m, const float *xr, uint32_t n, float *y);
#define nd_cq_row nd_cq_row_simd128
#define nd_cq_gemv nd_cq_gemv_simd128
#define nd_cq_gemm nd_cq_gemm_simd128
#else
#define nd_cq_row nd_cq_row_ref
#define nd_cq_gemv nd_cq_gemv_ref
#define nd_cq_gemm nd_cq_gemm_ref
#endif

/* ---- the tiled layout and its kernels (cq_tiled.c, cq_tiled_simd128.c) ----
 *
 * nd_cq_repack rewrites a 2-, 3- or 4-bit matrix in place (same bytes) so that
 * rows 16t..16t+15 form tile t: byte b of their 16 index streams lies at
 * packed[(t * row_bytes + b) * 16 + lane], i.e. each 16-byte vector holds one
 * byte of 16 rows; the norms of the tile follow as [t][group][16] fp16. The
 * rows % 16 tail rows keep the archive layout after the tiles. One
 * i8x16.swizzle of a tile vector's indices (nibbles, or 3-bit indices
 * unpacked with shifts) looks up a value for 16 rows at once.
 *
 * The exact (f32) kernels read it bit-identical to nd_cq_gemv_ref on the
 * archive layout (same products, same summation order, rows in SIMD lanes),
 * and fast mode's int8 kernels (cq_q8.h) read it too. Each has a scalar
 * `_ref` (the specification, cq_tiled.c) and a SIMD128 twin that must match
 * it bit for bit. */

#define ND_CQ_TILE 16u

/* Whether nd_cq_repack tiles m: bits 2 to 4, group a multiple of 8 up to
 * ND_CQ_MAX_GROUP, at least one full tile, not tiled yet. */
int nd_cq_tileable(const nd_cq *m);

/* Rewrites m in place into the tiled layout. `packed` and `norms` are
 * writable aliases of m->packed and m->norms (the caller owns those bytes and
 * gives up their archive layout). Sets m->tiles. Returns 0, or -1 (m
 * untouched) when the one-tile scratch cannot be allocated. A matrix that is
 * not tileable is left as it is. */
int nd_cq_repack(nd_cq *m, uint8_t *packed, uint8_t *norms);

/* Index k of row r, and the norm of (row, group g), in either layout. */
uint32_t nd_cqt_index(const nd_cq *m, uint32_t row, uint32_t k);
float nd_cqt_norm(const nd_cq *m, uint32_t row, uint32_t g);

/* Kernels over the tiled rows [0, tiles*16) only; nd_cq_matmul adds the tail. */
void nd_cqt_gemv_ref(const nd_cq *m, const float *xr, float *y);
void nd_cqt_gemm_ref(const nd_cq *m, const float *xr, uint32_t n, float *y); /* n activations */
#ifdef ND_SIMD128
void nd_cqt_gemv_simd128(const nd_cq *m, const float *xr, float *y);
void nd_cqt_gemm_simd128(const nd_cq *m, const float *xr, uint32_t n, float *y);
#endif

/* A "code" is what one 16-entry table of the int8 GEMV (cq_q8.h) is looked
 * up by: two 2-bit indices (first in the low bits: each nibble of a 2-bit
 * stream), one 4-bit index (each nibble) or one 3-bit index; a group has
 * nd_cq_codes of them. Matrices for which nd_cq_lut_shared holds (same
 * group, width, bits and levels) share one activation's tables. */
static inline uint32_t nd_cq_codes(const nd_cq *m) { return m->bits == 2 ? m->group / 2 : m->group; }
int nd_cq_lut_shared(const nd_cq *a, const nd_cq *b);

/* Row gather of either layout (nd_cq_row_ref's contract, same results). */
void nd_cq_gather(const nd_cq *m, uint32_t row, float *out, float *scratch);

/* Y[t][rows] = W X[t] for n activations rotated into XR (stride padded), in
 * either layout, with the fastest exact (f32) kernels available. */
void nd_cq_matmul(const nd_cq *m, const float *xr, uint32_t n, float *y);

#endif
