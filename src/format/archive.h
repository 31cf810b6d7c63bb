/* The .cact archive as the engine sees it after validation: the geometry
 * header, the shared codebooks and one record per tensor in canonical order.
 * archive.c does all checking; everything downstream trusts these values. */
#ifndef ND_ARCHIVE_H
#define ND_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>
#include "needle.h"

#define ND_TAG 0x05e12a83u        /* Needle 2 */
#define ND_HEADER_BYTES 120u
#define ND_TAG3 0x05e12a84u       /* Needle 3 (spec needle3-model.md section 2) */
#define ND_HEADER3_BYTES 196u
#define ND_RECORD_BYTES 44u
#define ND_CODEBOOK_LENGTH 28u /* CQ2 4 levels, CQ3 8, CQ4 16 */
#define ND_TERNARY_BITS 5u     /* record marker, stored as 2-bit crumbs */
#define ND_TERNARY_LEVEL 1.2240064f

enum { ND_FP16 = 1, ND_FP32 = 2, ND_CQ = 3, ND_RAW = 4 };
/* Head codes of the manifest. Needle 2: 1 contrastive, 2 confidence;
 * Needle 3: 1 embedding (the same role), 2 confidence, 3 router. */
enum { ND_HEAD_CONTRASTIVE = 1, ND_HEAD_CONFIDENCE = 2, ND_HEAD_ROUTER = 3 };

#define ND_MAX_SITES 16u /* Needle 2 headers hold 4 sites, Needle 3 headers 16 */

typedef struct {
    uint32_t generation; /* 2 or 3, from the tag */
    uint32_t tensor_count, codebook_length, kv_window, kv_bits;
    uint32_t vocab, hidden, query_heads, kv_heads, layers, head_dim, max_seq;
    uint32_t hadamard_dim, lanes;
    uint32_t engram_slots, engram_sub, engram_tables, engram_taps, engram_dilation;
    uint32_t order_count, orders[4];
    uint32_t site_count, sites[ND_MAX_SITES];
    float rope_theta;
    /* Needle 3 fields; a Needle 2 header implies the values in brackets.
     * head_dim above is the q/k head width. */
    uint32_t out_vocab;      /* scored embedding rows [vocab] */
    uint32_t v_head_dim;     /* [head_dim] */
    uint32_t sliding_window; /* local layers' band, 0 = every layer global [0] */
    uint64_t global_mask;    /* bit i: layer i attends globally [0] */
    uint32_t conv_taps;      /* causal depthwise q/k/v convolution width, 0 = none [0] */
    uint32_t engram_seed_heads; /* table seed stride, 0 = engramTables/orderCount [0] */
    /* Canonical walk, derived from the above by archive.c. */
    uint32_t per_layer;      /* tensors per layer: 14 (Needle 2), 27 or 24 (Needle 3 with or without conv) */
    uint32_t perm_count;     /* Hadamard MLP permutations after the mHC tensors: 0 or 2 */
    uint32_t per_head;       /* tensors per head before any extras: 3 or 6 (the router adds calibration) */
} nd_geometry;

typedef struct {
    uint8_t dtype, rank;
    uint32_t shape[4];
    uint64_t offset, bytes; /* absolute, validated to lie inside the file */
    uint32_t group, bits;   /* CQ only */
} nd_record;

/* Canonical positions (tensors per layer and per site, in order). */
enum {
    ND_L_NORM_IN, ND_L_Q, ND_L_K, ND_L_V, ND_L_Q_NORM, ND_L_K_NORM, ND_L_GATE,
    ND_L_OUT, ND_L_POST_NORM, ND_L_ATTN_GATE, ND_L_PRE_HADA, ND_L_D1, ND_L_D2,
    ND_L_D3, ND_PER_LAYER
};
enum {
    ND_M_A_PRE, ND_M_A_POST, ND_M_A_RES, ND_M_B_PRE, ND_M_B_POST, ND_M_B_RES,
    ND_M_PHI_PRE, ND_M_PHI_POST, ND_M_PHI_RES, ND_MHC_COUNT
};
enum { ND_S_TABLES, ND_S_KEY, ND_S_VALUE, ND_S_TAPS, ND_PER_SITE };
enum { ND_H_PROBES, ND_H_PROJ, ND_H_BIAS, ND_PER_HEAD };
/* Needle 3 positions: every layer holds these 27 in order, less the three
 * taps when conv_taps is 0; each head holds ND_H3_PER_HEAD, the router one
 * more (calibration). */
enum {
    ND_L3_NORM_IN, ND_L3_Q, ND_L3_K, ND_L3_V, ND_L3_Q_TAPS, ND_L3_K_TAPS, ND_L3_V_TAPS,
    ND_L3_Q_NORM, ND_L3_K_NORM, ND_L3_GATE, ND_L3_OUT, ND_L3_POST_NORM, ND_L3_ATTN_GATE,
    ND_L3_PRE_HADA, ND_L3_D1, ND_L3_D2, ND_L3_B2, ND_L3_D3, ND_L3_D4, ND_L3_W1A, ND_L3_W1B,
    ND_L3_W2A, ND_L3_W2B, ND_L3_W3A, ND_L3_W3B, ND_L3_COND_V, ND_L3_COND_U, ND_PER_LAYER3
};
enum { ND_P3_P1, ND_P3_P2, ND_PERMS3 };
enum {
    ND_H3_PROBES, ND_H3_GAIN, ND_H3_QUERY, ND_H3_ROW_BIAS, ND_H3_PROJ, ND_H3_BIAS,
    ND_H3_PER_HEAD, ND_H3_CALIBRATION = ND_H3_PER_HEAD
};
#define ND_COND_RANK 8u      /* Needle 3 MLP conditioning rank */
#define ND_MAX_HEAD_CELLS 64u /* Needle 3 probes per cell (k) and queries (q) per head */
#define ND_MAX_EMBED_DIM 1024u /* Needle 3's embedding head: the rows of its proj, 2..this */

/* Bounds archive.c enforces on the header, chosen so that every size the
 * engine derives (tensor elements, rows, widths, per-position cache sizes)
 * fits comfortably in 64-bit arithmetic and every row or width fits a u32.
 * The released model (spec section 1) is far inside all of them. */
#define ND_MAX_VOCAB (1u << 20)
#define ND_MAX_HIDDEN 8192u
#define ND_MAX_HEADS 256u         /* queryHeads; kvHeads <= queryHeads */
#define ND_MAX_HEAD_DIM 1024u
#define ND_MAX_ATTN_WIDTH 65536u  /* queryHeads * headDimension */
#define ND_MAX_LAYERS 256u        /* Needle 3: 64 (the global mask's bits) */
#define ND_MAX_SEQ (1u << 20)     /* maximumSequence and kvWindow */
#define ND_MAX_LANES 4u           /* the released model uses 4 */
#define ND_MAX_SLOTS (1u << 22)   /* engramSlots; tables * slots rows < 2^28 */
#define ND_MAX_SUB 8192u          /* engramSubDimension */
#define ND_MAX_TABLES 64u
#define ND_MAX_ENGRAM_WIDTH 65536u /* engramTables * engramSubDimension */
#define ND_MAX_TAPS 64u
#define ND_MAX_DILATION 4096u
#define ND_MAX_ORDER 64u          /* each engram n-gram order */
#define ND_MIN_GROUP 8u           /* CQ group: a power of two in 8..1024 */
#define ND_MAX_GROUP 1024u

typedef struct {
    nd_geometry geometry;
    float codebook[ND_CODEBOOK_LENGTH];
    uint32_t weight_group;  /* the group the codebooks were divided by (record 0's) */
    uint32_t head_count;    /* probe heads present (0..2 in Needle 2, 0..3 in Needle 3) */
    uint32_t head_kinds[3]; /* ND_HEAD_* in archive order */
    uint32_t head_probes[3], head_queries[3]; /* Needle 3: k and q of each head */
    nd_record *records;     /* tensor_count records, owned */
    const uint8_t *bytes;   /* the caller's archive bytes (not owned) */
    size_t size;
} nd_archive;

/* Index of canonical tensors (which: ND_L_* in Needle 2, ND_L3_* in Needle 3). */
uint32_t nd_layer_tensor(const nd_geometry *g, uint32_t layer, uint32_t which);
uint32_t nd_mhc_tensor(const nd_geometry *g, uint32_t which);
uint32_t nd_perm_tensor(const nd_geometry *g, uint32_t which); /* Needle 3 */
uint32_t nd_site_tensor(const nd_geometry *g, uint32_t site, uint32_t which);
uint32_t nd_final_norm_tensor(const nd_geometry *g);
/* Heads (only when a->head_count > 0): the manifest, then per head `which`
 * of ND_H_*; the tokenizer is always the last record. */
uint32_t nd_manifest_tensor(const nd_geometry *g);
uint32_t nd_head_tensor(const nd_geometry *g, uint32_t head, uint32_t which);
uint32_t nd_tokenizer_tensor(const nd_archive *a);

/* Number of elements of a record (product of its shape; 0 for RAW). */
uint64_t nd_record_elements(const nd_record *r);
/* Converts a validated FP16 or FP32 record to out[nd_record_elements(r)]
 * floats. Returns NEEDLE_OK, or NEEDLE_E_ARGUMENT for a CQ/RAW record. */
int nd_record_dense(const nd_archive *a, uint32_t index, float *out);

/* Human name of tensor `index` ("layer 14 k_proj"), written into buf. */
void nd_tensor_name(const nd_archive *a, uint32_t index, char *buf, size_t cap);

/* Validates the whole archive and fills *a (records allocated; free with
 * nd_archive_free). bytes must outlive *a. Returns NEEDLE_OK or an error with
 * a message that names the tensor, field and value. */
int nd_archive_parse(const uint8_t *bytes, size_t size, nd_archive *a, needle_error *err);

/* Validates only what a prefix of the file can show (header, codebooks,
 * directory, the heads manifest once its blob is present), for streaming
 * loads: every record present is checked against its canonical position and
 * against total_size. Returns NEEDLE_OK once the whole directory was present
 * and valid, NEEDLE_E_INCOMPLETE when more bytes are needed. When the prefix
 * is the whole file (size == total_size) it runs the full nd_archive_parse
 * (blob contents included), so OK then means the archive is valid. */
int nd_archive_check_prefix(const uint8_t *bytes, size_t size, uint64_t total_size,
                            needle_error *err);

void nd_archive_free(nd_archive *a);

/* Sets err to code and a formatted message; returns code. */
int nd_fail(needle_error *err, int code, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;

#endif
