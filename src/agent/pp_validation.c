/* pp_validation.c: the envelope's "validation" object, present exactly when
 * a call list is delivered or withheld (needle3-engine.md section 4):
 * "ungrounded" names each tool.key whose string (over two bytes squashed)
 * or number the squashed conversation does not contain, in call and
 * argument order, parameters with an enum, a const or "grounded": true
 * exempt; "negation" says whether the request holds a negation cue
 * anywhere (as a substring, so "whenever" counts), unless it is
 * "don't mind/forget/...". */
#ifdef ND_NEEDLE3
#include <stdlib.h>
#include <string.h>

#include "agent/postprocess.h"
#include "format/archive.h" /* nd_fail */
#include "format/json.h"

/* Exempt: the tool's first parameter of that key is closed. */
static int exempt(const pp_tool *t, pp_str key) {
    for (size_t i = 0; t && i < t->np; i++)
        if (pp_eq(t->params[i].key, key)) return t->params[i].closed;
    return 0;
}

static void ungrounded(pp_ctx *c, const pp_val *calls, pp_buf *b) {
    pp_str hay = pp_squash(c->a, c->conv), plain = pp_no_thousands(c, hay);
    size_t listed = 0;
    for (size_t i = 0; i < calls->n; i++) {
        const pp_str *name = pp_call_name(&calls->kid[i]);
        const pp_val *args = pp_call_args(&calls->kid[i]);
        const pp_tool *t = name ? pp_tool_last(c, *name) : NULL;
        for (size_t k = 0; name && args && k < args->n; k++) {
            const pp_val *v = &args->kid[k];
            pp_str sq = v->type == ND_JSTRING ? pp_squash(c->a, v->s) : PP_EMPTY;
            int grounded = v->type == ND_JSTRING ? sq.n <= 2 || pp_has(hay, sq)
                         : v->type == ND_JNUMBER ? pp_number_grounded(hay, plain, v->s) : 1;
            if (grounded || exempt(t, args->key[k])) continue;
            pp_buf field = {c->a, 0, 0, 0};
            pp_puts(&field, *name), pp_putc(&field, '.'), pp_puts(&field, args->key[k]);
            pp_val s = pp_string(pp_view(&field));
            if (listed++) pp_putc(b, ',');
            pp_write(b, &s);
        }
    }
}

int nd_pp_negation_cue(const char *text, size_t len) {
    pp_str req = {text, len};
    const char *cues = "don't|dont |do not|never|no longer|must not|mustn't|shouldn't|should not|make sure not";
    pp_str cue;
    while (pp_next_item(&cues, &cue))
        for (size_t at = pp_find_ci(req, cue, 0); at != PP_NONE; at = pp_find_ci(req, cue, at + cue.n)) {
            size_t p = at + cue.n;
            while (p < req.n && req.p[p] == ' ') p++;
            const char *list = PP_NEG_FORGIVE;
            pp_str f;
            int forgiven = 0;
            while (pp_next_item(&list, &f)) forgiven |= pp_find_ci(pp_sub(req, p, p + f.n), f, 0) == 0;
            if (!forgiven) return 1;
        }
    return 0;
}

int nd_pp_validation(const nd_pp_input *in, const char *calls, size_t calls_len, char **out,
                     size_t *out_len, needle_error *err) {
    *out = NULL, *out_len = 0;
    nd_json *tools = nd_json_parse(in->tools, in->tools_len, 130, err);
    nd_json *list = tools ? nd_json_parse(calls, calls_len, 64, NULL) : NULL;
    if (!tools) return err ? err->code : NEEDLE_E_ARGUMENT;
    pp_arena a = {0};
    pp_ctx c;
    memset(&c, 0, sizeof c);
    c.a = &a, c.sys = PP_EMPTY;
    c.req = in->request && in->request_len ? (pp_str){in->request, in->request_len} : PP_EMPTY;
    c.conv = in->conversation && in->conversation_len ? (pp_str){in->conversation, in->conversation_len} : PP_EMPTY;
    pp_tool *table;
    c.ntools = pp_parse_tools(&a, nd_json_root(tools), &table);
    c.tools = table;
    pp_val v = {0};
    pp_buf b = {&a, 0, 0, 0};
    pp_puts(&b, pp_z("{\"ungrounded\":["));
    if (list && nd_json_root(list)->type == ND_JARRAY && pp_from_jv(&a, nd_json_root(list), &v)) ungrounded(&c, &v, &b);
    pp_puts(&b, pp_z(nd_pp_negation_cue(c.req.p, c.req.n) ? "],\"negation\":true}" : "],\"negation\":false}"));
    pp_str s = pp_view(&b);
    if (!a.nomem && (*out = malloc(s.n + 1))) memcpy(*out, s.p, s.n), (*out)[s.n] = 0, *out_len = s.n;
    int rc = *out ? NEEDLE_OK : nd_fail(err, NEEDLE_E_NOMEM, "postprocess: out of memory");
    pp_arena_free(&a);
    nd_json_free(list);
    nd_json_free(tools);
    return rc;
}
#endif /* ND_NEEDLE3 */
