/* inspect.c: the public inspection API of needle.h: heap-allocated errors
 * for callers without a stack (JS), the archive's geometry and tensor table
 * of a loaded model, and the streaming prefix check.
 *
 * needle_model_geometry(model, field) takes the seed's JS field names
 * ("tensorCount", "vocabulary", "hidden", ..., "ropeTheta"), the array
 * entries as "orders[0]".."orders[3]" and "sites[0]".."sites[15]",
 * "generation" (2 or 3), Needle 3's fields ("outVocabulary",
 * "vHeadDimension", "slidingWindow", "globalMaskLo", "globalMaskHi",
 * "qkvConvTaps", "engramSeedHeads"; a Needle 2 archive gives the values its
 * header implies), and derived values: "weightGroup" (the CQ group of record
 * 0), "headCount" and "heads[0]".."heads[2]" (ND_HEAD_* codes, 0 when
 * absent). Unknown names give -1.
 */
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h"
#include "model/model.h"
#include "needle.h"

needle_error *needle_error_new(void) { return calloc(1, sizeof(needle_error)); }

void needle_error_free(needle_error *err) { free(err); }

/* The u32 header fields by seed name (ropeTheta, the f32, and the 64-bit
 * global mask are handled apart), as offsets into nd_geometry. */
#define FIELD(name, member) {name, offsetof(nd_geometry, member)}
static const struct { const char *name; uint16_t offset; } u32_fields[] = {
    FIELD("tensorCount", tensor_count), FIELD("codebookLength", codebook_length),
    FIELD("kvWindow", kv_window), FIELD("kvBits", kv_bits), FIELD("vocabulary", vocab),
    FIELD("hidden", hidden), FIELD("queryHeads", query_heads), FIELD("kvHeads", kv_heads),
    FIELD("layers", layers), FIELD("headDimension", head_dim), FIELD("maximumSequence", max_seq),
    FIELD("hadamardDimension", hadamard_dim), FIELD("lanes", lanes),
    FIELD("engramSlots", engram_slots), FIELD("engramSubDimension", engram_sub),
    FIELD("engramTables", engram_tables), FIELD("engramTaps", engram_taps),
    FIELD("engramDilation", engram_dilation), FIELD("orderCount", order_count),
    FIELD("orders[0]", orders[0]), FIELD("orders[1]", orders[1]), FIELD("orders[2]", orders[2]),
    FIELD("orders[3]", orders[3]), FIELD("siteCount", site_count), FIELD("generation", generation),
    FIELD("outVocabulary", out_vocab), FIELD("vHeadDimension", v_head_dim),
    FIELD("slidingWindow", sliding_window), FIELD("qkvConvTaps", conv_taps),
    FIELD("engramSeedHeads", engram_seed_heads),
};

static int geometry_u32(const nd_geometry *g, const char *field, uint32_t *out) {
    for (size_t i = 0; i < sizeof u32_fields / sizeof u32_fields[0]; i++)
        if (!strcmp(field, u32_fields[i].name))
            return memcpy(out, (const char *)g + u32_fields[i].offset, 4), 1;
    if (!strcmp(field, "globalMaskLo")) return *out = (uint32_t)g->global_mask, 1;
    if (!strcmp(field, "globalMaskHi")) return *out = (uint32_t)(g->global_mask >> 32), 1;
    if (strncmp(field, "sites[", 6)) return 0;
    uint32_t site = 0;
    const char *p = field + 6;
    for (; *p >= '0' && *p <= '9' && site < ND_MAX_SITES; p++) site = site * 10 + (uint32_t)(*p - '0');
    if (p == field + 6 || site >= ND_MAX_SITES || strcmp(p, "]")) return 0;
    return *out = g->sites[site], 1;
}

double needle_model_geometry(const needle_model *model, const char *field) {
    if (!model || !field) return -1;
    const nd_archive *a = &model->archive;
    uint32_t v;
    if (geometry_u32(&a->geometry, field, &v)) return v;
    if (!strcmp(field, "ropeTheta")) return a->geometry.rope_theta;
    if (!strcmp(field, "weightGroup")) return a->weight_group;
    if (!strcmp(field, "headCount")) return a->head_count;
    if (!strcmp(field, "heads[0]")) return a->head_count > 0 ? a->head_kinds[0] : 0;
    if (!strcmp(field, "heads[1]")) return a->head_count > 1 ? a->head_kinds[1] : 0;
    if (!strcmp(field, "heads[2]")) return a->head_count > 2 ? a->head_kinds[2] : 0;
    return -1;
}

uint32_t needle_model_tensor_count(const needle_model *model) {
    return model ? model->archive.geometry.tensor_count : 0;
}

/* Appends to buf at *len; *len counts what did not fit too (so len >= cap
 * means the caller's buffer was too small). */
#if defined(__GNUC__)
__attribute__((format(printf, 4, 5)))
#endif
static void append(char *buf, size_t cap, size_t *len, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(*len < cap ? buf + *len : NULL, *len < cap ? cap - *len : 0, fmt, ap);
    va_end(ap);
    *len += n > 0 ? (size_t)n : 0;
}

size_t needle_model_tensor_json(const needle_model *model, uint32_t index, char *buf, size_t cap) {
    static const char *const dtypes[5] = {"?", "FP16", "FP32", "CQ", "RAW"};
    if (!model || !buf || !cap || index >= model->archive.geometry.tensor_count) return 0;
    const nd_archive *a = &model->archive;
    const nd_record *r = &a->records[index];
    char name[64];
    size_t len = 0;
    nd_tensor_name(a, index, name, sizeof name); /* names hold no JSON specials */
    append(buf, cap, &len, "{\"index\":%u,\"name\":\"%s\",\"dtype\":\"%s\",\"shape\":[", index, name,
           dtypes[r->dtype <= 4 ? r->dtype : 0]);
    for (uint32_t i = 0; i < r->rank && i < 4; i++) append(buf, cap, &len, i ? ",%u" : "%u", r->shape[i]);
    append(buf, cap, &len, "],\"bits\":%u,\"group\":%u,\"offset\":%llu,\"bytes\":%llu}",
           r->dtype == ND_CQ ? r->bits : 0, r->dtype == ND_CQ ? r->group : 0,
           (unsigned long long)r->offset, (unsigned long long)r->bytes);
    if (len >= cap) {
        buf[0] = '\0';
        return 0;
    }
    return len;
}

int needle_archive_check_prefix(const uint8_t *bytes, size_t size, double total_size,
                                needle_error *err) {
    /* JS passes sizes as doubles: accept only exact non-negative integers. */
    if (!(total_size >= 0 && total_size <= 9007199254740992.0) || floor(total_size) != total_size)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "total_size %g is not a byte count", total_size);
    return nd_archive_check_prefix(bytes, size, (uint64_t)total_size, err);
}
