/* model.h: the loaded model (immutable after needle_model_load): the
 * validated archive, views of the packed CQ matrices and every dense control
 * tensor converted to f32. Shared by any number of sessions; session.c runs
 * the forward pass over it. Shapes use the notation of spec section 2:
 * d hidden, H query heads, KV kv heads, hd head dim, n lanes, N hadamard dim,
 * L layers. */
#ifndef ND_MODEL_H
#define ND_MODEL_H

#include "format/archive.h"
#include "kernels/cq.h"
#include "needle.h"

#define ND_MAX_HEAD_KINDS 3u
#define ND_KV_GROUP 64u /* CQ KV quantisation group (spec section 5) */

typedef struct {
    const float *norm_in, *post_norm, *pre_hada; /* [d] zcrms scales */
    const float *q_norm, *k_norm;                /* [hd] */
    const float *d1, *d2, *d3;                   /* [N] Hadamard MLP diagonals */
    float attn_gate;                             /* sigmoid(logit), precomputed */
    nd_cq q, k, v, gate;                         /* [H*hd|KV*hd, d] */
    nd_cq out;                                   /* [d, H*hd] */
    nd_cq phi_pre, phi_post;                     /* [n, n*d] rows of this layer */
    nd_cq phi_res;                               /* [n*n, n*d] */
    float a_pre, a_post, a_res;
    const float *b_pre, *b_post; /* [n] */
    const float *b_res;          /* [n, n] */
    int site;                    /* engram site index read by this layer, or -1 */
    /* Needle 3 (needle3-model.md section 4); hd above is then the q/k width. */
    const float *q_taps, *k_taps, *v_taps; /* [C, width] convolution taps */
    const float *b2, *d4;                  /* [N] */
    const float *w[6];                     /* Kronecker factors w1a, w1b, w2a, w2b, w3a, w3b */
    const float *cond_v, *cond_u;          /* [d, 8] (input-major), [8, N] */
} nd_layer;

typedef struct {
    nd_cq tables;       /* [tables*slots, sub] */
    nd_cq key, value;   /* [d, tables*sub] */
    const float *taps;  /* [taps, d] */
} nd_site;

typedef struct {
    uint32_t kind;        /* ND_HEAD_* */
    uint32_t probes, out; /* P, out */
    const float *probe;   /* [P, d] */
    const float *proj;    /* [out, P*d]; Needle 3: [out, queries*d] */
    const float *bias;    /* [out] */
    /* Needle 3 (needle3-model.md section 5): P = (L+1) * per_cell, probe
     * c*per_cell + j pooling cell c only; the queries pool those P vectors. */
    uint32_t per_cell, queries;
    const float *gain;     /* [P] */
    const float *query;    /* [queries, d] */
    const float *row_bias; /* [queries, P] */
} nd_head;

struct needle_model {
    nd_archive archive;        /* geometry and records; first member */
    needle_tokenizer *tokenizer;
    nd_cq embedding;           /* [vocab, d], tied with the logits */
    nd_layer *layers;          /* [L] */
    nd_site sites[ND_MAX_SITES];
    const float *final_norm;   /* [d] */
    nd_head heads[ND_MAX_HEAD_KINDS];
    uint32_t head_count;
    float kv_levels[16];       /* CQ KV levels (kvBits 2..4), sorted as in the header */
    uint32_t kv_level_count;   /* 0 when kvBits is 8 */
    uint32_t window;           /* default attention window W (spec section 5) */
    int32_t pad_id;            /* cells of pad tokens are not pooled */
    float *dense;              /* one allocation holding every dense tensor as f32 */
    uint64_t fingerprint;      /* FNV-1a of the archive bytes as loaded (before any repack) */
    /* Needle 3 */
    uint32_t *perms;           /* [2][N] the MLP's gathers p1, p2 */
    uint32_t kron_a, kron_b;   /* N = kron_a * kron_b */
    uint8_t *widened;          /* binary CQ records rewritten as 2-bit (model_v3.c) */
    float *head_rows;          /* the heads' CQ matrices, dequantised (model_v3.c) */
};

#ifdef ND_NEEDLE3
#define ND_IS_V3(g) ((g)->generation == 3)
/* Layer i of a Needle 3 archive, and the permutations and split of its MLP. */
int nd_model_layer3(needle_model *m, float *const *f32, uint32_t i, needle_error *err);
int nd_model_mlp3(needle_model *m, float *const *f32, needle_error *err);
/* Rewrites the binary CQ matrices of the loaded model as 2-bit ones. */
int nd_model_widen3(needle_model *m, needle_error *err);
int nd_model_heads3(needle_model *m, float *const *f32, needle_error *err);
#else
#define ND_IS_V3(g) 0 /* shipped modules: every Needle 3 branch compiles away */
#endif

/* FNV-1a 64 of bytes, continuing from h (start with ND_FNV_OFFSET). */
#define ND_FNV_OFFSET 0xcbf29ce484222325ull
uint64_t nd_fnv1a(uint64_t h, const void *bytes, size_t n);

/* The window the spec derives from the header (kvWindow, else the budget formula). */
uint32_t nd_model_default_window(const nd_geometry *g);

#endif
