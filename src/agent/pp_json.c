/* pp_json.c: the post-processor's mutable JSON values and its tool table.
 *
 * Calls are parsed by format/json.c (bounded depth, every read checked) and
 * copied into pp_val trees the rules can edit. The engine's value differs
 * from a Python dict in two ways that matter here: a lookup takes the first
 * member of a repeated key, and the writer keeps every member, in order.
 * Recursion in this file is bounded by the parser's depth limit. */
#ifdef ND_NEEDLE3
#include <string.h>

#include "agent/postprocess.h"
#include "format/json.h"

/* ---- values ---------------------------------------------------------------- */
int pp_from_jv(pp_arena *a, const nd_jv *v, pp_val *out) {
    memset(out, 0, sizeof *out);
    out->type = v->type;
    out->s = PP_EMPTY;
    if (v->type == ND_JSTRING || v->type == ND_JNUMBER) {
        out->s = v->len ? (pp_str){v->str, v->len} : PP_EMPTY;
        return 1;
    }
    if (v->type != ND_JARRAY && v->type != ND_JOBJECT) return 1;
    if (!v->n) return 1;
    if (v->n > SIZE_MAX / sizeof(pp_val)) return a->nomem = 1, 0;
    out->kid = pp_alloc(a, v->n * sizeof(pp_val));
    out->key = v->type == ND_JOBJECT ? pp_alloc(a, v->n * sizeof(pp_str)) : NULL;
    if (!out->kid || (v->type == ND_JOBJECT && !out->key)) return 0;
    out->n = out->cap = v->n;
    for (size_t i = 0; i < v->n; i++) {
        if (out->key) out->key[i] = v->kids[i].klen ? (pp_str){v->kids[i].key, v->kids[i].klen} : PP_EMPTY;
        if (!pp_from_jv(a, &v->kids[i], &out->kid[i])) return 0;
    }
    return 1;
}

pp_val *pp_get(const pp_val *obj, const char *key) {
    if (!obj || obj->type != ND_JOBJECT) return NULL;
    for (size_t i = 0; i < obj->n; i++)
        if (pp_eqz(obj->key[i], key)) return &obj->kid[i];
    return NULL;
}

void pp_remove(pp_val *obj, size_t i) {
    if (i >= obj->n) return;
    memmove(obj->kid + i, obj->kid + i + 1, (obj->n - i - 1) * sizeof(pp_val));
    if (obj->key) memmove(obj->key + i, obj->key + i + 1, (obj->n - i - 1) * sizeof(pp_str));
    obj->n--;
}

void pp_push(pp_arena *a, pp_val *obj, pp_str key, pp_val v) {
    if (obj->n == obj->cap) {
        size_t cap = obj->cap ? obj->cap * 2 : 4;
        if (cap > SIZE_MAX / sizeof(pp_val)) { a->nomem = 1; return; }
        pp_val *kid = pp_alloc(a, cap * sizeof(pp_val));
        pp_str *keys = obj->type == ND_JOBJECT ? pp_alloc(a, cap * sizeof(pp_str)) : NULL;
        if (!kid || (obj->type == ND_JOBJECT && !keys)) return;
        if (obj->n) memcpy(kid, obj->kid, obj->n * sizeof(pp_val));
        if (keys && obj->n) memcpy(keys, obj->key, obj->n * sizeof(pp_str));
        obj->kid = kid, obj->key = keys, obj->cap = cap;
    }
    if (obj->key) obj->key[obj->n] = key;
    obj->kid[obj->n++] = v;
}

pp_val pp_string(pp_str s) { return (pp_val){ND_JSTRING, s, NULL, NULL, 0, 0}; }
pp_val pp_number(pp_str s) { return (pp_val){ND_JNUMBER, s, NULL, NULL, 0, 0}; }

pp_str pp_text_of(const pp_val *v) {
    if (v->type == ND_JSTRING || v->type == ND_JNUMBER) return v->s;
    if (v->type == ND_JTRUE) return pp_z("true");
    if (v->type == ND_JFALSE) return pp_z("false");
    return PP_EMPTY;
}

static void put_u(pp_buf *b, unsigned cp) {
    static const char hex[] = "0123456789abcdef";
    char u[6] = {'\\', 'u', hex[(cp >> 12) & 15], hex[(cp >> 8) & 15], hex[(cp >> 4) & 15], hex[cp & 15]};
    pp_put(b, u, 6);
}

/* A string as the engine writes it: the short escapes, \u00xx for other
 * control bytes, everything else (UTF-8 included) as itself. A lone
 * surrogate (kept by format/json.c as its 3-byte form ED A0..BF xx) is
 * written \udxxx, as the project's rendering does, so the text stays valid
 * UTF-8 (the engine would copy the bytes). */
static void write_string(pp_buf *b, pp_str s) {
    pp_putc(b, '"');
    for (size_t i = 0; i < s.n; i++) {
        unsigned char c = (unsigned char)s.p[i], d = i + 2 < s.n ? (unsigned char)s.p[i + 1] : 0;
        const char *e = c == '"' ? "\\\"" : c == '\\' ? "\\\\" : c == '\b' ? "\\b" : c == '\f' ? "\\f"
                      : c == '\n' ? "\\n" : c == '\r' ? "\\r" : c == '\t' ? "\\t" : NULL;
        if (e) {
            pp_put(b, e, 2);
        } else if (c < 0x20) {
            put_u(b, c);
        } else if (c == 0xed && d >= 0xa0 && d <= 0xbf) {
            put_u(b, 0xd000u | (unsigned)(d & 0x3f) << 6 | ((unsigned char)s.p[i + 2] & 0x3fu));
            i += 2;
        } else {
            pp_putc(b, (char)c);
        }
    }
    pp_putc(b, '"');
}

void pp_write(pp_buf *b, const pp_val *v) {
    switch (v->type) {
    case ND_JNULL: pp_put(b, "null", 4); return;
    case ND_JSTRING: write_string(b, v->s); return;
    case ND_JARRAY:
    case ND_JOBJECT:
        pp_putc(b, v->type == ND_JARRAY ? '[' : '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i) pp_putc(b, ',');
            if (v->type == ND_JOBJECT) write_string(b, v->key[i]), pp_putc(b, ':');
            pp_write(b, &v->kid[i]);
        }
        pp_putc(b, v->type == ND_JARRAY ? ']' : '}');
        return;
    default: pp_puts(b, pp_text_of(v)); return;
    }
}

const pp_str *pp_call_name(const pp_val *call) {
    const pp_val *n = pp_get(call, "name");
    return n && n->type == ND_JSTRING ? &n->s : NULL;
}

pp_val *pp_call_args(const pp_val *call) {
    pp_val *a = pp_get(call, "arguments");
    return a && a->type == ND_JOBJECT ? a : NULL;
}

/* ---- the tool table -------------------------------------------------------- */
/* A flat object's keyword is taken as a parameter only with a type or a
 * description. */
const char PP_SCHEMA_KEYWORDS[] =
    "$defs|$id|$ref|$schema|additionalProperties|allOf|anyOf|const|contains|default|definitions|"
    "dependentRequired|dependentSchemas|description|else|enum|examples|exclusiveMaximum|"
    "exclusiveMinimum|format|if|items|maxItems|maxLength|maximum|minItems|minLength|minimum|"
    "multipleOf|not|oneOf|pattern|patternProperties|prefixItems|properties|propertyNames|"
    "required|then|title|type|unevaluatedProperties|uniqueItems";

static const nd_jv *jv_get(const nd_jv *obj, const char *key) {
    if (!obj || obj->type != ND_JOBJECT) return NULL;
    size_t n = strlen(key);
    for (size_t i = 0; i < obj->n; i++)
        if (obj->kids[i].klen == n && memcmp(obj->kids[i].key, key, n) == 0) return &obj->kids[i];
    return NULL;
}

static pp_str jv_text(const nd_jv *v) {
    if (!v) return PP_EMPTY;
    if (v->type == ND_JTRUE) return pp_z("true");
    if (v->type == ND_JFALSE) return pp_z("false");
    return (v->type == ND_JSTRING || v->type == ND_JNUMBER) && v->len ? (pp_str){v->str, v->len} : PP_EMPTY;
}

static pp_str jv_string(const nd_jv *v) { return v && v->type == ND_JSTRING ? jv_text(v) : PP_EMPTY; }

static void param_info(pp_arena *a, const nd_jv *v, pp_param *p) {
    const nd_jv *e = jv_get(v, "enum"), *d = jv_get(v, "default"), *it = jv_get(v, "items");
    const nd_jv *g = jv_get(v, "grounded");
    if (e && e->type == ND_JARRAY && e->n) {
        p->has_enum = 1;
        p->opts = pp_alloc(a, e->n * sizeof(pp_str));
        for (size_t i = 0; p->opts && i < e->n; i++)
            if (e->kids[i].type == ND_JSTRING) p->opts[p->nopts++] = jv_text(&e->kids[i]);
    }
    if (d && d->type != ND_JNULL && d->type != ND_JARRAY && d->type != ND_JOBJECT)
        p->has_default = 1, p->def = jv_text(d);
    if (it && it->type == ND_JOBJECT) p->items_ty = pp_lower(a, jv_string(jv_get(it, "type")));
    p->desc = jv_string(jv_get(v, "description"));
    p->ty = pp_lower(a, jv_string(jv_get(v, "type")));
    p->closed = p->has_enum || jv_get(v, "const") || (g && g->type == ND_JTRUE);
}

static int listed_required(const nd_jv *req, pp_str key) {
    if (!req || req->type != ND_JARRAY) return 0;
    for (size_t i = 0; i < req->n; i++)
        if (req->kids[i].type == ND_JSTRING && pp_eq(jv_text(&req->kids[i]), key)) return 1;
    return 0;
}

/* The parameters of a "parameters" object: its "properties" (required from
 * its "required" list), or else its own members (flat form, required from
 * each member's "required": true). */
static void tool_params(pp_arena *a, const nd_jv *pm, pp_tool *t) {
    const nd_jv *props = jv_get(pm, "properties"), *req = jv_get(pm, "required");
    int nested = props && props->type == ND_JOBJECT;
    const nd_jv *src = nested ? props : pm;
    t->params = src->n ? pp_alloc(a, src->n * sizeof(pp_param)) : NULL;
    for (size_t i = 0; t->params && i < src->n; i++) {
        const nd_jv *v = &src->kids[i];
        pp_str key = v->klen ? (pp_str){v->key, v->klen} : PP_EMPTY;
        if (v->type != ND_JOBJECT) continue;
        if (!nested && pp_in(key, PP_SCHEMA_KEYWORDS) && !jv_get(v, "type") && !jv_get(v, "description"))
            continue;
        pp_param *p = &t->params[t->np++];
        memset(p, 0, sizeof *p);
        p->key = key;
        const nd_jv *r = jv_get(v, "required");
        p->required = nested ? listed_required(req, key) : (r && r->type == ND_JTRUE);
        param_info(a, v, p);
    }
}

size_t pp_parse_tools(pp_arena *a, const nd_jv *root, pp_tool **out) {
    *out = NULL;
    if (!root || root->type != ND_JARRAY || !root->n) return 0;
    pp_tool *tools = pp_alloc(a, root->n * sizeof(pp_tool));
    size_t n = 0;
    for (size_t i = 0; tools && i < root->n; i++) {
        const nd_jv *t = &root->kids[i], *fn = jv_get(t, "function");
        /* An OpenAI {"type":"function","function":{...}} wrapper. */
        if (!jv_get(t, "name") && fn && fn->type == ND_JOBJECT) t = fn;
        const nd_jv *name = jv_get(t, "name"), *pm = jv_get(t, "parameters");
        if (!name || name->type != ND_JSTRING) continue;
        pp_tool *tool = &tools[n++];
        memset(tool, 0, sizeof *tool);
        tool->name = jv_text(name);
        tool->desc = jv_string(jv_get(t, "description"));
        if (pm && pm->type == ND_JOBJECT) tool_params(a, pm, tool);
    }
    *out = tools;
    return n;
}

const pp_tool *pp_tool_last(const pp_ctx *c, pp_str name) {
    for (size_t i = c->ntools; i-- > 0;)
        if (pp_eq(c->tools[i].name, name)) return &c->tools[i];
    return NULL;
}

const pp_tool *pp_tool_first(const pp_ctx *c, pp_str name) {
    for (size_t i = 0; i < c->ntools; i++)
        if (pp_eq(c->tools[i].name, name)) return &c->tools[i];
    return NULL;
}

static const pp_param NO_PARAM = {{"", 0}, {"", 0}, {"", 0}, {"", 0}, {"", 0}, NULL, 0, 0, 0, 0, 0};

/* The parameter spec for (tool, key): the last tool of that name and its
 * last parameter of that key; all empty when either is unknown. */
const pp_param *pp_info(const pp_ctx *c, pp_str tool, pp_str key) {
    const pp_tool *t = pp_tool_last(c, tool);
    for (size_t i = t ? t->np : 0; i-- > 0;)
        if (pp_eq(t->params[i].key, key)) return &t->params[i];
    return &NO_PARAM;
}
#endif /* ND_NEEDLE3 */
