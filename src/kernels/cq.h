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
 * rows % 16 tail rows keep the archive layout after the tiles. A "code" is
 * what one 16-entry table is looked up by: two 2-bit indices (first in the
 * low bits: each nibble of a 2-bit stream), one 4-bit index (each nibble) or
 * one 3-bit index (eight of them in every three bytes, unpacked with shifts),
 * so one i8x16.swizzle per code serves 16 rows at once.
 *
 * Two kinds of kernels read it:
 * - exact (f32): bit-identical to nd_cq_gemv_ref on the archive layout (same
 *   products, same summation order, rows in SIMD lanes);
 * - lut (fast): per activation and group, tables T[code][e] = sum of level(e)
 *   times the code's activations, in units of bound / 127 (bound = max
 *   |level| times the largest sum of |x| one code reads, i.e. the table's
 *   absmax for symmetric levels), as two int8 tables: hi = round(T) and the
 *   rest, lo = round(127 (T - hi)) (half to even). Per (row, group) the
 *   integer 127 sum(hi) + sum(lo) is exact in int32 and y += (norm * scale)
 *   * sum, scale = bound / 127^2. Its error is the rounding of lo: at most
 *   scale / 2 per code, times norm, 127 times finer than one int8 table,
 *   whose rounding alone cost as much as the A8 quantisation the model was
 *   trained with (a8.h); the second table costs one more lookup per code.
 * Each has a scalar `_ref` (the specification, cq_tiled.c) and a SIMD128 twin
 * that must match it bit for bit. */

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
void nd_cqt_gemv_ref(const nd_cq *m, const float *xr, float *y);     /* exact */
void nd_cqt_gemm_ref(const nd_cq *m, const float *xr, uint32_t n, float *y); /* exact, n activations */
/* int8 tables built from xr: the specification of the table kernels below */
void nd_cqt_gemv_lut_ref(const nd_cq *m, const float *xr, float *y);
#ifdef ND_SIMD128
void nd_cqt_gemv_simd128(const nd_cq *m, const float *xr, float *y);
void nd_cqt_gemm_simd128(const nd_cq *m, const float *xr, uint32_t n, float *y);
#endif

/* Shared int8 tables (fast mode). Several matrices that read the same
 * rotated activation build identical tables when nd_cq_lut_shared holds
 * (same group, width, bits and levels), so the tables are built once per
 * activation by nd_cq_lut_build and each tiled product runs from them:
 * nd_cqt_gemv_lut_tables gives the same bits as nd_cqt_gemv_lut_ref on the
 * same xr. One activation's tables are nd_cq_lut_bytes(m) bytes
 * ([group][hi, lo][code][16]) and m->groups scales; the tables of n activations lie
 * one after the other (nd_cqt_gemm_lut_tables), as do their scales. */
static inline uint32_t nd_cq_codes(const nd_cq *m) { return m->bits == 2 ? m->group / 2 : m->group; } /* a group's */
static inline size_t nd_cq_lut_bytes(const nd_cq *m) { return (size_t)m->groups * nd_cq_codes(m) * 32; }
int nd_cq_lut_shared(const nd_cq *a, const nd_cq *b);
void nd_cq_lut_build_ref(const nd_cq *m, const float *xr, int8_t *tables, float *scales);
void nd_cqt_gemv_lut_tables_ref(const nd_cq *m, const int8_t *tables, const float *scales, float *y);
void nd_cqt_gemm_lut_tables_ref(const nd_cq *m, const int8_t *tables, const float *scales, uint32_t n, float *y);
#ifdef ND_SIMD128
void nd_cq_lut_build_simd128(const nd_cq *m, const float *xr, int8_t *tables, float *scales);
void nd_cqt_gemv_lut_tables_simd128(const nd_cq *m, const int8_t *tables, const float *scales, float *y);
void nd_cqt_gemm_lut_tables_simd128(const nd_cq *m, const int8_t *tables, const float *scales, uint32_t n,
                                    float *y);
#define nd_cq_lut_build nd_cq_lut_build_simd128
#else
#define nd_cq_lut_build nd_cq_lut_build_ref
#endif

/* Y[t][rows] = W X[t] of a tiled matrix in fast mode for n activations
 * rotated into XR (stride padded), from the tables built for them: the tiled
 * rows from the tables, the tail rows exact from XR. */
void nd_cq_matmul_lut(const nd_cq *m, const float *xr, uint32_t n, const int8_t *tables, const float *scales,
                      float *y);

/* nd_cq_matmul_lut of `count` matrices that share xr and its tables
 * (nd_cq_lut_shared), ys[i] the result of ms[i]: the same bits, in one
 * hand-off to the thread pool. */
void nd_cq_matmul_lut_many(const nd_cq *const *ms, float *const *ys, uint32_t count, const float *xr, uint32_t n,
                           const int8_t *tables, const float *scales);

/* Row gather of either layout (nd_cq_row_ref's contract, same results). */
void nd_cq_gather(const nd_cq *m, uint32_t row, float *out, float *scratch);

/* Y[t][rows] = W X[t] for n activations rotated into XR (stride padded), in
 * either layout, with the fastest exact (f32) kernels available. */
void nd_cq_matmul(const nd_cq *m, const float *xr, uint32_t n, float *y);

#endif
