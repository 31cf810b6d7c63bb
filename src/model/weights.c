/* weights.c: views of the archive's tensors for the loaders (model.c for
 * Needle 2, model_v3.c for Needle 3): a CQ matrix stays packed in the archive
 * bytes with the levels of its width (spec section 2); a dense tensor is the
 * f32 copy model.c made of it. Both are checked against the shape the
 * geometry implies, with a message naming the tensor. */
#include "model/weights.h"
#include "model/model.h" /* ND_IS_V3 */

#include <math.h>
#include <string.h>

/* Levels of a CQ record: the header codebook of its width, rescaled when its
 * group differs from the group the codebook was divided by; ternary records
 * (bits 5) are 2-bit crumbs 0,1,2,3 -> 0,+c,0,-c. */
static void cq_levels(const nd_archive *a, const nd_record *r, nd_cq *m) {
    memset(m->levels, 0, sizeof m->levels);
    if (r->bits == ND_TERNARY_BITS) {
        float c = (float)(ND_TERNARY_LEVEL / sqrt((double)r->group));
        m->levels[1] = c;
        m->levels[3] = -c;
        m->bits = 2;
        return;
    }
    uint32_t first = r->bits == 2 ? 0 : r->bits == 3 ? 4 : 12;
    float scale = r->group == a->weight_group
                      ? 1.0f
                      : (float)sqrt((double)a->weight_group / (double)r->group);
    for (uint32_t i = 0; i < (1u << r->bits); i++) m->levels[i] = a->codebook[first + i] * scale;
    m->bits = r->bits;
}

/* A view of CQ record `index`, checked against the shape the geometry implies. */
int nd_model_cq(const nd_archive *a, uint32_t index, uint32_t rows, uint32_t cols, nd_cq *m,
                   needle_error *err) {
    const nd_record *r = &a->records[index];
    char name[64];
    if (r->dtype != ND_CQ || r->rank != 2 || r->shape[0] != rows || r->shape[1] != cols ||
        !(r->bits == 2 || r->bits == 3 || r->bits == 4 || r->bits == ND_TERNARY_BITS ||
          (ND_IS_V3(&a->geometry) && r->bits == 1)) ||
        r->group == 0 || r->group > ND_CQ_MAX_GROUP || (r->group & (r->group - 1))) {
        nd_tensor_name(a, index, name, sizeof name);
        return nd_fail(err, NEEDLE_E_FORMAT, "tensor %u (%s): expected a CQ matrix [%u, %u]",
                       index, name, rows, cols);
    }
    *m = (nd_cq){0}; /* archive layout (tiles 0) until repacked */
    cq_levels(a, r, m);
    m->rows = rows;
    m->cols = cols;
    m->group = r->group;
    m->groups = (cols + r->group - 1) / r->group;
    m->row_bytes = (uint32_t)((uint64_t)m->groups * r->group * m->bits / 8);
    uint64_t packed = (uint64_t)rows * m->row_bytes, norms = (uint64_t)rows * m->groups * 2;
    if (packed + norms != r->bytes) {
        nd_tensor_name(a, index, name, sizeof name);
        return nd_fail(err, NEEDLE_E_FORMAT, "tensor %u (%s): %llu bytes, CQ layout needs %llu",
                       index, name, (unsigned long long)r->bytes,
                       (unsigned long long)(packed + norms));
    }
    m->packed = a->bytes + r->offset;
    m->norms = m->packed + packed;
    return NEEDLE_OK;
}

/* f32 copy of a dense record of `elements` values (already converted). */
int nd_model_dense(const nd_archive *a, float *const *f32, uint32_t index, uint64_t elements,
                      const float **out, needle_error *err) {
    const nd_record *r = &a->records[index];
    if (!f32[index] || nd_record_elements(r) != elements) {
        char name[64];
        nd_tensor_name(a, index, name, sizeof name);
        return nd_fail(err, NEEDLE_E_FORMAT, "tensor %u (%s): expected a dense tensor of %llu values",
                       index, name, (unsigned long long)elements);
    }
    *out = f32[index];
    return NEEDLE_OK;
}
