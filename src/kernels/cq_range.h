/* cq_range.h: the tiled kernels of cq.h over a range of tiles [t0, t1), the
 * pieces nd_cq_matmul hands to the thread pool. Each
 * computes rows 16*t0 .. 16*t1 - 1 exactly as the whole-matrix kernel does
 * (same products, same order per row), so any split gives the same bits. */
#ifndef ND_CQ_RANGE_H
#define ND_CQ_RANGE_H
#include "kernels/cq.h"

void nd_cqt_gemv_range_ref(const nd_cq *m, const float *xr, float *y, uint32_t t0, uint32_t t1);
#ifdef ND_SIMD128
void nd_cqt_gemv_range_simd128(const nd_cq *m, const float *xr, float *y, uint32_t t0, uint32_t t1);
#endif
#endif
