/* postprocess.h: the Needle 3 call post-processor (needle3-engine.md section
 * 4), internal to src/agent/.
 *
 * After a user turn decodes a non-empty call list, the makers' engine runs it
 * through one deterministic function before the envelope: argument repairs,
 * gates that withhold the list, date resolution and a duplicate drop. This is
 * our own implementation of the behaviour ddrscott/needle-rs
 * docs/engine-rules.md ("POST-PROCESSING") documents; the word lists, verb
 * tables, orders and thresholds are facts about that engine.
 *
 * Everything works on bytes as the engine does: only ASCII is lowercased,
 * numbers keep their source text, object members keep their order (and
 * repeated keys). All memory of one run comes from one arena, freed at the
 * end; an allocation failure is sticky (pp_arena.nomem) and every helper
 * degrades to an empty result, so the pipeline checks the flag once at the
 * end instead of after every call.
 *
 * Files: postprocess.c (the pipeline, its order, the public entry),
 * pp_text.c (arena and byte helpers), pp_words.c (word lists and the verb
 * table), pp_json.c (mutable values, the tool table), pp_verbs.c (polarity
 * rename, flips), pp_gates.c (the gates), pp_repair.c (the per-argument
 * rebuild), pp_place.c (place queries), pp_tail.c (the tail repairs),
 * pp_dates.c (date resolution), pp_validation.c (the envelope's
 * "validation" object).
 *
 * Compiled only with ND_NEEDLE3. */
#ifndef ND_POSTPROCESS_H
#define ND_POSTPROCESS_H

#include <stddef.h>
#include <stdint.h>

#include "needle.h"

#ifdef ND_NEEDLE3

/* ---- bytes and memory (pp_text.c) ---------------------------------------- */

/* A byte view; p is never NULL (empty views point at ""). */
typedef struct {
    const char *p;
    size_t n;
} pp_str;

#define PP_NONE ((size_t)-1) /* "not found" for positions */

typedef struct pp_chunk pp_chunk;
typedef struct {
    pp_chunk *chunks;
    int nomem; /* sticky: set by the first failed allocation */
} pp_arena;

void *pp_alloc(pp_arena *a, size_t size); /* NULL (and nomem set) on failure */
void pp_arena_free(pp_arena *a);

/* A growable byte string in the arena. */
typedef struct {
    pp_arena *a;
    char *p;
    size_t n, cap;
} pp_buf;

void pp_put(pp_buf *b, const char *s, size_t n);
void pp_putc(pp_buf *b, char c);
static inline void pp_puts(pp_buf *b, pp_str s) { pp_put(b, s.p, s.n); }
pp_str pp_view(const pp_buf *b);

/* A growable list of views. */
typedef struct {
    pp_str *v;
    size_t n, cap;
} pp_strv;
void pp_strv_push(pp_arena *a, pp_strv *v, pp_str s);

/* A request token with its byte span (pp_tokens). */
typedef struct {
    size_t start, end;
} pp_span;
typedef struct {
    pp_span *v;
    size_t n, cap;
} pp_spans;
void pp_spans_push(pp_arena *a, pp_spans *v, size_t start, size_t end);

extern const pp_str PP_EMPTY;
pp_str pp_z(const char *s);
pp_str pp_sub(pp_str s, size_t from, size_t to); /* clamped to s */
pp_str pp_copy(pp_arena *a, pp_str s);
int pp_eq(pp_str a, pp_str b);
int pp_eq_ci(pp_str a, pp_str b);   /* equal after ASCII lowercasing */
int pp_eqz(pp_str a, const char *z);
int pp_is_digit(unsigned char c);
int pp_is_alnum(unsigned char c);
int pp_all_digits(pp_str s);        /* non-empty and only ASCII digits */
int pp_any_digit(pp_str s);
size_t pp_find(pp_str hay, pp_str needle, size_t from);
size_t pp_find_ci(pp_str hay, pp_str needle, size_t from);
int pp_has(pp_str hay, pp_str needle);
int pp_has_ci(pp_str hay, pp_str needle);
int pp_hasz(pp_str hay, const char *needle);
int pp_starts(pp_str s, size_t at, pp_str prefix);
int pp_startsz(pp_str s, size_t at, const char *prefix);
int pp_ends(pp_str s, const char *suffix);
pp_str pp_trim(pp_str s, const char *set); /* set bytes and NUL off both ends */
pp_str pp_lower(pp_arena *a, pp_str s);
pp_str pp_squash(pp_arena *a, pp_str s);   /* lowered, without ' ', '-', '_' */
pp_str pp_normq(pp_arena *a, pp_str s);    /* " " + a-z 0-9 ' and space, rest space + " " */
pp_str pp_pad(pp_arena *a, pp_str s);      /* " " + s + " " */
int pp_has_word(pp_arena *a, pp_str hay, pp_str word); /* " word " in hay */
pp_str pp_join(pp_arena *a, const pp_strv *v, char sep);
pp_strv pp_ws_tokens(pp_arena *a, pp_str s);   /* split on space, tab, newline */
pp_strv pp_word_tokens(pp_arena *a, pp_str s); /* runs of alnum, ' and bytes >= 0x80 */
pp_spans pp_tokens(pp_arena *a, pp_str s);     /* the engine's word tokenizer */
pp_strv pp_name_words(pp_arena *a, pp_str s);  /* identifier words, short and stop words out */
int pp_name_has(pp_arena *a, pp_str name, pp_str word); /* word is one of name's words */

/* ---- word lists (pp_words.c) --------------------------------------------- */
/* Lists are packed as "a|b|c": no pointer tables, small in wasm. */
int pp_in(pp_str w, const char *list);    /* exact member */
int pp_in_ci(pp_str w, const char *list); /* member after lowering w */
int pp_sub_in(pp_str hay, const char *list); /* some item is a substring (hay lowered) */
int pp_piece_in(pp_str name, const char *list); /* a piece split on ' ', '-', '_' is a member */
int pp_next_item(const char **cursor, pp_str *item); /* iterates a packed list */
size_t pp_list_index(pp_str w, const char *list);   /* position of exact member, or PP_NONE */
/* JSON Schema keywords a flat "parameters" object (one without
 * "properties") may carry beside its parameters (pp_json.c; the engine's
 * table, which toolset.c reads too). */
extern const char PP_SCHEMA_KEYWORDS[];

extern const char PP_QUANTITY_WORDS[], PP_NON_PLACE[], PP_PLACE_SLOT[], PP_DATE_KEY[];
extern const char PP_STEM_DROP[], PP_NEG_BEFORE[];
extern const char PP_ORIGIN_KEYS[], PP_DEST_KEYS[], PP_ENUM_EXEMPT[], PP_CONTROL_SLOT[];
extern const char PP_CONTROL_WORDS[], PP_TERMINATORS[], PP_EXCLUSION_CUES[], PP_NEGATION_CUES[];
extern const char PP_NEG_FORGIVE[], PP_REPORTING[], PP_ARTICLES[];
extern const char PP_FIRST_KEYS[], PP_LAST_KEYS[], PP_HONORIFICS[], PP_NOT_FIRST[], PP_NOT_LAST[];
extern const char PP_NOT_PLACE_KEY[], PP_PLACE_KEYS[], PP_PLACE_TEXT[], PP_FILLER[], PP_STOP_WORDS[];
extern const char PP_PREPS[], PP_PLACE_NOUNS[], PP_SUFFIXES[], PP_ADDR_CONN[], PP_TRAILING[];
extern const char PP_MERGE_GAP[], PP_MIME[], PP_PHONE_KEYS[], PP_TITLE_KEYS[];
extern const char PP_NUMBER_WORDS[], PP_NAME_WORDS[], PP_LEFTOVER_FILLER[], PP_LEFTOVER_CONTROL[];
extern const char PP_ORIGIN_NAMES[], PP_DEST_NAMES[], PP_PHRASE_STOP[], PP_NOT_A_PLACE[];
extern const char PP_MONTHS[], PP_WEEKDAYS[], PP_TRANSPORT_KEYS[];
extern const char *const PP_TRANSPORT_SYNONYMS[4];

/* One row of the request-verb table: phrases for the positive (a) and
 * negative (b) direction, words of a bool key the row flips (c), and the
 * positive (d) and negative (e) values (also tool-name words). */
typedef struct {
    const char *a, *b, *c, *d, *e;
} pp_verb_row;
#define PP_VERB_ROWS 5
extern const pp_verb_row PP_VERBS[PP_VERB_ROWS];

/* ---- values and tools (pp_json.c) ---------------------------------------- */
/* A mutable JSON value. Strings hold decoded bytes, numbers their source
 * text; an object's members are key[i] / kid[i], in order, repeats kept. */
typedef struct pp_val pp_val;
struct pp_val {
    int type; /* ND_J* of format/json.h */
    pp_str s;
    pp_val *kid;
    pp_str *key;
    size_t n, cap;
};

typedef struct nd_jv nd_jv;
int pp_from_jv(pp_arena *a, const nd_jv *v, pp_val *out);
pp_val *pp_get(const pp_val *obj, const char *key); /* the first member, or NULL */
void pp_remove(pp_val *obj, size_t i);
void pp_push(pp_arena *a, pp_val *obj, pp_str key, pp_val v); /* key ignored for arrays */
pp_val pp_string(pp_str s);
pp_val pp_number(pp_str s);
void pp_write(pp_buf *b, const pp_val *v); /* compact JSON as the engine writes it */
pp_str pp_text_of(const pp_val *v);        /* a scalar's text: string bytes, number source, true/false */

/* A call's name (first "name" member, when a string) and arguments (first
 * "arguments" member, when an object); NULL otherwise. */
const pp_str *pp_call_name(const pp_val *call);
pp_val *pp_call_args(const pp_val *call);

/* One parameter of a tool as the post-processor reads it. */
typedef struct {
    pp_str key, desc, ty, items_ty, def;
    pp_str *opts; /* the string members of enum */
    size_t nopts;
    unsigned required : 1, has_enum : 1, has_default : 1, closed : 1;
} pp_param;
typedef struct {
    pp_str name, desc;
    pp_param *params;
    size_t np;
} pp_tool;

/* The tool table of a parsed tools array (OpenAI wrappers unwrapped);
 * returns the count, 0 for anything but an array. */
size_t pp_parse_tools(pp_arena *a, const nd_jv *root, pp_tool **out);

/* ---- the context of one run ---------------------------------------------- */
typedef struct {
    pp_arena *a;
    pp_str req, sys, conv;
    const pp_tool *tools;
    size_t ntools;
    pp_str sq;      /* squashed grounding text: (conversation or system) + "\n" + request */
    pp_strv quotes; /* quoted spans of the request */
    int on;         /* repairs on: the request is not blank */
    /* What the rules read from the request, computed once per run
     * (pp_ctx_request): every call would otherwise redo the same work, and
     * a long request times many calls would take quadratic time. */
    pp_str nq, sqq, lreq; /* pp_normq, pp_squash and lowered request */
    pp_str sq_plain;      /* sq without thousands commas (number grounding) */
    pp_spans rtok;        /* pp_tokens(request) */
    pp_str *rlow;         /* each of them lowered */
    pp_strv wtok, wstok;  /* pp_word_tokens, pp_ws_tokens of the request */
    pp_strv phones;       /* phone-number-like spans of the request */
    int qty_word, qty;    /* a quantity word in the request; or a digit in sq */
    signed char verb[PP_VERB_ROWS]; /* each verb row: +1, -1, or 0 when it does not fire */
    unsigned char transport[4];     /* each transport verb the request names */
    const pp_tool *left_tool;       /* the leftover phrase, for the last tool asked */
    pp_str left;
    int left_done;
} pp_ctx;

void pp_ctx_request(pp_ctx *c);   /* fills the request-derived fields above */
void pp_verbs_init(pp_ctx *c);    /* pp_verbs.c: verb[] and transport[] */
pp_strv pp_phone_candidates(pp_ctx *c, pp_str r);
pp_str pp_no_thousands(pp_ctx *c, pp_str hay);

const pp_tool *pp_tool_last(const pp_ctx *c, pp_str name);  /* last tool of that name */
const pp_tool *pp_tool_first(const pp_ctx *c, pp_str name); /* first tool of that name */
const pp_param *pp_info(const pp_ctx *c, pp_str tool, pp_str key); /* never NULL */
int pp_has_quantity_word(pp_ctx *c, pp_str s);
/* The number text stated in hay (or plain: hay without its thousands commas). */
int pp_number_grounded(pp_str hay, pp_str plain, pp_str num);

/* ---- the rules ----------------------------------------------------------- */
/* pp_verbs.c */
pp_str pp_polarity_rename(pp_ctx *c, pp_str name);  /* empty when none */
int pp_verb_value(pp_ctx *c, pp_str value);
void pp_flip(pp_ctx *c, pp_val *args, pp_str name);

/* pp_gates.c: each returns 1 when it fires */
int pp_gate_origin(pp_ctx *c, pp_val *args, pp_str name);
int pp_gate_enum(pp_ctx *c, const pp_val *args, pp_str name);
int pp_gate_control_place(pp_ctx *c, const pp_val *args, pp_str name);
int pp_gate_quantity(pp_ctx *c, const pp_val *args, pp_str name);
int pp_gate_excluded(pp_ctx *c, pp_val *calls);
int pp_gate_negated(pp_ctx *c, pp_val *calls);
int pp_gate_reported(pp_ctx *c);
size_t pp_terminator(pp_str s, size_t from);

/* pp_repair.c */
void pp_split_name(pp_ctx *c, pp_val *args);
void pp_rebuild_args(pp_ctx *c, pp_val *args, pp_str name);
pp_strv pp_quoted_spans(pp_ctx *c, pp_str req);

/* pp_place.c */
int pp_is_place_param(pp_ctx *c, pp_str key, pp_str desc, pp_str tooltext);
pp_str pp_recover_place(pp_ctx *c, pp_str value);
pp_str pp_clean_place(pp_ctx *c, pp_str span);
void pp_merge_split_place(pp_ctx *c, pp_val *calls);
pp_str pp_tool_text(pp_ctx *c, pp_str name);

/* pp_tail.c */
void pp_tail_repairs(pp_ctx *c, pp_val *args, pp_str name);
void pp_floats_for_numbers(pp_ctx *c, pp_val *args, pp_str name);
int pp_iso_shape(pp_str v);
int pp_date_key(pp_str key);

/* pp_dates.c */
void pp_resolve_dates(pp_ctx *c, pp_val *calls);

/* postprocess.c */
typedef struct {
    pp_str calls; /* in the arena */
    int withhold, strong;
} pp_outcome;

/* ---- for the agent's turn (agent.c) ------------------------------------------ */
/* The inputs of one run, as the engine has them after a user turn:
 *   tools         the tools array as rendered into the prompt (JSON text; the
 *                 calls name tools and keys the same way)
 *   system        the stored system text (nd_pp_grounding_text of the system
 *                 text the prompt carries)
 *   request       the user turn's text
 *   conversation  the stored system text, then "\n" + every turn's input so
 *                 far (tool results included, this request last), cut to its
 *                 last 12 KiB once it passes 16 KiB
 *   calls         the decoded call list (compact JSON text)
 * Lengths are bytes; a pointer may be NULL when its length is 0. */
typedef struct {
    const char *tools, *system, *request, *conversation, *calls;
    size_t tools_len, system_len, request_len, conversation_len, calls_len;
} nd_pp_input;

/* calls: malloc'd, NUL-terminated (free with free()); withhold: any gate
 * fired; strong: a cross-call gate fired (the one flag that also withholds
 * a call a trigger forced). */
typedef struct {
    char *calls;
    size_t calls_len;
    int withhold, strong;
} nd_pp_output;

/* Runs the post-processor. Calls text that is not a non-empty JSON array
 * comes back verbatim with both flags 0. Returns NEEDLE_OK, or an error
 * (tools that are not JSON, out of memory) with *err filled. */
int nd_postprocess(const nd_pp_input *in, nd_pp_output *out, needle_error *err);

/* The system text as the engine stores it for the post-processor: every
 * "YYYY-MM-DD[T ]HH:MM" timestamp blanked to spaces, then the first
 * "date: " fact (up to the next ';') cut to one space. Writes at most len
 * bytes to out (out may equal system) and returns the new length. */
size_t nd_pp_grounding_text(const char *system, size_t len, char *out);

/* Whether a request holds a negation cue ("don't", "never", "no longer", ...
 * not forgiven by what follows): the envelope's validation.negation, and a
 * request whose tool triggers the engine then ignores. */
int nd_pp_negation_cue(const char *text, size_t len);

/* The envelope's "validation" object as the engine computes it for a
 * delivered or withheld call list (calls: the post-processed list):
 * {"ungrounded":["tool.key",...],"negation":bool}, malloc'd into *out. */
int nd_pp_validation(const nd_pp_input *in, const char *calls, size_t calls_len, char **out,
                     size_t *out_len, needle_error *err);

#endif /* ND_NEEDLE3 */
#endif
