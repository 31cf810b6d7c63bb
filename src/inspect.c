/* inspect.c: the public inspection API of needle.h: heap-allocated errors
 * for callers without a stack (JS), the archive's geometry and tensor table
 * of a loaded model, and the streaming prefix check.
 *
 * needle_model_geometry(model, field) takes the seed's JS field names
 * ("tensorCount", "vocabulary", "hidden", ..., "ropeTheta"), the array
 * entries as "orders[0]".."orders[3]" and "sites[0]".."sites[3]", and three
 * derived values: "weightGroup" (the CQ group of record 0), "headCount" and
 * "heads[0]"/"heads[1]" (ND_HEAD_* codes, 0 when absent). Unknown names give -1.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "archive.h"
#include "model.h"
#include "needle.h"

needle_error *needle_error_new(void) { return calloc(1, sizeof(needle_error)); }

void needle_error_free(needle_error *err) { free(err); }

/* The u32 header fields by seed name (ropeTheta, the f32, is handled apart). */
static int geometry_u32(const nd_geometry *g, const char *field, uint32_t *out) {
    const struct { const char *name; uint32_t value; } fields[] = {
        {"tensorCount", g->tensor_count}, {"codebookLength", g->codebook_length},
        {"kvWindow", g->kv_window}, {"kvBits", g->kv_bits}, {"vocabulary", g->vocab},
        {"hidden", g->hidden}, {"queryHeads", g->query_heads}, {"kvHeads", g->kv_heads},
        {"layers", g->layers}, {"headDimension", g->head_dim}, {"maximumSequence", g->max_seq},
        {"hadamardDimension", g->hadamard_dim}, {"lanes", g->lanes},
        {"engramSlots", g->engram_slots}, {"engramSubDimension", g->engram_sub},
        {"engramTables", g->engram_tables}, {"engramTaps", g->engram_taps},
        {"engramDilation", g->engram_dilation}, {"orderCount", g->order_count},
        {"orders[0]", g->orders[0]}, {"orders[1]", g->orders[1]}, {"orders[2]", g->orders[2]},
        {"orders[3]", g->orders[3]}, {"siteCount", g->site_count}, {"sites[0]", g->sites[0]},
        {"sites[1]", g->sites[1]}, {"sites[2]", g->sites[2]}, {"sites[3]", g->sites[3]},
    };
    for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++)
        if (!strcmp(field, fields[i].name)) return *out = fields[i].value, 1;
    return 0;
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
