/* grammar_internal.h: what the parts of the tool-call grammar share, for
 * its files only (the API is in needle.h, the test hooks in grammar.h): the
 * limits, the graph of value nodes the schemas compile to
 * (grammar_schema.c), the matcher's frames and heads (grammar_match.c), the
 * vocabulary trie (grammar_mask.c), the grammar object, and the functions
 * one part calls in another. grammar.c gives the overview. */
#ifndef ND_GRAMMAR_INTERNAL_H
#define ND_GRAMMAR_INTERNAL_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include "grammar/grammar.h"
#include "format/json.h"
#include "needle.h"
#include "grammar/regex.h"

#define ND_MAX_DEPTH 48     /* frame nesting bound (also bounds recursive $ref) */
#define ND_G_HEADS 64       /* alternatives alive at once */
#define ND_MAX_PIECE 128    /* longer pieces are never allowed */
#define ND_MAX_OUTPUT (1u << 20) /* bytes of one call array */

/* Numbers are integers scaled by 10^F (F fraction digits) of at most
 * ND_NUM_DIGITS digits, so bounds and multiples are exact however large the
 * integer (grammar_schema.c). The type is the compiler's 128-bit integer
 * (gcc and clang, wasm32 included): with 37 digits the sum or difference of
 * any two values or multiples stays below 2 * 10^37 < 2^127. */
#ifndef __SIZEOF_INT128__
#error "the grammar's numbers need a 128-bit integer type"
#endif
typedef __int128 nd_num;
#define ND_NUM_DIGITS 37
extern const nd_num nd_pow10s[ND_NUM_DIGITS + 1]; /* 10^0 .. 10^37 */
#define ND_MAXMAG (nd_pow10s[ND_NUM_DIGITS] - 1) /* also the largest multipleOf */
#define ND_NUM_TRIES 96 /* multiples tried for one that passes the validators' double checks */
/* ceil(a / m) and floor(a / m) for m > 0. */
static inline nd_num nd_ceil_div(nd_num a, nd_num m) { return a / m + (a % m != 0 && a > 0); }
static inline nd_num nd_floor_div(nd_num a, nd_num m) { return a / m - (a % m != 0 && a < 0); }

/* ---- the graph of value nodes (grammar_schema.c) ---- */
enum { K_LIT, K_STR, K_NUM, K_ARR, K_OBJ, K_ALT };

typedef struct { char *s; size_t n; } lit; /* an owned text */

typedef struct {
    int kind;
    lit *lits;          /* LIT: canonical texts, sorted; OBJ: "\"key\"" texts, sorted */
    uint32_t nlits;
    int32_t *kids;      /* OBJ: value node per key; ALT: alternatives (once nd_build_graph has
                           flattened the graph, never ALT nodes themselves) */
    uint32_t nkids;
    uint64_t required;  /* OBJ: bits of required keys */
    uint64_t leading;   /* OBJ: keys that must all come before any other */
    uint64_t grounded;  /* OBJ: keys whose string and number values come from the context (Needle 3) */
    nd_dfa *dfa;        /* STR */
    uint32_t minlen, maxlen;
    int F;              /* NUM: fraction digits; bounds/multiple scaled by 10^F */
    nd_num lo, hi, mult;  /* NUM: exact bounds of what is written (validators agree, see grammar_schema.c) */
    double dmult;       /* NUM: multipleOf as a double (0: none), checked as validators do */
    double dlo, dhi;    /* NUM: the schema's bounds as validators read them (for oneOf overlap) */
    uint8_t has_dlo, has_dhi, dlo_ex, dhi_ex, integer;
    uint8_t exact;      /* STR: the DFA is the schema's own language (no format) */
    uint8_t closed;     /* OBJ: additionalProperties false (undeclared keys invalid) */
    int32_t items;      /* ARR */
    uint32_t minit, maxit;
    int unique, small;  /* small: items' values fit a 64-bit used mask */
} gnode;

/* cost[d * n + i]: bytes of a minimal value of node i written in a frame at
 * depth d < ND_MAX_DEPTH, ND_INF_COST when none fits (grammar_complete.c). */
#define ND_INF_COST INT32_MAX
typedef struct {
    gnode *v;
    size_t n, cap;
    int32_t root;
    int32_t *cost;
} graph;

static inline int32_t nd_cost(const graph *gr, int32_t node, int depth) {
    return node < 0 || depth >= ND_MAX_DEPTH ? ND_INF_COST : gr->cost[(size_t)depth * gr->n + (size_t)node];
}

/* ---- the matcher (grammar_match.c) ---- */
/* One open value: its node, its parent frame, and where it is (ph, a..y). */
typedef struct {
    int32_t parent, node;
    uint16_t depth;
    uint8_t ph, sub;
    int32_t a, b, c; /* LIT/key: range lo, hi, matched length; STR: dfa state, length, utf8 size;
                        NUM: int digits, fraction digits; ARR: count, item start, spans */
    uint32_t u;      /* STR: partial code point / high surrogate */
    uint8_t ground;  /* STR/NUM: the text must stay a substring of the context (grammar_ground.c);
                        its state in the context's automaton is then STR: y, NUM: c */
    nd_num x, y;     /* NUM: int part, fraction; OBJ: seen keys, chosen key; ARR: used values;
                        STR: partial low surrogate */
} frame;

/* An item of a unique array: text[start, end), next: the item before it. */
typedef struct { uint32_t start, end; int32_t next; } span;
/* Frame indices of the alternatives alive; ND_DONE: the call array closed. */
typedef struct { int32_t h[ND_G_HEADS]; int n; } heads;
#define ND_DONE (-2)

/* Phases (frame.ph) of arrays, objects, strings and numbers. */
enum { A_OPEN, A_FIRST, A_IN, A_AFTER, A_NEXT };
enum { O_OPEN, O_FIRST, O_KEY, O_COLON, O_VALSTART, O_IN, O_AFTER, O_KEYSTART };
enum { S_OPEN, S_BODY, S_ESC, S_U, S_LBS, S_LU, S_L, S_UTF };
enum { N_START, N_SIGN, N_INT, N_DOT, N_FRAC };

/* ---- the vocabulary trie (grammar_mask.c) ---- */
/* A trie node, reached from its parent by byte. */
typedef struct {
    int32_t child, sibling, tok; /* first child, next sibling, first token ending here */
    uint8_t byte;
} tnode;

struct needle_vocab {
    uint32_t size;
    tnode *nodes;
    uint32_t nnodes, cnodes;
    int32_t *tok_next;      /* next token ending at the same node */
    uint8_t *bytes;         /* piece bytes of every token */
    uint32_t *off;
    uint8_t *len;           /* 0 = never allowed */
    uint64_t *plain;        /* tokens that are whole, plain string content */
    int32_t *special;       /* tokens with len > 0 that are not plain */
    uint32_t nspecial;
};

/* ---- masks remembered per matcher state (grammar_cache.c) ---- */
typedef struct {
    uint32_t slots, words;  /* 0 slots: not opened yet */
    uint64_t *hashes;       /* per slot, 0 when empty */
    uint8_t **keys;
    uint32_t *nkeys;
    uint64_t *masks;        /* slots x words */
    uint8_t *key;           /* the current state's key */
    uint32_t nkey;
    uint64_t hash;
    int keyed;              /* key and hash describe g->cur */
    int with_ctx;           /* the key ends with the context's number (grammar_cache.c) */
    uint32_t turn;          /* the slot a full set gives up next */
    uint64_t hits, walks;  /* masks served from memory, masks walked */
} nd_mask_cache;

/* ---- the context grounded values come from (grammar_ground.c) ---- */
/* A state of the context's suffix automaton: the length of its longest
 * text, its suffix link, where its texts first end, its first transition. */
typedef struct { int32_t len, link, first, edges; } nd_sam_node;
typedef struct { int32_t to, next; uint8_t byte; } nd_sam_edge; /* next: the state's next transition */

typedef struct {
    uint8_t *text;      /* n bytes as held (invalid UTF-8 as NUL), then the n given (to spot the same text again) */
    size_t n;           /* 0: no context, nothing grounded */
    nd_sam_node *node;  /* the automaton: node[0] is the root */
    nd_sam_edge *edge;
    int32_t nnode, nedge;
    uint64_t gen;       /* which context: masks that read it are remembered under it */
    uint8_t *num_ok;    /* per graph node: a grounded NUM with a value in this context */
} nd_context;

/* ---- the grammar ---- */
struct needle_grammar {
    const needle_vocab *vocab;
    needle_vocab *own_vocab;
    graph gr;
    frame *fr;          /* the frame arena */
    size_t nfr, cfr;
    span *sp;           /* the items of unique arrays */
    size_t nsp, csp;
    char *text;         /* the output: len bytes accepted, then bytes on trial */
    size_t pos, len, ctext; /* pos: the byte being fed */
    heads cur;          /* the state after the accepted bytes */
    heads *hs;          /* per trie depth while masking */
    uint64_t *allowed;
    int32_t end_token;
    int done, oom;
    nd_mask_cache cache;
    nd_context cx;      /* what grounded values come from */
    int ctx_read;       /* the mask walk in progress consulted the context */
    int grounds;        /* some object has grounded keys */
};

/* ---- the functions one part calls in another ---- */
/* grammar_schema.c. Compiles the tools array into gr: the call array with
 * at least min_calls calls (when there are tools). NEEDLE_OK, or an error
 * in err. */
int nd_build_graph(graph *gr, const nd_jv *tools, uint32_t min_calls, unsigned flags, needle_error *err);
void nd_graph_free(graph *gr);

/* grammar_match.c. Pushes a copy of w on the frame arena: its index, or -1
 * (g->oom set) when out of memory. */
int32_t nd_frame_push(needle_grammar *g, const frame *w);
/* Adds head h to o (dropped when h is -1 or o is full). */
void nd_heads_add(heads *o, int32_t h);
/* Feeds byte b at text position g->pos to every head of in: the count of
 * heads in out (0: b is refused). */
int nd_feed_byte(needle_grammar *g, const heads *in, int b, heads *out);
/* Feeds s[0..n) from the committed heads g->cur into *out; 0 when a byte is
 * refused. The arena keeps what it allocated (the caller restores or commits). */
int nd_feed_bytes(needle_grammar *g, const uint8_t *s, size_t n, heads *out);
/* 1 when a head has closed the call array: only the end token may follow. */
int nd_match_complete(const needle_grammar *g);
/* Drops frames and spans no head of g->cur can reach. */
void nd_arena_compact(needle_grammar *g);
/* Values the enclosing unique array already holds (bits of LIT indices or
 * NUM slots), 0 when none are tracked. */
uint64_t nd_used_mask(const needle_grammar *g, const frame *w);
/* JSON equality of two item texts (what uniqueItems means). */
int nd_text_equal(const char *x, size_t nx, const char *y, size_t ny);
/* Bytes of number frame w's text so far. */
size_t nd_num_len(const frame *w);
/* Advances number frame w by byte b when it continues the number's text
 * (digits, '-', '.'; no bounds checked): 1, else 0 and w unchanged. */
int nd_num_step(const gnode *n, frame *w, int b);
/* 1 when the number frame w may end here (bounds, multipleOf, unique). */
int nd_num_end_ok(const needle_grammar *g, const frame *w, const gnode *n);
/* 1 when scaled value v passes node n's bounds and multipleOf, exactly and
 * in doubles as a validator checks multipleOf. */
int nd_num_ok(const gnode *n, nd_num v);
/* The first value of [A, B] (within n's bounds) that nd_num_ok accepts and
 * whose slot is not in used, among the first ND_NUM_TRIES multiples counted
 * from the end nearest zero (B when B <= 0): 1 and *out, or 0. Trying a
 * fixed count in a fixed order keeps the answer monotone: a sub-range
 * holding the witness of a range finds it too. */
int nd_num_first(const gnode *n, nd_num A, nd_num B, uint64_t used, nd_num *out);
/* The decimal text of scaled value v (F fraction digits, fb of them written,
 * the others must be zero) into t (at least 48 bytes): its length. */
int nd_num_text(char *t, nd_num v, int F, int fb);
/* The double a validator reads for scaled value v (correctly rounded). */
double nd_num_double(nd_num v, int F);
/* Keys that may come next in object n after keys seen, in a frame at depth
 * (keys whose value cannot be written at depth + 1 are left out). */
uint64_t nd_open_keys(const graph *gr, const gnode *n, uint64_t seen, int depth);

typedef struct { size_t at, n; } nd_mined; /* a span of a description: a value it lists */
/* grammar_ground.c: how a leaf value under a grounded key is written (unchecked; a substring of
 * the context; never: the context holds none). */
enum { ND_G_FREE, ND_G_SUB, ND_G_NONE };

#ifdef ND_NEEDLE3
/* grammar_v3_rules.c: the Needle 3 engine's rules as facts about names and
 * descriptions (the schema compiler applies them). */
/* The range a number property's name implies when its schema gives none:
 * bit 1 with *lo, bit 2 with *hi, 0 for none. */
int nd_v3_name_range(const char *name, size_t n, int *lo, int *hi);
/* 1 when values of a property of this name are grounded ("id", "*_id"). */
int nd_v3_grounded_name(const char *name, size_t n);
/* The values a description lists: *count spans of desc (malloc'd; NULL and
 * 0 when it lists none, or out of memory). */
nd_mined *nd_v3_mine(const char *desc, size_t len, size_t *count);

/* grammar_ground.c: values checked against the context. The ND_G_* mode
 * of a leaf value under a grounded key: */
int nd_ground_leaf(const needle_grammar *g, int32_t leaf, int required);
/* Optional grounded keys of object n that no value can follow in this
 * context; *reads set to 1 when the answer depends on the context. */
uint64_t nd_ground_closed(const needle_grammar *g, const gnode *n, int *reads);
/* The state of a grounded text followed by byte b, from its state (0: the
 * empty text); -1 when the context holds no such text. */
int32_t nd_ground_step(const needle_grammar *g, int32_t state, uint8_t b);
/* A short escape (\n, \", ...) may follow the grounded text in state. */
int nd_ground_esc_ok(const needle_grammar *g, int32_t state);
/* The context's bytes after the first place the text in state ends (*avail of them). */
const uint8_t *nd_ground_after(const needle_grammar *g, int32_t state, size_t *avail);
/* A grounded number frame w (its state in c) can still end as a number n
 * accepts with bytes the context holds after it: 1, with such a rest in
 * out[0..*len) (out: at least ND_NUM_DIGITS + 4 bytes, or NULL), the first
 * in a fixed order; 0 when none. */
int nd_ground_num_rest(const needle_grammar *g, const frame *w, const gnode *n, char *out, size_t *len);
void nd_context_free(nd_context *x);
#else
/* Needle 2 modules (no ND_NEEDLE3) compile the additions out: no rule
 * applies, nothing is grounded, and the code that asks folds away. */
static inline int nd_v3_name_range(const char *name, size_t n, int *lo, int *hi) { return 0; }
static inline int nd_v3_grounded_name(const char *name, size_t n) { return 0; }
static inline nd_mined *nd_v3_mine(const char *desc, size_t len, size_t *count) { *count = 0; return NULL; }
static inline int nd_ground_leaf(const needle_grammar *g, int32_t leaf, int required) { return ND_G_FREE; }
static inline uint64_t nd_ground_closed(const needle_grammar *g, const gnode *n, int *reads) { return 0; }
static inline int32_t nd_ground_step(const needle_grammar *g, int32_t state, uint8_t b) { return -1; }
static inline int nd_ground_esc_ok(const needle_grammar *g, int32_t state) { return 0; }
static inline const uint8_t *nd_ground_after(const needle_grammar *g, int32_t state, size_t *avail) { *avail = 0; return NULL; }
static inline int nd_ground_num_rest(const needle_grammar *g, const frame *w, const gnode *n, char *out, size_t *len) { return 0; }
static inline void nd_context_free(nd_context *x) {}
#endif

/* grammar_cache.c. get: 1 when g->allowed now holds the mask of g->cur,
 * remembered; else 0, and put (after the walk fills g->allowed) keeps it. */
int nd_mask_cache_get(needle_grammar *g);
void nd_mask_cache_put(needle_grammar *g);
void nd_mask_cache_free(nd_mask_cache *c);

/* grammar_complete.c. Fills gr->cost (per node and depth); -1 when out of
 * memory. ALT nodes must be flattened (their kids are never ALT nodes). */
int nd_graph_costs(graph *gr);
/* 1 when the completion search builds a value of node at depth from
 * scratch (what a fresh call needs); 0 when it finds none. */
int nd_graph_can_complete(const graph *gr, int32_t node, int depth);

/* Byte order of texts, shorter first on a common prefix (literal lists are sorted by it). */
static inline int nd_lit_cmp(const void *x, const void *y) {
    const lit *a = x, *b = y;
    int r = memcmp(a->s, b->s, a->n < b->n ? a->n : b->n);
    return r ? r : (a->n > b->n) - (a->n < b->n);
}

/* The non-ALT nodes a node stands for (alternatives are flattened, one level). */
static inline const int32_t *nd_leaves_of(const graph *gr, const int32_t *id, uint32_t *n) {
    const gnode *v = &gr->v[*id];
    if (v->kind == K_ALT) { *n = v->nkids; return v->kids; }
    *n = 1;
    return id;
}


/* 1, with the reason in why, when a value nodes a or b write may validate
 * against the other's schema (grammar_oneof.c). */
int nd_oneof_overlap(const graph *gr, int32_t a, int32_t b, char *why, size_t cap);

#endif
