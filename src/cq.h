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
    float levels[16];      /* level of each index value; ternary crumbs 0,1,2,3 -> 0,+c,0,-c */
} nd_cq;

/* Padded width of the activation a GEMV reads: groups * group. */
static inline uint32_t nd_cq_padded(const nd_cq *m) { return m->groups * m->group; }

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

#endif
