/* needle.h: the one public header of the needle-wasm engine.
 *
 * The engine runs Needle 2 from a .cact archive that the caller keeps in
 * memory. The model (immutable, shareable) is separate from sessions (KV
 * cache, scratch); nothing is global.
 *
 *   needle_error err;
 *   needle_model *model = needle_model_load(bytes, size, &err);
 *   if (!model) { fprintf(stderr, "%s\n", err.message); return err.code; }
 *   const needle_tokenizer *tok = needle_model_tokenizer(model);
 *   uint32_t vocab = needle_tokenizer_size(tok);
 *   int32_t ids[256] = {needle_tokenizer_special(tok, 2)};   // BOS
 *   size_t n;
 *   needle_tokenize(tok, "hello", 5, ids + 1, 255, &n, &err);
 *   needle_session *s = needle_session_new(model, 0, 0, 0, &err);
 *   float *logits = malloc(sizeof(float) * vocab);
 *   needle_session_feed(s, ids, n + 1, logits, 0, &err);      // prefill
 *   needle_sampler *sampler = needle_sampler_new(vocab, 0.7f, 40, 0.9f, 0, 1, 42);
 *   int32_t next = needle_sampler_sample(sampler, logits, ids, n + 1);
 *   needle_session_feed(s, &next, 1, logits, 0, &err);         // decode one token
 *   ...
 *   needle_sampler_free(sampler); needle_session_free(s);
 *   needle_model_free(model);     // bytes may be released after this
 *
 * For tool calls, needle_agent_* (below) runs whole turns: grammar-constrained
 * calls, reasoning, confidence and the envelope of the spec's section 8.
 *
 * Ownership: the caller owns `bytes` and must keep them alive and unchanged
 * while the model lives; the engine keeps views into them (packed weights are
 * never copied). Whatever a needle_*_load/new returns is released by the
 * matching needle_*_free. Library code never exits, aborts or prints: every
 * failing call returns a status (or NULL) and fills a needle_error.
 */
#ifndef NEEDLE_H
#define NEEDLE_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#ifndef NEEDLE_API
#define NEEDLE_API
#endif

/* Status codes (needle_error.code and return values). */
enum {
    NEEDLE_OK = 0,
    NEEDLE_E_FORMAT = 1,     /* the archive is malformed: message names tensor, field, value */
    NEEDLE_E_NOMEM = 2,      /* an allocation failed */
    NEEDLE_E_ARGUMENT = 3,   /* a caller argument is out of range */
    NEEDLE_E_INCOMPLETE = 4, /* a prefix check needs more bytes (not an error yet) */
    NEEDLE_E_TOKENIZER = 5,  /* the tokenizer blob is malformed */
    NEEDLE_E_CONTEXT = 6,    /* a sequence does not fit the session */
    NEEDLE_E_SCHEMA = 7,     /* a tool schema cannot be compiled */
    NEEDLE_E_ABORTED = 8,    /* the caller stopped the call */
    NEEDLE_E_UNSUPPORTED = 9 /* a valid archive this version cannot run (a Needle 3 archive) */
};

#define NEEDLE_ERROR_MESSAGE 256
typedef struct {
    int code;
    char message[NEEDLE_ERROR_MESSAGE];
} needle_error;

typedef struct needle_model needle_model;

/* Validates the archive and builds the model. Returns NULL and fills *err on
 * failure. `err` may be NULL. */
NEEDLE_API needle_model *needle_model_load(const uint8_t *bytes, size_t size, needle_error *err);

/* Flags of needle_model_load_ex. NEEDLE_LOAD_REPACK: after validation the
 * engine rewrites the 2- and 4-bit weight matrices of at least 128 rows in
 * place into its tiled layout (same bytes, see src/kernels/cq.h), which the fast
 * integer kernels read; `bytes` then no longer hold an archive (also after a
 * failed load) and must stay alive and untouched while the model lives.
 * Sessions in exact mode compute the same results on either layout. */
#define NEEDLE_LOAD_REPACK 1u

/* needle_model_load with flags (0 behaves as needle_model_load). */
NEEDLE_API needle_model *needle_model_load_ex(uint8_t *bytes, size_t size, uint32_t flags,
                                              needle_error *err);
NEEDLE_API void needle_model_free(needle_model *model);

/* Checks a prefix of an archive of total_size bytes as it streams in: returns
 * NEEDLE_OK when header and directory are present and valid,
 * NEEDLE_E_INCOMPLETE when more bytes are needed, or an error. */
NEEDLE_API int needle_archive_check_prefix(const uint8_t *bytes, size_t size, double total_size,
                                           needle_error *err);

/* Allocates a needle_error for callers (JS) that cannot place one on a stack. */
NEEDLE_API needle_error *needle_error_new(void);
NEEDLE_API void needle_error_free(needle_error *err);

/* Geometry and directory, for inspection. `field` names a header field as in
 * the seed ("vocabulary", "hidden", ...); unknown names give -1. */
NEEDLE_API double needle_model_geometry(const needle_model *model, const char *field);
NEEDLE_API uint32_t needle_model_tensor_count(const needle_model *model);
/* Writes one JSON object describing tensor `index` into buf (NUL-terminated);
 * returns its length, or 0 when index or cap is out of range. */
NEEDLE_API size_t needle_model_tensor_json(const needle_model *model, uint32_t index, char *buf,
                                           size_t cap);

/* ---- Tokenizer (SentencePiece BPE from the archive's RAW blob) ---------- */
typedef struct needle_tokenizer needle_tokenizer;

/* Parses a tokenizer blob (spec section 6); the blob is copied, not kept. */
NEEDLE_API needle_tokenizer *needle_tokenizer_load(const uint8_t *blob, size_t size, needle_error *err);
NEEDLE_API void needle_tokenizer_free(needle_tokenizer *tok);
/* The model's own tokenizer (owned by the model). */
NEEDLE_API const needle_tokenizer *needle_model_tokenizer(const needle_model *model);
NEEDLE_API uint32_t needle_tokenizer_size(const needle_tokenizer *tok);
/* Special ids: which = 0 pad, 1 eos, 2 bos, 3 unknown; -1 for other values. */
NEEDLE_API int32_t needle_tokenizer_special(const needle_tokenizer *tok, int which);
/* Id of a piece whose surface is exactly text[0..len), or -1. */
NEEDLE_API int32_t needle_tokenizer_piece_id(const needle_tokenizer *tok, const char *text, size_t len);

/* Encodes UTF-8 text (no BOS). Writes at most cap ids and sets *count to the
 * number the full encoding has; returns NEEDLE_E_ARGUMENT when cap was too
 * small (call again with *count), NEEDLE_OK otherwise. */
NEEDLE_API int needle_tokenize(const needle_tokenizer *tok, const char *text, size_t len,
                               int32_t *ids, size_t cap, size_t *count, needle_error *err);
/* Decodes ids to UTF-8 (spec section 6). Writes at most cap bytes, returns
 * the full length (call again with a larger buffer when it exceeds cap). */
NEEDLE_API size_t needle_detokenize(const needle_tokenizer *tok, const int32_t *ids, size_t n,
                                    char *out, size_t cap);

/* Streaming decode: push one id at a time; never emits half a UTF-8 character. */
typedef struct needle_decoder needle_decoder;
NEEDLE_API needle_decoder *needle_decoder_new(const needle_tokenizer *tok);
NEEDLE_API void needle_decoder_free(needle_decoder *dec);
/* Appends the text completed by `id` to out (at most cap bytes) and returns
 * the bytes written; text that does not fit is held back, whole characters
 * only, and comes out first on the next push or flush. */
NEEDLE_API size_t needle_decoder_push(needle_decoder *dec, int32_t id, char *out, size_t cap);
/* Emits what is held back at the end (U+FFFD for an incomplete sequence). */
NEEDLE_API size_t needle_decoder_flush(needle_decoder *dec, char *out, size_t cap);

/* ---- Sessions: KV cache, prefill, decode ------------------------------- */
typedef struct needle_session needle_session;

/* A new session over `model` (which must outlive it). window 0 = the
 * archive's window (spec section 5); sinks = number of leading positions
 * pinned forever (0 = none; the agent pins through </tools> of the first
 * user turn); exact = 1 runs the float model of the spec (f32 activations
 * and, for kvBits 8, an f32 KV cache), 0 the default fast mode: the model as
 * it was trained, A8 activations at the spec's four points (a8.h), on
 * integer kernels. */
NEEDLE_API needle_session *needle_session_new(const needle_model *model, uint32_t window,
                                              uint32_t sinks, int exact, needle_error *err);
NEEDLE_API void needle_session_free(needle_session *session);
/* Runs n tokens through the model at the next positions (batched prefill).
 * logits: NULL, or vocab floats for the last position (all = 0), or
 * n * vocab floats for every position (all = 1). */
NEEDLE_API int needle_session_feed(needle_session *session, const int32_t *ids, size_t n,
                                   float *logits, int all, needle_error *err);
/* Number of positions fed so far. */
NEEDLE_API uint32_t needle_session_position(const needle_session *session);

/* The CQ level indices of one cached row (kvBits 2, 3 or 4): K (which 0) or V
 * (1) of kv head `head` of `layer` at position pos, still in the cache, as
 * spec section 5 snaps them (head dim padded to 64, each group rotated by
 * H64). Writes min(cap, padded head dim) bytes; returns the padded head dim,
 * or 0 with err set. For tests that compare the cache with a reference. */
NEEDLE_API uint32_t needle_session_kv_levels(const needle_session *session, uint32_t layer, uint32_t head,
                                             uint32_t pos, int which, uint8_t *out, uint32_t cap,
                                             needle_error *err);
/* Forgets every position from `position` on (position <= current, and every
 * kept position still in the cache or pinned); returns a status. */
NEEDLE_API int needle_session_rewind(needle_session *session, uint32_t position, needle_error *err);
/* Pins the first `sinks` positions forever (attendable outside the window).
 * Allowed before they are fed, or later while every position to pin is still
 * in the cache; unpinning fed positions needs a rewind below them first. */
NEEDLE_API int needle_session_set_sinks(needle_session *session, uint32_t sinks, needle_error *err);
/* A probe head over the cells pooled so far (spec section 4; Needle 3:
 * needle3-model.md section 5): kind 1 (contrastive, Needle 3's embedding)
 * writes needle_model_head_outputs floats of unit norm (128 in Needle 2), kind
 * 2 (confidence) one probability, kind 3 (Needle 3's router) its three logits. NEEDLE_E_ARGUMENT when the archive has no such head,
 * NEEDLE_E_CONTEXT when nothing was pooled. Rewinding to 0 restarts pooling;
 * other rewinds leave it as is. */
NEEDLE_API int needle_session_head(needle_session *session, int kind, float *out, needle_error *err);
/* How many floats needle_session_head writes for kind; 0 when the archive has no such head. */
NEEDLE_API uint32_t needle_model_head_outputs(const needle_model *model, int kind);
/* Restarts pooling: only positions fed from now on count. */
NEEDLE_API void needle_session_pool_reset(needle_session *session);

/* ---- Tool-call grammar (src/grammar*.c) --------------------------------- */
/* Constrains the call array [{"name":..,"arguments":{..}},...] to the declared
 * tools' JSON Schemas, byte by byte, in compact JSON (no whitespace).
 *   g = needle_grammar_new(tok, tools, len, end_id, &err);  // NEEDLE_E_SCHEMA names tool + pointer
 *   loop: needle_grammar_mask(g, logits); id = sample(logits); needle_grammar_accept(g, id, &err);
 *   until needle_grammar_done(g)    // the end token (</tool_call>) was accepted
 * A vocabulary (the byte trie of the tokenizer's pieces) can be built once
 * and shared by many grammars; needle_grammar_new builds a private one. */
typedef struct needle_grammar needle_grammar;
typedef struct needle_vocab needle_vocab;
NEEDLE_API needle_vocab *needle_vocab_new(const needle_tokenizer *tok, needle_error *err);
NEEDLE_API void needle_vocab_free(needle_vocab *vocab);
/* tools_json: the declared tools array; end_token: id of </tool_call>. The
 * grammar borrows `vocab` (it must outlive the grammar). */
NEEDLE_API needle_grammar *needle_grammar_new_shared(const needle_vocab *vocab, const char *tools_json,
                                                     size_t len, int32_t end_token, needle_error *err);
NEEDLE_API needle_grammar *needle_grammar_new(const needle_tokenizer *tok, const char *tools_json,
                                              size_t len, int32_t end_token, needle_error *err);
NEEDLE_API void needle_grammar_free(needle_grammar *g);
/* Back to the start of the array. */
NEEDLE_API void needle_grammar_reset(needle_grammar *g);
/* Sets logits of every disallowed token to -INFINITY; returns the number
 * allowed (0 = dead end, which the grammar's construction rules out). */
NEEDLE_API uint32_t needle_grammar_mask(needle_grammar *g, float *logits);
/* Advances by one token; NEEDLE_E_ARGUMENT (state unchanged) if not allowed. */
NEEDLE_API int needle_grammar_accept(needle_grammar *g, int32_t token, needle_error *err);
/* 1 once the end token was accepted. */
NEEDLE_API int needle_grammar_done(const needle_grammar *g);
/* A short (shortest in the usual cases) continuation that completes the call
 * array from the current state, end token excluded: writes at most cap bytes
 * (NUL-terminated when room), returns the full length; 0 when the array is
 * already complete, SIZE_MAX when none was found (out of memory, or a schema
 * the bounded search cannot finish). Every byte is accepted by the grammar. */
NEEDLE_API size_t needle_grammar_completion(const needle_grammar *g, char *out, size_t cap);
/* Caller JSON text to Python-compatible compact JSON (spec section 7): writes
 * at most cap bytes (NUL-terminated when room), returns the full length, or 0
 * with err filled when the text is not JSON. */
NEEDLE_API size_t needle_json_compact(const char *json, size_t len, char *out, size_t cap,
                                      needle_error *err);

/* ---- Sampling ---------------------------------------------------------- */
typedef struct needle_sampler needle_sampler;
/* temperature 0 = greedy; top_k 0 = off; top_p 1 = off; min_p 0 = off;
 * repetition_penalty 1 = off. The PRNG is seeded and platform independent. */
NEEDLE_API needle_sampler *needle_sampler_new(uint32_t vocab, float temperature, uint32_t top_k,
                                              float top_p, float min_p, float repetition_penalty,
                                              uint32_t seed);
NEEDLE_API void needle_sampler_free(needle_sampler *sampler);
/* Picks the next token from logits (modified in place); recent = ids the
 * repetition penalty applies to. */
NEEDLE_API int32_t needle_sampler_sample(needle_sampler *sampler, float *logits,
                                         const int32_t *recent, size_t n_recent);

/* ---- Agent: tool calls, turns and the envelope (spec sections 7-8) ------ */
typedef struct needle_agent needle_agent;

NEEDLE_API needle_agent *needle_agent_new(const needle_model *model, needle_error *err);
NEEDLE_API void needle_agent_free(needle_agent *agent);
/* Declares one tool: a JSON object {"name","description","parameters"}
 * (rendered as compact JSON in the given key order). Call before init. At
 * most 256 tools, each at most 8,192 bytes of compact JSON and 65,536 bytes
 * all together (NEEDLE_E_ARGUMENT). */
NEEDLE_API int needle_agent_add_tool(needle_agent *agent, const char *json, size_t len,
                                     needle_error *err);
/* Compiles the tools' grammar (schema errors name the tool and the JSON
 * pointer), embeds the tools when there are more than 5, renders the system
 * turn and tools block and prefills it. system may be empty. A tools block
 * over 2,048 tokens is refused (NEEDLE_E_CONTEXT). */
NEEDLE_API int needle_agent_init(needle_agent *agent, const char *system, size_t len,
                                 needle_error *err);
/* With on, every turn calls at least one tool (the grammar's call array
 * cannot close empty), as an extraction needs. Call before init. */
NEEDLE_API void needle_agent_require_call(needle_agent *agent, int on);
/* Needle 3's tool triggers (needle3-engine.md section 4): tools (indexes in
 * the order they were added, rising) whose "triggers" patterns match the
 * next turn's request. The engine matches each pattern as an ECMAScript
 * regular expression, case-insensitively, against the raw request; the
 * caller does (js/agent.js with the host's RegExp). If that turn is a user
 * turn with text and no negation cue, its call names only those of them that
 * are rendered, at least once, and its list is withheld only by a
 * cross-call gate. Applies to the next needle_agent_begin only.
 * NEEDLE_E_ARGUMENT for a Needle 2 agent or a bad index. */
NEEDLE_API int needle_agent_trigger(needle_agent *agent, const uint32_t *tools, uint32_t count,
                                    needle_error *err);
/* With on, the agent's sessions run exact f32 numerics (needle_session_new's
 * exact) instead of the default fast mode. Call before init. */
NEEDLE_API void needle_agent_exact(needle_agent *agent, int on);
NEEDLE_API void needle_agent_set_sampling(needle_agent *agent, float temperature, uint32_t top_k,
                                          float top_p, float min_p, float repetition_penalty,
                                          uint32_t seed);
enum { NEEDLE_TURN_AUTO = 0, NEEDLE_TURN_QUERY = 1, NEEDLE_TURN_TOOL_RESULT = 2 };
/* Starts a turn: a query, or a tool result (JSON text) after a turn that
 * called tools; AUTO picks the tool result after calls, else a query. The
 * turn's text (at most 4,096 tokens, else NEEDLE_E_CONTEXT) is tokenized
 * here and fed by the steps that follow. */
NEEDLE_API int needle_agent_begin(needle_agent *agent, const char *text, size_t len, int kind,
                                  uint32_t max_new_tokens, needle_error *err);
enum { NEEDLE_STEP_DONE = 0, NEEDLE_STEP_REASONING = 1, NEEDLE_STEP_CALL = 2, NEEDLE_STEP_MARKER = 3,
       NEEDLE_STEP_PREFILL = 4 };
/* Produces the next piece of the turn into out (at most cap bytes, *out_len
 * set); returns a NEEDLE_STEP_* kind, or -1 when the turn failed (the
 * envelope says why; the conversation is as before the turn). The first
 * steps of a turn feed its text, 8 tokens each, with no piece (PREFILL), as
 * do Needle 3's searches at a value's start, a forward pass a step:
 * needle_agent_abort between any two steps undoes the turn. */
NEEDLE_API int needle_agent_step(needle_agent *agent, char *out, size_t cap, size_t *out_len);
/* Ends the turn in progress as failed (NEEDLE_E_ABORTED), undoing it. */
NEEDLE_API void needle_agent_abort(needle_agent *agent);
/* The envelope JSON of the last turn; returns its full length. */
NEEDLE_API size_t needle_agent_envelope(const needle_agent *agent, char *out, size_t cap);
/* Rewinds the conversation to just after the tools block. */
NEEDLE_API int needle_agent_reset(needle_agent *agent, needle_error *err);
/* Tool retrieval embeddings (more than 5 tools) can be saved and given back
 * to a later agent, skipping the embedding at init. The fingerprint (16 hex
 * digits + NUL) covers the archive and the declared tools. */
NEEDLE_API void needle_agent_fingerprint(const needle_agent *agent, char out[17]);
/* Copies the tool_count x dim embeddings (when cap allows); returns dim, 0 if none. */
NEEDLE_API uint32_t needle_agent_tool_embeddings(const needle_agent *agent, float *out, size_t cap);
/* Before init: saved embeddings, used only when `fingerprint` matches. */
NEEDLE_API int needle_agent_use_tool_embeddings(needle_agent *agent, const char *fingerprint,
                                                const float *vectors, size_t count, needle_error *err);
/* Tokens the last needle_agent_begin fed (its own, or more after a re-render). */
NEEDLE_API uint32_t needle_agent_prefill_count(const needle_agent *agent);
/* The tools array rendered into the prompt and the grammar now. */
NEEDLE_API size_t needle_agent_rendered_tools(const needle_agent *agent, char *out, size_t cap);

/* ---- Needle 3 call post-processor (src/agent/postprocess.c) -------------
 * The makers' Needle 3 engine runs every decoded call list through a pure,
 * deterministic function (needle3-engine.md section 4; docs/needle3.md):
 * argument repairs, gates that withhold the list, date resolution and a
 * duplicate drop. This runs it alone, with no model loaded. request_json is
 * one JSON object:
 *   {"tools": [...] or "<the tools array as JSON text>",
 *    "system": "<the stored system text>",       (optional, default "")
 *    "request": "<the user turn's text>",
 *    "conversation": "<the conversation so far>", (optional, default system + "\n" + request)
 *    "calls": "<the call list the model wrote, as JSON text>"}
 * On NEEDLE_OK, *out is a NUL-terminated JSON line
 *   {"calls":"<the calls as compact JSON text>","withhold":bool,"strong":bool}
 * of *out_len bytes, allocated with malloc: the caller frees it with free()
 * (from JS: the module's exported free). withhold: a gate fired (the engine
 * moves the calls to suppressed_calls); strong: a cross-call gate fired
 * (exclusion, negation, reported speech: the one flag that also withholds a
 * call a trigger forced). Calls text that is not a non-empty JSON array
 * comes back verbatim. Only dist/needle3.wasm (and native builds with
 * ND_NEEDLE3) carry it; other builds return NEEDLE_E_UNSUPPORTED. A request
 * that is not such an object (or over 4 MiB) is NEEDLE_E_ARGUMENT. */
NEEDLE_API int needle_postprocess(const char *request_json, size_t len, char **out, size_t *out_len,
                                  needle_error *err);

/* ---- Profiling and benchmarks (src/model/session.c, src/kernels/bench.c) ------------- */
/* Stages of the forward pass that needle_session_profile reports. */
enum {
    NEEDLE_STAGE_EMBEDDING = 0, /* embedding row gather and lane copies */
    NEEDLE_STAGE_MHC = 1,       /* mHC mixes: Phi GEMVs, Sinkhorn, pre and post mixes */
    NEEDLE_STAGE_ENGRAM = 2,    /* engram gathers, key/value GEMVs and taps */
    NEEDLE_STAGE_ATTN_PROJ = 3, /* q/k/v/gate and output projections with their norms */
    NEEDLE_STAGE_ATTENTION = 4, /* RoPE, KV cache stores, attention over the window */
    NEEDLE_STAGE_MLP = 5,       /* the Hadamard MLP (FWHTs) */
    NEEDLE_STAGE_LOGITS = 6,    /* final norm and the tied-embedding logits */
    NEEDLE_STAGE_OTHER = 7,     /* the rest of a feed (engram hashes, RoPE tables, ...) */
    NEEDLE_STAGE_COUNT = 8
};
/* on = 1 zeroes the stage totals and starts timing every feed; 0 stops. Off,
 * profiling costs one flag test per stage. */
NEEDLE_API void needle_session_set_profiling(needle_session *session, int on);
/* Writes the milliseconds spent in each stage since profiling started into
 * ms[0..min(n, NEEDLE_STAGE_COUNT)); returns NEEDLE_STAGE_COUNT. */
NEEDLE_API uint32_t needle_session_profile(const needle_session *session, double *ms, uint32_t n);

/* Benchmark kernel (bench only): times `iterations` GEMVs y = W x of a random
 * packed CQ matrix [rows, cols] with `group` (bits 2, 3, 4; 1 = ternary), as
 * a fast-mode session runs them (tiled where the model tiles), or of a dense
 * f32 matrix (bits 32, nd_f32_gemv; group ignored). At most 2^26 weights.
 * Returns the milliseconds taken, or -1 with err filled. */
NEEDLE_API double needle_bench_gemv(uint32_t bits, uint32_t rows, uint32_t cols, uint32_t group,
                                    uint32_t iterations, needle_error *err);


/* ---- threads (src/kernels/threads.c) ----------------------------------------------
 * The threaded build (dist/needle-threads.wasm: shared, imported memory) splits
 * the large GEMVs and GEMMs across workers: the same module instantiated in
 * other threads over the same memory (js/thread-worker.js), each with its own
 * stack. Results are bit-identical to one thread. Other builds run one thread
 * and these calls do nothing. */

/* 1 when this build can run workers (wasm atomics and shared memory), else 0. */
NEEDLE_API uint32_t needle_threads_supported(void);
/* Announces `workers` workers (0: one thread) before they are started; work is
 * split only once all of them have joined. spin_us: how long an idle worker
 * polls for the next job before it sleeps (0: the default, 200; see
 * needle_threads_busy_marks for busy machines). */
NEEDLE_API void needle_threads_start(uint32_t workers, uint32_t spin_us);
/* Worker entry (called in a worker, with its own stack): joins the pool and
 * runs its share of every job until needle_threads_stop. Never call it on the
 * engine's thread. */
NEEDLE_API void needle_thread_work(void);
/* Workers that have joined and not left. */
NEEDLE_API uint32_t needle_threads_joined(void);
/* Pieces of work the workers (not the engine's thread) have run so far. */
NEEDLE_API uint32_t needle_threads_worker_chunks(void);
/* Times a worker found itself descheduled twice within 50 ms while it
 * polled (a machine with more runnable threads than cores); each makes it
 * poll 5 us, not spin_us, for the next 100 ms. */
NEEDLE_API uint32_t needle_threads_busy_marks(void);
/* Tells the workers to leave and waits up to wait_ms for them; returns 0, or
 * -1 when some are still inside (terminate them). */
NEEDLE_API int needle_threads_stop(uint32_t wait_ms);

#ifdef __cplusplus
}
#endif
#endif
