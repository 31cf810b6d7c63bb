/* postprocess.c: the Needle 3 call post-processor's pipeline, in the
 * engine's order (needle3-engine.md section 4), and its entry points: the
 * public needle_postprocess (one JSON object in, one JSON line out) and
 * nd_postprocess for the agent's turn.
 *
 * The order matters: each step sees the calls as the steps before left
 * them (a renamed call is gated under its new name, a dropped argument is
 * not date-resolved). "Repairs on" means the request is not blank: the
 * rename, the three per-call gates after the origin check, the tail repairs
 * and the cross-call gates need it; everything else always runs. */
#include <stdlib.h>
#include <string.h>

#include "agent/postprocess.h"
#include "format/archive.h" /* nd_fail */
#include "format/json.h"

#ifdef ND_NEEDLE3

#define MAX_REQUEST_BYTES (4u << 20) /* keeps the rules' scans over the texts quick */
#define CALLS_DEPTH 64
#define TOOLS_DEPTH 130

/* The squashed grounding text: (conversation, or the system text when the
 * conversation is empty) + "\n" + request. */
static pp_str grounding(pp_ctx *c) {
    pp_buf b = {c->a, 0, 0, 0};
    pp_puts(&b, c->conv.n ? c->conv : c->sys);
    pp_putc(&b, '\n');
    pp_puts(&b, c->req);
    return pp_squash(c->a, pp_view(&b));
}

/* What every call's rules read from the request, worked out once. */
void pp_ctx_request(pp_ctx *c) {
    pp_str r = c->req;
    c->nq = pp_normq(c->a, r), c->sqq = pp_squash(c->a, r), c->lreq = pp_lower(c->a, r);
    c->sq_plain = pp_no_thousands(c, c->sq);
    c->rtok = pp_tokens(c->a, r);
    c->rlow = c->rtok.n ? pp_alloc(c->a, c->rtok.n * sizeof(pp_str)) : NULL;
    for (size_t i = 0; c->rlow && i < c->rtok.n; i++)
        c->rlow[i] = pp_lower(c->a, pp_sub(r, c->rtok.v[i].start, c->rtok.v[i].end));
    c->wtok = pp_word_tokens(c->a, r), c->wstok = pp_ws_tokens(c->a, r);
    c->phones = pp_phone_candidates(c, r);
    c->qty_word = pp_has_quantity_word(c, r);
    c->qty = pp_any_digit(c->sq) || c->qty_word;
    c->quotes = pp_quoted_spans(c, r);
    pp_verbs_init(c);
}

/* Step 3, one call: returns 1 when a per-call gate fired. */
static int one_call(pp_ctx *c, pp_val *call) {
    if (call->type != ND_JOBJECT || !pp_call_name(call) || !pp_call_args(call)) return 0;
    pp_split_name(c, pp_call_args(call));
    if (c->on) {
        pp_str renamed = pp_polarity_rename(c, *pp_call_name(call));
        if (renamed.n) pp_get(call, "name")->s = renamed;
    }
    pp_str name = *pp_call_name(call);
    pp_val *args = pp_call_args(call);
    pp_flip(c, args, name);
    int gate = pp_gate_origin(c, args, name);
    if (c->on) {
        int e = pp_gate_enum(c, args, name), p = pp_gate_control_place(c, args, name);
        gate |= e | p | pp_gate_quantity(c, args, name);
    }
    pp_rebuild_args(c, args, name);
    if (c->on) pp_tail_repairs(c, args, name);
    pp_floats_for_numbers(c, args, name);
    return gate;
}

static uint32_t fnv1a(pp_str s) {
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < s.n; i++) h = (h ^ (unsigned char)s.p[i]) * 16777619u;
    return h;
}

/* Step 6: duplicate calls (same compact text) dropped, the first kept. A
 * hash of each text keeps the comparisons cheap for long lists. */
static void drop_duplicates(pp_ctx *c, pp_val *calls) {
    pp_str *seen = pp_alloc(c->a, calls->n * sizeof(pp_str));
    uint32_t *hash = pp_alloc(c->a, calls->n * sizeof(uint32_t));
    size_t k = 0;
    for (size_t i = 0; seen && hash && i < calls->n; i++) {
        pp_buf b = {c->a, 0, 0, 0};
        pp_write(&b, &calls->kid[i]);
        pp_str text = pp_view(&b);
        uint32_t h = fnv1a(text);
        int dup = 0;
        for (size_t j = 0; j < k && !dup; j++) dup = hash[j] == h && pp_eq(seen[j], text);
        if (dup) continue;
        seen[k] = text, hash[k] = h;
        calls->kid[k++] = calls->kid[i];
    }
    calls->n = k;
}

static int pipeline(pp_ctx *c, pp_val *calls, pp_outcome *out) {
    c->sq = grounding(c);
    c->on = pp_trim(c->req, " \t\n").n > 0;
    pp_ctx_request(c);
    pp_merge_split_place(c, calls);
    for (size_t i = 0; i < calls->n; i++) out->withhold |= one_call(c, &calls->kid[i]);
    if (c->on) {
        int e = pp_gate_excluded(c, calls), n = pp_gate_negated(c, calls), r = pp_gate_reported(c);
        if (e | n | r) out->withhold = out->strong = 1;
    }
    pp_resolve_dates(c, calls);
    drop_duplicates(c, calls);
    pp_buf b = {c->a, 0, 0, 0};
    pp_write(&b, calls);
    out->calls = pp_view(&b);
    return c->a->nomem ? NEEDLE_E_NOMEM : NEEDLE_OK;
}

/* The whole post-processor over a parsed tools array. */
static int run(pp_arena *a, const nd_jv *tools, pp_str sys, pp_str req, pp_str conv, pp_str calls_text,
               pp_outcome *out, needle_error *err) {
    *out = (pp_outcome){calls_text, 0, 0};
    needle_error why = {0};
    nd_json *doc = nd_json_parse(calls_text.p, calls_text.n, CALLS_DEPTH, &why);
    const nd_jv *root = doc ? nd_json_root(doc) : NULL;
    if (!doc && why.code == NEEDLE_E_NOMEM) return nd_fail(err, NEEDLE_E_NOMEM, "postprocess: out of memory");
    if (!root || root->type != ND_JARRAY || !root->n) { /* anything else comes back verbatim */
        nd_json_free(doc);
        return NEEDLE_OK;
    }
    pp_ctx c;
    memset(&c, 0, sizeof c);
    c.a = a, c.req = req, c.sys = sys, c.conv = conv;
    pp_tool *table;
    c.ntools = pp_parse_tools(a, tools, &table);
    c.tools = table;
    pp_val calls;
    int rc = pp_from_jv(a, root, &calls) ? pipeline(&c, &calls, out) : NEEDLE_E_NOMEM;
    nd_json_free(doc);
    if (rc) *out = (pp_outcome){calls_text, 0, 0};
    return rc ? nd_fail(err, rc, "postprocess: out of memory") : NEEDLE_OK;
}

/* ---- for the agent --------------------------------------------------------------- */
/* A caller's bytes; a NULL pointer is no bytes, whatever its length. */
static pp_str view(const char *p, size_t n) { return p && n ? (pp_str){p, n} : PP_EMPTY; }

static char *malloc_copy(pp_str s) {
    char *p = malloc(s.n + 1);
    if (p) memcpy(p, s.p, s.n), p[s.n] = 0;
    return p;
}

int nd_postprocess(const nd_pp_input *in, nd_pp_output *out, needle_error *err) {
    needle_error local;
    if (!err) err = &local;
    memset(out, 0, sizeof *out);
    nd_json *tools = nd_json_parse(in->tools, in->tools_len, TOOLS_DEPTH, err);
    if (!tools) return err->code;
    pp_arena a = {0};
    pp_outcome o;
    int rc = run(&a, nd_json_root(tools), view(in->system, in->system_len), view(in->request, in->request_len),
                 view(in->conversation, in->conversation_len), view(in->calls, in->calls_len), &o, err);
    if (!rc && !(out->calls = malloc_copy(o.calls))) rc = nd_fail(err, NEEDLE_E_NOMEM, "postprocess: out of memory");
    if (!rc) out->calls_len = o.calls.n, out->withhold = o.withhold, out->strong = o.strong;
    pp_arena_free(&a);
    nd_json_free(tools);
    return rc;
}

/* The stored system text: every "YYYY-MM-DD[T ]HH:MM" blanked to spaces,
 * then the first "date: " fact (up to the next ';') cut to one space. */
size_t nd_pp_grounding_text(const char *system, size_t len, char *out) {
    if (!len) return 0;
    if (out != system) memmove(out, system, len);
    for (size_t p = 0; p + 16 <= len; p++) {
        const char *w = out + p;
        int stamp = 1;
        for (int i = 0; i < 16 && stamp; i++)
            stamp = i == 4 || i == 7 ? w[i] == '-' : i == 10 ? (w[i] == 'T' || w[i] == ' ') : i == 13 ? w[i] == ':'
                                                                 : pp_is_digit((unsigned char)w[i]);
        if (stamp) memset(out + p, ' ', 16), p += 15;
    }
    size_t at = pp_find((pp_str){out, len}, pp_z("date: "), 0);
    if (at == PP_NONE) return len;
    size_t end = pp_find((pp_str){out, len}, pp_z(";"), at);
    if (end == PP_NONE) end = len;
    out[at] = ' ';
    memmove(out + at + 1, out + end, len - end);
    return len - (end - at) + 1;
}

/* ---- the public entry ------------------------------------------------------------- */
/* The request object's members, checked. */
typedef struct {
    const nd_jv *tools;
    pp_str system, request, conversation, calls;
    int has_conversation;
} request_members;

static int string_member(const nd_jv *v, pp_str *out) {
    if (v->type != ND_JSTRING) return 0;
    *out = v->len ? (pp_str){v->str, v->len} : PP_EMPTY;
    return 1;
}

static int read_members(const nd_jv *root, request_members *m, needle_error *err) {
    if (root->type != ND_JOBJECT)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: the request must be a JSON object "
                       "{\"tools\",\"system\",\"request\",\"conversation\",\"calls\"}");
    for (size_t i = 0; i < root->n; i++) {
        const nd_jv *v = &root->kids[i];
        pp_str key = {v->key ? v->key : "", v->klen};
        char name[64];
        int ok = 1, known = 1;
        if (pp_eqz(key, "tools")) m->tools = v, ok = v->type == ND_JARRAY || v->type == ND_JSTRING;
        else if (pp_eqz(key, "system")) ok = string_member(v, &m->system);
        else if (pp_eqz(key, "request")) ok = string_member(v, &m->request);
        else if (pp_eqz(key, "conversation")) ok = string_member(v, &m->conversation), m->has_conversation = 1;
        else if (pp_eqz(key, "calls")) ok = string_member(v, &m->calls);
        else known = 0;
        if (known && ok) continue;
        nd_escape(name, sizeof name, key.p, key.n, 40);
        if (!known)
            return nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: unknown member \"%s\" (expected tools, system, "
                           "request, conversation, calls)", name);
        return nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: member \"%s\" must be %s", name,
                       pp_eqz(key, "tools") ? "an array of tools or its JSON text"
                       : pp_eqz(key, "calls") ? "a string (the call list as JSON text)" : "a string");
    }
    if (!m->tools) return nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: missing member \"tools\"");
    if (!m->request.p) return nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: missing member \"request\"");
    if (!m->calls.p)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: missing member \"calls\" (the call list as JSON text)");
    return NEEDLE_OK;
}

/* The conversation when the caller gave none: system + "\n" + request, as
 * the engine's first turn has it. */
static pp_str default_conversation(pp_arena *a, const request_members *m) {
    pp_buf b = {a, 0, 0, 0};
    pp_puts(&b, m->system);
    pp_putc(&b, '\n');
    pp_puts(&b, m->request);
    return pp_view(&b);
}

/* {"calls":"...","withhold":b,"strong":b}, malloc'd. */
static int write_line(const pp_outcome *o, pp_arena *a, char **out, size_t *out_len, needle_error *err) {
    pp_buf b = {a, 0, 0, 0};
    pp_val calls = pp_string(o->calls);
    pp_put(&b, "{\"calls\":", 9);
    pp_write(&b, &calls);
    pp_puts(&b, pp_z(o->withhold ? ",\"withhold\":true" : ",\"withhold\":false"));
    pp_puts(&b, pp_z(o->strong ? ",\"strong\":true}" : ",\"strong\":false}"));
    if (a->nomem || !(*out = malloc_copy(pp_view(&b)))) return nd_fail(err, NEEDLE_E_NOMEM, "postprocess: out of memory");
    *out_len = b.n;
    return NEEDLE_OK;
}

NEEDLE_API int needle_postprocess(const char *request_json, size_t len, char **out, size_t *out_len,
                                  needle_error *err) {
    needle_error local;
    if (!err) err = &local;
    if (!out || !out_len) return nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: out and out_len must not be NULL");
    *out = NULL, *out_len = 0;
    if (len > MAX_REQUEST_BYTES)
        return nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: the request is %zu bytes, more than %u", len,
                       MAX_REQUEST_BYTES);
    nd_json *doc = nd_json_parse(request_json, len, TOOLS_DEPTH, err), *tools_doc = NULL;
    if (!doc) return err->code;
    request_members m = {0};
    pp_arena a = {0};
    pp_outcome o;
    int rc = read_members(nd_json_root(doc), &m, err);
    const nd_jv *tools = m.tools;
    if (!rc && tools->type == ND_JSTRING) {
        needle_error why;
        if (!(tools_doc = nd_json_parse(tools->str, tools->len, TOOLS_DEPTH, &why)))
            rc = nd_fail(err, why.code, "postprocess: member \"tools\": %s", why.message);
        else if ((tools = nd_json_root(tools_doc))->type != ND_JARRAY)
            rc = nd_fail(err, NEEDLE_E_ARGUMENT, "postprocess: member \"tools\" must hold a JSON array");
    }
    if (!rc) {
        pp_str conv = m.has_conversation ? m.conversation : default_conversation(&a, &m);
        rc = a.nomem ? nd_fail(err, NEEDLE_E_NOMEM, "postprocess: out of memory")
                     : run(&a, tools, m.system, m.request, conv, m.calls, &o, err);
    }
    if (!rc) rc = write_line(&o, &a, out, out_len, err);
    pp_arena_free(&a);
    nd_json_free(tools_doc);
    nd_json_free(doc);
    return rc;
}

#else /* the modules without Needle 3 */

NEEDLE_API int needle_postprocess(const char *request_json, size_t len, char **out, size_t *out_len,
                                  needle_error *err) {
    if (out) *out = NULL;
    if (out_len) *out_len = 0;
    return nd_fail(err, NEEDLE_E_UNSUPPORTED,
                   "postprocess: the Needle 3 call post-processor is in dist/needle3.wasm only");
}

#endif
