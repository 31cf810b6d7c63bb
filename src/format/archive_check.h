/* archive_check.h: what archive.c (the container and Needle 2) and
 * archive_v3.c (Needle 3) share while validating: the check context, the
 * expectation of one canonical position, little-endian reads and the error
 * helpers. Internal to those two files. */
#ifndef ND_ARCHIVE_CHECK_H
#define ND_ARCHIVE_CHECK_H

#include <stdarg.h>
#include <string.h>

#include "format/archive.h"

#define ND_CODEBOOK_BYTES (4u * ND_CODEBOOK_LENGTH)

typedef struct {
    const uint8_t *bytes;
    size_t avail;          /* bytes present */
    uint64_t total;        /* size of the whole file */
    int full;              /* the whole file is present: check blob contents too */
    uint32_t header_bytes; /* 120 (Needle 2) or 196 (Needle 3) */
    nd_geometry g;
    uint32_t head_count, kinds[3];       /* kinds[h] = 0 until known */
    uint32_t head_probes[3], head_queries[3]; /* Needle 3: k and q, 0 until read */
    uint32_t head_outs[3];                /* Needle 3: outputs, from proj's rows */
    uint64_t data_start;   /* end of header, codebooks and directory */
    needle_error *err;
} nd_check;

/* What a canonical position must hold. cq_or_dense: a CQ position that
 * also accepts FP16 or FP32 of the same shape (Needle 3's older heads). */
typedef struct {
    uint8_t dtype, rank, cq_or_dense;
    uint32_t shape[4];
} nd_expect;

static inline uint32_t nd_rd_u32(const uint8_t *p) {
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline float nd_rd_f32(const uint8_t *p) {
    uint32_t u = nd_rd_u32(p);
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline uint32_t nd_next_pow2(uint32_t v) {
    uint32_t p = 1;
    while (p < v) p <<= 1;
    return p;
}
static inline nd_expect nd_expect_1(uint32_t n) { return (nd_expect){ND_FP16, 1, 0, {n, 0, 0, 0}}; }
static inline nd_expect nd_expect_2(uint8_t dtype, uint32_t rows, uint32_t cols) {
    return (nd_expect){dtype, 2, 0, {rows, cols, 0, 0}};
}
static inline nd_expect nd_expect_3(uint32_t a, uint32_t b, uint32_t c) {
    return (nd_expect){ND_FP16, 3, 0, {a, b, c, 0}};
}

#if defined(__GNUC__)
#define ND_PRINTF(f, a) __attribute__((format(printf, f, a)))
#else
#define ND_PRINTF(f, a)
#endif

/* "tensor i (name): <message>" as NEEDLE_E_FORMAT. */
int nd_rec_fail(const nd_check *c, uint32_t index, const char *fmt, ...) ND_PRINTF(3, 4);
/* "header field <name> (offset 4*field) is <value>: <message>" as NEEDLE_E_FORMAT. */
int nd_field_vfail(needle_error *err, const char *name, uint32_t field, uint32_t value,
                   const char *fmt, va_list ap);
/* The message of a non-finite or non-positive ropeTheta at word `field`. */
int nd_theta_fail(needle_error *err, uint32_t field, float theta);

/* ---- Needle 3 (archive_v3.c, in builds with ND_NEEDLE3) ---- */

#ifdef ND_NEEDLE3

/* Header ranges and relations, then the canonical walk (g->per_layer and the
 * rest) and tensorCount; sets c->g and c->head_count. */
int nd_v3_check_header(nd_check *c);
/* The expectation of position index; may read r (the probes' k, the query
 * count) and records what it learns of the head in c. */
int nd_v3_expect(nd_check *c, uint32_t index, const nd_record *r, nd_expect *e);
/* The manifest's codes against the head layout the count implies. */
int nd_v3_read_manifest(nd_check *c, uint32_t index, const nd_record *r);
/* Blob contents beyond finite values: the permutations. */
int nd_v3_check_contents(const nd_check *c, uint32_t index, const nd_record *r);
/* The name of a layer, permutation or head position of a Needle 3 walk. */
void nd_v3_name(const nd_geometry *g, uint32_t head_count, const uint32_t kinds[3],
                uint32_t index, char *buf, size_t cap);
#else
/* Without Needle 3 its tag is refused first (archive.c check_front), so no
 * geometry of generation 3 ever reaches these. */
static inline int nd_v3_check_header(nd_check *c) { return NEEDLE_E_UNSUPPORTED; }
static inline int nd_v3_expect(nd_check *c, uint32_t i, const nd_record *r, nd_expect *e) {
    return NEEDLE_E_UNSUPPORTED;
}
static inline int nd_v3_read_manifest(nd_check *c, uint32_t i, const nd_record *r) { return NEEDLE_E_UNSUPPORTED; }
static inline int nd_v3_check_contents(const nd_check *c, uint32_t i, const nd_record *r) { return NEEDLE_OK; }
static inline void nd_v3_name(const nd_geometry *g, uint32_t n, const uint32_t k[3], uint32_t i, char *buf,
                              size_t cap) {
    buf[0] = '\0';
}
#endif

#endif
