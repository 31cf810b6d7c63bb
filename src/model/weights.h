/* weights.h: checked views of an archive's tensors (weights.c), shared by
 * the Needle 2 and Needle 3 loaders. Internal to src/model/. */
#ifndef ND_WEIGHTS_H
#define ND_WEIGHTS_H

#include "format/archive.h"
#include "kernels/cq.h"

/* Views of the archive's tensors for the loaders (model.c, model_v3.c): a
 * CQ matrix checked against [rows, cols], a dense tensor (already in f32[])
 * checked against its element count. */
int nd_model_cq(const nd_archive *a, uint32_t index, uint32_t rows, uint32_t cols, nd_cq *m, needle_error *err);
int nd_model_dense(const nd_archive *a, float *const *f32, uint32_t index, uint64_t elements, const float **out,
                   needle_error *err);

#endif
