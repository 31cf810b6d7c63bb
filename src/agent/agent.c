/* agent.c: the agent contract of spec sections 7-8 on top of a session.
 *
 * A conversation is: [system turn] + first user turn with the tools block,
 * then assistant turns "<think>reasoning</think>\n<tool_call>CALLS</tool_call>
 * <|im_end|>", then later user turns (bare queries or tool results), all in
 * one KV cache. The tokens from BOS through </tools> are pinned as sinks, so
 * reset() can rewind to them. needle_agent_step() produces one piece at a
 * time (so callers can stream the reasoning); markers are forced, the
 * reasoning is free, the calls are constrained by the tools' grammar.
 * Needle 3 (needle3-model.md section 8) differs: its JSON keeps non-ASCII
 * characters as themselves (tools, tool results and the grammar's
 * literals), and its reasoning sits between newlines ("<think>\n...\n
 * </think>": the model writes them, the envelope strips them). Its tools,
 * system text and tool results are rendered as the makers' engine rewrites
 * them (toolset.h, system_facts.h: needle3-engine.md section 1), its calls
 * go out in the caller's names, and its turn spends the budget and scores
 * confidence by that engine's rules (sections 2 and 3).
 *
 * Ownership: the agent owns its session, sampler, grammar and buffers; the
 * model must outlive it. */
#define _POSIX_C_SOURCE 199309L
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format/archive.h"
#include "model/model.h"
#include "needle.h"
#include "platform.h"
#include "model/session.h"
#include "grammar/grammar.h"
#include "format/json.h"
#include "format/tokenizer.h"
#include "agent/call_prob.h"
#include "agent/value_search.h"
#ifdef ND_NEEDLE3
#include "agent/postprocess.h"
#include "agent/system_facts.h"
#include "agent/toolset.h"
#endif

/* Limits, checked before any prefill so a hostile tool set or text fails at
 * once with an error naming the limit, and the largest allowed turn stays
 * quick: every position of the tools block is a pinned sink, so its prefill
 * grows with the square of its length. */
#define MAX_TOOLS 256
#define MAX_TOOL_BYTES 8192         /* one tool's compact JSON */
#define MAX_TOOLS_BYTES 65536       /* all declared tools */
#define MAX_TOOLS_TOKENS 8192       /* all declared tools: each is embedded once for retrieval */
#define MAX_TOOLS_BLOCK_TOKENS 2048 /* the rendered tools block (five tools, or all without retrieval) */
#define MAX_TURN_TOKENS 4096        /* one turn's text: a query or a tool result */
#define RETRIEVAL_TOP 5
#define SUPPRESS_BELOW 0.1 /* Needle 3 withholds calls of lower confidence */
#define EMBED_DIM_MAX ND_MAX_EMBED_DIM

enum { M_IM_START, M_IM_END, M_THINK, M_THINK_END, M_TOOLS, M_TOOLS_END, M_CALL, M_CALL_END,
       M_RESULT, M_RESULT_END, MARKER_COUNT };
static const char *const MARKERS[MARKER_COUNT] = {
    "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<tools>", "</tools>",
    "<tool_call>", "</tool_call>", "<tool_result>", "</tool_result>"};
/* Needle 3's six further markers (needle3-model.md section 7): unused by its
 * chat format, so never written in the reasoning. */
#define EXTRA_MARKERS 6
static const char *const MARKERS3[EXTRA_MARKERS] = {
    "<context>", "</context>", "<extract>", "</extract>", "<schema>", "</schema>"};

/* A turn's phases in order; P_EMBED and P_REFEED only when needed. */
enum phase { P_IDLE, P_EMBED, P_REFEED, P_PREFILL, P_REASON, P_CALL, P_DONE };
#define IN_TURN(p) ((p) >= P_EMBED && (p) <= P_CALL)
/* Prompt tokens one needle_agent_step feeds: a step stays short (8 tokens
 * of the released geometry are about 30 ms at the faithful fast mode's
 * 260 tok/s prefill), so an abort between steps lands within 50 ms however
 * long the turn's text. */
#define PREFILL_STEP 8

typedef struct { char *data; size_t len, cap; } buffer;   /* growable bytes */
typedef struct { int32_t *ids; size_t len, cap; } idlist; /* growable ids */

struct needle_agent {
    const needle_model *model;
    const needle_tokenizer *tok;
    uint32_t vocab;
    int32_t marker[MARKER_COUNT], bos, eos;
    int32_t extra[EXTRA_MARKERS]; /* MARKERS3's ids, -1 where the vocabulary has none */
    /* declared tools (compact JSON each) and the chosen ones */
    char *tools[MAX_TOOLS];
    uint32_t tool_count, chosen[MAX_TOOLS], chosen_count;
    size_t tool_tokens;     /* of all declared tools, each encoded alone */
    float *tool_embeddings; /* tool_count x embed_dim, when retrieving */
    uint32_t embed_dim;
    int embeddings_given;   /* set by needle_agent_use_tool_embeddings */
    int require_call;       /* set by needle_agent_require_call */
    /* Needle 3's triggers: the tools needle_agent_trigger named for the next
     * turn (trigger_count), how many of them the turn acts on (turn_triggers;
     * 0: none), whether any was rendered (triggered), and their grammar, which
     * is then the turn's calls_grammar (else the tools' grammar). */
    uint32_t trigger[MAX_TOOLS], trigger_count, turn_triggers;
    int triggered;
    needle_grammar *trigger_grammar, *calls_grammar;
    int exact;              /* set by needle_agent_exact */
    buffer system;
    /* conversation */
    needle_session *session;
    needle_vocab *vocab_trie; /* the pieces' byte trie, shared by every grammar */
    needle_grammar *grammar;
    needle_sampler *sampler;
    float sampling[5];      /* temperature, top_k, top_p, min_p, repetition_penalty */
    uint32_t seed;
    idlist prefix;          /* BOS .. </tools> (the sinks) */
    idlist conversation;    /* the ids after the prefix that a re-feed needs (trim_conversation) */
    /* The work a turn does in steps before its prefill: the query's embedding
     * (retrieval), then a re-feed of the prefix and the conversation into a
     * new session while the session is stale (new tools, or a rewind that
     * left the cache). */
    needle_session *embedding;
    idlist embed_ids;
    size_t embed_fed, refeed_fed;
    int stale;
    int last_turn_called;
    /* the turn in progress */
    enum phase phase;
    int turn_kind;
    uint32_t max_new, generated, reasoning_max, turn_start, prefill_count;
    size_t conversation_mark; /* conversation length at the turn's start */
    float *logits, *masked; /* the last position's logits; a masked copy */
    needle_decoder *decoder;
    idlist reasoning, calls;
    idlist prompt;          /* the turn's text ids, fed PREFILL_STEP at a time */
    size_t prompt_fed;
    buffer forcing;         /* the call's completion being forced (budget guard) */
    size_t forcing_pos;
    double call_logp, reasoning_logp, prefill_ms, decode_ms; /* log p of the sampled tokens */
    uint32_t call_sampled, reasoning_sampled;
    void *pool_mark;        /* probe pooling state at the turn's start */
    void *pool_prefix;      /* ... and at the end of the prefix, for reset */
    size_t peak_bytes;
    needle_error turn_error;
    buffer turn_text;       /* Needle 3: the turn's text, which the call's values are checked against */
    /* Bounding a string value (value_cap): the bytes of the conversation's
     * texts before this turn and of this turn's; whether the call is inside
     * a string and how long that string is; what each token adds to one. */
    size_t earlier_text_bytes, turn_text_bytes;
    int in_string, escaped;
    size_t string_bytes;
    /* Needle 3: the makers' call post-processor (postprocess.c) reads the
     * stored system text and the conversation's texts; what it made of the
     * turn's calls, and whether a gate withheld them. */
    buffer pp_system, pp_conversation;
    buffer tools_text;      /* the chosen tools as the prompt renders them (open_conversation) */
    size_t pp_mark;
    char *pp_calls;
    int pp_withhold, pp_strong; /* any gate fired; a cross-call gate fired */
    uint8_t *string_bytes_of; /* [vocab]: bytes a token adds to a string it is in (up to a '"') */
    uint32_t longest_piece;   /* the largest of them */
    /* Needle 3: the tools as the engine normalises them (toolset.h), built
     * by init, where the whole list is known; NULL before, and for Needle 2. */
    struct nd_toolset *toolset;
    /* Needle 3's confidence by the makers' rule (call_prob.h): the least
     * engine probability of the call's tokens; the first byte of each
     * token's text, and a copy of the step's mask taken before sampling. */
    int16_t *first_byte_of;
    nd_call_prob call_prob;
    float *fits;
    double call_min_p;
    /* Needle 3's decoding at a value's start (value_search.h): its scratch,
     * and the pick being committed, a token a step. */
    nd_value_search search;
    int32_t search_bans[5];
    nd_value_pick pick;
    uint32_t pick_at;
    int searched;             /* a search ran at this step and picked nothing: sample */
    int truncated;            /* Needle 3: the budget ended the list before any call closed */
    /* Needle 3 after a tool result: the first step picks <think>, <tool_call>
     * or prose (opening), and prose answers with no call (prose). */
    int opening, prose;
    uint32_t engine_forced; /* Needle 3: markers the engine forces in this turn, counted in its budget */
};

/* Needle 3's reasoning tokens under a budget of max_new steps: the makers'
 * engine forces "</think>" once 32 steps or fewer are left, counting its
 * forced "<think>" (needle3-engine.md section 2). */
static uint32_t reasoning_budget_v3(uint32_t max_new) { return max_new > 33 ? max_new - 33 : 0; }

/* Whether the agent runs Needle 3's chat format and envelope (needle3-model.md
 * sections 8 and 9): a constant 0 in the modules built without Needle 3. */
static int is_v3(const needle_agent *a) { return ND_IS_V3(&a->model->archive.geometry); }

/* The call grammar's flags: Needle 2's literals as ensure_ascii writes them,
 * or Needle 3's engine rules (grammar.h). */
static unsigned grammar_flags(const needle_agent *a) { return is_v3(a) ? ND_GRAMMAR_NEEDLE3 : ND_GRAMMAR_ASCII; }

/* ---- small containers -------------------------------------------------- */

static int buffer_put(buffer *b, const char *s, size_t n) {
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->data, cap);
        if (!p) return NEEDLE_E_NOMEM;
        b->data = p, b->cap = cap;
    }
    memcpy(b->data + b->len, s, n);
    b->len += n;
    b->data[b->len] = 0;
    return NEEDLE_OK;
}

static int buffer_str(buffer *b, const char *s) { return buffer_put(b, s, strlen(s)); }

/* A prompt being rendered: its text, and per byte whether the caller wrote
 * it (the query, a tool result, the system text, the tools). Caller bytes are
 * encoded with marker matching off (nd_tokenize_plain): "<|im_end|>" typed in
 * a query is that text, not the turn's end, so only the runtime writes
 * markers. */
typedef struct { buffer text, plain; } rendering;

static int put_bytes(rendering *r, const char *s, size_t n, char from_caller) {
    size_t at = r->plain.len;
    if (buffer_put(&r->text, s, n) || buffer_put(&r->plain, s, n)) return NEEDLE_E_NOMEM;
    memset(r->plain.data + at, from_caller, n);
    return NEEDLE_OK;
}
static int put_markup(rendering *r, const char *s) { return put_bytes(r, s, strlen(s), 0); }
static int put_caller(rendering *r, const char *s, size_t n) { return put_bytes(r, s, n, 1); }
static void rendering_free(rendering *r) { free(r->text.data), free(r->plain.data); }

/* Copies b into out (NUL-terminated, at most cap bytes), frees b and returns
 * the full length, so callers can size a buffer with a first call. */
static size_t copy_out(buffer *b, char *out, size_t cap) {
    size_t n = b->len;
    if (out && cap) {
        size_t k = n < cap - 1 ? n : cap - 1;
        if (k) memcpy(out, b->data, k);
        out[k] = 0;
    }
    free(b->data);
    return n;
}

static int ids_put(idlist *l, const int32_t *ids, size_t n) {
    if (l->len + n > l->cap) {
        size_t cap = l->cap ? l->cap : 64;
        while (cap < l->len + n) cap *= 2;
        int32_t *p = realloc(l->ids, cap * sizeof *p);
        if (!p) return NEEDLE_E_NOMEM;
        l->ids = p, l->cap = cap;
    }
    memcpy(l->ids + l->len, ids, n * sizeof *ids);
    l->len += n;
    return NEEDLE_OK;
}

/* Appends the encoding of r to l; without the dummy prefix when
 * `continuation` (text that follows a marker inside the same encode call). */
static int encode_into(const needle_agent *a, idlist *l, const rendering *r, int continuation, needle_error *err) {
    rendering joined = {0};
    /* Encoding "</tools>" + text and dropping everything through that marker
     * gives exactly the ids text has after a marker. */
    if (continuation && (put_markup(&joined, MARKERS[M_TOOLS_END]) ||
                         put_bytes(&joined, r->text.data, r->text.len, 0))) {
        rendering_free(&joined);
        return nd_fail(err, NEEDLE_E_NOMEM, "out of memory encoding a turn");
    }
    if (continuation) memcpy(joined.plain.data + joined.plain.len - r->plain.len, r->plain.data, r->plain.len);
    const rendering *in = continuation ? &joined : r;
    size_t len = in->text.len, count = 0, cap = len + 8;
    int32_t *ids = malloc(cap * sizeof *ids);
    int status = ids ? nd_tokenize_plain(a->tok, in->text.data, len, (const uint8_t *)in->plain.data, ids, cap, &count, err)
                     : nd_fail(err, NEEDLE_E_NOMEM, "out of memory encoding a turn");
    size_t skip = 0;
    if (status == NEEDLE_OK && continuation)
        while (skip < count && ids[skip++] != a->marker[M_TOOLS_END]) {}
    if (status == NEEDLE_OK && ids_put(l, ids + skip, count - skip))
        status = nd_fail(err, NEEDLE_E_NOMEM, "out of memory encoding a turn");
    free(ids);
    rendering_free(&joined);
    return status;
}

/* Appends the encoding of text the runtime wrote (markup) or the caller did. */
static int encode_text(const needle_agent *a, idlist *l, const char *text, size_t len, char from_caller,
                       needle_error *err) {
    rendering r = {0};
    int status = put_bytes(&r, text, len, from_caller) ? nd_fail(err, NEEDLE_E_NOMEM, "out of memory encoding a turn")
                                                       : encode_into(a, l, &r, 0, err);
    rendering_free(&r);
    return status;
}

/* ---- lifetime and tools ------------------------------------------------ */

/* A token's text as the call's JSON gets it, at most cap bytes: a byte
 * piece's byte, a piece's bytes with "\u2581" as the space it stands for;
 * control and unknown pieces write nothing. */
static size_t token_text(const needle_agent *a, int32_t id, char *out, size_t cap) {
    size_t len = 0, n = 0;
    int type = -1;
    const char *piece = nd_tokenizer_piece(a->tok, id, &len, &type);
    if (type == ND_PIECE_BYTE && cap) {
        out[n++] = (char)nd_tokenizer_byte(a->tok, id);
    } else if ((type == ND_PIECE_NORMAL || type == ND_PIECE_USER) && piece) {
        for (size_t i = 0; i < len && n < cap; i++) {
            int space = i + 2 < len && !memcmp(piece + i, "\xe2\x96\x81", 3);
            out[n++] = space ? ' ' : piece[i];
            if (space) i += 2;
        }
    }
    return n;
}

/* What each token adds to a JSON string it is in: its bytes up to its first
 * unescaped '"' (0 for a token that closes the string at once), counted as
 * track_strings counts them. */
static int measure_pieces(needle_agent *a) {
    a->string_bytes_of = malloc(a->vocab);
    a->first_byte_of = malloc(a->vocab * sizeof *a->first_byte_of);
    if (!a->string_bytes_of || !a->first_byte_of) return NEEDLE_E_NOMEM;
    char text[256];
    for (uint32_t id = 0; id < a->vocab; id++) {
        size_t len = token_text(a, (int32_t)id, text, sizeof text), n = 0;
        a->first_byte_of[id] = len ? (int16_t)(unsigned char)text[0] : -1;
        for (size_t i = 0; i < len && text[i] != '"'; i++, n++)
            if (text[i] == '\\') i++; /* an escape is one byte of the string */
        /* A lone UTF-8 lead byte needs room for its whole character. */
        unsigned char lead = len == 1 ? (unsigned char)text[0] : 0;
        if (lead >= 0xC0) n = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
        a->string_bytes_of[id] = (uint8_t)(n < 255 ? n : 255);
        if (n > a->longest_piece) a->longest_piece = (uint32_t)n;
    }
    return NEEDLE_OK;
}

/* Needle 3: what the makers' confidence rule needs (call_prob.h). */
static int start_call_prob(needle_agent *a) {
#ifdef ND_NEEDLE3
    a->fits = malloc(a->vocab * sizeof *a->fits);
    const int32_t bans[5] = {a->marker[M_IM_END], a->marker[M_THINK], a->marker[M_THINK_END], a->marker[M_CALL],
                             a->marker[M_CALL_END]};
    memcpy(a->search_bans, bans, sizeof bans);
    a->search = (nd_value_search){.vocab = a->vocab, .first_byte = a->first_byte_of, .bans = a->search_bans,
                                  .nbans = 5, .logits = malloc(a->vocab * sizeof(float)),
                                  .masked = malloc(a->vocab * sizeof(float)),
                                  .pool_mark = malloc(nd_session_pool_bytes(a->model))};
    if (!a->fits || !a->search.logits || !a->search.masked || !a->search.pool_mark) return NEEDLE_E_NOMEM;
    return nd_call_prob_init(&a->call_prob, a->first_byte_of, a->vocab, a->marker[M_CALL_END], a->marker[M_IM_END]);
#else
    (void)a;
    return NEEDLE_OK;
#endif
}

needle_agent *needle_agent_new(const needle_model *model, needle_error *err) {
    needle_agent *a = calloc(1, sizeof *a);
    if (!a) { nd_fail(err, NEEDLE_E_NOMEM, "out of memory creating an agent"); return NULL; }
    a->model = model;
    a->tok = needle_model_tokenizer(model);
    a->vocab = model->archive.geometry.vocab;
    a->bos = needle_tokenizer_special(a->tok, 2);
    a->eos = needle_tokenizer_special(a->tok, 1);
    for (int m = 0; m < EXTRA_MARKERS; m++)
        a->extra[m] = needle_tokenizer_piece_id(a->tok, MARKERS3[m], strlen(MARKERS3[m]));
    for (int m = 0; m < MARKER_COUNT; m++) {
        a->marker[m] = needle_tokenizer_piece_id(a->tok, MARKERS[m], strlen(MARKERS[m]));
        if (a->marker[m] < 0) {
            nd_fail(err, NEEDLE_E_TOKENIZER, "the tokenizer has no piece %s: not a Needle chat vocabulary",
                    MARKERS[m]);
            free(a);
            return NULL;
        }
    }
    a->vocab_trie = needle_vocab_new(a->tok, err);
    if (!a->vocab_trie) { free(a); return NULL; }
    a->logits = malloc(a->vocab * sizeof *a->logits);
    a->masked = malloc(a->vocab * sizeof *a->masked);
    a->pool_mark = malloc(nd_session_pool_bytes(model));
    a->pool_prefix = malloc(nd_session_pool_bytes(model));
    if (!a->logits || !a->masked || !a->pool_mark || !a->pool_prefix || measure_pieces(a) ||
        (is_v3(a) && start_call_prob(a))) {
        needle_agent_free(a);
        nd_fail(err, NEEDLE_E_NOMEM, "out of memory creating an agent");
        return NULL;
    }
    needle_agent_set_sampling(a, 0, 0, 1, 0, 1, 0);
    return a;
}

static void end_conversation(needle_agent *a) {
    needle_session_free(a->session);
    needle_session_free(a->embedding);
    needle_grammar_free(a->grammar);
    needle_grammar_free(a->trigger_grammar);
    a->session = a->embedding = NULL, a->grammar = a->trigger_grammar = a->calls_grammar = NULL;
    a->prefix.len = a->conversation.len = 0;
    a->last_turn_called = 0;
    a->phase = P_IDLE;
}

void needle_agent_free(needle_agent *a) {
    if (!a) return;
    end_conversation(a);
    for (uint32_t i = 0; i < a->tool_count; i++) free(a->tools[i]);
    free(a->tool_embeddings);
    free(a->system.data);
    needle_sampler_free(a->sampler);
    needle_decoder_free(a->decoder);
    needle_vocab_free(a->vocab_trie);
    free(a->prefix.ids), free(a->conversation.ids), free(a->reasoning.ids), free(a->forcing.data);
    free(a->calls.ids), free(a->prompt.ids), free(a->embed_ids.ids);
    needle_session_free(a->embedding);
    free(a->logits), free(a->masked);
    free(a->pool_mark), free(a->pool_prefix), free(a->turn_text.data), free(a->string_bytes_of);
    free(a->first_byte_of), free(a->fits);
#ifdef ND_NEEDLE3
    nd_call_prob_free(&a->call_prob);
    free(a->search.logits), free(a->search.masked), free(a->search.pool_mark), free(a->search.text);
#endif
    free(a->pp_system.data), free(a->pp_conversation.data), free(a->pp_calls), free(a->tools_text.data);
#ifdef ND_NEEDLE3
    nd_toolset_free(a->toolset);
#endif
    free(a);
}

/* The tool's "name" for an error message (escaped, cut to fit), or "unnamed". */
static void tool_name(const char *text, size_t len, char *out, size_t cap) {
    nd_json *doc = nd_json_parse(text, len, 64, NULL);
    const nd_jv *name = doc ? nd_jv_get(nd_json_root(doc), "name") : NULL;
    if (name && name->type == ND_JSTRING) {
        char shown[200];
        nd_escape(shown, sizeof shown, name->str, name->len, 60);
        snprintf(out, cap, "\"%s\"", shown);
    } else {
        snprintf(out, cap, "unnamed");
    }
    nd_json_free(doc);
}

/* Token limits of one more tool, counted before anything is embedded or
 * prefilled: a tool longer than the tools block can never be rendered, and
 * embedding every declared tool costs a prefill of all their tokens. */
static int check_tool_tokens(needle_agent *a, const char *text, size_t len, needle_error *err) {
    idlist ids = {0};
    int status = encode_text(a, &ids, text, len, 1, err);
    size_t count = ids.len;
    free(ids.ids);
    if (status) return status;
    if (count > MAX_TOOLS_BLOCK_TOKENS) {
        char name[208];
        tool_name(text, len, name, sizeof name);
        return nd_fail(err, NEEDLE_E_ARGUMENT, "tool %u (%s) is %zu tokens, over the tools block's limit of %d",
                       a->tool_count, name, count, MAX_TOOLS_BLOCK_TOKENS);
    }
    if (a->tool_tokens + count > MAX_TOOLS_TOKENS)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "the tools declared are %zu tokens, over the limit of %d",
                       a->tool_tokens + count, MAX_TOOLS_TOKENS);
    a->tool_tokens += count;
    return NEEDLE_OK;
}

int needle_agent_add_tool(needle_agent *a, const char *json, size_t len, needle_error *err) {
    if (a->tool_count == MAX_TOOLS)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "more than %d tools", MAX_TOOLS);
    needle_error why;
    size_t n = nd_json_compact(json, len, !is_v3(a), NULL, 0, &why);
    if (n == 0) return nd_fail(err, NEEDLE_E_SCHEMA, "tool %u is not valid JSON: %s", a->tool_count, why.message);
    if (n > MAX_TOOL_BYTES)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "tool %u is %zu bytes of compact JSON, over the limit of %d",
                       a->tool_count, n, MAX_TOOL_BYTES);
    size_t total = n;
    for (uint32_t i = 0; i < a->tool_count; i++) total += strlen(a->tools[i]);
    if (total > MAX_TOOLS_BYTES)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "the tools declared are %zu bytes of compact JSON, over the limit of %d",
                       total, MAX_TOOLS_BYTES);
    char *text = malloc(n + 1);
    if (!text) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory adding a tool");
    nd_json_compact(json, len, !is_v3(a), text, n + 1, err);
    int status = check_tool_tokens(a, text, n, err);
    if (status) {
        free(text);
        return status;
    }
    a->tools[a->tool_count++] = text;
    a->embeddings_given = 0; /* saved embeddings were for the old tool list */
#ifdef ND_NEEDLE3
    nd_toolset_free(a->toolset); /* init normalises the new list */
    a->toolset = NULL;
#endif
    end_conversation(a);
    return NEEDLE_OK;
}

void needle_agent_require_call(needle_agent *a, int on) { a->require_call = on != 0; }

int needle_agent_trigger(needle_agent *a, const uint32_t *tools, uint32_t count, needle_error *err) {
    if (!is_v3(a)) return nd_fail(err, NEEDLE_E_ARGUMENT, "triggers are a rule of Needle 3's engine; this is Needle 2");
    if (count > a->tool_count) return nd_fail(err, NEEDLE_E_ARGUMENT, "%u triggered tools of %u", count, a->tool_count);
    for (uint32_t i = 0; i < count; i++)
        if (tools[i] >= a->tool_count || (i && tools[i] <= tools[i - 1]))
            return nd_fail(err, NEEDLE_E_ARGUMENT, "triggered tool %u: the indexes must rise, each under %u",
                           tools[i], a->tool_count);
    memcpy(a->trigger, tools, count * sizeof *tools);
    a->trigger_count = count;
    return NEEDLE_OK;
}

void needle_agent_exact(needle_agent *a, int on) { a->exact = on != 0; }

void needle_agent_set_sampling(needle_agent *a, float temperature, uint32_t top_k, float top_p,
                               float min_p, float repetition_penalty, uint32_t seed) {
    float s[5] = {temperature, (float)top_k, top_p, min_p, repetition_penalty};
    memcpy(a->sampling, s, sizeof s);
    a->seed = seed;
    needle_sampler_free(a->sampler);
    a->sampler = needle_sampler_new(a->vocab, temperature, top_k, top_p, min_p,
                                    repetition_penalty, seed);
}

/* Tool i as the prompt renders it: for Needle 3 as the engine normalises
 * it, once init has built the toolset; else the caller's compact JSON. */
static const char *tool_text(const needle_agent *a, uint32_t i) {
#ifdef ND_NEEDLE3
    const char *text = a->toolset ? nd_toolset_text(a->toolset, i) : NULL;
    if (text) return text;
#endif
    return a->tools[i];
}

/* "[tool,tool,...]": the tools listed in `which` (all of them when NULL). */
static int render_tools(const needle_agent *a, const uint32_t *which, uint32_t n, buffer *out) {
    int status = buffer_str(out, "[");
    for (uint32_t i = 0; i < n && !status; i++) {
        if (i) status = buffer_str(out, ",");
        if (!status) status = buffer_str(out, tool_text(a, which ? which[i] : i));
    }
    return status ? status : buffer_str(out, "]");
}

/* The grammar of a call list over rendered tools, at least min_calls long. */
static int calls_grammar(const needle_agent *a, const buffer *tools, int min_calls, needle_grammar **out,
                         needle_error *err) {
    *out = nd_grammar_new_calls(a->vocab_trie, tools->data, tools->len, a->marker[M_CALL_END], min_calls,
                                grammar_flags(a), err);
    return *out ? NEEDLE_OK : err ? err->code : NEEDLE_E_SCHEMA;
}

/* ... over the tools `which` (all when NULL), rendered as the prompt does. */
static int tools_grammar(const needle_agent *a, const uint32_t *which, uint32_t n, int min_calls,
                         needle_grammar **out, needle_error *err) {
    buffer tools = {0};
    int status = render_tools(a, which, n, &tools) ? nd_fail(err, NEEDLE_E_NOMEM, "out of memory rendering the tools")
                                                   : calls_grammar(a, &tools, min_calls, out, err);
    free(tools.data);
    return status;
}

/* ---- retrieval (spec section 8) ---------------------------------------- */

/* Whether more than five tools are narrowed to five: only with an embedding
 * head. Without one every tool is rendered (needle3-model.md section 9: the
 * released Needle 3 has none). */
static int retrieves(const needle_agent *a) {
    return a->tool_count > RETRIEVAL_TOP && nd_head_outputs(a->model, ND_HEAD_CONTRASTIVE);
}

/* The contrastive embedding of BOS + encode(text) in a fresh sequence. */
static int embed(needle_agent *a, const char *text, float *out, needle_error *err) {
    idlist ids = {0};
    int status = ids_put(&ids, &a->bos, 1);
    if (!status) status = encode_text(a, &ids, text, strlen(text), 1, err);
    needle_session *s = status ? NULL : needle_session_new(a->model, 0, 0, a->exact, err);
    if (!status && !s) status = err ? err->code : NEEDLE_E_NOMEM;
    if (!status) status = needle_session_feed(s, ids.ids, ids.len, NULL, 0, err);
    if (!status) status = needle_session_head(s, ND_HEAD_CONTRASTIVE, out, err);
    needle_session_free(s);
    free(ids.ids);
    return status;
}

static int embed_tools(needle_agent *a, needle_error *err) {
    if (a->embeddings_given) return NEEDLE_OK;
    a->embed_dim = nd_head_outputs(a->model, ND_HEAD_CONTRASTIVE); /* retrieves(a): not 0 */
    free(a->tool_embeddings);
    a->tool_embeddings = malloc((size_t)a->tool_count * a->embed_dim * sizeof(float));
    if (!a->tool_embeddings) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory embedding tools");
    for (uint32_t i = 0; i < a->tool_count; i++) {
        int status = embed(a, tool_text(a, i), a->tool_embeddings + (size_t)i * a->embed_dim, err);
        if (status) return status;
    }
    return NEEDLE_OK;
}

/* Saved tool embeddings stay valid while the archive and the tools are the
 * same: the fingerprint hashes both (the archive's hash is taken at load). */
static uint64_t fingerprint(const needle_agent *a) {
    uint64_t h = nd_fnv1a(ND_FNV_OFFSET, &a->model->fingerprint, sizeof a->model->fingerprint);
    for (uint32_t i = 0; i < a->tool_count; i++) h = nd_fnv1a(h, a->tools[i], strlen(a->tools[i]) + 1);
    return h;
}

void needle_agent_fingerprint(const needle_agent *a, char out[17]) {
    snprintf(out, 17, "%016llx", (unsigned long long)fingerprint(a));
}

uint32_t needle_agent_tool_embeddings(const needle_agent *a, float *out, size_t cap) {
    if (!a->tool_embeddings) return 0;
    size_t n = (size_t)a->tool_count * a->embed_dim;
    if (out && cap >= n) memcpy(out, a->tool_embeddings, n * sizeof *out);
    return a->embed_dim;
}

int needle_agent_use_tool_embeddings(needle_agent *a, const char *print, const float *vectors,
                                     size_t count, needle_error *err) {
    char want[17];
    needle_agent_fingerprint(a, want);
    if (!print || strcmp(print, want) != 0)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "saved tool embeddings have fingerprint %.16s, these tools and archive %s",
                       print ? print : "(none)", want);
    uint32_t dim = nd_head_outputs(a->model, ND_HEAD_CONTRASTIVE);
    if (!dim || count != (size_t)a->tool_count * dim)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "saved tool embeddings hold %zu values, expected %u tools x %u",
                       count, a->tool_count, dim);
    float *copy = malloc(count * sizeof *copy);
    if (!copy) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory storing tool embeddings");
    memcpy(copy, vectors, count * sizeof *copy);
    free(a->tool_embeddings);
    a->tool_embeddings = copy, a->embed_dim = dim, a->embeddings_given = 1;
    return NEEDLE_OK;
}

/* Chooses the 5 tools most similar to the query (ties to the earlier one),
 * kept in declaration order. Embeddings are unit vectors: cosine = dot. */
/* The RETRIEVAL_TOP tools whose embeddings are nearest the query's q, in
 * declaration order. */
static void rank_tools(const needle_agent *a, const float *q, uint32_t *chosen) {
    float score[MAX_TOOLS];
    for (uint32_t i = 0; i < a->tool_count; i++) {
        const float *t = a->tool_embeddings + (size_t)i * a->embed_dim;
        double dot = 0;
        for (uint32_t k = 0; k < a->embed_dim; k++) dot += (double)t[k] * q[k];
        score[i] = (float)dot;
    }
    uint8_t taken[MAX_TOOLS] = {0};
    for (uint32_t r = 0; r < RETRIEVAL_TOP; r++) {
        uint32_t best = MAX_TOOLS;
        for (uint32_t i = 0; i < a->tool_count; i++)
            if (!taken[i] && (best == MAX_TOOLS || score[i] > score[best])) best = i;
        taken[best] = 1;
    }
    for (uint32_t i = 0, n = 0; i < a->tool_count; i++)
        if (taken[i]) chosen[n++] = i;
}

/* ---- the conversation ---------------------------------------------------- */

/* Python's str.strip() for ASCII whitespace: Needle 3's envelope strips the
 * reasoning (needle3-model.md section 8). Its system text is kept as given,
 * as the makers' engine keeps it (needle-rs engine-rules.md, DECODING). */
static const char *strip(const char *s, size_t *len) {
    static const char space[] = " \t\n\r\v\f";
    while (*len && memchr(space, s[*len - 1], sizeof space - 1)) --*len;
    while (*len && memchr(space, *s, sizeof space - 1)) s++, --*len;
    return s;
}

/* Renders and prefills BOS + system turn + "<|im_start|>user\n<tools>...</tools>"
 * for the chosen tools, pins it, then re-feeds the conversation so far. */
/* A new session and grammar for the chosen tools, and the prefix that
 * renders them; nothing fed yet (init feeds the prefix at once, a turn feeds
 * prefix and conversation in steps: step_refeed). */
static int open_conversation(needle_agent *a, needle_error *err) {
    needle_session_free(a->session);
    needle_grammar_free(a->grammar);
    a->session = NULL, a->grammar = NULL;
    buffer tools = {0};
    rendering text = {0};
    int status = render_tools(a, a->chosen, a->chosen_count, &tools);
    free(a->tools_text.data);
    a->tools_text = (buffer){0};
    size_t system_len = a->system.len;
    const char *system = a->system.data;
    if (!status && system_len) {
        status = put_markup(&text, "<|im_start|>system\n");
        if (!status) status = put_caller(&text, system, system_len);
        if (!status) status = put_markup(&text, "<|im_end|>\n");
    }
    if (!status) status = put_markup(&text, "<|im_start|>user\n<tools>");
    if (!status) status = put_caller(&text, tools.data, tools.len);
    if (!status) status = put_markup(&text, "</tools>");
    if (status) status = nd_fail(err, NEEDLE_E_NOMEM, "out of memory rendering the tools");
    a->prefix.len = 0;
    if (!status) status = ids_put(&a->prefix, &a->bos, 1);
    if (!status) status = encode_into(a, &a->prefix, &text, 0, err);
    if (!status && a->prefix.len > MAX_TOOLS_BLOCK_TOKENS)
        status = nd_fail(err, NEEDLE_E_CONTEXT, "the tools block is %zu tokens, over the limit of %d: "
                         "declare fewer or shorter tools", a->prefix.len, MAX_TOOLS_BLOCK_TOKENS);
    if (!status) status = calls_grammar(a, &tools, a->require_call ? 1 : 0, &a->grammar, err);
    if (!status) {
        a->session = needle_session_new(a->model, 0, (uint32_t)a->prefix.len, a->exact, err);
        if (!a->session) status = err ? err->code : NEEDLE_E_NOMEM;
    }
    rendering_free(&text);
    a->tools_text = tools; /* the post-processor reads the tools as rendered */
    return status;
}

/* The texts the post-processor reads, kept as the makers' engine keeps them
 * (postprocess.h): the system text with its timestamps blanked, then "\n"
 * and each turn's text, cut to the last 12 KiB once past 16 KiB. */
#define PP_KEEP 12288
#define PP_MAX 16384

static int remember_system(needle_agent *a) {
    a->pp_system.len = a->pp_conversation.len = 0;
    if (!is_v3(a)) return NEEDLE_OK;
    if (buffer_put(&a->pp_system, a->system.data ? a->system.data : "", a->system.len)) return NEEDLE_E_NOMEM;
#ifdef ND_NEEDLE3
    a->pp_system.len = nd_pp_grounding_text(a->pp_system.data, a->pp_system.len, a->pp_system.data);
#endif
    return buffer_put(&a->pp_conversation, a->pp_system.data, a->pp_system.len);
}

static int remember_turn(needle_agent *a, const char *text, size_t len) {
    a->pp_mark = a->pp_conversation.len;
    if (buffer_put(&a->pp_conversation, "\n", 1) || buffer_put(&a->pp_conversation, text, len)) return NEEDLE_E_NOMEM;
    buffer *c = &a->pp_conversation;
    if (c->len > PP_MAX) {
        memmove(c->data, c->data + c->len - PP_KEEP, PP_KEEP);
        c->len = PP_KEEP, c->data[c->len] = 0;
        a->pp_mark = 0; /* cut: a rollback keeps the turn's text */
    }
    return NEEDLE_OK;
}

/* Needle 3's inputs as the engine rewrites them before it renders the
 * prompt (needle3-engine.md section 1): the system text as facts
 * (system_facts.h), the tools normalised over the whole list (toolset.h).
 * Needle 2 renders both as given. */
static int normalise_inputs(needle_agent *a, needle_error *err) {
#ifdef ND_NEEDLE3
    nd_toolset_free(a->toolset);
    a->toolset = NULL;
    if (!is_v3(a)) return NEEDLE_OK;
    size_t n = 0;
    char *facts = nd_system_facts(a->system.data ? a->system.data : "", a->system.len, &n);
    a->system.len = 0;
    int status = facts ? buffer_put(&a->system, facts, n) : NEEDLE_E_NOMEM;
    free(facts);
    if (status) return nd_fail(err, status, "out of memory storing the system text");
    return nd_toolset_new((const char *const *)a->tools, a->tool_count, &a->toolset, err);
#else
    (void)a, (void)err;
    return NEEDLE_OK;
#endif
}

int needle_agent_init(needle_agent *a, const char *system, size_t len, needle_error *err) {
    end_conversation(a);
    a->system.len = 0;
    if (len && buffer_put(&a->system, system, len))
        return nd_fail(err, NEEDLE_E_NOMEM, "out of memory storing the system text");
    int status = normalise_inputs(a, err);
    if (status) return status;
    a->conversation.len = 0;
    a->earlier_text_bytes = 0;
    if (remember_system(a)) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory storing the system text");
    /* Compiling the grammar of every declared tool reports schema errors at
     * init, naming the tool, even when retrieval later renders only five. */
    needle_grammar *all = NULL;
    if ((status = tools_grammar(a, NULL, a->tool_count, 0, &all, err))) return status;
    needle_grammar_free(all);
    a->chosen_count = retrieves(a) ? RETRIEVAL_TOP : a->tool_count;
    for (uint32_t i = 0; i < a->chosen_count; i++) a->chosen[i] = i;
    /* The first five tools' block before the embeddings: a block over its
     * limit fails before the longest work. */
    if ((status = open_conversation(a, err))) return status;
    if ((status = needle_session_feed(a->session, a->prefix.ids, a->prefix.len, NULL, 0, err))) return status;
    a->stale = 0;
    if (retrieves(a) && (status = embed_tools(a, err))) return status;
    nd_session_pool_save(a->session, a->pool_prefix);
    return NEEDLE_OK;
}

/* ---- one turn ------------------------------------------------------------ */

/* Feeds ids into the session and the transcript; the logits of the last
 * position land in a->logits. */
static int feed(needle_agent *a, const int32_t *ids, size_t n, needle_error *err) {
    if (ids_put(&a->conversation, ids, n)) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory");
    int status = needle_session_feed(a->session, ids, n, a->logits, 0, err);
    size_t bytes = nd_memory_bytes();
    if (bytes > a->peak_bytes) a->peak_bytes = bytes;
    return status;
}

/* A tool result as its turn carries it, once it has parsed as JSON: Needle
 * 2's compact JSON; for Needle 3 the engine's compaction, an object wrapped
 * in a list (system_facts.h). *out is malloc'd. */
static int result_text(const needle_agent *a, const char *text, size_t len, char **out, size_t *n,
                       needle_error *err) {
    *out = NULL;
    *n = nd_json_compact(text, len, !is_v3(a), NULL, 0, err);
    if (!*n) return err ? err->code : NEEDLE_E_ARGUMENT;
#ifdef ND_NEEDLE3
    if (is_v3(a)) *out = nd_tool_result_text(text, len, n);
#endif
    if (!is_v3(a) && (*out = malloc(*n + 1))) nd_json_compact(text, len, 1, *out, *n + 1, err);
    return *out ? NEEDLE_OK : nd_fail(err, NEEDLE_E_NOMEM, "out of memory");
}

/* The turn's text (spec section 7, runtime convention for later turns). */
static int render_turn(needle_agent *a, const char *text, size_t len, idlist *out,
                       needle_error *err) {
    rendering r = {0};
    int first = a->conversation.len == 0, status = 0;
    if (a->turn_kind == NEEDLE_TURN_TOOL_RESULT) {
        char *result;
        size_t n;
        if ((status = result_text(a, text, len, &result, &n, err))) return status;
        /* Needle 3's engine gives a result a turn of its own role. */
        status = put_markup(&r, is_v3(a) ? "\n<|im_start|>tool\n<tool_result>" : "\n<|im_start|>user\n<tool_result>");
        if (!status) status = put_caller(&r, result, n);
        if (!status) status = put_markup(&r, "</tool_result>");
        free(result);
    } else {
        status = put_markup(&r, first ? "\n" : "\n<|im_start|>user\n");
        if (!status) status = put_caller(&r, text, len);
    }
    if (!status) status = put_markup(&r, "<|im_end|>\n<|im_start|>assistant\n");
    if (status) status = nd_fail(err, NEEDLE_E_NOMEM, "out of memory rendering a turn");
    /* The first query continues the encode call that rendered the tools. */
    if (!status) status = encode_into(a, out, &r, first, err);
    rendering_free(&r);
    return status;
}

/* Forced text: exactly the ids encode gives it after a marker. */
static int forced(needle_agent *a, const char *text, idlist *out, needle_error *err) {
    rendering r = {0};
    int status = put_markup(&r, text) ? nd_fail(err, NEEDLE_E_NOMEM, "out of memory") : encode_into(a, out, &r, 1, err);
    rendering_free(&r);
    return status;
}

static int same_choice(const uint32_t *x, const uint32_t *y, uint32_t n) {
    return memcmp(x, y, n * sizeof *x) == 0;
}

/* Keeps of the conversation what a re-feed needs: the window attends only
 * the last `window` positions behind the sinks, so older turns are dropped
 * (from the first turn that starts inside the window), and a re-feed, hence
 * a turn after new tools or an abort, costs what the window costs however
 * long the conversation. */
static void trim_conversation(needle_agent *a) {
    size_t keep = a->model->window, len = a->conversation.len;
    if (len <= keep) return;
    size_t from = len - keep;
    while (from < len && a->conversation.ids[from - 1] != a->marker[M_IM_END]) from++;
    if (from == len) from = len - keep; /* one turn longer than the window */
    memmove(a->conversation.ids, a->conversation.ids + from, (len - from) * sizeof *a->conversation.ids);
    a->conversation.len = len - from;
}

/* The query's ids, for its embedding (fed in steps: step_embed). */
static int start_embedding(needle_agent *a, const char *text, size_t len, needle_error *err) {
    a->embed_ids.len = a->embed_fed = 0;
    int status = ids_put(&a->embed_ids, &a->bos, 1) ? nd_fail(err, NEEDLE_E_NOMEM, "out of memory") : NEEDLE_OK;
    if (!status) status = encode_text(a, &a->embed_ids, text, len, 1, err);
    if (!status) {
        a->embedding = needle_session_new(a->model, 0, 0, a->exact, err);
        if (!a->embedding) status = err ? err->code : NEEDLE_E_NOMEM;
    }
    return status;
}

int needle_agent_begin(needle_agent *a, const char *text, size_t len, int kind,
                       uint32_t max_new_tokens, needle_error *err) {
    uint32_t triggers = a->trigger_count; /* needle_agent_trigger's, for this turn only */
    a->trigger_count = 0;
    if (!a->session) return nd_fail(err, NEEDLE_E_ARGUMENT, "call needle_agent_init before a turn");
    if (IN_TURN(a->phase)) return nd_fail(err, NEEDLE_E_ARGUMENT, "a turn is already in progress");
    if (kind == NEEDLE_TURN_AUTO) kind = a->last_turn_called ? NEEDLE_TURN_TOOL_RESULT : NEEDLE_TURN_QUERY;
    if (kind == NEEDLE_TURN_TOOL_RESULT && !a->last_turn_called)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "a tool result needs a previous turn that called a tool");
    a->turn_kind = kind;
    /* The makers' engine acts on triggers in a user turn with no negation cue. */
#ifdef ND_NEEDLE3
    a->turn_triggers = kind == NEEDLE_TURN_QUERY && len && !nd_pp_negation_cue(text, len) ? triggers : 0;
    a->triggered = 0;
#else
    (void)triggers;
#endif
    memset(&a->turn_error, 0, sizeof a->turn_error);
    a->reasoning.len = a->calls.len = a->forcing.len = a->forcing_pos = 0;
    a->generated = a->call_sampled = a->reasoning_sampled = a->prefill_count = 0;
    a->call_logp = a->reasoning_logp = a->prefill_ms = a->decode_ms = 0;
    a->call_min_p = 1;
    a->pick.n = a->pick_at = 0;
    a->searched = 0;
#ifdef ND_NEEDLE3
    a->call_prob.dense = 0;
    nd_search_cancel(&a->search);
#endif
    a->truncated = 0;
    a->max_new = max_new_tokens ? max_new_tokens : 256;
    a->reasoning_max = is_v3(a) ? reasoning_budget_v3(a->max_new)
                                : a->max_new / 4 < 256 ? a->max_new / 4 : 256; /* the rest is for calls */
    a->turn_text.len = 0;
    a->turn_text_bytes = len;
    a->in_string = a->escaped = 0;
    if (is_v3(a) && buffer_put(&a->turn_text, text, len)) return nd_fail(err, NEEDLE_E_NOMEM, "out of memory");
    free(a->pp_calls);
    a->pp_calls = NULL;
    a->pp_withhold = a->pp_strong = 0;
    a->peak_bytes = nd_memory_bytes();
    double t0 = nd_now_ms();
    trim_conversation(a);
    a->conversation_mark = a->conversation.len;
    /* Every limit is checked before any model work: the text is tokenized,
     * counted and refused here; embedding, re-feed and prefill run in steps. */
    a->prompt.len = a->prompt_fed = 0;
    int status = render_turn(a, text, len, &a->prompt, err);
    /* The target is its own encode call, so it starts with the dummy "▁".
     * After a tool result the makers' Needle 3 engine lets the model open
     * the turn itself (step_opening). */
    a->opening = is_v3(a) && kind == NEEDLE_TURN_TOOL_RESULT;
    a->prose = 0;
    a->engine_forced = 4; /* "<think>", "</think>", the newline and "<tool_call>" */
    if (!status && !a->opening) status = encode_text(a, &a->prompt, "<think>", 7, 0, err);
    if (!status && a->prompt.len > MAX_TURN_TOKENS)
        status = nd_fail(err, NEEDLE_E_CONTEXT, "the %s is %zu tokens, over the limit of %d",
                         kind == NEEDLE_TURN_QUERY ? "query" : "tool result", a->prompt.len, MAX_TURN_TOKENS);
    if (!status && kind == NEEDLE_TURN_QUERY && retrieves(a)) status = start_embedding(a, text, len, err);
    a->prefill_ms = nd_now_ms() - t0;
    if (status) {
        needle_session_free(a->embedding);
        a->embedding = NULL;
        return status;
    }
    needle_decoder_free(a->decoder);
    a->decoder = needle_decoder_new(a->tok);
    if (!a->decoder || (is_v3(a) && remember_turn(a, text, len))) {
        needle_session_free(a->embedding);
        a->embedding = NULL;
        return nd_fail(err, NEEDLE_E_NOMEM, "out of memory");
    }
    a->refeed_fed = 0;
    a->phase = a->embedding ? P_EMBED : P_REFEED;
    return NEEDLE_OK;
}

/* Undoes the turn in progress so that a failed or aborted turn loses nothing
 * of the conversation before it. */
static void rollback(needle_agent *a) {
    needle_error ignored;
#ifdef ND_NEEDLE3
    nd_search_cancel(&a->search);
#endif
    a->conversation.len = a->conversation_mark;
    if (a->pp_conversation.len > a->pp_mark) a->pp_conversation.len = a->pp_mark;
    needle_session_free(a->embedding);
    a->embedding = NULL;
    if (a->phase >= P_PREFILL) {
        if (needle_session_rewind(a->session, a->turn_start, &ignored) == NEEDLE_OK)
            nd_session_pool_restore(a->session, a->pool_mark);
        else
            a->stale = 1; /* slid out of the window: the next turn re-feeds, in steps */
    }
    a->phase = P_IDLE;
}

static int fail_turn(needle_agent *a, int code, const char *message) {
    a->turn_error.code = code;
    snprintf(a->turn_error.message, sizeof a->turn_error.message, "%s", message);
    rollback(a);
    return -1;
}

/* Forces text after a marker: feeds its ids and streams its text. */
static int force(needle_agent *a, const char *text, char *out, size_t cap, size_t *out_len) {
    idlist ids = {0};
    needle_error err;
    int status = forced(a, text, &ids, &err);
    if (!status) status = feed(a, ids.ids, ids.len, &err);
    free(ids.ids);
    if (status) return fail_turn(a, status, err.message);
    size_t n = strlen(text);
    *out_len = n < cap ? n : cap;
    memcpy(out, text, *out_len);
    return NEEDLE_STEP_MARKER;
}

static double log_sum_exp(const float *x, uint32_t n) {
    float max = -INFINITY;
    for (uint32_t i = 0; i < n; i++) max = x[i] > max ? x[i] : max;
    double sum = 0;
    for (uint32_t i = 0; i < n; i++) sum += exp((double)x[i] - max);
    return max + log(sum);
}

/* Samples the next token from a->masked and sets *logp to its log
 * probability there. a->masked is a->logits with refused tokens at -inf, so
 * the sampled token's logit is still in a->logits after the sampler has
 * changed a->masked in place. */
static int32_t sample(needle_agent *a, double *logp) {
    double lse = log_sum_exp(a->masked, a->vocab);
    size_t n = a->conversation.len < 64 ? a->conversation.len : 64;
    int32_t token = needle_sampler_sample(a->sampler, a->masked, a->conversation.ids + a->conversation.len - n, n);
    *logp = a->logits[token] - lse;
    return token;
}

static void finish_turn(needle_agent *a);
static char *decode_all(const needle_agent *a, const idlist *ids, size_t *len);

/* Ends the reasoning: "</think>\n<tool_call>" is forced, then the calls. */
static int close_reasoning(needle_agent *a, char *out, size_t cap, size_t *out_len) {
    int status = force(a, "</think>\n<tool_call>", out, cap, out_len);
    if (status >= 0) a->phase = P_CALL;
    return status;
}

/* Ids the makers' Needle 3 engine masks at every step: <|im_start|>, the
 * tools and the tool-result markers (call_prob.c masks the same). */
static const int32_t ENGINE_BASE_BANS[] = {4, 8, 9, 12, 13};

/* The reasoning's free text. Needle 2: anything but control pieces and
 * markers other than </think>. Needle 3, as the makers' engine decodes it:
 * its base bans, <think>, <tool_call> and </tool_call>; <|im_end|> and </s>
 * end the turn with no call, unless a call is required (an extraction). A
 * turn after a tool result may open with <think> or <tool_call>; prose
 * instead answers, and can close no reasoning and make no call. */
static void mask_reasoning(needle_agent *a) {
    if (is_v3(a)) {
        for (size_t i = 0; i < sizeof ENGINE_BASE_BANS / sizeof *ENGINE_BASE_BANS; i++)
            if ((uint32_t)ENGINE_BASE_BANS[i] < a->vocab) a->masked[ENGINE_BASE_BANS[i]] = -INFINITY;
        a->masked[a->marker[M_CALL_END]] = -INFINITY;
        if (!a->opening) a->masked[a->marker[M_THINK]] = a->masked[a->marker[M_CALL]] = -INFINITY;
        if (a->opening || a->prose) a->masked[a->marker[M_THINK_END]] = -INFINITY; /* no reasoning to close */
        if (a->require_call) a->masked[a->marker[M_IM_END]] = -INFINITY;
        if (a->require_call && a->eos >= 0) a->masked[a->eos] = -INFINITY;
        return;
    }
    for (int which = 0; which < 4; which++) {
        int32_t id = needle_tokenizer_special(a->tok, which);
        if (id >= 0) a->masked[id] = -INFINITY;
    }
    for (int m = 0; m < MARKER_COUNT; m++)
        if (m != M_THINK_END) a->masked[a->marker[m]] = -INFINITY;
    for (int m = 0; m < EXTRA_MARKERS; m++)
        if (a->extra[m] >= 0) a->masked[a->extra[m]] = -INFINITY;
}

/* Needle 3: the reasoning wrote <|im_end|> or </s>: the turn ends with no call. */
static int end_without_call(needle_agent *a, int32_t token, char *out, size_t cap, size_t *out_len) {
    needle_error err;
    int status = feed(a, &token, 1, &err);
    if (status) return fail_turn(a, status, err.message);
    finish_turn(a);
    *out_len = 0;
    (void)out, (void)cap;
    return NEEDLE_STEP_MARKER;
}

/* Needle 3's first step after a tool result (needle3-engine.md section 2):
 * <think> opens the reasoning, <tool_call> the calls (the engine then
 * forces fewer markers), anything else is prose. 1 when the step is done. */
static int open_turn(needle_agent *a, int32_t token, char *out, size_t cap, size_t *out_len, int *kind) {
    a->opening = 0;
    if (token == a->marker[M_THINK]) {
        a->engine_forced = 3; /* "</think>", the newline and "<tool_call>" */
        *kind = force(a, "<think>", out, cap, out_len);
        return 1;
    }
    if (token == a->marker[M_CALL]) {
        a->engine_forced = 0;
        *kind = force(a, "<tool_call>", out, cap, out_len);
        if (*kind >= 0) a->phase = P_CALL;
        return 1;
    }
    a->prose = token != a->eos && token != a->marker[M_IM_END];
    return 0;
}

static int step_reasoning(needle_agent *a, char *out, size_t cap, size_t *out_len) {
    if (a->prose && a->generated >= a->max_new) return end_without_call(a, a->marker[M_IM_END], out, cap, out_len);
    if (!a->opening && !a->prose && a->generated >= a->reasoning_max) return close_reasoning(a, out, cap, out_len);
    memcpy(a->masked, a->logits, a->vocab * sizeof *a->masked);
    mask_reasoning(a);
    double logp;
    int32_t token = sample(a, &logp);
    a->generated++;
    int kind;
    if (a->opening && open_turn(a, token, out, cap, out_len, &kind)) return kind;
    int ends = token == a->marker[M_THINK_END] || (is_v3(a) && (token == a->eos || token == a->marker[M_IM_END]));
    if (!is_v3(a) || !ends) a->reasoning_logp += logp, a->reasoning_sampled++; /* the engine's mean skips them */
    if (token == a->marker[M_THINK_END]) return close_reasoning(a, out, cap, out_len);
    if (ends) return end_without_call(a, token, out, cap, out_len);
    needle_error err;
    if (ids_put(&a->reasoning, &token, 1)) return fail_turn(a, NEEDLE_E_NOMEM, "out of memory");
    int status = feed(a, &token, 1, &err);
    if (status) return fail_turn(a, status, err.message);
    *out_len = needle_decoder_push(a->decoder, token, out, cap);
    return NEEDLE_STEP_REASONING;
}

/* The token that writes exactly byte b: its one-character piece (for a
 * space, "▁", which a tokenizer may hold as a user-defined piece), else the
 * byte-fallback piece <0xXX>; -1 when the vocabulary has neither. */
static int32_t byte_token(const needle_agent *a, uint8_t b) {
    int type = -1;
    int32_t id = b == ' ' ? needle_tokenizer_piece_id(a->tok, "\xe2\x96\x81", 3)
                          : needle_tokenizer_piece_id(a->tok, (const char *)&b, 1);
    if (id >= 0 && nd_tokenizer_piece(a->tok, id, NULL, &type) &&
        (type == ND_PIECE_NORMAL || (b == ' ' && type == ND_PIECE_USER)))
        return id;
    char hex[8];
    snprintf(hex, sizeof hex, "<0x%02X>", b);
    id = needle_tokenizer_piece_id(a->tok, hex, 6);
    return id >= 0 && nd_tokenizer_byte(a->tok, id) == b ? id : -1;
}

/* A string value is at most VALUE_SLACK bytes longer than all the text the
 * conversation holds (system text and every turn's): a call's values are
 * copied or lightly rewritten from that text, so a longer one has run away
 * (a model given tools it does not know writes "kitchen to 10}}]}}]..." until
 * the budget ends it). Near the bound a token that would pass it is refused,
 * so the string closes there, wherever the grammar leaves a token that fits;
 * keys, enums and patterns the grammar holds to their own lengths. */
#define VALUE_SLACK 32

static size_t value_cap(const needle_agent *a) {
    return a->system.len + a->earlier_text_bytes + a->turn_text_bytes + VALUE_SLACK;
}

/* Follows the call's JSON text a token at a time (its raw bytes: the
 * decoder holds back a partial UTF-8 character): inside a string or not, and
 * its length. */
static void track_strings(needle_agent *a, int32_t token) {
    char text[256];
    size_t n = token_text(a, token, text, sizeof text);
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (!a->in_string) {
            if (c == '"') a->in_string = 1, a->string_bytes = 0;
        } else if (a->escaped) {
            a->escaped = 0, a->string_bytes++;
        } else if (c == '\\') {
            a->escaped = 1;
        } else if (c == '"') {
            a->in_string = 0;
        } else {
            a->string_bytes++;
        }
    }
}

/* Refuses the tokens that would take the string past value_cap, when an
 * allowed token fits (at the bound, those that close it). */
static void bound_string(needle_agent *a) {
    size_t cap = value_cap(a), room = cap > a->string_bytes ? cap - a->string_bytes : 0;
    if (room >= a->longest_piece) return;
    uint32_t id = 0;
    while (id < a->vocab && !(a->string_bytes_of[id] <= room && a->masked[id] > -INFINITY)) id++;
    if (id == a->vocab) return;
    for (id = 0; id < a->vocab; id++)
        if (a->string_bytes_of[id] > room) a->masked[id] = -INFINITY;
}

/* Takes one token into the call: grammar, transcript, session, stream. */
static int take_call_token(needle_agent *a, int32_t token, char *out, size_t cap, size_t *out_len) {
    needle_error err;
    int status = needle_grammar_accept(a->calls_grammar, token, &err);
    if (status) return fail_turn(a, status, err.message);
    a->generated++;
    a->searched = 0;
    if (token == a->marker[M_CALL_END]) {
        int32_t end[2] = {token, a->marker[M_IM_END]};
        if ((status = feed(a, end, 2, &err))) return fail_turn(a, status, err.message);
        finish_turn(a);
        *out_len = 0;
        return NEEDLE_STEP_MARKER;
    }
    if (ids_put(&a->calls, &token, 1)) return fail_turn(a, NEEDLE_E_NOMEM, "out of memory");
    if ((status = feed(a, &token, 1, &err))) return fail_turn(a, status, err.message);
    *out_len = needle_decoder_push(a->decoder, token, out, cap);
    track_strings(a, token);
    return NEEDLE_STEP_CALL;
}

/* Budget guard: the rest of the call is its shortest completion, one byte
 * per token, then the end token (never counted in the decode probability). */
static int force_call_step(needle_agent *a, char *out, size_t cap, size_t *out_len) {
    if (a->forcing_pos == a->forcing.len) return take_call_token(a, a->marker[M_CALL_END], out, cap, out_len);
    uint8_t b = (uint8_t)a->forcing.data[a->forcing_pos++];
    int32_t token = byte_token(a, b);
    if (token < 0) return fail_turn(a, NEEDLE_E_SCHEMA, "the vocabulary has no token for a byte the call needs");
    return take_call_token(a, token, out, cap, out_len);
}

static int start_forcing(needle_agent *a, size_t need, char *out, size_t cap, size_t *out_len) {
    a->forcing.len = a->forcing_pos = 0;
    char *text = malloc(need + 1);
    if (!text) return fail_turn(a, NEEDLE_E_NOMEM, "out of memory");
    size_t n = needle_grammar_completion(a->calls_grammar, text, need + 1);
    int status = n == need ? buffer_put(&a->forcing, text, n) : NEEDLE_E_SCHEMA;
    free(text);
    if (status) return fail_turn(a, status, "could not force the rest of the call");
    return force_call_step(a, out, cap, out_len);
}

/* The makers' cycle ban (needle3-engine.md section 2), for both
 * generations: when the call's last 6p tokens are six repeats of a cycle of
 * p = 1..4 tokens, the token that would start a seventh is refused, so a
 * value cannot run on as repeated markup ("kitchen to 10}}]}}]...") until
 * the budget ends it. The grammar's only allowed token is never refused. */
#define CYCLE_REPEATS 6
#define CYCLE_LONGEST 4

static int32_t cycle_to_ban(const idlist *calls) {
    for (size_t p = 1; p <= CYCLE_LONGEST; p++) {
        if (calls->len < CYCLE_REPEATS * p) break;
        const int32_t *tail = calls->ids + calls->len - CYCLE_REPEATS * p;
        size_t i = p;
        while (i < CYCLE_REPEATS * p && tail[i] == tail[i - p]) i++;
        if (i == CYCLE_REPEATS * p) return tail[0]; /* the next repeat starts as the first did */
    }
    return -1;
}

/* ---- Needle 3's budget, as the makers' engine spends it ---------------------
 * (needle3-engine.md section 2): nothing is forced. With four steps or fewer
 * left a complete list is closed, and an open one closed with "]" when that
 * completes it; a list the budget ends keeps the calls whose arguments
 * closed, and with none the turn reports "truncated". The engine's step
 * count holds, beside the reasoning's and the call's tokens, the markers it
 * forced (a->engine_forced). */
#define CLOSING_STEPS 4

/* The length of the call list's text up to the end of its last complete
 * element (after "[" and each "},"), 0 when no element closed. */
static size_t closed_prefix(const char *text, size_t n) {
    size_t keep = 0;
    int depth = 0, in_string = 0, escaped = 0;
    for (size_t i = 0; i < n; i++) {
        char c = text[i];
        if (in_string) {
            if (escaped) escaped = 0;
            else if (c == '\\') escaped = 1;
            else if (c == '"') in_string = 0;
        } else if (c == '"') {
            in_string = 1;
        } else if (c == '[' || c == '{') {
            depth++;
        } else if ((c == ']' || c == '}') && --depth == 1) {
            keep = i + 1;
        }
    }
    return keep;
}

/* Appends the ids text has right after a marker (no dummy prefix): the
 * pieces the model writes inside a call. */
static int encode_after_marker(const needle_agent *a, idlist *l, const char *text, size_t len, needle_error *err) {
    rendering r = {0};
    int status = put_bytes(&r, text, len, 0) ? nd_fail(err, NEEDLE_E_NOMEM, "out of memory encoding a turn")
                                              : encode_into(a, l, &r, 1, err);
    rendering_free(&r);
    return status;
}

/* The budget is spent with the list open: the calls that closed become the
 * turn's calls, or none, and the turn is truncated. */
static int cut_short(needle_agent *a, char *out, size_t cap, size_t *out_len) {
    size_t n;
    char *text = decode_all(a, &a->calls, &n);
    if (!text) return fail_turn(a, NEEDLE_E_NOMEM, "out of memory");
    size_t keep = closed_prefix(text, n);
    a->truncated = keep == 0;
    a->calls.len = 0;
    int status = NEEDLE_OK;
    needle_error err;
    if (keep) {
        text[keep] = ']';
        status = encode_after_marker(a, &a->calls, text, keep + 1, &err);
    }
    free(text);
    int32_t end = a->marker[M_IM_END];
    if (!status) status = feed(a, &end, 1, &err);
    if (status) return fail_turn(a, status, err.message);
    finish_turn(a);
    *out_len = 0;
    (void)out, (void)cap;
    return NEEDLE_STEP_MARKER;
}

/* Near the end of the budget: the token that closes the list, or -1 to go
 * on sampling. */
static int32_t closing_token(needle_agent *a) {
    if (nd_grammar_complete(a->calls_grammar)) return a->marker[M_CALL_END];
    int32_t bracket = byte_token(a, ']');
    return bracket >= 0 && nd_grammar_completion_after(a->calls_grammar, bracket) == 0 ? bracket : -1;
}

#ifdef ND_NEEDLE3
/* ---- Needle 3's decoding at a value's start (value_search.h) ------------
 * In the engine's order: right after a literal's opening quote the options
 * the conversation names, scored whole; else at an argument value's start,
 * with the budget and the sequence room the engine asks, the lookahead. The
 * pick is then committed a token a step (a step's text stays short). */
#define LOOKAHEAD_BUDGET 29   /* tokens of budget left */
#define LOOKAHEAD_SEQUENCE 32 /* positions left before the model's maximum */

/* Starts scoring the named options (opts: their texts through the closing
 * quote), each tokenized apart from its closing quote as the engine does. */
static int begin_options(needle_agent *a, const char **opts, const size_t *lens, uint32_t n, const float *step,
                         needle_error *err) {
    idlist ids = {0};
    int status = NEEDLE_OK;
    for (uint32_t i = 0; i < n && !status; i++) {
        if (!nd_option_named(a->pp_conversation.data, a->pp_conversation.len, opts[i], lens[i] - 1)) continue;
        ids.len = 0;
        status = encode_after_marker(a, &ids, opts[i], lens[i] - 1, err);
        if (!status) status = encode_after_marker(a, &ids, "\"", 1, err);
        if (!status) nd_search_option(&a->search, ids.ids, ids.len);
    }
    free(ids.ids);
    return status ? status : nd_options_begin(&a->search, step, err);
}

/* Starts the search the engine runs here, if any: the named options right
 * after a literal's opening quote, else the lookahead at an argument value's
 * start with the budget and the sequence room the engine asks. */
static int search_value(needle_agent *a, size_t left, needle_error *err) {
    a->pick.n = a->pick_at = 0;
    if (a->searched) return NEEDLE_OK; /* it ran here and picked nothing */
    a->search.session = a->session, a->search.grammar = a->calls_grammar;
    const char *opts[ND_OPTIONS_MAX];
    size_t lens[ND_OPTIONS_MAX];
    uint32_t n = nd_grammar_open_options(a->calls_grammar, opts, lens, ND_OPTIONS_MAX);
    unsigned value = n ? 0 : nd_grammar_value_start(a->calls_grammar);
    if (!n && (!(value & ND_VALUE_START) || (value & ND_VALUE_OPTIONS) || left < LOOKAHEAD_BUDGET ||
               needle_session_position(a->session) + LOOKAHEAD_SEQUENCE >= a->model->archive.geometry.max_seq))
        return NEEDLE_OK; /* the step samples */
    int dense = a->call_prob.dense;
    a->call_prob.dense |= n > 0; /* inside a string the engine scores every token */
    const float *step = nd_call_prob_step(&a->call_prob, a->logits, a->fits);
    a->call_prob.dense = dense;
    return n ? begin_options(a, opts, lens, n, step, err)
             : nd_lookahead_begin(&a->search, step, (value & ND_VALUE_GROUNDED) != 0, err);
}

/* The pick's next token, with the probability the engine records for it;
 * after its last the next step scores every token. */
static int take_pick_token(needle_agent *a, char *out, size_t cap, size_t *out_len) {
    double p = a->pick.probs[a->pick_at];
    int32_t token = a->pick.ids[a->pick_at++];
    if (p < a->call_min_p) a->call_min_p = p;
    a->call_logp += log(p);
    a->call_sampled++;
    if (a->pick_at == a->pick.n) a->call_prob.dense = 1, a->pick.n = a->pick_at = 0;
    return take_call_token(a, token, out, cap, out_len);
}

/* One forward pass of the search under way; once it ends, its pick's first
 * token (with no pick the next step samples). */
static int search_step(needle_agent *a, char *out, size_t cap, size_t *out_len) {
    needle_error err;
    int status = nd_search_step(&a->search, &a->pick, &err);
    if (status) return fail_turn(a, status, err.message);
    if (a->pick.n) return take_pick_token(a, out, cap, out_len);
    a->searched = !nd_searching(&a->search);
    *out_len = 0;
    return NEEDLE_STEP_PREFILL;
}
#endif

static int step_call_v3(needle_agent *a, char *out, size_t cap, size_t *out_len) {
#ifdef ND_NEEDLE3
    if (a->pick_at < a->pick.n) return take_pick_token(a, out, cap, out_len);
    if (nd_searching(&a->search)) return search_step(a, out, cap, out_len);
#endif
    uint32_t spent = a->generated + a->engine_forced;
    size_t left = spent < a->max_new ? a->max_new - spent : 0;
    if (left == 0) return cut_short(a, out, cap, out_len);
    int32_t closing = left <= CLOSING_STEPS ? closing_token(a) : -1;
    if (closing >= 0) return take_call_token(a, closing, out, cap, out_len);
    memcpy(a->masked, a->logits, a->vocab * sizeof *a->masked);
    uint32_t allowed = needle_grammar_mask(a->calls_grammar, a->masked);
    if (allowed == 0) return cut_short(a, out, cap, out_len); /* a dead end */
    int32_t banned = cycle_to_ban(&a->calls);
    if (banned >= 0 && allowed > 1) a->masked[banned] = -INFINITY;
    if (a->in_string) bound_string(a);
    memcpy(a->fits, a->masked, a->vocab * sizeof *a->fits); /* the sampler may change a->masked */
#ifdef ND_NEEDLE3
    needle_error err;
    int status = search_value(a, left, &err);
    if (status) return fail_turn(a, status, err.message);
    if (nd_searching(&a->search)) return search_step(a, out, cap, out_len);
#endif
    double logp;
    int32_t token = sample(a, &logp);
    if (token != a->marker[M_CALL_END]) {
#ifdef ND_NEEDLE3
        double p = nd_call_prob_of(&a->call_prob, a->logits, a->fits, token);
        if (p < a->call_min_p) a->call_min_p = p;
        a->call_prob.dense = 0;
#endif
        a->call_logp += logp;
        a->call_sampled++;
    }
    return take_call_token(a, token, out, cap, out_len);
}

static int step_call(needle_agent *a, char *out, size_t cap, size_t *out_len) {
    if (is_v3(a)) return step_call_v3(a, out, cap, out_len);
    if (a->forcing.len || a->forcing_pos) return force_call_step(a, out, cap, out_len);
    size_t left = a->generated < a->max_new ? a->max_new - a->generated : 0;
    size_t need = needle_grammar_completion(a->calls_grammar, NULL, 0);
    if (need == SIZE_MAX)
        return fail_turn(a, NEEDLE_E_SCHEMA, "no valid completion of the call array was found");
    if (need >= left) { /* only possible before the first call token */
        char msg[160];
        snprintf(msg, sizeof msg, "max_new_tokens (%u) leaves %zu tokens for the call, which needs at least %zu",
                 a->max_new, left, need + 1);
        return fail_turn(a, NEEDLE_E_CONTEXT, msg);
    }
    if (left <= need + 1) return start_forcing(a, need, out, cap, out_len);
    memcpy(a->masked, a->logits, a->vocab * sizeof *a->masked);
    uint32_t allowed = needle_grammar_mask(a->calls_grammar, a->masked);
    if (allowed == 0)
        return fail_turn(a, NEEDLE_E_SCHEMA, "the grammar allows no token here (an unsatisfiable schema)");
    int32_t banned = cycle_to_ban(&a->calls);
    if (banned >= 0 && allowed > 1) a->masked[banned] = -INFINITY;
    if (a->in_string) bound_string(a);
    double logp;
    int32_t token = sample(a, &logp);
    if (token != a->marker[M_CALL_END]) {
        /* a token that leaves too little budget to finish is replaced by forcing */
        size_t after = nd_grammar_completion_after(a->calls_grammar, token);
        if (after == SIZE_MAX || after + 1 > left - 1) return start_forcing(a, need, out, cap, out_len);
        a->call_logp += logp;
        a->call_sampled++;
    }
    return take_call_token(a, token, out, cap, out_len);
}

/* The grammar of a triggered turn: the triggered tools among those rendered,
 * at least one call (needle3-engine.md section 4). None rendered (retrieval
 * left them out): the turn runs untriggered. */
static int open_trigger_grammar(needle_agent *a, needle_error *err) {
    uint32_t which[MAX_TOOLS], n = 0;
    for (uint32_t i = 0, j = 0; i < a->chosen_count; i++) {
        while (j < a->turn_triggers && a->trigger[j] < a->chosen[i]) j++;
        if (j < a->turn_triggers && a->trigger[j] == a->chosen[i]) which[n++] = a->chosen[i];
    }
    needle_grammar_free(a->trigger_grammar);
    a->trigger_grammar = NULL;
    if (!(a->triggered = n > 0)) return NEEDLE_OK;
    return tools_grammar(a, which, n, 1, &a->trigger_grammar, err);
}

/* The turn's prefill starts here: what a rollback returns to. */
static int begin_prefill(needle_agent *a) {
    a->turn_start = needle_session_position(a->session);
    nd_session_pool_save(a->session, a->pool_mark);
    needle_error err;
    if (a->turn_triggers && open_trigger_grammar(a, &err)) return fail_turn(a, err.code, err.message);
    a->calls_grammar = a->triggered ? a->trigger_grammar : a->grammar;
    needle_grammar_reset(a->calls_grammar);
    nd_grammar_set_context(a->calls_grammar, a->pp_conversation.data, a->pp_conversation.len); /* grounded ids (Needle 3) */
    a->phase = P_PREFILL;
    return NEEDLE_STEP_PREFILL;
}

/* Embeds the query PREFILL_STEP ids a step; then picks the tools, and new
 * ones make the session stale. */
static int step_embed(needle_agent *a) {
    needle_error err;
    size_t n = a->embed_ids.len - a->embed_fed;
    if (n > PREFILL_STEP) n = PREFILL_STEP;
    int status = needle_session_feed(a->embedding, a->embed_ids.ids + a->embed_fed, n, NULL, 0, &err);
    if (status) return fail_turn(a, status, err.message);
    a->embed_fed += n;
    if (a->embed_fed < a->embed_ids.len) return NEEDLE_STEP_PREFILL;
    float q[EMBED_DIM_MAX];
    status = needle_session_head(a->embedding, ND_HEAD_CONTRASTIVE, q, &err);
    needle_session_free(a->embedding);
    a->embedding = NULL;
    if (status) return fail_turn(a, status, err.message);
    uint32_t chosen[RETRIEVAL_TOP];
    rank_tools(a, q, chosen);
    if (!same_choice(chosen, a->chosen, RETRIEVAL_TOP)) {
        memcpy(a->chosen, chosen, sizeof chosen);
        a->stale = 1; /* another five tools: a new tools block, the conversation re-fed behind it */
    }
    a->phase = P_REFEED;
    return NEEDLE_STEP_PREFILL;
}

/* Makes a stale session whole again: a new one for the chosen tools, then
 * the prefix and the kept conversation, PREFILL_STEP ids a step. The
 * prefix's end is a step's end, where reset's pooling mark is saved. */
static int step_refeed(needle_agent *a) {
    if (!a->stale) return begin_prefill(a);
    needle_error err;
    int status;
    if (a->refeed_fed == 0 && (status = open_conversation(a, &err))) return fail_turn(a, status, err.message);
    size_t fed = a->refeed_fed, in_prefix = fed < a->prefix.len;
    size_t end = in_prefix ? a->prefix.len : a->prefix.len + a->conversation.len;
    size_t n = end - fed < PREFILL_STEP ? end - fed : PREFILL_STEP;
    const int32_t *ids = in_prefix ? a->prefix.ids + fed : a->conversation.ids + (fed - a->prefix.len);
    if (n && (status = needle_session_feed(a->session, ids, n, NULL, 0, &err))) return fail_turn(a, status, err.message);
    a->refeed_fed += n;
    a->prefill_count += (uint32_t)n;
    if (in_prefix && a->refeed_fed == a->prefix.len) nd_session_pool_save(a->session, a->pool_prefix);
    if (a->refeed_fed < a->prefix.len + a->conversation.len) return NEEDLE_STEP_PREFILL;
    a->stale = 0;
    return begin_prefill(a);
}

/* Feeds the next PREFILL_STEP ids of the turn's text; the last step leaves
 * the logits that the reasoning's first token is sampled from. */
static int step_prefill(needle_agent *a) {
    size_t n = a->prompt.len - a->prompt_fed;
    if (n > PREFILL_STEP) n = PREFILL_STEP;
    needle_error err;
    int status = feed(a, a->prompt.ids + a->prompt_fed, n, &err);
    if (status) return fail_turn(a, status, err.message);
    a->prompt_fed += n;
    a->prefill_count += (uint32_t)n;
    if (a->prompt_fed == a->prompt.len) a->phase = P_REASON;
    return NEEDLE_STEP_PREFILL;
}

int needle_agent_step(needle_agent *a, char *out, size_t cap, size_t *out_len) {
    *out_len = 0;
    double t0 = nd_now_ms();
    if (a->phase == P_EMBED || a->phase == P_REFEED || a->phase == P_PREFILL) {
        int kind = a->phase == P_EMBED ? step_embed(a) : a->phase == P_REFEED ? step_refeed(a) : step_prefill(a);
        a->prefill_ms += nd_now_ms() - t0;
        return kind;
    }
    if (a->phase != P_REASON && a->phase != P_CALL) return NEEDLE_STEP_DONE;
    int kind = a->phase == P_REASON ? step_reasoning(a, out, cap, out_len)
                                    : step_call(a, out, cap, out_len);
    a->decode_ms += nd_now_ms() - t0;
    return kind;
}

void needle_agent_abort(needle_agent *a) {
    if (IN_TURN(a->phase))
        fail_turn(a, NEEDLE_E_ABORTED, "the turn was aborted by the caller");
}

/* ---- the envelope -------------------------------------------------------- */

/* Appends s as a JSON string. */
static int put_json_string(buffer *b, const char *s, size_t n) {
    int status = buffer_str(b, "\"");
    for (size_t i = 0; i < n && !status; i++) {
        unsigned char c = (unsigned char)s[i];
        char esc[8];
        if (c == '"' || c == '\\') snprintf(esc, sizeof esc, "\\%c", c);
        else if (c == '\n') snprintf(esc, sizeof esc, "\\n");
        else if (c < 0x20) snprintf(esc, sizeof esc, "\\u%04x", c);
        else { status = buffer_put(b, (const char *)&c, 1); continue; }
        status = buffer_str(b, esc);
    }
    return status ? status : buffer_str(b, "\"");
}

static char *decode_all(const needle_agent *a, const idlist *ids, size_t *len) {
    size_t n = needle_detokenize(a->tok, ids->ids, ids->len, NULL, 0);
    char *text = malloc(n + 1);
    if (text) needle_detokenize(a->tok, ids->ids, ids->len, text, n + 1), text[n] = 0;
    *len = n;
    return text;
}

/* ---- Needle 3's call post-processor ------------------------------------------ */

/* Runs the post-processor over a user turn's calls (needle3-engine.md
 * section 4); a->pp_calls is what the envelope delivers or withholds. A
 * failure (out of memory) leaves the model's calls as they are. */
#ifdef ND_NEEDLE3
/* What the post-processor reads of the turn, with the calls given. */
static nd_pp_input pp_input(const needle_agent *a, const char *calls, size_t n) {
    return (nd_pp_input){a->tools_text.data, a->pp_system.data, a->turn_text.data, a->pp_conversation.data, calls,
                         a->tools_text.len, a->pp_system.len, a->turn_text.len, a->pp_conversation.len, n};
}
#endif

static void postprocess_calls(needle_agent *a, const char *calls, size_t n) {
#ifdef ND_NEEDLE3
    nd_pp_input in = pp_input(a, calls, n);
    nd_pp_output out = {0};
    needle_error ignored;
    if (nd_postprocess(&in, &out, &ignored) == NEEDLE_OK)
        a->pp_calls = out.calls, a->pp_withhold = out.withhold, a->pp_strong = out.strong;
#else
    (void)a, (void)calls, (void)n;
#endif
}

static void finish_turn(needle_agent *a) {
    size_t n;
    char *calls = decode_all(a, &a->calls, &n);
    a->last_turn_called = calls && n && strcmp(calls, "[]") != 0; /* a Needle 3 list may never open */
    if (a->last_turn_called && is_v3(a) && a->turn_kind == NEEDLE_TURN_QUERY) postprocess_calls(a, calls, n);
    free(calls);
    a->earlier_text_bytes += a->turn_text_bytes;
    a->phase = P_DONE;
}

/* Needle 2: min(head, decode probability), the decode probability exp(mean
 * log p) of the turn's sampled tokens, the reasoning's and the call's. Its
 * reasoning derives each argument from the query and its call copies them,
 * so a wrong call's own tokens are as sure as a right one's; the
 * reasoning's tokens carry the doubt (src/train/README.md has the figures). */
static double confidence_v2(const needle_agent *a, float head) {
    double logp = a->call_logp + a->reasoning_logp;
    uint32_t n = a->call_sampled + a->reasoning_sampled;
    double decode_p = n ? exp(logp / n) : 1.0;
    return head < decode_p ? head : decode_p;
}

/* Needle 3: the makers' rule, which never reads the head: the least engine
 * probability of the call's tokens (call_prob.h); with no call tokens, the
 * geometric mean over the reasoning's; 0 with neither. */
static double confidence_v3(const needle_agent *a) {
    if (a->call_sampled) return a->call_min_p;
    return a->reasoning_sampled ? exp(a->reasoning_logp / a->reasoning_sampled) : 0;
}

/* The envelope's confidence (*present: Needle 3 always, Needle 2 with a
 * confidence head), and the head's own score (*has_head). */
static double confidence(const needle_agent *a, int *present, float *head, int *has_head) {
    needle_error ignored;
    *head = 1;
    *has_head = needle_session_head(a->session, ND_HEAD_CONFIDENCE, head, &ignored) == NEEDLE_OK;
    *present = is_v3(a) || *has_head;
    return is_v3(a) ? confidence_v3(a) : confidence_v2(a, *head);
}

/* The calls as the envelope hands them out: for Needle 3 in the caller's
 * tool and property names (toolset.h); NULL to hand out `list` as it is. */
static char *caller_names(const needle_agent *a, const char *list) {
#ifdef ND_NEEDLE3
    size_t n;
    if (list && a->toolset) return nd_toolset_restore(a->toolset, list, strlen(list), &n);
#endif
    (void)a, (void)list;
    return NULL;
}

/* The envelope's validation object by the engine's rules (postprocess.h),
 * for the list delivered or withheld. */
static void put_validation(buffer *b, const needle_agent *a, const char *calls, size_t n) {
#ifdef ND_NEEDLE3
    nd_pp_input in = pp_input(a, calls, n);
    char *validation = NULL;
    size_t len = 0;
    needle_error ignored;
    if (nd_pp_validation(&in, calls, n, &validation, &len, &ignored) == NEEDLE_OK) {
        buffer_str(b, ",\"validation\":");
        buffer_put(b, validation, len);
    }
    free(validation);
#else
    (void)b, (void)a, (void)calls, (void)n;
#endif
}

size_t needle_agent_envelope(const needle_agent *a, char *out, size_t cap) {
    buffer b = {0};
    char num[64];
    int ok = a->phase == P_DONE && !a->turn_error.code && !a->truncated, present = 0, has_head = 0;
    size_t calls_len = 0, reasoning_len = 0;
    char *calls = ok ? decode_all(a, &a->calls, &calls_len) : NULL;
    if (calls && !calls_len) free(calls), calls = NULL; /* a Needle 3 turn that never opened its list */
    char *reasoning = decode_all(a, &a->reasoning, &reasoning_len);
    /* A tool result answered with no call responds; so does a Needle 3 turn
     * whose call list never opened (the makers' rule). */
    int responded = (a->turn_kind == NEEDLE_TURN_TOOL_RESULT && calls && !strcmp(calls, "[]")) ||
                    (is_v3(a) && ok && !a->call_sampled && !a->calls.len);
    buffer_str(&b, responded ? "{\"type\":\"respond\"" : "{\"type\":\"call\"");
    buffer_str(&b, ok ? ",\"success\":true,\"error\":null,\"error_code\":null" : ",\"success\":false,\"error\":");
    if (!ok && a->truncated) {
        buffer_str(&b, "\"tool call truncated: token budget exhausted\",\"error_code\":\"truncated\"");
    } else if (!ok) {
        const char *message = a->turn_error.code ? a->turn_error.message : "no completed turn";
        put_json_string(&b, message, strlen(message));
        snprintf(num, sizeof num, ",\"error_code\":%d", a->turn_error.code ? a->turn_error.code : NEEDLE_E_ARGUMENT);
        buffer_str(&b, num);
    }
    float head = 0;
    double c = ok || a->truncated ? confidence(a, &present, &head, &has_head) : 0;
    /* Needle 3: the calls as the makers' post-processor left them. */
    const char *list = ok && a->pp_calls ? a->pp_calls : calls;
    size_t list_len = list == calls ? calls_len : strlen(list);
    /* Needle 3 withholds a call list under confidence 0.1 (needle3-model.md
     * section 9) or when a post-processor gate fired; a triggered list only
     * when a cross-call gate fired; none when a call is required (an
     * extraction). */
    int some = list && strcmp(list, "[]") != 0;
    int gated = a->triggered ? a->pp_strong : (present && c < SUPPRESS_BELOW) || a->pp_withhold;
    int withheld = is_v3(a) && !a->require_call && some && gated;
    /* Handed out in the caller's names; validation keeps the rendered ones, as the engine's does. */
    char *named = caller_names(a, list);
    const char *handed = named ? named : list;
    buffer_str(&b, ",\"function_calls\":");
    buffer_str(&b, handed && !withheld ? handed : "[]");
    if (is_v3(a)) {
        buffer_str(&b, ",\"suppressed_calls\":");
        buffer_str(&b, withheld ? handed : "[]");
        if (some) put_validation(&b, a, list, list_len);
    }
    buffer_str(&b, ",\"reasoning\":");
    const char *shown = reasoning && is_v3(a) ? strip(reasoning, &reasoning_len) : reasoning;
    put_json_string(&b, shown ? shown : "", reasoning_len);
    if (present) snprintf(num, sizeof num, ",\"confidence\":%.6g", c);
    buffer_str(&b, present ? num : ",\"confidence\":null");
    if (is_v3(a) && has_head) { /* the confidence head's own score, beside the rule the confidence follows */
        snprintf(num, sizeof num, ",\"confidence_head\":%.6g", head);
        buffer_str(&b, num);
    }
    double prefill_tps = a->prefill_ms > 0 ? a->prefill_count / (a->prefill_ms / 1e3) : 0;
    double decode_tps = a->decode_ms > 0 ? a->generated / (a->decode_ms / 1e3) : 0;
    snprintf(num, sizeof num, ",\"prefill_tps\":%.1f,\"decode_tps\":%.1f", prefill_tps, decode_tps);
    buffer_str(&b, num);
    snprintf(num, sizeof num, ",\"peak_ram_mb\":%.2f}", a->peak_bytes / 1048576.0);
    buffer_str(&b, num);
    free(calls);
    free(named);
    free(reasoning);
    return copy_out(&b, out, cap);
}

/* ---- reset and inspection ------------------------------------------------ */

int needle_agent_reset(needle_agent *a, needle_error *err) {
    if (!a->session) return nd_fail(err, NEEDLE_E_ARGUMENT, "call needle_agent_init before reset");
    if (IN_TURN(a->phase)) return nd_fail(err, NEEDLE_E_ARGUMENT, "a turn is in progress");
    if (!a->stale) { /* a stale session is re-fed by the next turn, the prefix alone now */
        int status = needle_session_rewind(a->session, (uint32_t)a->prefix.len, err);
        if (status) return status;
        nd_session_pool_restore(a->session, a->pool_prefix);
    }
    a->conversation.len = 0;
    a->earlier_text_bytes = 0;
    a->pp_conversation.len = 0;
    buffer_put(&a->pp_conversation, a->pp_system.data, a->pp_system.len); /* its room is there already */
    a->last_turn_called = 0;
    a->phase = P_IDLE;
    return NEEDLE_OK;
}

uint32_t needle_agent_prefill_count(const needle_agent *a) { return a->prefill_count; }

size_t needle_agent_rendered_tools(const needle_agent *a, char *out, size_t cap) {
    buffer b = {0};
    if (render_tools(a, a->chosen, a->chosen_count, &b)) return 0;
    return copy_out(&b, out, cap);
}
